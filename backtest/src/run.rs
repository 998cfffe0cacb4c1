//! The packed run: every window of every series becomes one forecast request holding only the points at or
//! before its cutoff (cut to the context), and all of them go to the engine as one workload through the same
//! call `totoc forecast` and `totoc serve` use ([`engines::engine::Engine::forecast`]): the engine packs each
//! call's requests onto its shape buckets. Calls are chunks of at most [`RunSpec::chunk`] windows so the
//! requests in flight stay bounded; the forecasts kept (point, quantiles, and sample paths when a metric needs
//! them) are bounded by [`MAX_FORECAST_VALUES`] before anything runs.

use std::time::{Duration, Instant};

use engines::request::{ForecastRequest, ForecastResponse, Limits, Overrides, RequestFields, RequestId};
use thiserror::Error;

use crate::windows::{plan, Window, WindowError, WindowSpec};

/// Values of forecasts (f64) a backtest may keep: 2^27 values = 1 GiB. A run asking for more is refused
/// before any engine call, with the numbers and the fix.
pub const MAX_FORECAST_VALUES: u64 = 1 << 27;

/// Windows per engine call by default: enough for the engine to fill its largest batch buckets, few enough that
/// the requests in flight (each at most `context` points) stay small.
pub const DEFAULT_CHUNK: usize = 512;

/// One univariate series to backtest.
#[derive(Debug, Clone)]
pub struct SeriesInput {
    /// Names the series in outputs and errors.
    pub unique_id: String,
    /// Grid values, oldest first; `None` = missing point.
    pub values: Vec<Option<f32>>,
}

/// How each window is forecast.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSpec {
    pub windows: WindowSpec,
    /// Most recent points each window's request holds (the engine's maximum context, or `--context`).
    pub context: usize,
    /// Sample paths per window (0 = the deterministic point forecast only).
    pub samples: usize,
    /// Quantile levels (empty: none).
    pub quantiles: Vec<f64>,
    pub seed: u64,
    /// Keep the sample paths (a sampled metric needs them).
    pub keep_samples: bool,
    /// Windows per engine call.
    pub chunk: usize,
}

/// The forecast of one window.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowForecast {
    /// Index into the run's series.
    pub series: usize,
    pub window: Window,
    /// H point forecasts (the mean for Toto 1.0, the median for Toto 2.0).
    pub point: Vec<f64>,
    /// `values[level_index * H + step]`, levels as [`RunSpec::quantiles`].
    pub quantiles: Vec<f64>,
    /// `values[path * H + step]` when kept.
    pub samples: Option<Vec<f64>>,
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// Series-major, windows oldest first within a series.
    pub forecasts: Vec<WindowForecast>,
    pub engine_calls: usize,
    pub engine_time: Duration,
}

#[derive(Debug, Error)]
pub enum RunError {
    #[error(transparent)]
    Window(#[from] WindowError),
    #[error(
        "{windows} windows × horizon {horizon} × {per_step} values per step ({what}) would keep {values} forecast \
         values, more than the {max} a backtest may hold; ask for fewer --windows or series, or fewer \
         --samples / --quantiles"
    )]
    TooLarge { windows: u64, horizon: usize, per_step: u64, what: String, values: u64, max: u64 },
    /// `refused`: the engines crate's error when its request checks refused the window (the Python package
    /// raises the exception of its kind); `None` for an error of the engine's run.
    #[error("{series}, window {window} (cutoff at grid position {cutoff}): {message}")]
    Request {
        series: String,
        window: usize,
        cutoff: usize,
        message: String,
        refused: Option<Box<engines::Error>>,
    },
    #[error("--context must be at least 1")]
    ZeroContext,
}

/// Plans every series' windows (`stamp(series, k)`: timestamp text of grid position `k` ≤ 0 relative to that
/// series' last point, for errors) and checks the size of what the run will keep. Errors name the series.
pub fn plan_all(
    series: &[SeriesInput],
    spec: &RunSpec,
    stamp: &dyn Fn(usize, i64) -> Option<String>,
) -> Result<Vec<Vec<Window>>, RunError> {
    if spec.context == 0 {
        return Err(RunError::ZeroContext);
    }
    let plans = series
        .iter()
        .enumerate()
        .map(|(i, s)| plan(&s.unique_id, s.values.len(), &spec.windows, &|k| stamp(i, k)))
        .collect::<Result<Vec<_>, _>>()?;
    // each plan holds at most `len` windows, so this sum is bounded by the input's size
    let windows: u64 = plans.iter().map(|p| p.len() as u64).sum();
    check_kept(windows, spec, 1)?;
    Ok(plans)
}

