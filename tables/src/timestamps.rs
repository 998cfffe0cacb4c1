//! Timestamps of a series: parsing, the series' frequency, and the timestamps of the forecast steps.
//!
//! * [`Stamp`]: one parsed timestamp: the instant (UTC), the offset it was written with, and its [`StampStyle`]
//!   (date, date-time, date-time with offset, epoch integer), so future timestamps are written the way the
//!   input wrote them. ISO 8601 text is parsed by jiff's Temporal parser ([`parse_text`]); integers are epochs in
//!   the unit the user names ([`EpochUnit`], seconds by default).
//! * [`Freq`]: the spacing of a series: a fixed duration (spacing is computed in UTC) or a whole number of
//!   calendar months (monthly, quarterly, yearly data: 28 to 31 days apart), anchored on a day of the month or on
//!   the month's end. [`infer_grid`] infers it from sorted timestamps and places each on a regular grid; rows
//!   missing from the grid become missing points.
//!
//! Continuing a series (its session calendar and the timestamps of the forecast steps) is [`super::axis`].

use std::collections::HashMap;
use std::fmt;

use jiff::civil::DateTime;
use jiff::fmt::temporal::{Pieces, PiecesOffset};
use jiff::tz::Offset;
use jiff::Timestamp;

const NANOS_PER_SECOND: i128 = 1_000_000_000;
const NANOS_PER_DAY: i128 = 86_400 * NANOS_PER_SECOND;

/// Unit of integer epoch timestamps (`--timestamp-unit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EpochUnit {
    #[default]
    Seconds,
    Millis,
    Micros,
    Nanos,
}

impl EpochUnit {
    fn nanos(self) -> i128 {
        match self {
            EpochUnit::Seconds => NANOS_PER_SECOND,
            EpochUnit::Millis => 1_000_000,
            EpochUnit::Micros => 1_000,
            EpochUnit::Nanos => 1,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EpochUnit::Seconds => "s",
            EpochUnit::Millis => "ms",
            EpochUnit::Micros => "us",
            EpochUnit::Nanos => "ns",
        }
    }

    /// The instant `value` units after 1970-01-01T00:00:00Z.
    pub fn instant(self, value: i64) -> Option<Timestamp> {
        Timestamp::from_nanosecond(value as i128 * self.nanos()).ok()
    }

    /// `t` in this unit (truncated toward zero).
    pub fn count(self, t: Timestamp) -> i64 {
        (t.as_nanosecond() / self.nanos()) as i64
    }
}

/// How a timestamp was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StampStyle {
    /// `2024-01-31` (midnight UTC for spacing).
    Date,
    /// `2024-01-31T06:00:00` without an offset (UTC for spacing).
    DateTime,
    /// `2024-01-31T06:00:00Z`.
    Zulu,
    /// `2024-01-31T06:00:00+02:00`.
    Offset,
    /// An integer number of units since 1970-01-01T00:00:00Z.
    Epoch(EpochUnit),
}

/// One parsed timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// The instant (UTC): spacing is measured on it.
    pub at: Timestamp,
    /// The offset it was written with (zero without one): calendar fields (day of the month) are read in it and
    /// future timestamps are written with it.
    pub offset: Offset,
    pub style: StampStyle,
}

impl Stamp {
    /// A timestamp written without an offset, e.g. an Arrow timestamp without a time zone.
    pub fn civil(at: Timestamp, style: StampStyle) -> Self {
        Stamp { at, offset: Offset::UTC, style }
    }

    /// The date and time on the clock of its offset.
    pub fn local(&self) -> DateTime {
        self.offset.to_datetime(self.at)
    }

    /// Text as the input wrote it (epochs as their integer).
    pub fn to_text(self) -> String {
        let local = self.local();
        match self.style {
            StampStyle::Date if local.time() == jiff::civil::Time::midnight() => local.date().to_string(),
            StampStyle::Date | StampStyle::DateTime => Pieces::from(local).to_string(),
            StampStyle::Zulu => Pieces::from(local).with_offset(PiecesOffset::Zulu).to_string(),
            StampStyle::Offset => Pieces::from(local).with_offset(self.offset).to_string(),
            StampStyle::Epoch(unit) => unit.count(self.at).to_string(),
        }
    }
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_text())
    }
}

