//! The long metric table of one model: rows per window, per series, per cutoff and overall.

use std::collections::{BTreeMap, HashSet};

use super::point::PointSums;
use super::quantile::WqlSums;
use super::window::{Mean, WindowParts};
use super::{Metric, MetricError, WindowInput};

/// Which rows a [`MetricRow`] aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// One series at one cutoff: the metric over that window's steps.
    Window,
    /// One series over all its windows: the mean of its window values.
    Series,
    /// All series at one cutoff (fev's evaluation window): pooled over series and steps for mae, rmse, smape,
    /// mase, wql, crps_samples and direction_accuracy; the mean of the per-series values for scaled_crps and
    /// coverage_L.
    Cutoff,
    /// The whole backtest (one fev task): the mean of the cutoff values over the cutoffs.
    Overall,
}

impl Scope {
    /// `window`, `series`, `cutoff` or `overall`.
    pub fn name(&self) -> &'static str {
        match self {
            Scope::Window => "window",
            Scope::Series => "series",
            Scope::Cutoff => "cutoff",
            Scope::Overall => "overall",
        }
    }
}

/// One row of the metric table: `unique_id` is set for `window` and `series` rows, `cutoff` for `window` and
/// `cutoff` rows; `metric` is a [`Metric::name`].
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MetricRow {
    pub model: String,
    pub scope: Scope,
    pub unique_id: Option<String>,
    pub cutoff: Option<String>,
    pub metric: String,
    pub value: f64,
}

/// The windows of one series: `(cutoff text, window)` in the order they should be reported.
#[derive(Debug, Clone)]
pub struct SeriesWindows<'a> {
    pub unique_id: &'a str,
    pub windows: Vec<(String, WindowInput<'a>)>,
}

/// Scores every window of every series and aggregates them (see [`Scope`]); rows come window rows first (series
/// by series, windows in order), then series rows, cutoff rows (cutoffs in order of first appearance) and overall
/// rows, metrics in [`Metric`] order. Undefined aggregates are left out (see [`crate::metrics`]). An error names
/// the series and cutoff of the first bad window, or the cutoff whose series disagree on the quantile levels.
pub fn evaluate(model: &str, series: &[SeriesWindows], season: usize) -> Result<Vec<MetricRow>, MetricError> {
    let row = |scope, unique_id: Option<&str>, cutoff: Option<&str>, metric: Metric, value| MetricRow {
        model: model.to_string(),
        scope,
        unique_id: unique_id.map(str::to_string),
        cutoff: cutoff.map(str::to_string),
        metric: metric.name(),
        value,
    };
    let mut window_rows = Vec::new();
    let mut series_rows = Vec::new();
    let mut cutoff_order: Vec<&str> = Vec::new();
    let mut pools: BTreeMap<usize, Pool> = BTreeMap::new();
    let mut seen = HashSet::new();
    for s in series {
        let mut per_series: BTreeMap<Metric, Mean> = BTreeMap::new();
        for (cutoff, w) in &s.windows {
            if !seen.insert((s.unique_id, cutoff.as_str())) {
                return Err(MetricError::DuplicateWindow {
                    unique_id: s.unique_id.to_string(),
                    cutoff: cutoff.clone(),
                });
            }
            let parts = WindowParts::new(w, season).map_err(|e| MetricError::InWindow {
                unique_id: s.unique_id.to_string(),
                cutoff: cutoff.clone(),
                source: Box::new(e),
            })?;
            for (metric, value) in parts.scores() {
                window_rows.push(row(Scope::Window, Some(s.unique_id), Some(cutoff), metric, value));
                per_series.entry(metric).or_default().add(value);
            }
            let index = match cutoff_order.iter().position(|c| c == cutoff) {
                Some(i) => i,
                None => {
                    cutoff_order.push(cutoff);
                    cutoff_order.len() - 1
                }
            };
            pools.entry(index).or_default().add(&parts, cutoff)?;
        }
        for (metric, m) in per_series {
            if let Some(v) = m.mean() {
                series_rows.push(row(Scope::Series, Some(s.unique_id), None, metric, v));
            }
        }
    }
    let mut cutoff_rows = Vec::new();
    let mut overall: BTreeMap<Metric, Mean> = BTreeMap::new();
    for (index, pool) in &pools {
        for (metric, value) in pool.scores() {
            cutoff_rows.push(row(Scope::Cutoff, None, Some(cutoff_order[*index]), metric, value));
            overall.entry(metric).or_default().add(value);
        }
    }
    let mut rows = window_rows;
    rows.append(&mut series_rows);
    rows.append(&mut cutoff_rows);
    rows.extend(
        overall.into_iter().filter_map(|(m, mean)| Some(row(Scope::Overall, None, None, m, mean.mean()?))),
    );
    Ok(rows)
}

