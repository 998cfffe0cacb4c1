//! Forecast data in and out of `totoc forecast`, `plot`, `backtest` and `serve` (and the Python package): the
//! tables and JSON that users have, turned into forecast requests, and the forecasts written back in the same
//! shape. File formats belong here, in their own crate so the binary and the Python bindings share one reader;
//! the engines crate sees only validated requests and answers responses.
//!
//! * In ([`read`]): JSON and JSON Lines requests ([`json`]), and tables in CSV ([`csv_in`]) or Parquet
//!   ([`parquet_in`]), long (one row per series and time, an id column) or wide (one series, one column per
//!   variate), with an optional timestamp column ([`layout`]). Rows become series ([`series`]): grouped by id,
//!   sorted by time, placed on the series' regular grid with gaps as missing points ([`timestamps`]), and
//!   validated as requests by `engines::request`.
//! * Out ([`write`]): JSON / JSON Lines responses, or long CSV / Parquet tables with the input's id and timestamp
//!   column names, the point forecast, one column per quantile and, when asked, the sample paths; future
//!   timestamps continue each series at its frequency.
//! * Back in ([`forecast_in`]): saved forecasts (JSON responses, forecast tables) read back for `totoc plot`.
//! * Errors ([`error`]): one style for every format: `FILE:LINE` (or `FILE: series ID`), the problem, the fix.
//!
//! The formats are specified in `docs/formats.md`.

pub mod arrow_in;
pub mod as_given;
pub mod axis;
pub mod calendar;
pub mod csv_in;
pub mod error;
pub mod forecast_in;
pub mod json;
pub mod layout;
pub mod parquet_in;
pub mod run;
pub mod series;
pub mod table_out;
pub mod timestamps;
pub mod write;

use std::io::Read;
use std::path::{Path, PathBuf};

use engines::request::{ForecastRequest, Limits, Overrides};

use axis::TimeAxis;
use error::{DataError, Result};
use series::{Context, RawSeries};
use timestamps::{EpochUnit, Freq};

/// File formats, in and out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON request (or response).
    Json,
    /// One JSON request (or response) per line.
    JsonLines,
    Csv,
    Parquet,
}

impl Format {
    /// From a file name: `.json`, `.jsonl` / `.ndjson`, `.csv`, `.parquet` / `.pq` (any case).
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "json" => Some(Format::Json),
            "jsonl" | "ndjson" => Some(Format::JsonLines),
            "csv" => Some(Format::Csv),
            "parquet" | "pq" => Some(Format::Parquet),
            _ => None,
        }
    }
}

/// Where data comes from or goes to: a file, or `-` for stdin / stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    File(PathBuf),
    Std,
}

impl Place {
    pub fn new(path: &Path) -> Self {
        if path.as_os_str() == "-" {
            Place::Std
        } else {
            Place::File(path.to_path_buf())
        }
    }

    /// The name used in messages.
    pub fn name(&self, std: &str) -> String {
        match self {
            Place::File(p) => p.display().to_string(),
            Place::Std => std.to_string(),
        }
    }

    /// The format: the one given, else the file's extension.
    pub fn format(&self, given: Option<Format>, flag: &str) -> Result<Format> {
        if let Some(f) = given {
            return Ok(f);
        }
        match self {
            Place::File(p) => Format::from_path(p).ok_or_else(|| {
                DataError::input(
                    p.display().to_string(),
                    "the format cannot be told from the file name",
                    format!(
                        "name it *.json, *.jsonl, *.csv or *.parquet, or pass {flag} json|jsonl|csv|parquet"
                    ),
                )
            }),
            Place::Std => Err(DataError::input(
                if flag == "--input-format" { "stdin" } else { "stdout" },
                "the format of a pipe cannot be told from a file name",
                format!("pass {flag} json|jsonl|csv|parquet"),
            )),
        }
    }
}

/// How to read tables and timestamps (the command-line flags).
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    pub id_column: Option<String>,
    pub timestamp_column: Option<String>,
    pub target_columns: Option<Vec<String>>,
    pub timestamp_unit: EpochUnit,
    /// A step forced on every series instead of inferring each one's.
    pub freq: Option<Freq>,
    /// `--calendar`, `--timezone`, `--holidays`.
    pub calendar: calendar::CalendarOptions,
}

