//! Saved forecasts read back (`totoc plot`): the JSON / JSON Lines responses and the CSV / Parquet forecast tables
//! that `totoc forecast` writes ([`super::write`]; `docs/formats.md`, "Forecast response" and "Forecast tables").
//!
//! A table is read with the column names of the input it was made from ([`Columns`]): its id column, its
//! timestamp column (or `step`), then `target_name` (several target columns), `model` (the model that made it;
//! tables written before it was added lack it), the point forecast (`mean` or `median`), the quantile columns
//! (`q0.1`, ...) and the sample paths (`sample_0`, ..., not read). Any other column
//! is an error, so a table of another shape is not half-read; a table in the wide layout (no `mean` / `median`
//! column: the point forecasts under the input's column names) is refused saying to write the long one. Each series becomes one [`Saved`] forecast: a
//! [`ForecastResponse`] as the engine gave it (without samples), its variates' names, and the forecast steps'
//! timestamps (or step numbers), which the caller checks against the input.

use std::collections::HashMap;

use engines::request::{ForecastResponse, QuantileForecast, RequestId};
use serde_json::Value;

use super::error::{DataError, Loc, Result};
use super::layout::{ID_NAMES, TIME_NAMES};
use super::series::series_at;
use super::timestamps::{epoch, parse_text, EpochUnit, Stamp};
use super::{Columns, Format, Place};

mod csv_table;
mod parquet_table;

use csv_table::csv_rows;
use parquet_table::parquet_rows;

/// One series' saved forecast.
#[derive(Debug, Clone)]
pub struct Saved {
    /// Names it in messages: `FILE: series ID`, `FILE:LINE` (JSON Lines) or `FILE`.
    pub at: String,
    /// The point forecast (`mean` or `median`, as saved) and the quantiles; `engine` and `profile` as saved in
    /// JSON, empty from tables.
    pub response: ForecastResponse,
    /// Tables of multivariate series: the variates' `target_name`s, in the response's order.
    pub variates: Option<Vec<String>>,
    /// The model that made it (`model`: the family's manifest name, e.g. `toto-1.0`), when the file says (files
    /// written before the field was added do not).
    pub model: Option<String>,
    pub steps: Steps,
}

/// The forecast steps as the file gives them.
#[derive(Debug, Clone, PartialEq)]
pub enum Steps {
    /// Timestamps (JSON `timestamps`, the input's timestamp column).
    Stamps(Vec<Stamp>),
    /// Step numbers 1..H (the `step` column of a table made from input without timestamps).
    Numbers(Vec<i64>),
    /// JSON without `timestamps`.
    Absent,
}

/// Reads the saved forecasts at `place` in `format` (default: its extension). `columns` are those of the input
/// the forecasts were made from; `unit` reads integer timestamps.
pub fn read(place: &Place, format: Option<Format>, columns: &Columns, unit: EpochUnit) -> Result<Vec<Saved>> {
    let source = place.name("stdin");
    let format = place.format(format, "--forecast-format")?;
    let bytes = match place {
        Place::File(p) => std::fs::read(p).map_err(|err| DataError::Io { path: source.clone(), err })?,
        Place::Std => {
            return Err(DataError::input(
                "stdin",
                "saved forecasts are read from a file",
                "pass --forecast FILE",
            ))
        }
    };
    let saved = match format {
        Format::Json | Format::JsonLines => {
            let text = std::str::from_utf8(&bytes).map_err(|_| {
                DataError::input(&source, "the file is not UTF-8 text", "save it as UTF-8 JSON")
            })?;
            json(text, format == Format::JsonLines, &source, unit)?
        }
        Format::Csv => table(csv_rows(&bytes, &source, columns, unit)?, &source)?,
        Format::Parquet => table(parquet_rows(bytes.into(), &source, columns, unit)?, &source)?,
    };
    if saved.is_empty() {
        return Err(DataError::input(
            &source,
            "there is no forecast in it",
            "give a file written by totoc forecast",
        ));
    }
    Ok(saved)
}

// ---- JSON ----

fn json(text: &str, lines: bool, source: &str, unit: EpochUnit) -> Result<Vec<Saved>> {
    let docs: Vec<(String, &str)> = if lines {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (Loc::Line(i as u64 + 1).at(source), l))
            .collect()
    } else {
        vec![(source.to_string(), text)]
    };
    docs.into_iter().map(|(at, doc)| response(doc, at, unit)).collect()
}

