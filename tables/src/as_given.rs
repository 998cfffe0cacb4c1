//! The series of a family without missing points (`Capabilities::missing_points` false): its rows as given.
//!
//! Such a family reads every row it is given, as a row: a gap in the timestamps (a holiday, a lunch break, a
//! missing bar) is not a missing point to fill, and no grid is built. So a series is its rows sorted by time
//! ([`rows`]): two rows at one instant are an error naming both, and a missing value (an empty cell, NaN, `null`)
//! is an error naming its row and column. The series' calendar ([`super::calendar`]: its session, or its
//! regular step) is still inferred, but only to continue the series: the forecast steps' timestamps. Values keep
//! the f64 they were parsed as (the family may derive a column from them), and a family that reads each point's
//! wall clock gets the rows' and the forecast steps' clocks ([`clocks`]), as written in their offset.

use engines::host::wall_clock::WallClock;
use engines::request::{Limits, RequestFields, TargetValues, TimeValue};

use super::axis::TimeAxis;
use super::error::{DataError, Loc, Result};
use super::series::{check_future, grid_error, locate, no_future, Context, RawSeries};
use super::timestamps::{GridError, Stamp};
use super::Series;

/// A series' rows in time order.
#[derive(Debug, Clone)]
pub struct AsGiven {
    /// `[variate][time]`, f64 as parsed, in time order.
    pub target: Vec<Vec<f64>>,
    /// The rows' timestamps in time order (empty without timestamps).
    pub stamps: Vec<Stamp>,
    /// The axis that continues the series, when asked for and the series has timestamps.
    pub axis: Option<TimeAxis>,
}

/// The rows of `raw` sorted by time (stable; input order without timestamps), checked: no two at one instant,
/// no missing value. `continued`: also infer the axis that continues the series (`json`: a request that could
/// give `future_timestamps` instead, said in the error when the series cannot be continued).
pub fn rows(raw: &RawSeries, cx: &Context<'_>, at: &str, continued: bool, json: bool) -> Result<AsGiven> {
    let nt = cx.target_names.len();
    let n = raw.locs.len();
    let mut order: Vec<usize> = (0..n).collect();
    if !raw.stamps.is_empty() {
        order.sort_by_key(|&r| raw.stamps[r].at);
        let sorted: Vec<Stamp> = order.iter().map(|&r| raw.stamps[r]).collect();
        if let Some(i) = (1..n).find(|&i| sorted[i].at == sorted[i - 1].at) {
            return Err(grid_error(GridError::Duplicate { i }, raw, &order, &sorted, cx, at));
        }
    }
    for &r in &order {
        if let Some(v) = (0..nt).find(|&v| raw.values[r * nt + v].is_nan()) {
            return Err(missing(raw, r, &cx.target_names[v], cx, at));
        }
    }
    let target = (0..nt).map(|v| order.iter().map(|&r| raw.values[r * nt + v]).collect()).collect();
    let stamps: Vec<Stamp> =
        if raw.stamps.is_empty() { Vec::new() } else { order.iter().map(|&r| raw.stamps[r]).collect() };
    let axis = match continued && !stamps.is_empty() {
        true => Some(locate(raw, cx, at).map_err(|e| cannot_continue(e, json))?.axis),
        false => None,
    };
    Ok(AsGiven { target, stamps, axis })
}

/// The error for a missing value of row `r` in `column`.
fn missing(raw: &RawSeries, r: usize, column: &str, cx: &Context<'_>, at: &str) -> DataError {
    let title = cx.limits.shape.title;
    let fix =
        format!("{title} takes no missing points: give the row a value in every column, or drop the row");
    match raw.locs[r] {
        // a JSON request's point: named by its index, as the request's own checks name points
        Loc::Index(i) => DataError::input(at, format!("column `{column}`, row {i} is missing (null)"), fix),
        loc => {
            let in_series = raw.id.as_ref().map_or_else(String::new, |id| format!("series {id}: "));
            DataError::input(
                loc.at(cx.source),
                format!("{in_series}column `{column}` has no value (empty, NaN or null)"),
                fix,
            )
        }
    }
}

