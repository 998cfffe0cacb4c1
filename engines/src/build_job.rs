//! `totoc build-engine` as one call: the target and options as the command line (and the Python package's
//! `totoc.build_engine`) give them, the build, and the lines the command reports. The `totoc` binary and the Python
//! package both run this, so the two say and do the same.

use std::path::{Path, PathBuf};
use std::time::Instant;

use exporter::job::Report;
use exporter::signature::Precision;

use crate::backend::Target;
use crate::bundle::{BuildEvent, BuildOptions, EngineManifest, GraphForm};
use crate::memory::human;
use crate::{Error, Result};

/// The inputs of `totoc build-engine`.
#[derive(Debug, Clone)]
pub struct BuildJob {
    /// `--artifacts`: the export bundle.
    pub artifacts: PathBuf,
    /// `--out`: the engine directory.
    pub out: PathBuf,
    /// `--target` with `--device`, `--cuda-graph` and `--threads`.
    pub target: Target,
    /// `--profile`, `--force`, `--memory-budget`, `--precision`, `--graphs`, `--ort-lib`.
    pub options: BuildOptions,
}

/// What [`BuildJob::run`] did.
#[derive(Debug)]
pub enum BuildOutcome {
    /// The engine at `out` was built from the same inputs and is intact: nothing was written.
    UpToDate,
    /// An engine was built, in `seconds`.
    Built { manifest: Box<EngineManifest>, seconds: f64 },
}

/// The target named `name` (`cpu`, `cuda`, `tensorrt`, as `--target` takes it).
pub fn target(name: &str, device: i32, cuda_graph: bool, threads: Option<usize>) -> Result<Target> {
    match name {
        "cpu" => Ok(Target::cpu(threads)),
        "cuda" => Ok(Target::cuda(device, cuda_graph)),
        "tensorrt" => Ok(Target::tensorrt(device, cuda_graph)),
        other => {
            Err(Error::Config { message: format!("unknown target {other:?}: give cpu, cuda or tensorrt") })
        }
    }
}

/// The graph form named `name` (`per-bucket`, `shared`, as `--graphs` takes it).
pub fn graph_form(name: &str) -> Result<GraphForm> {
    match name {
        "per-bucket" => Ok(GraphForm::PerBucket),
        "shared" => Ok(GraphForm::Shared),
        other => {
            Err(Error::Config { message: format!("unknown graph form {other:?}: give per-bucket or shared") })
        }
    }
}

/// The precision named `name` (`fp32`, `fp16`, `int8`).
pub fn precision(name: &str) -> Result<Precision> {
    name.parse().map_err(|message| Error::Config { message })
}

impl BuildJob {
    /// What a failure is reported under: `building a TARGET engine from ARTIFACTS`.
    pub fn context(&self) -> String {
        format!("building a {} engine from {}", self.target.name(), self.artifacts.display())
    }

    /// Builds, reporting each graph built, buckets left out and a rebuild's reason to `report`.
    pub fn run(&self, report: &mut dyn FnMut(Report)) -> Result<BuildOutcome> {
        let start = Instant::now();
        let mut up_to_date = false;
        let out = &self.out;
        let m = crate::registry::build_engine(
            &self.artifacts,
            &self.target,
            out,
            &self.options,
            &mut |ev| match ev {
                BuildEvent::UpToDate => up_to_date = true,
                BuildEvent::Rebuilding { changed } => report(Report::Note(format!(
                    "rebuilding {}: its inputs changed: {}",
                    out.display(),
                    changed.join("; ")
                ))),
                BuildEvent::Start { graphs, precision, emulation } => {
                    if emulation {
                        report(Report::Note(format!(
                        "note: building the {precision} emulation engine: the CPU runs the fp16 graphs with every \
                         op's result rounded to fp16 — it checks fp16 accuracy (`totoc verify`), it is not faster \
                         than fp32"
                    )));
                    }
                    report(Report::Total(graphs))
                }
                BuildEvent::Graph { file, seconds, index, total } => report(Report::Step(format!(
                    "[{index}/{total}] built and checked {file} in {seconds:.2} s"
                ))),
                BuildEvent::Dropped { file, memory_bytes, budget } => report(Report::Note(format!(
                    "note: left out {file}: its buffers ({}) and the weights exceed the memory budget ({})",
                    human(memory_bytes),
                    human(budget)
                ))),
            },
        )?;
        Ok(if up_to_date {
            BuildOutcome::UpToDate
        } else {
            BuildOutcome::Built { manifest: Box::new(m), seconds: start.elapsed().as_secs_f64() }
        })
    }
}

impl BuildOutcome {
    /// The line the command ends with.
    pub fn summary(&self, out: &Path) -> String {
        match self {
            BuildOutcome::UpToDate => format!(
                "{} is up to date (built from the same export bundle, totoc, ONNX Runtime, target and options; \
                 every file intact): skipped the build (--force rebuilds)",
                out.display()
            ),
            BuildOutcome::Built { manifest: m, seconds } => format!(
                "built {} {} {}engine with {} profile(s), {} bucket graphs, in {} ({seconds:.2} s)",
                m.model.family().as_str(),
                m.target.name(),
                match (m.precision, m.fp16_emulation) {
                    (Precision::Fp32, _) => String::new(),
                    (_, true) => "fp16-emulation ".to_string(),
                    (p, false) => format!("{p} "),
                },
                m.family.profiles().len(),
                m.family.graph_count(),
                out.display(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_the_command_line_takes_them() {
        assert_eq!(target("cpu", 0, false, Some(2)).unwrap(), Target::cpu(Some(2)));
        assert_eq!(target("cuda", 1, true, None).unwrap(), Target::cuda(1, true));
        assert_eq!(target("tensorrt", 0, false, None).unwrap(), Target::tensorrt(0, false));
        assert!(target("gpu", 0, false, None).unwrap_err().to_string().contains("cpu, cuda or tensorrt"));
        assert_eq!(graph_form("shared").unwrap(), GraphForm::Shared);
        assert!(graph_form("one").unwrap_err().to_string().contains("per-bucket or shared"));
        assert_eq!(precision("fp16").unwrap(), Precision::Fp16);
        assert!(precision("bf16").unwrap_err().to_string().contains("fp32, fp16 or int8"));
    }
}
