//! Toto 1.0 (toto-ts 0.2.0): what only the first model family needs.
//!
//! * [`engine`]: the engine behind the [`crate::engine::Engine`] handle (its buckets, pool and planner glue);
//! * [`build`]: `totoc build-engine` for a Toto 1.0 export bundle;
//! * [`session`]: runs a forecast plan (one prefill per series, its cache copied to every sample path);
//! * [`mixture`]: the graph's Student-T mixture outputs turned into mean forecasts, seeded sample paths and
//!   quantiles;
//! * [`golden`]: toto-ts reference cases and the checks `totoc verify` runs against them.

pub mod build;
pub mod engine;
pub mod golden;
pub mod manifest;
pub mod mixture;
pub mod session;
