//! Toto 2.0 (toto-2 2.0.0, `Datadog/Toto-2.0-*`): configuration ([`config`]), strict checkpoint loading including
//! the sharded layout ([`checkpoint`]), the graphs' I/O contract and static dimensions ([`signature`]), and
//! random-weight checkpoints for tests and benchmarks ([`synth`]). The forward pass is
//! [`graph`]; which family a checkpoint holds is [`crate::registry`].
//!
//! Toto 2.0 predicts nine quantile knots (0.1 … 0.9) per point in asinh space, with no sampling. Its u-μP scale
//! factors are folded into the exported weights, so the graphs are plain linear algebra.
pub mod checkpoint;
pub mod config;
pub mod export;
pub mod folded;
pub mod graph;
pub mod ladder;
pub mod manifest;
pub mod shared;
pub mod signature;
pub mod synth;

pub use checkpoint::Toto2Checkpoint;
pub use config::{Toto2Config, Toto2LayerKind, KNOTS};
pub use signature::{Toto2Dims, Toto2GraphKind};
