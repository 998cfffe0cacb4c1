//! `totoc export` of a Toto 1.0 checkpoint: every bucket of every selected profile as a static graph in each
//! precision over one weight file per precision, plus the shape-polymorphic graphs TensorRT builds from.

use prost::Message;

use super::checkpoint::Checkpoint;
use super::graph::{dynamic_graph, toto_graph, GraphOptions};
use super::manifest::{DynamicGraphEntry, GraphEntry, ProfileEntry};
use super::signature;
use super::{ModelBuckets, ModelProfile};
use crate::error::{Error, Result};
use crate::export::{
    check_cache, commit_bundle, copy_golden, export_inputs, graph_file, weights_file, ExportEvent,
    ExportOptions, DYNAMIC_PREFIX,
};
use crate::fsutil::{write_atomic, StagingDir};
use crate::graph::precision::FloatTypes;
use crate::graph::{GraphBuilder, WeightStore};
use crate::manifest::{file_entries, Manifest, WeightsEntry};
use crate::registry::family::{AnyConfig, FamilyGraphs};
use crate::signature::{GraphKind, Precision};
use crate::variant::OpsetVariant;

/// Exports a Toto 1.0 checkpoint (`opts.checkpoint`) into a bundle at `opts.out`.
pub fn export_bundle(opts: &ExportOptions, progress: &mut dyn FnMut(ExportEvent)) -> Result<Manifest> {
    let ckpt = Checkpoint::load(&opts.checkpoint)?;
    if opts.profiles.is_empty() {
        return Err(Error::Profile { message: "no profile selected".into() });
    }
    for p in &opts.profiles {
        p.check_against(&ckpt.config)?;
    }
    let mut precisions = opts.precisions.clone();
    precisions.sort();
    precisions.dedup();
    if precisions.is_empty() {
        return Err(Error::Config { message: "no precision selected (--precision fp32 and/or fp16)".into() });
    }
    let int8_plan = opts.int8_plan.unwrap_or(super::graph::INT8_DEFAULT);
    let inputs = export_inputs(opts, ckpt.info(), &precisions)?;
    let cache = match check_cache(opts, &inputs, progress)? {
        Ok(up_to_date) => return Ok(up_to_date),
        Err(cache) => cache,
    };
    let stage = StagingDir::new(&opts.out, opts.force || cache.replaces())?;
    let mut stores = Vec::new();
    let mut files = Vec::new();
    for &p in &precisions {
        let file = weights_file(p);
        stores.push(WeightStore::create(&stage.path().join(&file), &file)?);
        files.push(file);
    }
    let ladders: Vec<_> = opts.profiles.iter().map(|p| p.buckets(&ckpt.config)).collect();
    // The shape-polymorphic graphs (TensorRT) need TensorScatter: opset 24 only.
    let mut dynamic_kinds = Vec::new();
    if opts.variant == OpsetVariant::Opset24 {
        for kind in GraphKind::PREFILL_DECODE {
            if ladders.iter().flatten().any(|b| b.kind == kind) {
                dynamic_kinds.push(kind);
            }
        }
    }
    let total = (ladders.iter().map(Vec::len).sum::<usize>() + dynamic_kinds.len()) * precisions.len();
    progress(ExportEvent::Start { graphs: total });

    let mut profiles = Vec::new();
    let mut index = 0;
    for (profile, ladder) in opts.profiles.iter().zip(ladders) {
        let mut graphs = Vec::new();
        for bucket in ladder {
            for (&precision, weights) in precisions.iter().zip(stores.iter_mut()) {
                let dims = bucket.dims(&ckpt.config);
                let stem = bucket.stem(&profile.name);
                let file = graph_file(&stem, precision);
                let graph_name = format!("toto_{}_{precision}", stem.replace('.', "_"));
                let gopts = GraphOptions {
                    precision,
                    plan: opts.fp16_plan,
                    int8: int8_plan,
                    cache_update: opts.variant.cache_update(),
                    symbolic: false,
                };
                let mut g = GraphBuilder::new(&graph_name, weights, opts.variant);
                toto_graph(&mut g, &ckpt, &dims, &gopts)
                    .map_err(|e| Error::Graph { graph: graph_name.clone(), message: e.to_string() })?;
                let doc = format!(
                    "Toto {} graph of profile {:?}, {} rows × {} slots, {precision} (totoc {}): static shapes, \
                     explicit KV cache state",
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
                    ("totoc.precision", precision.as_str().to_string()),
                    ("totoc.checkpoint_sha256", ckpt.info().safetensors_sha256.clone()),
                ];
                let model = g.finish(&doc, &meta)?;
                let nodes = model.graph.as_ref().map_or(0, |g| g.node.len());
                write_atomic(&stage.path().join(&file), &model.encode_to_vec())?;
                index += 1;
                progress(ExportEvent::Graph { file: file.clone(), nodes, index, total });
                graphs.push(GraphEntry {
                    bucket,
                    dims,
                    precision,
                    file: file.clone(),
                    memory_bytes: bucket.memory_bytes(&ckpt.config, precision),
                    inputs: signature::inputs(&dims, gopts.io()),
                    outputs: signature::outputs(&dims, gopts.io()),
                });
                files.push(file);
            }
        }
        profiles.push(ProfileEntry { profile: profile.clone(), graphs });
    }
    let mut dynamic_graphs = Vec::new();
    for &kind in &dynamic_kinds {
        for (&precision, weights) in precisions.iter().zip(stores.iter_mut()) {
            let file = graph_file(&format!("{DYNAMIC_PREFIX}.{}", kind.as_str()), precision);
            let graph_name = format!("toto_dynamic_{}_{precision}", kind.as_str());
            let gopts = GraphOptions {
                precision,
                plan: opts.fp16_plan,
                int8: int8_plan,
                cache_update: opts.variant.cache_update(),
                symbolic: true,
            };
            let mut g = GraphBuilder::new(&graph_name, weights, opts.variant);
            dynamic_graph(&mut g, &ckpt, kind, &gopts)
                .map_err(|e| Error::Graph { graph: graph_name.clone(), message: e.to_string() })?;
            let doc = format!(
                "Toto {} graph, rows and slots symbolic, {precision} (totoc {}): one TensorRT engine for every \
                 bucket of this kind",
                kind.as_str(),
                env!("CARGO_PKG_VERSION")
            );
            let meta = [
                ("totoc.graph", kind.as_str().to_string()),
                ("totoc.precision", precision.as_str().to_string()),
                ("totoc.checkpoint_sha256", ckpt.info().safetensors_sha256.clone()),
            ];
            let model = g.finish(&doc, &meta)?;
            let nodes = model.graph.as_ref().map_or(0, |g| g.node.len());
            write_atomic(&stage.path().join(&file), &model.encode_to_vec())?;
            index += 1;
            progress(ExportEvent::Graph { file: file.clone(), nodes, index, total });
            let ft = FloatTypes::new(precision, &opts.fp16_plan);
            let (inputs, outputs) = signature::dynamic_signature(&ckpt.config, kind, ft.io(), ft.softmax);
            dynamic_graphs.push(DynamicGraphEntry { kind, precision, file: file.clone(), inputs, outputs });
            files.push(file);
        }
    }
    for w in stores {
        w.finish()?;
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
        family: FamilyGraphs { profiles, dynamic_graphs, ..FamilyGraphs::default() },
        files: file_entries(stage.path(), &files)?,
        inputs,
        ..Manifest::new(ckpt.info(), AnyConfig::Toto1(ckpt.config.clone()), opts.variant)
    };
    commit_bundle(stage, manifest)
}