/// A calendar error of a series that is only continued, not placed on a grid.
fn cannot_continue(e: DataError, json: bool) -> DataError {
    match e {
        DataError::Input { at, message } => DataError::Input {
            at,
            message: format!(
                "{message} (the forecast steps' timestamps continue the series' calendar{})",
                if json { "; a request may give them as `future_timestamps` instead" } else { "" }
            ),
        },
        e => e,
    }
}

/// The wall clocks of `stamps` (each as written in its offset: the clock a family reads), for a request `at`;
/// `field` names them in errors.
pub fn clocks(stamps: &[Stamp], field: &str, at: &str) -> Result<Vec<TimeValue>> {
    stamps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let l = s.local();
            let clock = WallClock::new(
                i32::from(l.year()),
                l.month() as u32,
                l.day() as u32,
                l.hour() as u32,
                l.minute() as u32,
                l.second() as u32,
                l.subsec_nanosecond() as u32,
            )
            .map_err(|e| {
                DataError::at(
                    at,
                    format!("`{field}` row {i} ({s}): {e}; give timestamps of the years 0000–9999"),
                )
            })?;
            Ok(TimeValue::Clock(clock))
        })
        .collect()
}

/// The `horizon` forecast steps' timestamps that continue `axis`, and their clocks; a horizon over the engine's
/// limit is refused first (nothing is built for it).
pub fn continued(
    axis: &TimeAxis,
    horizon: usize,
    limits: &Limits,
    at: &str,
) -> Result<(Vec<Stamp>, Vec<TimeValue>)> {
    limits.check_horizon(horizon, at)?;
    let steps = axis.future(horizon).ok_or_else(|| no_future(at))?;
    let clocks = clocks(&steps, "future_timestamps", at)?;
    Ok((steps, clocks))
}

/// Checks given forecast-step timestamps: each after the one before, the first after the series' `last`.
pub fn check_future_stamps(future: &[Stamp], last: &Stamp, at: &str) -> Result<()> {
    let fix = "give the forecast steps' timestamps in time order, after the series' last one";
    for (i, s) in future.iter().enumerate() {
        let before = if i == 0 { last } else { &future[i - 1] };
        if s.at <= before.at {
            // named only here: a request's every step would otherwise format a name it never shows
            let what = match i {
                0 => "the series' last timestamp".to_string(),
                _ => format!("future_timestamps[{}]", i - 1),
            };
            return Err(DataError::input(
                at,
                format!("future_timestamps[{i}] ({s}) is not after {what} ({before})"),
                fix,
            ));
        }
    }
    Ok(())
}

/// A table series of such a family as a validated request: its rows as given, named by the family's columns,
/// with the wall clocks of its rows and forecast steps when the family reads them.
pub fn assemble(raw: RawSeries, cx: &Context<'_>, at: String) -> Result<Series> {
    let shape = &cx.limits.shape;
    let given = rows(&raw, cx, &at, true, false)?;
    let mut fields = RequestFields::from_target(raw.id, TargetValues::F64(given.target));
    fields.columns = shape.columns.map(|_| cx.target_names.to_vec());
    if shape.reads_timestamps && !given.stamps.is_empty() {
        fields.timestamps = Some(clocks(&given.stamps, "timestamps", &at)?);
        // a table gives no horizon of its own: the command line's (validation asks for it when absent)
        if let (Some(axis), Some(h)) = (&given.axis, cx.overrides.horizon) {
            fields.future_timestamps = Some(continued(axis, h, cx.limits, &at)?.1);
        }
    }
    let request = fields.validate(&at, cx.overrides, cx.limits)?;
    check_future(given.axis.as_ref(), request.horizon, &at)?;
    let target_names = cx.target_names.to_vec();
    Ok(Series { request, at, target_names, time: given.axis, future: None, rows: given.stamps })
}