/// The windows of one cutoff, pooled.
#[derive(Debug, Default)]
struct Pool {
    point: PointSums,
    wql: Option<WqlSums>,
    /// Per-series values (utilsforecast metrics are averaged over series, not pooled).
    scaled_crps: Mean,
    coverage: BTreeMap<u32, Mean>,
    crps_samples: Option<Mean>,
    direction: Mean,
}

impl Pool {
    fn add(&mut self, parts: &WindowParts, cutoff: &str) -> Result<(), MetricError> {
        let p = &mut self.point;
        p.abs_err.merge(&parts.point.abs_err);
        p.sq_err.merge(&parts.point.sq_err);
        p.smape.merge(&parts.point.smape);
        p.mase.merge(&parts.point.mase);
        if let Some(w) = &parts.wql {
            match &mut self.wql {
                None => self.wql = Some(w.clone()),
                Some(pooled) if pooled.levels == w.levels => pooled.pool(w),
                Some(pooled) => {
                    return Err(MetricError::MixedQuantileLevels {
                        cutoff: cutoff.to_string(),
                        first: pooled.levels.clone(),
                        other: w.levels.clone(),
                    })
                }
            }
        }
        if let Some(v) = parts.scaled_crps {
            self.scaled_crps.add(v);
        }
        for &(level, v) in &parts.coverage {
            if let Some(v) = v {
                self.coverage.entry(level).or_default().add(v);
            }
        }
        if let Some(c) = &parts.crps_samples {
            self.crps_samples.get_or_insert_with(Mean::default).merge(c);
        }
        if let Some(d) = &parts.direction {
            self.direction.merge(d);
        }
        Ok(())
    }

    fn scores(&self) -> Vec<(Metric, f64)> {
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
        push(Metric::ScaledCrps, self.scaled_crps.mean());
        for (&level, m) in &self.coverage {
            push(Metric::Coverage(level), m.mean());
        }
        push(Metric::CrpsSamples, self.crps_samples.and_then(|m| m.mean()));
        push(Metric::DirectionAccuracy, self.direction.mean());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Quantiles, Samples};

