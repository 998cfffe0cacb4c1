//! From rows to series: rows are grouped by series id ([`Collector`]), then each series is sorted by time, put on
//! its regular grid (gaps become missing points) and checked ([`assemble`]), ending as a validated forecast
//! request. Every reader (CSV, Parquet, JSON with timestamps) goes through here, so the same series gives the
//! same request whatever its format.

use std::collections::HashMap;

use engines::request::{Limits, Overrides, RequestFields, RequestId};

use std::sync::Arc;

use super::axis::TimeAxis;
use super::calendar::{self, Calendar, CalendarMode, CalendarOptions, Inferred};
use super::error::{DataError, Loc, Result};
use super::timestamps::{common_step, infer_grid, Freq, GridError, Stamp, MAX_GRID_PER_ROW};
use super::Series;

/// A series' values `[variate][time]`, `None` = missing.
pub type Target = Vec<Vec<Option<f32>>>;

/// The rows of one series, in input order.
#[derive(Debug, Clone, Default)]
pub struct RawSeries {
    pub id: Option<RequestId>,
    pub locs: Vec<Loc>,
    /// One per row when the input has timestamps, else empty.
    pub stamps: Vec<Stamp>,
    /// Row-major: `targets` values per row, as parsed (f64; rounded to f32 when the request is made, so a family
    /// that derives a column gets them unrounded), `NaN` = missing.
    pub values: Vec<f64>,
}

/// A value as a request point: `None` for a missing one (NaN), else rounded to f32.
pub fn point(x: f64) -> Option<f32> {
    (!x.is_nan()).then_some(x as f32)
}

/// A series id as a reader sees it (borrowed from the row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdRef<'a> {
    Str(&'a str),
    Int(i64),
}

/// Groups rows by series id, keeping the order in which ids first appear.
#[derive(Debug)]
pub struct Collector {
    targets: usize,
    by_str: HashMap<String, usize>,
    by_int: HashMap<i64, usize>,
    /// The series of the previous row: rows of one series usually come together.
    last: Option<(IdKey, usize)>,
    pub series: Vec<RawSeries>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum IdKey {
    None,
    Str(String),
    Int(i64),
}

impl Collector {
    pub fn new(targets: usize) -> Self {
        Collector { targets, by_str: HashMap::new(), by_int: HashMap::new(), last: None, series: Vec::new() }
    }

    /// Adds a row; `values` has one entry per target column (`None` = missing).
    pub fn push(&mut self, id: Option<IdRef<'_>>, loc: Loc, stamp: Option<Stamp>, values: &[Option<f64>]) {
        debug_assert_eq!(values.len(), self.targets);
        let s = self.index(id);
        let series = &mut self.series[s];
        series.locs.push(loc);
        if let Some(stamp) = stamp {
            series.stamps.push(stamp);
        }
        series.values.extend(values.iter().map(|x| x.unwrap_or(f64::NAN)));
    }

    fn index(&mut self, id: Option<IdRef<'_>>) -> usize {
        if let Some((key, s)) = &self.last {
            let same = match (key, id) {
                (IdKey::None, None) => true,
                (IdKey::Str(a), Some(IdRef::Str(b))) => a == b,
                (IdKey::Int(a), Some(IdRef::Int(b))) => *a == b,
                _ => false,
            };
            if same {
                return *s;
            }
        }
        let next = self.series.len();
        let (s, key, request_id) = match id {
            None => (0, IdKey::None, None),
            Some(IdRef::Str(v)) => {
                let s = *self.by_str.entry(v.to_string()).or_insert(next);
                (s, IdKey::Str(v.to_string()), Some(RequestId::Str(v.to_string())))
            }
            Some(IdRef::Int(v)) => {
                (*self.by_int.entry(v).or_insert(next), IdKey::Int(v), Some(RequestId::Int(v)))
            }
        };
        if s == self.series.len() {
            self.series.push(RawSeries { id: request_id, ..RawSeries::default() });
        }
        self.last = Some((key, s));
        s
    }
}

/// What assembling a series needs besides its rows.
pub struct Context<'a> {
    /// The input's name in messages.
    pub source: &'a str,
    pub target_names: &'a [String],
    pub freq: Option<Freq>,
    pub calendar: &'a CalendarOptions,
    pub overrides: &'a Overrides,
    pub limits: &'a Limits,
}

