//! `Engine.cross_validation` on an engine whose family reads named columns with each row's timestamp (its rows as
//! given, `Capabilities::columns`): each series' windows are cut over its rows as given (a window's cutoff is a
//! row; its context the rows at or before it, the most recent `context` of them; its forecast steps the clocks of
//! the `h` rows after it), by the `backtest` crate's code ([`backtest::windows::plan`], [`backtest::rows`],
//! [`backtest::run::run_requests`]). The forecasts are the family's forecast table ([`tables::write`], wide by
//! default, long by `layout="long"`), one block of rows per window, with a `cutoff` column after the timestamp
//! column (the cutoff row's timestamp, of the timestamp column's type).

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{Field, Schema};
use backtest::frame::run_spec;
use backtest::run::{check_kept, RunError};
use backtest::windows::{plan, Window, WindowSpec};
use engines::engine::Engine;
use engines::request::{ForecastRequest, ForecastResponse, Overrides, RequestId};
use pyo3::prelude::*;
use tables::write::Layout;
use tables::{Dataset, Series};

use crate::arrow::ArrowTable;
use crate::cv_windows::{run_err, EngineCalls, Windows};
use crate::errors::Kind;
use crate::fields::Extra;
use crate::interrupt::Interrupt;
use crate::table::{data_err, TableArgs, SOURCE};

/// Reads `df` as the family reads it, forecasts every window of every series, and makes the table (the GIL
/// released throughout). `context`: the rows each window holds at most.
#[allow(clippy::too_many_arguments)]
pub fn cross_validation(
    py: Python<'_>,
    engine: Arc<Engine>,
    df: &Bound<'_, PyAny>,
    args: &TableArgs,
    w: &Windows,
    context: usize,
    layout: Layout,
    sampling: &Extra,
) -> PyResult<ArrowTable> {
    let opts = args.read_options()?;
    let (schema, batches) = crate::arrow::import(df, SOURCE)?;
    let interrupt = Interrupt::new();
    let result = py.detach(|| -> Result<_, (Kind, String)> {
        let limits = engine.info().request_limits();
        let windows = WindowSpec::new(w.n_windows, w.step_size, w.horizon);
        let model_samples = engine.info().model.capabilities().samples;
        let spec = run_spec(windows, context, w.samples, w.quantiles.clone(), w.seed, w.chunk, model_samples);
        let overrides = Overrides {
            horizon: Some(w.horizon),
            samples: Some(spec.samples),
            quantiles: Some(spec.quantiles.clone()),
            seed: Some(spec.seed),
            temperature: sampling.temperature,
            top_k: sampling.top_k,
            top_p: sampling.top_p,
            params: sampling.params.clone().unwrap_or_default(),
            ..Overrides::default()
        };
        let dataset =
            tables::from_arrow(&schema, &batches, SOURCE, &opts, &overrides, &limits).map_err(data_err)?;
        let ids = series_ids(&dataset);
        let plans = plans(&dataset, &ids, &windows)?;
        // The size check of what the run keeps: every column's forecast of every window.
        let total: u64 = plans.iter().map(|p| p.len() as u64).sum();
        let columns = dataset.series.iter().map(|s| s.request.target.len() as u64).max().unwrap_or(1);
        check_kept(total, &spec, columns).map_err(run_err)?;
        interrupt.between_phases()?;
        let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let mut build = |s: usize, win: &Window| window_request(&dataset.series[s], &ids[s], win, context);
        let mut kept: Vec<ForecastResponse> = Vec::new();
        let mut calls = EngineCalls::new(&engine, &interrupt);
        backtest::run::run_requests(
            &id_refs,
            &plans,
            &spec,
            &mut build,
            0,
            &mut |reqs| {
                let results = calls.forecast(reqs);
                // every column of each answer, for the table (the run keeps the first one's)
                kept.extend(results.iter().filter_map(|r| r.as_ref().ok().cloned()));
                results
            },
            &mut |_| {},
        )
        .map_err(|e| calls.error(e))?;
        interrupt.between_phases()?;
        let point = engine.info().model.point_forecast();
        table(&dataset, &plans, kept, point, &layout)
    });
    drop(batches);
    if let Some(raised) = interrupt.take() {
        return Err(raised);
    }
    let batch = result.map_err(|(kind, message)| kind.err(message))?;
    Ok(ArrowTable::new(batch))
}

