//! Kronos (shiyu-coder/Kronos, as vendored in kronos-finance 0.1.5): a model of two checkpoints, the predictor and
//! its tokenizer, read strictly ([`config`], [`checkpoint`]), and its inference split into static graphs
//! ([`signature`]: the I/O contract; [`graph`]: one function per model block) over the shape buckets of
//! [`ladder`], exported as a bundle ([`export`], [`manifest`]). [`synth`] writes random checkpoints for tests.
//!
//! Kronos tokenises each candle row into two tokens (s1, s2) with a binary spherical quantizer, predicts the next
//! row's s1 and then its s2 (conditioned on the s1 sampled) with a transformer over a sliding window, and
//! decodes the tokens back to rows. totoc reproduces upstream's eval mode (see ../shared/docs/kronos-model.md).
pub mod checkpoint;
pub mod config;
pub mod export;
pub mod graph;
pub mod ladder;
pub mod manifest;
pub mod signature;
pub mod synth;

pub use checkpoint::KronosCheckpoint;
pub use config::KronosConfig;
