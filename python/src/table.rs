//! `Engine.predict_df`: a table in (any Arrow stream, [`crate::arrow`]), forecasts out as a table, by the code of
//! `totoc forecast` on a table: the `tables` crate reads the record batches as it reads a Parquet file's
//! ([`tables::from_arrow`]), [`tables::run`] admits and forecasts the series, [`tables::write::record_batch`]
//! makes the forecast table. So the numbers, column names and types, future timestamps and calendars, notes and
//! error messages are the CLI's; messages name the keyword arguments where the CLI names its flags
//! ([`pythonic`]). The GIL is released from reading the rows to building the output table; a pending Ctrl-C
//! stops the engine between graph runs ([`Interrupt`]).

use std::sync::Arc;

use arrow_array::{ArrayRef, BooleanArray, RecordBatch};
use arrow_schema::{Field, Schema};
use engines::request::{ForecastResponse, Overrides};
use pyo3::prelude::*;
use tables::calendar::{CalendarMode, CalendarOptions};
use tables::error::DataError;
use tables::timestamps::{parse_freq, EpochUnit};
use tables::write::Layout;
use tables::ReadOptions;

use crate::arrow::ArrowTable;
use crate::errors::{guard, invalid, Kind};
use crate::input;
use crate::interrupt::Interrupt;
use crate::NativeEngine;
use std::path::PathBuf;

/// How `predict_df` names the table in messages (where the CLI names the file).
pub const SOURCE: &str = "df";

/// The keyword arguments of `predict_df` (and `cross_validation`) that say how to read the table.
pub struct TableArgs {
    pub id_column: Option<String>,
    pub timestamp_column: Option<String>,
    /// `None`: the target columns `totoc forecast` recognises.
    pub target: Option<Vec<String>>,
    pub timestamp_unit: String,
    pub freq: Option<String>,
    pub calendar: String,
    pub timezone: Option<String>,
    pub holidays: Option<std::path::PathBuf>,
}

impl TableArgs {
    /// The CLI's [`ReadOptions`] for these arguments; checked before the table is read.
    pub fn read_options(&self) -> PyResult<ReadOptions> {
        let timestamp_unit = match self.timestamp_unit.as_str() {
            "s" => EpochUnit::Seconds,
            "ms" => EpochUnit::Millis,
            "us" => EpochUnit::Micros,
            "ns" => EpochUnit::Nanos,
            other => {
                return Err(invalid(format!(
                    "timestamp_unit={other:?} is not a unit; give \"s\", \"ms\", \"us\" or \"ns\""
                )))
            }
        };
        let mode = match self.calendar.as_str() {
            "auto" => CalendarMode::Auto,
            "continuous" => CalendarMode::Continuous,
            "weekdays" => CalendarMode::Weekdays,
            other => {
                return Err(invalid(format!(
                    "calendar={other:?} is not a calendar; give \"auto\", \"continuous\" or \"weekdays\""
                )))
            }
        };
        let calendar = CalendarOptions::from_flags(mode, self.timezone.as_deref(), self.holidays.as_deref())
            .map_err(|e| invalid(pythonic(&e)))?;
        let freq = self.freq.as_deref().map(parse_freq).transpose().map_err(|e| invalid(pythonic(&e)))?;
        if self.target.as_ref().is_some_and(Vec::is_empty) {
            return Err(invalid(
                "target is empty; name the target column (e.g. target=\"y\") or a list of them",
            ));
        }
        Ok(ReadOptions {
            id_column: self.id_column.clone(),
            timestamp_column: self.timestamp_column.clone(),
            target_columns: self.target.clone(),
            timestamp_unit,
            freq,
            calendar,
        })
    }
}

/// What a `predict_df` call asks the engine for.
pub struct Asked {
    pub horizon: usize,
    pub samples: Option<usize>,
    pub quantiles: Option<Vec<f64>>,
    pub seed: Option<u64>,
    pub strict_context: bool,
    pub write_samples: bool,
    /// `"long"`, `"wide"`, or `None`: the family's default ([`tables::write::Layout::for_family`]).
    pub layout: Option<String>,
    /// The sampling controls and family parameters of a family that takes them (`None` / empty: the requests'
    /// defaults); a family that does not refuses each by name.
    pub sampling: crate::fields::Extra,
}

impl Asked {
    /// The table layout asked for, checked before any work.
    fn layout(&self, columns: Option<&[exporter::registry::family::InputColumn]>) -> PyResult<Layout> {
        layout(self.layout.as_deref(), columns)
    }
}

