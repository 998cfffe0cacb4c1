//! `totoc export` of a Toto 2.0 checkpoint ([`export_bundle`]): every profile's shape buckets
//! ([`crate::toto2::ladder`]) as graph sets ([`write_graph_set`]) of each selected precision (fp32, fp16, int8),
//! each precision over its own shared external-data weight file ([`WeightStore`]), in the same bundle layout and
//! manifest format as Toto 1.0 (`crate::export`), the manifest's `model` saying `toto-2.0` and its profiles under
//! `toto2_profiles`; at opset 24 also each profile's shape-polymorphic graphs ([`write_shared_graphs`]), as Toto
//! 1.0 bundles hold their `dynamic_graphs`, for TensorRT.

use std::path::Path;

use prost::Message;

use super::graph::{toto2_graph_with, toto2_shared_graph, PrecisionPlans};
pub use super::manifest::Toto2GraphFile;
use super::manifest::{Toto2ProfileEntry, Toto2SetEntry, Toto2SharedGraph};
use super::shared;
use crate::error::{Error, Result};
use crate::export::{
    check_cache, commit_bundle, copy_golden, export_inputs, weights_file, ExportEvent, ExportOptions,
    DYNAMIC_PREFIX,
};
use crate::fsutil::{write_atomic, StagingDir};
use crate::graph::{GraphBuilder, WeightStore};
use crate::manifest::{file_entries, Manifest, WeightsEntry};
use crate::registry::family::{AnyConfig, FamilyGraphs};
use crate::signature::Precision;
use crate::toto2::checkpoint::Toto2Checkpoint;
use crate::toto2::ladder;
use crate::toto2::signature::{Toto2Dims, Toto2GraphKind};
use crate::variant::OpsetVariant;

/// Builds and writes every graph of `dims` (`[pass]` or `[prefill, decode]`) as `dir/<set>.<kind>.onnx` (fp32) or
/// `dir/<set>.<kind>.int8.onnx` (atomically), referencing `weights` (whose file must live in `dir`, one per
/// precision: `crate::export::weights_file`); `variant` is the opset, and so how the decode graph writes its KV
/// caches (`TensorScatter` at 24, `ScatterND` at 18). Nothing depends on time or machine, so re-exports are byte-identical.
/// fp16 graphs keep `Fp16Plan::DEFAULT`'s fp32 regions, int8 graphs `graph::INT8_DEFAULT`'s int8 roles.
pub fn write_graph_set(
    ckpt: &Toto2Checkpoint,
    weights: &mut WeightStore,
    dir: &Path,
    set: &str,
    dims: &Toto2Dims,
    variant: OpsetVariant,
    precision: Precision,
) -> Result<Vec<Toto2GraphFile>> {
    write_graph_set_with(ckpt, weights, dir, set, dims, variant, precision, &PrecisionPlans::default())
}

/// [`write_graph_set`] with the fp32 regions of fp16 graphs and the int8 roles of int8 graphs given (`plans`;
/// the ablations measure others).
#[allow(clippy::too_many_arguments)]
pub fn write_graph_set_with(
    ckpt: &Toto2Checkpoint,
    weights: &mut WeightStore,
    dir: &Path,
    set: &str,
    dims: &Toto2Dims,
    variant: OpsetVariant,
    precision: Precision,
    plans: &PrecisionPlans,
) -> Result<Vec<Toto2GraphFile>> {
    let mut out = Vec::new();
    for kind in dims.graphs() {
        let file = crate::export::graph_file(&format!("{set}.{}", kind.as_str()), precision);
        let graph_name = match precision {
            Precision::Fp32 => format!("toto2_{set}_{}", kind.as_str()),
            p => format!("toto2_{set}_{}_{p}", kind.as_str()),
        };
        let mut g = GraphBuilder::new(&graph_name, weights, variant);
        toto2_graph_with(&mut g, ckpt, kind, dims, variant.cache_update(), precision, plans)
            .map_err(|e| Error::Graph { graph: graph_name.clone(), message: e.to_string() })?;
        let doc = format!(
            "Toto 2.0 {} graph of {set:?} (totoc {}): static shapes, u-μP folded into the weights",
            kind.as_str(),
            env!("CARGO_PKG_VERSION")
        );
        let nodes = finish_and_write(g, ckpt, &doc, set, kind, precision, &dir.join(&file))?;
        out.push(Toto2GraphFile {
            kind,
            precision,
            file,
            inputs: dims.inputs(kind),
            outputs: dims.outputs_sigs(kind),
            nodes,
        });
    }
    Ok(out)
}

