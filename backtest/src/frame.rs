//! A backtest over a table's series, shared by `totoc backtest` and the Python package's `cross_validation`: the
//! series of a [`tables::Dataset`] with their windows planned ([`Backtest::from_dataset`]), how an engine
//! forecasts each window ([`run_spec`]), and the per-window forecast table with Nixtla's columns
//! ([`forecast_table`]: `unique_id`, the timestamp column, `cutoff`, `y`, then per model its point column and its
//! quantile columns named as utilsforecast expects, [`quantile_column`]).

use tables::axis::TimeAxis;
use tables::table_out::{Column, Table};
use tables::Dataset;

use crate::metrics;
use crate::run::{plan_all, RunError, RunSpec, SeriesInput, WindowForecast};
use crate::score;
use crate::windows::{Window, WindowSpec};

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error(transparent)]
    Run(#[from] RunError),
    /// Input a backtest cannot score; the message says the problem and the fix.
    #[error("{0}")]
    Input(String),
}

/// The series as the backtest sees them, and their windows.
pub struct Backtest {
    pub series: Vec<SeriesInput>,
    pub values: Vec<Vec<f64>>,
    pub axes: Vec<Option<TimeAxis>>,
    pub plans: Vec<Vec<Window>>,
    /// The season of MASE and the seasonal-naive baseline (1 until the caller sets it).
    pub season: usize,
    /// The input's timestamp column name (`ds` without one).
    pub time_name: String,
}

impl Backtest {
    /// The series of `dataset` (one target each) and their windows of `windows`.
    pub fn from_dataset(dataset: Dataset, windows: WindowSpec) -> Result<Backtest, FrameError> {
        let time_name = dataset.columns.time.as_ref().map_or_else(|| "ds".to_string(), |(n, _)| n.clone());
        let mut series = Vec::with_capacity(dataset.series.len());
        let mut axes = Vec::with_capacity(dataset.series.len());
        for (i, s) in dataset.series.into_iter().enumerate() {
            if s.request.target.len() != 1 {
                return Err(FrameError::Input(format!(
                    "{}: {} target columns ({}); a backtest scores one target per series: pass --target-columns COL",
                    s.at,
                    s.request.target.len(),
                    s.target_names.join(", ")
                )));
            }
            let unique_id = s.request.id.as_ref().map_or_else(|| format!("series_{i}"), ToString::to_string);
            let values = s.request.target.into_iter().next().unwrap_or_default();
            series.push(SeriesInput { unique_id, values });
            axes.push(s.time);
        }
        let probe = RunSpec {
            windows,
            context: 1,
            samples: 0,
            quantiles: Vec::new(),
            seed: 0,
            keep_samples: false,
            chunk: 1,
        };
        let plans = plan_all(&series, &probe, &|s, k| {
            axes[s].as_ref().and_then(|ax: &TimeAxis| ax.at(k)).map(|t| t.to_text())
        })?;
        let values = series.iter().map(score::values_f64).collect();
        Ok(Backtest { series, values, axes, plans, season: 1, time_name })
    }

    pub fn ids(&self) -> Vec<String> {
        self.series.iter().map(|s| s.unique_id.clone()).collect()
    }

    /// The text of grid position `k` (0-based) of series `s`: its timestamp, else the position itself.
    pub fn stamp(&self, s: usize, k: usize) -> String {
        let len = self.series[s].values.len() as i64;
        self.axes[s]
            .as_ref()
            .and_then(|a| a.at(k as i64 - (len - 1)))
            .map_or_else(|| k.to_string(), |t| t.to_text())
    }

    pub fn windows(&self) -> usize {
        self.plans.iter().map(Vec::len).sum()
    }
}

