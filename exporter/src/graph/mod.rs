//! Graph construction: a scoped, typed ONNX [`builder`], the shared external [`weights`] files, the Toto forward
//! pass in [`toto`] (Toto 1.0) and [`toto2`] (Toto 2.0), one function per model block, the fp32 regions of fp16
//! graphs ([`precision`]), the typing rules ([`types`]) and the fp16 emulation rewrite ([`emulate`]).
pub mod builder;
pub mod emulate;
pub mod precision;
pub mod toto;
pub mod toto2;
pub mod types;
pub mod weights;

pub use builder::GraphBuilder;
pub use precision::{Fp16Plan, Fp32Region};
pub use toto::{dynamic_graph, toto_graph, CacheUpdate, GraphOptions};
pub use weights::WeightStore;