/// Each series' id as text (`series_<i>` without an id column), for messages and window ids.
fn series_ids(dataset: &Dataset) -> Vec<String> {
    let id = |(i, s): (usize, &Series)| {
        s.request.id.as_ref().map_or_else(|| format!("series_{i}"), ToString::to_string)
    };
    dataset.series.iter().enumerate().map(id).collect()
}

/// Every series' windows over its rows; a series without timestamps cannot be cut at a cutoff's timestamp.
fn plans(
    dataset: &Dataset,
    ids: &[String],
    windows: &WindowSpec,
) -> Result<Vec<Vec<Window>>, (Kind, String)> {
    dataset
        .series
        .iter()
        .zip(ids)
        .map(|(s, id)| {
            if s.rows.is_empty() {
                return Err((
                    Kind::Invalid,
                    format!(
                        "{}: this model's windows are cut at each cutoff's timestamp over the rows as given, and \
                         the series has no timestamps; give df a timestamp column (timestamp_column=\"...\")",
                        s.at
                    ),
                ));
            }
            plan(id, s.rows.len(), windows, &|_| None).map_err(|e| run_err(e.into()))
        })
        .collect()
}

/// The request of window `win` of `series`: its rows at or before the cutoff, and the next rows' clocks as the
/// forecast steps.
fn window_request(
    series: &Series,
    id: &str,
    win: &Window,
    context: usize,
) -> Result<ForecastRequest, RunError> {
    let full = &series.request;
    let future = match full.timestamps.is_empty() {
        true => Some(Vec::new()),
        false => backtest::rows::next_rows(full, win.cutoff, win.horizon),
    };
    let future = future.ok_or_else(|| RunError::Request {
        series: id.to_string(),
        window: win.index + 1,
        cutoff: win.cutoff,
        message: "the rows end before the window's last step".to_string(),
        refused: None,
    })?;
    let window_id = RequestId::Str(format!("{id}@{}", win.cutoff));
    Ok(backtest::rows::cut(full, window_id, win.history_len(), context, win.horizon, future))
}

/// The forecast table of the windows (`kept`: one answer per window, in plan order): the family's table in
/// `layout`, a series per window labelled with the rows after its cutoff, and the `cutoff` column.
fn table(
    dataset: &Dataset,
    plans: &[Vec<Window>],
    mut kept: Vec<ForecastResponse>,
    point: &str,
    layout: &Layout,
) -> Result<RecordBatch, (Kind, String)> {
    let windows: Vec<(usize, &Window)> =
        plans.iter().enumerate().flat_map(|(s, p)| p.iter().map(move |w| (s, w))).collect();
    if windows.len() != kept.len() {
        return Err((Kind::Other, format!("{} forecasts for {} windows", kept.len(), windows.len())));
    }
    let mut series = Vec::with_capacity(windows.len());
    let mut cutoffs = Vec::new();
    for ((s, w), r) in windows.iter().zip(&mut kept) {
        let src = &dataset.series[*s];
        r.id = src.request.id.clone();
        r.samples = None;
        series.push(Series {
            request: ForecastRequest { id: src.request.id.clone(), ..ForecastRequest::default() },
            at: src.at.clone(),
            target_names: src.target_names.clone(),
            time: None,
            future: Some(src.rows[w.actual_range()].to_vec()),
            rows: Vec::new(),
        });
        let per_window = match layout {
            Layout::Wide { .. } => w.horizon,
            Layout::Long => w.horizon * src.target_names.len(),
        };
        cutoffs.extend(std::iter::repeat_n(Some(&src.rows[w.cutoff]), per_window));
    }
    let out = Dataset { columns: dataset.columns.clone(), series };
    let batch = tables::write::record_batch(&out, &kept, point, layout).map_err(data_err)?;
    let Some((time_name, kind)) = &dataset.columns.time else {
        return Err((Kind::Other, "the windows' table has no timestamp column".to_string()));
    };
    if cutoffs.len() != batch.num_rows() {
        return Err((Kind::Other, format!("{} cutoffs for {} rows", cutoffs.len(), batch.num_rows())));
    }
    let cutoff: ArrayRef = tables::write::stamp_column(kind, &cutoffs);
    let schema = batch.schema();
    let at = schema.index_of(time_name).map_err(|e| (Kind::Other, e.to_string()))? + 1;
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut columns = batch.columns().to_vec();
    fields.insert(at, Field::new("cutoff", cutoff.data_type().clone(), true));
    columns.insert(at, cutoff);
    let schema = Arc::new(Schema::new(fields).with_metadata(schema.metadata().clone()));
    RecordBatch::try_new(schema, columns).map_err(|e| (Kind::Other, e.to_string()))
}
