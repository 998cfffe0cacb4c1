//! `totoc build-engine` for a Toto 1.0 export bundle (called by [`crate::registry::build_engine`] when the source
//! manifest's model is Toto 1.0): the per-profile, per-bucket graphs, checked and budgeted.

use std::path::Path;
use std::time::Instant;

use exporter::bucket::Bucket;
use exporter::fsutil::StagingDir;
use exporter::graph::emulate::{self};
use exporter::manifest::{file_entries, Manifest};
use exporter::profile::Profile;
use exporter::registry::AnyConfig;
use exporter::signature::{GraphKind, Precision, TensorSig};
use exporter::toto1::manifest::{DynamicGraphEntry, GraphEntry};

use super::manifest::{DroppedBucket, EngineGraph, EngineProfile};
use crate::backend::{self, session_config, Stage, Target, Version};
use crate::bundle::build::{
    build_tensorrt, check_cache, copy_golden_cases, emulated_bytes, emulated_externals, engine_inputs,
    pick_precision, provider_present, widened, write_emulation,
};
use crate::bundle::format::{
    BuildEvent, BuildOptions, EngineManifest, GraphForm, SourceBundle, EMULATED_WEIGHTS, ENGINE_FORMAT,
    ENGINE_FORMAT_VERSION,
};
use crate::bundle::load::{bundle_files, check_io};
use crate::error::{Error, Result};
use crate::graph::{GraphRunner, SharedSession, SharedWeights};
use crate::memory::human;
use crate::registry::graphs::EngineGraphs;
use crate::runtime::{self};
use exporter::toto1::ModelBuckets;