/// Checks the size of what a run of `windows` windows keeps, `variates` rows of each forecast (the scored one: 1;
/// a caller that keeps every column of a family's answer: its columns), before anything runs.
pub fn check_kept(windows: u64, spec: &RunSpec, variates: u64) -> Result<(), RunError> {
    let kept_samples = if spec.keep_samples { spec.samples as u64 } else { 0 };
    let per_step = (1 + spec.quantiles.len() as u64 + kept_samples).saturating_mul(variates.max(1));
    let values = windows.checked_mul(spec.windows.horizon as u64).and_then(|v| v.checked_mul(per_step));
    match values {
        Some(v) if v <= MAX_FORECAST_VALUES => Ok(()),
        _ => Err(RunError::TooLarge {
            windows,
            horizon: spec.windows.horizon,
            per_step,
            what: match variates {
                0 | 1 => {
                    format!("point, {} quantile levels, {kept_samples} sample paths", spec.quantiles.len())
                }
                v => format!(
                    "{v} columns × (point, {} quantile levels, {kept_samples} sample paths)",
                    spec.quantiles.len()
                ),
            },
            values: values.unwrap_or(u64::MAX),
            max: MAX_FORECAST_VALUES,
        }),
    }
}

/// The request of one window: the series' points at or before the cutoff, its most recent `spec.context` of them.
/// Nothing after the cutoff is read (the no-leakage property the tests check).
pub fn window_request(
    s: &SeriesInput,
    w: &Window,
    spec: &RunSpec,
    limits: &Limits,
) -> Result<ForecastRequest, RunError> {
    let end = w.history_len();
    let start = end.saturating_sub(spec.context);
    let target = vec![s.values[start..end].to_vec()];
    let id = Some(RequestId::Str(format!("{}@{}", s.unique_id, w.cutoff)));
    let overrides = Overrides {
        horizon: Some(w.horizon),
        samples: Some(spec.samples),
        quantiles: Some(spec.quantiles.clone()),
        seed: Some(spec.seed),
        strict_context: None,
        ..Overrides::default()
    };
    let at = format!("{}, window {} (cutoff at grid position {})", s.unique_id, w.index + 1, w.cutoff);
    RequestFields::from_target(id, target).validate(&at, &overrides, limits).map_err(|e| RunError::Request {
        series: s.unique_id.clone(),
        window: w.index + 1,
        cutoff: w.cutoff,
        message: strip_at(&e.to_string(), &at),
        refused: Some(Box::new(e)),
    })
}

fn strip_at(message: &str, at: &str) -> String {
    message
        .strip_prefix(at)
        .map(|m| m.trim_start_matches(": ").to_string())
        .unwrap_or_else(|| message.to_string())
}

/// Runs every planned window through `forecast` (one call per chunk of [`RunSpec::chunk`] windows; each call
/// gets many windows and returns one result per request, in order, as `Engine::forecast` does). `done(n)` is
/// called after each chunk with the windows finished so far.
pub fn run<E>(
    series: &[SeriesInput],
    plans: &[Vec<Window>],
    spec: &RunSpec,
    limits: &Limits,
    forecast: &mut dyn FnMut(Vec<ForecastRequest>) -> Vec<Result<ForecastResponse, E>>,
    done: &mut dyn FnMut(usize),
) -> Result<RunOutput, RunError>
where
    E: std::fmt::Display,
{
    let mut build = |i: usize, w: &Window| window_request(&series[i], w, spec, limits);
    let ids: Vec<&str> = series.iter().map(|s| s.unique_id.as_str()).collect();
    run_requests(&ids, plans, spec, &mut build, 0, forecast, done)
}

