//! Forecasts out: JSON / JSON Lines responses, or CSV / Parquet tables ([`to_bytes`], [`to_bytes_laid_out`]),
//! written atomically to a file or to stdout ([`emit`]).
//!
//! JSON is the response format of `docs/formats.md` plus `timestamps` (the forecast steps' timestamps) when the
//! input had them. A table comes in one of two [`Layout`]s. **Long**: one row per (series, variate, step): the
//! input's id column (when it had one), its timestamp column holding the future timestamps (or `step`, 1-based,
//! without timestamps), `target_name` when series have several target columns, `model` (the family's manifest
//! name, e.g. `toto-1.0`), the point forecast (`mean`, or `median` on Toto 2.0 engines), one column per quantile
//! level named `q` + the level's shortest decimal (`q0.1`, `q0.05`), and `sample_0`... when the responses carry
//! sample paths. **Wide** (families whose inputs are named columns): one row per (series, step): the id, timestamp
//! and `model` columns, then the point forecast under each column's name, then `<column>_q<level>` per column and
//! level, then `<column>_sample_<i>` per column and path.

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use arrow_array::builder::{Float32Builder, Int64Builder, StringBuilder};
use arrow_array::{
    ArrayRef, Date32Array, Date64Array, RecordBatch, TimestampMicrosecondArray, TimestampMillisecondArray,
    TimestampNanosecondArray, TimestampSecondArray,
};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use engines::request::{ForecastResponse, RequestId};
use exporter::registry::family::InputColumn;
use serde::Serialize;

use super::error::{DataError, Result};
use super::timestamps::{Stamp, StampStyle};
use super::{Dataset, Format, Place, TimeKind};

/// The column name of quantile level `q`: `q0.1`, `q0.05`, `q0.975`.
pub fn quantile_column(q: f64) -> String {
    format!("q{q}")
}

/// How a forecast table lays out a series' forecast (`docs/formats.md`, "Forecast tables").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// One row per (series, variate, step) with one point column (`mean` / `median`): every family's, the
    /// default of families with unnamed variates.
    Long,
    /// One row per (series, step) with the point forecast under each column's name: the default of families
    /// whose inputs are named columns. `columns`: the column order (the family's input columns); a series' row
    /// of another name follows them, in order of first appearance.
    Wide { columns: Vec<String> },
}

impl Layout {
    /// The default layout of a family whose input columns are `columns` (`Capabilities::columns`): wide for
    /// named columns, long otherwise; `long` asks for the long layout whatever the family.
    pub fn for_family(columns: Option<&[InputColumn]>, long: bool) -> Layout {
        match columns {
            Some(named) if !long => {
                Layout::Wide { columns: named.iter().map(|c| c.name.to_string()).collect() }
            }
            _ => Layout::Long,
        }
    }
}

/// Serialises the forecasts of `dataset`'s series (`responses[i]` answers `dataset.series[i]`), tables in the long
/// layout. `point` names the point forecast column of tables (`exporter::registry::Family::point_forecast`);
/// `model`, the engine family's manifest name (`Family::as_str`), is written in every JSON response (`model`) and
/// table row (the `model` column) — `totoc forecast` and the server always name it.
pub fn to_bytes(
    dataset: &Dataset,
    responses: &[ForecastResponse],
    format: Format,
    point: &str,
    model: Option<&str>,
) -> Result<Vec<u8>> {
    to_bytes_laid_out(dataset, responses, format, point, model, &Layout::Long)
}

/// [`to_bytes`] with tables in `layout` (JSON is the same in both).
pub fn to_bytes_laid_out(
    dataset: &Dataset,
    responses: &[ForecastResponse],
    format: Format,
    point: &str,
    model: Option<&str>,
    layout: &Layout,
) -> Result<Vec<u8>> {
    assert_eq!(dataset.series.len(), responses.len(), "one response per series");
    let rows = Rows { model, ..Rows::new(dataset, responses, layout)? };
    match format {
        Format::Json if responses.len() != 1 => Err(too_many_for_json("output", responses.len())),
        Format::Json | Format::JsonLines => json(&rows),
        Format::Csv => csv(&rows, point),
        Format::Parquet => parquet(&rows, point),
    }
}

