//! Point-forecast metrics (fev 0.10.0 `MAE`, `RMSE`, `SMAPE`, `MASE`) as sums that pool over series.

use super::window::Mean;

/// The sums of one window's point metrics over the steps whose actual is present.
#[derive(Debug, Clone, Default)]
pub(crate) struct PointSums {
    pub abs_err: Mean,
    pub sq_err: Mean,
    /// 2|e| / (|y| + |ŷ|), non-finite terms (0/0) left out as fev's `_safemean` does.
    pub smape: Mean,
    /// |e| / scale, non-finite terms (undefined or zero scale) left out as fev's `_safemean` does.
    pub mase: Mean,
}

pub(crate) fn point_sums(history: &[f64], actual: &[f64], point: &[f64], season: usize) -> PointSums {
    let scale = seasonal_scale(history, season);
    let mut s = PointSums::default();
    for (&y, &f) in actual.iter().zip(point) {
        if y.is_nan() {
            continue;
        }
        let e = y - f;
        s.abs_err.add(e.abs());
        s.sq_err.add(e * e);
        s.smape.add_if_finite(2.0 * e.abs() / (y.abs() + f.abs()));
        if let Some(scale) = scale {
            s.mase.add_if_finite(e.abs() / scale);
        }
    }
    s
}

/// MASE's in-sample scale: the mean of |y(t) − y(t−m)| over the pairs of the history with both values present
/// (fev's `_abs_seasonal_error_per_item`: `np.nanmean` of the seasonal differences, no imputation). `None` when
/// the history has no such pair (fev: NaN, and the series is left out of MASE).
pub(crate) fn seasonal_scale(history: &[f64], season: usize) -> Option<f64> {
    let mut m = Mean::default();
    for t in season..history.len() {
        let d = history[t] - history[t - season];
        if !d.is_nan() {
            m.add(d.abs());
        }
    }
    m.mean()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seasonal_scale_skips_nan_pairs_and_short_histories() {
        // season 2: pairs (0,2): |3-1| = 2, (1,3): NaN skipped, (2,4): |7-3| = 4 → 3.
        assert_eq!(seasonal_scale(&[1.0, 5.0, 3.0, f64::NAN, 7.0], 2), Some(3.0));
        assert_eq!(seasonal_scale(&[1.0, 2.0], 2), None);
        assert_eq!(seasonal_scale(&[], 1), None);
        assert_eq!(seasonal_scale(&[f64::NAN, 1.0, f64::NAN], 1), None);
    }

    #[test]
    fn point_metrics_by_hand() {
        // history 1, 2, 4 with season 1: scale = (1 + 2) / 2 = 1.5.
        let s = point_sums(&[1.0, 2.0, 4.0], &[5.0, f64::NAN, 0.0, 3.0], &[4.0, 9.0, 0.0, 5.0], 1);
        assert_eq!(s.abs_err.mean(), Some(1.0)); // (1 + 0 + 2) / 3
        assert_eq!(s.sq_err.mean(), Some(5.0 / 3.0));
        // sMAPE: 2/9, 0/0 left out, 4/8 → (2/9 + 1/2) / 2.
        assert!((s.smape.mean().unwrap() - (2.0 / 9.0 + 0.5) / 2.0).abs() < 1e-15);
        assert!((s.mase.mean().unwrap() - 1.0 / 1.5).abs() < 1e-15);
    }

    #[test]
    fn zero_scale_leaves_mase_undefined() {
        let s = point_sums(&[2.0, 2.0, 2.0], &[3.0, 2.0], &[2.0, 2.0], 1);
        assert_eq!(s.mase.mean(), None); // 1/0 = inf and 0/0 = NaN are both left out
        assert_eq!(s.abs_err.mean(), Some(0.5));
    }
}
