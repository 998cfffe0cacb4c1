//! Toto 2.0's section of an engine manifest: the graph sets left out, and why (the kept sets are the export
//! manifest's `Toto2ProfileEntry`s).

use serde::{Deserialize, Serialize};

/// A Toto 2.0 graph set `build-engine` left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Toto2Dropped {
    pub profile: String,
    pub set: String,
    pub memory_bytes: u64,
    pub reason: String,
}

/// One TensorRT engine of a Toto 2.0 engine bundle (`--target tensorrt`): the EPContext model `file` that
/// `build-engine` built from the export's `source_file`, which every graph of `kind` in the profile's kept sets
/// now names (their `file`). Its stamp is checked against the machine at load, as Toto 1.0's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Toto2TensorRtGraph {
    pub profile: String,
    pub kind: exporter::toto2::Toto2GraphKind,
    pub file: String,
    pub source_file: String,
    /// Built from the profile's shape-polymorphic graph (one engine for all its sets, with optimisation profiles
    /// over them), or from one set's static graph (`--graphs per-bucket`).
    pub shared: bool,
    pub tensorrt: crate::tensorrt::EngineStamp,
}
