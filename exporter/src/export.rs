//! `totoc export`: checkpoint + profiles → a bundle directory, written atomically.
//!
//! Bundle layout (flat, because ONNX external-data paths may not leave the model's directory):
//! ```text
//! manifest.json              what was exported from what, every file's sha256 and every graph's I/O
//! weights.fp32.bin           fp32: all weights once, shared by every fp32 graph (ONNX external data)
//! weights.fp16.bin           fp16: the same in f16 (f32 for the weights of its fp32 regions)
//! <profile>.prefill.n<N>.s<S>.onnx   per prefill bucket: N rows, S context slots (fp32)
//! <profile>.decode.n<N>.t<T>.onnx    per decode bucket: N rows, T cache slots (fp32)
//! <stem>.fp16.onnx                   the same buckets' fp16 graphs
//! dynamic.{prefill,decode}[.fp16].onnx   opset 24: each kind once with rows and slots symbolic, for TensorRT
//!                                        (one engine, and one GPU copy of the weights, for all its buckets)
//! golden/*.json              with --golden: reference cases for `totoc verify`
//! ```
//! Graph files are small (shapes and ops; ~100 KB for the base model): however many buckets a profile has, the
//! weights exist once on disk per precision. `--opset` picks the runtimes the graphs are written for
//! ([`crate::variant`]).
//! Re-exporting the same checkpoint with the same profiles gives byte-identical files: nothing time- or
//! machine-dependent is written.

use std::path::PathBuf;

use crate::build_cache::{self, BuildInputs, CacheCheck};
use crate::error::{Error, Result};
use crate::fsutil::{sha256_bytes, sha256_file, write_atomic, StagingDir};
use crate::graph::{Fp16Plan, Int8Plan};
use crate::manifest::Manifest;
use crate::profile::Profile;
use crate::signature::Precision;
use crate::variant::OpsetVariant;

/// File prefix of the shape-polymorphic graphs (`dynamic.decode.fp16.onnx`).
pub const DYNAMIC_PREFIX: &str = "dynamic";

/// Name of the weight file of `precision` inside a bundle (`weights.fp16.bin`).
pub fn weights_file(precision: Precision) -> String {
    format!("weights.{}.bin", precision.as_str())
}

/// Name of the graph file of a bucket `stem` in `precision`: fp32 graphs keep the plain `<stem>.onnx`.
pub fn graph_file(stem: &str, precision: Precision) -> String {
    match precision {
        Precision::Fp32 => format!("{stem}.onnx"),
        p => format!("{stem}.{}.onnx", p.as_str()),
    }
}

/// What to export.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub checkpoint: PathBuf,
    /// The tokenizer checkpoint directory, for a family whose export reads one
    /// ([`crate::registry::Capabilities::tokenizer_keys`]; `crate::registry::export_bundle` refuses it for the
    /// others and asks for it where it is needed).
    pub tokenizer: Option<PathBuf>,
    /// Profiles to export (already selected and validated against their YAML).
    pub profiles: Vec<Profile>,
    pub out: PathBuf,
    /// Precisions to write graphs of (each over its own weight file).
    pub precisions: Vec<Precision>,
    /// The opset / KV-cache write op, for the target runtimes.
    pub variant: OpsetVariant,
    /// fp32 regions of the fp16 graphs ([`Fp16Plan::DEFAULT`] unless measuring alternatives).
    pub fp16_plan: Fp16Plan,
    /// The matmul roles of the int8 graphs (`export --int8-roles`); `None`: the family's default (each family's
    /// `graph::INT8_DEFAULT`, chosen by its ablation on a trained model).
    pub int8_plan: Option<Int8Plan>,
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
    /// The bundle at `--out` was exported from the same inputs and is intact: nothing is written.
    UpToDate,
    /// The bundle at `--out` came from other inputs (`name: old → new` each) and is being replaced.
    Rebuilding { changed: Vec<String> },
}

/// Directory of golden cases inside a bundle.
pub const GOLDEN_DIR: &str = "golden";

/// The `*.json` files of a golden-case directory, sorted by name (what is copied and what the cache key hashes).
fn golden_files(dir: &std::path::Path) -> Result<Vec<std::path::PathBuf>> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    names.sort();
    Ok(names)
}

/// A golden case's large arrays, beside it: `<stem>.safetensors` (a family whose cases record per-step arrays).
fn case_arrays(case: &std::path::Path) -> Option<std::path::PathBuf> {
    Some(case.with_extension("safetensors")).filter(|p| p.is_file())
}