#[cfg(test)]
mod tests {
    use engines::request::{Overrides, RequestShape};
    use exporter::registry::family::InputColumn;

    use super::super::calendar::CalendarOptions;
    use super::super::series::{Collector, IdRef};
    use super::super::timestamps::{parse_text, EpochUnit};
    use super::*;

    const COLUMNS: &[InputColumn] = &[
        InputColumn { name: "open", derived_when_absent: None },
        InputColumn { name: "close", derived_when_absent: None },
    ];

    fn shape() -> RequestShape {
        RequestShape {
            title: "Candles",
            columns: Some(COLUMNS),
            reads_timestamps: true,
            missing_points: false,
            ..RequestShape::default()
        }
    }

    /// Rows `(id, stamp, open, close)` of `t.csv` (line 2 on), assembled with horizon 2.
    fn assemble_rows(rows: &[(&str, &str, f64, f64)]) -> Result<Vec<Series>> {
        let mut c = Collector::new(2);
        for (line, (id, ts, o, cl)) in rows.iter().enumerate() {
            let stamp = parse_text(ts, EpochUnit::Seconds).unwrap();
            let values = [(!o.is_nan()).then_some(*o), (!cl.is_nan()).then_some(*cl)];
            c.push(Some(IdRef::Str(id)), Loc::Line(line as u64 + 2), Some(stamp), &values);
        }
        let names = vec!["open".to_string(), "close".to_string()];
        let o = Overrides { horizon: Some(2), ..Overrides::default() };
        let limits = Limits { shape: shape(), ..Limits::default() };
        let cx = Context {
            source: "t.csv",
            target_names: &names,
            freq: None,
            calendar: &CalendarOptions::default(),
            overrides: &o,
            limits: &limits,
        };
        c.series
            .into_iter()
            .map(|r| {
                let at = super::super::series::series_at("t.csv", r.id.as_ref());
                assemble(r, &cx, at)
            })
            .collect()
    }

    #[test]
    fn gaps_are_kept_as_rows_and_unsorted_rows_are_sorted() {
        // a weekday series with a gap (Wednesday missing), given out of order
        let s = assemble_rows(&[
            ("a", "2024-01-04", 4.0, 4.5),
            ("a", "2024-01-01", 1.0, 1.5),
            ("a", "2024-01-02", 2.1, 2.5),
            ("a", "2024-01-05", 5.0, 5.5),
        ])
        .unwrap();
        let r = &s[0].request;
        // four rows, no missing point where Wednesday would be
        assert_eq!(
            r.target,
            vec![
                vec![Some(1.0), Some(2.1), Some(4.0), Some(5.0)],
                vec![Some(1.5), Some(2.5), Some(4.5), Some(5.5)]
            ]
        );
        // the values as parsed travel only when a column is derived (none here)
        assert!(r.target_f64.is_none());
        assert_eq!(r.columns, vec!["open", "close"]);
        let clocks: Vec<String> = r.timestamps.iter().map(ToString::to_string).collect();
        assert_eq!(
            clocks,
            ["2024-01-01T00:00:00", "2024-01-02T00:00:00", "2024-01-04T00:00:00", "2024-01-05T00:00:00"]
        );
        // the calendar continues it: the next two days after Friday 5 January
        let future: Vec<String> = r.future_timestamps.iter().map(ToString::to_string).collect();
        assert_eq!(future.len(), 2);
        assert!(s[0].time.is_some());
    }

