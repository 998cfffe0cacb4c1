//! Graph construction shared by every family: a scoped, typed ONNX [`builder`], the shared external [`weights`]
//! files, the fp32 regions of fp16 graphs ([`precision`]), the typing rules ([`types`]) and the fp16 emulation
//! rewrite ([`emulate`]). Each family's forward pass (one function per model block) is in its folder
//! (`graph.rs` in each family folder).
pub mod builder;
pub mod emulate;
pub mod precision;
pub mod types;
pub mod weights;

pub use builder::GraphBuilder;
pub use precision::{Fp16Plan, Fp32Region, Int8Kernel, Int8Plan};
pub use weights::WeightStore;