/// Parses an ISO 8601 date or date-time, with or without an offset (`2024-01-31`, `2024-01-31 06:00`,
/// `2024-01-31T06:00:00.5Z`, `2024-01-31T06:00:00+02:00`), or an integer epoch in `unit`. The error says what
/// is accepted.
pub fn parse_text(text: &str, unit: EpochUnit) -> Result<Stamp, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().enumerate().all(|(i, b)| b.is_ascii_digit() || (i == 0 && b == b'-')) {
        let value: i64 = t.parse().map_err(|_| format!("`{t}` is too large for an epoch timestamp"))?;
        return epoch(value, unit);
    }
    if let Some(stamp) = plain_date_time(t) {
        return Ok(stamp);
    }
    let bad = || {
        format!(
            "`{t}` is not a timestamp; write ISO 8601 dates or date-times (2024-01-31, 2024-01-31T06:00:00, \
             2024-01-31T06:00:00+02:00) or integer epochs (--timestamp-unit s|ms|us|ns)"
        )
    };
    let pieces = Pieces::parse(t).map_err(|_| bad())?;
    let (time, style) = match pieces.time() {
        Some(time) => (time, StampStyle::DateTime),
        None => (jiff::civil::Time::midnight(), StampStyle::Date),
    };
    let local = pieces.date().to_datetime(time);
    let (offset, style) = match pieces.offset() {
        Some(PiecesOffset::Zulu) => (Offset::UTC, StampStyle::Zulu),
        Some(o) => (o.to_numeric_offset(), StampStyle::Offset),
        None if pieces.time_zone_annotation().is_some() => {
            return Err(format!(
                "`{t}` names a time zone but no offset; write the offset (e.g. 2024-01-31T06:00:00+01:00)"
            ))
        }
        None => (Offset::UTC, style),
    };
    let at = offset.to_timestamp(local).map_err(|_| bad())?;
    Ok(Stamp { at, offset, style })
}

/// `YYYY-MM-DDTHH:MM:SS` (or a space for the `T`), the form clients generating wall clocks send, read without
/// the general parser: the same stamp as [`parse_text`]'s, in a fraction of its time (a request's hundreds of
/// timestamps were an eighth of its decode). Anything else, or a field out of range, is `None`: the general
/// parser reads it or names the problem.
fn plain_date_time(t: &str) -> Option<Stamp> {
    let b = t.as_bytes();
    let shape = b.len() == 19 && b[4] == b'-' && b[7] == b'-' && matches!(b[10], b'T' | b' ');
    if !shape || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |at: usize, len: usize| {
        b[at..at + len]
            .iter()
            .try_fold(0i16, |n, &c| c.is_ascii_digit().then(|| n * 10 + i16::from(c - b'0')))
    };
    let small = |at: usize| num(at, 2).map(|n| n as i8);
    let local =
        DateTime::new(num(0, 4)?, small(5)?, small(8)?, small(11)?, small(14)?, small(17)?, 0).ok()?;
    let at = Offset::UTC.to_timestamp(local).ok()?;
    Some(Stamp { at, offset: Offset::UTC, style: StampStyle::DateTime })
}

/// An integer epoch timestamp.
pub fn epoch(value: i64, unit: EpochUnit) -> Result<Stamp, String> {
    let at = unit.instant(value).ok_or_else(|| {
        format!(
            "`{value}` is out of range as a timestamp in {}; check --timestamp-unit (s, ms, us or ns)",
            unit.name()
        )
    })?;
    Ok(Stamp::civil(at, StampStyle::Epoch(unit)))
}

