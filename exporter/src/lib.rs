//! totoc's exporter: loads a Toto HF checkpoint strictly and writes static-shape ONNX graphs whose decode
//! state (KV caches, write positions) is explicit I/O, one graph per shape bucket of each profile ([`bucket`]) and
//! precision (fp32, and strongly typed fp16: [`graph::precision`]), in the opset its target runtimes support
//! ([`variant`]).
//!
//! Layers shared by every model family: [`safetensors`] (strict checkpoint files), [`signature`] (I/O types),
//! [`graph`] (the ONNX builder, weight files, fp16 regions and emulation), [`bucket`] and [`profile`] (shape
//! buckets and YAML profiles), [`manifest`], [`integrity`], [`build_cache`] and [`export`] (bundles), [`quantize`],
//! [`variant`] (opsets), [`pb`] (ONNX protos).
//!
//! Families, each in its own folder: [`toto1`] (Toto 1.0, toto-ts 0.2.0), [`toto2`] (Toto 2.0, toto-2 2.0.0) and
//! [`kronos`] (kronos-finance 0.1.5: a predictor and its tokenizer).
//! [`registry`] holds the one [`registry::Family`] enum, what each family can do, and the only `match` on the
//! family (see docs/architecture.md).
pub mod bucket;
pub mod build_cache;
pub mod bundle_files;
pub mod error;
pub mod export;
pub mod fsutil;
pub mod graph;
pub mod integrity;
pub mod job;
pub mod kronos;
pub mod manifest;
pub mod pb;
pub mod profile;
pub mod profile_file;
pub mod quantize;
pub mod registry;
pub mod safetensors;
pub mod signature;
pub mod toto1;
pub mod toto2;
pub mod variant;

pub use error::{Error, Result};
