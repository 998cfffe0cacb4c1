//! One window's metrics, kept as sums so that the per-cutoff aggregates can pool them over series exactly as fev
//! pools over its `[series, step]` arrays.

use super::direction::direction_hits;
use super::point::{point_sums, PointSums};
use super::quantile::{coverage, interval_levels, scaled_crps, wql_sums, WqlSums};
use super::sample::crps_steps;
use super::{Metric, MetricError, WindowInput};

/// A running sum and count; its mean is `None` when nothing was added or the mean is not finite.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Mean {
    pub total: f64,
    pub count: usize,
}

impl Mean {
    pub fn add(&mut self, x: f64) {
        self.total += x;
        self.count += 1;
    }

    /// Adds `x` only when finite: fev's `_safemean` leaves NaN and ±Inf terms out of the mean.
    pub fn add_if_finite(&mut self, x: f64) {
        if x.is_finite() {
            self.add(x);
        }
    }

    pub fn merge(&mut self, other: &Mean) {
        self.total += other.total;
        self.count += other.count;
    }

    pub fn mean(&self) -> Option<f64> {
        let m = self.total / self.count as f64;
        (self.count > 0 && m.is_finite()).then_some(m)
    }
}

/// Everything one window contributes to its scores and to the pooled aggregates.
#[derive(Debug, Clone)]
pub(crate) struct WindowParts {
    pub point: PointSums,
    pub wql: Option<WqlSums>,
    pub scaled_crps: Option<f64>,
    pub coverage: Vec<(u32, Option<f64>)>,
    pub crps_samples: Option<Mean>,
    pub direction: Option<Mean>,
}

impl WindowParts {
    pub fn new(w: &WindowInput, season: usize) -> Result<WindowParts, MetricError> {
        if season == 0 {
            return Err(MetricError::ZeroSeason);
        }
        w.check()?;
        let (wql, scaled, cov) = match &w.quantiles {
            Some(q) if !q.levels.is_empty() => (
                Some(wql_sums(w.actual, q)),
                scaled_crps(w.actual, q),
                interval_levels(q.levels).into_iter().map(|l| (l, coverage(w.actual, q, l))).collect(),
            ),
            _ => (None, None, Vec::new()),
        };
        let crps_samples = w.samples.as_ref().map(|s| {
            let mut m = Mean::default();
            crps_steps(w.actual, s.count, s.values).for_each(|c| m.add(c));
            m
        });
        Ok(WindowParts {
            point: point_sums(w.history, w.actual, w.point, season),
            wql,
            scaled_crps: scaled,
            coverage: cov,
            crps_samples,
            direction: direction_hits(w.history, w.actual, w.point),
        })
    }

    /// The defined metrics of this window, in [`Metric`] order.
    pub fn scores(&self) -> Vec<(Metric, f64)> {
        let mut out = Vec::new();
        let mut push = |m: Metric, v: Option<f64>| {
            if let Some(v) = v {
                out.push((m, v));
            }
        };
        push(Metric::Mae, self.point.abs_err.mean());
        push(Metric::Rmse, self.point.sq_err.mean().map(f64::sqrt));
        push(Metric::Smape, self.point.smape.mean());
        push(Metric::Mase, self.point.mase.mean());
        push(Metric::Wql, self.wql.as_ref().and_then(WqlSums::value));
        push(Metric::ScaledCrps, self.scaled_crps);
        for &(level, v) in &self.coverage {
            push(Metric::Coverage(level), v);
        }
        push(Metric::CrpsSamples, self.crps_samples.and_then(|m| m.mean()));
        push(Metric::DirectionAccuracy, self.direction.and_then(|m| m.mean()));
        out
    }
}

