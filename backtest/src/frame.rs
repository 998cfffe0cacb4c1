//! A backtest over a table's series, shared by `totoc backtest` and the Python package's `cross_validation`: the
//! series of a [`tables::Dataset`] with their windows planned ([`Backtest::from_dataset`]), how an engine
//! forecasts each window ([`run_spec`]), and the per-window forecast table with Nixtla's columns
//! ([`forecast_table`]: `unique_id`, the timestamp column, `cutoff`, `y`, then per model its point column and its
//! quantile columns named as utilsforecast expects, [`quantile_column`]).
//!
//! Every row of the forecast table and every cutoff is labelled with a timestamp. On a session calendar a
//! timestamp is a walk of session steps, so the labels are walked once per series, back from its last point to
//! its earliest cutoff ([`TimeAxis::past`]), and then indexed: `W` windows `S` apart cost `O(W·S)` steps, where
//! walking from the last point for each row cost `O(W·H·W·S)`.

use tables::axis::TimeAxis;
use tables::table_out::{Column, Table};
use tables::timestamps::Stamp;
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
    /// Per series with timestamps, the timestamps of the positions its windows label, walked once.
    labels: Vec<Option<Labels>>,
}

/// The timestamps of one series' positions `from..len` (its earliest cutoff to its last point): `at[k - from]`
/// is the axis' `at(k - (len - 1))`, `None` outside the range of timestamps.
struct Labels {
    from: usize,
    at: Vec<Option<Stamp>>,
}

impl Labels {
    /// Walks `axis` back from the series' last point (position `len - 1`) to position `from` once. The plan bounds
    /// the walk before anything is allocated: a plan exists only when its windows fit the series, so every cutoff
    /// is one of its positions (`0 ≤ from < len`) and the walk holds `len - from ≤ len` stamps, at most one per
    /// grid point the series already holds (its values). `None` for `from ≥ len`, which no plan gives.
    fn walk(axis: &TimeAxis, from: usize, len: usize) -> Option<Labels> {
        let n = len.checked_sub(1)?.checked_sub(from)?;
        let past = axis.past(n);
        let mut at = Vec::with_capacity(n + 1);
        // The steps past the range of timestamps are the oldest (TimeAxis::past).
        at.resize(n - past.len(), None);
        at.extend(past.into_iter().map(Some));
        at.push(axis.at(0));
        Some(Labels { from, at })
    }