/// The error for several forecasts sent to a one-document JSON output (checked before forecasting too).
pub fn too_many_for_json(output: &str, count: usize) -> DataError {
    DataError::input(
        output,
        format!("{count} forecasts do not fit one JSON document"),
        "write them as JSON Lines (*.jsonl or --output-format jsonl), CSV or Parquet",
    )
}

/// Writes `bytes` to a file atomically (temp file, then rename) or to stdout.
pub fn emit(place: &Place, format: Format, bytes: &[u8]) -> Result<()> {
    match place {
        Place::File(path) => exporter::fsutil::write_atomic(path, bytes).map_err(|e| DataError::Io {
            path: path.display().to_string(),
            err: std::io::Error::other(e.to_string()),
        }),
        Place::Std => {
            let mut out = std::io::stdout().lock();
            if format == Format::Parquet && out.is_terminal() {
                return Err(DataError::input(
                    "stdout",
                    "Parquet is binary and stdout is a terminal",
                    "pass --output FILE.parquet, or pipe the output into a file or program",
                ));
            }
            match out.write_all(bytes).and_then(|()| out.flush()) {
                // a closed pipe (`| head`) is the reader's choice, not an error
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(DataError::Io { path: "stdout".into(), err: e })
                }
                _ => Ok(()),
            }
        }
    }
}

/// The forecasts with their future timestamps.
struct Rows<'a> {
    dataset: &'a Dataset,
    responses: &'a [ForecastResponse],
    /// Per series: the forecast steps' timestamps, when the series has a time axis.
    future: Vec<Option<Vec<Stamp>>>,
    /// The model that made the forecasts: the JSON `model` field and the tables' `model` column (none in the
    /// Python package's frames).
    model: Option<&'a str>,
    /// Wide layout: the point columns' names, in order, and per series the response row of each (`None`: the
    /// series has no such column). `None`: the long layout.
    wide: Option<Wide>,
}

/// The columns of a wide table.
struct Wide {
    names: Vec<String>,
    /// `[series][name]`: the response row under that name.
    rows: Vec<Vec<Option<usize>>>,
}

impl Wide {
    fn new(dataset: &Dataset, order: &[String]) -> Wide {
        let series = &dataset.series;
        let mut names: Vec<String> =
            order.iter().filter(|c| series.iter().any(|s| s.target_names.contains(c))).cloned().collect();
        for name in series.iter().flat_map(|s| &s.target_names) {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        let rows = series
            .iter()
            .map(|s| names.iter().map(|n| s.target_names.iter().position(|t| t == n)).collect())
            .collect();
        Wide { names, rows }
    }
}

/// One row of a table: (series, response row, step); the response row is `None` in the wide layout (every row
/// of the series is on the table row).
type Key = (usize, Option<usize>, usize);

/// What a value column of a table holds.
#[derive(Clone, Copy)]
enum Cell {
    Point,
    Quantile(f64),
    Sample(usize),
}

/// A value column: its name, what it holds, and (wide layout) the index of its point column in `Wide::names`.
struct ValueColumn {
    name: String,
    cell: Cell,
    wide: Option<usize>,
}

impl<'a> Rows<'a> {
    fn new(dataset: &'a Dataset, responses: &'a [ForecastResponse], layout: &Layout) -> Result<Self> {
        // The writers index a series' names and stamps by the response's rows and steps: an answer of another
        // shape (a family that answers other rows than it was given) is an error here, not a panic there.
        for (s, r) in dataset.series.iter().zip(responses) {
            let (rows, names) = (r.point().len(), s.target_names.len());
            if rows != names {
                return Err(DataError::at(
                    &s.at,
                    format!("the forecast has {rows} rows for the series' {names} target columns (an engine fault)"),
                ));
            }
            let horizon = r.point().first().map_or(0, Vec::len);
            if let Some(given) = s.future.as_ref().filter(|f| f.len() != horizon) {
                return Err(DataError::at(
                    &s.at,
                    format!(
                        "the forecast has {horizon} steps for the {} future timestamps given",
                        given.len()
                    ),
                ));
            }
        }
        let future = dataset
            .series
            .iter()
            .zip(responses)
            .map(|(s, r)| {
                let horizon = r.point().first().map_or(0, Vec::len);
                match (&s.future, &s.time) {
                    // given by the request (its count is the horizon: checked when it was read)
                    (Some(given), _) => Ok(Some(given.clone())),
                    (None, None) => Ok(None),
                    // Checked when the series was read (`series::check_future`).
                    (None, Some(axis)) => {
                        axis.future(horizon).map(Some).ok_or_else(|| super::series::no_future(&s.at))
                    }
                }
            })
            .collect::<Result<_>>()?;
        let wide = match layout {
            Layout::Long => None,
            Layout::Wide { columns } => Some(Wide::new(dataset, columns)),
        };
        Ok(Rows { dataset, responses, future, model: None, wide })
    }

