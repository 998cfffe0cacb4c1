//! The run's forecasts as the metrics' inputs ([`crate::metrics::evaluate`]), and the naive and seasonal-naive
//! baselines forecast on the same windows. Histories and actual values are the series' own grid values in f64
//! (NaN = missing): the history up to each cutoff is the whole series before it (MASE's seasonal scale uses all
//! of it, as fev does), not just the context the model saw.

use crate::metrics::{self, MetricError, MetricRow, Quantiles, Samples, SeriesWindows, WindowInput};
use crate::run::{SeriesInput, WindowForecast};
use crate::windows::Window;

/// The names of the baseline models in every report.
pub const NAIVE: &str = "naive";
pub const SEASONAL_NAIVE: &str = "seasonal_naive";

/// A series' values in f64, NaN for a missing point.
pub fn values_f64(s: &SeriesInput) -> Vec<f64> {
    s.values.iter().map(|v| v.map_or(f64::NAN, f64::from)).collect()
}

/// The naive and seasonal-naive forecasts of every planned window (same order as the run's forecasts), with
/// `levels` quantile levels that all equal the point forecast (as fev's baselines report quantiles, so they have
/// a WQL and a WQL skill can be taken against them).
pub fn baselines(
    values: &[Vec<f64>],
    plans: &[Vec<Window>],
    season: usize,
    levels: usize,
) -> [(String, Vec<WindowForecast>); 2] {
    let make = |f: &dyn Fn(&[f64], usize) -> Vec<f64>| -> Vec<WindowForecast> {
        plans
            .iter()
            .enumerate()
            .flat_map(|(i, p)| p.iter().map(move |w| (i, *w)))
            .map(|(i, w)| {
                let point = f(&values[i][..w.history_len()], w.horizon);
                let quantiles = metrics::point_as_quantiles(&point, levels);
                WindowForecast { series: i, window: w, point, quantiles, samples: None }
            })
            .collect()
    };
    [
        (NAIVE.to_string(), make(&|h, n| metrics::naive(h, n))),
        (SEASONAL_NAIVE.to_string(), make(&|h, n| metrics::seasonal_naive(h, n, season))),
    ]
}

/// What every model of one backtest is scored against.
pub struct Scoring<'a> {
    /// Series ids, by series index.
    pub ids: &'a [String],
    /// Series values in f64 ([`values_f64`]), by series index.
    pub values: &'a [Vec<f64>],
    /// MASE's season (and the seasonal-naive baseline's).
    pub season: usize,
    /// The cutoff's text in the tables (its timestamp, or its grid position), by series index and window.
    pub cutoff: &'a dyn Fn(usize, &Window) -> String,
}

/// The metric rows of one model's forecasts (`forecasts` in series-major order, any subset of the planned
/// windows). `levels`: the quantile levels of `forecasts[..].quantiles`; `sample_paths`: paths per window when
/// kept (0: sample paths are not scored).
pub fn evaluate(
    sc: &Scoring,
    model: &str,
    forecasts: &[&WindowForecast],
    levels: &[f64],
    sample_paths: usize,
) -> Result<Vec<MetricRow>, MetricError> {
    let (ids, values, season, cutoff) = (sc.ids, sc.values, sc.season, sc.cutoff);
    let mut groups: Vec<SeriesWindows> = Vec::new();
    let mut current: Option<usize> = None;
    for f in forecasts {
        let s = f.series;
        let v = &values[s];
        let input = WindowInput {
            history: &v[..f.window.history_len()],
            actual: &v[f.window.actual_range()],
            point: &f.point,
            quantiles: (!levels.is_empty() && !f.quantiles.is_empty())
                .then(|| Quantiles { levels, values: &f.quantiles }),
            samples: f
                .samples
                .as_deref()
                .filter(|_| sample_paths > 0)
                .map(|values| Samples { count: sample_paths, values }),
        };
        if current != Some(s) {
            groups.push(SeriesWindows { unique_id: &ids[s], windows: Vec::new() });
            current = Some(s);
        }
        groups.last_mut().expect("pushed above").windows.push((cutoff(s, &f.window), input));
    }
    metrics::evaluate(model, &groups, season)
}