/// How an engine forecasts each window: `quantiles` as given, else `[0.1, 0.5, 0.9]` where the engine makes
/// quantiles (when sampling, or a model that predicts them: `model_samples` false), else none.
pub fn run_spec(
    windows: WindowSpec,
    context: usize,
    samples: usize,
    quantiles: Option<Vec<f64>>,
    seed: u64,
    chunk: usize,
    model_samples: bool,
) -> RunSpec {
    let quantiles = match quantiles {
        Some(q) => q,
        None if samples > 0 || !model_samples => engines::request::DEFAULT_QUANTILES.to_vec(),
        None => Vec::new(),
    };
    RunSpec { windows, context, samples, quantiles, seed, keep_samples: samples > 0, chunk }
}

/// The column of quantile level `q` of model `label`: utilsforecast's `{label}-lo-{L}` / `{label}-hi-{L}`
/// ([`metrics::quantile_column`]), `{label}-median` for 0.5, and `{label}-q{q}` for a level whose interval is not
/// a whole percent (utilsforecast has no name for it).
pub fn quantile_column(label: &str, q: f64) -> String {
    metrics::quantile_column(label, q).unwrap_or_else(|| {
        if q == 0.5 {
            format!("{label}-median")
        } else {
            format!("{label}-q{q}")
        }
    })
}

/// One model's columns of the forecast table: its forecasts in plan order (`None`: that window has none) and
/// the quantile levels they hold.
pub struct Model<'a> {
    pub label: &'a str,
    pub forecasts: Vec<Option<&'a WindowForecast>>,
    pub levels: &'a [f64],
}

/// One value per table row, from forecasts in plan order.
fn per_step(
    bt: &Backtest,
    forecasts: &[Option<&WindowForecast>],
    value: &dyn Fn(&WindowForecast, usize) -> f64,
) -> Column {
    let mut out = Vec::new();
    let mut i = 0;
    for plan in &bt.plans {
        for w in plan {
            for h in 0..w.horizon {
                out.push(forecasts[i].map(|f| value(f, h)).filter(|x| x.is_finite()));
            }
            i += 1;
        }
    }
    Column::Number(out)
}

/// The per-window forecast table: one row per series, window and step.
pub fn forecast_table(bt: &Backtest, models: &[Model<'_>]) -> Table {
    let (mut ids, mut ds, mut cutoffs, mut ys) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (s, plan) in bt.plans.iter().enumerate() {
        for w in plan {
            let cutoff = bt.stamp(s, w.cutoff);
            for k in w.actual_range() {
                ids.push(Some(bt.series[s].unique_id.clone()));
                ds.push(Some(bt.stamp(s, k)));
                cutoffs.push(Some(cutoff.clone()));
                ys.push(Some(bt.values[s][k]).filter(|y| y.is_finite()));
            }
        }
    }
    let mut t = Table::default();
    t.push("unique_id", Column::Text(ids));
    t.push(bt.time_name.clone(), Column::Text(ds));
    t.push("cutoff", Column::Text(cutoffs));
    t.push("y", Column::Number(ys));
    let h_len = bt.plans.iter().flatten().next().map_or(0, |w| w.horizon);
    for m in models {
        t.push(m.label, per_step(bt, &m.forecasts, &|f, h| f.point[h]));
        for (j, &q) in m.levels.iter().enumerate() {
            t.push(
                quantile_column(m.label, q),
                per_step(bt, &m.forecasts, &|f, h| {
                    f.quantiles.get(j * h_len + h).copied().unwrap_or(f64::NAN)
                }),
            );
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_columns_are_named_as_utilsforecast_expects() {
        assert_eq!(quantile_column("fp32", 0.1), "fp32-lo-80");
        assert_eq!(quantile_column("fp32", 0.9), "fp32-hi-80");
        assert_eq!(quantile_column("m", 0.025), "m-lo-95");
        assert_eq!(quantile_column("m", 0.975), "m-hi-95");
        assert_eq!(quantile_column("m", 0.5), "m-median");
        assert_eq!(quantile_column("m", 0.3), "m-lo-40");
        assert_eq!(quantile_column("m", 0.333), "m-q0.333");
    }
}