/// The type of the input's timestamp column, so forecasts write theirs the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeKind {
    /// ISO 8601 text.
    Text,
    /// Integer epochs.
    Epoch(EpochUnit),
    /// A Parquet (Arrow) timestamp or date column of this type.
    Arrow(arrow_schema::DataType),
}

/// One series, ready to forecast.
#[derive(Debug, Clone)]
pub struct Series {
    /// Validated; `id` is the series id.
    pub request: ForecastRequest,
    /// Names the series in messages: `FILE: series ID`, `FILE:LINE` (JSON Lines) or `FILE`.
    pub at: String,
    /// One per variate: the target columns (`0`, `1`, ... for JSON).
    pub target_names: Vec<String>,
    /// Present when the input had timestamps.
    pub time: Option<TimeAxis>,
    /// The forecast steps' timestamps when the request gave them (`future_timestamps`): written instead of those
    /// that continue `time`.
    pub future: Option<Vec<timestamps::Stamp>>,
    /// The rows' own timestamps in time order, for a family that reads its rows as given ([`as_given`]; empty
    /// otherwise, and without timestamps): a backtest cuts such a series at a cutoff's timestamp and labels its
    /// forecast steps with the rows that follow it.
    pub rows: Vec<timestamps::Stamp>,
}

/// The input's id and timestamp columns: the forecast tables use the same names and types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Columns {
    /// `None` when the input has no series ids.
    pub id: Option<String>,
    /// `None` when the input has no timestamps.
    pub time: Option<(String, TimeKind)>,
}

/// Every series of an input.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub columns: Columns,
    pub series: Vec<Series>,
}

impl Dataset {
    /// The calendars of the series with timestamps, each with how many series follow it, in order of first
    /// appearance (the `calendar:` line on stderr).
    pub fn calendars(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for text in self.series.iter().filter_map(|s| s.time.as_ref()).map(TimeAxis::calendar_text) {
            match out.iter_mut().find(|(t, _)| *t == text) {
                Some((_, n)) => *n += 1,
                None => out.push((text, 1)),
            }
        }
        out
    }

    /// `calendar: weekdays Mon–Fri (3 series), continuous (1 series)`, or `None` without timestamps.
    pub fn calendar_line(&self) -> Option<String> {
        let cals = self.calendars();
        if cals.is_empty() {
            return None;
        }
        let parts: Vec<String> = if cals.len() == 1 && self.series.len() == 1 {
            vec![cals[0].0.clone()]
        } else {
            cals.iter().map(|(t, n)| format!("{t} ({n} series)")).collect()
        };
        Some(format!("calendar: {}", parts.join("; ")))
    }

    /// Context points of all series (grid points, missing ones included).
    pub fn points(&self) -> usize {
        self.series.iter().map(|s| s.request.context_len()).sum()
    }
}

/// Reads every series of `input` (a file, or stdin) in `format` (default: the file's extension).
pub fn read(
    input: &Place,
    format: Option<Format>,
    opts: &ReadOptions,
    overrides: &Overrides,
    limits: &Limits,
) -> Result<Dataset> {
    let source = input.name("stdin");
    let format = input.format(format, "--input-format")?;
    let bytes = match input {
        Place::File(p) => std::fs::read(p).map_err(|err| DataError::Io { path: source.clone(), err })?,
        Place::Std => {
            let mut buf = Vec::new();
            std::io::stdin()
                .lock()
                .read_to_end(&mut buf)
                .map_err(|err| DataError::Io { path: source.clone(), err })?;
            buf
        }
    };
    parse(bytes, format, &source, opts, overrides, limits)
}

