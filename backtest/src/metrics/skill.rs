//! fev's relative skill score against a baseline.

use super::{MetricRow, Scope};

/// fev's `leaderboard` clips each task's error ratio to [0.01, 100] (`min_relative_error`, `max_relative_error`).
pub const MIN_RELATIVE_ERROR: f64 = 1e-2;
/// See [`MIN_RELATIVE_ERROR`].
pub const MAX_RELATIVE_ERROR: f64 = 100.0;

/// fev's skill score of the model against the baseline on `metric`: 1 − exp(mean over tasks of
/// ln clip(error_model / error_baseline, 0.01, 100)) (fev 0.10.0 `leaderboard(..., baseline_model=...)`:
/// `1 − scipy.stats.gmean` of the clipped ratios). One task = the whole backtest: its `overall` rows (fev's task
/// score, the mean over its evaluation windows). Positive: the model beats the baseline; 0.3 = 30 % less error.
/// `None` when either table lacks the metric's overall row, or both errors are 0 (fev: a missing ratio).
/// Meaningful for the error metrics ([`super::Metric::lower_is_better`]).
pub fn relative_skill(model_rows: &[MetricRow], baseline_rows: &[MetricRow], metric: &str) -> Option<f64> {
    let overall = |rows: &[MetricRow]| {
        rows.iter().find(|r| r.scope == Scope::Overall && r.metric == metric).map(|r| r.value)
    };
    skill_score(&[ratio(overall(model_rows)?, overall(baseline_rows)?)?])
}

/// Like [`relative_skill`], with each cutoff as one task (the geometric mean over the cutoffs of the clipped
/// ratios of the `cutoff` rows). `None` when a cutoff of the model has no baseline row for the metric, or no
/// cutoff has the metric.
pub fn relative_skill_by_cutoff(
    model_rows: &[MetricRow],
    baseline_rows: &[MetricRow],
    metric: &str,
) -> Option<f64> {
    let cutoffs = |rows: &[MetricRow]| -> Vec<(Option<String>, f64)> {
        rows.iter()
            .filter(|r| r.scope == Scope::Cutoff && r.metric == metric)
            .map(|r| (r.cutoff.clone(), r.value))
            .collect()
    };
    let base = cutoffs(baseline_rows);
    let ratios = cutoffs(model_rows)
        .into_iter()
        .map(|(c, m)| ratio(m, base.iter().find(|(bc, _)| *bc == c)?.1))
        .collect::<Option<Vec<f64>>>()?;
    skill_score(&ratios)
}

/// The clipped ratio, as pandas' divide then `clip` would give it: x/0 = inf → 100, 0/0 = NaN → missing.
fn ratio(model: f64, baseline: f64) -> Option<f64> {
    let r = model / baseline;
    (!r.is_nan()).then(|| r.clamp(MIN_RELATIVE_ERROR, MAX_RELATIVE_ERROR))
}

fn skill_score(ratios: &[f64]) -> Option<f64> {
    if ratios.is_empty() {
        return None;
    }
    let mean_log = ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64;
    Some(1.0 - mean_log.exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(scope: Scope, cutoff: Option<&str>, metric: &str, value: f64) -> MetricRow {
        MetricRow {
            model: "x".into(),
            scope,
            unique_id: None,
            cutoff: cutoff.map(str::to_string),
            metric: metric.into(),
            value,
        }
    }

    #[test]
    fn skill_by_hand() {
        let model = [row(Scope::Overall, None, "mae", 2.0), row(Scope::Overall, None, "wql", 0.0)];
        let base = [row(Scope::Overall, None, "mae", 4.0), row(Scope::Overall, None, "wql", 0.0)];
        assert!((relative_skill(&model, &base, "mae").unwrap() - 0.5).abs() < 1e-15);
        assert_eq!(relative_skill(&model, &base, "wql"), None); // 0/0
        assert_eq!(relative_skill(&model, &base, "rmse"), None);
        // Clipping: 1000× worse counts as 100× worse.
        let bad = [row(Scope::Overall, None, "mae", 4000.0)];
        assert!((relative_skill(&bad, &base, "mae").unwrap() - (1.0 - 100.0)).abs() < 1e-9);
    }

    #[test]
    fn skill_by_cutoff_is_a_geometric_mean() {
        let model = [row(Scope::Cutoff, Some("a"), "mae", 1.0), row(Scope::Cutoff, Some("b"), "mae", 4.0)];
        let base = [row(Scope::Cutoff, Some("a"), "mae", 4.0), row(Scope::Cutoff, Some("b"), "mae", 1.0)];
        // ratios 1/4 and 4: geometric mean 1 → skill 0 (the arithmetic mean would say 2.125).
        assert!(relative_skill_by_cutoff(&model, &base, "mae").unwrap().abs() < 1e-15);
        assert_eq!(relative_skill_by_cutoff(&model, &base[..1], "mae"), None);
    }
}