    /// The timestamp of position `k`; `None` when the walk did not reach it.
    fn get(&self, k: usize) -> Option<Option<Stamp>> {
        self.at.get(k.checked_sub(self.from)?).copied()
    }
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
        // Asked only by a plan that does not fit, once, for its first cutoff before the series' first point
        // (`k` = minus the windows' span); walked only when that is within twice the series' points, so a huge
        // `windows × step` is refused without being walked.
        let plans = plan_all(&series, &probe, &|s, k| {
            let points = u64::try_from(series[s].values.len()).unwrap_or(u64::MAX);
            let near = k.unsigned_abs() <= points.saturating_mul(2);
            axes[s].as_ref().filter(|_| near).and_then(|ax: &TimeAxis| ax.at(k)).map(|t| t.to_text())
        })?;
        let labels = series
            .iter()
            .zip(&axes)
            .zip(&plans)
            .map(|((s, axis), plan)| {
                let from = plan.iter().map(|w| w.cutoff).min()?;
                Labels::walk(axis.as_ref()?, from, s.values.len())
            })
            .collect();
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
            labels,
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
        match &self.axes[s] {
            Some(_) => self.time(s, k).map_or_else(|| k.to_string(), |t| t.to_text()),
            None => (k + self.longest.saturating_sub(self.series[s].values.len())).to_string(),
        }
    }

    /// The timestamp of grid position `k` (0-based) of series `s`: `None` without timestamps, or outside the range
    /// of timestamps. The positions the windows label were walked once ([`Labels`]); any other is walked from the
    /// series' last point.
    pub fn time(&self, s: usize, k: usize) -> Option<Stamp> {
        let axis = self.axes[s].as_ref()?;
        if let Some(held) = self.labels[s].as_ref().and_then(|l| l.get(k)) {
            return held;
        }
        let len = i64::try_from(self.series[s].values.len()).ok()?;
        axis.at(i64::try_from(k).ok()? - (len - 1))
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

/// The sample-path columns of one model (`totoc backtest --write-samples`): `{label}-sample-{i}` for path
/// `i` of `paths`, one value per table row, null on windows without kept paths. Appended after
/// [`forecast_table`]'s columns, so the table without them is unchanged.
pub fn sample_columns(
    bt: &Backtest,
    label: &str,
    forecasts: &[Option<&WindowForecast>],
    paths: usize,
) -> Vec<(String, Column)> {
    (0..paths)
        .map(|i| {
            let column = per_step(bt, forecasts, &|f, h| {
                f.samples
                    .as_deref()
                    .and_then(|s| s.get(i * f.window.horizon + h))
                    .copied()
                    .unwrap_or(f64::NAN)
            });
            (format!("{label}-sample-{i}"), column)
        })
        .collect()
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

    /// One series `a` of `points` hourly bars on weekdays only (Monday 1 January 2024 on, UTC epochs): its
    /// session is inferred, so its timestamps are walks of session steps.
    fn hourly_weekdays(points: usize) -> Dataset {
        let mut csv = String::from("unique_id,ds,y\n");
        let weekday = |t: i64| (t.div_euclid(86_400) + 3).rem_euclid(7) < 5; // 1970-01-01 was a Thursday
        let stamps = (0..).map(|i| 1_704_067_200 + 3_600 * i).filter(|&t| weekday(t)).take(points);
        for (i, t) in stamps.enumerate() {
            csv.push_str(&format!("a,{t},{}\n", i % 24));
        }
        let o = Overrides { horizon: Some(24), ..Overrides::default() };
        tables::parse(csv.into_bytes(), Format::Csv, "h.csv", &ReadOptions::default(), &o, &Limits::default())
            .unwrap()
    }

    #[test]
    fn labels_on_a_session_are_the_axis_timestamps_of_every_position() {
        let bt = Backtest::from_dataset(hourly_weekdays(1_000), WindowSpec::new(5, Some(30), 24)).unwrap();
        let axis = bt.axes[0].as_ref().unwrap();
        assert_eq!(axis.calendar_text(), "weekdays Mon–Fri UTC, 1 hour");
        let len = bt.series[0].values.len();
        assert_eq!((len, bt.plans[0][0].cutoff), (1_000, 855));
        // Every position, the labelled ones (855..1000, across a weekend) and the ones before them, is the axis'
        // own timestamp.
        for k in (0..len).rev().take(300).chain([0, 1]) {
            let want = axis.at(k as i64 - (len as i64 - 1)).unwrap();
            assert_eq!((bt.time(0, k), bt.stamp(0, k)), (Some(want), want.to_text()), "position {k}");
        }
        assert_eq!(bt.stamp(0, len - 1), "1709046000"); // Tuesday 27 February 2024 15:00 UTC
        assert_eq!(bt.stamp(0, 855), "1708354800"); // Monday 19 February 15:00, the first cutoff
        assert_eq!(bt.stamp(0, 832), "1708099200"); // Friday 16 February 16:00, before the labels: walked
                                                    // The forecast table's rows carry the same labels.
        let table = forecast_table(&bt, &[]);
        assert_eq!(table.rows(), 5 * 24);
    }

    /// Slot visits of the session walks that label a `windows`-window backtest of an hourly weekday series
    /// (its forecast table and its cutoffs).
    fn label_steps(windows: usize) -> u64 {
        let dataset = hourly_weekdays(2_100);
        let before = tables::calendar::slots_walked();
        let bt = Backtest::from_dataset(dataset, WindowSpec::new(windows, None, 24)).unwrap();
        let table = forecast_table(&bt, &[]);
        let cutoffs: Vec<String> = bt.plans[0].iter().map(|w| bt.stamp(0, w.cutoff)).collect();
        assert_eq!((table.rows(), cutoffs.len()), (windows * 24, windows));
        tables::calendar::slots_walked() - before
    }

    #[test]
    fn labelling_a_backtest_walks_the_calendar_linearly_in_its_windows() {
        // 40 and 80 windows of 24 steps: 960 and 1,920 positions from the first cutoff to the end, walked once
        // (968 and 1,936 slot visits: a weekend is two). Walking each row's label from the series' last point
        // visited 504,816 and 2,016,352 slots: 4× for 2× the windows.
        let (w, w2) = (label_steps(40), label_steps(80));
        assert!(w2 * 10 <= w * 22, "{w} slot visits for 40 windows, {w2} for 80: not linear");
        assert!(w <= 2 * 40 * 24 && w2 <= 2 * 80 * 24, "{w}, {w2}: more than two visits per position");
    }

    #[test]
    fn a_plan_that_does_not_fit_names_its_cutoff_without_walking_a_huge_span() {
        let plan = |windows: usize| {
            let dataset = hourly_weekdays(600);
            assert_eq!(
                dataset.series[0].time.as_ref().unwrap().calendar_text(),
                "weekdays Mon–Fri UTC, 1 hour"
            );
            let before = tables::calendar::slots_walked();
            let e = Backtest::from_dataset(dataset, WindowSpec::new(windows, None, 24)).err().unwrap();
            (e.to_string(), tables::calendar::slots_walked() - before)
        };
        // One window too many (24 fit in 600 points): the first cutoff is named by its timestamp, Friday
        // 29 December 2023 23:00 UTC, the open hour before Monday 1 January 00:00.
        let (e, _) = plan(25);
        assert!(e.contains("grid position -1 (1703890800, before the series' first point)"), "{e}");
        // 10^15 windows: a span of 2.4e16 steps, not walked (a walk from the series' end would take years).
        let (e, steps) = plan(1_000_000_000_000_000);
        assert!(e.contains("(before the series' first point)") && steps == 0, "{steps} steps: {e}");
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