/// Builds the engine bundle for `target` from the Toto 1.0 export bundle at `artifacts` (manifest `source`, whose
/// `manifest.json` has sha256 `source_sha`; its model `model`) into `out`.
#[allow(clippy::too_many_arguments)]
pub fn build_engine(
    artifacts: &Path,
    source: Manifest,
    model: exporter::toto1::config::ModelConfig,
    source_sha: String,
    target: &Target,
    out: &Path,
    options: &BuildOptions,
    progress: &mut dyn FnMut(BuildEvent),
) -> Result<EngineManifest> {
    let precision = pick_precision(options.precision, &source.precisions, artifacts)?;
    backend::check_precision(target, precision)
        .map_err(|message| Error::Engine { path: artifacts.to_path_buf(), message })?;
    let emulation = matches!(target, Target::Cpu { .. }) && precision == Precision::Fp16;
    let rt = runtime::init(options.ort_lib.as_deref())?;
    let tensorrt = matches!(target, Target::TensorRt { .. }).then(crate::doctor::tensorrt_version).flatten();
    backend::check_variant(target, source.variant, Version::parse(rt.version()), tensorrt)
        .map_err(|message| Error::Engine { path: artifacts.to_path_buf(), message })?;
    // A GPU engine is built where its provider runs (TensorRT compiles for the GPU at hand, and every graph is
    // checked by loading it): registering the provider says what is missing (`totoc doctor`'s findings), before
    // anything is written.
    backend::apply_process_env(target, precision);
    backend::session_builder(
        rt,
        target,
        &session_config(target, &Stage::Load { bundle_dir: out.to_path_buf() }, precision),
    )?;
    if let Some(missing) =
        options.profiles.iter().find(|n| !source.family.profiles.iter().any(|p| p.profile.name == **n))
    {
        return Err(Error::Engine {
            path: artifacts.to_path_buf(),
            message: format!(
                "profile {missing:?} is not in this export bundle (it has: {})",
                source.family.profiles.iter().map(|p| p.profile.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        });
    }
    let selected: Vec<_> = source
        .family
        .profiles
        .iter()
        .filter(|p| options.profiles.is_empty() || options.profiles.contains(&p.profile.name))
        .collect();
    let budget = options.memory_budget.unwrap_or_else(crate::memory::default_budget);
    let source_weights = source.weights_file(precision).map(str::to_string).ok_or_else(|| Error::Engine {
        path: artifacts.to_path_buf(),
        message: format!("the export bundle lists no {precision} weight file; re-export it"),
    })?;
    // The emulation's f32 copy of the fp16 weights: every tensor the selected graphs read, widened.
    let emulated_tensors = if emulation {
        let files = selected.iter().flat_map(|p| p.graphs.iter().filter(|g| g.precision == precision));
        Some(emulated_externals(artifacts, files.map(|g| g.file.as_str()))?)
    } else {
        None
    };
    let weights_bytes = match &emulated_tensors {
        Some(t) => emulated_bytes(t),
        None => source.files.iter().find(|f| f.path == source_weights).map(|f| f.bytes).ok_or_else(|| {
            Error::Engine {
                path: artifacts.to_path_buf(),
                message: format!("the export bundle lists no {source_weights}; re-export it"),
            }
        })?,
    };
    if weights_bytes >= budget {
        return Err(Error::Engine {
            path: artifacts.to_path_buf(),
            message: format!(
                "the weights alone ({}) exceed the memory budget ({}); give a larger --memory-budget",
                human(weights_bytes),
                human(budget)
            ),
        });
    }

    // Which buckets to keep: every one whose buffers fit beside the weights.
    let mut dropped = Vec::new();
    let mut kept: Vec<(&Profile, Vec<&GraphEntry>)> = Vec::new();
    for p in &selected {
        let mut graphs = Vec::new();
        for g in p.graphs.iter().filter(|g| g.precision == precision) {
            // the emulation's buffers are f32
            let memory_bytes =
                if emulation { g.bucket.memory_bytes(&model, Precision::Fp32) } else { g.memory_bytes };
            if weights_bytes + memory_bytes > budget {
                progress(BuildEvent::Dropped { file: g.file.clone(), memory_bytes, budget });
                dropped.push(DroppedBucket {
                    profile: p.profile.name.clone(),
                    bucket: g.bucket,
                    memory_bytes,
                    reason: format!(
                        "its buffers ({}) and the weights ({}) exceed the memory budget ({})",
                        human(memory_bytes),
                        human(weights_bytes),
                        human(budget)
                    ),
                });
            } else {
                graphs.push(g);
            }
        }
        if !graphs.iter().any(|g| g.bucket.kind == GraphKind::Prefill) {
            return Err(Error::Engine {
                path: artifacts.to_path_buf(),
                message: format!(
                    "no prefill bucket of profile {:?} fits the memory budget ({}); give a larger --memory-budget",
                    p.profile.name,
                    human(budget)
                ),
            });
        }
        kept.push((&p.profile, graphs));
    }
    let total: usize = kept.iter().map(|(_, g)| g.len()).sum();

    // Sessions per bucket, or one shape-polymorphic session per graph kind.
    let form = options.graphs.unwrap_or_else(|| GraphForm::default_for(target));
    let mut dynamic: Vec<&DynamicGraphEntry> = Vec::new();
    if form == GraphForm::Shared {
        for kind in GraphKind::PREFILL_DECODE {
            if !kept.iter().flat_map(|(_, g)| g.iter()).any(|g| g.bucket.kind == kind) {
                continue;
            }
            let d = source.family.dynamic_graphs.iter().find(|d| d.kind == kind && d.precision == precision);
            dynamic.push(d.ok_or_else(|| Error::Engine {
                path: artifacts.to_path_buf(),
                message: format!(
                    "the export bundle has no shape-polymorphic {precision} {} graph (bundles written with \
                     --opset 24 have them): re-export it, or build with `--graphs per-bucket`",
                    kind.as_str()
                ),
            })?);
        }
    }
    let session_file = |g: &GraphEntry| -> String {
        match dynamic.iter().find(|d| d.kind == g.bucket.kind) {
            Some(d) => d.file.clone(),
            None => g.file.clone(),
        }
    };
    let keyed: Vec<(Bucket, String)> =
        kept.iter().flat_map(|(_, gs)| gs.iter().map(|g| (g.bucket, session_file(g)))).collect();
    let captures = crate::graph::capture_keys(target, &keyed)
        .map_err(|message| Error::Engine { path: artifacts.to_path_buf(), message })?;
    let weight_copies = match (target, form) {
        (Target::TensorRt { .. }, GraphForm::Shared) => dynamic.len(),
        (Target::TensorRt { .. }, GraphForm::PerBucket) => total,
        _ => 1,
    };

    let inputs = engine_inputs(&source_sha, rt.version(), target, precision, form, options, budget, tensorrt);
    let cache = match check_cache(out, options, &inputs, progress)? {
        Ok(up_to_date) => return Ok(up_to_date),
        Err(cache) => cache,
    };

    progress(BuildEvent::Start { graphs: total, precision, emulation });
    let stage = StagingDir::new(out, options.force || cache.replaces())?;
    let load_cfg = session_config(target, &Stage::Load { bundle_dir: stage.path().to_path_buf() }, precision);
    let (weights_file, emulated) = match &emulated_tensors {
        Some(tensors) => {
            let w = emulate::write_emulated_weights(
                artifacts,
                tensors,
                &stage.path().join(EMULATED_WEIGHTS),
                EMULATED_WEIGHTS,
            )?;
            (EMULATED_WEIGHTS.to_string(), Some(w))
        }
        None => {
            if !matches!(target, Target::TensorRt { .. }) {
                let (from, to) = (artifacts.join(&source_weights), stage.path().join(&source_weights));
                std::fs::copy(&from, &to).map_err(|e| Error::io(&to, e))?;
            }
            (source_weights.clone(), None)
        }
    };
    let check = provider_present(rt, target);
    // The check needs ONNX Runtime to parse, optimise and plan each graph, not to repack its weights for the
    // matmul kernels (half of a session's creation time, and it would be redone at load anyway).
    let mut check_cfg = load_cfg.clone();
    check_cfg.config_entries.push(("session.disable_prepacking".into(), "1".into()));
    let weights = SharedWeights::for_target(rt, target);
    // Shared form: each kind's graph is built (or copied) once, with every kept bucket of the kind in its
    // TensorRT profiles, and checked as one session.
    let mut built: Vec<(GraphKind, String, Option<crate::tensorrt::EngineStamp>, Option<SharedSession>)> =
        Vec::new();
    for d in &dynamic {
        let buckets: Vec<Vec<TensorSig>> = kept
            .iter()
            .flat_map(|(_, gs)| gs.iter())
            .filter(|g| g.bucket.kind == d.kind)
            .map(|g| d.inputs.iter().map(|s| s.at(g.bucket.rows, g.bucket.slots)).collect())
            .collect();
        let stem = d.file.strip_suffix(".onnx").unwrap_or(&d.file).to_string();
        let (file, stamp) = match (target, &emulated) {
            (Target::TensorRt { .. }, _) => {
                let layout = crate::tensorrt::profile_layout(Version::parse(rt.version()));
                let profiles = crate::tensorrt::profile_options(&d.inputs, &buckets, layout);
                let (file, stamp) = build_tensorrt(
                    rt,
                    target,
                    precision,
                    &profiles,
                    &artifacts.join(&d.file),
                    stage.path(),
                    &stem,
                )?;
                (file, Some(stamp))
            }
            (_, Some(w)) => (write_emulation(&artifacts.join(&d.file), w, stage.path(), &stem)?, None),
            _ => {
                let to = stage.path().join(&d.file);
                std::fs::copy(artifacts.join(&d.file), &to).map_err(|e| Error::io(&to, e))?;
                (d.file.clone(), None)
            }
        };
        let session =
            if check {
                let path = stage.path().join(&file);
                Some(weights.trim_while(|| {
                    SharedSession::open(rt, &path, &file, target, &check_cfg, Some(&weights))
                })?)
            } else {
                None
            };
        built.push((d.kind, file, stamp, session));
    }
    let mut profiles = Vec::new();
    let mut index = 0;
    for (profile, graphs) in kept {
        let mut out_graphs = Vec::new();
        for g in graphs {
            index += 1;
            let t = Instant::now();
            let stem = g.file.strip_suffix(".onnx").unwrap_or(&g.file).to_string();
            let shared = built.iter().find(|b| b.0 == g.bucket.kind);
            let (file, stamp) = match (target, &emulated, shared) {
                (_, _, Some((_, file, stamp, _))) => (file.clone(), stamp.clone()),
                (Target::TensorRt { .. }, _, None) => {
                    let (file, stamp) = build_tensorrt(
                        rt,
                        target,
                        precision,
                        &[],
                        &artifacts.join(&g.file),
                        stage.path(),
                        &stem,
                    )?;
                    (file, Some(stamp))
                }
                (_, Some(w), None) => {
                    (write_emulation(&artifacts.join(&g.file), w, stage.path(), &stem)?, None)
                }
                _ => {
                    let to = stage.path().join(&g.file);
                    std::fs::copy(artifacts.join(&g.file), &to).map_err(|e| Error::io(&to, e))?;
                    (g.file.clone(), None)
                }
            };
            // A shared graph's bucket binds the graph's inputs (its time mask too) at the bucket's sizes.
            let (inputs, outputs) = match dynamic.iter().find(|d| d.kind == g.bucket.kind) {
                Some(d) => (
                    d.inputs.iter().map(|s| s.at(g.bucket.rows, g.bucket.slots)).collect(),
                    d.outputs.iter().map(|s| s.at(g.bucket.rows, g.bucket.slots)).collect(),
                ),
                None => (g.inputs.clone(), g.outputs.clone()),
            };
            let (inputs, outputs, memory_bytes): (Vec<TensorSig>, Vec<TensorSig>, u64) = if emulation {
                (
                    inputs.iter().map(widened).collect(),
                    outputs.iter().map(widened).collect(),
                    g.bucket.memory_bytes(&model, Precision::Fp32),
                )
            } else {
                (inputs, outputs, g.memory_bytes)
            };
            let gpu_graph_id = match captures[index - 1] {
                crate::graph::Capture::Graph { gpu_graph_id } => Some(gpu_graph_id),
                crate::graph::Capture::No => None,
            };
            let mut entry = EngineGraph {
                bucket: g.bucket,
                dims: g.dims,
                file,
                source_file: g.file.clone(),
                memory_bytes,
                inputs,
                outputs,
                load_session: session_config(target, &Stage::Load { bundle_dir: ".".into() }, precision),
                providers: Vec::new(),
                tensorrt: stamp,
                shared: shared.is_some(),
                gpu_graph_id,
            };
            // Create its session where its provider exists: the graph must load and its I/O must be the
            // manifest's. No I/O is allocated (the largest caches are gigabytes), so the check stays cheap.
            match shared {
                Some((_, _, _, Some(session))) => {
                    let path = stage.path().join(&entry.file);
                    session
                        .check_bucket(&entry.inputs, &entry.outputs)
                        .map_err(|message| Error::Engine { path, message })?;
                    entry.providers = session.providers().to_vec();
                }
                Some((_, _, _, None)) => {}
                None if check => {
                    let path = stage.path().join(&entry.file);
                    let c = weights.trim_while(|| {
                        GraphRunner::check(rt, &path, &entry.file, target, &check_cfg, Some(&weights))
                    })?;
                    check_io(&c.inputs, &c.outputs, &entry.inputs, &entry.outputs, &path)?;
                    entry.providers = c.providers;
                }
                None => {}
            }
            progress(BuildEvent::Graph {
                file: entry.file.clone(),
                seconds: t.elapsed().as_secs_f64(),
                index,
                total,
            });
            out_graphs.push(entry);
        }
        profiles.push(EngineProfile { profile: profile.clone(), graphs: out_graphs });
    }

    // The export's golden toto-ts cases travel with the engine, so `totoc verify --engine` works anywhere.
    copy_golden_cases(&source, artifacts, stage.path())?;
    let files = bundle_files(stage.path())?;
    let manifest = EngineManifest {
        format: ENGINE_FORMAT.into(),
        format_version: ENGINE_FORMAT_VERSION,
        totoc_version: env!("CARGO_PKG_VERSION").into(),
        ort_version: rt.version().to_string(),
        target: target.clone(),
        precision,
        fp16_emulation: emulation,
        graphs: form,
        source: SourceBundle::of(&source, source_sha),
        model: AnyConfig::Toto1(model),
        weights_file,
        weights_bytes,
        weight_copies,
        memory_budget: budget,
        family: EngineGraphs { profiles, dropped, ..EngineGraphs::default() },
        files: file_entries(stage.path(), &files)?,
        inputs,
    };
    crate::bundle::commit_engine(stage, manifest)
}