    /// Quantile levels over all responses, in order of first appearance.
    fn levels(&self) -> Vec<f64> {
        let mut levels: Vec<f64> = Vec::new();
        for q in self.responses.iter().flat_map(|r| &r.quantiles) {
            if !levels.contains(&q.q) {
                levels.push(q.q);
            }
        }
        levels
    }

    fn max_samples(&self) -> usize {
        self.responses.iter().map(|r| r.samples.as_ref().map_or(0, Vec::len)).max().unwrap_or(0)
    }

    /// Whether the long table has a `target_name` column.
    fn multivariate(&self) -> bool {
        self.wide.is_none() && self.dataset.series.iter().any(|s| s.target_names.len() > 1)
    }

    /// Every table row in order: (series, variate, step) in the long layout, (series, step) in the wide one.
    fn each(&self) -> Box<dyn Iterator<Item = Key> + '_> {
        let wide = self.wide.is_some();
        Box::new(self.responses.iter().enumerate().flat_map(move |(s, r)| {
            let point = r.point();
            let horizon = point.first().map_or(0, Vec::len);
            let variates = if wide { 1 } else { point.len() };
            (0..variates).flat_map(move |v| (0..horizon).map(move |h| (s, (!wide).then_some(v), h)))
        }))
    }

    /// The value columns, in order: the point forecast, the quantile levels, the sample paths (long: one column
    /// each; wide: one per point column each, named after it).
    fn value_columns(&self, point: &str) -> Vec<ValueColumn> {
        let (levels, samples) = (self.levels(), self.max_samples());
        let Some(wide) = &self.wide else {
            let mut out = vec![ValueColumn { name: point.to_string(), cell: Cell::Point, wide: None }];
            out.extend(levels.iter().map(|&q| ValueColumn {
                name: quantile_column(q),
                cell: Cell::Quantile(q),
                wide: None,
            }));
            out.extend((0..samples).map(|p| ValueColumn {
                name: format!("sample_{p}"),
                cell: Cell::Sample(p),
                wide: None,
            }));
            return out;
        };
        let mut out: Vec<ValueColumn> = wide
            .names
            .iter()
            .enumerate()
            .map(|(c, n)| ValueColumn { name: n.clone(), cell: Cell::Point, wide: Some(c) })
            .collect();
        for (c, n) in wide.names.iter().enumerate() {
            out.extend(levels.iter().map(|&q| ValueColumn {
                name: format!("{n}_{}", quantile_column(q)),
                cell: Cell::Quantile(q),
                wide: Some(c),
            }));
        }
        for (c, n) in wide.names.iter().enumerate() {
            out.extend((0..samples).map(|p| ValueColumn {
                name: format!("{n}_sample_{p}"),
                cell: Cell::Sample(p),
                wide: Some(c),
            }));
        }
        out
    }

    /// The value of `column` on table row `key` (`None`: empty).
    fn value(&self, column: &ValueColumn, (s, v, h): Key) -> Option<f32> {
        let v = match (column.wide, &self.wide) {
            (Some(c), Some(wide)) => wide.rows[s][c]?,
            _ => v?,
        };
        match column.cell {
            Cell::Point => Some(self.responses[s].point()[v][h]),
            Cell::Quantile(q) => self.quantile(s, q, v, h),
            Cell::Sample(p) => self.sample(s, p, v, h),
        }
    }

    fn quantile(&self, s: usize, level: f64, v: usize, h: usize) -> Option<f32> {
        self.responses[s].quantiles.iter().find(|q| q.q == level).map(|q| q.values[v][h])
    }

    fn sample(&self, s: usize, path: usize, v: usize, h: usize) -> Option<f32> {
        self.responses[s].samples.as_ref().and_then(|p| p.get(path)).map(|p| p[v][h])
    }

