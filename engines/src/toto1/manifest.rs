//! Toto 1.0's sections of an engine manifest: each profile's bucket graphs kept, and the buckets dropped.

use serde::{Deserialize, Serialize};

use exporter::bucket::Bucket;
use exporter::profile::Profile;
use exporter::signature::TensorSig;
use exporter::toto1::signature::GraphDims;

use crate::backend::SessionConfig;
use crate::bundle::graph_file::GraphFile;
use crate::graph::ProviderNodes;

/// One bucket's graph in an engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineGraph {
    pub bucket: Bucket,
    pub dims: GraphDims,
    /// The model to load, relative to the bundle.
    pub file: String,
    /// The export bundle's graph it was built from.
    pub source_file: String,
    /// Estimated bytes of the bucket's buffers when loaded (`Bucket::memory_bytes`).
    pub memory_bytes: u64,
    pub inputs: Vec<TensorSig>,
    pub outputs: Vec<TensorSig>,
    /// Session settings it is loaded with (paths relative to the bundle, as `./...`; re-derived at load).
    pub load_session: SessionConfig,
    /// Nodes per execution provider as ONNX Runtime assigned them when the build loaded it (empty if the build
    /// could not load it here, e.g. GPU engines built on a machine without the GPU).
    pub providers: Vec<ProviderNodes>,
    /// TensorRT: the engine's TensorRT version and GPU architecture (from its EPContext node), checked at load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensorrt: Option<crate::tensorrt::EngineStamp>,
    /// `file` is a shape-polymorphic graph whose one session serves every bucket listing it ([`crate::bundle::GraphForm::Shared`]).
    pub shared: bool,
    /// The bucket's captured-CUDA-graph key on its session (`None`: not captured; see [`crate::graph::capture_keys`]).
    pub gpu_graph_id: Option<i64>,
}

/// One profile of an engine: its bounds and the buckets kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineProfile {
    pub profile: Profile,
    pub graphs: Vec<EngineGraph>,
}

/// A bucket `build-engine` left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DroppedBucket {
    pub profile: String,
    pub bucket: Bucket,
    pub memory_bytes: u64,
    pub reason: String,
}

impl EngineGraph {
    /// What [`crate::bundle::EngineBundle::load_graph`] needs to load it.
    pub fn file(&self) -> GraphFile<'_> {
        GraphFile {
            file: &self.file,
            label: &self.source_file,
            inputs: &self.inputs,
            outputs: &self.outputs,
            shared: self.shared,
            gpu_graph_id: self.gpu_graph_id,
            memory_pattern: true,
            cpu_arena: true,
        }
    }
}

/// Every bucket graph of every profile.
pub fn graphs(profiles: &[EngineProfile]) -> impl Iterator<Item = (&EngineProfile, &EngineGraph)> {
    profiles.iter().flat_map(|p| p.graphs.iter().map(move |g| (p, g)))
}
