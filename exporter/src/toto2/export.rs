//! Writing one set of Toto 2.0 graphs (one profile or shape bucket) into a bundle directory, with weights in the
//! bundle's shared external-data file ([`WeightStore`]): the building block `totoc export` uses for 2.0.

use std::path::Path;

use prost::Message;

use crate::error::{Error, Result};
use crate::fsutil::write_atomic;
use crate::graph::toto2::toto2_graph;
use crate::graph::{GraphBuilder, WeightStore};
use crate::signature::{Precision, TensorSig};
use crate::toto2::checkpoint::Toto2Checkpoint;
use crate::toto2::signature::{Toto2Dims, Toto2GraphKind};
use crate::variant::OpsetVariant;

/// One written graph file and its I/O.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Toto2GraphFile {
    pub kind: Toto2GraphKind,
    /// File name inside the bundle directory: `<set>.<kind>.onnx`.
    pub file: String,
    pub inputs: Vec<TensorSig>,
    pub outputs: Vec<TensorSig>,
    /// ONNX nodes in the graph.
    pub nodes: usize,
}

/// Builds and writes every graph of `dims` (`[pass]` or `[prefill, decode]`) as `dir/<set>.<kind>.onnx` (fp32) or
/// `dir/<set>.<kind>.int8.onnx` (atomically), referencing `weights` (whose file must live in `dir`, one per
/// precision: `crate::export::weights_file`); `variant` is the opset, and so how the decode graph writes its KV
/// caches (`TensorScatter` at 24, `ScatterND` at 18). Nothing depends on time or machine, so re-exports are byte-identical.
pub fn write_graph_set(
    ckpt: &Toto2Checkpoint,
    weights: &mut WeightStore,
    dir: &Path,
    set: &str,
    dims: &Toto2Dims,
    variant: OpsetVariant,
    precision: Precision,
) -> Result<Vec<Toto2GraphFile>> {
    let mut out = Vec::new();
    for kind in dims.graphs() {
        let file = crate::export::graph_file(&format!("{set}.{}", kind.as_str()), precision);
        let graph_name = match precision {
            Precision::Fp32 => format!("toto2_{set}_{}", kind.as_str()),
            p => format!("toto2_{set}_{}_{p}", kind.as_str()),
        };
        let mut g = GraphBuilder::new(&graph_name, weights, variant);
        toto2_graph(&mut g, ckpt, kind, dims, variant.cache_update(), precision)
            .map_err(|e| Error::Graph { graph: graph_name.clone(), message: e.to_string() })?;
        let doc = format!(
            "Toto 2.0 {} graph of {set:?} (totoc {}): static shapes, u-μP folded into the weights",
            kind.as_str(),
            env!("CARGO_PKG_VERSION")
        );
        let meta = [
            ("totoc.model", "toto-2.0".to_string()),
            ("totoc.profile", set.to_string()),
            ("totoc.graph", kind.as_str().to_string()),
            ("totoc.precision", precision.as_str().to_string()),
            ("totoc.checkpoint_sha256", ckpt.info().safetensors_sha256),
        ];
        let model = g.finish(&doc, &meta)?;
        let nodes = model.graph.as_ref().map_or(0, |g| g.node.len());
        write_atomic(&dir.join(&file), &model.encode_to_vec())?;
        out.push(Toto2GraphFile {
            kind,
            file,
            inputs: dims.inputs(kind),
            outputs: dims.outputs_sigs(kind),
            nodes,
        });
    }
    Ok(out)
}
