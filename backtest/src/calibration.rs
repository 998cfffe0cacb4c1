//! Calibration of a sampled forecast, from its sample paths: how often the actual value falls in the paths'
//! central intervals against their nominal levels, and the histogram of the probability integral transform (PIT).
//! A calibrated forecaster's PIT is uniform (every bin holds 1/[`PIT_BINS`] of the points) and its coverage equals
//! the nominal level; cones that are too narrow (what users of upstream's candle model report most,
//! shiyu-coder's #269, #387) pile the PIT into the outer bins and cover less than nominal.
//!
//! # Definitions (docs/formats.md, "Backtest metrics")
//! Over every (series, window, step) whose actual `y` is present, with the `M` paths' values `x_1..x_M` at that
//! step:
//! * PIT `u = (#{x_i < y} + ½·#{x_i = y}) / M` (the mid-rank PIT of the empirical distribution: ties count half,
//!   so a forecast equal to the actual on every path gives ½, not 0 or 1).
//! * PIT histogram: [`PIT_BINS`] bins of width 1/[`PIT_BINS`]; `u` falls in bin `min(⌊u·PIT_BINS⌋, PIT_BINS − 1)`
//!   (`u = 1` in the last). Each bin's value is its count over the points.
//! * Coverage at interval level `L` %: the fraction of points with `(1 − L/100)/2 ≤ u ≤ (1 + L/100)/2`, i.e. the
//!   actual inside the paths' central `L` % interval (both ends included).
//!
//! Every figure is a count over the points divided by the points, in f64, so anyone can recompute it exactly from
//! the paths and actuals in the forecast table (`totoc backtest --output`; the integration test does).

use crate::metrics::{MetricRow, Scope};
use crate::run::WindowForecast;

/// Bins of the PIT histogram.
pub const PIT_BINS: usize = 10;

/// The interval levels (%) every calibration reports, besides those of the run's quantile levels.
pub const DEFAULT_INTERVALS: [u32; 4] = [50, 80, 90, 95];

/// One model's calibration over a backtest.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    /// Sample paths per window.
    pub paths: usize,
    /// Points scored: (series, window, step) with the actual present.
    pub points: u64,
    /// `(L, fraction covered)` per interval level, ascending.
    pub coverage: Vec<(u32, f64)>,
    /// Points per PIT bin, lowest bin first.
    pub pit: [u64; PIT_BINS],
}

/// The mid-rank PIT of `y` among `paths` (see the module's definitions).
pub fn pit(paths: &[f64], y: f64) -> f64 {
    let below = paths.iter().filter(|&&x| x < y).count() as f64;
    let equal = paths.iter().filter(|&&x| x == y).count() as f64;
    (below + 0.5 * equal) / paths.len() as f64
}

/// The PIT bin of `u` in `[0, 1]`.
pub fn pit_bin(u: f64) -> usize {
    ((u * PIT_BINS as f64).floor() as usize).min(PIT_BINS - 1)
}

/// Whether PIT `u` lies in the central interval of level `level` %.
pub fn covered(u: f64, level: u32) -> bool {
    let half = f64::from(level) / 100.0 / 2.0;
    (0.5 - half..=0.5 + half).contains(&u)
}

