//! A family's speed bound of a run (issue 34's: the tokens of full passes at the engine's measured prefill
//! throughput, plus the bytes every cached step must read over the machine's measured read bandwidth), as the
//! reports that print it read it. Families that give one compute it ([`crate::registry::speed_bound`]).

/// The least time a run can take on this machine and engine, and what it is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeedBound {
    pub seconds: f64,
    /// The engine's measured prefill throughput (tokens/s).
    pub prefill_tokens_per_s: f64,
    /// The machine's measured read bandwidth (bytes/s).
    pub read_bytes_per_s: f64,
    /// Tokens the run passes through full passes (encode, prefill, recomputes, final decode).
    pub pass_tokens: f64,
    /// Bytes the run's cached steps read (weights and caches).
    pub step_bytes: f64,
}
