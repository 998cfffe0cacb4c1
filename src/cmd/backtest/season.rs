//! The season length of MASE's scale and of the seasonal-naive baseline when `--season` is not given, from the
//! series' grid step: the number of steps in the natural cycle of that step.
//!
//! * sub-daily steps that divide a day: steps per day (hourly 24, 15 minutes 96);
//! * one day: the open days of the series' week: 5 on a weekday (trading) calendar, 7 on a continuous one or a
//!   24/7 market (a week);
//! * one week, and anything else without a natural cycle: 1 (the seasonal naive is then the naive forecast);
//! * months: 12 / n when n divides a year (monthly 12, quarterly 4), else 1;
//! * no timestamps: 1.
//!
//! One season serves all series of a run: series whose rules disagree are an error asking for `--season`.

use anyhow::bail;
use backtest::run::SeriesInput;

use tables::axis::TimeAxis;
use tables::timestamps::Freq;

const DAY: i128 = 86_400_000_000_000;

/// The season of one series' grid step.
pub fn of_axis(axis: Option<&TimeAxis>) -> usize {
    // A daily session calendar: its open days per week (weekdays 5, a 24/7 market 7).
    if let Some(cal) = axis.and_then(|a| a.calendar.as_deref()) {
        if cal.step() == DAY {
            return cal.open_per_week().max(1);
        }
    }
    match axis.map(|a| a.freq) {
        None => 1,
        Some(Freq::Fixed(ns)) if ns > 0 && ns < DAY && DAY % ns == 0 => (DAY / ns) as usize,
        Some(Freq::Fixed(DAY)) => 7,
        Some(Freq::Fixed(_)) => 1,
        Some(Freq::Months(n)) if n > 0 && 12 % n == 0 => (12 / n) as usize,
        Some(Freq::Months(_)) => 1,
    }
}

/// The season of every series, which must agree.
pub fn of_series(series: &[SeriesInput], axes: &[Option<TimeAxis>]) -> anyhow::Result<usize> {
    let mut found: Option<(usize, &str)> = None;
    for (s, axis) in series.iter().zip(axes) {
        let season = of_axis(axis.as_ref());
        match found {
            None => found = Some((season, &s.unique_id)),
            Some((f, first)) if f != season => bail!(
                "series {first} and {} have different steps (seasons {f} and {season}); pass --season N to score \
                 them with one season",
                s.unique_id
            ),
            Some(_) => {}
        }
    }
    Ok(found.map_or(1, |(s, _)| s))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tables::timestamps::{epoch, EpochUnit, MonthAnchor};

    fn axis(freq: Freq) -> TimeAxis {
        TimeAxis::continuous(epoch(0, EpochUnit::Seconds).unwrap(), freq, MonthAnchor::End)
    }

    #[test]
    fn seasons_follow_the_step() {
        assert_eq!(of_axis(None), 1);
        assert_eq!(of_axis(Some(&axis(Freq::Fixed(DAY / 24)))), 24);
        assert_eq!(of_axis(Some(&axis(Freq::Fixed(DAY / 96)))), 96);
        assert_eq!(of_axis(Some(&axis(Freq::Fixed(DAY)))), 7);
        assert_eq!(of_axis(Some(&axis(Freq::Fixed(7 * DAY)))), 1);
        assert_eq!(of_axis(Some(&axis(Freq::Fixed(DAY / 7 + 1)))), 1);
        assert_eq!(of_axis(Some(&axis(Freq::Months(1)))), 12);
        assert_eq!(of_axis(Some(&axis(Freq::Months(3)))), 4);
        assert_eq!(of_axis(Some(&axis(Freq::Months(5)))), 1);
    }
}