/// [`run`] with each window's request built by `build(series, window)` (a family that reads more than the scored
/// series: its own columns and timestamps up to the cutoff) and variate `variate` of each answer scored.
pub fn run_requests<E>(
    ids: &[&str],
    plans: &[Vec<Window>],
    spec: &RunSpec,
    build: &mut dyn FnMut(usize, &Window) -> Result<ForecastRequest, RunError>,
    variate: usize,
    forecast: &mut dyn FnMut(Vec<ForecastRequest>) -> Vec<Result<ForecastResponse, E>>,
    done: &mut dyn FnMut(usize),
) -> Result<RunOutput, RunError>
where
    E: std::fmt::Display,
{
    let all: Vec<(usize, Window)> =
        plans.iter().enumerate().flat_map(|(i, p)| p.iter().map(move |w| (i, *w))).collect();
    let mut out =
        RunOutput { forecasts: Vec::with_capacity(all.len()), engine_calls: 0, engine_time: Duration::ZERO };
    for chunk in all.chunks(spec.chunk.max(1)) {
        // Requests are built per chunk, so at most one chunk's contexts are held at once.
        let reqs = chunk.iter().map(|(i, w)| build(*i, w)).collect::<Result<Vec<_>, _>>()?;
        let t = Instant::now();
        let results = forecast(reqs);
        out.engine_time += t.elapsed();
        out.engine_calls += 1;
        assert_eq!(results.len(), chunk.len(), "one result per request");
        for ((i, w), r) in chunk.iter().zip(results) {
            let bad = |message: String| RunError::Request {
                series: ids[*i].to_string(),
                window: w.index + 1,
                cutoff: w.cutoff,
                message,
                refused: None,
            };
            let r = r.map_err(|e| bad(e.to_string()))?;
            out.forecasts.push(variate_forecast(*i, *w, &r, spec, variate).map_err(bad)?);
        }
        done(out.forecasts.len());
    }
    Ok(out)
}

/// One response as the run keeps it (f64, flat).
pub fn window_forecast(
    series: usize,
    window: Window,
    r: &ForecastResponse,
    spec: &RunSpec,
) -> Result<WindowForecast, String> {
    variate_forecast(series, window, r, spec, 0)
}

/// Variate `variate` of one response as the run keeps it (f64, flat).
pub fn variate_forecast(
    series: usize,
    window: Window,
    r: &ForecastResponse,
    spec: &RunSpec,
    variate: usize,
) -> Result<WindowForecast, String> {
    let h = window.horizon;
    let flat = |v: &[Vec<f32>], what: &str| -> Result<Vec<f64>, String> {
        match v.get(variate) {
            Some(row) if row.len() == h => Ok(row.iter().map(|&x| x as f64).collect()),
            _ => Err(format!("the engine returned no {what} of {h} steps")),
        }
    };
    let point = flat(r.point(), "point forecast")?;
    let mut quantiles = Vec::with_capacity(spec.quantiles.len() * h);
    for level in &spec.quantiles {
        let q = r
            .quantiles
            .iter()
            .find(|q| (q.q - level).abs() <= 1e-12)
            .ok_or_else(|| format!("the engine returned no quantile {level}"))?;
        quantiles.extend(flat(&q.values, "quantile")?);
    }
    let samples = match (&r.samples, spec.keep_samples) {
        (Some(paths), true) => {
            let mut v = Vec::with_capacity(paths.len() * h);
            for p in paths {
                v.extend(flat(p, "sample path")?);
            }
            Some(v)
        }
        _ => None,
    };
    Ok(WindowForecast { series, window, point, quantiles, samples })
}

#[cfg(test)]
mod tests {
    use super::*;
    use engines::request::QuantileForecast;

    fn spec(windows: usize, horizon: usize) -> RunSpec {
        RunSpec {
            windows: WindowSpec::new(windows, None, horizon),
            context: 4,
            samples: 0,
            quantiles: Vec::new(),
            seed: 0,
            keep_samples: false,
            chunk: 3,
        }
    }

    /// A forecaster that predicts, at every step, the sum of the observed context (so any value it saw shows).
    fn summing(reqs: Vec<ForecastRequest>) -> Vec<Result<ForecastResponse, String>> {
        reqs.into_iter()
            .map(|r| {
                let sum: f32 = r.target[0].iter().flatten().sum();
                Ok(ForecastResponse {
                    id: r.id.clone(),
                    mean: Some(vec![vec![sum; r.horizon]]),
                    median: None,
                    quantiles: r
                        .quantiles
                        .iter()
                        .map(|&q| QuantileForecast { q, values: vec![vec![sum * q as f32; r.horizon]] })
                        .collect(),
                    samples: None,
                    context_truncated: None,
                    buckets: Vec::new(),
                    profile: String::new(),
                    engine: String::new(),
                    sampler: None,
                    engine_sha256: None,
                })
            })
            .collect()
    }