/// The table layout `asked` (`"long"`, `"wide"`, or `None`: the family's default,
/// [`tables::write::Layout::for_family`]) for a family whose input columns are `columns`.
pub fn layout(
    asked: Option<&str>,
    columns: Option<&[exporter::registry::family::InputColumn]>,
) -> PyResult<Layout> {
    match asked {
        None => Ok(Layout::for_family(columns, false)),
        Some("long") => Ok(Layout::Long),
        Some("wide") => Ok(Layout::Wide {
            columns: columns.unwrap_or_default().iter().map(|c| c.name.to_string()).collect(),
        }),
        Some(other) => Err(invalid(format!(
            "layout={other:?} is not a table layout; give \"long\" (a row per series, column and step), \
             \"wide\" (a row per series and step) or None (the model's default)"
        ))),
    }
}

/// The forecast table and the lines `totoc forecast` prints on stderr (calendar, truncation and interpolation
/// notes), for the caller to show.
#[pyclass(module = "totoc._native", frozen)]
pub struct TableResult {
    #[pyo3(get)]
    table: Py<ArrowTable>,
    #[pyo3(get)]
    calendar: Option<String>,
    #[pyo3(get)]
    notes: Vec<String>,
}

/// An error of the table path as the exception of its kind, with the message in Python's words.
pub fn data_err(e: DataError) -> (Kind, String) {
    let kind = match &e {
        DataError::Request(e) => Kind::of(e),
        DataError::Input { .. } => Kind::Invalid,
        DataError::Io { .. } => Kind::Other,
    };
    (kind, pythonic(&e.to_string()))
}

/// The CLI's flags in a message, as the keyword arguments that set the same thing in Python.
pub fn pythonic(message: &str) -> String {
    const FLAGS: [(&str, &str); 10] = [
        ("--id-column", "id_column="),
        ("--timestamp-column", "timestamp_column="),
        ("--target-columns", "target="),
        ("--timestamp-unit", "timestamp_unit="),
        ("--freq", "freq="),
        ("--calendar", "calendar="),
        ("--timezone", "timezone="),
        ("--holidays", "holidays="),
        ("--strict-context", "strict_context=True"),
        ("--horizon", "prediction_length="),
    ];
    FLAGS.iter().fold(message.to_string(), |m, (flag, arg)| {
        // `--timezone: ...` (the flag as a label) becomes `timezone: ...`
        let label = arg.trim_end_matches('=').trim_end_matches("=True");
        m.replace(&format!("{flag}:"), &format!("{label}:")).replace(flag, arg)
    })
}

/// Reads `df`'s table, forecasts every series, and makes the forecast table (the GIL released throughout).
pub fn predict(
    py: Python<'_>,
    engine: &NativeEngine,
    df: &Bound<'_, PyAny>,
    args: &TableArgs,
    asked: &Asked,
) -> PyResult<TableResult> {
    let engine = engine.engine()?;
    let opts = args.read_options()?;
    let layout = asked.layout(engine.info().model.capabilities().columns)?;
    let (schema, batches) = crate::arrow::import(df, SOURCE)?;
    let overrides = Overrides {
        horizon: Some(asked.horizon),
        samples: asked.samples,
        quantiles: asked.quantiles.clone(),
        seed: asked.seed,
        strict_context: asked.strict_context.then_some(true),
        temperature: asked.sampling.temperature,
        top_k: asked.sampling.top_k,
        top_p: asked.sampling.top_p,
        params: asked.sampling.params.clone().unwrap_or_default(),
    };
    let write_samples = asked.write_samples;
    let interrupt = Interrupt::new();
    let result = py.detach(|| -> Result<_, (Kind, String)> {
        crate::errors::test_panic("predict_df");
        let limits = engine.info().request_limits();
        let mut dataset =
            tables::from_arrow(&schema, &batches, SOURCE, &opts, &overrides, &limits).map_err(data_err)?;
        let calendar = dataset.calendar_line();
        let mut notes = Vec::new();
        let parts = |e: engines::Error| (Kind::of(&e), pythonic(&e.to_string()));
        notes.extend(tables::run::admit(&engine, &mut dataset).map_err(parts)?.map(|n| pythonic(&n)));
        interrupt.between_phases()?;
        let (mut responses, _) = interrupt
            .run(|opts| tables::run::forecast_with(&engine, &dataset, opts, |_| {}))
            .map_err(|e| (Kind::of(&e.error), pythonic(&e.to_string())))?;
        interrupt.between_phases()?;
        if !write_samples {
            responses.iter_mut().for_each(|r| r.samples = None);
        }
        notes.extend(tables::run::interpolation_note(&engine, &responses).map(str::to_string));
        let point = engine.info().model.point_forecast();
        let batch = tables::write::record_batch(&dataset, &responses, point, &layout).map_err(data_err)?;
        let wide = matches!(layout, Layout::Wide { .. });
        let batch = with_truncation(batch, &responses, wide).map_err(|e| (Kind::Other, e))?;
        Ok((batch, calendar, notes))
    });
    // The input's buffers are released here, with the GIL (a producer may hold Python objects).
    drop(batches);
    if let Some(raised) = interrupt.take() {
        return Err(raised);
    }
    let (batch, calendar, notes) = result.map_err(|(kind, message)| kind.err(message))?;
    Ok(TableResult { table: Py::new(py, ArrowTable::new(batch))?, calendar, notes })
}