fn response(text: &str, at: String, unit: EpochUnit) -> Result<Saved> {
    let mut value: Value = serde_json::from_str(text).map_err(|e| DataError::at(&at, e.to_string()))?;
    let timestamps = value.as_object_mut().and_then(|o| o.remove("timestamps"));
    // The series' calendar is reported for people; the timestamps say where the steps are.
    value.as_object_mut().map(|o| o.remove("calendar"));
    let model = match value.as_object_mut().and_then(|o| o.remove("model")) {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(m),
        Some(_) => {
            return Err(DataError::input(
                &at,
                "`model` is not a string",
                "give a file written by totoc forecast",
            ))
        }
    };
    let response: ForecastResponse = serde_json::from_value(value).map_err(|e| {
        DataError::input(
            &at,
            format!("not a forecast response ({e})"),
            "give a file written by totoc forecast",
        )
    })?;
    if response.mean.is_none() && response.median.is_none() {
        return Err(DataError::input(
            &at,
            "it has neither `mean` nor `median`",
            "give a file written by totoc forecast",
        ));
    }
    let horizon = check_shape(&response, &at)?;
    let steps = match timestamps {
        None | Some(Value::Null) => Steps::Absent,
        Some(Value::Array(items)) if items.len() == horizon => Steps::Stamps(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let where_ = Loc::Index(i).at(&at);
                    match item {
                        Value::String(s) => parse_text(s, unit).map_err(|m| DataError::at(where_, m)),
                        Value::Number(n) => match n.as_i64() {
                            Some(x) => epoch(x, unit).map_err(|m| DataError::at(where_, m)),
                            None => Err(DataError::at(where_, format!("{n} is not an integer epoch"))),
                        },
                        other => Err(DataError::at(where_, format!("{other} is not a timestamp"))),
                    }
                })
                .collect::<Result<_>>()?,
        ),
        Some(_) => {
            return Err(DataError::input(
                &at,
                "`timestamps` is not an array of one timestamp per forecast step",
                "give a file written by totoc forecast",
            ))
        }
    };
    Ok(Saved { at, response, variates: None, model, steps })
}

/// The horizon of a response whose point forecast and quantiles are all `[variate][horizon]` of one shape.
fn check_shape(r: &ForecastResponse, at: &str) -> Result<usize> {
    let point = r.point();
    let horizon = point.first().map_or(0, Vec::len);
    let fix = "give a file written by totoc forecast";
    if horizon == 0 || point.iter().any(|v| v.len() != horizon) {
        return Err(DataError::input(at, "the point forecast is empty or ragged", fix));
    }
    for q in &r.quantiles {
        if q.values.len() != point.len() || q.values.iter().any(|v| v.len() != horizon) {
            return Err(DataError::input(
                at,
                format!("quantile {} is not shaped like the point forecast", q.q),
                fix,
            ));
        }
    }
    Ok(horizon)
}

// ---- tables ----

