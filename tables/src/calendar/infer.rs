//! Inferring a series' weekly session from its timestamps.
//!
//! * [`infer`]: the session of sorted timestamps in one zone. A slot is open when observed in at least half of
//!   the series' complete weeks, so the typical weeks decide: a holiday week (fewer rows) or the partial weeks at
//!   either end (not counted) do not close a slot. A week may hold a few rows outside the session (an extra bar
//!   after Friday's close, a holiday's odd hours): when at most one complete week in [`ATYPICAL_WEEKS`] has such
//!   rows, they stay points of the series, off its session ([`super::positions`]); more such weeks, or such a row
//!   in a partial week (where the series is continued from), leave the series continuous. So do fewer than
//!   [`MIN_WEEKS`] complete weeks, a step that is not below one week or does not divide a day, and timestamps off
//!   a common phase.
//! * [`infer_auto`]: `--calendar auto`. When the stamps carry no zone (naive, `Z` or epoch: UTC) and give no
//!   stable session (none, or one with a slot open in fewer than 3 complete weeks in 4), the market zones
//!   ([`MARKET_ZONES`]) are tried: a market that keeps its local hours across daylight saving time (an FX week
//!   opens Sunday 17:00 New York time, 21:00 or 22:00 UTC) has a stable session only in its own zone. The best
//!   fit is taken (fewest such slots, then fewest rows off the session; UTC's on a tie), and when it is a market
//!   zone, its description says that the zone was inferred.

use std::collections::BTreeSet;
use std::sync::Arc;

use jiff::tz::{Offset, TimeZone};

use super::{
    series_zone, session_step, Calendar, CalendarError, CalendarOptions, Stamp, StampStyle, Zone, DAY,
    MIN_WEEKS,
};

/// One complete week in this many may hold rows outside the session.
pub const ATYPICAL_WEEKS: usize = 8;

/// The zones `--calendar auto` tries, in this order, for stamps without a zone that give no stable session.
pub const MARKET_ZONES: [&str; 4] = ["America/New_York", "Europe/London", "Asia/Tokyo", "Australia/Sydney"];

/// What [`infer`] found.
#[derive(Debug, Clone)]
pub enum Inferred {
    Session(Calendar),
    /// The series stays on the fixed-step grid, and why (for tests and debugging).
    Continuous(#[cfg_attr(not(test), allow(dead_code))] String),
}

/// A session and how well it fits, or why there is none.
enum Fit {
    Session(Calendar, Quality),
    Continuous(String),
}

/// How well a session fits its series: fewer is better, compared in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Quality {
    /// Open slots observed in fewer than 3 of 4 complete weeks: in UTC, the FX week's first hour is open in
    /// summer only and its last in winter only.
    shaky: usize,
    /// Rows off the session.
    off: usize,
}

/// Infers the session of sorted, distinct timestamps spaced by `step` (nanoseconds) in `zone`.
pub fn infer(
    stamps: &[Stamp],
    step: i128,
    zone: Zone,
    holidays: &Arc<BTreeSet<i64>>,
) -> Result<Inferred, CalendarError> {
    Ok(match fit(stamps, step, zone, holidays)? {
        Fit::Session(cal, _) => Inferred::Session(cal),
        Fit::Continuous(why) => Inferred::Continuous(why),
    })
}

/// `--calendar auto`: the session in the series' zone ([`series_zone`]). For stamps without a zone (UTC) whose
/// session is not stable (none, or one with a shaky slot: see [`Quality`]), each market zone's is tried too, and
/// the best fit is taken (the series' own on a tie).
pub fn infer_auto(stamps: &[Stamp], step: i128, opts: &CalendarOptions) -> Result<Inferred, CalendarError> {
    let (mut best, why) = match fit(stamps, step, series_zone(stamps, opts), &opts.holidays)? {
        Fit::Session(cal, q) if q.shaky == 0 => return Ok(Inferred::Session(cal)),
        Fit::Session(cal, q) => (Some((cal, q, false)), String::new()),
        Fit::Continuous(why) => (None, why),
    };
    let utc = stamps.iter().all(|s| s.offset == Offset::UTC && s.style != StampStyle::Date);
    if opts.zone.is_none() && utc && session_step(step) {
        for name in MARKET_ZONES {
            let zone = Zone::Named(TimeZone::get(name).expect("the bundled database has the market zones"));
            // A zone where a row falls on a holiday is not the series' zone.
            if let Ok(Fit::Session(cal, q)) = fit(stamps, step, zone, &opts.holidays) {
                if best.as_ref().is_none_or(|(_, fewest, _)| q < *fewest) {
                    best = Some((cal, q, true));
                }
            }
        }
    }
    Ok(match best {
        Some((cal, _, true)) => Inferred::Session(cal.in_inferred_zone()),
        Some((cal, _, false)) => Inferred::Session(cal),
        None => Inferred::Continuous(why),
    })
}

