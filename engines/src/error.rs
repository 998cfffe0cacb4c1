//! Errors of the engines crate. Each variant carries the structured facts of the failure (the request and
//! variate at fault, the expected and actual sizes) and its message says how to fix it.
//!
//! Request errors name where the request came from in `at` (`"requests.jsonl line 3"`, `"request body"`), so
//! the CLI and the server can print them as they are.

use std::path::{Path, PathBuf};

/// Result alias of the engines crate.
pub type Result<T> = std::result::Result<T, Error>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // --- files
    // The cause is part of the message, not a `source`, so error chains print it once.
    #[error("{}: {err}", path.display())]
    Io { path: PathBuf, err: std::io::Error },
    #[error(transparent)]
    Exporter(#[from] exporter::Error),

    // --- ONNX Runtime
    #[error("ONNX Runtime library: {message}\n{help}")]
    OrtLibrary { message: String, help: String },
    #[error("ONNX Runtime: {context}: {message}")]
    Ort { context: String, message: String },
    #[error("execution provider {provider}: {message}")]
    Provider { provider: String, message: String },
    /// A graph's session or I/O binding (graph/).
    #[error("graph {graph}: {message}")]
    Session { graph: String, message: String },
    /// A graph input or output: unknown name, wrong element type, not host-accessible (graph/).
    #[error("graph {graph}, tensor `{name}`: {message}")]
    Tensor { graph: String, name: String, message: String },
    /// An engine bundle that is missing, malformed, modified or built for something else (bundle/).
    #[error("engine bundle {}: {message}", path.display())]
    Engine { path: PathBuf, message: String },

    /// A setting given by the user (e.g. a memory size) that cannot be used.
    #[error("{message}")]
    Config { message: String },

    // --- request syntax
    #[error("{at}: {message}")]
    RequestSyntax { at: String, message: String },
    #[error("{at}: `{field}` is missing; {fix}")]
    MissingField { at: String, field: &'static str, fix: &'static str },

    // --- request values
    #[error("{at}: `target` has no variates; give at least one series, e.g. \"target\": [[1.0, 2.0, 3.0]]")]
    NoVariates { at: String },
    /// `what`: `variate 2`, or the column's name for a family of named columns (`column `open``).
    #[error("{at}: {what} is empty; every series needs at least one point")]
    EmptySeries { at: String, what: String },
    #[error("{at}: variate {variate} has {len} points but variate 0 has {expected}; all variates must share one time axis (use null for missing points)")]
    RaggedTarget { at: String, variate: usize, len: usize, expected: usize },
    #[error("{at}: variate {variate}, t={t}: {value} is not a finite f32; use null to mark a missing point")]
    NonFinite { at: String, variate: usize, t: usize, value: String },
    #[error(
        "{at}: variate {variate} has no observed point (all null); drop it or give it at least one value"
    )]
    AllMissing { at: String, variate: usize },
    #[error("{at}: `horizon` is 0; ask for at least one step")]
    ZeroHorizon { at: String },
    #[error("{at}: `id_mask` has {len} ids for {variates} variates; give one group id per variate")]
    IdMaskLength { at: String, len: usize, variates: usize },
    #[error("{at}: `id_mask` id {id} of variate {variate} is negative; group ids must be >= 0")]
    NegativeId { at: String, variate: usize, id: i64 },
    #[error("{at}: quantile {q} is outside (0, 1); use levels such as 0.1, 0.5, 0.9")]
    QuantileRange { at: String, q: f64 },
    #[error("{at}: quantiles need sampled paths but `samples` is 0; set \"samples\" (e.g. 256) or drop \"quantiles\"")]
    QuantilesWithoutSamples { at: String },
    #[error("{at}: {samples} samples exceed this engine's limit of {limit}; ask for at most {limit}")]
    TooManySamples { at: String, samples: usize, limit: usize },
    /// A field the engine's model family does not take (`why` says what it does instead).
    #[error("{at}: `{field}` is not a field {model} takes: {why}; remove it")]
    FieldNotTaken { at: String, field: String, model: &'static str, why: String },
    /// A field whose value (or absence) cannot be used; `message` names the field and says how to fix it.
    #[error("{at}: {message}")]
    BadField { at: String, field: String, message: String },

    // --- Toto 2.0 requests
    #[error("{at}: quantile {q} is outside the range a Toto 2.0 engine predicts, [0.1, 0.9] (its nine knots 0.1, 0.2, …, 0.9; levels between knots are interpolated); ask for levels from 0.1 to 0.9")]
    QuantileOutsideKnots { at: String, q: f64 },
    /// A request field or value the engine's model family does not support; `message` says why and what to
    /// send instead.
    #[error("{at}: {message}")]
    NotSupported { at: String, message: String },
    #[error("{at}: the context has {given} points but Toto 2.0 needs at least {minimum} (one patch); send at least {minimum} points of history")]
    ContextTooShort { at: String, given: usize, minimum: usize },

    // --- engine limits
    /// `what` reads as "5 variates", "horizon 400", "512 samples".
    #[error("{at}: {what} exceed this engine's limit of {limit}; ask for at most {limit}, or export a profile that covers it (configs/*.yaml) and rebuild the engine")]
    Limit { at: String, what: String, limit: usize },
    #[error("{at}: the context has {given} points but this engine holds {limit} and `strict_context` is set; send the last {limit} points or drop `strict_context` to have them kept")]
    ContextTooLong { at: String, given: usize, limit: usize },
    #[error("{at}: variate {variate} has no observed point in the last {used} points the engine keeps; drop it or send a context with recent observations")]
    AllMissingAfterCut { at: String, variate: usize, used: usize },

    /// A request over one of the caller's [`crate::budget::Budget`] limits, refused from its counts before
    /// anything per series is built; `flag` raises it, `reason` labels the refusal in metrics.
    #[error("{at}: {what} exceed the server's limit of {limit}; send less per request, or raise {flag}")]
    OverBudget { at: String, what: String, limit: u64, flag: &'static str, reason: &'static str },

    // --- profile selection
    #[error("{at}: this engine cannot run it: {why}; export a profile that covers it (configs/*.yaml) and rebuild the engine, or give a larger --memory-budget")]
    Unservable { at: String, why: String },

    // --- cancellation
    /// The caller asked the call to stop (every request in it was abandoned by its client or passed its
    /// deadline); what it had computed is dropped.
    #[error("{at}: cancelled between graph runs (its client left or its deadline passed)")]
    Cancelled { at: String },

    // --- host math
    #[error("{what}: expected {expected} values, got {actual}")]
    Length { what: String, expected: usize, actual: usize },

    // --- equivalence checks
    #[error("{output} at step {step}, variate {variate}, t={t}: |Δ|={error:.1e} > tol {tol:.1e} ({failures} of {count} values out of tolerance)")]
    Mismatch {
        output: String,
        step: usize,
        variate: usize,
        t: usize,
        error: f64,
        tol: f64,
        failures: usize,
        count: usize,
    },
}

