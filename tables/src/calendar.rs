//! Session calendars: the weekly slots in which a series is observed (trading days, an FX week, every hour of a
//! 24/7 market), so that closed time is neither missing points nor forecast steps.
//!
//! * [`Calendar`]: open weekly slots (a bitmap over 7 days × the slots of one day at the series' step, Monday
//!   first), holiday dates (closed whole days) and the [`Zone`] the slots are read in. A named IANA zone follows
//!   daylight saving time: an FX week that opens Sunday 17:00 New York time opens at 21:00 UTC in summer and
//!   22:00 UTC in winter. Session instants are walked in UTC order one offset segment at a time
//!   ([`Calendar::next_after`], [`Calendar::last_before`]), so a clock that jumps forward skips its missing slots
//!   and one that falls back visits its repeated slots twice, in order.
//!   Its slot table (`calendar/slots.rs`) is built in linear time and shared by the calendars of one session, so
//!   nothing before the request limits is super-linear.
//! * [`infer`], [`infer_auto`]: the calendar of sorted timestamps, from their typical weeks
//!   (`calendar/infer.rs`), in their own zone or, for stamps in UTC whose session is not stable, in a market's.
//! * [`positions`]: each timestamp's point on the calendar's grid (a row off the session is a point of its own).
//! * [`CalendarOptions`]: `--calendar auto|continuous|weekdays`, `--timezone`, `--holidays` (and the request
//!   fields `calendar`, `timezone`, `holidays` of `/v1/forecast`).

use std::cell::Cell;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use jiff::civil::Date;
use jiff::tz::{Offset, TimeZone};
use jiff::Timestamp;

use super::timestamps::{duration_text, Stamp, StampStyle};

mod infer;
mod slots;

pub use infer::{infer, infer_auto, Inferred, ATYPICAL_WEEKS, MARKET_ZONES};
use slots::Slots;

const NANOS_PER_SECOND: i128 = 1_000_000_000;
pub(crate) const DAY: i128 = 86_400 * NANOS_PER_SECOND;
const WEEK: i128 = 7 * DAY;
/// Complete weeks a series needs before its session is inferred; with fewer it stays continuous.
pub const MIN_WEEKS: usize = 4;
/// Slots of one week at most (one-minute steps); finer series stay continuous.
const MAX_WEEK_SLOTS: i128 = 7 * 1_440;
/// Steps of one walk from a session instant to the next: each skips a closed run or a holiday, so this bounds
/// how many holidays in a row a walk crosses (and ends a walk that can find no open slot).
const WALK_LIMIT: usize = 10_000;
/// Holiday dates at most (a file, or a request's `holidays`).
pub const MAX_HOLIDAYS: usize = 100_000;
const DAY_NAMES: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// How `--calendar` chooses a series' calendar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CalendarMode {
    /// Inferred from the series' timestamps.
    #[default]
    Auto,
    /// The fixed-step grid: every step between the first and last timestamps is a grid point.
    Continuous,
    /// Monday to Friday, every slot of the day.
    Weekdays,
}

impl CalendarMode {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "auto" => Ok(CalendarMode::Auto),
            "continuous" => Ok(CalendarMode::Continuous),
            "weekdays" => Ok(CalendarMode::Weekdays),
            other => Err(format!("calendar `{other}` is not one of auto, continuous, weekdays")),
        }
    }
}

/// The calendar flags (or request fields) of a read.
#[derive(Debug, Clone, Default)]
pub struct CalendarOptions {
    pub mode: CalendarMode,
    /// `--timezone`: the zone the slots are read in (default: the offset of the series' last timestamp).
    pub zone: Option<TimeZone>,
    /// `--holidays`: closed dates, as days since 1970-01-01.
    pub holidays: Arc<BTreeSet<i64>>,
}