/// Builds and writes the shape-polymorphic graph of every kind of `dims` (any bucket of the profile: the fixed
/// axes are the profile's) as `dir/<profile>.dynamic.<kind>[.<precision>].onnx`, for the TensorRT engines
/// ([`super::shared`]). Always the `TensorScatter` cache update (opset 24).
pub fn write_shared_graphs(
    ckpt: &Toto2Checkpoint,
    weights: &mut WeightStore,
    dir: &Path,
    profile: &str,
    dims: &Toto2Dims,
    precision: Precision,
    plans: &PrecisionPlans,
) -> Result<Vec<Toto2SharedGraph>> {
    let mut out = Vec::new();
    for kind in dims.graphs() {
        let stem = format!("{profile}.{DYNAMIC_PREFIX}.{}", kind.as_str());
        let file = crate::export::graph_file(&stem, precision);
        let graph_name = format!("toto2_{}_{precision}", stem.replace('.', "_"));
        let mut g = GraphBuilder::new(&graph_name, weights, OpsetVariant::Opset24);
        toto2_shared_graph(&mut g, ckpt, kind, dims, precision, plans)
            .map_err(|e| Error::Graph { graph: graph_name.clone(), message: e.to_string() })?;
        let doc = format!(
            "Toto 2.0 {} graph of profile {profile:?}, rows and slots symbolic, {precision} (totoc {}): one \
             TensorRT engine for every graph set of the profile",
            kind.as_str(),
            env!("CARGO_PKG_VERSION")
        );
        let nodes = finish_and_write(g, ckpt, &doc, profile, kind, precision, &dir.join(&file))?;
        out.push(Toto2SharedGraph {
            kind,
            precision,
            file,
            inputs: shared::dynamic_inputs(dims, kind),
            outputs: shared::dynamic_outputs(dims, kind),
            nodes,
        });
    }
    Ok(out)
}

/// Finishes a built 2.0 graph with its doc string and metadata (the same keys for the static and the shared form;
/// `profile` is the graph set's or the profile's name) and writes it to `path` atomically; returns its node count.
fn finish_and_write(
    g: GraphBuilder<'_>,
    ckpt: &Toto2Checkpoint,
    doc: &str,
    profile: &str,
    kind: Toto2GraphKind,
    precision: Precision,
    path: &Path,
) -> Result<usize> {
    let meta = [
        ("totoc.model", "toto-2.0".to_string()),
        ("totoc.profile", profile.to_string()),
        ("totoc.graph", kind.as_str().to_string()),
        ("totoc.precision", precision.as_str().to_string()),
        ("totoc.checkpoint_sha256", ckpt.info().safetensors_sha256),
    ];
    let model = g.finish(doc, &meta)?;
    let nodes = model.graph.as_ref().map_or(0, |g| g.node.len());
    write_atomic(path, &model.encode_to_vec())?;
    Ok(nodes)
}

/// The precisions a shared graph is written in: those TensorRT builds (int8 engines are CPU engines), and only
/// at opset 24 (the shared graphs write the KV caches with `TensorScatter`, as Toto 1.0's do).
fn shared_precisions(variant: OpsetVariant, precisions: &[Precision]) -> Vec<Precision> {
    if variant != OpsetVariant::Opset24 {
        return Vec::new();
    }
    precisions.iter().copied().filter(|&p| p != Precision::Int8).collect()
}