    /// A family that derives an absent column gets the values as parsed, in f64, from a table too.
    #[test]
    fn a_derived_column_gets_the_values_as_parsed() {
        const DERIVES: &[InputColumn] = &[
            InputColumn { name: "open", derived_when_absent: None },
            InputColumn { name: "close", derived_when_absent: None },
            InputColumn { name: "amount", derived_when_absent: Some("open × close") },
        ];
        let limits =
            Limits { shape: RequestShape { columns: Some(DERIVES), ..shape() }, ..Limits::default() };
        let table =
            "ds,open,close,note\n2024-01-01,0.1,100.3,x\n2024-01-02,0.2,100.7,y\n2024-01-03,0.3,101.1,z\n";
        let o = Overrides { horizon: Some(1), ..Overrides::default() };
        let opts = super::super::ReadOptions::default();
        let d = super::super::parse(
            table.as_bytes().to_vec(),
            super::super::Format::Csv,
            "t.csv",
            &opts,
            &o,
            &limits,
        )
        .unwrap();
        let r = &d.series[0].request;
        assert_eq!(r.columns, vec!["open", "close"]);
        assert_eq!(r.target_f64.as_ref().unwrap()[0], vec![0.1, 0.2, 0.3]);
        assert_eq!(r.target_f64.as_ref().unwrap()[1], vec![100.3, 100.7, 101.1]);
        assert_eq!(r.target[0], vec![Some(0.1f32), Some(0.2), Some(0.3)]);
        assert_eq!(d.series[0].target_names, vec!["open", "close"]);
    }