/// The spacing of a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freq {
    /// A fixed duration in nanoseconds (> 0).
    Fixed(i128),
    /// `n` calendar months (monthly 1, quarterly 3, yearly 12).
    Months(i32),
}

impl fmt::Display for Freq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Freq::Months(12) => f.write_str("1 year"),
            Freq::Months(n) if n % 12 == 0 => write!(f, "{} years", n / 12),
            Freq::Months(1) => f.write_str("1 month"),
            Freq::Months(n) => write!(f, "{n} months"),
            Freq::Fixed(ns) => f.write_str(&duration_text(ns)),
        }
    }
}

/// `7 days`, `1 hour`, `90 seconds`, `1.5 seconds`: the largest unit that divides the duration.
pub fn duration_text(ns: i128) -> String {
    const UNITS: [(i128, &str); 7] = [
        (7 * NANOS_PER_DAY, "week"),
        (NANOS_PER_DAY, "day"),
        (3_600 * NANOS_PER_SECOND, "hour"),
        (60 * NANOS_PER_SECOND, "minute"),
        (NANOS_PER_SECOND, "second"),
        (1_000_000, "millisecond"),
        (1_000, "microsecond"),
    ];
    let (size, name) = UNITS.iter().copied().find(|(u, _)| ns % u == 0).unwrap_or((1, "nanosecond"));
    let n = ns / size;
    if n == 1 {
        format!("1 {name}")
    } else {
        format!("{n} {name}s")
    }
}

/// Parses `--freq`: a friendly or ISO 8601 duration (`1h`, `15m`, `1d`, `1w`, `1mo`, `3mo`, `1y`, `PT1H`, `P1M`).
/// Years and months are calendar months; days are 24 hours.
pub fn parse_freq(text: &str) -> Result<Freq, String> {
    let bad = |why: &str| {
        format!("--freq `{text}`: {why}; give one step such as 1h, 15m, 1d, 1w, 1mo, 3mo, 1y (or ISO 8601: PT1H, P1M)")
    };
    let span: jiff::Span = text.trim().parse().map_err(|_| bad("not a duration"))?;
    if span.signum() <= 0 {
        return Err(bad("the step must be positive"));
    }
    let months = span.get_years() as i64 * 12 + span.get_months() as i64;
    let fixed = span.get_weeks() as i128 * 7 * NANOS_PER_DAY
        + span.get_days() as i128 * NANOS_PER_DAY
        + span.get_hours() as i128 * 3_600 * NANOS_PER_SECOND
        + span.get_minutes() as i128 * 60 * NANOS_PER_SECOND
        + span.get_seconds() as i128 * NANOS_PER_SECOND
        + span.get_milliseconds() as i128 * 1_000_000
        + span.get_microseconds() as i128 * 1_000
        + span.get_nanoseconds() as i128;
    match (months, fixed) {
        (0, ns) => Ok(Freq::Fixed(ns)),
        (m, 0) => Ok(Freq::Months(i32::try_from(m).map_err(|_| bad("too many months"))?)),
        _ => Err(bad("months and shorter units cannot be mixed")),
    }
}

/// Where calendar-month steps land in the month.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MonthAnchor {
    /// The same day of the month (clamped to the month's length).
    Day(i8),
    /// The last day of the month.
    End,
}

/// Why timestamps do not lie on a regular grid. `i` indexes the sorted timestamps: the problem is between
/// `i - 1` and `i`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GridError {
    /// Two rows have the same instant.
    Duplicate { i: usize },
    /// A spacing that is not a whole number of steps.
    OffGrid { i: usize, step: Freq, gap: String },
    /// Steps that would leave more points missing than observed: the series changes frequency.
    Mixed { i: usize, step: Freq, gap: String, missing: usize, total: usize },
    /// One timestamp: no frequency to infer.
    Single,
    /// The step (forced) would make more grid points than [`MAX_GRID_PER_ROW`] per row: `points` (as text, it may
    /// not fit a `usize`) between the first and last of `rows` timestamps.
    TooSparse { step: Freq, points: String, rows: usize },
}

