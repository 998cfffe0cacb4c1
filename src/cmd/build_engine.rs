//! `totoc build-engine`.
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use engines::backend::Target;
use engines::engine_bundle::{build_engine, BuildEvent, BuildOptions};

use crate::cli::{BuildEngineArgs, TargetArg};
use crate::progress::Progress;

pub fn run(a: BuildEngineArgs) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let target = match a.target {
        TargetArg::Cpu => Target::cpu(a.threads),
        TargetArg::Cuda => Target::cuda(a.device, a.cuda_graph),
        TargetArg::Tensorrt => Target::tensorrt(a.device, false, a.cuda_graph),
    };
    let opts = BuildOptions { ort_lib: a.ort.ort_lib.clone(), profiles: a.profiles.clone(), force: a.force };
    let progress = Progress::new();
    let m = build_engine(&a.artifacts, &target, &a.out, &opts, &mut |ev| match ev {
        BuildEvent::Start { graphs } => progress.set_total(graphs as u64),
        BuildEvent::Graph { file, seconds } => progress.step(&format!("built {file} in {seconds:.2} s")),
        BuildEvent::Weights { unique_bytes, merged_bytes } => progress.note(&format!(
            "weights: {:.1} MB unique in {:.1} MB merged file",
            unique_bytes as f64 / 1e6,
            merged_bytes as f64 / 1e6
        )),
        BuildEvent::Checked { file } => progress.note(&format!("loaded back {file}")),
    })
    .with_context(|| format!("building a {} engine from {}", target.name(), a.artifacts.display()))?;
    progress.finish();
    eprintln!(
        "built {} engine with {} profile(s) in {} ({:.2} s)",
        m.target.name(),
        m.profiles.len(),
        a.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