impl CalendarOptions {
    /// From the flags: `--calendar` (`auto`, `continuous`, `weekdays`), `--timezone`, `--holidays FILE`.
    pub fn from_flags(
        mode: CalendarMode,
        zone: Option<&str>,
        holidays: Option<&std::path::Path>,
    ) -> Result<Self, String> {
        let zone = zone.map(|z| parse_zone(z).map_err(|e| format!("--timezone: {e}"))).transpose()?;
        let holidays = match holidays {
            None => BTreeSet::new(),
            Some(path) => {
                let name = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!("--holidays {name}: {e}; give a text file of YYYY-MM-DD dates, one a line")
                })?;
                parse_holidays(&text, &name)?
            }
        };
        Ok(CalendarOptions { mode, zone, holidays: Arc::new(holidays) })
    }
}

/// Parses an IANA time zone name (`America/New_York`, `UTC`) from jiff's bundled database.
pub fn parse_zone(name: &str) -> Result<TimeZone, String> {
    if name.len() > 64 {
        return Err(
            "time zone names are at most 64 characters; give an IANA name such as America/New_York".into()
        );
    }
    TimeZone::get(name).map_err(|_| {
        format!(
            "`{name}` is not a time zone of the IANA database; give a name such as America/New_York, \
             Europe/London, Asia/Tokyo or UTC"
        )
    })
}

/// Days since 1970-01-01 of a date.
fn day_number(date: Date) -> i64 {
    let at = Offset::UTC.to_timestamp(date.to_datetime(jiff::civil::Time::midnight())).expect("dates fit");
    at.as_second().div_euclid(86_400)
}

/// Parses one holiday date (`YYYY-MM-DD`).
pub fn parse_holiday(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let date: Date = t.parse().ok().filter(|_| t.len() == 10).ok_or_else(|| {
        format!("`{t}` is not a date; write one date per line as YYYY-MM-DD (# starts a comment)")
    })?;
    Ok(day_number(date))
}

/// Parses a holiday file: one `YYYY-MM-DD` per line; blank lines and `#` comments are skipped. Errors name the
/// line (`FILE:LINE`).
pub fn parse_holidays(text: &str, source: &str) -> Result<BTreeSet<i64>, String> {
    let mut days = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let day = parse_holiday(line).map_err(|e| format!("{source}:{}: {e}", i + 1))?;
        days.insert(day);
        if days.len() > MAX_HOLIDAYS {
            return Err(format!(
                "{source}: more than {MAX_HOLIDAYS} holidays; give the dates the series spans"
            ));
        }
    }
    Ok(days)
}

/// The zone a calendar's slots are read in.
#[derive(Debug, Clone)]
pub enum Zone {
    /// One offset all year (the series' own, or a date-only series' UTC).
    Fixed(Offset),
    /// An IANA zone: the offset follows daylight saving time.
    Named(TimeZone),
    /// The offsets the series' own timestamps were written with, when they change (a series exported with its
    /// zone's daylight saving time): each offset holds from the timestamp that first carries it. After the last
    /// timestamp the last offset holds.
    Written(Arc<Vec<(i128, Offset)>>),
}

impl Zone {
    fn offset_at(&self, t: i128) -> i128 {
        match self {
            Zone::Fixed(o) => o.seconds() as i128 * NANOS_PER_SECOND,
            Zone::Named(tz) => tz.to_offset(timestamp(t)).seconds() as i128 * NANOS_PER_SECOND,
            Zone::Written(_) => self.offset(timestamp(t)).seconds() as i128 * NANOS_PER_SECOND,
        }
    }

    /// The offset to write an instant with.
    pub fn offset(&self, at: Timestamp) -> Offset {
        match self {
            Zone::Fixed(o) => *o,
            Zone::Named(tz) => tz.to_offset(at),
            Zone::Written(changes) => {
                let i = changes.partition_point(|&(start, _)| start <= at.as_nanosecond());
                changes[i.saturating_sub(1)].1
            }
        }
    }

