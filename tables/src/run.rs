//! Forecasting every series of a [`Dataset`] with one engine: the steps `totoc forecast` and the Python package's
//! `Engine.predict_df` share, so that both give the same numbers, notes and errors. Every series is admitted by
//! the engine's context policy before any is forecast ([`admit`]; a bad one stops the run with nothing
//! forecast), then the series run in groups of [`FORECAST_GROUP`] in input order ([`forecast`]); a model that
//! predicts quantile knots says once that it interpolated other levels ([`interpolation_note`]).

use std::fmt;
use std::time::{Duration, Instant};

use engines::engine::{Engine, RunOptions, FORECAST_GROUP};
use engines::request::ForecastResponse;

use super::Dataset;

/// A series the engine failed to forecast: where it is (`FILE: series ID`), and the engine's error.
#[derive(Debug)]
pub struct SeriesError {
    pub at: String,
    pub error: engines::Error,
}

impl fmt::Display for SeriesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.error)
    }
}

impl std::error::Error for SeriesError {}

/// Checks every series against the engine and cuts the ones longer than its context to their most recent points
/// (unless they asked for a strict context). Returns the note to show when some were cut.
pub fn admit(engine: &Engine, dataset: &mut Dataset) -> Result<Option<String>, engines::Error> {
    let n = dataset.series.len();
    let mut cut = Vec::new();
    for s in &mut dataset.series {
        if let Some(c) = engine.admit(&mut s.request, &s.at)? {
            cut.push(c);
        }
    }
    let Some(first) = cut.first() else { return Ok(None) };
    let longest = cut.iter().map(|c| c.given).max().unwrap_or(0);
    Ok(Some(format!(
        "note: {} of {n} series have more points than the engine's context of {} (up to {longest}); their most \
         recent {} points were used (--strict-context makes this an error)",
        cut.len(),
        first.used,
        first.used
    )))
}

/// Forecasts the (admitted) series in input order, [`FORECAST_GROUP`] at a time, calling `done(k)` after each
/// group of `k`. Returns one response per series and the time spent in the engine.
pub fn forecast(
    engine: &Engine,
    dataset: &Dataset,
    done: impl FnMut(usize),
) -> Result<(Vec<ForecastResponse>, Duration), SeriesError> {
    forecast_with(engine, dataset, RunOptions::default(), done)
}

/// [`forecast`] with the engine's [`RunOptions`] (the Python package passes a [`RunOptions::cancel`] that stops
/// the run at a pending Ctrl-C). A cancelled run ends at its first group's [`engines::Error::Cancelled`].
pub fn forecast_with(
    engine: &Engine,
    dataset: &Dataset,
    opts: RunOptions<'_>,
    mut done: impl FnMut(usize),
) -> Result<(Vec<ForecastResponse>, Duration), SeriesError> {
    let mut engine_time = Duration::ZERO;
    let mut responses = Vec::with_capacity(dataset.series.len());
    for group in dataset.series.chunks(FORECAST_GROUP) {
        let reqs = group.iter().map(|s| s.request.clone()).collect();
        let t = Instant::now();
        let results = engine.forecast_with(reqs, opts);
        engine_time += t.elapsed();
        for (s, r) in group.iter().zip(results) {
            responses.push(r.map(|f| f.response).map_err(|error| SeriesError { at: s.at.clone(), error })?);
        }
        done(group.len());
    }
    Ok((responses, engine_time))
}

/// The note to show once when a requested quantile level lies between the knots of a model that predicts
/// quantile knots (it was interpolated); `None` otherwise.
pub fn interpolation_note(engine: &Engine, responses: &[ForecastResponse]) -> Option<&'static str> {
    let family = engine.info().model;
    let knots = family.capabilities().quantile_knots?;
    let note = engines::registry::interpolation_note(family)?;
    let off_knot = |q: f64| !knots.iter().any(|k| (k - q).abs() <= 1e-9);
    responses.iter().flat_map(|r| &r.quantiles).any(|q| off_knot(q.q)).then_some(note)
}