/// Grid points a series may span per row, whatever `--freq` forces: a step far below the series' own (`1ms` on
/// daily rows) would otherwise make a grid of billions of missing points. Checked before the grid is made.
pub const MAX_GRID_PER_ROW: usize = 64;

/// A series' frequency and where each timestamp sits on its grid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grid {
    pub freq: Freq,
    pub anchor: MonthAnchor,
    /// Grid position of each (sorted) timestamp; the first is 0.
    pub positions: Vec<usize>,
    /// Grid points from the first to the last timestamp.
    pub len: usize,
}

/// Infers the frequency of sorted timestamps (or checks `forced`) and places them on a regular grid.
///
/// Calendar months are tried first: timestamps that share their time of day and their day of the month (or all
/// fall on the last day of their month) are spaced in whole months. Otherwise the step is the most common
/// spacing (ties: the shortest), measured in UTC. Every spacing must be a whole number of steps; the points in
/// between become missing. When the missing points would outnumber the observed ones the series is taken to mix
/// frequencies (e.g. daily rows, then weekly ones), an error unless `forced`.
pub fn infer_grid(stamps: &[Stamp], forced: Option<Freq>) -> Result<Grid, GridError> {
    if let Some(i) = (1..stamps.len()).find(|&i| stamps[i].at == stamps[i - 1].at) {
        return Err(GridError::Duplicate { i });
    }
    let Some(last) = stamps.last() else {
        return Ok(Grid {
            freq: Freq::Fixed(NANOS_PER_DAY),
            anchor: MonthAnchor::End,
            positions: vec![],
            len: 0,
        });
    };
    let calendar = month_anchor(stamps);
    let last_day = last.local().date();
    let anchor = calendar.unwrap_or(if last_day == last_day.last_of_month() {
        MonthAnchor::End
    } else {
        MonthAnchor::Day(last_day.day())
    });
    // Offsets (in steps) of each timestamp from the first, under a frequency.
    let months = || stamps.iter().map(|s| month_index(s) - month_index(&stamps[0])).collect::<Vec<i128>>();
    let nanos =
        || stamps.iter().map(|s| s.at.as_nanosecond() - stamps[0].at.as_nanosecond()).collect::<Vec<_>>();
    let (freq, offsets, unit) = match forced {
        Some(f @ Freq::Months(n)) => {
            if calendar.is_none() && stamps.len() > 1 {
                let i = first_anchor_break(stamps);
                return Err(GridError::OffGrid { i, step: f, gap: gap_text(stamps, i) });
            }
            (f, months(), n as i128)
        }
        Some(f @ Freq::Fixed(ns)) => (f, nanos(), ns),
        None if stamps.len() < 2 => return Err(GridError::Single),
        None => match calendar {
            Some(_) => {
                let m = months();
                let step = common_step(&m);
                (Freq::Months(step as i32), m, step)
            }
            None => {
                let n = nanos();
                let step = common_step(&n);
                (Freq::Fixed(step), n, step)
            }
        },
    };
    let rows = stamps.len();
    // The offsets are sorted: the last one says how many points the grid spans, counted before any is made.
    let points = offsets.last().map_or(0, |&off| off / unit + 1);
    let too_sparse = || GridError::TooSparse { step: freq, points: points.to_string(), rows };
    let mut positions = Vec::with_capacity(rows);
    for (i, &off) in offsets.iter().enumerate() {
        if off % unit != 0 {
            return Err(GridError::OffGrid { i, step: freq, gap: gap_text(stamps, i) });
        }
        positions.push(usize::try_from(off / unit).map_err(|_| too_sparse())?);
    }
    let len = usize::try_from(points).map_err(|_| too_sparse())?;
    let missing = len - rows;
    if forced.is_none() && missing > rows {
        // Name the first spacing longer than the step: where the frequency changes.
        let i = (1..positions.len()).find(|&i| positions[i] - positions[i - 1] > 1).unwrap_or(1);
        return Err(GridError::Mixed { i, step: freq, gap: gap_text(stamps, i), missing, total: len });
    }
    if len > rows.saturating_mul(MAX_GRID_PER_ROW) {
        return Err(too_sparse());
    }
    Ok(Grid { freq, anchor, positions, len })
}

