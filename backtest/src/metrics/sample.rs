//! CRPS from sample paths, energy form.

/// The CRPS of the empirical distribution of `samples` at the observation `y`:
/// (1/M) Σ_i |x_i − y| − (1/(2M²)) Σ_i Σ_j |x_i − x_j| (the V-statistic normalisation 1/(2M²), which is the
/// exact CRPS of the M-point empirical distribution, as properscoring's `crps_ensemble`; the "fair" 1/(2M(M−1))
/// variant is not used). The double sum is taken in O(M log M) on the sorted samples:
/// Σ_i Σ_j |x_i − x_j| = 2 Σ_k (2k − M + 1) x_(k), k = 0..M−1.
pub fn crps_samples_step(samples: &[f64], y: f64) -> f64 {
    let m = samples.len() as f64;
    let spread_to_y: f64 = samples.iter().map(|x| (x - y).abs()).sum::<f64>() / m;
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let pairwise: f64 = sorted.iter().enumerate().map(|(k, x)| (2.0 * k as f64 - m + 1.0) * x).sum::<f64>();
    spread_to_y - pairwise / (m * m)
}

/// The per-step CRPS of one window's samples (`values[sample * H + step]`) at each present actual.
pub(crate) fn crps_steps<'a>(
    actual: &'a [f64],
    count: usize,
    values: &'a [f64],
) -> impl Iterator<Item = f64> + 'a {
    let h = actual.len();
    let mut column = Vec::with_capacity(count);
    actual.iter().enumerate().filter(|(_, y)| !y.is_nan()).map(move |(t, &y)| {
        column.clear();
        column.extend((0..count).map(|s| values[s * h + t]));
        crps_samples_step(&column, y)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_sample_is_the_absolute_error() {
        assert_eq!(crps_samples_step(&[3.0], 5.5), 2.5);
    }

    #[test]
    fn hand_computed_energy_form() {
        // samples 1, 2, 4 at y = 3: E|X − y| = (2 + 1 + 1)/3 = 4/3; pairs |1−2| + |1−4| + |2−4| = 6, counted twice
        // over 9 ordered pairs: E|X − X'| = 12/9, half of it 2/3 → CRPS = 4/3 − 2/3 = 2/3.
        assert!((crps_samples_step(&[4.0, 1.0, 2.0], 3.0) - 2.0 / 3.0).abs() < 1e-15);
        // The CRPS of the empirical CDF F: ∫ (F(z) − 1{z ≥ y})² dz over the same samples, by pieces:
        // [1,2): F = 1/3, [2,3): 2/3, [3,4): 2/3 − 1 → 1/9 + 4/9 + 1/9 = 6/9.
        assert!((crps_samples_step(&[1.0, 2.0, 4.0], 3.0) - 6.0 / 9.0).abs() < 1e-15);
        // Identical samples: no spread, the absolute error.
        assert_eq!(crps_samples_step(&[2.0, 2.0, 2.0, 2.0], -1.0), 3.0);
    }

    #[test]
    fn steps_skip_missing_actuals() {
        // H = 2, two samples: step 0 → samples 0, 2; step 1 (missing) skipped.
        let got: Vec<f64> = crps_steps(&[1.0, f64::NAN], 2, &[0.0, 9.0, 2.0, 9.0]).collect();
        // E|X − 1| = 1, E|X − X'| = (0 + 2 + 2 + 0)/4 = 1 → 1 − 0.5.
        assert_eq!(got, vec![0.5]);
    }
}
