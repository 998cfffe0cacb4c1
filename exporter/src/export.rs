//! `totoc export`: checkpoint + profiles → a bundle directory, written atomically.
//!
//! Bundle layout (flat, because ONNX external-data paths may not leave the model's directory):
//! ```text
//! manifest.json              what was exported from what, every file's sha256 and every graph's I/O
//! weights.fp32.bin           all weights once, shared by every graph (ONNX external data)
//! <profile>.prefill.n<N>.s<S>.onnx   per prefill bucket: N rows, S context slots
//! <profile>.decode.n<N>.t<T>.onnx    per decode bucket: N rows, T cache slots
//! golden/*.json              with --golden: reference cases for `totoc verify`
//! ```
//! Graph files are small (shapes and ops; ~100 KB for the base model): however many buckets a profile has, the
//! weights exist once on disk.
//! Re-exporting the same checkpoint with the same profiles gives byte-identical files: nothing time- or
//! machine-dependent is written.

use std::path::PathBuf;

use prost::Message;

use crate::checkpoint::Checkpoint;
use crate::error::{Error, Result};
use crate::fsutil::{write_atomic, StagingDir};
use crate::graph::{toto_graph, CacheUpdate, GraphBuilder, WeightStore, OPSET};
use crate::manifest::{
    file_entries, GraphEntry, Manifest, ProfileEntry, BUNDLE_FORMAT, BUNDLE_FORMAT_VERSION, MANIFEST_FILE,
};
use crate::profile::Profile;
use crate::signature::{self, DType};

/// Name of the fp32 weight file inside a bundle.
pub const WEIGHTS_FP32: &str = "weights.fp32.bin";

/// What to export.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub checkpoint: PathBuf,
    /// Profiles to export (already selected and validated against their YAML).
    pub profiles: Vec<Profile>,
    pub out: PathBuf,
    pub cache_update: CacheUpdate,
    /// Replace a non-empty output directory.
    pub force: bool,
    /// Golden toto-ts cases for this checkpoint (`tests/reference/run_reference.py` output) to carry in the
    /// bundle under `golden/`, so `totoc verify` can check any engine built from it anywhere.
    pub golden: Option<PathBuf>,
}

/// Progress of an export, for a progress bar or log lines.
#[derive(Debug, Clone)]
pub enum ExportEvent {
    /// Total number of graphs to write.
    Start { graphs: usize },
    /// One graph written (`index` of `total`, from 1).
    Graph { file: String, nodes: usize, index: usize, total: usize },
}

/// Directory of golden cases inside a bundle.
pub const GOLDEN_DIR: &str = "golden";

/// Copies the golden case files (`*.json` with `request` and `reference`) of `dir` into `<bundle>/golden/`.
fn copy_golden(dir: &std::path::Path, bundle: &std::path::Path) -> Result<Vec<String>> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(Error::Config { message: format!("--golden {}: no *.json case files", dir.display()) });
    }
    std::fs::create_dir_all(bundle.join(GOLDEN_DIR)).map_err(|e| Error::io(bundle, e))?;
    let mut out = Vec::new();
    for p in names {
        let bytes = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Config { message: format!("golden case is not JSON: {e}") }.in_file(&p))?;
        if v.get("request").is_none() || v.get("reference").is_none() {
            return Err(Error::Config {
                message: "golden case needs `request` and `reference` (tests/reference/run_reference.py writes them)"
                    .into(),
            }
            .in_file(&p));
        }
        let rel = format!("{GOLDEN_DIR}/{}", p.file_name().expect("file").to_string_lossy());
        write_atomic(&bundle.join(&rel), &bytes)?;
        out.push(rel);
    }
    Ok(out)
}

/// Runs the export; on any error nothing is left at `opts.out`.
pub fn export(opts: &ExportOptions, progress: &mut dyn FnMut(ExportEvent)) -> Result<Manifest> {
    let ckpt = Checkpoint::load(&opts.checkpoint)?;
    if opts.profiles.is_empty() {
        return Err(Error::Profile { message: "no profile selected".into() });
    }
    for p in &opts.profiles {
        p.check_against(&ckpt.config)?;
    }
    let stage = StagingDir::new(&opts.out, opts.force)?;
    let mut weights = WeightStore::create(&stage.path().join(WEIGHTS_FP32), WEIGHTS_FP32)?;
    let ladders: Vec<_> = opts.profiles.iter().map(|p| p.buckets(&ckpt.config)).collect();
    let total = ladders.iter().map(Vec::len).sum();
    progress(ExportEvent::Start { graphs: total });

    let mut files = vec![WEIGHTS_FP32.to_string()];
    let mut profiles = Vec::new();
    for (profile, ladder) in opts.profiles.iter().zip(ladders) {
        let mut graphs = Vec::new();
        for bucket in ladder {
            let dims = bucket.dims(&ckpt.config);
            let stem = bucket.stem(&profile.name);
            let file = format!("{stem}.onnx");
            let graph_name = format!("toto_{}", stem.replace('.', "_"));
            let mut g = GraphBuilder::new(&graph_name, &mut weights);
            toto_graph(&mut g, &ckpt, &dims, opts.cache_update)
                .map_err(|e| Error::Graph { graph: graph_name.clone(), message: e.to_string() })?;
            let doc = format!(
                "Toto {} graph of profile {:?}, {} rows × {} slots (totoc {}): static shapes, explicit KV cache state",
                bucket.kind.as_str(),
                profile.name,
                bucket.rows,
                bucket.slots,
                env!("CARGO_PKG_VERSION")
            );
            let meta = [
                ("totoc.profile", profile.name.clone()),
                ("totoc.graph", bucket.kind.as_str().to_string()),
                ("totoc.rows", bucket.rows.to_string()),
                ("totoc.slots", bucket.slots.to_string()),
                ("totoc.checkpoint_sha256", ckpt.info().safetensors_sha256.clone()),
            ];
            let model = g.finish(&doc, &meta)?;
            let nodes = model.graph.as_ref().map_or(0, |g| g.node.len());
            write_atomic(&stage.path().join(&file), &model.encode_to_vec())?;
            progress(ExportEvent::Graph { file: file.clone(), nodes, index: files.len(), total });
            graphs.push(GraphEntry {
                bucket,
                dims,
                file: file.clone(),
                memory_bytes: bucket.memory_bytes(&ckpt.config),
                inputs: signature::inputs(&dims, DType::F32),
                outputs: signature::outputs(&dims, DType::F32),
            });
            files.push(file);
        }
        profiles.push(ProfileEntry { profile: profile.clone(), graphs });
    }
    weights.finish()?;
    if let Some(dir) = &opts.golden {
        files.extend(copy_golden(dir, stage.path())?);
    }

    let manifest = Manifest {
        format: BUNDLE_FORMAT.into(),
        format_version: BUNDLE_FORMAT_VERSION,
        totoc_version: env!("CARGO_PKG_VERSION").into(),
        checkpoint: ckpt.info(),
        model: ckpt.config.clone(),
        precision: DType::F32,
        opset: OPSET,
        cache_update: opts.cache_update.as_str().into(),
        profiles,
        files: file_entries(stage.path(), &files)?,
    };
    let json = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
    write_atomic(&stage.path().join(MANIFEST_FILE), &json)?;
    stage.commit()?;
    Ok(manifest)
}