    fn time_name(&self) -> &str {
        self.dataset.columns.time.as_ref().map_or("step", |(n, _)| n.as_str())
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum JsonStamp {
    Int(i64),
    Text(String),
}

impl From<&Stamp> for JsonStamp {
    fn from(s: &Stamp) -> Self {
        match s.style {
            StampStyle::Epoch(unit) => JsonStamp::Int(unit.count(s.at)),
            _ => JsonStamp::Text(s.to_text()),
        }
    }
}

/// A response as written: the engine's, plus the model that made it and the forecast steps' timestamps.
#[derive(Serialize)]
struct JsonResponse<'a> {
    #[serde(flatten)]
    response: &'a ForecastResponse,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamps: Option<Vec<JsonStamp>>,
    /// The series' calendar ([`super::calendar`]), with the timestamps.
    #[serde(skip_serializing_if = "Option::is_none")]
    calendar: Option<String>,
}

fn json(rows: &Rows<'_>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    for ((r, future), s) in rows.responses.iter().zip(&rows.future).zip(&rows.dataset.series) {
        let doc = JsonResponse {
            response: r,
            model: rows.model,
            timestamps: future.as_ref().map(|f| f.iter().map(JsonStamp::from).collect()),
            calendar: s.time.as_ref().map(|t| t.calendar_text()),
        };
        serde_json::to_writer(&mut out, &doc).map_err(|e| DataError::at("output", e.to_string()))?;
        out.push(b'\n');
    }
    Ok(out)
}

/// The header of a forecast table: the key columns, then `values`' names.
fn header(rows: &Rows<'_>, values: &[ValueColumn]) -> Vec<String> {
    let mut h = Vec::new();
    h.extend(rows.dataset.columns.id.clone());
    h.push(rows.time_name().to_string());
    if rows.multivariate() {
        h.push("target_name".into());
    }
    h.extend(rows.model.map(|_| "model".to_string()));
    h.extend(values.iter().map(|c| c.name.clone()));
    h
}

fn csv(rows: &Rows<'_>, point: &str) -> Result<Vec<u8>> {
    let values = rows.value_columns(point);
    let mut w = csv::Writer::from_writer(Vec::new());
    let fail = |e: csv::Error| DataError::at("output", e.to_string());
    w.write_record(header(rows, &values)).map_err(fail)?;
    let has_id = rows.dataset.columns.id.is_some();
    let multivariate = rows.multivariate();
    let num = |x: Option<f32>| x.map(|x| x.to_string()).unwrap_or_default();
    let mut record: Vec<String> = Vec::new();
    for key @ (s, v, h) in rows.each() {
        record.clear();
        if has_id {
            record.push(rows.responses[s].id.as_ref().map(RequestId::to_string).unwrap_or_default());
        }
        record.push(match &rows.future[s] {
            Some(f) => f[h].to_text(),
            None => (h + 1).to_string(),
        });
        if let (true, Some(v)) = (multivariate, v) {
            record.push(rows.dataset.series[s].target_names[v].clone());
        }
        record.extend(rows.model.map(str::to_string));
        record.extend(values.iter().map(|c| num(rows.value(c, key))));
        w.write_record(&record).map_err(fail)?;
    }
    w.into_inner().map_err(|e| DataError::at("output", e.to_string()))
}

/// The forecasts of `dataset`'s series as one Arrow record batch in `layout`: the columns and types of a Parquet
/// forecast table, with the `totoc.calendars` schema metadata (the Python package's data frames).
pub fn record_batch(
    dataset: &Dataset,
    responses: &[ForecastResponse],
    point: &str,
    layout: &Layout,
) -> Result<RecordBatch> {
    assert_eq!(dataset.series.len(), responses.len(), "one response per series");
    batch(&Rows::new(dataset, responses, layout)?, point)
}

fn parquet(rows: &Rows<'_>, point: &str) -> Result<Vec<u8>> {
    let batch = batch(rows, point)?;
    let fail = |e: String| DataError::at("output", format!("cannot write Parquet: {e}"));
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        // Also as the file's own key-value metadata, which every Parquet reader shows.
        .set_key_value_metadata(Some(
            batch
                .schema()
                .metadata()
                .iter()
                .map(|(k, v)| parquet::file::metadata::KeyValue::new(k.clone(), v.clone()))
                .collect(),
        ))
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(Vec::new(), batch.schema(), Some(props))
        .map_err(|e| fail(e.to_string()))?;
    w.write(&batch).map_err(|e| fail(e.to_string()))?;
    w.into_inner().map_err(|e| fail(e.to_string()))
}

