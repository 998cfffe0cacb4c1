//! Kronos's section of an export manifest (`kronos_profiles`): each profile, its window and its graphs.

use serde::{Deserialize, Serialize};

use crate::bucket::Bucket;
use crate::profile::Profile;
use crate::signature::TensorSig;

/// One exported Kronos profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KronosProfileEntry {
    /// Its bounds, and its `family:` section as written.
    pub profile: Profile,
    /// T: the transformer window (the caches' slots; the largest `max_context` a request may ask for).
    pub window: usize,
    /// Every graph, by kind (encode, prefill, recompute, decode, refine, detokenize), each kind by rows then slots.
    pub graphs: Vec<KronosGraphFile>,
}

/// One written graph file: its bucket, I/O ([`crate::kronos::signature`]) and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KronosGraphFile {
    pub bucket: Bucket,
    /// `<profile>.<kind>.n<rows>.s<slots>.onnx` (`t<slots>` for decode and refine).
    pub file: String,
    pub inputs: Vec<TensorSig>,
    pub outputs: Vec<TensorSig>,
    /// Estimated bytes of its buffers when loaded ([`crate::kronos::ladder::memory_bytes`]).
    pub memory_bytes: u64,
    /// ONNX nodes in the graph.
    pub nodes: usize,
}