    fn series(n: usize) -> SeriesInput {
        SeriesInput { unique_id: "a".into(), values: (0..n).map(|i| Some(i as f32)).collect() }
    }

    #[test]
    fn windows_see_only_their_context_up_to_the_cutoff() {
        let s = vec![series(12)];
        let sp = spec(3, 2);
        let plans = plan_all(&s, &sp, &|_, _| None).unwrap();
        let mut calls = Vec::new();
        let out = run(
            &s,
            &plans,
            &sp,
            &Limits::default(),
            &mut |reqs| {
                calls.push(reqs.len());
                summing(reqs)
            },
            &mut |_| {},
        )
        .unwrap();
        // cutoffs 5, 7, 9; context 4: sums of 2..=5, 4..=7, 6..=9
        let points: Vec<f64> = out.forecasts.iter().map(|f| f.point[0]).collect();
        assert_eq!(points, vec![14.0, 22.0, 30.0]);
        assert_eq!(out.forecasts.iter().map(|f| f.window.cutoff).collect::<Vec<_>>(), vec![5, 7, 9]);
        // chunk 3: one call for the three windows
        assert_eq!(calls, vec![3]);
        assert_eq!(out.engine_calls, 1);
    }

    #[test]
    fn windows_are_packed_in_chunks_across_series() {
        let s = vec![series(12), SeriesInput { unique_id: "b".into(), ..series(10) }];
        let sp = spec(3, 2);
        let plans = plan_all(&s, &sp, &|_, _| None).unwrap();
        let mut calls = Vec::new();
        let mut progress = Vec::new();
        let out = run(
            &s,
            &plans,
            &sp,
            &Limits::default(),
            &mut |r| {
                calls.push(r.len());
                summing(r)
            },
            &mut |n| progress.push(n),
        )
        .unwrap();
        assert_eq!(calls, vec![3, 3]);
        assert_eq!(progress, vec![3, 6]);
        assert_eq!(out.forecasts.iter().map(|f| f.series).collect::<Vec<_>>(), vec![0, 0, 0, 1, 1, 1]);
    }

    #[test]
    fn changing_values_after_a_cutoff_changes_nothing_of_that_window() {
        let s = vec![series(12)];
        let sp = spec(3, 2);
        let plans = plan_all(&s, &sp, &|_, _| None).unwrap();
        let base = run(&s, &plans, &sp, &Limits::default(), &mut summing, &mut |_| {}).unwrap();
        for w in &plans[0] {
            let mut changed = s.clone();
            for v in &mut changed[0].values[w.cutoff + 1..] {
                *v = Some(1e6);
            }
            let out = run(&changed, &plans, &sp, &Limits::default(), &mut summing, &mut |_| {}).unwrap();
            assert_eq!(out.forecasts[w.index], base.forecasts[w.index]);
        }
    }

    #[test]
    fn an_all_missing_window_is_an_error_naming_the_series_and_cutoff() {
        let mut s = vec![series(12)];
        for v in &mut s[0].values[2..6] {
            *v = None;
        }
        let sp = spec(3, 2);
        let plans = plan_all(&s, &sp, &|_, _| None).unwrap();
        let e = run(&s, &plans, &sp, &Limits::default(), &mut summing, &mut |_| {}).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("a, window 1 (cutoff at grid position 5)"), "{text}");
    }

    #[test]
    fn what_the_run_keeps_is_bounded_before_it_runs() {
        let s = vec![series(2_000_000)];
        let mut sp = spec(1_000_000, 1);
        sp.quantiles = vec![0.1, 0.5, 0.9];
        sp.samples = 256;
        sp.keep_samples = true;
        let e = plan_all(&s, &sp, &|_, _| None).unwrap_err();
        assert!(matches!(e, RunError::TooLarge { .. }), "{e}");
    }

    #[test]
    fn quantiles_are_kept_level_major() {
        let s = vec![series(12)];
        let mut sp = spec(1, 2);
        sp.quantiles = vec![0.5, 0.25];
        sp.samples = 0;
        let plans = plan_all(&s, &sp, &|_, _| None).unwrap();
        let limits = Limits { quantiles_without_samples: true, ..Limits::default() };
        let out = run(&s, &plans, &sp, &limits, &mut summing, &mut |_| {}).unwrap();
        // cutoff 9, context 6..=9: sum 30
        assert_eq!(out.forecasts[0].quantiles, vec![15.0, 15.0, 7.5, 7.5]);
    }
}
