//! totoc's exporter: loads a Toto 1.0 HF checkpoint strictly and writes static-shape ONNX graphs whose decode
//! state (KV caches, write positions) is explicit I/O, one graph per shape bucket of each profile
//! ([`bucket`]) and precision (fp32, and strongly typed fp16: [`graph::precision`]), in the opset its target
//! runtimes support ([`variant`]).
pub mod bucket;
pub mod checkpoint;
pub mod config;
pub mod error;
pub mod export;
pub mod fsutil;
pub mod graph;
pub mod manifest;
pub mod pb;
pub mod profile;
pub mod signature;
pub mod variant;

pub use error::{Error, Result};