/// The rows of a forecast table as a record batch.
fn batch(rows: &Rows<'_>, point: &str) -> Result<RecordBatch> {
    let values = rows.value_columns(point);
    let names = header(rows, &values);
    let mut columns: Vec<ArrayRef> = Vec::new();
    let n = rows.each().count();
    if rows.dataset.columns.id.is_some() {
        let ids: Vec<Option<&RequestId>> =
            rows.each().map(|(s, _, _)| rows.responses[s].id.as_ref()).collect();
        if ids.iter().all(|id| matches!(id, Some(RequestId::Int(_)))) {
            let mut b = Int64Builder::with_capacity(n);
            ids.iter().for_each(|id| {
                b.append_option(if let Some(RequestId::Int(i)) = id { Some(*i) } else { None })
            });
            columns.push(Arc::new(b.finish()));
        } else {
            let mut b = StringBuilder::new();
            ids.iter().for_each(|id| b.append_option(id.map(|id| id.to_string())));
            columns.push(Arc::new(b.finish()));
        }
    }
    columns.push(time_column(rows));
    if rows.multivariate() {
        let mut b = StringBuilder::new();
        rows.each().for_each(|(s, v, _)| b.append_option(v.map(|v| &rows.dataset.series[s].target_names[v])));
        columns.push(Arc::new(b.finish()));
    }
    if let Some(model) = rows.model {
        let mut b = StringBuilder::with_capacity(n, n * model.len());
        (0..n).for_each(|_| b.append_value(model));
        columns.push(Arc::new(b.finish()));
    }
    for column in &values {
        let mut b = Float32Builder::with_capacity(n);
        rows.each().for_each(|key| b.append_option(rows.value(column, key)));
        columns.push(Arc::new(b.finish()));
    }
    let fields: Vec<Field> =
        names.iter().zip(&columns).map(|(name, c)| Field::new(name, c.data_type().clone(), true)).collect();
    let schema = Arc::new(Schema::new(fields).with_metadata(calendar_metadata(rows)));
    RecordBatch::try_new(schema, columns)
        .map_err(|e| DataError::at("output", format!("cannot make the forecast table: {e}")))
}

/// The table metadata key of the series' calendars.
pub const CALENDARS_KEY: &str = "totoc.calendars";

/// Parquet key-value metadata: `totoc.calendars`, a JSON array of `{"id", "calendar"}` per series with
/// timestamps (`id` null without series ids); nothing without timestamps.
fn calendar_metadata(rows: &Rows<'_>) -> std::collections::HashMap<String, String> {
    let list: Vec<serde_json::Value> = rows
        .dataset
        .series
        .iter()
        .filter_map(|s| {
            let time = s.time.as_ref()?;
            Some(serde_json::json!({"id": s.request.id, "calendar": time.calendar_text()}))
        })
        .collect();
    let mut meta = std::collections::HashMap::new();
    if !list.is_empty() {
        meta.insert(CALENDARS_KEY.to_string(), serde_json::Value::Array(list).to_string());
    }
    meta
}

/// The timestamp column of a Parquet forecast table, of the input column's type (`step` numbers without one).
fn time_column(rows: &Rows<'_>) -> ArrayRef {
    let stamps: Vec<Option<&Stamp>> =
        rows.each().map(|(s, _, h)| rows.future[s].as_ref().map(|f| &f[h])).collect();
    match rows.dataset.columns.time.as_ref().map(|(_, k)| k) {
        None => {
            Arc::new(arrow_array::Int64Array::from_iter_values(rows.each().map(|(_, _, h)| h as i64 + 1)))
        }
        Some(kind) => stamp_column(kind, &stamps),
    }
}