impl Error {
    /// Whether the error is about the request (its values, its size against the engine's limits, the context
    /// policy, what the model family refuses): the client's to fix, an HTTP 400. Every other error is the
    /// engine's. A new variant must be added here if it is a request error; the test below lists both kinds.
    pub fn is_request_error(&self) -> bool {
        use Error as E;
        matches!(
            self,
            E::RequestSyntax { .. }
                | E::MissingField { .. }
                | E::NoVariates { .. }
                | E::EmptySeries { .. }
                | E::RaggedTarget { .. }
                | E::NonFinite { .. }
                | E::AllMissing { .. }
                | E::ZeroHorizon { .. }
                | E::IdMaskLength { .. }
                | E::NegativeId { .. }
                | E::QuantileRange { .. }
                | E::QuantilesWithoutSamples { .. }
                | E::TooManySamples { .. }
                | E::FieldNotTaken { .. }
                | E::BadField { .. }
                | E::Limit { .. }
                | E::ContextTooLong { .. }
                | E::AllMissingAfterCut { .. }
                | E::QuantileOutsideKnots { .. }
                | E::NotSupported { .. }
                | E::ContextTooShort { .. }
                | E::OverBudget { .. }
                | E::Unservable { .. }
        )
    }

    /// Whether the call was cancelled by its caller ([`Error::Cancelled`]): neither the client's fault nor the
    /// engine's.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Cancelled { .. })
    }

    pub fn io(path: &Path, source: std::io::Error) -> Self {
        Error::Io { path: path.to_path_buf(), err: source }
    }

    /// A length check of host math inputs.
    pub(crate) fn check_len(what: &str, expected: usize, actual: usize) -> Result<()> {
        if expected == actual {
            Ok(())
        } else {
            Err(Error::Length { what: what.to_string(), expected, actual })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_errors_are_told_from_engine_errors_by_kind() {
        let request = [
            Error::NotSupported { at: "r".into(), message: "no".into() },
            Error::Unservable { at: "r".into(), why: "too big".into() },
            Error::Limit { at: "r".into(), what: "3 variates".into(), limit: 2 },
            Error::FieldNotTaken { at: "r".into(), field: "top_p".into(), model: "M", why: "no".into() },
            Error::BadField { at: "r".into(), field: "top_p".into(), message: "2 is not in (0, 1]".into() },
        ];
        assert!(request.iter().all(Error::is_request_error));
        let engine = [
            Error::Engine { path: "e".into(), message: "broken".into() },
            Error::Session { graph: "g".into(), message: "failed".into() },
        ];
        assert!(engine.iter().all(|e| !e.is_request_error()));
    }
}
