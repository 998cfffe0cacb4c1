//! Quantile metrics: fev 0.10.0 `WQL` (pooled sums), utilsforecast 0.2.17 `scaled_crps` and `coverage`, and
//! utilsforecast's `{model}-lo-{level}` / `{model}-hi-{level}` column convention.

use super::window::Mean;
use super::Quantiles;

/// The sums of one window's WQL: per level, the mean of fev's quantile loss 2·|(y − x)(1{y ≤ x} − q)| over the
/// present actuals, and the mean of |y| over them.
#[derive(Debug, Clone)]
pub(crate) struct WqlSums {
    pub levels: Vec<f64>,
    pub loss: Vec<Mean>,
    pub abs_actual: Mean,
}

impl WqlSums {
    /// fev's WQL: the mean over levels of mean(loss_q) / mean(|y|); `None` when undefined or non-finite.
    pub fn value(&self) -> Option<f64> {
        let abs_actual = self.abs_actual.mean()?;
        let mut total = 0.0;
        for loss in &self.loss {
            total += loss.mean()? / abs_actual;
        }
        let v = total / self.loss.len() as f64;
        v.is_finite().then_some(v)
    }

    /// Adds another window's sums (same levels, checked by the caller).
    pub fn pool(&mut self, other: &WqlSums) {
        for (a, b) in self.loss.iter_mut().zip(&other.loss) {
            a.merge(b);
        }
        self.abs_actual.merge(&other.abs_actual);
    }
}

pub(crate) fn wql_sums(actual: &[f64], q: &Quantiles) -> WqlSums {
    let h = actual.len();
    let mut abs_actual = Mean::default();
    actual.iter().filter(|y| !y.is_nan()).for_each(|y| abs_actual.add(y.abs()));
    let loss = (0..q.levels.len())
        .map(|i| {
            let level = q.levels[i];
            let mut m = Mean::default();
            for (&y, &x) in actual.iter().zip(q.level_row(i, h)) {
                if !y.is_nan() {
                    let below = if y <= x { 1.0 } else { 0.0 };
                    m.add(2.0 * ((y - x) * (below - level)).abs());
                }
            }
            m
        })
        .collect();
    WqlSums { levels: q.levels.to_vec(), loss, abs_actual }
}

/// utilsforecast's per-series scaled CRPS: 2 · mean_q[mean_t max(q·δ, (q − 1)·δ)] · n / (Σ_t |y_t| + ε), δ = y − x,
/// n the number of present actuals, ε = f64::EPSILON; `None` when no actual is present.
pub(crate) fn scaled_crps(actual: &[f64], q: &Quantiles) -> Option<f64> {
    let h = actual.len();
    let n = actual.iter().filter(|y| !y.is_nan()).count();
    if n == 0 {
        return None;
    }
    let norm: f64 = actual.iter().filter(|y| !y.is_nan()).map(|y| y.abs()).sum();
    let mut per_level = 0.0;
    for (i, &level) in q.levels.iter().enumerate() {
        let mut m = Mean::default();
        for (&y, &x) in actual.iter().zip(q.level_row(i, h)) {
            if !y.is_nan() {
                let d = y - x;
                m.add((level * d).max((level - 1.0) * d));
            }
        }
        per_level += m.mean()?;
    }
    let mql = per_level / q.levels.len() as f64;
    Some(2.0 * mql * n as f64 / (norm + f64::EPSILON))
}

/// utilsforecast's coverage of the central `level`% interval: the fraction of present actuals with lo ≤ y ≤ hi;
/// `None` when the quantiles lack the interval's two ends or no actual is present.
pub(crate) fn coverage(actual: &[f64], q: &Quantiles, level: u32) -> Option<f64> {
    let h = actual.len();
    let tail = (100.0 - f64::from(level)) / 200.0;
    let lo = q.level_row(q.index_of(tail)?, h);
    let hi = q.level_row(q.index_of(1.0 - tail)?, h);
    let mut m = Mean::default();
    for t in 0..h {
        let y = actual[t];
        if !y.is_nan() {
            m.add(if lo[t] <= y && y <= hi[t] { 1.0 } else { 0.0 });
        }
    }
    m.mean()
}