/// Copies the golden case files of `dir` into `<bundle>/golden/`: each `*.json` with `reference` and `request`
/// (or `requests`, a case of several series), and its arrays (`<stem>.safetensors`) when it has them.
pub(crate) fn copy_golden(dir: &std::path::Path, bundle: &std::path::Path) -> Result<Vec<String>> {
    let names = golden_files(dir)?;
    if names.is_empty() {
        return Err(Error::Config { message: format!("--golden {}: no *.json case files", dir.display()) });
    }
    std::fs::create_dir_all(bundle.join(GOLDEN_DIR)).map_err(|e| Error::io(bundle, e))?;
    let mut out = Vec::new();
    for p in names {
        let bytes = std::fs::read(&p).map_err(|e| Error::io(&p, e))?;
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Config { message: format!("golden case is not JSON: {e}") }.in_file(&p))?;
        if (v.get("request").is_none() && v.get("requests").is_none()) || v.get("reference").is_none() {
            return Err(Error::Config {
                message: "golden case needs `request` (or `requests`) and `reference` (tests/reference/ writes them)"
                    .into(),
            }
            .in_file(&p));
        }
        let mut files = vec![p.clone()];
        files.extend(case_arrays(&p));
        for f in files {
            let rel = format!("{GOLDEN_DIR}/{}", f.file_name().expect("file").to_string_lossy());
            let bytes = std::fs::read(&f).map_err(|e| Error::io(&f, e))?;
            write_atomic(&bundle.join(&rel), &bytes)?;
            out.push(rel);
        }
    }
    Ok(out)
}

/// Everything the bundle's bytes depend on ([`crate::build_cache`]): the checkpoint's files (and the tokenizer's,
/// where the family reads one), the selected profiles, the golden cases, the options and this totoc's version.
pub(crate) fn export_inputs(
    opts: &ExportOptions,
    info: crate::manifest::CheckpointInfo,
    precisions: &[Precision],
) -> Result<BuildInputs> {
    let profiles = serde_json::to_vec(&opts.profiles).expect("profiles serialise");
    let golden = match &opts.golden {
        None => "none".to_string(),
        Some(dir) => {
            let names = golden_files(dir)?;
            let mut all = Vec::new();
            for p in names.iter().flat_map(|p| std::iter::once(p.clone()).chain(case_arrays(p))) {
                all.extend(p.file_name().expect("file").as_encoded_bytes());
                all.push(0);
                all.extend(sha256_file(&p)?.into_bytes());
            }
            sha256_bytes(&all)
        }
    };
    let has_int8 = precisions.contains(&Precision::Int8);
    let precisions = precisions.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(",");
    let mut inputs = BuildInputs::from([
        ("checkpoint.model.safetensors".to_string(), info.safetensors_sha256),
        ("checkpoint.config.json".to_string(), info.config_sha256),
        ("profiles".to_string(), sha256_bytes(&profiles)),
        ("golden".to_string(), golden),
        ("precisions".to_string(), precisions),
        ("opset".to_string(), opts.variant.as_str().to_string()),
        ("fp16_plan".to_string(), format!("{:?}", opts.fp16_plan)),
        ("totoc".to_string(), env!("CARGO_PKG_VERSION").to_string()),
    ]);
    if let Some(t) = info.tokenizer {
        inputs.insert("tokenizer.model.safetensors".to_string(), t.safetensors_sha256);
        inputs.insert("tokenizer.config.json".to_string(), t.config_sha256);
    }
    if has_int8 {
        // what only int8 graphs depend on (an fp32 or fp16 export is not rebuilt for an `--int8-roles` change):
        // the roles, and the layout they are written in, so a bundle of an older layout (whose `int8_plan` may
        // read `default` too) is rebuilt, not reused
        inputs.insert("int8_plan".to_string(), opts.int8_plan.map_or("default".into(), |p| p.describe()));
        inputs.insert("int8_weights".to_string(), crate::quantize::INT8_WEIGHTS_VERSION.to_string());
    }
    Ok(inputs)
}

/// The bundle at `opts.out` when it was built from `inputs` and is intact (`Ok`: skip the export), else how it
/// differs (`Err`, reported through `progress`). `--force` never skips.
pub(crate) fn check_cache(
    opts: &ExportOptions,
    inputs: &BuildInputs,
    progress: &mut dyn FnMut(ExportEvent),
) -> Result<std::result::Result<Manifest, CacheCheck>> {
    let cache = if opts.force { CacheCheck::Absent } else { build_cache::check(&opts.out, inputs) };
    match cache {
        CacheCheck::Hit => {
            progress(ExportEvent::UpToDate);
            Ok(Ok(Manifest::read(&opts.out)?))
        }
        CacheCheck::Changed(changed) => {
            progress(ExportEvent::Rebuilding { changed: changed.clone() });
            Ok(Err(CacheCheck::Changed(changed)))
        }
        CacheCheck::Absent => Ok(Err(CacheCheck::Absent)),
    }
}

/// Writes `manifest` (and its hash file) into the staged bundle and moves the bundle into place.
pub(crate) fn commit_bundle(stage: StagingDir, manifest: Manifest) -> Result<Manifest> {
    let json = serde_json::to_vec_pretty(&manifest).expect("manifest serialises");
    crate::integrity::write_manifest(stage.path(), &json)?;
    stage.commit()?;
    Ok(manifest)
}
