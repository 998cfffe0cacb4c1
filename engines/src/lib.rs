//! totoc's engines: ONNX Runtime backends for the exported Toto graphs and the host side of a forecast.
//!
//! Running graphs:
//! * [`runtime`]: finds and loads libonnxruntime (`ort` with `load-dynamic`) once per process, with one global
//!   intra-op thread pool;
//! * [`backend`]: engine targets (CPU, CUDA with CUDA graphs, TensorRT with EPContext engines) and their session
//!   options, as pure, unit-tested configuration;
//! * [`graph`]: [`graph::GraphRunner`], one graph with preallocated, fixed-address I/O bound once, KV caches
//!   updated in place, weights shared across sessions;
//! * [`bundle`]: `build-engine` (fp32 or fp16; fp16 on CPU as an emulation that shows fp16 error) and
//!   loading a hash-verified engine bundle;
//! * [`tensorrt`]: TensorRT engine checks (every node on TensorRT, engine stamp vs this machine) and profiles;
//! * [`doctor`]: which providers, CUDA/cuDNN/TensorRT libraries and GPUs this machine has, and which targets work.
//!
//! The host does in Rust what the static graphs leave out (f64 where toto-ts uses it):
//! * [`request`]: the forecast request/response format shared with the Python reference harness, its
//!   validation, and parsing one JSON request (files and tables are read by the binary's data layer);
//! * [`scaler`]: toto's causal patch scaler as running state: scales the context for prefill and each fed-back
//!   patch for decode, and de-normalises with the last input patch's statistics;
//! * [`rope`]: the rotary and xPos tables the graphs take as inputs (prefill and decode centres);
//! * [`mixture`]: the graph's Student-T mixture outputs turned into mean forecasts, seeded sample paths and
//!   quantiles.
//!
//! Forecasting: [`plan`] packs a group of requests onto the engine's shape buckets (prefill calls, decode
//! passes); [`session`] runs a plan (one prefill per series, its cache copied to every sample path);
//! [`memory`] is the budget the engine keeps its buckets within; [`engine::Engine`] ties them together. Checking: [`compare`] (tolerances against toto-ts, `1e-4·σ + 1e-6·|ref|`) and
//! [`golden`] (reference cases, as `totoc verify` runs them).
//!
//! Toto 2.0: [`toto2`] (context preparation, its rotary tables, quantile post-processing, and the forecast
//! driver that runs a chunk of requests through one shape's pass, or prefill and decode, graphs).
//!
//! The handle callers use: [`engine::Engine`] (thread-safe, one result per request, the shared context policy).
//!
//! Errors are one [`Error`] enum ([`error`]).

pub mod backend;
pub mod budget;
pub mod bundle;
pub mod compare;
pub mod doctor;
pub mod engine;
pub mod error;
pub mod graph;
pub mod host;
pub mod memory;
pub mod plan;
pub mod request;
pub mod runtime;
pub mod tensorrt;
pub mod toto1;
pub mod toto2;

pub use error::{Error, Result};
