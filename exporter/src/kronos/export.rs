//! `totoc export` of a Kronos model ([`export_bundle`]): the predictor (`--checkpoint`) and its tokenizer
//! (`--tokenizer`) loaded strictly, every profile's buckets ([`crate::kronos::ladder`]) written as fp32 graphs
//! ([`crate::kronos::graph`]) over one shared weight file, in the bundle layout and manifest format of every
//! family (`crate::export`): the manifest's `model` holds both configs, `checkpoint` both directories' hashes,
//! and `kronos_profiles` the graphs.

use std::path::Path;

use prost::Message;

use super::graph::{kronos_graph, Lengths, Positions};
use super::ladder::{buckets, memory_bytes, KronosSettings};
use super::manifest::{KronosGraphFile, KronosProfileEntry};
use super::signature::{inputs, outputs, ModelDims};
use crate::bucket::Bucket;
use crate::error::{Error, Result};
use crate::export::{
    check_cache, commit_bundle, copy_golden, export_inputs, weights_file, ExportEvent, ExportOptions,
};
use crate::fsutil::{write_atomic, StagingDir};
use crate::graph::{GraphBuilder, WeightStore};
use crate::kronos::checkpoint::KronosCheckpoint;
use crate::manifest::{file_entries, Manifest, WeightsEntry};
use crate::profile::Profile;
use crate::registry::family::{AnyConfig, FamilyGraphs};
use crate::signature::{GraphKind, Precision};
use crate::variant::OpsetVariant;

/// What every graph of one profile's export shares: its window, its long passes' span, the rotary tables' rows,
/// the opset.
#[derive(Debug, Clone, Copy)]
pub struct GraphSpec {
    pub window: usize,
    pub span: usize,
    pub positions: Positions,
    pub variant: OpsetVariant,
}

/// Builds bucket `b`'s graph of `profile` and writes it to `dir/<stem>.onnx` atomically; returns its entry.
pub fn write_graph(
    ckpt: &KronosCheckpoint,
    weights: &mut WeightStore,
    dir: &Path,
    profile: &str,
    b: &Bucket,
    spec: GraphSpec,
) -> Result<KronosGraphFile> {
    let GraphSpec { window, span, positions, variant } = spec;
    let stem = b.stem(profile);
    let file = crate::export::graph_file(&stem, Precision::Fp32);
    let graph_name = format!("kronos_{}", stem.replace('.', "_"));
    let mut g = GraphBuilder::new(&graph_name, weights, variant);
    kronos_graph(&mut g, ckpt, b, Lengths { window, span, positions }, variant.cache_update())
        .map_err(|e| Error::Graph { graph: graph_name.clone(), message: e.to_string() })?;
    let doc = format!(
        "Kronos {} graph of profile {profile:?} (totoc {}): static shapes, window {window}, eval mode",
        b.kind.as_str(),
        env!("CARGO_PKG_VERSION")
    );
    let meta = [
        ("totoc.model", "kronos".to_string()),
        ("totoc.profile", profile.to_string()),
        ("totoc.graph", b.kind.as_str().to_string()),
        ("totoc.precision", Precision::Fp32.as_str().to_string()),
        ("totoc.checkpoint_sha256", ckpt.info().safetensors_sha256),
    ];
    let model = g.finish(&doc, &meta)?;
    let nodes = model.graph.as_ref().map_or(0, |g| g.node.len());
    write_atomic(&dir.join(&file), &model.encode_to_vec())?;
    let m = ModelDims::of(&ckpt.config);
    Ok(KronosGraphFile {
        bucket: *b,
        file,
        inputs: inputs(&m, b, window),
        outputs: outputs(&m, b, window),
        memory_bytes: memory_bytes(&ckpt.config, b, window),
        nodes,
    })
}

/// The rotary table rows every graph of the export needs: the widest window, the longest tokenizer call.
fn positions(plans: &[(Profile, KronosSettings, Vec<Bucket>)]) -> Positions {
    let window = plans.iter().map(|(_, s, _)| s.window).max().unwrap_or(1);
    let tokenizer = plans
        .iter()
        .flat_map(|(_, _, b)| b)
        .filter(|b| matches!(b.kind, GraphKind::Encode | GraphKind::Detokenize))
        .map(|b| b.slots)
        .max()
        .unwrap_or(1);
    Positions { predictor: window, tokenizer }
}

/// Exports a Kronos model (see the module docs); on any error nothing is left at `opts.out`.
pub fn export_bundle(opts: &ExportOptions, progress: &mut dyn FnMut(ExportEvent)) -> Result<Manifest> {
    let Some(tokenizer) = &opts.tokenizer else {
        return Err(Error::Config {
            message: "a Kronos model is exported with its tokenizer: pass its directory as --tokenizer"
                .into(),
        });
    };
    let ckpt = KronosCheckpoint::load(&opts.checkpoint, tokenizer)?;
    if opts.profiles.is_empty() {
        return Err(Error::Profile { message: "no profile selected".into() });
    }
    if let Some(p) = opts.precisions.iter().find(|&&p| p != Precision::Fp32) {
        return Err(Error::Config {
            message: format!(
                "--precision {p}: Kronos graphs are exported in fp32 only (its engines are fp32 CPU engines); \
                 export with --precision fp32"
            ),
        });
    }
    let precisions = vec![Precision::Fp32];
    let plans = opts
        .profiles
        .iter()
        .map(|p| buckets(p).map(|(s, b)| (p.clone(), s, b)))
        .collect::<Result<Vec<_>>>()?;
    let positions = positions(&plans);
    let inputs = export_inputs(opts, ckpt.info(), &precisions)?;
    let cache = match check_cache(opts, &inputs, progress)? {
        Ok(up_to_date) => return Ok(up_to_date),
        Err(cache) => cache,
    };
    let total: usize = plans.iter().map(|(_, _, b)| b.len()).sum();
    progress(ExportEvent::Start { graphs: total });
    let stage = StagingDir::new(&opts.out, opts.force || cache.replaces())?;
    let wfile = weights_file(Precision::Fp32);
    let mut store = WeightStore::create(&stage.path().join(&wfile), &wfile)?;
    let mut files = vec![wfile.clone()];
    let mut profiles = Vec::new();
    let mut index = 0;
    for (profile, settings, list) in &plans {
        let mut graphs = Vec::new();
        for b in list {
            let spec = GraphSpec {
                window: settings.window,
                span: settings.span(),
                positions,
                variant: opts.variant,
            };
            let written = write_graph(&ckpt, &mut store, stage.path(), &profile.name, b, spec)?;
            index += 1;
            progress(ExportEvent::Graph { file: written.file.clone(), nodes: written.nodes, index, total });
            files.push(written.file.clone());
            graphs.push(written);
        }
        profiles.push(KronosProfileEntry { profile: profile.clone(), window: settings.window, graphs });
    }
    store.finish()?;
    if let Some(dir) = &opts.golden {
        files.extend(copy_golden(dir, stage.path())?);
    }
    let manifest = Manifest {
        weights: vec![WeightsEntry { precision: Precision::Fp32, file: wfile }],
        precisions,
        family: FamilyGraphs { kronos_profiles: profiles, ..FamilyGraphs::default() },
        files: file_entries(stage.path(), &files)?,
        inputs,
        ..Manifest::new(ckpt.info(), AnyConfig::Kronos(ckpt.config.clone()), opts.variant)
    };
    commit_bundle(stage, manifest)
}