/// Exports a Toto 2.0 checkpoint (see the module docs); on any error nothing is left at `opts.out`. Each
/// precision's graphs read their own weight file (fp16: [`ExportOptions::fp16_plan`]'s fp32 regions; int8: the
/// transformer's matmuls through `MatMulInteger`, docs/precision.md).
pub fn export_bundle(opts: &ExportOptions, progress: &mut dyn FnMut(ExportEvent)) -> Result<Manifest> {
    let ckpt = Toto2Checkpoint::load(&opts.checkpoint)?;
    if opts.profiles.is_empty() {
        return Err(Error::Profile { message: "no profile selected".into() });
    }
    let mut precisions = opts.precisions.clone();
    precisions.sort();
    precisions.dedup();
    if precisions.is_empty() {
        return Err(Error::Config {
            message: "no precision selected (--precision fp32, fp16 and/or int8)".into(),
        });
    }
    let ladders =
        opts.profiles.iter().map(|p| ladder::ladder(p, &ckpt.config)).collect::<Result<Vec<_>>>()?;
    let plans =
        PrecisionPlans { fp16: opts.fp16_plan, int8: opts.int8_plan.unwrap_or(super::graph::INT8_DEFAULT) };
    let inputs = export_inputs(opts, ckpt.info(), &precisions)?;
    let cache = match check_cache(opts, &inputs, progress)? {
        Ok(up_to_date) => return Ok(up_to_date),
        Err(cache) => cache,
    };
    let shared_precisions = shared_precisions(opts.variant, &precisions);
    let total: usize = ladders.iter().flatten().map(|d| d.graphs().len()).sum::<usize>() * precisions.len()
        + ladders.iter().filter_map(|l| l.first()).map(|d| d.graphs().len()).sum::<usize>()
            * shared_precisions.len();
    progress(ExportEvent::Start { graphs: total });
    let stage = StagingDir::new(&opts.out, opts.force || cache.replaces())?;
    let mut stores = Vec::new();
    let mut files = Vec::new();
    for &p in &precisions {
        let wfile = weights_file(p);
        stores.push(WeightStore::create(&stage.path().join(&wfile), &wfile)?);
        files.push(wfile);
    }
    let mut profiles = Vec::new();
    let mut index = 0;
    for (profile, ladder) in opts.profiles.iter().zip(ladders) {
        let mut sets = Vec::new();
        for dims in ladder {
            let name = ladder::set_name(&profile.name, &dims);
            let mut graphs = Vec::new();
            for (&precision, store) in precisions.iter().zip(stores.iter_mut()) {
                let written = write_graph_set_with(
                    &ckpt,
                    store,
                    stage.path(),
                    &name,
                    &dims,
                    opts.variant,
                    precision,
                    &plans,
                )?;
                for g in &written {
                    index += 1;
                    progress(ExportEvent::Graph { file: g.file.clone(), nodes: g.nodes, index, total });
                    files.push(g.file.clone());
                }
                graphs.extend(written);
            }
            sets.push(Toto2SetEntry {
                name,
                memory_bytes: ladder::memory_bytes(&dims, &ckpt.config),
                dims,
                graphs,
            });
        }
        profiles.push(Toto2ProfileEntry { profile: profile.clone(), sets, shared: Vec::new() });
    }
    // The shared graphs come after every static one, so the static graphs (and an opset-18 bundle) are as
    // before; their weights are the static graphs' (the weight store writes each tensor once).
    for entry in profiles.iter_mut() {
        let Some(first) = entry.sets.first().map(|s| s.dims) else { continue };
        for &precision in &shared_precisions {
            let store = &mut stores[precisions.iter().position(|&p| p == precision).expect("selected")];
            let written = write_shared_graphs(
                &ckpt,
                store,
                stage.path(),
                &entry.profile.name,
                &first,
                precision,
                &plans,
            )?;
            for g in &written {
                index += 1;
                progress(ExportEvent::Graph { file: g.file.clone(), nodes: g.nodes, index, total });
                files.push(g.file.clone());
            }
            entry.shared.extend(written);
        }
    }
    for store in stores {
        store.finish()?;
    }
    if let Some(dir) = &opts.golden {
        files.extend(copy_golden(dir, stage.path())?);
    }
    let manifest = Manifest {
        fp32_regions: if precisions.contains(&Precision::Fp16) {
            opts.fp16_plan.regions().iter().map(|r| r.as_str().to_string()).collect()
        } else {
            Vec::new()
        },
        weights: precisions.iter().map(|&p| WeightsEntry { precision: p, file: weights_file(p) }).collect(),
        precisions,
        family: FamilyGraphs { toto2_profiles: profiles, ..FamilyGraphs::default() },
        files: file_entries(stage.path(), &files)?,
        inputs,
        ..Manifest::new(ckpt.info(), AnyConfig::Toto2(ckpt.config.clone()), opts.variant)
    };
    commit_bundle(stage, manifest)
}
