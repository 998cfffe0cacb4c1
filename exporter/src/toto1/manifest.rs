//! Toto 1.0's sections of an export manifest: each profile's bucket graphs and the shape-polymorphic graphs.

use serde::{Deserialize, Serialize};

use super::signature::GraphDims;
use crate::bucket::Bucket;
use crate::profile::Profile;
use crate::signature::{DynSig, GraphKind, Precision, TensorSig};

/// One bucket's graph file of one precision and its I/O signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphEntry {
    pub bucket: Bucket,
    pub dims: GraphDims,
    pub precision: Precision,
    /// Path relative to the bundle root.
    pub file: String,
    /// Estimated bytes of the bucket's buffers when loaded ([`super::ModelBuckets::memory_bytes`]).
    pub memory_bytes: u64,
    pub inputs: Vec<TensorSig>,
    pub outputs: Vec<TensorSig>,
}

/// A shape-polymorphic graph of one kind and precision (rows and slots symbolic; for TensorRT).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicGraphEntry {
    pub kind: GraphKind,
    pub precision: Precision,
    pub file: String,
    pub inputs: Vec<DynSig>,
    pub outputs: Vec<DynSig>,
}

/// One exported profile: its bounds and the graph of each of its buckets (prefill first, ascending; each bucket
/// once per precision).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileEntry {
    pub profile: Profile,
    pub graphs: Vec<GraphEntry>,
}
