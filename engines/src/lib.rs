//! totoc's engines: ONNX Runtime backends for the exported Toto graphs and the host side of a forecast.
//!
//! The host does in Rust what the static graphs leave out (f64 where toto-ts uses it):
//! * [`request`]: the forecast request/response format shared with the Python reference harness, and its
//!   JSON / JSON Lines / CSV readers with validation;
//! * [`scaler`]: toto's causal patch scaler as running state: scales the context for prefill and each fed-back
//!   patch for decode, and de-normalises with the last input patch's statistics;
//! * [`rope`]: the rotary and xPos tables the graphs take as inputs (prefill and decode centres);
//! * [`mixture`]: the graph's Student-T mixture outputs turned into mean forecasts, seeded sample paths and
//!   quantiles;
//! * [`compare`]: tolerance checks against the toto-ts reference (`1e-4·σ + 1e-6·|ref|`).
//!
//! Errors are one [`Error`] enum ([`error`]).

pub mod backend;
pub mod compare;
pub mod engine_bundle;
pub mod error;
pub mod graph;
pub mod mixture;
pub mod request;
pub mod rope;
pub mod runtime;
pub mod scaler;

pub use error::{Error, Result};
pub mod forecaster;
pub mod golden;
pub mod session;
