//! `totoc build-engine` for a Toto 2.0 export bundle (called by [`crate::registry::build_engine`] when the
//! export manifest says `toto-2.0`).
//!
//! Same layout and checks as Toto 1.0's per-bucket CPU/CUDA engines: the fp32 weight file once, each kept graph
//! set's graphs copied, every graph loaded once here with the shared weights and its I/O required to be the
//! manifest's, sets whose buffers cannot fit the memory budget beside the weights dropped with a note. An engine
//! holds one of the bundle's precisions; a CPU engine of fp16 graphs runs their fp16 *emulation*
//! (`exporter::graph::emulate`, as for Toto 1.0: it checks fp16 accuracy, it is not faster), int8 engines are CPU
//! engines (`backend::check_precision`).
//!
//! TensorRT engines ([`super::tensorrt`]) are EPContext models built where TensorRT runs: by default one per
//! profile and graph kind from the profile's shared graph (the sets' graphs then name it), or one per static
//! graph with `--graphs per-bucket`; each must be wholly on TensorRT (`crate::tensorrt::check_all_on_tensorrt`,
//! in `build_tensorrt`). The shared form is built for TensorRT only. Built, never run on a GPU yet.

use std::path::Path;
use std::time::Instant;

use exporter::fsutil::StagingDir;
use exporter::graph::emulate;
use exporter::manifest::{file_entries, Manifest};
use exporter::signature::Precision;
use exporter::toto2::manifest::{Toto2GraphFile, Toto2ProfileEntry, Toto2SetEntry};

use super::manifest::{Toto2Dropped, Toto2TensorRtGraph};
use super::tensorrt::tensorrt_builds;
use crate::backend::{self, session_config, Stage, Target, Version};
use crate::bundle::build::{build_tensorrt, emulated_bytes, emulated_externals, write_emulation};
use crate::bundle::format::EMULATED_WEIGHTS;
use crate::bundle::{
    bundle_files, check_io, pick_precision, provider_present, BuildEvent, BuildOptions, EngineManifest,
    GraphForm, SourceBundle, ENGINE_FORMAT, ENGINE_FORMAT_VERSION,
};
use crate::error::{Error, Result};
use crate::graph::{GraphRunner, SharedSession, SharedWeights};
use crate::memory::human;
use crate::registry::graphs::EngineGraphs;
use crate::runtime;