/// The interval levels a calibration reports: [`DEFAULT_INTERVALS`] and `from_quantiles` (the run's quantile
/// levels' intervals), ascending, once each.
pub fn intervals(from_quantiles: &[u32]) -> Vec<u32> {
    let mut v: Vec<u32> = DEFAULT_INTERVALS.iter().chain(from_quantiles).copied().collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The calibration of `forecasts` (each with `paths` sample paths kept) against `values` (the series' values in
/// f64, NaN = missing, by series index), at `levels` %. `None` when no forecast holds paths or no actual is
/// present (nothing to calibrate).
pub fn calibrate(
    values: &[Vec<f64>],
    forecasts: &[&WindowForecast],
    paths: usize,
    levels: &[u32],
) -> Option<Calibration> {
    if paths == 0 {
        return None;
    }
    let mut points = 0u64;
    let mut pit_counts = [0u64; PIT_BINS];
    let mut inside = vec![0u64; levels.len()];
    let mut column = Vec::with_capacity(paths);
    for f in forecasts {
        let Some(samples) = f.samples.as_deref() else { continue };
        let h = f.window.horizon;
        let actual = &values[f.series][f.window.actual_range()];
        for (t, &y) in actual.iter().enumerate().filter(|(_, y)| !y.is_nan()) {
            column.clear();
            column.extend((0..paths).map(|s| samples[s * h + t]));
            let u = pit(&column, y);
            points += 1;
            pit_counts[pit_bin(u)] += 1;
            for (n, &level) in inside.iter_mut().zip(levels) {
                *n += u64::from(covered(u, level));
            }
        }
    }
    if points == 0 {
        return None;
    }
    let coverage = levels.iter().zip(&inside).map(|(&l, &n)| (l, n as f64 / points as f64)).collect();
    Some(Calibration { paths, points, coverage, pit: pit_counts })
}

impl Calibration {
    /// Fraction of the points in PIT bin `k`.
    pub fn pit_fraction(&self, k: usize) -> f64 {
        self.pit[k] as f64 / self.points as f64
    }

    /// The bounds of PIT bin `k`, as its metric name writes them (`0.0-0.1`).
    pub fn bin_name(k: usize) -> String {
        format!("pit_{:.1}-{:.1}", k as f64 / PIT_BINS as f64, (k + 1) as f64 / PIT_BINS as f64)
    }

    /// The overall metric rows of `model`: `path_coverage_L` per level, `pit_A-B` per bin, and `pit_points`.
    pub fn rows(&self, model: &str) -> Vec<MetricRow> {
        let row = |metric: String, value: f64| MetricRow {
            model: model.to_string(),
            scope: Scope::Overall,
            unique_id: None,
            cutoff: None,
            metric,
            value,
        };
        let mut out: Vec<MetricRow> =
            self.coverage.iter().map(|&(l, v)| row(format!("path_coverage_{l}"), v)).collect();
        out.extend((0..PIT_BINS).map(|k| row(Self::bin_name(k), self.pit_fraction(k))));
        out.push(row("pit_points".to_string(), self.points as f64));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::windows::{Window, WindowSpec};

    #[test]
    fn pit_counts_ties_half() {
        assert_eq!(pit(&[1.0, 2.0, 3.0, 4.0], 2.5), 0.5);
        assert_eq!(pit(&[1.0, 2.0, 3.0, 4.0], 0.0), 0.0);
        assert_eq!(pit(&[1.0, 2.0, 3.0, 4.0], 9.0), 1.0);
        assert_eq!(pit(&[1.0, 2.0, 2.0, 4.0], 2.0), 0.5);
        assert_eq!(pit(&[5.0; 8], 5.0), 0.5);
    }

    #[test]
    fn bins_and_intervals_include_their_ends() {
        assert_eq!((pit_bin(0.0), pit_bin(0.099), pit_bin(0.1), pit_bin(1.0)), (0, 0, 1, 9));
        assert!(covered(0.1, 80) && covered(0.9, 80) && !covered(0.0875, 80) && !covered(0.9125, 80));
        assert!(covered(0.5, 50) && !covered(0.2, 50));
        assert_eq!(intervals(&[80, 98]), [50, 80, 90, 95, 98]);
    }

    fn window(horizon: usize, index: usize) -> Window {
        let plan = crate::windows::plan("s", 20, &WindowSpec::new(2, None, horizon), &|_| None).unwrap();
        plan[index]
    }

    #[test]
    fn a_calibration_counts_every_present_actual_once() {
        // 20 points y = t; windows of 2 steps with cutoffs 15, 17: actuals 16, 17 and 18, 19 (19 missing).
        let mut values: Vec<f64> = (0..20).map(f64::from).collect();
        values[19] = f64::NAN;
        let values = vec![values];
        // 4 paths; step values chosen so the PITs are 0.5, 1.0 (all below) and 0.0 (all above).
        let make = |index: usize, samples: Vec<f64>| WindowForecast {
            series: 0,
            window: window(2, index),
            point: vec![0.0; 2],
            quantiles: Vec::new(),
            samples: Some(samples),
        };
        // layout values[path * H + step]
        let a = make(0, vec![15.0, 0.0, 15.5, 0.0, 16.5, 0.0, 17.0, 0.0]);
        let b = make(1, vec![20.0, 0.0, 21.0, 0.0, 22.0, 0.0, 23.0, 0.0]);
        let c = calibrate(&values, &[&a, &b], 4, &[50, 80]).unwrap();
        assert_eq!(c.points, 3);
        // PITs 0.5, 1.0, 0.0
        let mut want = [0u64; PIT_BINS];
        want[5] = 1;
        want[9] = 1;
        want[0] = 1;
        assert_eq!(c.pit, want);
        assert_eq!(c.coverage, [(50, 1.0 / 3.0), (80, 1.0 / 3.0)]);
        let rows = c.rows("m");
        assert_eq!(rows[0].metric, "path_coverage_50");
        assert_eq!(rows[2].metric, "pit_0.0-0.1");
        assert_eq!(rows[11].metric, "pit_0.9-1.0");
        assert_eq!(rows.last().map(|r| (r.metric.as_str(), r.value)), Some(("pit_points", 3.0)));
        // no paths: nothing to calibrate
        assert!(calibrate(&values, &[&a], 0, &[50]).is_none());
    }
}
