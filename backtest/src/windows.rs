//! Rolling-origin window planning (Nixtla's `cross_validation` semantics).
//!
//! A series of `len` grid positions, `n` windows of `horizon` steps, origins `step` positions apart: window `i`
//! (`0..n`, oldest first) forecasts from the first `len - horizon - (n - 1 - i) * step` positions, so the last
//! window ends exactly at the end of the series and its cutoff (the last position it may see) is
//! `len - horizon - 1`. Positions count grid points of the series' calendar (a missing point still counts; a
//! closed session slot is not a grid point), so the same arithmetic is right for continuous and session
//! calendars. Every size is checked arithmetic: a plan that overflows or does not fit the series is an error that
//! names the series and the first bad cutoff.

use thiserror::Error;

/// What the user asked for (`--windows`, `--step`, `--horizon`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSpec {
    /// Windows per series (≥ 1).
    pub windows: usize,
    /// Grid positions between consecutive cutoffs (≥ 1; Nixtla's default is the horizon).
    pub step: usize,
    /// Forecast steps per window (≥ 1).
    pub horizon: usize,
}

impl WindowSpec {
    /// `step` defaults to `horizon`, as in Nixtla's `cross_validation`.
    pub fn new(windows: usize, step: Option<usize>, horizon: usize) -> Self {
        WindowSpec { windows, step: step.unwrap_or(horizon), horizon }
    }
}

/// One window of one series, in grid positions of that series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Index of the window in its series (0 = oldest).
    pub index: usize,
    /// Grid position of the cutoff: the last point the forecast may see (0-based from the series' first point).
    pub cutoff: usize,
    /// The horizon's positions are `cutoff + 1 ..= cutoff + horizon`.
    pub horizon: usize,
}

impl Window {
    /// Points of history up to and including the cutoff.
    pub fn history_len(&self) -> usize {
        self.cutoff + 1
    }