/// Builds an engine for `target` from the Toto 2.0 export bundle `artifacts` (its manifest `source`, already
/// hash-checked, whose own sha256 is `source_sha`).
pub fn build_engine(
    artifacts: &Path,
    source: &Manifest,
    source_sha: String,
    target: &Target,
    out: &Path,
    options: &BuildOptions,
    progress: &mut dyn FnMut(BuildEvent),
) -> Result<EngineManifest> {
    let refuse = |message: String| Error::Engine { path: artifacts.to_path_buf(), message };
    let is_tensorrt = matches!(target, Target::TensorRt { .. });
    let form = options.graphs.unwrap_or_else(|| GraphForm::default_for(target));
    if form == GraphForm::Shared && !is_tensorrt {
        return Err(refuse(
            "Toto 2.0's shape-polymorphic graphs are built for `--target tensorrt` only: build with \
             `--graphs per-bucket`"
                .into(),
        ));
    }
    let precision = pick_precision(options.precision, &source.precisions, artifacts)?;
    backend::check_precision(target, precision).map_err(refuse)?;
    let emulation = matches!(target, Target::Cpu { .. }) && precision == Precision::Fp16;
    let rt = runtime::init(options.ort_lib.as_deref())?;
    let tensorrt = is_tensorrt.then(crate::doctor::tensorrt_version).flatten();
    backend::check_variant(target, source.variant, Version::parse(rt.version()), tensorrt).map_err(refuse)?;
    // A GPU engine is built where its provider runs: registering the provider says what is missing (`totoc
    // doctor`'s findings), before anything is written.
    backend::apply_process_env(target, precision);
    backend::session_builder(
        rt,
        target,
        &session_config(target, &Stage::Load { bundle_dir: out.to_path_buf() }, precision),
    )?;
    let names: Vec<&str> = source.family.toto2_profiles.iter().map(|p| p.profile.name.as_str()).collect();
    if let Some(missing) = options.profiles.iter().find(|n| !names.contains(&n.as_str())) {
        return Err(refuse(format!(
            "profile {missing:?} is not in this export bundle (it has: {})",
            names.join(", ")
        )));
    }
    let budget = options.memory_budget.unwrap_or_else(crate::memory::default_budget);
    let source_weights = source
        .weights_file(precision)
        .map(str::to_string)
        .ok_or_else(|| refuse(format!("the export bundle lists no {precision} weight file; re-export it")))?;
    // The emulation's f32 copy of the fp16 weights: every tensor the selected profiles' fp16 graphs read, widened.
    let emulated_tensors = if emulation {
        let files = selected_graphs(source, &options.profiles, precision).map(|g| g.file.as_str());
        Some(emulated_externals(artifacts, files)?)
    } else {
        None
    };
    let weights_bytes = match &emulated_tensors {
        Some(t) => emulated_bytes(t),
        None => source
            .files
            .iter()
            .find(|f| f.path == source_weights)
            .map(|f| f.bytes)
            .ok_or_else(|| refuse(format!("the export bundle lists no {source_weights}; re-export it")))?,
    };
    if weights_bytes >= budget {
        return Err(refuse(format!(
            "the weights alone ({}) exceed the memory budget ({}); give a larger --memory-budget",
            human(weights_bytes),
            human(budget)
        )));
    }

    let inputs = crate::bundle::engine_inputs(
        &source_sha,
        rt.version(),
        target,
        precision,
        form,
        options,
        budget,
        tensorrt,
    );
    let cache = match crate::bundle::check_cache(out, options, &inputs, progress)? {
        Ok(up_to_date) => return Ok(up_to_date),
        Err(cache) => cache,
    };

    // Which sets to keep: every one whose buffers fit beside the weights.
    let mut dropped = Vec::new();
    let mut kept: Vec<Toto2ProfileEntry> = Vec::new();
    for p in source
        .family
        .toto2_profiles
        .iter()
        .filter(|p| options.profiles.is_empty() || options.profiles.contains(&p.profile.name))
    {
        let mut sets = Vec::new();
        for set in &p.sets {
            let set = Toto2SetEntry {
                graphs: set.graphs.iter().filter(|g| g.precision == precision).cloned().collect(),
                ..set.clone()
            };
            if set.graphs.is_empty() {
                return Err(refuse(format!(
                    "graph set {} has no {precision} graphs (the bundle lists {precision}); re-export it",
                    set.name
                )));
            }
            if weights_bytes + set.memory_bytes > budget {
                for g in &set.graphs {
                    progress(BuildEvent::Dropped {
                        file: g.file.clone(),
                        memory_bytes: set.memory_bytes,
                        budget,
                    });
                }
                dropped.push(Toto2Dropped {
                    profile: p.profile.name.clone(),
                    set: set.name.clone(),
                    memory_bytes: set.memory_bytes,
                    reason: format!(
                        "its buffers ({}) and the weights ({}) exceed the memory budget ({})",
                        human(set.memory_bytes),
                        human(weights_bytes),
                        human(budget)
                    ),
                });
            } else {
                sets.push(set);
            }
        }
        if sets.is_empty() {
            return Err(refuse(format!(
                "no graph set of profile {:?} fits the memory budget ({}); give a larger --memory-budget",
                p.profile.name,
                human(budget)
            )));
        }
        kept.push(Toto2ProfileEntry { profile: p.profile.clone(), sets, shared: Vec::new() });
    }
    let total: usize = kept.iter().flat_map(|p| &p.sets).map(|s| s.graphs.len()).sum();
    let trt_builds = if is_tensorrt {
        let layout = crate::tensorrt::profile_layout(Version::parse(rt.version()));
        tensorrt_builds(&source.family.toto2_profiles, &kept, precision, form, layout).map_err(refuse)?
    } else {
        Vec::new()
    };
    progress(BuildEvent::Start { graphs: total, precision, emulation });

    let stage = StagingDir::new(out, options.force || cache.replaces())?;
    let (weights_file, emulated) = match &emulated_tensors {
        Some(tensors) => {
            let to = stage.path().join(EMULATED_WEIGHTS);
            (
                EMULATED_WEIGHTS.to_string(),
                Some(emulate::write_emulated_weights(artifacts, tensors, &to, EMULATED_WEIGHTS)?),
            )
        }
        None => {
            // TensorRT engines carry their weights (as Toto 1.0's)
            if !is_tensorrt {
                let (from, to) = (artifacts.join(&source_weights), stage.path().join(&source_weights));
                std::fs::copy(&from, &to).map_err(|e| Error::io(&to, e))?;
            }
            (source_weights.clone(), None)
        }
    };
    let check = provider_present(rt, target);
    let mut check_cfg =
        session_config(target, &Stage::Load { bundle_dir: stage.path().to_path_buf() }, precision);
    check_cfg.config_entries.push(("session.disable_prepacking".into(), "1".into()));
    let weights = SharedWeights::for_target(rt, target);
    // TensorRT: build each engine, then point the graphs it serves at its EPContext model; a shared engine is
    // loaded once and every set it serves must fit it (a static one is checked with the others below).
    let mut trt_graphs = Vec::new();
    for b in &trt_builds {
        let stem = b.source.strip_suffix(".onnx").unwrap_or(&b.source).to_string();
        let (file, stamp) = build_tensorrt(
            rt,
            target,
            precision,
            &b.profiles,
            &artifacts.join(&b.source),
            stage.path(),
            &stem,
        )?;
        let session =
            if check && b.shared {
                let path = stage.path().join(&file);
                Some(weights.trim_while(|| {
                    SharedSession::open(rt, &path, &file, target, &check_cfg, Some(&weights))
                })?)
            } else {
                None
            };
        for g in kept
            .iter_mut()
            .filter(|p| p.profile.name == b.profile)
            .flat_map(|p| &mut p.sets)
            .flat_map(|s| &mut s.graphs)
            .filter(|g| if b.shared { g.kind == b.kind } else { g.file == b.source })
        {
            g.file = file.clone();
            if let Some(session) = &session {
                session
                    .check_bucket(&g.inputs, &g.outputs)
                    .map_err(|message| Error::Engine { path: stage.path().join(&file), message })?;
            }
        }
        trt_graphs.push(Toto2TensorRtGraph {
            profile: b.profile.clone(),
            kind: b.kind,
            file,
            source_file: b.source.clone(),
            shared: b.shared,
            tensorrt: stamp,
        });
    }
    for (i, g) in kept.iter_mut().flat_map(|p| &mut p.sets).flat_map(|s| &mut s.graphs).enumerate() {
        let index = i + 1;
        let t = Instant::now();
        // the emulation graph replaces the fp16 one (same f32 I/O: a 2.0 fp16 graph casts at its edges)
        if is_tensorrt {
            // built above: `g.file` is its engine's EPContext model
        } else if let Some(w) = &emulated {
            let stem = g.file.strip_suffix(".onnx").unwrap_or(&g.file).to_string();
            g.file = write_emulation(&artifacts.join(&g.file), w, stage.path(), &stem)?;
        } else {
            let to = stage.path().join(&g.file);
            std::fs::copy(artifacts.join(&g.file), &to).map_err(|e| Error::io(&to, e))?;
        }
        let to = stage.path().join(&g.file);
        if check && !(is_tensorrt && form == GraphForm::Shared) {
            let c = weights
                .trim_while(|| GraphRunner::check(rt, &to, &g.file, target, &check_cfg, Some(&weights)))?;
            check_io(&c.inputs, &c.outputs, &g.inputs, &g.outputs, &to)?;
        }
        progress(BuildEvent::Graph {
            file: g.file.clone(),
            seconds: t.elapsed().as_secs_f64(),
            index,
            total,
        });
    }
    crate::bundle::copy_golden_cases(source, artifacts, stage.path())?;
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
        source: SourceBundle::of(source, source_sha),
        model: source.model.clone(),
        weights_file,
        weights_bytes,
        weight_copies: if is_tensorrt { trt_graphs.len() } else { 1 },
        memory_budget: budget,
        family: EngineGraphs {
            toto2_profiles: kept,
            toto2_dropped: dropped,
            toto2_tensorrt: trt_graphs,
            ..EngineGraphs::default()
        },
        files: file_entries(stage.path(), &files)?,
        inputs,
    };
    crate::bundle::commit_engine(stage, manifest)
}

/// The `precision` graphs of the profiles `names` (all profiles when empty) of `source`.
fn selected_graphs<'a>(
    source: &'a Manifest,
    names: &'a [String],
    precision: Precision,
) -> impl Iterator<Item = &'a Toto2GraphFile> + 'a {
    source
        .family
        .toto2_profiles
        .iter()
        .filter(move |p| names.is_empty() || names.contains(&p.profile.name))
        .flat_map(|p| &p.sets)
        .flat_map(|s| &s.graphs)
        .filter(move |g| g.precision == precision)
}
