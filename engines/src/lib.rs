//! totoc's engines: ONNX Runtime backends for the exported Toto graphs and the host side of a forecast.
//!
//! The crate is shared layers, one folder per model family, and the handle that ties them together.
//!
//! Shared layers, running graphs:
//! * [`runtime`]: finds and loads libonnxruntime (`ort` with `load-dynamic`) once per process, with one global
//!   intra-op thread pool;
//! * [`backend`]: engine targets (CPU, CUDA with CUDA graphs, TensorRT with EPContext engines) and their session
//!   options, as pure, unit-tested configuration;
//! * [`graph`]: [`graph::GraphRunner`], one graph with preallocated, fixed-address I/O bound once, KV caches
//!   updated in place, weights shared across sessions (facts, weights, ORT glue, binding plans, shared sessions,
//!   the runner, cache copies);
//! * [`bundle`]: the engine bundle format, loading a hash-verified bundle, and the `build-engine` machinery both
//!   families share (fp32 or fp16; fp16 on CPU as an emulation that shows fp16 error), dispatching on the model;
//! * [`tensorrt`]: TensorRT engine checks (every node on TensorRT, engine stamp vs this machine) and profiles;
//! * [`doctor`]: which providers, CUDA/cuDNN/TensorRT libraries and GPUs this machine has, and which targets work;
//! * [`cpu`]: the CPU this process runs on (physical cores, model and SIMD flags): the bottom layer;
//! * [`pool`]: the loaded graphs of an engine within its memory budget, least recently used evicted (every
//!   family's pool).
//!
//! Shared layers, the host side (what the static graphs leave out, f64 where the reference uses it):
//! * [`request`]: the forecast request/response format shared with the Python reference harness, its
//!   validation, and parsing one JSON request (files and tables are read by the binary's data layer);
//! * [`host`]: numerics the families share — toto's causal patch scaler ([`host::scaler`]), the rotary and xPos
//!   tables ([`host::rope`]), torch's reduction order ([`host::sum`]) and sample-path quantiles ([`host::quantile`]);
//! * [`plan`] packs a group of requests onto the engine's shape buckets (prefill calls, decode passes);
//!   [`memory`] is the budget the engine keeps its buckets within; [`budget`] how much one request may ask;
//!   [`cost`] how long a request will take (the family's plan priced by the rates measured at warm-up);
//! * [`bounded`]: decoding that charges what a client's bytes become as they become it (a serde wrapper);
//! * [`admission`]: the limits and context policy every family applies before its own checks;
//! * [`compare`]: tolerances against the reference (`1e-4·σ + 1e-6·|ref|`) and finding golden case files.
//!
//! Families, behind [`family::FamilyEngine`] and reached only through [`registry`] (the one `match` on the
//! family: loading a family's engine, building its engine bundle, its manifest sections):
//! * [`toto1`]: Toto 1.0 — its engine (buckets, pool, planner glue), its `build-engine`, the forecast session (one prefill per series, its cache copied to
//!   every sample path), the Student-T mixture (mean forecasts, seeded sample paths, quantiles) and its golden
//!   reference cases (as `totoc verify` runs them);
//! * [`toto2`]: Toto 2.0 — its `build-engine`, context preparation, its rotary tables, quantile post-processing,
//!   golden cases, and the forecast driver that runs a chunk of requests through one shape's pass, or prefill
//!   and decode, graphs;
//! * [`kronos`]: the model of kronos-finance 0.1.5 — so far its host numerics (column rules, numpy's
//!   normalisation, time features, upstream's sampler with a per-path counter-based noise stream, path
//!   statistics); its engine comes next.
//!
//! The handle callers use: [`engine::Engine`] (thread-safe, one result per request, the shared context policy),
//! holding the family's engine behind the [`family`] seam. See docs/architecture.md.
//!
//! Errors are one [`Error`] enum ([`error`]).

pub mod admission;
pub mod backend;
pub mod bounded;
pub mod budget;
pub mod build_job;
pub mod bundle;
pub mod compare;
pub mod cost;
pub mod cpu;
pub mod doctor;
pub mod engine;
pub mod error;
pub mod family;
pub mod graph;
pub mod host;
pub mod kronos;
pub mod machine;
pub mod memory;
pub mod plan;
pub mod pool;
pub mod registry;
pub mod request;
pub mod runtime;
pub mod tensorrt;
pub mod toto1;
pub mod toto2;

pub use error::{Error, Result};