/// `source: series ID` (or `source` for a file that is one series).
pub fn series_at(source: &str, id: Option<&RequestId>) -> String {
    match id {
        Some(id) => format!("{source}: series {id}"),
        None => source.to_string(),
    }
}

/// Sorts a table series' rows by time, places them on its grid, checks them and validates the request (`at`
/// names the series; a family without missing points reads its rows as given instead: `super::as_given`).
pub fn assemble(raw: RawSeries, cx: &Context<'_>, at: String) -> Result<Series> {
    let (target, time) = place(&raw, cx, &at)?;
    for (v, series) in target.iter().enumerate() {
        if series.iter().all(Option::is_none) {
            return Err(DataError::input(
                &at,
                format!("column `{}` has no value", cx.target_names[v]),
                "give the series at least one value in every target column, or leave it out",
            ));
        }
    }
    let request = RequestFields::from_target(raw.id, target).validate(&at, cx.overrides, cx.limits)?;
    check_future(time.as_ref(), request.horizon, &at)?;
    Ok(Series { request, at, target_names: cx.target_names.to_vec(), time, future: None, rows: Vec::new() })
}

/// Checks that every forecast step has a timestamp, before anything runs: a horizon that runs past the year 9999
/// (or past the calendar's last open slot) is the request's fault, found after the engine's run it would be a
/// server error.
pub fn check_future(time: Option<&TimeAxis>, horizon: usize, at: &str) -> Result<()> {
    match (time, i64::try_from(horizon)) {
        (None, _) => Ok(()),
        (Some(axis), Ok(k)) if axis.at(k).is_some() => Ok(()),
        _ => Err(no_future(at)),
    }
}

/// The error for forecast steps without a timestamp.
pub fn no_future(at: &str) -> DataError {
    DataError::input(
        at,
        "the forecast steps run past the year 9999, or past the last open slot of the series' calendar \
         (thousands of holidays in a row)",
        "ask for a shorter horizon, or give fewer holidays",
    )
}

/// The target `[variate][time]` of a series' rows: in input order without timestamps; else sorted by time, on
/// the series' regular grid (rows missing from it are missing points), with the axis to continue it. `at` names
/// the series in errors about all of it.
pub fn place(raw: &RawSeries, cx: &Context<'_>, at: &str) -> Result<(Target, Option<TimeAxis>)> {
    let nt = cx.target_names.len();
    let rows = raw.locs.len();
    if raw.stamps.is_empty() {
        let target = (0..nt).map(|v| (0..rows).map(|r| point(raw.values[r * nt + v])).collect()).collect();
        return Ok((target, None));
    }
    let located = locate(raw, cx, at)?;
    let mut target = vec![vec![None; located.len]; nt];
    for (&r, &pos) in located.order.iter().zip(&located.positions) {
        for (v, series) in target.iter_mut().enumerate() {
            series[pos] = point(raw.values[r * nt + v]);
        }
    }
    Ok((target, Some(located.axis)))
}

/// Where the rows of a series with timestamps sit: their order in time, each one's position on the series' grid,
/// the grid's length, and the axis that continues it ([`locate`]).
pub struct Located {
    /// Row indices, sorted by time.
    pub order: Vec<usize>,
    /// The grid position of each row of `order`.
    pub positions: Vec<usize>,
    /// Grid points from the first row to the last.
    pub len: usize,
    pub axis: TimeAxis,
}

