//! What an `Engine.cross_validation` call asks for ([`Windows`]) and the backtest's errors in its words
//! ([`run_err`]), for both of its paths: [`crate::cv`] (one target per series, on a grid) and [`crate::cv_rows`]
//! (named columns, rows as given).

use backtest::run::RunError;
use engines::engine::Engine;
use engines::request::{ForecastRequest, ForecastResponse};

use crate::errors::Kind;
use crate::interrupt::Interrupt;
use crate::table::pythonic;

/// What a `cross_validation` call asks for.
pub struct Windows {
    pub horizon: usize,
    pub n_windows: usize,
    pub step_size: Option<usize>,
    pub context: Option<usize>,
    pub samples: usize,
    pub quantiles: Option<Vec<f64>>,
    pub seed: u64,
    pub chunk: usize,
    pub model: String,
    /// `"long"` / `"wide"` / `None`: the table layout of a model whose inputs are named columns ([`crate::cv_rows`]).
    pub layout: Option<String>,
    /// Sampling controls and family parameters, for a family that takes them (others refuse each by name).
    pub sampling: crate::fields::Extra,
}

/// A backtest error as the exception kind and message of `cross_validation`.
pub fn run_err(e: RunError) -> (Kind, String) {
    let kind = match &e {
        RunError::Request { refused: Some(r), .. } => Kind::of(r),
        RunError::Request { refused: None, .. } => Kind::Other,
        RunError::TooLarge { .. } => Kind::Limit,
        _ => Kind::Invalid,
    };
    (kind, cv_words(&e.to_string()))
}

/// The engine calls of a run, for both paths: each batch of windows' requests runs under the Ctrl-C [`Interrupt`],
/// and the kind of the engine's first error is kept, since the run keeps only its text ([`EngineCalls::error`]).
pub struct EngineCalls<'a> {
    engine: &'a Engine,
    interrupt: &'a Interrupt,
    failed: Option<Kind>,
}

impl<'a> EngineCalls<'a> {
    pub fn new(engine: &'a Engine, interrupt: &'a Interrupt) -> Self {
        EngineCalls { engine, interrupt, failed: None }
    }

    /// One engine call over `reqs`, interruptible between graph runs.
    pub fn forecast(&mut self, reqs: Vec<ForecastRequest>) -> Vec<Result<ForecastResponse, engines::Error>> {
        let results: Vec<_> = self
            .interrupt
            .run(|opts| self.engine.forecast_with(reqs, opts))
            .into_iter()
            .map(|r| r.map(|f| f.response))
            .collect();
        if let Some(Err(e)) = results.iter().find(|r| r.is_err()) {
            self.failed.get_or_insert(Kind::of(e));
        }
        results
    }

    /// The run's error in `cross_validation`'s words, of the kind of the engine's error where the run failed on one.
    pub fn error(&self, e: RunError) -> (Kind, String) {
        match (e, self.failed) {
            (e @ RunError::Request { refused: None, .. }, Some(kind)) => (kind, run_err(e).1),
            (e, _) => run_err(e),
        }
    }
}

/// The flags of `totoc backtest` in a message, as `cross_validation`'s arguments.
pub fn cv_words(message: &str) -> String {
    const FLAGS: [(&str, &str); 6] = [
        ("--horizon", "h"),
        ("--windows", "n_windows"),
        ("--step", "step_size"),
        ("--context", "context"),
        ("--samples", "samples"),
        ("--quantiles", "quantile_levels"),
    ];
    pythonic(&FLAGS.iter().fold(message.to_string(), |m, (flag, arg)| m.replace(flag, arg)))
}