    /// The first offset change after `t`.
    fn next_transition(&self, t: i128) -> Option<i128> {
        match self {
            Zone::Fixed(_) => None,
            Zone::Named(tz) => tz.following(timestamp(t)).next().map(|tr| tr.timestamp().as_nanosecond()),
            Zone::Written(changes) => {
                changes.get(changes.partition_point(|&(start, _)| start <= t)).map(|&(start, _)| start)
            }
        }
    }

    /// The last offset change at or before `t`.
    fn last_transition(&self, t: i128) -> Option<i128> {
        match self {
            Zone::Fixed(_) => None,
            Zone::Named(tz) => {
                tz.preceding(timestamp(t.saturating_add(1))).next().map(|tr| tr.timestamp().as_nanosecond())
            }
            // The first entry holds from the beginning of time: it is no change.
            Zone::Written(changes) => {
                let i = changes.partition_point(|&(start, _)| start <= t);
                (i >= 2).then(|| changes[i - 1].0)
            }
        }
    }

    fn name(&self) -> String {
        match self {
            Zone::Fixed(o) if o.seconds() == 0 => "UTC".into(),
            Zone::Fixed(o) => format!("UTC{o}"),
            Zone::Named(tz) => tz.iana_name().unwrap_or("UTC").to_string(),
            Zone::Written(_) => "(the timestamps' offsets)".into(),
        }
    }
}

thread_local! {
    /// Slot visits of this thread's walks ([`slots_walked`]).
    static WALKED: Cell<u64> = const { Cell::new(0) };
}

/// Slot visits this thread's session walks have made ([`Calendar::next_after`], [`Calendar::last_before`]: one
/// per turn of their loops). Tests of code that walks calendars for a client read it to show that the walking
/// grows linearly with what it labels (one thread-local add a turn: nothing beside the turn's zone look-ups).
pub fn slots_walked() -> u64 {
    WALKED.with(Cell::get)
}

/// Counts one slot visit of a walk.
#[inline]
fn visit() {
    WALKED.with(|w| w.set(w.get().wrapping_add(1)));
}

fn timestamp(t: i128) -> Timestamp {
    Timestamp::from_nanosecond(t.clamp(Timestamp::MIN.as_nanosecond(), Timestamp::MAX.as_nanosecond()))
        .expect("clamped into range")
}

/// A weekly session: which slots of the week are open, which dates are closed, and the zone they are read in.
#[derive(Debug, Clone)]
pub struct Calendar {
    /// The open slots of the week at the series' step and phase, shared by every calendar of the same session.
    slots: Arc<Slots>,
    per_day: i128,
    holidays: Arc<BTreeSet<i64>>,
    zone: Zone,
    /// The zone was inferred (the stamps' own UTC gave no stable session): the description says so.
    zone_inferred: bool,
}

/// Why a calendar cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CalendarError {
    /// No slot of the week is open.
    Empty,
    /// The step does not divide one day (or is not below one week).
    Step(String),
    /// A timestamp (this text) on a date the holidays close.
    Holiday(String),
}

impl fmt::Display for CalendarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CalendarError::Empty => f.write_str(
                "the calendar has no open slot, so no timestamp could ever be on it; pass --calendar continuous \
                 (or `\"calendar\": \"continuous\"`)",
            ),
            CalendarError::Holiday(stamp) => write!(
                f,
                "timestamp {stamp} is on a holiday of the calendar; remove the row or the date from the holidays"
            ),
            CalendarError::Step(step) => write!(
                f,
                "a session calendar needs a step that divides one day and is at least one minute, and the \
                 series' step is {step}; pass --calendar auto or continuous"
            ),
        }
    }
}