/// `batch` with a last column `context_truncated`: per row, whether its series had more points than the engine's
/// context (only the most recent were used). A table has `variates × horizon` rows per series (`wide`: `horizon`),
/// in order.
fn with_truncation(
    batch: RecordBatch,
    responses: &[ForecastResponse],
    wide: bool,
) -> Result<RecordBatch, String> {
    let flags: BooleanArray = responses
        .iter()
        .flat_map(|r| {
            let rows = match wide {
                true => r.point().first().map_or(0, Vec::len),
                false => r.point().iter().map(Vec::len).sum::<usize>(),
            };
            std::iter::repeat_n(Some(r.context_truncated.is_some()), rows)
        })
        .collect();
    if flags.len() != batch.num_rows() {
        return Err(format!(
            "the forecast table has {} rows for {} forecast steps",
            batch.num_rows(),
            flags.len()
        ));
    }
    let schema = batch.schema();
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("context_truncated", arrow_schema::DataType::Boolean, false));
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns.push(Arc::new(flags));
    let schema = Arc::new(Schema::new(fields).with_metadata(schema.metadata().clone()));
    RecordBatch::try_new(schema, columns).map_err(|e| e.to_string())
}

/// `Engine.predict_df`'s native half: `df` (any Arrow stream) forecast by `totoc forecast`'s code ([`table`]).
#[pyfunction]
#[pyo3(signature = (engine, df, horizon, *, quantiles=None, samples=None, seed=None, id_column=None,
    timestamp_column=None, target=None, timestamp_unit="s".to_string(), freq=None, calendar="auto".to_string(),
    timezone=None, holidays=None, strict_context=false, write_samples=false, layout=None, temperature=None,
    top_k=None, top_p=None, params=None))]
#[allow(clippy::too_many_arguments)]
fn predict_table(
    py: Python<'_>,
    engine: &NativeEngine,
    df: &Bound<'_, PyAny>,
    horizon: &Bound<'_, PyAny>,
    quantiles: Option<&Bound<'_, PyAny>>,
    samples: Option<&Bound<'_, PyAny>>,
    seed: Option<&Bound<'_, PyAny>>,
    id_column: Option<String>,
    timestamp_column: Option<String>,
    target: Option<Vec<String>>,
    timestamp_unit: String,
    freq: Option<String>,
    calendar: String,
    timezone: Option<String>,
    holidays: Option<PathBuf>,
    strict_context: bool,
    write_samples: bool,
    layout: Option<String>,
    temperature: Option<&Bound<'_, PyAny>>,
    top_k: Option<&Bound<'_, PyAny>>,
    top_p: Option<&Bound<'_, PyAny>>,
    params: Option<&Bound<'_, PyAny>>,
) -> PyResult<TableResult> {
    guard(|| {
        let as_usize = |v: u64, name: &str| {
            usize::try_from(v).map_err(|_| invalid(format!("`{name}` is {v}: too large for this machine")))
        };
        let asked = Asked {
            horizon: as_usize(input::count(horizon, "prediction_length")?, "prediction_length")?,
            samples: match samples.filter(|s| !s.is_none()) {
                Some(s) => Some(as_usize(input::count(s, "samples")?, "samples")?),
                None => None,
            },
            quantiles: input::levels(quantiles)?,
            seed: seed.filter(|s| !s.is_none()).map(|s| input::count(s, "seed")).transpose()?,
            strict_context,
            write_samples,
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
        predict(py, engine, df, &args, &asked)
    })
}

/// `predict_df`'s function and the table classes of the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(predict_table, m)?)?;
    m.add_class::<ArrowTable>()?;
    m.add_class::<TableResult>()?;
    Ok(())
}