/// The roles of a forecast table's columns (indices into its header).
struct Roles {
    id: Option<usize>,
    time: usize,
    /// Whether the time column holds `step` numbers (the input had no timestamps).
    numbered: bool,
    target_name: Option<usize>,
    /// The `model` column.
    model: Option<usize>,
    point: (usize, &'static str),
    /// `(column, level)`.
    quantiles: Vec<(usize, f64)>,
}

impl Roles {
    fn resolve(names: &[String], columns: &Columns, source: &str) -> Result<Roles> {
        let fix =
            "plot a forecast table with the input it was made from (same --id-column and --timestamp-column)";
        let find = |name: &str| names.iter().position(|n| n == name);
        let id = match &columns.id {
            Some(name) => Some(find(name).ok_or_else(|| {
                DataError::input(source, format!("there is no column `{name}`, the input's series ids"), fix)
            })?),
            None => None,
        };
        let (time_name, numbered) = match &columns.time {
            Some((name, _)) => (name.as_str(), false),
            None => ("step", true),
        };
        let time = find(time_name).ok_or_else(|| {
            let what = if numbered {
                "the step numbers of a forecast made without timestamps"
            } else {
                "the input's timestamps"
            };
            DataError::input(source, format!("there is no column `{time_name}`, {what}"), fix)
        })?;
        let mut roles = Roles {
            id,
            time,
            numbered,
            target_name: None,
            model: None,
            point: (0, "mean"),
            quantiles: Vec::new(),
        };
        let mut points = Vec::new();
        for (i, name) in names.iter().enumerate() {
            if Some(i) == id || i == time {
                continue;
            }
            match name.as_str() {
                "target_name" => roles.target_name = Some(i),
                "model" => roles.model = Some(i),
                "mean" => points.push((i, "mean")),
                "median" => points.push((i, "median")),
                n if n.strip_prefix("sample_").is_some_and(|k| k.parse::<usize>().is_ok()) => {}
                n => match n.strip_prefix('q').and_then(|l| l.parse::<f64>().ok()).filter(|l| *l > 0.0 && *l < 1.0) {
                    Some(level) => roles.quantiles.push((i, level)),
                    None if columns.id.is_none() && ID_NAMES.iter().any(|c| c.eq_ignore_ascii_case(n)) => {
                        return Err(DataError::input(source, format!("column `{n}` holds series ids, but the input has none"), fix))
                    }
                    None if columns.time.is_none() && TIME_NAMES.iter().any(|c| c.eq_ignore_ascii_case(n)) => {
                        return Err(DataError::input(source, format!("column `{n}` holds timestamps, but the input has none"), fix))
                    }
                    // A wide table (docs/formats.md): its point forecasts are under the input's column names.
                    None if wide_layout(names) => {
                        return Err(DataError::input(
                            source,
                            format!(
                                "it is a forecast table in the wide layout (a point forecast column per input \
                                 column, such as `{n}`), and totoc plot reads the long layout"
                            ),
                            "write the forecasts with `totoc forecast --layout long` to plot them, or draw them \
                             with `totoc forecast --plot`",
                        ))
                    }
                    None => {
                        return Err(DataError::input(
                            source,
                            format!("column `{n}` is not a forecast table column"),
                            "forecast tables hold the id and timestamp (or step) columns, target_name, mean or median, \
                             q<level> and sample_<n> columns (docs/formats.md); give a table written by totoc forecast",
                        ))
                    }
                },
            }
        }
        roles.point = match points[..] {
            [one] => one,
            [] => return Err(DataError::input(source, "there is no `mean` or `median` column", fix)),
            _ => {
                return Err(DataError::input(
                    source,
                    "it has both a `mean` and a `median` column",
                    "keep the point forecast the engine wrote",
                ))
            }
        };
        Ok(roles)
    }
}

/// Whether a header is a wide forecast table's: no `mean` / `median` column, and the `model` column `totoc
/// forecast` writes or a per-column quantile or sample column (`close_q0.1`, `close_sample_0`).
fn wide_layout(names: &[String]) -> bool {
    let per_column = |c: &String| {
        c.rsplit_once("_q").is_some_and(|(_, level)| level.parse::<f64>().is_ok()) || c.contains("_sample_")
    };
    !names.iter().any(|c| c == "mean" || c == "median") && names.iter().any(|c| c == "model" || per_column(c))
}

/// One row of a forecast table.
struct Row {
    loc: Loc,
    id: Option<RequestId>,
    step: StepValue,
    variate: Option<String>,
    model: Option<String>,
    point: f32,
    quantiles: Vec<Option<f32>>,
}

enum StepValue {
    Stamp(Stamp),
    Number(i64),
}

/// The rows of a table and the roles of its columns.
struct Rows {
    roles: Roles,
    rows: Vec<Row>,
}

/// Groups a table's rows into one forecast per series: series in order of first appearance, variates in order
/// of first appearance within their series, steps in file order (the same for every variate).
fn table(t: Rows, source: &str) -> Result<Vec<Saved>> {
    struct Group {
        id: Option<RequestId>,
        variates: Vec<(Option<String>, Vec<Row>)>,
    }
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<Option<String>, usize> = HashMap::new();
    for row in t.rows {
        let key = row.id.as_ref().map(ToString::to_string);
        let g = *index.entry(key).or_insert_with(|| {
            groups.push(Group { id: row.id.clone(), variates: Vec::new() });
            groups.len() - 1
        });
        let variates = &mut groups[g].variates;
        match variates.iter_mut().find(|(name, _)| *name == row.variate) {
            Some((_, rows)) => rows.push(row),
            None => variates.push((row.variate.clone(), vec![row])),
        }
    }
    let fix = "give a table written by totoc forecast";
    let (_, point_name) = t.roles.point;
    groups
        .into_iter()
        .map(|g| {
            let at = series_at(source, g.id.as_ref());
            let first = &g.variates[0].1;
            let steps = match first[0].step {
                StepValue::Stamp(_) => Steps::Stamps(
                    first
                        .iter()
                        .filter_map(|r| if let StepValue::Stamp(s) = r.step { Some(s) } else { None })
                        .collect(),
                ),
                StepValue::Number(_) => Steps::Numbers(
                    first
                        .iter()
                        .filter_map(|r| if let StepValue::Number(n) = r.step { Some(n) } else { None })
                        .collect(),
                ),
            };
            for (name, rows) in &g.variates {
                let same = rows.len() == first.len()
                    && rows.iter().zip(first).all(|(a, b)| match (&a.step, &b.step) {
                        (StepValue::Stamp(x), StepValue::Stamp(y)) => x.at == y.at,
                        (StepValue::Number(x), StepValue::Number(y)) => x == y,
                        _ => false,
                    });
                if !same {
                    let which = name.as_deref().map_or_else(String::new, |n| format!("target `{n}`: "));
                    return Err(DataError::input(
                        rows[0].loc.at(source),
                        format!("{which}its forecast steps differ from those of the series' first target"),
                        fix,
                    ));
                }
            }
            let point: Vec<Vec<f32>> =
                g.variates.iter().map(|(_, rows)| rows.iter().map(|r| r.point).collect()).collect();
            let mut quantiles = Vec::new();
            for (k, &(_, level)) in t.roles.quantiles.iter().enumerate() {
                let cells: Vec<Vec<Option<f32>>> = g
                    .variates
                    .iter()
                    .map(|(_, rows)| rows.iter().map(|r| r.quantiles[k]).collect())
                    .collect();
                let given = cells.iter().flatten().filter(|c| c.is_some()).count();
                if given == 0 {
                    continue; // the series did not ask for this level
                }
                if given != first.len() * g.variates.len() {
                    return Err(DataError::input(
                        &at,
                        format!("column `q{level}` is empty on some of its rows"),
                        "give a quantile on every row of a series or on none",
                    ));
                }
                let values = cells.into_iter().map(|v| v.into_iter().flatten().collect()).collect();
                quantiles.push(QuantileForecast { q: level, values });
            }
            let variates = t
                .roles
                .target_name
                .map(|_| g.variates.iter().map(|(n, _)| n.clone().unwrap_or_default()).collect());
            let response = ForecastResponse {
                id: g.id,
                mean: (point_name == "mean").then(|| point.clone()),
                median: (point_name == "median").then_some(point),
                quantiles,
                samples: None,
                context_truncated: None,
                buckets: Vec::new(),
                profile: String::new(),
                engine: String::new(),
                sampler: None,
                engine_sha256: None,
            };
            let model = series_model(&g.variates, source)?;
            Ok(Saved { at, response, variates, model, steps })
        })
        .collect()
}

/// The one model of a series' rows (`None` when the table has no `model` column).
fn series_model(variates: &[(Option<String>, Vec<Row>)], source: &str) -> Result<Option<String>> {
    let mut rows = variates.iter().flat_map(|(_, rows)| rows);
    let Some(first) = rows.next().and_then(|r| r.model.clone()) else { return Ok(None) };
    if let Some(other) = rows.find(|r| r.model.as_deref() != Some(first.as_str())) {
        return Err(DataError::input(
            other.loc.at(source),
            format!(
                "column `model` says {:?} here but {first:?} on the series' first row",
                other.model.as_deref().unwrap_or("")
            ),
            "give one model per series (a table written by totoc forecast)",
        ));
    }
    Ok(Some(first))
}

#[cfg(test)]
mod tests {
    use engines::request::{Limits, Overrides};