    /// The positions of the actual values the window is scored on.
    pub fn actual_range(&self) -> std::ops::Range<usize> {
        self.cutoff + 1..self.cutoff + 1 + self.horizon
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WindowError {
    #[error("--{flag} must be at least 1")]
    Zero { flag: &'static str },
    #[error(
        "{series}: {len} points are too few for {windows} windows of horizon {horizon}, {step} apart: window \
         {first_bad} (the first bad one) would need its cutoff at grid position {cutoff} ({position}), and \
         every window needs at least one point of history; ask for at most {fits} windows, or a smaller --step \
         or --horizon"
    )]
    TooShort {
        series: String,
        len: usize,
        windows: usize,
        step: usize,
        horizon: usize,
        /// 1-based, as users count windows.
        first_bad: usize,
        /// Grid position the first bad window's cutoff would have (negative: before the series' first point).
        cutoff: i128,
        /// The cutoff in words: its timestamp when the caller knows the series' calendar, else "before the
        /// series' first point".
        position: String,
        /// The most windows this series has room for (0 when not even one fits).
        fits: usize,
    },
    #[error("{series}: {windows} windows of horizon {horizon}, {step} apart span more grid positions than fit in memory")]
    Overflow { series: String, windows: usize, step: usize, horizon: usize },
}

/// The windows of one series of `len` grid positions, oldest first. `series` names it in errors; `stamp(k)`
/// gives the timestamp text of grid position `k` relative to the series' last point (`k` ≤ 0; `None` without
/// timestamps), so an error can name the bad cutoff by date.
pub fn plan(
    series: &str,
    len: usize,
    spec: &WindowSpec,
    stamp: &dyn Fn(i64) -> Option<String>,
) -> Result<Vec<Window>, WindowError> {
    if spec.windows == 0 {
        return Err(WindowError::Zero { flag: "windows" });
    }
    if spec.horizon == 0 {
        return Err(WindowError::Zero { flag: "horizon" });
    }
    if spec.step == 0 {
        return Err(WindowError::Zero { flag: "step" });
    }
    let overflow = || WindowError::Overflow {
        series: series.to_string(),
        windows: spec.windows,
        step: spec.step,
        horizon: spec.horizon,
    };
    // Positions the windows span after the first cutoff: (n - 1) * step + horizon; the first cutoff needs one
    // point of history before it, so the series needs `span + 1` points.
    let span = (spec.windows - 1)
        .checked_mul(spec.step)
        .and_then(|s| s.checked_add(spec.horizon))
        .ok_or_else(overflow)?;
    if span >= len {
        // The first bad window is window 0 (the oldest): windows only get longer histories after it.
        let cutoff = len as i128 - span as i128 - 1;
        let fits = if len > spec.horizon { (len - spec.horizon - 1) / spec.step + 1 } else { 0 };
        let position = i64::try_from(cutoff - (len as i128 - 1)).ok().and_then(stamp).map_or_else(
            || "before the series' first point".to_string(),
            |t| format!("{t}, before the series' first point"),
        );
        return Err(WindowError::TooShort {
            series: series.to_string(),
            len,
            windows: spec.windows,
            step: spec.step,
            horizon: spec.horizon,
            first_bad: 1,
            cutoff,
            position,
            fits,
        });
    }
    // span < len, so every product below is ≤ span and nothing can overflow.
    Ok((0..spec.windows)
        .map(|i| Window {
            index: i,
            cutoff: len - spec.horizon - (spec.windows - 1 - i) * spec.step - 1,
            horizon: spec.horizon,
        })
        .collect())
}

/// `m` of `n` window indices spread evenly over `0..n`, always including the last (the most recent) window:
/// which windows `--reference-windows M` runs through the reference.
pub fn spread(n: usize, m: usize) -> Vec<usize> {
    if m >= n {
        return (0..n).collect();
    }
    if m == 0 {
        return Vec::new();
    }
    // Index j of m maps to floor(j * (n - 1) / (m - 1)) (m ≥ 2), distinct because n > m; in u128 so no size
    // overflows.
    if m == 1 {
        return vec![n - 1];
    }
    (0..m).map(|j| (j as u128 * (n as u128 - 1) / (m as u128 - 1)) as usize).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_stamp(_: i64) -> Option<String> {
        None
    }

    fn cutoffs(len: usize, spec: WindowSpec) -> Vec<usize> {
        plan("s", len, &spec, &no_stamp).unwrap().iter().map(|w| w.cutoff).collect()
    }

    #[test]
    fn cutoffs_follow_nixtla() {
        // Nixtla: with len 20, h 3, n_windows 3, step_size 2 the training sets end at 20-3-4=13, 15, 17 points,
        // i.e. cutoffs at positions 12, 14, 16 and the last window's horizon is positions 17..=19.
        assert_eq!(cutoffs(20, WindowSpec::new(3, Some(2), 3)), vec![12, 14, 16]);
        let w = plan("s", 20, &WindowSpec::new(3, Some(2), 3), &no_stamp).unwrap();
        assert_eq!(w[2].actual_range(), 17..20);
        assert_eq!(w[0].history_len(), 13);
        assert_eq!(w.iter().map(|w| w.index).collect::<Vec<_>>(), vec![0, 1, 2]);
    }

    #[test]
    fn default_step_is_the_horizon() {
        let spec = WindowSpec::new(4, None, 5);
        assert_eq!(spec.step, 5);
        // non-overlapping windows tiling the last 20 points
        assert_eq!(cutoffs(30, spec), vec![9, 14, 19, 24]);
    }

    #[test]
    fn the_tightest_fit_has_one_point_of_history() {
        // span = 2*2+3 = 7; 8 points leave exactly one before the first horizon
        assert_eq!(cutoffs(8, WindowSpec::new(3, Some(2), 3)), vec![0, 2, 4]);
    }

    #[test]
    fn too_short_names_the_series_and_the_first_bad_cutoff() {
        let stamp = |k: i64| Some(format!("k{k}"));
        let e = plan("AAPL", 7, &WindowSpec::new(3, Some(2), 3), &stamp).unwrap_err();
        match &e {
            WindowError::TooShort { series, first_bad, cutoff, fits, position, .. } => {
                assert_eq!(series, "AAPL");
                assert_eq!(*first_bad, 1);
                assert_eq!(*cutoff, -1);
                // room for 2 windows: (7-3-1)/2+1
                assert_eq!(*fits, 2);
                // position -1 is 7 positions before the last point (6)
                assert_eq!(position, "k-7, before the series' first point");
            }
            other => panic!("{other:?}"),
        }
        let text = e.to_string();
        assert!(
            text.contains("AAPL") && text.contains("window 1") && text.contains("at most 2 windows"),
            "{text}"
        );
        // the fix it suggests works
        assert_eq!(cutoffs(7, WindowSpec::new(2, Some(2), 3)), vec![1, 3]);
    }

    #[test]
    fn a_horizon_past_the_end_is_an_error() {
        let e = plan("x", 5, &WindowSpec::new(1, None, 5), &no_stamp).unwrap_err();
        assert!(matches!(e, WindowError::TooShort { fits: 0, cutoff: -1, .. }), "{e:?}");
        let e = plan("x", 5, &WindowSpec::new(1, None, 9), &no_stamp).unwrap_err();
        assert!(matches!(e, WindowError::TooShort { fits: 0, cutoff: -5, .. }), "{e:?}");
    }

    #[test]
    fn zero_sizes_are_errors() {
        assert_eq!(
            plan("x", 9, &WindowSpec::new(0, None, 2), &no_stamp),
            Err(WindowError::Zero { flag: "windows" })
        );
        assert_eq!(
            plan("x", 9, &WindowSpec::new(1, Some(0), 2), &no_stamp),
            Err(WindowError::Zero { flag: "step" })
        );
        assert_eq!(
            plan("x", 9, &WindowSpec::new(1, None, 0), &no_stamp),
            Err(WindowError::Zero { flag: "horizon" })
        );
    }

    #[test]
    fn huge_sizes_are_checked_not_wrapped() {
        let e = plan("x", 100, &WindowSpec::new(usize::MAX, Some(usize::MAX), 1), &no_stamp).unwrap_err();
        assert!(matches!(e, WindowError::Overflow { .. }), "{e:?}");
        // a huge count that does not overflow is refused before anything is allocated
        let e = plan("x", 100, &WindowSpec::new(usize::MAX / 4, Some(1), 1), &no_stamp).unwrap_err();
        assert!(matches!(e, WindowError::TooShort { fits: 99, .. }), "{e:?}");
    }

    #[test]
    fn spread_picks_evenly_and_keeps_the_last() {
        assert_eq!(spread(10, 3), vec![0, 4, 9]);
        assert_eq!(spread(5, 9), vec![0, 1, 2, 3, 4]);
        assert_eq!(spread(5, 1), vec![4]);
        assert!(spread(5, 0).is_empty());
        let s = spread(200, 50);
        assert_eq!(s.len(), 50);
        assert!(s.windows(2).all(|p| p[0] < p[1]));
        assert_eq!(*s.last().unwrap(), 199);
    }
}
