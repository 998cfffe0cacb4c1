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
    /// Grid points of the longest series without timestamps: their positions are counted with every such series
    /// aligned at its last point ([`Backtest::stamp`]).
    pub longest: usize,
    /// Said once when series with timestamps end at different times: their cutoffs are pooled by timestamp, so
    /// windows of the same index from the end fall into different cutoff rows.
    pub warning: Option<String>,
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
        let longest =
            series.iter().zip(&axes).filter(|(_, a)| a.is_none()).map(|(s, _)| s.values.len()).max();
        let warning = different_ends(&series, &axes);
        Ok(Backtest {
            series,
            values,
            axes,
            plans,
            season: 1,
            time_name,
            longest: longest.unwrap_or(0),
            warning,
        })
    }

    pub fn ids(&self) -> Vec<String> {
        self.series.iter().map(|s| s.unique_id.clone()).collect()
    }

    /// The text of grid position `k` (0-based) of series `s`: its timestamp; without timestamps, the position
    /// counted with the series aligned at its last point on the longest one (`k + longest - len`), so windows of
    /// the same index from the end share their cutoff, and pool in one cutoff row, as fev and Nixtla pool them.
    /// Series of one length keep their own positions.
    pub fn stamp(&self, s: usize, k: usize) -> String {
        let len = self.series[s].values.len();
        match &self.axes[s] {
            Some(a) => i64::try_from(k)
                .ok()
                .zip(i64::try_from(len).ok())
                .and_then(|(k, len)| a.at(k - (len - 1)))
                .map_or_else(|| k.to_string(), |t| t.to_text()),
            None => (k + self.longest.saturating_sub(len)).to_string(),
        }
    }

    pub fn windows(&self) -> usize {
        self.plans.iter().map(Vec::len).sum()
    }
}

/// The warning for series with timestamps that end at different times (`None` when they all end together).
fn different_ends(series: &[SeriesInput], axes: &[Option<TimeAxis>]) -> Option<String> {
    let mut ends = series.iter().zip(axes).filter_map(|(s, a)| a.as_ref().map(|a| (s, a.last)));
    let (first, first_end) = ends.next()?;
    let (other, other_end) = ends.find(|(_, end)| end.at != first_end.at)?;
    Some(format!(
        "note: the series end at different times ({} at {first_end}, {} at {other_end}): each cutoff row pools \
         the windows that share its timestamp, so windows of the same index from the end land in different \
         cutoff rows; cut the series to one end for cutoff rows that compare like with like",
        first.unique_id, other.unique_id
    ))
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
    use crate::metrics::Scope;
    use engines::request::{Limits, Overrides};
    use tables::{Format, ReadOptions};

    /// A long table of ramps `y = slope × i`, one series per (id, points, slope), with or without a daily `ds`.
    fn backtest(series: &[(&str, usize, f32)], dated: bool) -> Backtest {
        let mut csv = String::from(if dated { "unique_id,ds,y\n" } else { "unique_id,y\n" });
        for &(id, n, slope) in series {
            for i in 0..n {
                let ds =
                    if dated { format!("{},", 1_700_000_000 + 86_400 * i as i64) } else { String::new() };
                csv.push_str(&format!("{id},{ds}{}\n", slope * i as f32));
            }
        }
        let o = Overrides { horizon: Some(10), ..Overrides::default() };
        let d = tables::parse(
            csv.into_bytes(),
            Format::Csv,
            "t.csv",
            &ReadOptions::default(),
            &o,
            &Limits::default(),
        )
        .unwrap();
        Backtest::from_dataset(d, WindowSpec::new(3, None, 10)).unwrap()
    }

    #[test]
    fn without_timestamps_windows_pool_by_their_index_from_the_end() {
        // 100 and 120 points, h = 10, 3 windows: cutoffs at positions 69, 79, 89 and 89, 99, 109.
        let bt = backtest(&[("a", 100, 1.0), ("b", 120, 3.0)], false);
        let cutoffs: Vec<Vec<usize>> =
            bt.plans.iter().map(|p| p.iter().map(|w| w.cutoff).collect()).collect();
        assert_eq!(cutoffs, [vec![69, 79, 89], vec![89, 99, 109]]);
        // Labelled with the series aligned at their last points: window i of each has one label.
        assert_eq!(
            (bt.stamp(0, 69), bt.stamp(1, 89), bt.stamp(0, 0), bt.stamp(1, 0)),
            ("89".into(), "89".into(), "20".into(), "0".into())
        );
        assert!(bt.warning.is_none());
        // The naive forecast of a ramp misses by slope × 1..=10: mean 5.5 × slope in every window.
        let [(_, naive), _] = score::baselines(&bt.values, &bt.plans, 1, 0);
        let ids = bt.ids();
        let cutoff = |s: usize, w: &Window| bt.stamp(s, w.cutoff);
        let sc = score::Scoring { ids: &ids, values: &bt.values, season: 1, cutoff: &cutoff };
        let rows = score::evaluate(&sc, "naive", &naive.iter().collect::<Vec<_>>(), &[], 0).unwrap();
        let per_cutoff: Vec<(String, f64)> = rows
            .iter()
            .filter(|r| r.scope == Scope::Cutoff && r.metric == "mae")
            .map(|r| (r.cutoff.clone().unwrap(), r.value))
            .collect();
        // Three cutoff rows, each pooling a's 5.5 and b's 16.5 over 20 steps.
        assert_eq!(per_cutoff, [("89".into(), 11.0), ("99".into(), 11.0), ("109".into(), 11.0)]);
        let overall = rows.iter().find(|r| r.scope == Scope::Overall && r.metric == "mae").unwrap();
        assert_eq!(overall.value, 11.0);
        // The forecast table labels the rows the same way.
        let table = forecast_table(&bt, &[]);
        assert_eq!(table.rows(), 60);
    }

    #[test]
    fn series_with_timestamps_that_end_apart_are_warned_about() {
        let bt = backtest(&[("a", 100, 1.0), ("b", 120, 3.0)], true);
        let w = bt.warning.as_deref().unwrap();
        assert!(w.contains("end at different times (a at 1708553600, b at 1710281600)"), "{w}");
        assert!(backtest(&[("a", 100, 1.0), ("b", 100, 3.0)], true).warning.is_none());
    }

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