    use super::super::{parse, write, Dataset, ReadOptions, TimeKind};
    use super::*;

    fn dataset(csv: &str) -> Dataset {
        let o = Overrides { horizon: Some(2), ..Overrides::default() };
        parse(csv.as_bytes().to_vec(), Format::Csv, "in.csv", &ReadOptions::default(), &o, &Limits::default())
            .unwrap()
    }

    fn response(id: &str, point: Vec<Vec<f32>>, median: bool, q: bool) -> ForecastResponse {
        let shift = |d: f32| point.iter().map(|v| v.iter().map(|x| x + d).collect()).collect();
        ForecastResponse {
            id: Some(RequestId::Str(id.into())),
            mean: (!median).then(|| point.clone()),
            median: median.then(|| point.clone()),
            quantiles: if q {
                vec![
                    QuantileForecast { q: 0.1, values: shift(-1.0) },
                    QuantileForecast { q: 0.9, values: shift(1.0) },
                ]
            } else {
                Vec::new()
            },
            samples: None,
            context_truncated: None,
            buckets: Vec::new(),
            profile: "p".into(),
            engine: "cpu (onnxruntime 1.31.1)".into(),
            sampler: None,
            engine_sha256: None,
        }
    }

    /// Writes `rs` for `d` in `format` to a temporary file and reads it back.
    fn round_trip(d: &Dataset, rs: &[ForecastResponse], format: Format, point: &str) -> Vec<Saved> {
        let dir = tempfile::tempdir().unwrap();
        let ext = match format {
            Format::Json => "json",
            Format::JsonLines => "jsonl",
            Format::Csv => "csv",
            Format::Parquet => "parquet",
        };
        let path = dir.path().join(format!("f.{ext}"));
        std::fs::write(&path, write::to_bytes(d, rs, format, point, None).unwrap()).unwrap();
        read(&Place::File(path), None, &d.columns, EpochUnit::Seconds).unwrap()
    }