/// Timestamps as a column of the input timestamp column's type `kind` (a forecast table's timestamps, or
/// another column of them, such as a backtest's cutoffs).
pub fn stamp_column(kind: &TimeKind, stamps: &[Option<&Stamp>]) -> ArrayRef {
    let nanos = |s: &Stamp| s.at.as_nanosecond();
    let in_unit = |div: i128| stamps.iter().map(|s| s.map(|s| (nanos(s) / div) as i64)).collect::<Vec<_>>();
    match kind {
        TimeKind::Text => {
            Arc::new(arrow_array::StringArray::from_iter(stamps.iter().map(|s| s.map(|s| s.to_text()))))
        }
        TimeKind::Epoch(unit) => {
            Arc::new(arrow_array::Int64Array::from_iter(stamps.iter().map(|s| s.map(|s| unit.count(s.at)))))
        }
        TimeKind::Arrow(DataType::Date32) => Arc::new(Date32Array::from_iter(
            in_unit(86_400_000_000_000).into_iter().map(|d| d.map(|d| d as i32)),
        )),
        TimeKind::Arrow(DataType::Date64) => Arc::new(Date64Array::from(in_unit(1_000_000))),
        TimeKind::Arrow(DataType::Timestamp(unit, tz)) => match unit {
            TimeUnit::Second => {
                Arc::new(TimestampSecondArray::from(in_unit(1_000_000_000)).with_timezone_opt(tz.clone()))
            }
            TimeUnit::Millisecond => {
                Arc::new(TimestampMillisecondArray::from(in_unit(1_000_000)).with_timezone_opt(tz.clone()))
            }
            TimeUnit::Microsecond => {
                Arc::new(TimestampMicrosecondArray::from(in_unit(1_000)).with_timezone_opt(tz.clone()))
            }
            TimeUnit::Nanosecond => {
                Arc::new(TimestampNanosecondArray::from(in_unit(1)).with_timezone_opt(tz.clone()))
            }
        },
        // Readers only produce the kinds above; anything else is written as ISO text.
        TimeKind::Arrow(_) => {
            Arc::new(arrow_array::StringArray::from_iter(stamps.iter().map(|s| s.map(|s| s.to_text()))))
        }
    }
}

#[cfg(test)]
mod tests {
    use engines::request::{Limits, Overrides, QuantileForecast};

    use super::super::{parse, ReadOptions};
    use super::*;

    fn response(id: Option<RequestId>, point: Vec<Vec<f32>>, median: bool) -> ForecastResponse {
        let q = |d: f32| point.iter().map(|v| v.iter().map(|x| x + d).collect()).collect();
        ForecastResponse {
            id,
            mean: (!median).then(|| point.clone()),
            median: median.then(|| point.clone()),
            quantiles: vec![
                QuantileForecast { q: 0.05, values: q(-1.0) },
                QuantileForecast { q: 0.975, values: q(1.0) },
            ],
            samples: None,
            context_truncated: None,
            buckets: Vec::new(),
            profile: "p".into(),
            engine: "cpu".into(),
            sampler: None,
            engine_sha256: None,
        }
    }

    fn dataset(text: &str, format: Format) -> Dataset {
        let o = Overrides { horizon: Some(2), ..Overrides::default() };
        parse(text.as_bytes().to_vec(), format, "in.csv", &ReadOptions::default(), &o, &Limits::default())
            .unwrap()
    }

