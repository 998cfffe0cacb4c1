//! `Engine.cross_validation`: rolling-origin windows over a table's series, forecast by `totoc backtest`'s code
//! (the `backtest` crate: [`Backtest::from_dataset`] plans the windows, [`backtest::run::run`] forecasts them in
//! packed engine calls, [`backtest::frame::forecast_table`] makes the table), read as `predict_df` reads tables
//! ([`crate::table`]). One engine, no baselines, metrics or reference: the table is Nixtla's
//! `cross_validation` output (`unique_id`, `ds`, `cutoff`, `y`, the model's point column and its
//! `{model}-lo-{L}` / `{model}-hi-{L}` columns). A pending Ctrl-C stops the windows' engine calls between graph
//! runs ([`Interrupt`]).

use backtest::frame::{forecast_table, run_spec, Backtest, FrameError, Model};
use backtest::run::plan_all;
use backtest::windows::WindowSpec;
use engines::request::Overrides;
use pyo3::prelude::*;

use crate::arrow::ArrowTable;
use crate::cv_windows::{cv_words, run_err, EngineCalls, Windows};
use crate::errors::{guard, invalid, Kind};
use crate::input;
use crate::interrupt::Interrupt;
use crate::table::{data_err, pythonic, TableArgs, SOURCE};
use crate::NativeEngine;
use std::path::PathBuf;

fn frame_err(e: FrameError) -> (Kind, String) {
    match e {
        FrameError::Run(e) => run_err(e),
        FrameError::Input(m) => (Kind::Invalid, cv_words(&m).replace("target= COL", "target=\"COL\"")),
    }
}

/// Reads `df`, forecasts every window of every series, and makes the table (the GIL released throughout).
pub fn cross_validation(
    py: Python<'_>,
    engine: &NativeEngine,
    df: &Bound<'_, PyAny>,
    args: &TableArgs,
    w: &Windows,
) -> PyResult<ArrowTable> {
    let engine = engine.engine()?;
    if w.horizon == 0 {
        return Err(invalid("h is 0; give the steps each window forecasts (at least 1)"));
    }
    if w.n_windows == 0 {
        return Err(invalid("n_windows is 0; give the windows per series (at least 1)"));
    }
    if w.step_size == Some(0) {
        return Err(invalid(
            "step_size is 0; give at least 1 (or None: the horizon, windows that do not overlap)",
        ));
    }
    if w.chunk == 0 {
        return Err(invalid("chunk is 0; give at least 1 (windows per engine call)"));
    }
    let max = engine.info().limits.max_context;
    let context = match w.context {
        Some(0) => return Err(invalid("context is 0; give at least 1")),
        Some(c) if c > max => {
            return Err(Kind::Limit.err(format!(
                "context={c} is more than the engine holds ({max} points); give context={max} or less"
            )))
        }
        Some(c) => c,
        None => max,
    };
    let columns = engine.info().model.capabilities().columns;
    if columns.is_some() {
        let layout = crate::table::layout(w.layout.as_deref(), columns)?;
        return crate::cv_rows::cross_validation(py, engine, df, args, w, context, layout, &w.sampling);
    }
    if w.layout.is_some() {
        return Err(invalid(
            "layout is for models whose inputs are named columns; this model's table has Nixtla's columns: \
             remove layout",
        ));
    }
    let opts = args.read_options()?;
    let (schema, batches) = crate::arrow::import(df, SOURCE)?;
    let interrupt = Interrupt::new();
    let result = py.detach(|| -> Result<_, (Kind, String)> {
        crate::errors::test_panic("cross_validation");
        let limits = engine.info().request_limits();
        // The horizon is the windows'; the reader only checks it is given. Sampling controls and parameters
        // are passed so that a family without them refuses each by name.
        let overrides = Overrides {
            horizon: Some(w.horizon),
            temperature: w.sampling.temperature,
            top_k: w.sampling.top_k,
            top_p: w.sampling.top_p,
            params: w.sampling.params.clone().unwrap_or_default(),
            ..Overrides::default()
        };
        let dataset =
            tables::from_arrow(&schema, &batches, SOURCE, &opts, &overrides, &limits).map_err(data_err)?;
        let windows = WindowSpec::new(w.n_windows, w.step_size, w.horizon);
        let bt = Backtest::from_dataset(dataset, windows).map_err(frame_err)?;
        let model_samples = engine.info().model.capabilities().samples;
        let spec = run_spec(windows, context, w.samples, w.quantiles.clone(), w.seed, w.chunk, model_samples);
        // The size check of what the run keeps (its quantiles and samples), before any runs.
        plan_all(&bt.series, &spec, &|_, _| None).map_err(run_err)?;
        interrupt.between_phases()?;
        let mut calls = EngineCalls::new(&engine, &interrupt);
        let out = backtest::run::run(
            &bt.series,
            &bt.plans,
            &spec,
            &limits,
            &mut |reqs| calls.forecast(reqs),
            &mut |_| {},
        )
        .map_err(|e| calls.error(e))?;
        interrupt.between_phases()?;
        let model = Model {
            label: &w.model,
            forecasts: out.forecasts.iter().map(Some).collect(),
            levels: &spec.quantiles,
        };
        let table = forecast_table(&bt, &[model]);
        let batch = tables::table_out::record_batch(&table, SOURCE).map_err(data_err)?;
        Ok((batch, bt.warning))
    });
    drop(batches);
    if let Some(raised) = interrupt.take() {
        return Err(raised);
    }
    let (batch, warning) = result.map_err(|(kind, message)| kind.err(message))?;
    if let Some(w) = warning {
        // `totoc backtest` prints it on stderr; here it is a warning, as predict_df's notes are.
        let text = std::ffi::CString::new(pythonic(w.trim_start_matches("note: "))).unwrap_or_default();
        let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
        PyErr::warn(py, &category, &text, 3)?;
    }
    Ok(ArrowTable::new(batch))
}

