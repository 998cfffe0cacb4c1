//! `totoc build-engine`.
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use engines::backend::Target;
use engines::bundle::{BuildEvent, BuildOptions, GraphForm};
use engines::memory::{human, parse_size};
use engines::registry::build_engine;

use crate::cli::{BuildEngineArgs, GraphsArg, PrecisionArg, TargetArg};
use crate::progress::Progress;

pub fn run(a: BuildEngineArgs) -> anyhow::Result<ExitCode> {
    let start = Instant::now();
    let target = match a.target {
        TargetArg::Cpu => Target::cpu(a.threads),
        TargetArg::Cuda => Target::cuda(a.device, a.cuda_graph),
        TargetArg::Tensorrt => Target::tensorrt(a.device, a.cuda_graph),
    };
    let precision = if a.fp16 { Some(PrecisionArg::Fp16) } else { a.precision };
    let memory_budget = a.memory_budget.as_deref().map(parse_size).transpose()?;
    let opts = BuildOptions {
        ort_lib: a.ort.ort_lib.clone(),
        profiles: a.profiles.clone(),
        force: a.force,
        memory_budget,
        precision: precision.map(Into::into),
        graphs: a.graphs.map(|g| match g {
            GraphsArg::PerBucket => GraphForm::PerBucket,
            GraphsArg::Shared => GraphForm::Shared,
        }),
    };
    let progress = Progress::new();
    let mut up_to_date = false;
    let m = build_engine(&a.artifacts, &target, &a.out, &opts, &mut |ev| match ev {
        BuildEvent::UpToDate => up_to_date = true,
        BuildEvent::Rebuilding { changed } => progress.note(&format!(
            "rebuilding {}: its inputs changed: {}",
            a.out.display(),
            changed.join("; ")
        )),
        BuildEvent::Start { graphs, precision, emulation } => {
            if emulation {
                progress.note(&format!(
                    "note: building the {precision} emulation engine: the CPU runs the fp16 graphs with every op's \
                     result rounded to fp16 — it checks fp16 accuracy (`totoc verify`), it is not faster than fp32"
                ));
            }
            progress.set_total(graphs as u64)
        }
        BuildEvent::Graph { file, seconds, index, total } => {
            progress.step(&format!("[{index}/{total}] built and checked {file} in {seconds:.2} s"))
        }
        BuildEvent::Dropped { file, memory_bytes, budget } => progress.note(&format!(
            "note: left out {file}: its buffers ({}) and the weights exceed the memory budget ({})",
            human(memory_bytes),
            human(budget)
        )),
    })
    .with_context(|| format!("building a {} engine from {}", target.name(), a.artifacts.display()))?;
    progress.finish();
    if up_to_date {
        eprintln!(
            "{} is up to date (built from the same export bundle, totoc, ONNX Runtime, target and options; every \
             file intact): skipped the build (--force rebuilds)",
            a.out.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let graphs = m.family.graph_count();
    eprintln!(
        "built {} {} {}engine with {} profile(s), {graphs} bucket graphs, in {} ({:.2} s)",
        m.model.family().as_str(),
        m.target.name(),
        match (m.precision, m.fp16_emulation) {
            (exporter::signature::Precision::Fp32, _) => String::new(),
            (_, true) => "fp16-emulation ".to_string(),
            (p, false) => format!("{p} "),
        },
        m.family.profiles().len(),
        a.out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