    fn text(bytes: Vec<u8>) -> String {
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn long_csv_with_future_timestamps_and_the_median_of_toto_2() {
        let d = dataset(
            "unique_id,ds,y\na,2024-01-30,1\na,2024-01-31,2\nb,2023-12-31,3\nb,2024-01-31,4\n",
            Format::Csv,
        );
        let rs = vec![
            response(Some(RequestId::Str("a".into())), vec![vec![1.5, 2.5]], true),
            response(Some(RequestId::Str("b".into())), vec![vec![10.0, 20.0]], true),
        ];
        let out = text(to_bytes(&d, &rs, Format::Csv, "median", None).unwrap());
        assert_eq!(
            out,
            "unique_id,ds,median,q0.05,q0.975\n\
             a,2024-02-01,1.5,0.5,2.5\na,2024-02-02,2.5,1.5,3.5\n\
             b,2024-02-29,10,9,11\nb,2024-03-31,20,19,21\n"
        );
        // JSON keeps the engine's field names and adds the timestamps
        let out = text(to_bytes(&d, &rs, Format::JsonLines, "median", None).unwrap());
        let first: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
        assert_eq!(first["median"], serde_json::json!([[1.5, 2.5]]));
        assert_eq!(first["timestamps"], serde_json::json!(["2024-02-01", "2024-02-02"]));
        assert_eq!(first["id"], "a");
        assert!(first.get("mean").is_none());
        let e = to_bytes(&d, &rs, Format::Json, "median", None).unwrap_err().to_string();
        assert!(e.contains("2 forecasts do not fit one JSON document"), "{e}");
    }

    #[test]
    fn multivariate_wide_input_without_timestamps_writes_steps_and_target_names() {
        let d = dataset("cpu,mem\n1,2\n3,4\n", Format::Csv);
        let mut r = response(None, vec![vec![1.0, 2.0], vec![3.0, 4.0]], false);
        r.quantiles.clear();
        r.samples = Some(vec![vec![vec![0.5, 0.25], vec![1.0, 2.0]]]);
        let out = text(to_bytes(&d, &[r], Format::Csv, "mean", None).unwrap());
        assert_eq!(out, "step,target_name,mean,sample_0\n1,cpu,1,0.5\n2,cpu,2,0.25\n1,mem,3,1\n2,mem,4,2\n");
    }

    #[test]
    fn an_answer_of_another_shape_is_an_error_not_a_panic() {
        let d = dataset("cpu,mem\n1,2\n3,4\n", Format::Csv);
        // three rows for two target columns; one step for a horizon of two
        let rows = response(None, vec![vec![1.0, 2.0]; 3], false);
        let steps = response(None, vec![vec![1.0]], false);
        let d2 = dataset("ds,y\n2024-01-01,1\n2024-01-02,2\n", Format::Csv);
        for format in [Format::Csv, Format::JsonLines, Format::Parquet] {
            let e = to_bytes(&d, std::slice::from_ref(&rows), format, "mean", None).unwrap_err().to_string();
            assert!(e.contains("3 rows for the series' 2 target columns"), "{e}");
        }
        let mut given = d2.clone();
        given.series[0].future = d2.series[0].time.as_ref().and_then(|t| t.future(2));
        let e = to_bytes(&given, &[steps], Format::Csv, "mean", None).unwrap_err().to_string();
        assert!(e.contains("1 steps for the 2 future timestamps given"), "{e}");
    }

    fn wide(columns: &[&str]) -> Layout {
        Layout::Wide { columns: columns.iter().map(|c| c.to_string()).collect() }
    }

    const OHLCVA: [&str; 6] = ["open", "high", "low", "close", "volume", "amount"];

    #[test]
    fn the_wide_layout_has_a_row_per_step_and_the_columns_in_the_familys_order() {
        // the series' rows are close, open (the order the table gave them); the family's order puts open first
        let d = dataset("ds,close,open\n2024-01-01,1,2\n2024-01-02,3,4\n", Format::Csv);
        assert_eq!(d.series[0].target_names, ["close", "open"]);
        let mut r = response(None, vec![vec![10.0, 11.0], vec![20.0, 21.0]], false);
        r.samples = Some(vec![vec![vec![9.0, 9.5], vec![19.0, 19.5]]]);
        let out = text(
            to_bytes_laid_out(&d, &[r.clone()], Format::Csv, "mean", Some("m"), &wide(&OHLCVA)).unwrap(),
        );
        assert_eq!(
            out,
            "ds,model,open,close,open_q0.05,open_q0.975,close_q0.05,close_q0.975,open_sample_0,close_sample_0\n\
             2024-01-03,m,20,10,19,21,9,11,19,9\n\
             2024-01-04,m,21,11,20,22,10,12,19.5,9.5\n"
        );
        // the long layout of the same forecast is as before: a row per column and step
        let long = text(to_bytes(&d, &[r], Format::Csv, "mean", Some("m")).unwrap());
        assert!(
            long.starts_with(
                "ds,target_name,model,mean,q0.05,q0.975,sample_0\n2024-01-03,close,m,10,9,11,9\n"
            ),
            "{long}"
        );
        assert_eq!(long.lines().count(), 5);
    }

    #[test]
    fn a_column_one_series_lacks_is_empty_on_its_rows_and_unknown_names_follow_the_familys() {
        let mut d = dataset(
            "unique_id,ds,open,close,extra\na,2024-01-01,1,2,3\na,2024-01-02,1,2,3\n\
             b,2024-01-01,4,5,6\nb,2024-01-02,4,5,6\n",
            Format::Csv,
        );
        d.series[1].target_names = vec!["close".into()];
        let mut a = response(
            Some(RequestId::Str("a".into())),
            vec![vec![1.0, 2.0], vec![3.0, 4.0], vec![5.0, 6.0]],
            false,
        );
        let mut b = response(Some(RequestId::Str("b".into())), vec![vec![7.0, 8.0]], false);
        a.quantiles.clear();
        b.quantiles.clear();
        let out = text(to_bytes_laid_out(&d, &[a, b], Format::Csv, "mean", None, &wide(&OHLCVA)).unwrap());
        assert_eq!(
            out,
            "unique_id,ds,open,close,extra\n\
             a,2024-01-03,1,3,5\na,2024-01-04,2,4,6\n\
             b,2024-01-03,,7,\nb,2024-01-04,,8,\n"
        );
    }

    #[test]
    fn a_wide_parquet_table_reads_back_as_a_table_of_its_columns() {
        let d = dataset(
            "unique_id,ds,open,close\n7,2024-01-01T00:00:00Z,1,2\n7,2024-01-01T01:00:00Z,2,3\n",
            Format::Csv,
        );
        let rs =
            vec![response(Some(RequestId::Str("7".into())), vec![vec![1.0, 2.0], vec![3.0, 4.0]], false)];
        let batch = record_batch(&d, &rs, "mean", &wide(&OHLCVA)).unwrap();
        let schema = batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(
            names,
            ["unique_id", "ds", "open", "close", "open_q0.05", "open_q0.975", "close_q0.05", "close_q0.975"]
        );
        assert_eq!(batch.num_rows(), 2);
        let bytes = to_bytes_laid_out(&d, &rs, Format::Parquet, "mean", Some("m"), &wide(&OHLCVA)).unwrap();
        let opts = ReadOptions {
            target_columns: Some(vec!["open".into(), "close_q0.975".into()]),
            ..ReadOptions::default()
        };
        let o = Overrides { horizon: Some(1), ..Overrides::default() };
        let back = parse(bytes, Format::Parquet, "out.parquet", &opts, &o, &Limits::default()).unwrap();
        assert_eq!(
            back.series[0].request.target,
            vec![vec![Some(1.0), Some(2.0)], vec![Some(4.0), Some(5.0)]]
        );
    }

    #[test]
    fn the_family_default_is_wide_for_named_columns_only() {
        let named = exporter::registry::Family::ALL
            .into_iter()
            .find_map(|f| f.capabilities().columns)
            .expect("a family with named columns");
        let want: Vec<String> = named.iter().map(|c| c.name.to_string()).collect();
        assert_eq!(Layout::for_family(Some(named), false), Layout::Wide { columns: want });
        assert_eq!(Layout::for_family(Some(named), true), Layout::Long);
        assert_eq!(Layout::for_family(None, false), Layout::Long);
    }

    #[test]
    fn quantile_columns_use_the_shortest_decimal() {
        assert_eq!(quantile_column(0.1), "q0.1");
        assert_eq!(quantile_column(0.05), "q0.05");
        assert_eq!(quantile_column(0.975), "q0.975");
        assert_eq!(quantile_column(0.5), "q0.5");
    }

    #[test]
    fn parquet_round_trips_through_the_reader() {
        let d = dataset("unique_id,ds,y\n7,2024-01-01T00:00:00Z,1\n7,2024-01-01T01:00:00Z,2\n", Format::Csv);
        let rs = vec![response(Some(RequestId::Str("7".into())), vec![vec![1.0, 2.0]], false)];
        let bytes = to_bytes(&d, &rs, Format::Parquet, "mean", None).unwrap();
        // The forecast table is itself a long table: read it back with `mean` as the target.
        let opts = ReadOptions { target_columns: Some(vec!["mean".into()]), ..ReadOptions::default() };
        let o = Overrides { horizon: Some(1), ..Overrides::default() };
        let back = parse(bytes, Format::Parquet, "out.parquet", &opts, &o, &Limits::default()).unwrap();
        assert_eq!(back.columns.id.as_deref(), Some("unique_id"));
        assert_eq!(back.series[0].request.target, vec![vec![Some(1.0), Some(2.0)]]);
        assert_eq!(back.series[0].time.as_ref().unwrap().last.to_text(), "2024-01-01T03:00:00Z");
    }
}
