//! Graph construction: a scoped ONNX [`builder`], the shared external [`weights`] file, and the Toto forward
//! pass in [`toto`] (Toto 1.0) and [`toto2`] (Toto 2.0), one function per model block.
pub mod builder;
pub mod toto;
pub mod toto2;
pub mod weights;

pub use builder::{GraphBuilder, IR_VERSION, OPSET};
pub use toto::{toto_graph, CacheUpdate};
pub use weights::WeightStore;
