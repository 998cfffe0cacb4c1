//! `totoc build-engine` for a Toto 2.0 export bundle (called by [`crate::registry::build_engine`] when the
//! export manifest says `toto-2.0`).
//!
//! Same layout and checks as Toto 1.0's per-bucket CPU/CUDA engines: the fp32 weight file once, each kept graph
//! set's graphs copied, every graph loaded once here with the shared weights and its I/O required to be the
//! manifest's, sets whose buffers cannot fit the memory budget beside the weights dropped with a note. Toto 2.0
//! graphs are fp32 static graphs: TensorRT engines (refused by the registry from the family's capabilities) and
//! the shared (shape-polymorphic) graph form (refused here) are not built for them yet.

use std::path::Path;
use std::time::Instant;

use exporter::fsutil::StagingDir;
use exporter::manifest::{file_entries, Manifest};
use exporter::signature::Precision;
use exporter::toto2::manifest::Toto2ProfileEntry;

use super::manifest::Toto2Dropped;
use crate::backend::{self, session_config, Stage, Target, Version};
use crate::bundle::{
    bundle_files, check_io, pick_precision, provider_present, BuildEvent, BuildOptions, EngineManifest,
    GraphForm, SourceBundle, ENGINE_FORMAT, ENGINE_FORMAT_VERSION,
};
use crate::error::{Error, Result};
use crate::graph::{GraphRunner, SharedWeights};
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
    if options.graphs == Some(GraphForm::Shared) {
        return Err(refuse(
            "Toto 2.0 bundles have no shape-polymorphic graphs: build with `--graphs per-bucket`".into(),
        ));
    }
    let precision = pick_precision(options.precision, &source.precisions, artifacts)?;
    let rt = runtime::init(options.ort_lib.as_deref())?;
    backend::check_variant(target, source.variant, Version::parse(rt.version()), None).map_err(refuse)?;
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
    let weights_file = source
        .weights_file(Precision::Fp32)
        .map(str::to_string)
        .ok_or_else(|| refuse("the export bundle lists no fp32 weight file; re-export it".into()))?;
    let weights_bytes = source
        .files
        .iter()
        .find(|f| f.path == weights_file)
        .map(|f| f.bytes)
        .ok_or_else(|| refuse(format!("the export bundle lists no {weights_file}; re-export it")))?;
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
        GraphForm::PerBucket,
        options,
        budget,
        None,
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
                sets.push(set.clone());
            }
        }
        if sets.is_empty() {
            return Err(refuse(format!(
                "no graph set of profile {:?} fits the memory budget ({}); give a larger --memory-budget",
                p.profile.name,
                human(budget)
            )));
        }
        kept.push(Toto2ProfileEntry { profile: p.profile.clone(), sets });
    }
    let total: usize = kept.iter().flat_map(|p| &p.sets).map(|s| s.graphs.len()).sum();
    progress(BuildEvent::Start { graphs: total, precision, emulation: false });

    let stage = StagingDir::new(out, options.force || cache.replaces())?;
    let (from, to) = (artifacts.join(&weights_file), stage.path().join(&weights_file));
    std::fs::copy(&from, &to).map_err(|e| Error::io(&to, e))?;
    let check = provider_present(rt, target);
    let mut check_cfg =
        session_config(target, &Stage::Load { bundle_dir: stage.path().to_path_buf() }, precision);
    check_cfg.config_entries.push(("session.disable_prepacking".into(), "1".into()));
    let weights = SharedWeights::for_target(rt, target);
    for (i, g) in kept.iter().flat_map(|p| &p.sets).flat_map(|s| &s.graphs).enumerate() {
        let index = i + 1;
        let t = Instant::now();
        let to = stage.path().join(&g.file);
        std::fs::copy(artifacts.join(&g.file), &to).map_err(|e| Error::io(&to, e))?;
        if check {
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
        fp16_emulation: false,
        graphs: GraphForm::PerBucket,
        source: SourceBundle::of(source, source_sha),
        model: source.model.clone(),
        weights_file,
        weights_bytes,
        weight_copies: 1,
        memory_budget: budget,
        family: EngineGraphs { toto2_profiles: kept, toto2_dropped: dropped, ..EngineGraphs::default() },
        files: file_entries(stage.path(), &files)?,
        inputs,
    };
    crate::bundle::commit_engine(stage, manifest)
}
