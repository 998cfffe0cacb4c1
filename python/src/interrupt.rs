//! Ctrl-C in a long call: the engine asks its [`Cancel`] before every graph run (each prefill, each decode step
//! or block); [`Interrupt`] answers by running Python's signal handlers (`PyErr_CheckSignals`, the GIL taken
//! back for that moment only) at most every [`EVERY`]. A handler that raises (SIGINT's raises
//! `KeyboardInterrupt`) stops the call: the engine fails the remaining requests with `Cancelled`, and the binding
//! raises the handler's exception instead of the engine's error.
//!
//! Python runs signal handlers in the main thread only; a call made from another thread is not interrupted (its
//! check finds nothing), as with any other C extension.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use engines::engine::{Cancel, RunOptions};
use pyo3::prelude::*;

use crate::errors::Kind;

/// How often a running call looks for a pending signal: often enough that Ctrl-C stops it within one graph run
/// plus this, rarely enough that taking the GIL back costs nothing measurable (a few µs per check).
const EVERY: Duration = Duration::from_millis(20);

/// A long call's link to Python's signal handlers (see the module docs).
pub struct Interrupt {
    /// When signals were last checked.
    last: Mutex<Instant>,
    /// The exception a signal handler raised: once set, every later check says stop without calling Python.
    raised: Mutex<Option<PyErr>>,
}

impl Interrupt {
    pub fn new() -> Self {
        Interrupt { last: Mutex::new(Instant::now()), raised: Mutex::new(None) }
    }

    /// Whether the call must stop: a signal handler raised, now or before. Python's handlers run at most every
    /// [`EVERY`] (the engine asks before every graph run).
    fn stop(&self) -> bool {
        self.check(false)
    }

    /// `Err` once a signal handler raised, checked at once (not every [`EVERY`]): between the phases of a call
    /// (the table read, the forecasts, the output built), whose own work has no graph runs to check at. The
    /// error's text is never shown: the caller raises the handler's exception ([`take`](Self::take)).
    pub fn between_phases(&self) -> Result<(), (Kind, String)> {
        match self.check(true) {
            true => Err((Kind::Other, "interrupted by a signal".to_string())),
            false => Ok(()),
        }
    }

    fn check(&self, now: bool) -> bool {
        let mut raised = self.raised.lock().unwrap_or_else(|p| p.into_inner());
        if raised.is_some() {
            return true;
        }
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if !now && last.elapsed() < EVERY {
            return false;
        }
        *last = Instant::now();
        if let Err(e) = Python::attach(|py| py.check_signals()) {
            *raised = Some(e);
            return true;
        }
        false
    }

    /// Runs `f` with engine options whose [`RunOptions::cancel`] is this interrupt.
    pub fn run<R>(&self, f: impl FnOnce(RunOptions<'_>) -> R) -> R {
        let stop = || self.stop();
        f(RunOptions { cancel: Some(Cancel(&stop)), ..RunOptions::default() })
    }

    /// The exception that stopped the call, if one did: the caller raises it instead of the engine's error.
    pub fn take(&self) -> Option<PyErr> {
        self.raised.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}
