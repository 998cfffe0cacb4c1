//! Toto 2.0's section of an export manifest: each profile's graph sets.

use serde::{Deserialize, Serialize};

use super::signature::{Toto2Dims, Toto2GraphKind};
use crate::profile::Profile;
use crate::signature::{DynSig, Precision, TensorSig};

/// One exported Toto 2.0 profile: its bounds and its graph sets (see [`super::ladder`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Toto2ProfileEntry {
    pub profile: Profile,
    pub sets: Vec<Toto2SetEntry>,
    /// The profile's shape-polymorphic graphs, one per kind and precision (fp32, fp16), that a TensorRT engine is
    /// built from ([`super::shared`]); written by opset-24 exports only (they write the KV caches with
    /// `TensorScatter`), absent otherwise and in engine manifests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<Toto2SharedGraph>,
}

/// One shape-polymorphic 2.0 graph: rows, tokens and cache slots symbolic ([`super::shared`]); each of its
/// profile's sets binds it at its own sizes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toto2SharedGraph {
    pub kind: Toto2GraphKind,
    pub precision: Precision,
    /// `<profile>.dynamic.<kind>.onnx` (fp32), `<profile>.dynamic.<kind>.<precision>.onnx`.
    pub file: String,
    pub inputs: Vec<DynSig>,
    pub outputs: Vec<DynSig>,
    /// ONNX nodes in the graph.
    pub nodes: usize,
}

/// One Toto 2.0 shape bucket: its dims and its graphs (`[pass]` or `[prefill, decode]` of each exported
/// precision; an engine's sets hold those of its one precision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toto2SetEntry {
    /// `<profile>.n<R>.s<S>`: the prefix of its graph files.
    pub name: String,
    pub dims: Toto2Dims,
    /// Estimated bytes of its buffers when loaded ([`super::ladder::memory_bytes`]).
    pub memory_bytes: u64,
    pub graphs: Vec<Toto2GraphFile>,
}

fn fp32() -> Precision {
    Precision::Fp32
}

/// One written graph file and its I/O.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Toto2GraphFile {
    pub kind: Toto2GraphKind,
    /// Its precision (manifests written before fp16/int8 2.0 graphs have none: fp32). Every precision's graphs
    /// have the same (f32) I/O: an fp16 2.0 graph casts at its edges.
    #[serde(default = "fp32")]
    pub precision: Precision,
    /// File name inside the bundle directory: `<set>.<kind>.onnx` (fp32), `<set>.<kind>.<precision>.onnx`.
    pub file: String,
    pub inputs: Vec<TensorSig>,
    pub outputs: Vec<TensorSig>,
    /// ONNX nodes in the graph.
    pub nodes: usize,
}