/// `Engine.cross_validation`'s native half: `totoc backtest`'s windows over `df` ([`cv`]).
#[pyfunction]
#[pyo3(signature = (engine, df, h, n_windows, *, step_size=None, context=None, samples=0, quantiles=None, seed=0,
    chunk=backtest::run::DEFAULT_CHUNK, model="totoc".to_string(), id_column=None, timestamp_column=None,
    target=None, timestamp_unit="s".to_string(), freq=None, calendar="auto".to_string(), timezone=None,
    holidays=None, layout=None, temperature=None, top_k=None, top_p=None, params=None))]
#[allow(clippy::too_many_arguments)]
#[pyo3(name = "cross_validation")]
pub fn cross_validation_py(
    py: Python<'_>,
    engine: &NativeEngine,
    df: &Bound<'_, PyAny>,
    h: usize,
    n_windows: usize,
    step_size: Option<usize>,
    context: Option<usize>,
    samples: usize,
    quantiles: Option<&Bound<'_, PyAny>>,
    seed: u64,
    chunk: usize,
    model: String,
    id_column: Option<String>,
    timestamp_column: Option<String>,
    target: Option<Vec<String>>,
    timestamp_unit: String,
    freq: Option<String>,
    calendar: String,
    timezone: Option<String>,
    holidays: Option<PathBuf>,
    layout: Option<String>,
    temperature: Option<&Bound<'_, PyAny>>,
    top_k: Option<&Bound<'_, PyAny>>,
    top_p: Option<&Bound<'_, PyAny>>,
    params: Option<&Bound<'_, PyAny>>,
) -> PyResult<ArrowTable> {
    guard(|| {
        let w = Windows {
            horizon: h,
            n_windows,
            step_size,
            context,
            samples,
            quantiles: input::levels(quantiles)?,
            seed,
            chunk,
            model,
            layout,
            sampling: crate::fields::Extra::sampling(temperature, top_k, top_p, params)?,
        };
        let args = TableArgs {
            id_column,
            timestamp_column,
            target,
            timestamp_unit,
            freq,
            calendar,
            timezone,
            holidays,
        };
        cross_validation(py, engine, df, &args, &w)
    })
}

/// `cross_validation`'s function in the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cross_validation_py, m)?)
}