/// The session of the timestamps in `zone`, with the count of rows off it. Linear in the rows and the slots of
/// a week.
fn fit(
    stamps: &[Stamp],
    step: i128,
    zone: Zone,
    holidays: &Arc<BTreeSet<i64>>,
) -> Result<Fit, CalendarError> {
    let continuous = |why: &str| Ok(Fit::Continuous(why.to_string()));
    if !session_step(step) {
        return continuous("its step is not a whole number of slots per day");
    }
    // Each row's slot number since 1970-01-01 00:00 local + phase: one i128 division a row, the rest in i64.
    let local = |s: &Stamp| {
        let t = s.at.as_nanosecond();
        t + zone.offset_at(t)
    };
    let Some(first) = stamps.first().map(local) else { return continuous("it has no timestamp") };
    let phase = first.rem_euclid(step);
    let mut numbers = Vec::with_capacity(stamps.len());
    for s in stamps {
        let since = local(s) - phase;
        let n = since.div_euclid(step);
        if n * step != since {
            return continuous("its timestamps are not all at the same time past the step");
        }
        numbers.push(i64::try_from(n).expect("timestamps are at least a minute apart in slots"));
    }
    let per_day = i64::try_from(DAY / step).expect("at most 1,440 slots a day");
    let slots = usize::try_from(7 * per_day).expect("session steps give at most 10,080 slots");
    // Slot `n`: its day, its week (Monday 00:00 local + phase) and its slot of the week.
    let day_of = |n: i64| n.div_euclid(per_day);
    let week_of = |n: i64| (day_of(n) + 3).div_euclid(7);
    let slot_of = |n: i64| {
        let w = (day_of(n) + 3).rem_euclid(7) * per_day + n.rem_euclid(per_day);
        usize::try_from(w).expect("a slot of the week")
    };
    // Weeks that lie wholly between the first and the last timestamp.
    let (n0, n1) = (numbers[0], *numbers.last().expect("a row"));
    let week_start = |w: i64| (w * 7 - 3) * per_day;
    let (w0, w1) = (week_of(n0), week_of(n1));
    let first_full = if week_start(w0) >= n0 { w0 } else { w0 + 1 };
    let last_full = if week_start(w1 + 1) <= n1 + 1 { w1 } else { w1 - 1 };
    let complete = usize::try_from(last_full - first_full + 1).unwrap_or(0);
    if complete < MIN_WEEKS {
        return continuous("it spans fewer than 4 complete weeks");
    }
    let in_complete = |n: i64| (first_full..=last_full).contains(&week_of(n));
    let mut seen = vec![0usize; slots];
    for &n in numbers.iter().filter(|&&n| in_complete(n)) {
        seen[slot_of(n)] += 1;
    }
    let open: Vec<bool> = seen.iter().map(|&c| 2 * c >= complete).collect();
    let shaky = seen.iter().filter(|&&c| 2 * c >= complete && 4 * c < 3 * complete).count();
    if !open.iter().any(|&o| o) {
        // Rows too sparse for any weekly pattern: the fixed-step grid decides (and refuses mixed frequencies).
        return continuous("no slot is observed in half of its complete weeks");
    }
    let cal = Calendar::new(step, phase, open, holidays.clone(), zone)?;
    if !holidays.is_empty() {
        if let Some(i) = numbers.iter().position(|&n| holidays.contains(&day_of(n))) {
            return Err(CalendarError::Holiday(stamps[i].to_string()));
        }
    }
    let (mut off, mut atypical, mut last_week, mut first_off) = (0usize, 0usize, None, None);
    for (s, &n) in stamps.iter().zip(&numbers) {
        if cal.slots.open[slot_of(n)] {
            continue;
        }
        let week = week_of(n);
        if !(first_full..=last_full).contains(&week) {
            return Ok(Fit::Continuous(format!(
                "timestamp {s} is in a slot the calendar has closed, outside its complete weeks"
            )));
        }
        off += 1;
        first_off.get_or_insert(s);
        if last_week != Some(week) {
            atypical += 1;
            last_week = Some(week);
        }
    }
    if atypical * ATYPICAL_WEEKS > complete {
        let s = first_off.expect("a row off the session");
        return Ok(Fit::Continuous(format!(
            "timestamp {s} is in a slot the calendar has closed of its weekly session, and {atypical} of its \
             {complete} complete weeks have such rows (at most 1 in {ATYPICAL_WEEKS} may)"
        )));
    }
    Ok(Fit::Session(cal, Quality { shaky, off }))
}