/// The months since year 0 of a timestamp's local date.
fn month_index(s: &Stamp) -> i128 {
    let d = s.local().date();
    d.year() as i128 * 12 + d.month() as i128 - 1
}

/// The anchor when the timestamps lie on whole months: one time of day, and one day of the month or the last
/// day of each month. `None` otherwise (and for a single timestamp, which says nothing of its spacing).
fn month_anchor(stamps: &[Stamp]) -> Option<MonthAnchor> {
    if stamps.len() < 2 {
        return None;
    }
    let first = stamps[0].local();
    if stamps.iter().any(|s| s.local().time() != first.time()) {
        return None;
    }
    if stamps.iter().all(|s| s.local().date() == s.local().date().last_of_month()) {
        return Some(MonthAnchor::End);
    }
    let day = first.day();
    stamps.iter().all(|s| s.local().day() == day).then_some(MonthAnchor::Day(day))
}

/// The first timestamp whose time of day or day of the month differs from the first one's.
fn first_anchor_break(stamps: &[Stamp]) -> usize {
    let first = stamps[0].local();
    (1..stamps.len())
        .find(|&i| {
            let l = stamps[i].local();
            l.time() != first.time() || l.day() != first.day()
        })
        .unwrap_or(1)
}

/// The spacing between timestamps `i - 1` and `i`, as text.
fn gap_text(stamps: &[Stamp], i: usize) -> String {
    let i = i.max(1);
    duration_text(stamps[i].at.as_nanosecond() - stamps[i - 1].at.as_nanosecond())
}

