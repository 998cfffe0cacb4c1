//! [`GraphFile`]: how a family's manifest section tells the loader about one graph file. A leaf of the bundle
//! layer, so family manifest sections can name it while the bundle format names them.

use exporter::signature::TensorSig;

/// One graph file of an engine bundle, as a family's manifest section describes it: what
/// [`EngineBundle::load_graph`](super::EngineBundle::load_graph) loads.
#[derive(Debug, Clone, Copy)]
pub struct GraphFile<'a> {
    /// The model to load, relative to the bundle.
    pub file: &'a str,
    /// How a shared session's bucket runner is named (the export graph it was built from).
    pub label: &'a str,
    /// The I/O the manifest records: the loaded graph must have exactly this signature.
    pub inputs: &'a [TensorSig],
    pub outputs: &'a [TensorSig],
    /// `file` is a shape-polymorphic graph whose one session serves every bucket listing it.
    pub shared: bool,
    /// The bucket's captured-CUDA-graph key on a shared session.
    pub gpu_graph_id: Option<i64>,
    /// ONNX Runtime's memory pattern (off where a graph's second run would hold two arenas' worth).
    pub memory_pattern: bool,
    /// ONNX Runtime's CPU arena: off for a graph that runs once per call (its arena would hold its largest
    /// activations between calls; without it they go back to the system after each run).
    pub cpu_arena: bool,
}