    fn w<'a>(history: &'a [f64], actual: &'a [f64], point: &'a [f64]) -> WindowInput<'a> {
        WindowInput { history, actual, point, quantiles: None, samples: None }
    }

    fn value(rows: &[MetricRow], scope: Scope, id: Option<&str>, cutoff: Option<&str>, metric: &str) -> f64 {
        let found: Vec<&MetricRow> = rows
            .iter()
            .filter(|r| {
                r.scope == scope
                    && r.unique_id.as_deref() == id
                    && r.cutoff.as_deref() == cutoff
                    && r.metric == metric
            })
            .collect();
        assert_eq!(found.len(), 1, "{scope:?} {id:?} {cutoff:?} {metric}: {found:?}");
        found[0].value
    }

    #[test]
    fn pooled_and_averaged_aggregates_by_hand() {
        let h = [0.0, 1.0];
        // a@c1: errors 1, 3; a@c2: error 2, NaN actual; b@c1: error 5 (one missing actual).
        let series = [
            SeriesWindows {
                unique_id: "a",
                windows: vec![
                    ("c1".into(), w(&h, &[1.0, 3.0], &[0.0, 0.0])),
                    ("c2".into(), w(&h, &[2.0, f64::NAN], &[0.0, 0.0])),
                ],
            },
            SeriesWindows {
                unique_id: "b",
                windows: vec![("c1".into(), w(&h, &[f64::NAN, 5.0], &[0.0, 0.0]))],
            },
        ];
        let rows = evaluate("m", &series, 1).unwrap();
        assert!(rows.iter().all(|r| r.model == "m"));
        assert_eq!(value(&rows, Scope::Window, Some("a"), Some("c1"), "mae"), 2.0);
        assert_eq!(value(&rows, Scope::Window, Some("b"), Some("c1"), "mae"), 5.0);
        assert_eq!(value(&rows, Scope::Series, Some("a"), None, "mae"), 2.0); // mean of 2 and 2
                                                                              // Cutoff c1 pools the three present steps: (1 + 3 + 5) / 3, not the mean of 2 and 5.
        assert_eq!(value(&rows, Scope::Cutoff, None, Some("c1"), "mae"), 3.0);
        assert_eq!(value(&rows, Scope::Cutoff, None, Some("c1"), "rmse"), (35.0f64 / 3.0).sqrt());
        assert_eq!(value(&rows, Scope::Cutoff, None, Some("c2"), "mae"), 2.0);
        assert_eq!(value(&rows, Scope::Overall, None, None, "mae"), 2.5); // mean over cutoffs
                                                                          // Order: window rows, series rows, cutoff rows, overall rows.
        let scopes: Vec<Scope> = rows.iter().map(|r| r.scope).collect();
        let mut sorted = scopes.clone();
        sorted.sort_by_key(|s| *s as u8);
        assert_eq!(scopes, sorted);
    }

    #[test]
    fn samples_and_directions_pool_over_steps() {
        // a: y 2, samples 1, 3 → CRPS 0.5; from 1 up, forecast 3 up ✓.
        // b: y 1, 5, one sample 1 → CRPS 0, 4; from 1 flat/flat ✓, up/flat ✗.
        let mut a = w(&[1.0], &[2.0], &[3.0]);
        a.samples = Some(Samples { count: 2, values: &[1.0, 3.0] });
        let mut b = w(&[1.0], &[1.0, 5.0], &[1.0, 1.0]);
        b.samples = Some(Samples { count: 1, values: &[1.0, 1.0] });
        let series = [
            SeriesWindows { unique_id: "a", windows: vec![("c".into(), a)] },
            SeriesWindows { unique_id: "b", windows: vec![("c".into(), b)] },
        ];
        let rows = evaluate("m", &series, 1).unwrap();
        assert_eq!(value(&rows, Scope::Window, Some("b"), Some("c"), "crps_samples"), 2.0);
        // Pooled over the 3 steps, not the mean of the series' 0.5 and 2 (1.25) or 1 and 0.5 (0.75).
        assert_eq!(value(&rows, Scope::Cutoff, None, Some("c"), "crps_samples"), 1.5);
        assert_eq!(value(&rows, Scope::Cutoff, None, Some("c"), "direction_accuracy"), 2.0 / 3.0);
        assert_eq!(value(&rows, Scope::Overall, None, None, "direction_accuracy"), 2.0 / 3.0);
    }

    #[test]
    fn errors_name_the_series_and_cutoff() {
        let series = [SeriesWindows {
            unique_id: "s1",
            windows: vec![("2024-01-02".into(), w(&[1.0], &[1.0], &[f64::NAN]))],
        }];
        let e = evaluate("m", &series, 1).unwrap_err();
        assert!(e.to_string().contains("series s1 at cutoff 2024-01-02"), "{e}");
        let dup = [SeriesWindows {
            unique_id: "s1",
            windows: vec![("c".into(), w(&[1.0], &[1.0], &[1.0])), ("c".into(), w(&[1.0], &[1.0], &[1.0]))],
        }];
        assert!(matches!(evaluate("m", &dup, 1), Err(MetricError::DuplicateWindow { .. })));
        let mut a = w(&[1.0], &[1.0], &[1.0]);
        a.quantiles = Some(Quantiles { levels: &[0.1], values: &[1.0] });
        let mut b = a;
        b.quantiles = Some(Quantiles { levels: &[0.9], values: &[1.0] });
        let mixed = [
            SeriesWindows { unique_id: "a", windows: vec![("c".into(), a)] },
            SeriesWindows { unique_id: "b", windows: vec![("c".into(), b)] },
        ];
        assert!(matches!(evaluate("m", &mixed, 1), Err(MetricError::MixedQuantileLevels { .. })));
    }
}