    #[test]
    fn duplicates_and_missing_values_are_refused_naming_the_rows() {
        let e = assemble_rows(&[
            ("a", "2024-01-01", 1.0, 1.5),
            ("a", "2024-01-02", 2.0, 2.5),
            ("a", "2024-01-01", 3.0, 3.5),
        ])
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "t.csv:4: series a: timestamp 2024-01-01 is also on line 2; keep one row per time step"
        );
        let e = assemble_rows(&[
            ("a", "2024-01-01", 1.0, 1.5),
            ("a", "2024-01-02", 2.0, f64::NAN),
            ("a", "2024-01-03", 3.0, 3.5),
        ])
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "t.csv:3: series a: column `close` has no value (empty, NaN or null); Candles takes no missing points: \
             give the row a value in every column, or drop the row"
        );
    }

    /// JSON requests of the toy family through the tables layer's reader.
    fn json(text: &str, overrides: &Overrides) -> Result<Vec<Series>> {
        let limits = Limits { shape: shape(), max_horizon: 8, ..Limits::default() };
        let opts = super::super::ReadOptions::default();
        super::super::json::read(text, true, "r.jsonl", &opts, overrides, &limits).map(|(s, _)| s)
    }

    #[test]
    fn json_requests_are_their_rows_as_given() {
        // Monday to Friday with the Wednesday missing, given out of order
        let text =
            r#"{"target": [[4, 1, 2, 5], [4.5, 1.5, 2.5, 5.5]], "horizon": 2, "columns": ["open", "close"],
            "timestamps": ["2024-01-04", "2024-01-01", "2024-01-02", "2024-01-05"]}"#
                .replace('\n', " ");
        let s = json(&text, &Overrides::default()).unwrap();
        let r = &s[0].request;
        assert_eq!(r.target[0], vec![Some(1.0), Some(2.0), Some(4.0), Some(5.0)]);
        assert_eq!(r.timestamps.len(), 4);
        assert_eq!(r.future_timestamps.len(), 2);
        assert_eq!(s[0].target_names, vec!["open", "close"]);
        assert!(s[0].future.is_none() && s[0].time.is_some());
        // the request's own forecast steps: handed over as clocks, and written back as given
        let text = r#"{"target": [[1, 2], [1, 2]], "horizon": 2, "timestamps": ["2024-01-01T09:30:00+01:00", 1704101400],
            "future_timestamps": ["2024-01-01T11:30:00Z", "2024-01-01T12:30:00Z"]}"#
            .replace('\n', " ");
        let s = json(&text, &Overrides::default()).unwrap();
        let r = &s[0].request;
        assert_eq!(r.timestamps[0].to_string(), "2024-01-01T09:30:00");
        assert_eq!(r.future_timestamps[1].to_string(), "2024-01-01T12:30:00");
        assert_eq!(s[0].future.as_ref().unwrap()[0].to_text(), "2024-01-01T11:30:00Z");
    }

    #[test]
    fn json_errors_name_the_request_row_and_fix() {
        let e = |t: &str| json(&t.replace('\n', " "), &Overrides::default()).unwrap_err().to_string();
        assert_eq!(
            e(r#"{"target": [[1, 2], [1, null]], "horizon": 1, "timestamps": ["2024-01-02", "2024-01-01"]}"#),
            "r.jsonl:1: column `close`, row 1 is missing (null); Candles takes no missing points: give the row a value \
             in every column, or drop the row"
        );
        assert!(e(
            r#"{"target": [[1, 2], [1, 2]], "horizon": 1, "timestamps": ["2024-01-02", "2024-01-02"]}"#
        )
        .starts_with("r.jsonl:1: timestamps[1]: timestamp 2024-01-02 is also on timestamps[0]"));
        let late = r#"{"target": [[1, 2], [1, 2]], "horizon": 1, "timestamps": ["2024-01-01", "2024-01-02"],
            "future_timestamps": ["2024-01-02"]}"#;
        assert!(
            e(late).contains("future_timestamps[0] (2024-01-02) is not after the series' last timestamp"),
            "{}",
            e(late)
        );
        let bad = r#"{"target": [[1, 2], [1, 2]], "horizon": 1, "timestamps": ["2024-01-01", "2024-01-02"],
            "future_timestamps": ["soon"]}"#;
        assert!(
            e(bad).starts_with("r.jsonl:1: future_timestamps[0]: `soon` is not a timestamp"),
            "{}",
            e(bad)
        );
        // no timestamps: the family reads them
        assert!(e(r#"{"target": [[1, 2], [1, 2]], "horizon": 1}"#).contains("`timestamps` is missing"));
        // a horizon over the engine's limit is refused before its steps are built
        let far = r#"{"target": [[1, 2], [1, 2]], "horizon": 1000000000, "timestamps": ["2024-01-01", "2024-01-02"]}"#;
        assert!(e(far).contains("horizon 1000000000 exceed this engine's limit of 8"), "{}", e(far));
        // a series that cannot be continued says a request may give its steps
        let one = r#"{"target": [[1], [1]], "horizon": 1, "timestamps": ["2024-01-01"]}"#;
        assert!(
            e(one).contains("one timestamp is not enough") && e(one).contains("`future_timestamps` instead"),
            "{}",
            e(one)
        );
        let given = r#"{"target": [[1], [1]], "horizon": 1, "timestamps": ["2024-01-01"], "future_timestamps": ["2024-01-02"]}"#;
        assert!(json(given, &Overrides::default()).is_ok());
    }

    #[test]
    fn clocks_are_the_wall_clock_as_written() {
        let s = |t: &str| parse_text(t, EpochUnit::Seconds).unwrap();
        let c = clocks(&[s("2024-01-31T23:30:00-05:00"), s("1706745600")], "timestamps", "r").unwrap();
        let TimeValue::Clock(first) = c[0] else { panic!() };
        assert_eq!(first.to_string(), "2024-01-31T23:30:00");
        let TimeValue::Clock(second) = c[1] else { panic!() };
        assert_eq!(second.to_string(), "2024-02-01T00:00:00");
        let e = check_future_stamps(&[s("2024-02-01"), s("2024-02-01")], &s("2024-01-31"), "r").unwrap_err();
        assert!(
            e.to_string().contains("future_timestamps[1] (2024-02-01) is not after future_timestamps[0]"),
            "{e}"
        );
        let e = check_future_stamps(&[s("2024-01-30")], &s("2024-01-31"), "r").unwrap_err();
        assert!(e.to_string().contains("is not after the series' last timestamp (2024-01-31)"), "{e}");
    }
}
