//! Axis ticks and their labels, chosen here rather than by the plotting crate so that the chart model says
//! exactly what every axis shows (and tests can read it without rendering).
//!
//! * Value axes ([`value_ticks`]): multiples of 1, 2 or 5 × 10^k, labelled with as many decimals as the step
//!   needs, large values with an SI suffix (`1.5M`).
//! * Time axes ([`time_ticks`]): the x axis of a forecast chart counts grid steps of the series (0 = its last
//!   observation, 1..H the forecast). Ticks fall on steps that are round for the series' frequency (every 12
//!   months, every 13 weeks, every 6 hours, ...) and on round instants (January, midnight), and are labelled
//!   with the series' timestamps as the input wrote them; without timestamps, with the step numbers.
//! * Log axes ([`log_ticks`]): 1, 2 and 5 × 10^k.

use jiff::tz::Offset;

use tables::axis::TimeAxis;
use tables::timestamps::{Freq, Stamp, StampStyle};

/// One tick: where it is on its axis and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Tick {
    pub at: f64,
    pub label: String,
}

/// Ticks over `[lo, hi]` at the smallest 1-2-5 step that gives at most `max` of them (at least 2 allowed).
pub fn value_ticks(lo: f64, hi: f64, max: usize) -> Vec<Tick> {
    let max = max.max(2);
    let span = (hi - lo).abs().max(f64::MIN_POSITIVE);
    let mut step = 10f64.powf((span / max as f64).log10().floor());
    // 1, 2, 5, 10, 20, ...: at most three tries per decade, ten decades at the very most.
    for i in 0..30 {
        let s = step * [1.0, 2.0, 5.0][i % 3] * 10f64.powi(i as i32 / 3);
        if (hi / s).floor() - (lo / s).ceil() < max as f64 {
            step = s;
            break;
        }
    }
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    let values: Vec<f64> = (first..=last).map(|k| k as f64 * step).collect();
    let fmt = NumberFormat::new(&values, step);
    values.into_iter().map(|v| Tick { at: v, label: fmt.format(v) }).collect()
}

/// Ticks of a log axis over `[lo, hi]` (both > 0): 1, 2 and 5 × 10^k, fewer when the range spans many decades.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<Tick> {
    let decades = (hi / lo).log10();
    let mantissas: &[f64] = if decades > 4.0 { &[1.0] } else { &[1.0, 2.0, 5.0] };
    let mut out = Vec::new();
    let mut e = lo.log10().floor() as i32;
    while 10f64.powi(e) <= hi {
        for &m in mantissas {
            let v = m * 10f64.powi(e);
            if v >= lo && v <= hi {
                out.push(Tick { at: v, label: si(v) });
            }
        }
        e += 1;
    }
    out
}

/// A log axis value on its own: `500`, `2000`, `10k`, `0.05`.
fn si(v: f64) -> String {
    let (scale, suffix) = match v {
        v if v >= 1e12 => (1e12, "T"),
        v if v >= 1e9 => (1e9, "G"),
        v if v >= 1e6 => (1e6, "M"),
        v if v >= 1e4 => (1e3, "k"),
        _ => (1.0, ""),
    };
    // Twelve significant digits drop the float noise of powers of ten (0.1 × 0.5 = 0.05000000000000001).
    let x: f64 = format!("{:.12e}", v / scale).parse().unwrap_or(v / scale);
    format!("{x}{suffix}")
}

/// How the numbers of one axis are written: the decimals its step needs, and one SI scale for all.
struct NumberFormat {
    decimals: usize,
    scale: f64,
    suffix: &'static str,
}

impl NumberFormat {
    fn new(values: &[f64], step: f64) -> Self {
        let largest = values.iter().fold(0f64, |m, v| m.max(v.abs()));
        let (scale, suffix) = match largest {
            x if x >= 1e12 => (1e12, "T"),
            x if x >= 1e9 => (1e9, "G"),
            x if x >= 1e6 => (1e6, "M"),
            x if x >= 1e5 => (1e3, "k"),
            _ => (1.0, ""),
        };
        let scaled = step / scale;
        // The fewest decimals that write the step exactly (0.25 → 2, 5 → 0), at most 6.
        let decimals =
            (0..=6).find(|&d| ((scaled * 10f64.powi(d)).round() - scaled * 10f64.powi(d)).abs() < 1e-6);
        NumberFormat { decimals: decimals.unwrap_or(6) as usize, scale, suffix }
    }

    fn format(&self, v: f64) -> String {
        let text = format!("{:.*}", self.decimals, v / self.scale);
        // `-0.0` is `0.0`.
        let text = match text.strip_prefix('-') {
            Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
            _ => text,
        };
        format!("{text}{}", self.suffix)
    }
}