    #[test]
    fn every_format_reads_back_what_forecast_wrote() {
        let d = dataset("unique_id,ds,y\na,2024-01-30,1\na,2024-01-31,2\nb,2023-12-31,3\nb,2024-01-31,4\n");
        // b did not ask for quantiles: its q columns are empty in tables
        let rs = vec![
            response("a", vec![vec![1.5, 2.5]], true, true),
            response("b", vec![vec![10.0, 20.0]], true, false),
        ];
        for format in [Format::JsonLines, Format::Csv, Format::Parquet] {
            let saved = round_trip(&d, &rs, format, "median");
            assert_eq!(saved.len(), 2, "{format:?}");
            for (s, r) in saved.iter().zip(&rs) {
                assert_eq!(
                    s.response.id.as_ref().map(ToString::to_string),
                    r.id.as_ref().map(ToString::to_string)
                );
                assert_eq!((&s.response.median, &s.response.mean), (&r.median, &None), "{format:?}");
                assert_eq!(s.response.quantiles, r.quantiles, "{format:?}");
                assert_eq!(s.variates, None);
            }
            let Steps::Stamps(st) = &saved[1].steps else { panic!("{format:?}: {:?}", saved[1].steps) };
            assert_eq!(st.iter().map(|s| s.to_text()).collect::<Vec<_>>(), ["2024-02-29", "2024-03-31"]);
            assert_eq!(saved[1].at.ends_with("series b"), format != Format::JsonLines);
        }
        let saved = round_trip(&d, &rs, Format::JsonLines, "median");
        assert_eq!(saved[0].response.engine, "cpu (onnxruntime 1.31.1)");
        assert_eq!(saved[1].at.rsplit('/').next().unwrap(), "f.jsonl:2");
    }

    /// Forecasts name their model in every format; files written before (without it) read back without one.
    #[test]
    fn the_model_is_written_and_read_back() {
        let d = dataset("unique_id,ds,y\na,2024-01-30,1\na,2024-01-31,2\n");
        let rs = vec![response("a", vec![vec![1.5, 2.5]], false, true)];
        for format in [Format::JsonLines, Format::Csv, Format::Parquet] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join(format!(
                "f.{}",
                if format == Format::JsonLines {
                    "jsonl"
                } else if format == Format::Csv {
                    "csv"
                } else {
                    "parquet"
                }
            ));
            std::fs::write(&path, write::to_bytes(&d, &rs, format, "mean", Some("toy-model")).unwrap())
                .unwrap();
            let saved = read(&Place::File(path), None, &d.columns, EpochUnit::Seconds).unwrap();
            assert_eq!(saved[0].model.as_deref(), Some("toy-model"), "{format:?}");
            assert_eq!(saved[0].response.mean, rs[0].mean, "{format:?}");
            assert_eq!(round_trip(&d, &rs, format, "mean")[0].model, None, "{format:?}");
        }
        let csv =
            String::from_utf8(write::to_bytes(&d, &rs, Format::Csv, "mean", Some("toy-model")).unwrap())
                .unwrap();
        assert_eq!(
            csv,
            "unique_id,ds,model,mean,q0.1,q0.9\na,2024-02-01,toy-model,1.5,0.5,2.5\na,2024-02-02,toy-model,2.5,1.5,3.5\n"
        );
        let json =
            String::from_utf8(write::to_bytes(&d, &rs, Format::Json, "mean", Some("toy-model")).unwrap())
                .unwrap();
        assert!(
            json.contains("\"engine\":\"cpu (onnxruntime 1.31.1)\",\"model\":\"toy-model\",\"timestamps\""),
            "{json}"
        );
        // one model per series
        let columns = Columns { id: Some("unique_id".into()), time: Some(("ds".into(), TimeKind::Text)) };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.csv");
        std::fs::write(&path, "unique_id,ds,model,mean\na,2024-01-01,x,1\na,2024-01-02,y,2\n").unwrap();
        let e = read(&Place::File(path), None, &columns, EpochUnit::Seconds).unwrap_err().to_string();
        assert!(e.ends_with("f.csv:3: column `model` says \"y\" here but \"x\" on the series' first row; give one model per series (a table written by totoc forecast)"), "{e}");
        let path = dir.path().join("f.json");
        std::fs::write(&path, r#"{"mean": [[1.0]], "quantiles": [], "samples": null, "profile": "p", "engine": "e", "model": 3}"#).unwrap();
        let e = read(&Place::File(path), None, &columns, EpochUnit::Seconds).unwrap_err().to_string();
        assert!(e.contains("`model` is not a string"), "{e}");
    }