/// Sorts a series' rows by time (it has timestamps) and places them on its session calendar, or else on its
/// regular grid; errors name the rows at fault.
pub fn locate(raw: &RawSeries, cx: &Context<'_>, at: &str) -> Result<Located> {
    let rows = raw.locs.len();
    let mut order: Vec<usize> = (0..rows).collect();
    order.sort_by_key(|&r| raw.stamps[r].at);
    let sorted: Vec<Stamp> = order.iter().map(|&r| raw.stamps[r]).collect();
    if let Some((cal, positions)) = session(raw, &order, &sorted, cx, at)? {
        let len = positions.last().map_or(0, |p| p + 1);
        let off_session: Vec<i128> =
            sorted.iter().map(|s| s.at.as_nanosecond()).filter(|&t| !cal.contains(t)).collect();
        let last = *sorted.last().expect("a series has rows");
        let axis = TimeAxis {
            last,
            freq: Freq::Fixed(cal.step()),
            anchor: super::timestamps::MonthAnchor::End,
            calendar: Some(Arc::new(cal)),
            off_session: off_session.into(),
        };
        return Ok(Located { order, positions, len, axis });
    }
    let grid = infer_grid(&sorted, cx.freq).map_err(|e| grid_error(e, raw, &order, &sorted, cx, at))?;
    let last = *sorted.last().expect("a series has rows");
    let axis = TimeAxis::continuous(last, grid.freq, grid.anchor);
    Ok(Located { order, positions: grid.positions, len: grid.len, axis })
}

/// The series' session calendar and the grid position of each sorted timestamp on it, or `None` for the
/// continuous grid (`--calendar continuous`, or what inference found).
fn session(
    raw: &RawSeries,
    order: &[usize],
    sorted: &[Stamp],
    cx: &Context<'_>,
    at: &str,
) -> Result<Option<(Calendar, Vec<usize>)>> {
    let opts = cx.calendar;
    let fix = "pass --calendar continuous (request field `calendar`) to keep every step on the grid";
    let step = match (opts.mode, cx.freq) {
        (CalendarMode::Continuous, _) => return Ok(None),
        (_, Some(Freq::Fixed(ns))) => ns,
        (CalendarMode::Auto, Some(Freq::Months(_))) => return Ok(None),
        (CalendarMode::Weekdays, Some(f @ Freq::Months(_))) => {
            return Err(DataError::input(
                at,
                format!("--calendar weekdays needs a step that divides one day, and --freq gives {f}"),
                "pass --calendar auto or continuous, or a shorter --freq",
            ))
        }
        _ if sorted.len() < 2 || sorted.windows(2).any(|w| w[0].at == w[1].at) => return Ok(None),
        _ => {
            let offs: Vec<i128> =
                sorted.iter().map(|s| s.at.as_nanosecond() - sorted[0].at.as_nanosecond()).collect();
            common_step(&offs)
        }
    };
    let loc = |i: usize| raw.locs[order[i]].at(cx.source);
    let cal = match opts.mode {
        CalendarMode::Continuous => return Ok(None),
        CalendarMode::Auto => match calendar::infer_auto(sorted, step, opts) {
            Ok(Inferred::Session(cal)) => cal,
            Ok(Inferred::Continuous(_)) => return Ok(None),
            Err(e @ calendar::CalendarError::Holiday(_)) => {
                let i = sorted
                    .iter()
                    .position(|s| e == calendar::CalendarError::Holiday(s.to_string()))
                    .unwrap_or(0);
                return Err(DataError::at(loc(i), e.to_string()));
            }
            Err(e) => return Err(DataError::at(at, e.to_string())),
        },
        CalendarMode::Weekdays => {
            let zone = calendar::series_zone(sorted, opts);
            let phase = sorted[0].at.as_nanosecond() + zone_offset(&zone, &sorted[0]);
            calendar::Calendar::weekdays(step, phase, opts.holidays.clone(), zone)
                .map_err(|e| DataError::at(at, e.to_string()))?
        }
    };
    // Auto: a session leaving more slots missing than observed is not the series' session.
    let limit = match opts.mode {
        CalendarMode::Auto => 2 * sorted.len(),
        _ => sorted.len().saturating_mul(64),
    };
    // Auto: inference let only a few rows off the session (see `calendar::infer`); they are points of their own.
    let off_session = opts.mode == CalendarMode::Auto;
    match calendar::positions(sorted, &cal, limit, off_session) {
        Ok(p) => Ok(Some((cal, p))),
        Err(_) if opts.mode == CalendarMode::Auto => Ok(None),
        Err(i) => {
            let t = sorted[i].at.as_nanosecond();
            let why = cal.refusal(t).unwrap_or("is too far past the previous one");
            Err(DataError::input(
                loc(i),
                format!("timestamp {} {why} ({})", sorted[i], cal.describe()),
                format!("remove the row, or {fix}"),
            ))
        }
    }
}

