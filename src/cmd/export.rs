//! `totoc export`: [`exporter::job::ExportJob`] (shared with the Python package's `totoc.export`) with a progress
//! bar.
use std::process::ExitCode;

use anyhow::Context;
use exporter::job::{ExportJob, Report};

use crate::cli::ExportArgs;
use crate::progress::Progress;

pub fn run(a: ExportArgs) -> anyhow::Result<ExitCode> {
    let job = ExportJob {
        checkpoint: a.checkpoint,
        tokenizer: a.tokenizer,
        config: a.config,
        out: a.out,
        profiles: a.profiles,
        precisions: a.precisions.iter().map(|&p| p.into()).collect(),
        opset: a.opset,
        force: a.force,
        golden: a.golden,
        int8_roles: a.int8_roles,
    };
    let progress = Progress::new();
    let outcome = job.run(&mut |r| report(&progress, r)).with_context(|| job.context())?;
    progress.finish();
    eprintln!("{}", outcome.summary(&job.out));
    Ok(ExitCode::SUCCESS)
}

/// One line of a job's progress on the bar (or stderr).
pub fn report(progress: &Progress, r: Report) {
    match r {
        Report::Total(n) => progress.set_total(n as u64),
        Report::Step(line) => progress.step(&line),
        Report::Note(line) => progress.note(&line),
    }
}
