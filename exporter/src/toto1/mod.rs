//! Toto 1.0 (toto-ts 0.2.0, `Datadog/Toto-Open-Base-1.0`): configuration ([`config`]), strict checkpoint loading
//! ([`checkpoint`]), the graphs' I/O contract ([`signature`]), the forward pass one function per model block
//! ([`graph`]) and the export of its shape buckets ([`export`]).
//!
//! Toto 1.0 predicts a Student-T mixture per patch; the host samples paths from it.
pub mod bucket;
pub mod checkpoint;
pub mod config;
pub mod export;
pub mod graph;
pub mod manifest;
pub mod profile;
pub mod signature;

pub use bucket::ModelBuckets;
pub use config::ModelConfig;
pub use graph::{dynamic_graph, toto_graph, GraphOptions};
pub use profile::{ModelProfile, ModelProfileSet};