impl Calendar {
    /// A calendar of `open` slots (`7 × DAY / step`, Monday 00:00 first, shifted by `phase`). Linear in the
    /// slots of a week, and shared with every calendar of the same step, phase and open slots ([`Slots`]).
    pub fn new(
        step: i128,
        phase: i128,
        open: Vec<bool>,
        holidays: Arc<BTreeSet<i64>>,
        zone: Zone,
    ) -> Result<Calendar, CalendarError> {
        if !session_step(step) {
            return Err(CalendarError::Step(duration_text(step)));
        }
        assert_eq!(open.len() as i128, 7 * DAY / step, "one flag per slot of the week");
        let slots = Slots::shared(step, phase.rem_euclid(step), open).ok_or(CalendarError::Empty)?;
        Ok(Calendar { slots, per_day: DAY / step, holidays, zone, zone_inferred: false })
    }

    /// The same session, its zone marked as inferred (its description says so).
    pub(crate) fn in_inferred_zone(mut self) -> Calendar {
        self.zone_inferred = true;
        self
    }

    /// Monday to Friday, every slot of the day.
    pub fn weekdays(
        step: i128,
        phase: i128,
        holidays: Arc<BTreeSet<i64>>,
        zone: Zone,
    ) -> Result<Self, CalendarError> {
        if !session_step(step) {
            return Err(CalendarError::Step(duration_text(step)));
        }
        let per_day = (DAY / step) as usize;
        let open = (0..7 * per_day).map(|w| w / per_day < 5).collect();
        Calendar::new(step, phase, open, holidays, zone)
    }

    pub fn step(&self) -> i128 {
        self.slots.step
    }

    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// Open slots in one week (holidays aside).
    pub fn open_per_week(&self) -> usize {
        self.slots.open_count()
    }

    /// Every slot of the week is open (holidays aside).
    pub fn every_slot(&self) -> bool {
        self.slots.open_count() == self.slots.per_week()
    }

    /// Slot `n` (counted in local time from 1970-01-01 00:00 + phase): its day and its slot of the week.
    fn slot(&self, n: i128) -> (i64, usize) {
        let day = n.div_euclid(self.per_day);
        let weekday = (day + 3).rem_euclid(7); // 1970-01-01 was a Thursday
        (day as i64, (weekday * self.per_day + n.rem_euclid(self.per_day)) as usize)
    }

    /// `t` is a session instant: on a slot boundary, in an open slot, not on a holiday.
    pub fn contains(&self, t: i128) -> bool {
        let local = t + self.zone.offset_at(t) - self.slots.phase;
        if local.rem_euclid(self.slots.step) != 0 {
            return false;
        }
        let (day, w) = self.slot(local.div_euclid(self.slots.step));
        self.slots.open[w] && !self.holidays.contains(&day)
    }

