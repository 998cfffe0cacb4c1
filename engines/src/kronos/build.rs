//! `totoc build-engine` for a Kronos export bundle (called by [`crate::registry::build_engine`] when the export
//! manifest says `kronos`).
//!
//! Kronos engines are fp32 CPU engines (`Capabilities::precisions` and `targets`: the registry refuses any other
//! target before this runs). The layout is every family's CPU engine: the fp32 weight file once, each kept graph
//! copied, every graph loaded once here with the shared weights and its I/O required to be the manifest's, and
//! graphs whose buffers cannot fit the memory budget beside the weights dropped with a note. A decode graph and the
//! refine graph of the same rows are kept or dropped together (the refine graph reads the decode graph's
//! dependency cache where the step writes it, [`crate::kronos::engine`]); a profile must keep at least one graph
//! of each kind it runs.

use std::path::Path;
use std::time::Instant;

use exporter::fsutil::StagingDir;
use exporter::kronos::manifest::{KronosGraphFile, KronosProfileEntry};
use exporter::manifest::{file_entries, Manifest};
use exporter::signature::{GraphKind, Precision};

use super::manifest::KronosDropped;
use crate::backend::{self, session_config, Stage, Target};
use crate::bundle::{
    bundle_files, check_io, pick_precision, BuildEvent, BuildOptions, EngineManifest, GraphForm,
    SourceBundle, ENGINE_FORMAT, ENGINE_FORMAT_VERSION,
};
use crate::error::{Error, Result};
use crate::graph::{GraphRunner, SharedWeights};
use crate::memory::human;
use crate::registry::graphs::EngineGraphs;
use crate::runtime;

/// The kinds every Kronos profile runs (recompute only where its window can slide).
pub(crate) const NEEDED: [GraphKind; 5] =
    [GraphKind::Encode, GraphKind::Prefill, GraphKind::Decode, GraphKind::Refine, GraphKind::Detokenize];

/// Builds a CPU engine from the Kronos export bundle `artifacts` (its manifest `source`, already hash-checked,
/// whose own sha256 is `source_sha`).
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
            "Kronos graphs are static buckets (`--graphs per-bucket`); shape-polymorphic graphs are TensorRT's"
                .into(),
        ));
    }
    let precision = pick_precision(options.precision, &source.precisions, artifacts)?;
    if precision != Precision::Fp32 {
        return Err(refuse(format!(
            "Kronos engines run fp32 graphs only, not {precision}: build with --precision fp32"
        )));
    }
    let rt = runtime::init(options.ort_lib.as_deref())?;
    backend::session_builder(
        rt,
        target,
        &session_config(target, &Stage::Load { bundle_dir: out.to_path_buf() }, precision),
    )?;
    let profiles = &source.family.kronos_profiles;
    let names: Vec<&str> = profiles.iter().map(|p| p.profile.name.as_str()).collect();
    if let Some(missing) = options.profiles.iter().find(|n| !names.contains(&n.as_str())) {
        return Err(refuse(format!(
            "profile {missing:?} is not in this export bundle (it has: {})",
            names.join(", ")
        )));
    }
    let budget = options.memory_budget.unwrap_or_else(crate::memory::default_budget);
    let weights_file = source
        .weights_file(precision)
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

    let mut dropped = Vec::new();
    let mut kept = Vec::new();
    for p in
        profiles.iter().filter(|p| options.profiles.is_empty() || options.profiles.contains(&p.profile.name))
    {
        let (entry, mut gone) = keep_within(p, weights_bytes, budget);
        for d in &gone {
            progress(BuildEvent::Dropped { file: d.file.clone(), memory_bytes: d.memory_bytes, budget });
        }
        check_complete(&entry).map_err(refuse)?;
        dropped.append(&mut gone);
        kept.push(entry);
    }
    let total: usize = kept.iter().map(|p| p.graphs.len()).sum();
    progress(BuildEvent::Start { graphs: total, precision, emulation: false });

    let stage = StagingDir::new(out, options.force || cache.replaces())?;
    let (from, to) = (artifacts.join(&weights_file), stage.path().join(&weights_file));
    std::fs::copy(&from, &to).map_err(|e| Error::io(&to, e))?;
    let mut check_cfg =
        session_config(target, &Stage::Load { bundle_dir: stage.path().to_path_buf() }, precision);
    check_cfg.config_entries.push(("session.disable_prepacking".into(), "1".into()));
    let weights = SharedWeights::for_target(rt, target);
    for (i, g) in kept.iter().flat_map(|p| &p.graphs).enumerate() {
        let t = Instant::now();
        let to = stage.path().join(&g.file);
        std::fs::copy(artifacts.join(&g.file), &to).map_err(|e| Error::io(&to, e))?;
        let c = weights
            .trim_while(|| GraphRunner::check(rt, &to, &g.file, target, &check_cfg, Some(&weights)))?;
        check_io(&c.inputs, &c.outputs, &g.inputs, &g.outputs, &to)?;
        progress(BuildEvent::Graph {
            file: g.file.clone(),
            seconds: t.elapsed().as_secs_f64(),
            index: i + 1,
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
        family: EngineGraphs { kronos_profiles: kept, kronos_dropped: dropped, ..EngineGraphs::default() },
        files: file_entries(stage.path(), &files)?,
        inputs,
    };
    crate::bundle::commit_engine(stage, manifest)
}

/// The graphs of profile `p` whose buffers fit `budget` beside `weights` bytes (a decode graph and the refine
/// graph of its rows together), and the ones left out.
pub(crate) fn keep_within(
    p: &KronosProfileEntry,
    weights: u64,
    budget: u64,
) -> (KronosProfileEntry, Vec<KronosDropped>) {
    let room = budget.saturating_sub(weights);
    let partner = |g: &KronosGraphFile| {
        let other = match g.bucket.kind {
            GraphKind::Decode => GraphKind::Refine,
            GraphKind::Refine => GraphKind::Decode,
            _ => return 0,
        };
        p.graphs
            .iter()
            .find(|o| o.bucket.kind == other && o.bucket.rows == g.bucket.rows)
            .map_or(u64::MAX / 2, |o| o.memory_bytes)
    };
    let (mut graphs, mut dropped) = (Vec::new(), Vec::new());
    for g in &p.graphs {
        let need = g.memory_bytes.saturating_add(partner(g));
        if need <= room {
            graphs.push(g.clone());
        } else {
            dropped.push(KronosDropped {
                profile: p.profile.name.clone(),
                file: g.file.clone(),
                memory_bytes: g.memory_bytes,
                reason: format!(
                    "its buffers ({}{}) and the weights ({}) exceed the memory budget ({})",
                    human(g.memory_bytes),
                    if need > g.memory_bytes { ", with its decode/refine partner's" } else { "" },
                    human(weights),
                    human(budget)
                ),
            });
        }
    }
    (KronosProfileEntry { graphs, ..p.clone() }, dropped)
}

/// A profile runs only with at least one graph of each kind it needs.
pub(crate) fn check_complete(p: &KronosProfileEntry) -> std::result::Result<(), String> {
    let slides = p.profile.context + p.profile.horizon > p.window + 1;
    let needed = NEEDED.iter().copied().chain(slides.then_some(GraphKind::Recompute));
    for kind in needed {
        if !p.graphs.iter().any(|g| g.bucket.kind == kind) {
            return Err(format!(
                "profile {:?} keeps no {} graph within the memory budget; give a larger --memory-budget",
                p.profile.name,
                kind.as_str()
            ));
        }
    }
    Ok(())
}
