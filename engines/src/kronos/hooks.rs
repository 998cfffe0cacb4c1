//! What a Kronos call records and replaces for the equivalence tests and `totoc verify` (the engine's test hooks,
//! reached through `FamilyEngine::as_any` → [`crate::kronos::engine::KronosEngine::forecast_jobs`]):
//!
//! * **forced tokens** (teacher forcing): the tokens every path takes at every step, in place of the sampled
//!   ones, so each step's logits can be compared with a reference that took those tokens;
//! * **replayed noise**: a [`NoiseSource`] per series in place of its own stream (upstream's recorded Exp(1) noise:
//!   the same draws give upstream's tokens);
//! * **a trace** per series: the encode tokens and the quantizer's pre-sign `z`, every draw's logits, the tokens,
//!   each path's decoded rows (normalised), the window of every step.
//!
//! A normal call uses none of them (`Hooks::default()`).

use crate::kronos::noise::NoiseSource;
use crate::kronos::plan::KronosPins;

/// The tokens every path of one series takes, `[paths][horizon]` each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ForcedTokens {
    pub s1: Vec<Vec<i64>>,
    pub s2: Vec<Vec<i64>>,
}

/// The hooks of one call, per series of the call (an index past the end is "none").
#[derive(Default, Clone, Copy)]
pub struct Hooks<'a> {
    pub forced: &'a [Option<ForcedTokens>],
    pub noise: &'a [Option<&'a dyn NoiseSource>],
    /// Record a [`Trace`] of every series.
    pub trace: bool,
    /// Run on other buckets than the planner's choice.
    pub pins: KronosPins,
}

impl std::fmt::Debug for Hooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("forced", &self.forced.len())
            .field("noise", &self.noise.iter().filter(|n| n.is_some()).count())
            .field("trace", &self.trace)
            .field("pins", &self.pins)
            .finish()
    }
}

impl<'a> Hooks<'a> {
    pub(crate) fn forced(&self, series: usize) -> Option<&'a ForcedTokens> {
        self.forced.get(series).and_then(Option::as_ref)
    }

    pub(crate) fn noise(&self, series: usize) -> Option<&'a dyn NoiseSource> {
        self.noise.get(series).copied().flatten()
    }
}

/// What one series' forecast went through (see the module docs). Layouts follow the reference fixtures
/// (tests/reference/README.md, "Kronos").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// The encode tokens of the N context rows.
    pub encode_s1: Vec<i64>,
    pub encode_s2: Vec<i64>,
    /// `[N][2·bits]`: the quantizer's input of every context row.
    pub z: Vec<f32>,
    /// `[H][paths][V]`: the s1 logits of every draw (before the temperature).
    pub s1_logits: Vec<f32>,
    /// `[H][paths][V]`: the s2 logits given the s1 taken.
    pub s2_logits: Vec<f32>,
    /// `[paths][H]`: the tokens taken.
    pub s1: Vec<Vec<i64>>,
    pub s2: Vec<Vec<i64>>,
    /// `[paths][H][6]`: each path's decoded rows, normalised.
    pub paths_norm: Vec<f32>,
    /// The window length of each step.
    pub windows: Vec<usize>,
}