/// The per-window scores of one series: only the metrics the inputs allow and define (no quantiles → no WQL,
/// scaled CRPS or coverage; no samples → no `crps_samples`; an undefined MASE scale → no MASE; no present actual
/// → nothing), in [`Metric`] order. See [`crate::metrics`] for the formulas.
pub fn score_window(w: &WindowInput, season: usize) -> Result<Vec<(Metric, f64)>, MetricError> {
    Ok(WindowParts::new(w, season)?.scores())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Quantiles, Samples};

    fn window<'a>(history: &'a [f64], actual: &'a [f64], point: &'a [f64]) -> WindowInput<'a> {
        WindowInput { history, actual, point, quantiles: None, samples: None }
    }

    #[test]
    fn point_only_window_scores_point_metrics() {
        let got = score_window(&window(&[1.0, 2.0, 3.0], &[4.0, 6.0], &[3.5, 3.0]), 1).unwrap();
        let names: Vec<String> = got.iter().map(|(m, _)| m.name()).collect();
        assert_eq!(names, ["mae", "rmse", "smape", "mase", "direction_accuracy"]);
        assert_eq!(got[0].1, 1.75);
        assert_eq!(got[1].1, (9.25f64 / 2.0).sqrt());
        assert_eq!(got[3].1, 1.75); // scale 1
        assert_eq!(got[4].1, 0.5); // from 3: up/up ✓, up/flat ✗
    }

    #[test]
    fn all_missing_actuals_score_nothing() {
        let w = window(&[1.0, 2.0], &[f64::NAN, f64::NAN], &[1.0, 1.0]);
        assert!(score_window(&w, 1).unwrap().is_empty());
    }

    #[test]
    fn bad_inputs_are_errors_not_panics() {
        assert_eq!(score_window(&window(&[1.0], &[], &[]), 1), Err(MetricError::EmptyHorizon));
        assert_eq!(score_window(&window(&[1.0], &[1.0], &[1.0]), 0), Err(MetricError::ZeroSeason));
        assert!(matches!(
            score_window(&window(&[1.0], &[1.0, 2.0], &[1.0]), 1),
            Err(MetricError::Length { what: "point", .. })
        ));
        assert!(matches!(
            score_window(&window(&[1.0], &[1.0], &[f64::NAN]), 1),
            Err(MetricError::NonFinite { what: "point", index: 0, .. })
        ));
        let mut w = window(&[1.0], &[1.0], &[1.0]);
        w.quantiles = Some(Quantiles { levels: &[0.1, 0.1], values: &[1.0, 1.0] });
        assert!(matches!(score_window(&w, 1), Err(MetricError::QuantileLevel { index: 1, .. })));
        w.quantiles = Some(Quantiles { levels: &[1.0], values: &[1.0] });
        assert!(matches!(score_window(&w, 1), Err(MetricError::QuantileLevel { index: 0, .. })));
        w.quantiles = Some(Quantiles { levels: &[0.5], values: &[1.0, 2.0] });
        assert!(matches!(score_window(&w, 1), Err(MetricError::Length { what: "quantile values", .. })));
        w.quantiles = None;
        w.samples = Some(Samples { count: 0, values: &[] });
        assert_eq!(score_window(&w, 1), Err(MetricError::NoSamples));
        w.samples = Some(Samples { count: usize::MAX, values: &[] });
        w.actual = &[1.0, 2.0];
        w.point = &[1.0, 2.0];
        assert!(matches!(score_window(&w, 1), Err(MetricError::Overflow { .. })));
        w.samples = Some(Samples { count: 1, values: &[1.0, f64::INFINITY] });
        assert!(matches!(score_window(&w, 1), Err(MetricError::NonFinite { what: "sample", index: 1, .. })));
    }

    #[test]
    fn samples_and_quantiles_add_their_metrics() {
        let levels = [0.1, 0.5, 0.9];
        let q = [0.0, 1.0, 2.0];
        let s = [1.0, 3.0];
        let w = WindowInput {
            history: &[f64::NAN],
            actual: &[2.0],
            point: &[1.0],
            quantiles: Some(Quantiles { levels: &levels, values: &q }),
            samples: Some(Samples { count: 2, values: &s }),
        };
        let got = score_window(&w, 7).unwrap();
        let names: Vec<String> = got.iter().map(|(m, _)| m.name()).collect();
        // No observed history: no MASE, no direction.
        assert_eq!(names, ["mae", "rmse", "smape", "wql", "scaled_crps", "coverage_80", "crps_samples"]);
        // samples 1, 3 at 2: E|X − y| = 1, E|X − X'| = 1 → 0.5.
        assert_eq!(got[6].1, 0.5);
    }
}
