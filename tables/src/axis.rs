//! [`TimeAxis`]: the time axis of a series, enough to continue it — its last timestamp, its frequency and, for
//! series observed in weekly sessions, its calendar ([`super::calendar`]). [`TimeAxis::future`] gives the
//! timestamps of the forecast steps, continuing the series at its frequency (walking its session's open slots),
//! written with the offset of the series' last timestamp (or its zone's); [`TimeAxis::past`], its mirror, the
//! series' own grid points before the last (what a backtest labels its windows with). On a session calendar both
//! walk once, each step from the one before; [`TimeAxis::at`] walks from the last timestamp every time, so
//! calling it for each of `n` positions would walk `O(n²)` session steps.
//!
//! A module of its own because it sits above both the timestamp primitives ([`super::timestamps`]) and the
//! calendar, which is built on those primitives.

use std::sync::Arc;

use jiff::civil::Date;
use jiff::Timestamp;

use super::calendar::{Calendar, Zone};
use super::timestamps::{Freq, MonthAnchor, Stamp, StampStyle};

/// The time axis of a series: enough to continue it.
#[derive(Debug, Clone)]
pub struct TimeAxis {
    pub last: Stamp,
    pub freq: Freq,
    pub anchor: MonthAnchor,
    /// The series' session ([`super::calendar`]): its steps walk the open slots. `None`: continuous, every
    /// `freq` step is a grid point.
    pub calendar: Option<Arc<Calendar>>,
    /// Instants (nanoseconds, sorted) of the series' rows that are off its session: each is a grid point of its
    /// own between the session's ([`super::calendar::positions`]). Empty without a calendar.
    pub off_session: Arc<[i128]>,
}

impl TimeAxis {
    /// A continuous axis (no session calendar).
    pub fn continuous(last: Stamp, freq: Freq, anchor: MonthAnchor) -> Self {
        TimeAxis { last, freq, anchor, calendar: None, off_session: Arc::from([]) }
    }

    /// The calendar as reported: its open slots, or `continuous`.
    pub fn calendar_text(&self) -> String {
        super::calendar::describe(self.calendar.as_deref())
    }

    /// The timestamps of steps `1..=horizon` after the last one, in the last one's style and offset. `None` when
    /// a step falls outside the range of timestamps (year 9999).
    pub fn future(&self, horizon: usize) -> Option<Vec<Stamp>> {
        let stamps: Vec<Stamp> = self.steps(1).take(horizon).collect();
        (stamps.len() == horizon).then_some(stamps)
    }

    /// The timestamps of the `n` grid points before the last one, oldest first: `at(-n)`, …, `at(-1)`, in one
    /// walk back (the mirror of [`TimeAxis::future`]). Fewer, the most recent ones, when a step falls outside the
    /// range of timestamps (every step before it does too). The vector grows with the walk: a caller bounds `n`.
    pub fn past(&self, n: usize) -> Vec<Stamp> {
        let mut stamps: Vec<Stamp> = self.steps(-1).take(n).collect();
        stamps.reverse();
        stamps
    }

    /// The timestamps of steps 1, 2, … after the last one (`dir` 1) or before it (`dir` -1), each walked from the
    /// one before; it ends at the first step outside the range of timestamps.
    fn steps(&self, dir: i64) -> impl Iterator<Item = Stamp> + '_ {
        let mut t = self.last.at.as_nanosecond();
        (1..)
            .map(move |k: i64| match &self.calendar {
                Some(cal) => {
                    t = self.walk(cal, t, dir)?;
                    Some(self.session_stamp(cal, t))
                }
                None => self.grid_at(dir * k),
            })
            .map_while(|stamp| stamp)
    }

    /// The grid point `k` points from `from` (back for `k < 0`): the session's instants and the rows off it.
    fn walk(&self, cal: &Calendar, from: i128, k: i64) -> Option<i128> {
        if self.off_session.is_empty() {
            return cal.step_from(from, k);
        }
        let rows = &self.off_session;
        let mut t = from;
        for _ in 0..k.unsigned_abs() {
            t = if k > 0 {
                let row = rows.get(rows.partition_point(|&r| r <= t)).copied();
                match (cal.next_after(t), row) {
                    (Some(s), Some(r)) => s.min(r),
                    (s, r) => s.or(r)?,
                }
            } else {
                let row = rows.partition_point(|&r| r < t).checked_sub(1).map(|i| rows[i]);
                match (cal.last_before(t), row) {
                    (Some(s), Some(r)) => s.max(r),
                    (s, r) => s.or(r)?,
                }
            };
        }
        Some(t)
    }

    /// A session instant, written like the last timestamp; with offsets, in the zone's offset at that instant
    /// (a named zone changes offset with daylight saving time).
    fn session_stamp(&self, cal: &Calendar, t: i128) -> Stamp {
        let at = Timestamp::from_nanosecond(t).expect("walks stay in range");
        let offset = match (self.last.style, cal.zone()) {
            (StampStyle::Offset, Zone::Named(_) | Zone::Written(_)) => cal.zone().offset(at),
            _ => self.last.offset,
        };
        Stamp { at, offset, style: self.last.style }
    }

    /// The timestamp `k` steps after the last one (`k` ≤ 0: the series' own grid points, 0 being the last), in
    /// the last one's style and offset. `None` outside the range of timestamps.
    pub fn at(&self, k: i64) -> Option<Stamp> {
        if let Some(cal) = &self.calendar {
            let t = self.walk(cal, self.last.at.as_nanosecond(), k)?;
            return Some(self.session_stamp(cal, t));
        }
        self.grid_at(k)
    }

    /// The timestamp `k` steps of the frequency after the last one (a continuous axis).
    fn grid_at(&self, k: i64) -> Option<Stamp> {
        let at = match self.freq {
            Freq::Fixed(ns) => {
                Timestamp::from_nanosecond(self.last.at.as_nanosecond() + ns * k as i128).ok()?
            }
            Freq::Months(n) => {
                let local = self.last.local();
                let date = add_months(local.date(), n as i64 * k, self.anchor)?;
                self.last.offset.to_timestamp(date.to_datetime(local.time())).ok()?
            }
        };
        Some(Stamp { at, ..self.last })
    }
}

/// `date` moved by `months`, landing on the anchor's day.
fn add_months(date: Date, months: i64, anchor: MonthAnchor) -> Option<Date> {
    let index = date.year() as i64 * 12 + (date.month() as i64 - 1) + months;
    let (year, month) = (i16::try_from(index.div_euclid(12)).ok()?, index.rem_euclid(12) as i8 + 1);
    let first = Date::new(year, month, 1).ok()?;
    let day = match anchor {
        MonthAnchor::End => first.days_in_month(),
        MonthAnchor::Day(d) => d.min(first.days_in_month()),
    };
    Date::new(year, month, day).ok()
}
