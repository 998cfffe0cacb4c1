//! The naive and seasonal-naive baselines every report carries.
//!
//! fev's `seasonal_naive` baseline is its statsforecast wrapper (`models/statsforecast`, statsforecast 2.0.1
//! `SeasonalNaive`): the history is forward-filled per series, NaNs left before the first observation become
//! 0.0, and the forecast repeats the last `season` values. With a history shorter than one season, statsforecast
//! leaves the slots without an observation NaN and the wrapper turns them into **0.0** forecasts. Here leading
//! NaNs are dropped instead of zeroed, and a history shorter than one season falls back to the naive forecast:
//! a 0.0 forecast of a price is no baseline. The two agree whenever the observed history spans at least one
//! season (every backtest whose context holds a season).

/// Repeats the last observed (non-NaN) value of `history` `horizon` times; all NaN when nothing was observed.
pub fn naive(history: &[f64], horizon: usize) -> Vec<f64> {
    let last = history.iter().rev().find(|v| !v.is_nan()).copied().unwrap_or(f64::NAN);
    vec![last; horizon]
}

/// Repeats the last `season` values of the forward-filled history (`ŷ_{T+k} = y_{T−season+1+((k−1) mod season)}`),
/// after dropping the NaNs before the first observation; the [`naive`] forecast when that history is shorter than
/// one season (or `season` is 0); all NaN when nothing was observed.
pub fn seasonal_naive(history: &[f64], horizon: usize, season: usize) -> Vec<f64> {
    let Some(first) = history.iter().position(|v| !v.is_nan()) else {
        return vec![f64::NAN; horizon];
    };
    let observed = &history[first..];
    if season == 0 || observed.len() < season {
        return naive(history, horizon);
    }
    let mut filled = Vec::with_capacity(observed.len());
    let mut last = observed[0];
    for &v in observed {
        if !v.is_nan() {
            last = v;
        }
        filled.push(last);
    }
    let tail = &filled[filled.len() - season..];
    (0..horizon).map(|k| tail[k % season]).collect()
}

/// A point forecast as quantile forecasts (`values[level * H + step]`, every level the point): how fev's
/// `seasonal_naive` reports its quantiles, so the baselines get a WQL (= 2 × mean |e| / mean |y|, whatever the
/// levels) and a WQL skill score can be taken against them.
pub fn point_as_quantiles(point: &[f64], levels: usize) -> Vec<f64> {
    (0..levels).flat_map(|_| point.iter().copied()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_as_quantiles_repeats_the_point_per_level() {
        assert_eq!(point_as_quantiles(&[1.0, 2.0], 3), vec![1.0, 2.0, 1.0, 2.0, 1.0, 2.0]);
        assert!(point_as_quantiles(&[1.0], 0).is_empty());
    }

    #[test]
    fn naive_repeats_the_last_observed_value() {
        assert_eq!(naive(&[1.0, 2.0, f64::NAN], 3), vec![2.0; 3]);
        assert!(naive(&[f64::NAN], 2).iter().all(|v| v.is_nan()));
        assert!(naive(&[], 1)[0].is_nan());
        assert!(naive(&[1.0], 0).is_empty());
    }

    #[test]
    fn seasonal_naive_repeats_the_last_season() {
        let h = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0];
        assert_eq!(seasonal_naive(&h, 5, 3), vec![5.0, 6.0, 7.0, 5.0, 6.0]);
        assert_eq!(seasonal_naive(&h, 2, 1), vec![7.0, 7.0]);
        assert_eq!(seasonal_naive(&h, 8, 7), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 1.0]);
    }

    #[test]
    fn seasonal_naive_fills_gaps_and_falls_back() {
        // The NaN in the last season takes the value before it (forward fill).
        assert_eq!(seasonal_naive(&[1.0, 2.0, 3.0, f64::NAN, 5.0], 3, 3), vec![3.0, 3.0, 5.0]);
        // Shorter than a season once the leading NaNs are dropped: naive.
        assert_eq!(seasonal_naive(&[f64::NAN, f64::NAN, 4.0, 6.0], 3, 3), vec![6.0; 3]);
        assert_eq!(seasonal_naive(&[4.0, 6.0], 2, 5), vec![6.0; 2]);
        assert_eq!(seasonal_naive(&[4.0, 6.0], 2, 0), vec![6.0; 2]);
        assert!(seasonal_naive(&[f64::NAN; 9], 2, 3).iter().all(|v| v.is_nan()));
    }
}