/// The central interval levels (in %) the quantile levels hold both ends of, ascending: 0.1 and 0.9 give 80,
/// 0.025 and 0.975 give 95 (utilsforecast's `level` ↔ quantiles (100 − level)/200 and 1 − (100 − level)/200).
pub fn interval_levels(levels: &[f64]) -> Vec<u32> {
    let mut out: Vec<u32> = levels
        .iter()
        .filter(|&&q| q < 0.5 && levels.iter().any(|&o| (o - (1.0 - q)).abs() < 1e-12))
        .filter_map(|&q| integer_level(100.0 - 200.0 * q))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The utilsforecast column name of quantile `q` of `model`: `{model}-lo-{L}` below the median (L = 100 − 200q),
/// `{model}-hi-{L}` above it (L = 200q − 100), so 0.1 ↔ `-lo-80` and 0.9 ↔ `-hi-80`. `None` for the median (its
/// interval level would be 0; the point column holds it) and for levels whose interval is not a whole percent.
pub fn quantile_column(model: &str, q: f64) -> Option<String> {
    if q < 0.5 {
        Some(format!("{model}-lo-{}", integer_level(100.0 - 200.0 * q)?))
    } else if q > 0.5 {
        Some(format!("{model}-hi-{}", integer_level(200.0 * q - 100.0)?))
    } else {
        None
    }
}

fn integer_level(l: f64) -> Option<u32> {
    let r = l.round();
    ((l - r).abs() < 1e-9 && (1.0..100.0).contains(&r)).then_some(r as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEVELS: [f64; 3] = [0.1, 0.5, 0.9];

    #[test]
    fn column_names_follow_utilsforecast() {
        assert_eq!(quantile_column("toto", 0.1).as_deref(), Some("toto-lo-80"));
        assert_eq!(quantile_column("toto", 0.9).as_deref(), Some("toto-hi-80"));
        assert_eq!(quantile_column("toto", 0.025).as_deref(), Some("toto-lo-95"));
        assert_eq!(quantile_column("toto", 0.975).as_deref(), Some("toto-hi-95"));
        assert_eq!(quantile_column("toto", 0.7).as_deref(), Some("toto-hi-40"));
        assert_eq!(quantile_column("toto", 0.5), None);
        assert_eq!(quantile_column("toto", 0.1234), None);
        let all = [0.025, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.975];
        assert_eq!(interval_levels(&all), vec![20, 40, 60, 80, 95]);
        assert_eq!(interval_levels(&[0.1, 0.5]), Vec::<u32>::new());
    }

    #[test]
    fn wql_scaled_crps_and_coverage_by_hand() {
        // H = 2: y = 10, 20; quantiles 0.1: 8, 25; 0.5: 10, 18; 0.9: 12, 30.
        let values = [8.0, 25.0, 10.0, 18.0, 12.0, 30.0];
        let q = Quantiles { levels: &LEVELS, values: &values };
        let y = [10.0, 20.0];
        // fev loss 2|(y − x)(1{y ≤ x} − q)|: level 0.1: 2·2·0.1 = 0.4, 2·5·0.9 = 9; 0.5: 0, 2·2·0.5 = 2;
        // 0.9: 2·2·0.1 = 0.4, 2·10·0.1 = 2. Means 4.7, 1, 1.2 over mean |y| = 15 → (6.9/15)/3.
        let wql = wql_sums(&y, &q).value().unwrap();
        assert!((wql - 6.9 / 45.0).abs() < 1e-15, "{wql}");
        // utilsforecast: half the fev loss, times 2 · n / Σ|y| (+ ε): 2 · (6.9 / 2 / 3) · 2 / 30.
        let crps = scaled_crps(&y, &q).unwrap();
        assert!((crps - 2.0 * 1.15 * 2.0 / (30.0 + f64::EPSILON)).abs() < 1e-15, "{crps}");
        // 80%: [8, 12] holds 10, [25, 30] misses 20.
        assert_eq!(coverage(&y, &q, 80), Some(0.5));
        assert_eq!(coverage(&y, &q, 95), None);
        // A missing actual is left out of all three.
        let y_nan = [10.0, f64::NAN];
        assert_eq!(coverage(&y_nan, &q, 80), Some(1.0));
        assert!((wql_sums(&y_nan, &q).value().unwrap() - (0.8 / 10.0) / 3.0).abs() < 1e-15);
    }

    #[test]
    fn coverage_bounds_are_inclusive() {
        let values = [10.0, 10.0, 10.0];
        let q = Quantiles { levels: &LEVELS, values: &values };
        assert_eq!(coverage(&[10.0], &q, 80), Some(1.0));
        assert_eq!(coverage(&[10.000001], &q, 80), Some(0.0));
    }
}