fn zone_offset(zone: &calendar::Zone, s: &Stamp) -> i128 {
    zone.offset(s.at).seconds() as i128 * 1_000_000_000
}

/// A grid error as a message naming the rows at fault.
pub(super) fn grid_error(
    e: GridError,
    raw: &RawSeries,
    order: &[usize],
    sorted: &[Stamp],
    cx: &Context<'_>,
    at: &str,
) -> DataError {
    let loc = |i: usize| raw.locs[order[i]];
    let in_series = match &raw.id {
        Some(id) => format!("series {id}: "),
        None => String::new(),
    };
    let several = "if the file holds several series, name their id column with --id-column";
    match e {
        GridError::Duplicate { i } => {
            let fix = if raw.id.is_none() {
                format!("keep one row per time step ({several})")
            } else {
                "keep one row per time step".to_string()
            };
            DataError::input(
                loc(i).at(cx.source),
                format!("{in_series}timestamp {} is also on {}", sorted[i], loc(i - 1).name()),
                fix,
            )
        }
        GridError::OffGrid { i, step, gap } => {
            let whose = if cx.freq.is_some() { "the step given by --freq" } else { "the series' step" };
            DataError::input(
                loc(i).at(cx.source),
                format!(
                    "{in_series}timestamp {} is {gap} after {} ({}), not a whole number of {whose} ({step})",
                    sorted[i],
                    loc(i - 1).name(),
                    sorted[i - 1]
                ),
                "fix the timestamp; a series that changes frequency needs one series per frequency, or a step \
                 forced with --freq",
            )
        }
        GridError::Mixed { i, step, gap, missing, total } => DataError::input(
            at,
            format!(
                "the spacing changes from {step} to {gap} at {} ({}), which would leave {missing} of {total} points \
                 missing: the series mixes frequencies",
                loc(i).name(),
                sorted[i]
            ),
            "give each frequency its own series, or force one step with --freq (the points in between become \
             missing)",
        ),
        GridError::Single => DataError::input(
            at,
            "one timestamp is not enough to infer the series' frequency",
            "give the series at least two rows, or pass --freq (e.g. --freq 1d)",
        ),
        GridError::TooSparse { step, points, rows } => DataError::input(
            at,
            format!(
                "a step of {step} puts {points} grid points between the first and the last of its {rows} \
                 timestamps, more than {MAX_GRID_PER_ROW} per row: the step is far below the series' own"
            ),
            "give the series' own step with --freq (e.g. --freq 1d), or leave --freq out to infer it",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::super::timestamps::{parse_text, EpochUnit};
    use super::*;

    fn collect(rows: &[(&str, &str, Option<f32>)]) -> Collector {
        let mut c = Collector::new(1);
        for (line, (id, ts, y)) in rows.iter().enumerate() {
            let stamp = parse_text(ts, EpochUnit::Seconds).unwrap();
            c.push(Some(IdRef::Str(id)), Loc::Line(line as u64 + 2), Some(stamp), &[y.map(f64::from)]);
        }
        c
    }

    fn assemble_all(c: Collector) -> Result<Vec<Series>> {
        let names = vec!["y".to_string()];
        let o = Overrides { horizon: Some(2), ..Overrides::default() };
        let cx = Context {
            source: "t.csv",
            target_names: &names,
            freq: None,
            calendar: &CalendarOptions::default(),
            overrides: &o,
            limits: &Limits::default(),
        };
        c.series
            .into_iter()
            .map(|r| {
                let at = series_at(cx.source, r.id.as_ref());
                assemble(r, &cx, at)
            })
            .collect()
    }

    #[test]
    fn rows_group_by_id_sort_by_time_and_fill_gaps() {
        let c = collect(&[
            ("b", "2024-01-02", Some(2.0)),
            ("a", "2024-01-04", Some(40.0)),
            ("a", "2024-01-03", Some(30.0)),
            ("b", "2024-01-01", Some(1.0)),
            ("a", "2024-01-01", Some(10.0)),
            ("b", "2024-01-04", None),
            ("b", "2024-01-03", Some(3.0)),
        ]);
        let s = assemble_all(c).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].request.id, Some(RequestId::Str("b".into())));
        assert_eq!(s[0].request.target, vec![vec![Some(1.0), Some(2.0), Some(3.0), None]]);
        assert_eq!(s[0].time.as_ref().unwrap().last.to_text(), "2024-01-04");
        // a: 1 January, (2 January missing), 3 and 4 January
        assert_eq!(s[1].request.target, vec![vec![Some(10.0), None, Some(30.0), Some(40.0)]]);
        assert_eq!(s[1].at, "t.csv: series a");
    }

    #[test]
    fn a_forced_step_far_below_the_rows_is_an_error_naming_it() {
        let c = collect(&[
            ("a", "2024-01-01", Some(1.0)),
            ("a", "2024-01-02", Some(2.0)),
            ("a", "2024-01-03", None),
        ]);
        let names = vec!["y".to_string()];
        let o = Overrides { horizon: Some(2), ..Overrides::default() };
        let cx = Context {
            source: "t.csv",
            target_names: &names,
            freq: Some(Freq::Fixed(1_000_000)),
            calendar: &CalendarOptions::default(),
            overrides: &o,
            limits: &Limits::default(),
        };
        let raw = c.series.into_iter().next().unwrap();
        let at = series_at(cx.source, raw.id.as_ref());
        let e = assemble(raw, &cx, at).unwrap_err().to_string();
        assert_eq!(
            e,
            "t.csv: series a: a step of 1 millisecond puts 172800001 grid points between the first and the last of \
             its 3 timestamps, more than 64 per row: the step is far below the series' own; give the series' own \
             step with --freq (e.g. --freq 1d), or leave --freq out to infer it"
        );
    }

    #[test]
    fn errors_name_the_rows_and_the_fix() {
        let e = |rows: &[(&str, &str, Option<f32>)]| assemble_all(collect(rows)).unwrap_err().to_string();
        assert_eq!(
            e(&[
                ("a", "2024-01-01", Some(1.0)),
                ("a", "2024-01-02", Some(1.0)),
                ("a", "2024-01-01", Some(2.0))
            ]),
            "t.csv:4: series a: timestamp 2024-01-01 is also on line 2; keep one row per time step"
        );
        let msg = e(&[
            ("a", "2024-01-01", Some(1.0)),
            ("a", "2024-01-02", Some(1.0)),
            ("a", "2024-01-03", Some(1.0)),
            ("a", "2024-01-03T12:00:00", Some(1.0)),
        ]);
        assert!(
            msg.starts_with(
                "t.csv:5: series a: timestamp 2024-01-03T12:00:00 is 12 hours after line 4 (2024-01-03), not a \
                 whole number of the series' step (1 day); fix the timestamp"
            ),
            "{msg}"
        );
        let msg = e(&[("a", "2024-01-01", None), ("a", "2024-01-02", None)]);
        assert_eq!(
            msg,
            "t.csv: series a: column `y` has no value; give the series at least one value in every target column, \
             or leave it out"
        );
        let msg = e(&[("a", "2024-01-01", Some(1.0))]);
        assert!(
            msg.starts_with("t.csv: series a: one timestamp is not enough") && msg.contains("--freq"),
            "{msg}"
        );
    }
}