/// [`read`] on bytes already in memory; `source` names them in messages.
pub fn parse(
    bytes: Vec<u8>,
    format: Format,
    source: &str,
    opts: &ReadOptions,
    overrides: &Overrides,
    limits: &Limits,
) -> Result<Dataset> {
    let (layout, kind, rows) = match format {
        Format::Json | Format::JsonLines => {
            return parse_json(&bytes, format, source, opts, overrides, limits, &json::Bounds::NONE)
        }
        Format::Csv => csv_in::read(&bytes, source, opts, &limits.shape)?,
        Format::Parquet => parquet_in::read(bytes::Bytes::from(bytes), source, opts, limits.shape.columns)?,
    };
    dataset(layout, kind, rows, source, opts, overrides, limits)
}

/// [`parse`] of JSON or JSON Lines bytes (any other format is a JSON document), decoded within `bounds` (a
/// server's bytes budget and per-key limits, see [`json`]); the bytes are borrowed, not copied.
pub fn parse_json(
    bytes: &[u8],
    format: Format,
    source: &str,
    opts: &ReadOptions,
    overrides: &Overrides,
    limits: &Limits,
    bounds: &json::Bounds<'_>,
) -> Result<Dataset> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| DataError::input(source, "the file is not UTF-8 text", "save it as UTF-8 JSON"))?;
    parse_json_text(text, format, source, opts, overrides, limits, bounds)
}

/// [`parse_json`] of text already checked to be UTF-8 (a server checks its body once, before counting its
/// requests).
pub fn parse_json_text(
    text: &str,
    format: Format,
    source: &str,
    opts: &ReadOptions,
    overrides: &Overrides,
    limits: &Limits,
    bounds: &json::Bounds<'_>,
) -> Result<Dataset> {
    let lines = format == Format::JsonLines;
    let (series, kind) = json::read_bounded(text, lines, source, opts, overrides, limits, bounds)?;
    let has_id = series.iter().any(|s| s.request.id.is_some());
    let has_time = series.iter().any(|s| s.time.is_some());
    let columns = Columns {
        id: has_id.then(|| "id".to_string()),
        time: has_time.then(|| ("timestamp".to_string(), kind)),
    };
    Ok(Dataset { columns, series })
}

/// [`parse`] on an Arrow table already in memory (its schema and record batches), read as a Parquet table is;
/// `source` names it in messages.
pub fn from_arrow(
    schema: &arrow_schema::Schema,
    batches: &[arrow_array::RecordBatch],
    source: &str,
    opts: &ReadOptions,
    overrides: &Overrides,
    limits: &Limits,
) -> Result<Dataset> {
    let (layout, kind, rows) = arrow_in::read(schema, batches, source, opts, limits.shape.columns)?;
    dataset(layout, kind, rows, source, opts, overrides, limits)
}

/// The series of a table's rows, validated as requests.
fn dataset(
    layout: layout::Layout,
    kind: TimeKind,
    rows: series::Collector,
    source: &str,
    opts: &ReadOptions,
    overrides: &Overrides,
    limits: &Limits,
) -> Result<Dataset> {
    let target_names = layout.target_names();
    // A timestamp column with an IANA zone (pandas `tz=`) reads its calendars in that zone unless --timezone says.
    let mut calendar = opts.calendar.clone();
    if calendar.zone.is_none() {
        calendar.zone = parquet_in::column_zone(&kind);
    }
    let cx = Context {
        source,
        target_names: &target_names,
        freq: opts.freq,
        calendar: &calendar,
        overrides,
        limits,
    };
    let series = rows.series.into_iter().map(|raw| assemble(raw, &cx)).collect::<Result<Vec<_>>>()?;
    let columns = Columns {
        id: layout.id_name().map(str::to_string),
        time: layout.time_name().map(|n| (n.to_string(), kind)),
    };
    Ok(Dataset { columns, series })
}

/// A table series as the engine's request: placed on its grid ([`series::assemble`]), or, for a family without
/// missing points, its rows as given ([`as_given::assemble`]: a gap is not a missing point).
fn assemble(raw: RawSeries, cx: &Context<'_>) -> Result<Series> {
    let at = series::series_at(cx.source, raw.id.as_ref());
    match cx.limits.shape.missing_points {
        true => series::assemble(raw, cx, at),
        false => as_given::assemble(raw, cx, at),
    }
}