/// Ticks of a forecast chart's x axis over grid steps `first..=last` (0 = the series' last observation), at
/// most `max` of them. With a time axis they are labelled with the series' timestamps; without one, with the
/// step numbers.
pub fn time_ticks(axis: Option<&TimeAxis>, first: i64, last: i64, max: usize) -> Vec<Tick> {
    let max = max.max(2) as i64;
    // A session (trading days, an FX week) steps over closed time: ticks count its open slots, by weeks, from
    // the last observation.
    let session = axis.and_then(|a| a.calendar.as_deref()).filter(|c| !c.every_slot());
    let steps = match session {
        Some(c) => session_steps(c.open_per_week() as i64),
        None => candidate_steps(axis.map(|a| a.freq)),
    };
    let span = last - first + 1;
    // At most `(span - 1) / s + 1` multiples of `s` fall in `span` consecutive steps.
    let every = steps.into_iter().find(|&s| (span - 1) / s < max).unwrap_or(span.max(1));
    // The grid number of step 0, counted from a round origin (the epoch, or January of year 0), so that ticks
    // fall on round instants: every 12 months on January, every day on midnight.
    let origin = if session.is_some() { 0 } else { axis.map_or(0, grid_number) };
    (first..=last)
        .filter(|k| (origin + k).rem_euclid(every) == 0)
        .filter_map(|k| {
            let label = match axis {
                Some(a) => stamp_label(&a.at(k)?),
                None => k.to_string(),
            };
            Some(Tick { at: k as f64, label })
        })
        .collect()
}

/// A timestamp as an axis label: as the input wrote it; epochs as UTC date-times (an epoch number says little).
pub fn stamp_label(s: &Stamp) -> String {
    match s.style {
        StampStyle::Epoch(_) => {
            let midnight = s.local().time() == jiff::civil::Time::midnight();
            let style = if midnight { StampStyle::Date } else { StampStyle::Zulu };
            Stamp { at: s.at, offset: Offset::UTC, style }.to_text()
        }
        _ => s.to_text(),
    }
}

/// Tick spacings of a session with `week` open slots a week: 1, 2, then whole weeks (1, 2, 4, 13, 26, 52), then
/// 1-2-5 multiples of a year.
fn session_steps(week: i64) -> Vec<i64> {
    let mut steps: Vec<i64> =
        [1, 2].into_iter().chain([1, 2, 4, 13, 26, 52].map(|w| w * week.max(1))).collect();
    steps.sort_unstable();
    steps.dedup();
    let mut big = *steps.last().expect("one step at least");
    while big < i64::MAX / 100 {
        for m in [2, 5, 10] {
            steps.push(big * m);
        }
        big *= 10;
    }
    steps
}

/// Tick spacings in grid steps, smallest first: round numbers of the series' own unit (months, weeks, days,
/// hours, ...) that are whole numbers of its step, then 1-2-5 multiples of the largest.
fn candidate_steps(freq: Option<Freq>) -> Vec<i64> {
    const SECOND: i128 = 1_000_000_000;
    const DAY: i128 = 86_400 * SECOND;
    let mut steps: Vec<i64> = match freq {
        None => vec![1],
        Some(Freq::Months(n)) => [1, 2, 3, 6, 12, 24, 36, 60, 120, 240, 600, 1200]
            .iter()
            .filter(|&&m| m % n == 0)
            .map(|&m| (m / n) as i64)
            .collect(),
        Some(Freq::Fixed(step)) => {
            let round: [i128; 27] = [
                1,
                5,
                10,
                15,
                30,
                60,
                2 * 60,
                5 * 60,
                10 * 60,
                15 * 60,
                30 * 60,
                3_600,
                2 * 3_600,
                3 * 3_600,
                6 * 3_600,
                12 * 3_600,
                86_400,
                2 * 86_400,
                7 * 86_400,
                14 * 86_400,
                28 * 86_400,
                91 * 86_400,
                182 * 86_400,
                364 * 86_400,
                2 * 364 * 86_400,
                5 * 364 * 86_400,
                10 * 364 * 86_400,
            ];
            let mut s: Vec<i64> = round
                .iter()
                .map(|&secs| secs * SECOND)
                .filter(|&d| d >= step && d % step == 0)
                .map(|d| (d / step) as i64)
                .collect();
            if step % DAY != 0 && s.is_empty() {
                s.push(1);
            }
            s
        }
    };
    if steps.is_empty() {
        steps.push(1);
    }
    let mut big = *steps.last().expect("one step at least");
    while big < i64::MAX / 100 {
        for m in [2, 5, 10] {
            steps.push(big * m);
        }
        big *= 10;
    }
    steps.dedup();
    steps
}

