//! A throwaway third model family, built only by `tests/integration/third_family.rs` (never shipped): a
//! "model" of one layer, a MatMul that averages the last `context` points into every forecast point. Its config
//! is `{"toy_context": C}`; it exports one graph per profile, `x [1, C] -> y [1, H]`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::export::{commit_bundle, weights_file, ExportEvent, ExportOptions};
use crate::fsutil::{sha256_bytes, write_atomic, StagingDir};
use crate::graph::{GraphBuilder, WeightStore};
use crate::manifest::{file_entries, CheckpointInfo, Manifest, WeightsEntry};
use crate::registry::family::{AnyConfig, FamilyGraphs};
use crate::safetensors::CONFIG_FILE;
use crate::signature::{DType, Precision, TensorSig};

/// The toy family's `config.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToyConfig {
    /// Points the layer averages.
    pub toy_context: usize,
}

impl ToyConfig {
    pub fn from_json(text: &str) -> Result<Self> {
        let c: ToyConfig = serde_json::from_str(text)
            .map_err(|e| Error::Config { message: format!("not a toy config: {e}") })?;
        if c.toy_context == 0 {
            return Err(Error::Config { message: "toy_context must be at least 1".into() });
        }
        Ok(c)
    }
}

/// One exported graph: its profile and I/O.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToyGraph {
    pub profile: crate::profile::Profile,
    pub file: String,
    pub context: usize,
    pub horizon: usize,
    pub inputs: Vec<TensorSig>,
    pub outputs: Vec<TensorSig>,
}

/// `totoc export` of a toy checkpoint.
pub fn export_bundle(opts: &ExportOptions, progress: &mut dyn FnMut(ExportEvent)) -> Result<Manifest> {
    let path = opts.checkpoint.join(CONFIG_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
    let cfg = ToyConfig::from_json(&text)?;
    let stage = StagingDir::new(&opts.out, true)?;
    let wfile = weights_file(Precision::Fp32);
    let mut store = WeightStore::create(&stage.path().join(&wfile), &wfile)?;
    let mut files = vec![wfile.clone()];
    let mut graphs = Vec::new();
    progress(ExportEvent::Start { graphs: opts.profiles.len() });
    for (i, p) in opts.profiles.iter().enumerate() {
        let (c, h) = (cfg.toy_context, p.horizon);
        let inputs = vec![TensorSig::new("x", DType::F32, &[1, c])];
        let outputs = vec![TensorSig::new("y", DType::F32, &[1, h])];
        let mut b = GraphBuilder::new("toy", &mut store, opts.variant);
        let x = b.input(&inputs[0]);
        let w = b.const_f32(&[c, h], &vec![1.0 / c as f32; c * h]);
        let y = b.op("MatMul", &[&x, &w], vec![]);
        b.output(&y, &outputs[0]);
        let model = b.finish("toy: the mean of the last points", &[])?;
        let file = format!("{}.toy.onnx", p.name);
        write_atomic(&stage.path().join(&file), &prost::Message::encode_to_vec(&model))?;
        progress(ExportEvent::Graph { file: file.clone(), nodes: 1, index: i + 1, total: opts.profiles.len() });
        files.push(file.clone());
        graphs.push(ToyGraph { profile: p.clone(), file, context: c, horizon: h, inputs, outputs });
    }
    store.finish()?;
    let info = CheckpointInfo {
        safetensors_sha256: String::new(),
        config_sha256: sha256_bytes(text.as_bytes()),
        tokenizer: None,
    };
    let manifest = Manifest {
        precisions: vec![Precision::Fp32],
        weights: vec![WeightsEntry { precision: Precision::Fp32, file: wfile }],
        family: FamilyGraphs { toy: graphs, ..FamilyGraphs::default() },
        files: file_entries(stage.path(), &files)?,
        ..Manifest::new(info, AnyConfig::Toy(cfg), opts.variant)
    };
    commit_bundle(stage, manifest)
}