    #[test]
    fn multivariate_tables_without_timestamps() {
        let d = dataset("cpu,mem\n1,2\n3,4\n");
        assert_eq!(d.columns.time, None);
        let mut r = response("x", vec![vec![1.0, 2.0], vec![3.0, 4.0]], false, true);
        r.id = None;
        for format in [Format::Csv, Format::Parquet] {
            let saved = round_trip(&d, std::slice::from_ref(&r), format, "mean");
            assert_eq!(saved.len(), 1);
            assert_eq!(saved[0].variates.as_deref(), Some(&["cpu".to_string(), "mem".to_string()][..]));
            assert_eq!(saved[0].response.mean, r.mean);
            assert_eq!(saved[0].response.quantiles, r.quantiles);
            assert_eq!(saved[0].steps, Steps::Numbers(vec![1, 2]));
        }
    }

    #[test]
    fn tables_of_another_shape_are_refused_with_the_fix() {
        let columns = Columns { id: Some("unique_id".into()), time: Some(("ds".into(), TimeKind::Text)) };
        let err = |csv: &str| {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("f.csv");
            std::fs::write(&path, csv).unwrap();
            read(&Place::File(path), None, &columns, EpochUnit::Seconds).unwrap_err().to_string()
        };
        assert!(err("id,ds,mean\na,2024-01-01,1\n")
            .contains("there is no column `unique_id`, the input's series ids; plot"));
        assert!(
            err("unique_id,step,mean\na,1,1\n").contains("there is no column `ds`, the input's timestamps")
        );
        assert!(err("unique_id,ds,AutoARIMA\na,2024-01-01,1\n")
            .contains("column `AutoARIMA` is not a forecast table column"));
        // the wide layout (a named-columns table): refused saying which layout to write
        for header in [
            "unique_id,ds,model,open,close\na,2024-01-01,m,1,2\n",
            "unique_id,ds,close,close_q0.1\na,2024-01-01,1,0\n",
        ] {
            let e = err(header);
            assert!(e.contains("in the wide layout") && e.contains("--layout long"), "{e}");
        }
        let no_ids = Columns { id: None, time: columns.time.clone() };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.csv");
        std::fs::write(&path, "unique_id,ds,mean\na,2024-01-01,1\n").unwrap();
        let e = read(&Place::File(path), None, &no_ids, EpochUnit::Seconds).unwrap_err().to_string();
        assert!(
            e.contains(
                "column `unique_id` holds series ids, but the input has none; plot a forecast table with"
            ),
            "{e}"
        );
        assert!(err("unique_id,ds,q0.1\na,2024-01-01,1\n").contains("there is no `mean` or `median` column"));
        assert!(err("unique_id,ds,mean,q0.1\na,2024-01-01,1,0\na,2024-01-02,2,\n")
            .contains("column `q0.1` is empty on some of its rows"));
        assert!(err("unique_id,ds,mean\na,2024-01-01,\n").contains(":2: column `mean` is empty"));
        assert!(err("unique_id,ds,mean\na,tomorrow,1\n")
            .contains(":2: column `ds`: `tomorrow` is not a timestamp"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, r#"{"quantiles": [], "samples": null, "profile": "p", "engine": "e"}"#)
            .unwrap();
        let e = read(&Place::File(path), None, &columns, EpochUnit::Seconds).unwrap_err().to_string();
        assert!(e.contains("neither `mean` nor `median`"), "{e}");
    }
}