/// The number of the last observation's grid step counted from a round origin: calendar months since January of
/// year 0 (in steps of the series), or whole steps since the Unix epoch.
fn grid_number(axis: &TimeAxis) -> i64 {
    match axis.freq {
        Freq::Months(n) => {
            let d = axis.last.local().date();
            (d.year() as i64 * 12 + d.month() as i64 - 1).div_euclid(n as i64)
        }
        Freq::Fixed(step) => {
            // Local time, so that daily ticks fall on the series' own midnight.
            let local = axis.last.at.as_nanosecond() + axis.last.offset.seconds() as i128 * 1_000_000_000;
            local.div_euclid(step) as i64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tables::timestamps::{infer_grid, parse_text, EpochUnit};

    fn labels(ticks: &[Tick]) -> Vec<&str> {
        ticks.iter().map(|t| t.label.as_str()).collect()
    }

    fn axis(stamps: &[&str]) -> TimeAxis {
        let stamps: Vec<Stamp> = stamps.iter().map(|s| parse_text(s, EpochUnit::Seconds).unwrap()).collect();
        let g = infer_grid(&stamps, None).unwrap();
        TimeAxis::continuous(*stamps.last().unwrap(), g.freq, g.anchor)
    }

    #[test]
    fn value_ticks_are_round_and_written_with_the_decimals_they_need() {
        let t = value_ticks(317.3, 324.9, 6);
        assert_eq!(labels(&t), ["318", "320", "322", "324"]);
        assert_eq!(t[0].at, 318.0);
        assert_eq!(labels(&value_ticks(-0.07, 0.31, 6)), ["0.0", "0.1", "0.2", "0.3"]);
        assert_eq!(labels(&value_ticks(-1.0, 1.0, 6)), ["-1.0", "-0.5", "0.0", "0.5", "1.0"]);
        assert_eq!(labels(&value_ticks(0.0, 0.03, 4)), ["0.00", "0.01", "0.02", "0.03"]);
        assert_eq!(labels(&value_ticks(1.2e6, 2.9e6, 5)), ["1.5M", "2.0M", "2.5M"]);
        assert_eq!(labels(&value_ticks(-250.0, 250.0, 6)), ["-200", "-100", "0", "100", "200"]);
        assert!(value_ticks(5.0, 5.0 + 1e-9, 6).len() <= 6);
    }

    #[test]
    fn log_ticks_cover_the_decades() {
        assert_eq!(
            labels(&log_ticks(15.0, 6000.0)),
            ["20", "50", "100", "200", "500", "1000", "2000", "5000"]
        );
        assert_eq!(labels(&log_ticks(0.5, 2e5)), ["1", "10", "100", "1000", "10k", "100k"]);
        assert_eq!(labels(&log_ticks(0.04, 0.3)), ["0.05", "0.1", "0.2"]);
    }

    #[test]
    fn weekly_ticks_fall_every_13_weeks_on_saturdays_of_the_input() {
        // co2: weekly on Saturdays, last observation 1967-01-14
        let a = axis(&["1966-12-31", "1967-01-07", "1967-01-14"]);
        let t = time_ticks(Some(&a), -99, 12, 8);
        assert!(t.len() <= 8 && t.len() >= 3, "{t:?}");
        let steps: Vec<i64> = t.iter().map(|t| t.at as i64).collect();
        assert!(steps.windows(2).all(|w| w[1] - w[0] == 26), "{steps:?}");
        // every label is a Saturday of the series' grid
        for tick in &t {
            let s = parse_text(&tick.label, EpochUnit::Seconds).unwrap();
            assert_eq!(s.local().date().weekday(), jiff::civil::Weekday::Saturday, "{}", tick.label);
            assert_eq!(a.at(tick.at as i64).unwrap(), s);
        }
    }

    #[test]
    fn monthly_ticks_fall_on_januaries_and_hourly_ones_on_round_hours() {
        let a = axis(&["2010-11-01", "2010-12-01"]);
        let t = time_ticks(Some(&a), -59, 12, 6);
        assert_eq!(
            labels(&t),
            ["2006-01-01", "2007-01-01", "2008-01-01", "2009-01-01", "2010-01-01", "2011-01-01"]
        );
        assert_eq!(t[5].at, 1.0);
        let a = axis(&["2024-01-01T21:00:00", "2024-01-01T22:00:00"]);
        let t = time_ticks(Some(&a), -30, 8, 8);
        assert_eq!(
            labels(&t),
            [
                "2023-12-31T18:00:00",
                "2024-01-01T00:00:00",
                "2024-01-01T06:00:00",
                "2024-01-01T12:00:00",
                "2024-01-01T18:00:00",
                "2024-01-02T00:00:00",
                "2024-01-02T06:00:00"
            ]
        );
        // an epoch series is labelled with dates, not epoch numbers
        let a = axis(&["1700000000", "1700086400"]);
        let t = time_ticks(Some(&a), -3, 1, 8);
        assert_eq!(t[0].label, "2023-11-12T22:13:20Z");
    }

    #[test]
    fn without_timestamps_ticks_are_step_numbers() {
        let t = time_ticks(None, -63, 16, 9);
        assert_eq!(labels(&t), ["-60", "-50", "-40", "-30", "-20", "-10", "0", "10"]);
    }
}