    /// Why `t` is not a session instant (`None` when it is).
    pub fn refusal(&self, t: i128) -> Option<&'static str> {
        let local = t + self.zone.offset_at(t) - self.slots.phase;
        if local.rem_euclid(self.slots.step) != 0 {
            return Some("is not on one of the calendar's slots");
        }
        let (day, w) = self.slot(local.div_euclid(self.slots.step));
        if self.holidays.contains(&day) {
            Some("is on a holiday")
        } else if !self.slots.open[w] {
            Some("is in a slot the calendar has closed")
        } else {
            None
        }
    }

    /// The first session instant after `t` (`None` past the range of timestamps, or after [`WALK_LIMIT`]
    /// closed runs and holidays).
    pub fn next_after(&self, t: i128) -> Option<i128> {
        let mut lo = t.checked_add(1)?;
        let mut budget = WALK_LIMIT;
        'segment: loop {
            // The offset is constant on [lo, end).
            let off = self.zone.offset_at(lo);
            let end = self.zone.next_transition(lo);
            let mut n = (lo + off - self.slots.phase).div_euclid(self.slots.step);
            if (lo + off - self.slots.phase).rem_euclid(self.slots.step) != 0 {
                n += 1;
            }
            loop {
                budget = budget.checked_sub(1)?;
                visit();
                let u = n * self.slots.step + self.slots.phase - off;
                if u > Timestamp::MAX.as_nanosecond() {
                    return None;
                }
                if let Some(e) = end.filter(|&e| u >= e) {
                    lo = e;
                    continue 'segment;
                }
                let (day, w) = self.slot(n);
                if self.holidays.contains(&day) {
                    n = (day as i128 + 1) * self.per_day;
                } else if !self.slots.open[w] {
                    n += self.slots.ahead(w);
                } else {
                    return Some(u);
                }
            }
        }
    }

    /// The last session instant before `t`.
    pub fn last_before(&self, t: i128) -> Option<i128> {
        let mut hi = t.checked_sub(1)?;
        let mut budget = WALK_LIMIT;
        'segment: loop {
            // The offset is constant on [start, hi].
            let off = self.zone.offset_at(hi);
            let start = self.zone.last_transition(hi);
            let mut n = (hi + off - self.slots.phase).div_euclid(self.slots.step);
            loop {
                budget = budget.checked_sub(1)?;
                visit();
                let u = n * self.slots.step + self.slots.phase - off;
                if u < Timestamp::MIN.as_nanosecond() {
                    return None;
                }
                if let Some(s) = start.filter(|&s| u < s) {
                    hi = s - 1;
                    continue 'segment;
                }
                let (day, w) = self.slot(n);
                if self.holidays.contains(&day) {
                    n = day as i128 * self.per_day - 1;
                } else if !self.slots.open[w] {
                    n -= self.slots.behind(w);
                } else {
                    return Some(u);
                }
            }
        }
    }

    /// The instant `k` session steps from the session instant `from` (back for `k < 0`).
    pub fn step_from(&self, from: i128, k: i64) -> Option<i128> {
        let mut t = from;
        for _ in 0..k.unsigned_abs() {
            t = if k > 0 { self.next_after(t)? } else { self.last_before(t)? };
        }
        Some(t)
    }

    /// The open slots in a compact form: `weekdays Mon–Fri`, `Sun 17:00 – Fri 17:00 America/New_York, 1 hour`,
    /// `every slot, 1 hour`, plus the number of holidays.
    pub fn describe(&self) -> String {
        let step = duration_text(self.slots.step);
        let mut text = if self.every_slot() {
            format!("every slot, {step}")
        } else {
            let runs = self.slots.runs();
            let whole_days = runs
                .iter()
                .all(|&(a, len)| a % self.per_day as usize == 0 && len % self.per_day as usize == 0);
            if whole_days {
                let per_day = self.per_day as usize;
                let days: Vec<String> = runs
                    .iter()
                    .map(|&(a, len)| {
                        let (first, last) = (a / per_day, (a + len - 1) / per_day % 7);
                        if first == last {
                            DAY_NAMES[first].to_string()
                        } else {
                            format!("{}–{}", DAY_NAMES[first], DAY_NAMES[last])
                        }
                    })
                    .collect();
                let days = days.join(", ");
                let mut t = if days == "Mon–Fri" {
                    "weekdays Mon–Fri".to_string()
                } else {
                    format!("days {days}")
                };
                if self.per_day > 1
                    || self.slots.phase != 0
                    || !matches!(self.zone, Zone::Fixed(o) if o.seconds() == 0)
                {
                    t.push_str(&format!(" {}, {step}", self.zone_text()));
                }
                t
            } else if runs.len() > 8 {
                let open = self.slots.open_count();
                format!("{open} of {} weekly slots open {}, {step}", self.slots.per_week(), self.zone_text())
            } else {
                let runs: Vec<String> = runs
                    .iter()
                    .map(|&(a, len)| format!("{} – {}", self.slot_text(a), self.slot_text(a + len)))
                    .collect();
                format!("{} {}, {step}", runs.join(", "), self.zone_text())
            }
        };
        match self.holidays.len() {
            0 => {}
            1 => text.push_str(", 1 holiday"),
            n => text.push_str(&format!(", {n} holidays")),
        }
        text
    }

    /// The zone's name in descriptions, marked when it was inferred.
    fn zone_text(&self) -> String {
        match self.zone_inferred {
            true => format!("{} (zone inferred)", self.zone.name()),
            false => self.zone.name(),
        }
    }

    /// `Sun 17:00`: the start of slot `w` of the week (taken round the week).
    fn slot_text(&self, w: usize) -> String {
        let w = w % self.slots.open.len();
        let day = w / self.per_day as usize;
        let since = (w as i128 % self.per_day) * self.slots.step + self.slots.phase;
        let (h, m, s) = (
            since / (3_600 * NANOS_PER_SECOND),
            since / (60 * NANOS_PER_SECOND) % 60,
            since / NANOS_PER_SECOND % 60,
        );
        if s == 0 {
            format!("{} {h:02}:{m:02}", DAY_NAMES[day])
        } else {
            format!("{} {h:02}:{m:02}:{s:02}", DAY_NAMES[day])
        }
    }
}

