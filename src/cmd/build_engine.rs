//! `totoc build-engine`: [`engines::build_job::BuildJob`] (shared with the Python package's `totoc.build_engine`)
//! with a progress bar.
use std::process::ExitCode;

use anyhow::Context;
use engines::backend::Target;
use engines::build_job::BuildJob;
use engines::bundle::{BuildOptions, GraphForm};
use engines::memory::parse_size;

use crate::cli::{BuildEngineArgs, GraphsArg, PrecisionArg, TargetArg};
use crate::progress::Progress;

pub fn run(a: BuildEngineArgs) -> anyhow::Result<ExitCode> {
    let target = match a.target {
        TargetArg::Cpu => Target::cpu(a.threads),
        TargetArg::Cuda => Target::cuda(a.device, a.cuda_graph),
        TargetArg::Tensorrt => Target::tensorrt(a.device, a.cuda_graph),
    };
    let precision = if a.fp16 { Some(PrecisionArg::Fp16) } else { a.precision };
    let memory_budget = a.memory_budget.as_deref().map(parse_size).transpose()?;
    let job = BuildJob {
        artifacts: a.artifacts,
        out: a.out,
        target,
        options: BuildOptions {
            ort_lib: a.ort.ort_lib,
            profiles: a.profiles,
            force: a.force,
            memory_budget,
            precision: precision.map(Into::into),
            graphs: a.graphs.map(|g| match g {
                GraphsArg::PerBucket => GraphForm::PerBucket,
                GraphsArg::Shared => GraphForm::Shared,
            }),
        },
    };
    let progress = Progress::new();
    let outcome = job.run(&mut |r| super::export::report(&progress, r)).with_context(|| job.context())?;
    progress.finish();
    eprintln!("{}", outcome.summary(&job.out));
    Ok(ExitCode::SUCCESS)
}
