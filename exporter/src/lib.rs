//! totoc's exporter: loads a Toto HF checkpoint strictly and writes static-shape ONNX graphs whose decode
//! state (KV caches, write positions) is explicit I/O, one graph per shape bucket of each profile ([`bucket`]) and
//! precision (fp32, and strongly typed fp16: [`graph::precision`]), in the opset its target runtimes support
//! ([`variant`]).
//!
//! Toto 1.0 (toto-ts 0.2.0): [`config`], [`checkpoint`], [`signature`], [`graph::toto`]. Toto 2.0 (toto-2 2.0.0):
//! [`toto2`] (config, checkpoint, I/O contract, synthetic checkpoints) and [`graph::toto2`]. [`generation`] tells
//! the two apart from a checkpoint's `config.json`.
pub mod bucket;
pub mod build_cache;
pub mod checkpoint;
pub mod config;
pub mod error;
pub mod export;
pub mod fsutil;
pub mod generation;
pub mod graph;
pub mod integrity;
pub mod manifest;
pub mod pb;
pub mod profile;
pub mod quantize;
pub mod signature;
pub mod toto2;
pub mod variant;

pub use error::{Error, Result};