/// Steps a session calendar can take: at least a minute... (and whole slots of a week), dividing a day.
pub(crate) fn session_step(step: i128) -> bool {
    step > 0 && step < WEEK && DAY % step == 0 && 7 * DAY / step <= MAX_WEEK_SLOTS
}

/// The zone a series' slots are read in: `--timezone`; else its timestamps' own offsets (one offset, or the
/// offsets as they change, e.g. with daylight saving time); date-only series are read by their dates (UTC
/// midnight), whatever `--timezone` says.
pub fn series_zone(stamps: &[Stamp], opts: &CalendarOptions) -> Zone {
    let last = stamps.last().map_or(Offset::UTC, |s| s.offset);
    let dates = stamps.iter().all(|s| s.style == StampStyle::Date);
    match &opts.zone {
        Some(tz) if !dates => Zone::Named(tz.clone()),
        _ if stamps.iter().any(|s| s.offset != last) => {
            let mut changes = vec![(Timestamp::MIN.as_nanosecond(), stamps[0].offset)];
            for s in stamps {
                if s.offset != changes.last().expect("one entry").1 {
                    changes.push((s.at.as_nanosecond(), s.offset));
                }
            }
            Zone::Written(Arc::new(changes))
        }
        _ => Zone::Fixed(last),
    }
}

/// The text of a calendar, or `continuous` without one (what stderr, JSON responses and tables report).
pub fn describe(calendar: Option<&Calendar>) -> String {
    calendar.map_or_else(|| "continuous".to_string(), Calendar::describe)
}

/// Grid positions of sorted timestamps on `cal`: the first is 0, and each later one counts the grid points since
/// it: the session instants and, with `off_session`, the rows that are not on the session (each a point of its
/// own, between the session instants around it: the calendar continues the series, whose rows are kept as given).
/// `Err(i)`: timestamp `i` is not a session instant (without `off_session`), or lies more than `limit` points in.
pub fn positions(
    stamps: &[Stamp],
    cal: &Calendar,
    limit: usize,
    off_session: bool,
) -> Result<Vec<usize>, usize> {
    let mut out = Vec::with_capacity(stamps.len());
    let Some(first) = stamps.first() else { return Ok(out) };
    if !off_session && !cal.contains(first.at.as_nanosecond()) {
        return Err(0);
    }
    let (mut t, mut pos) = (first.at.as_nanosecond(), 0usize);
    out.push(0);
    for (i, s) in stamps.iter().enumerate().skip(1) {
        let want = s.at.as_nanosecond();
        let on = cal.contains(want);
        if !off_session && !on {
            return Err(i);
        }
        // The session instants before `want`, then `want` itself.
        loop {
            match cal.next_after(t) {
                Some(n) if n < want => t = n,
                Some(n) if n == want => break,
                _ if !on => break,
                _ => return Err(i),
            }
            pos += 1;
            if pos > limit {
                return Err(i);
            }
        }
        pos += 1;
        if pos > limit {
            return Err(i);
        }
        t = want;
        out.push(pos);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