/// The most common spacing between consecutive offsets (ties: the shortest).
pub(crate) fn common_step(offsets: &[i128]) -> i128 {
    let mut counts: HashMap<i128, usize> = HashMap::new();
    for w in offsets.windows(2) {
        *counts.entry(w[1] - w[0]).or_default() += 1;
    }
    counts.into_iter().max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0))).map(|(d, _)| d).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    /// The general parser's reading of `t` (what [`parse_text`] did before its fast path).
    fn general(t: &str) -> Result<Stamp, String> {
        let pieces = Pieces::parse(t).map_err(|e| e.to_string())?;
        let time = pieces.time().ok_or("no time")?;
        if pieces.offset().is_some() || pieces.time_zone_annotation().is_some() {
            return Err("an offset".into());
        }
        let at = Offset::UTC.to_timestamp(pieces.date().to_datetime(time)).map_err(|e| e.to_string())?;
        Ok(Stamp { at, offset: Offset::UTC, style: StampStyle::DateTime })
    }

    #[test]
    fn plain_date_times_read_as_the_general_parser_reads_them() {
        let mut seen = 0;
        for y in ["0000", "0001", "1969", "1970", "2000", "2023", "2024", "2100", "9999"] {
            for m in ["00", "01", "02", "09", "12", "13"] {
                for d in ["00", "01", "28", "29", "30", "31", "32"] {
                    for time in
                        ["00:00:00", "23:59:59", "12:34:56", "24:00:00", "23:60:00", "23:59:60", "99:99:99"]
                    {
                        for sep in ['T', ' '] {
                            let t = format!("{y}-{m}-{d}{sep}{time}");
                            if let Some(fast) = plain_date_time(&t) {
                                assert_eq!(Ok(fast), general(&t), "{t}");
                                assert_eq!(parse_text(&t, EpochUnit::Seconds), Ok(fast), "{t}");
                                seen += 1;
                            } else {
                                // out of range: the general parser's reading (or its error) stands
                                let slow = parse_text(&t, EpochUnit::Seconds);
                                assert!(slow.is_err() || t.contains(":60"), "{t}: {slow:?}");
                            }
                        }
                    }
                }
            }
        }
        assert!(seen > 500, "{seen}");
        for t in [
            "2024-01-31T06:00:0",
            "2024-01-31T06:00:00Z",
            "2024-1-31T06:00:00",
            "+2024-01-31T06:00",
            "２０２４",
        ] {
            assert_eq!(plain_date_time(t), None, "{t}");
        }
    }

    use super::super::axis::TimeAxis;
    use super::*;

    fn p(s: &str) -> Stamp {
        parse_text(s, EpochUnit::Seconds).unwrap()
    }

    fn grid(xs: &[&str]) -> Result<Grid, GridError> {
        let stamps: Vec<Stamp> = xs.iter().map(|s| p(s)).collect();
        infer_grid(&stamps, None)
    }

    fn axis(xs: &[&str]) -> TimeAxis {
        let stamps: Vec<Stamp> = xs.iter().map(|s| p(s)).collect();
        let g = infer_grid(&stamps, None).unwrap();
        TimeAxis::continuous(*stamps.last().unwrap(), g.freq, g.anchor)
    }

    fn future(xs: &[&str], h: usize) -> Vec<String> {
        axis(xs).future(h).unwrap().iter().map(|s| s.to_text()).collect()
    }

    #[test]
    fn parses_dates_date_times_offsets_and_epochs() {
        let d = p("2024-01-31");
        assert_eq!((d.style, d.at.as_second()), (StampStyle::Date, 1_706_659_200));
        assert_eq!(p("2024-01-31T06:00:00").style, StampStyle::DateTime);
        assert_eq!(p("2024-01-31 06:00").at, p("2024-01-31T06:00:00Z").at);
        let o = p("2024-01-31T08:00:00+02:00");
        assert_eq!(
            (o.style, o.at, o.offset.seconds()),
            (StampStyle::Offset, p("2024-01-31T06:00:00Z").at, 7200)
        );
        assert_eq!(p("1706659200").at, d.at);
        assert_eq!(parse_text("1706659200000", EpochUnit::Millis).unwrap().at, d.at);
        assert_eq!(p("-86400").at.as_second(), -86_400);
        for bad in ["2024-13-01", "31/01/2024", "yesterday", "1.5e9", ""] {
            let e = parse_text(bad, EpochUnit::Seconds).unwrap_err();
            assert!(e.contains("is not a timestamp; write ISO 8601"), "{bad}: {e}");
        }
        assert!(parse_text("2024-01-31T06:00[Europe/Paris]", EpochUnit::Seconds)
            .unwrap_err()
            .contains("offset"));
        assert!(parse_text("99999999999999999", EpochUnit::Seconds).unwrap_err().contains("out of range"));
    }

    #[test]
    fn text_round_trips_in_the_input_style() {
        for s in [
            "2024-01-31",
            "2024-01-31T06:30:00",
            "2024-01-31T06:30:00Z",
            "2024-01-31T06:30:00+05:30",
            "1706659200",
        ] {
            assert_eq!(p(s).to_text(), s);
        }
        assert_eq!(p("2024-01-31T06:30:00.25-03:00").to_text(), "2024-01-31T06:30:00.25-03:00");
    }

    #[test]
    fn daily_weekly_hourly_and_epoch_series_continue_at_their_step() {
        assert_eq!(future(&["2024-02-27", "2024-02-28"], 3), ["2024-02-29", "2024-03-01", "2024-03-02"]);
        assert_eq!(future(&["1962-06-16", "1962-06-23", "1962-06-30"], 2), ["1962-07-07", "1962-07-14"]);
        assert_eq!(
            future(&["2024-03-30T22:00:00", "2024-03-30T23:00:00"], 2),
            ["2024-03-31T00:00:00", "2024-03-31T01:00:00"]
        );
        assert_eq!(future(&["1700000000", "1700003600"], 2), ["1700007200", "1700010800"]);
        let g = grid(&["1700000000", "1700003600"]).unwrap();
        assert_eq!(g.freq, Freq::Fixed(3_600 * NANOS_PER_SECOND));
    }

    #[test]
    fn offsets_space_in_utc_and_the_future_keeps_the_last_offset() {
        // 23:00+01:00 then 00:00+01:00: hourly; the forecast keeps +01:00.
        assert_eq!(
            future(&["2024-01-01T22:00:00+01:00", "2024-01-01T23:00:00+01:00"], 2),
            ["2024-01-02T00:00:00+01:00", "2024-01-02T01:00:00+01:00"]
        );
        // The same instants written in two offsets are one hour apart in UTC.
        let g = grid(&["2024-01-01T10:00:00+00:00", "2024-01-01T12:00:00+01:00"]).unwrap();
        assert_eq!(g.freq, Freq::Fixed(3_600 * NANOS_PER_SECOND));
        assert_eq!(future(&["2024-06-01T00:00:00Z", "2024-06-02T00:00:00Z"], 1), ["2024-06-03T00:00:00Z"]);
    }

    #[test]
    fn calendar_months_quarters_and_years() {
        assert_eq!(grid(&["2024-01-01", "2024-02-01", "2024-03-01"]).unwrap().freq, Freq::Months(1));
        assert_eq!(future(&["2023-11-01", "2023-12-01"], 3), ["2024-01-01", "2024-02-01", "2024-03-01"]);
        // month ends stay month ends (28, 29, 30, 31 days)
        assert_eq!(
            future(&["2023-11-30", "2023-12-31", "2024-01-31"], 4),
            ["2024-02-29", "2024-03-31", "2024-04-30", "2024-05-31"]
        );
        // the 30th clamps to February's end and comes back
        assert_eq!(future(&["2023-11-30", "2023-12-30", "2024-01-30"], 2), ["2024-02-29", "2024-03-30"]);
        // steps back in time (chart axes) land on the same days
        let a = axis(&["2023-11-30", "2023-12-30", "2024-01-30"]);
        let back: Vec<String> = (-3..=0).map(|k| a.at(k).unwrap().to_text()).collect();
        assert_eq!(back, ["2023-10-30", "2023-11-30", "2023-12-30", "2024-01-30"]);
        assert_eq!(axis(&["2024-01-01", "2024-01-08"]).at(-2).unwrap().to_text(), "2023-12-25");
        let q = grid(&["1959-01-01", "1959-04-01", "1959-07-01", "1960-01-01"]).unwrap();
        assert_eq!((q.freq, q.positions.clone(), q.len), (Freq::Months(3), vec![0, 1, 2, 4], 5));
        assert_eq!(future(&["2008-01-01", "2009-01-01"], 2), ["2010-01-01", "2011-01-01"]);
        assert_eq!(Freq::Months(12).to_string(), "1 year");
        assert_eq!(
            future(&["2024-01-15T12:00:00+02:00", "2024-02-15T12:00:00+02:00"], 1),
            ["2024-03-15T12:00:00+02:00"]
        );
    }

    #[test]
    fn gaps_become_grid_positions() {
        let g = grid(&["2024-01-01", "2024-01-02", "2024-01-04", "2024-01-05"]).unwrap();
        assert_eq!((g.freq, g.positions.clone(), g.len), (Freq::Fixed(NANOS_PER_DAY), vec![0, 1, 3, 4], 5));
    }

    #[test]
    fn irregular_mixed_duplicate_and_single_series_are_errors() {
        assert_eq!(grid(&["2024-01-01", "2024-01-01T00:00:00Z"]), Err(GridError::Duplicate { i: 1 }));
        let e = grid(&["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04T12:00:00"]).unwrap_err();
        assert_eq!(e, GridError::OffGrid { i: 3, step: Freq::Fixed(NANOS_PER_DAY), gap: "36 hours".into() });
        // daily, then weekly: six missing days per week
        let mixed = [
            "2024-01-01",
            "2024-01-02",
            "2024-01-03",
            "2024-01-04",
            "2024-01-05",
            "2024-01-12",
            "2024-01-19",
            "2024-01-26",
        ];
        assert!(
            matches!(grid(&mixed), Err(GridError::Mixed { i: 5, missing: 18, total: 26, .. })),
            "{:?}",
            grid(&mixed)
        );
        // weekly, with a few daily rows: those are off the weekly grid
        let e = grid(&["2024-01-01", "2024-01-08", "2024-01-15", "2024-01-22", "2024-01-23"]).unwrap_err();
        assert!(matches!(e, GridError::OffGrid { i: 4, step: Freq::Fixed(_), .. }), "{e:?}");
        assert!(infer_grid(
            &mixed.iter().map(|s| p(s)).collect::<Vec<_>>(),
            Some(Freq::Fixed(NANOS_PER_DAY))
        )
        .is_ok());
        assert_eq!(grid(&["2024-01-01"]), Err(GridError::Single));
        let one = [p("2024-01-31")];
        let g = infer_grid(&one, Some(Freq::Months(1))).unwrap();
        assert_eq!((g.anchor, g.len), (MonthAnchor::End, 1));
    }

    #[test]
    fn forced_frequencies() {
        assert_eq!(parse_freq("1h").unwrap(), Freq::Fixed(3_600 * NANOS_PER_SECOND));
        assert_eq!(parse_freq("PT15M").unwrap(), Freq::Fixed(900 * NANOS_PER_SECOND));
        assert_eq!(parse_freq("1w").unwrap(), Freq::Fixed(7 * NANOS_PER_DAY));
        assert_eq!(parse_freq("3mo").unwrap(), Freq::Months(3));
        assert_eq!(parse_freq("P1Y").unwrap(), Freq::Months(12));
        assert!(parse_freq("1mo 1d").unwrap_err().contains("cannot be mixed"));
        assert!(parse_freq("fast").unwrap_err().contains("not a duration"));
        assert!(parse_freq("0s").unwrap_err().contains("positive"));
        // a forced step that the data does not fit
        let stamps = [p("2024-01-01"), p("2024-01-02T12:00:00")];
        assert!(matches!(
            infer_grid(&stamps, Some(Freq::Fixed(NANOS_PER_DAY))),
            Err(GridError::OffGrid { i: 1, .. })
        ));
        let stamps = [p("2024-01-01"), p("2024-02-15")];
        assert!(matches!(infer_grid(&stamps, Some(Freq::Months(1))), Err(GridError::OffGrid { i: 1, .. })));
    }

    #[test]
    fn a_forced_step_far_below_the_series_own_is_refused_before_the_grid_is_made() {
        // 1ms on three daily rows would be a grid of 172,800,001 points (and 1ns over 20,000 years more than a
        // usize holds): counted from the last offset, refused, nothing allocated.
        let daily = [p("2024-01-01"), p("2024-01-02"), p("2024-01-03")];
        let e = infer_grid(&daily, Some(parse_freq("1ms").unwrap())).unwrap_err();
        assert_eq!(
            e,
            GridError::TooSparse { step: Freq::Fixed(1_000_000), points: "172800001".into(), rows: 3 }
        );
        let far = [p("-377000000000"), p("253000000000")];
        let e = infer_grid(&far, Some(Freq::Fixed(1))).unwrap_err();
        assert!(matches!(e, GridError::TooSparse { rows: 2, .. }), "{e:?}");
        // 64 points per row is the most: 3 rows over 192 hours fit, over 193 they do not.
        let hourly = |last: i64| [p("0"), p("3600"), p(&(last * 3_600).to_string())];
        assert_eq!(infer_grid(&hourly(191), Some(Freq::Fixed(3_600 * NANOS_PER_SECOND))).unwrap().len, 192);
        assert!(infer_grid(&hourly(192), Some(Freq::Fixed(3_600 * NANOS_PER_SECOND))).is_err());
    }
}
