//! `totoc export`.
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use exporter::export::{ExportEvent, ExportOptions};
use exporter::graph::Fp16Plan;
use exporter::profile_file::ProfileSet;
use exporter::registry::export_bundle;
use exporter::variant::OpsetVariant;

use crate::cli::ExportArgs;
use crate::progress::Progress;

pub fn run(a: ExportArgs) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let set = ProfileSet::from_file(&a.config)?;
    if let Some(model) = &set.model {
        model.check_checkpoint(&a.checkpoint, &a.config.display().to_string())?;
    }
    let profiles = set.select(&a.profiles)?;
    let opts = ExportOptions {
        checkpoint: a.checkpoint.clone(),
        profiles,
        out: a.out.clone(),
        precisions: a.precisions.iter().map(|&p| p.into()).collect(),
        variant: OpsetVariant::from_opset(a.opset).expect("clap allows 24 and 18"),
        fp16_plan: Fp16Plan::DEFAULT,
        force: a.force,
        golden: a.golden.clone(),
    };
    let progress = Progress::new();
    let mut up_to_date = false;
    let manifest = export_bundle(&opts, &mut |ev| match ev {
        ExportEvent::UpToDate => up_to_date = true,
        ExportEvent::Rebuilding { changed } => progress.note(&format!(
            "re-exporting {}: its inputs changed: {}",
            a.out.display(),
            changed.join("; ")
        )),
        ExportEvent::Start { graphs } => progress.set_total(graphs as u64),
        ExportEvent::Graph { file, nodes, index, total } => {
            progress.step(&format!("[{index}/{total}] wrote {file} ({nodes} nodes)"))
        }
    })
    .with_context(|| format!("exporting {} to {}", a.checkpoint.display(), a.out.display()))?;
    progress.finish();
    if up_to_date {
        eprintln!(
            "{} is up to date (exported from the same checkpoint, profiles and options; every file intact): \
             skipped the export (--force re-exports)",
            a.out.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let bytes: u64 = manifest.files.iter().map(|f| f.bytes).sum();
    let graphs = manifest.family.graph_count();
    eprintln!(
        "exported {} {} profile(s), {graphs} bucket graphs, to {} ({:.1} MB) in {:.2} s",
        manifest.profile_names().len(),
        manifest.family().as_str(),
        a.out.display(),
        bytes as f64 / 1e6,
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
