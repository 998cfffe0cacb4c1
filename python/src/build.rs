//! `totoc.export` and `totoc.build_engine`: [`exporter::job::ExportJob`] and [`engines::build_job::BuildJob`], the
//! code `totoc export` and `totoc build-engine` run, with the GIL released for the whole job.
//!
//! Progress goes to a Python callable as `(kind, message, done, total)` (`kind`: `total`, `step`, `note`), the
//! GIL taken for each call only. A job cannot be stopped half-way (its progress hook returns nothing), so an
//! exception the callable raises, or a Ctrl-C seen while it runs, is kept and raised when the job returns; the
//! later progress calls are skipped.

use std::path::PathBuf;

use engines::build_job::{self, BuildJob, BuildOutcome};
use engines::bundle::BuildOptions;
use exporter::job::{ExportJob, ExportOutcome, Report};
use pyo3::prelude::*;

use crate::errors::{self, guard, invalid, to_py, Kind};

/// Forwards a job's progress to the Python callable `callback`, counting the steps.
struct Forward {
    callback: Option<Py<PyAny>>,
    done: usize,
    total: usize,
    /// The first exception the callable raised (or a pending signal's): raised once the job returns.
    failed: Option<PyErr>,
}

impl Forward {
    fn new(callback: Option<Py<PyAny>>) -> Self {
        Forward { callback, done: 0, total: 0, failed: None }
    }

    fn report(&mut self, r: Report) {
        let (kind, message) = match r {
            Report::Total(n) => {
                self.total = n;
                ("total", format!("{n} graphs"))
            }
            Report::Step(line) => {
                self.done += 1;
                ("step", line)
            }
            Report::Note(line) => ("note", line),
        };
        if self.failed.is_some() {
            return;
        }
        let Some(callback) = &self.callback else { return };
        Python::attach(|py| {
            let called =
                py.check_signals().and_then(|()| callback.call1(py, (kind, message, self.done, self.total)));
            if let Err(e) = called {
                self.failed = Some(e);
            }
        });
    }

    /// The summary line to the callable (`kind` `done`), then the job's result.
    fn finish(mut self, py: Python<'_>, summary: String) -> PyResult<()> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        if let Some(callback) = &self.callback {
            callback.call1(py, ("done", summary, self.done, self.total))?;
        }
        Ok(())
    }
}

/// The Python exception of an export error: the caller's config, checkpoint or profile names are bad input, a
/// damaged bundle is the bundle's, the rest (files that cannot be written, ...) is totoc's own error.
fn export_kind(e: &exporter::error::Error) -> Kind {
    use exporter::error::Error as E;
    match e {
        E::InFile { err, .. } => export_kind(err),
        E::Integrity { .. } => Kind::Bundle,
        E::Io { .. } | E::Graph { .. } => Kind::Other,
        _ => Kind::Invalid,
    }
}

#[pyfunction]
#[pyo3(signature = (checkpoint, config, out, *, profiles=Vec::new(), precisions=Vec::new(), opset=24, force=false, golden=None, int8_roles=None, tokenizer=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn export(
    py: Python<'_>,
    checkpoint: PathBuf,
    config: PathBuf,
    out: PathBuf,
    profiles: Vec<String>,
    precisions: Vec<String>,
    opset: i64,
    force: bool,
    golden: Option<PathBuf>,
    int8_roles: Option<String>,
    tokenizer: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<PathBuf> {
    guard(|| {
        // the paths a caller most often gets wrong, named as such (the job would report a file it cannot read)
        if !checkpoint.is_dir() {
            return Err(invalid(format!(
            "checkpoint {}: no such directory; give a Hugging Face checkpoint directory (config.json and \
             model.safetensors)",
            checkpoint.display()
        )));
        }
        if let Some(t) = tokenizer.as_ref().filter(|t| !t.is_dir()) {
            return Err(invalid(format!(
                "tokenizer {}: no such directory; give the model's tokenizer checkpoint directory (config.json \
                 and model.safetensors)",
                t.display()
            )));
        }
        if !config.is_file() {
            return Err(invalid(format!(
            "config {}: no such file; give a profiles YAML such as configs/toto-base.yaml of the totoc repository",
            config.display()
        )));
        }
        let precisions = precisions
            .iter()
            .map(|p| build_job::precision(p))
            .collect::<engines::Result<Vec<_>>>()
            .map_err(to_py)?;
        let int8_roles = int8_roles
            .map(|r| {
                exporter::graph::Int8Plan::parse(&r).map_err(|e| invalid(format!("int8_roles={r:?}: {e}")))
            })
            .transpose()?;
        let job = ExportJob {
            checkpoint,
            tokenizer,
            config,
            out,
            profiles,
            precisions,
            opset,
            force,
            golden,
            int8_roles,
        };
        let mut forward = Forward::new(progress);
        let result: Result<ExportOutcome, exporter::error::Error> =
            py.detach(|| job.run(&mut |r| forward.report(r)));
        let outcome = result.map_err(|e| export_kind(&e).err(format!("{}: {e}", job.context())))?;
        forward.finish(py, outcome.summary(&job.out))?;
        Ok(job.out)
    })
}

#[pyfunction]
#[pyo3(signature = (artifacts, out, *, target="cpu", device=0, cuda_graph=false, precision=None, graphs=None, threads=None, profiles=Vec::new(), memory_budget=None, force=false, ort_lib=None, progress=None))]
#[allow(clippy::too_many_arguments)]
pub fn build_engine(
    py: Python<'_>,
    artifacts: PathBuf,
    out: PathBuf,
    target: &str,
    device: i32,
    cuda_graph: bool,
    precision: Option<String>,
    graphs: Option<String>,
    threads: Option<usize>,
    profiles: Vec<String>,
    memory_budget: Option<&Bound<'_, PyAny>>,
    force: bool,
    ort_lib: Option<PathBuf>,
    progress: Option<Py<PyAny>>,
) -> PyResult<PathBuf> {
    guard(|| {
        if threads == Some(0) {
            return Err(invalid("`threads` is 0; give at least 1 (or None for the physical cores)"));
        }
        let memory_budget = match memory_budget.filter(|m| !m.is_none()) {
            None => None,
            Some(m) => Some(match m.extract::<String>() {
                Ok(text) => engines::memory::parse_size(&text).map_err(to_py)?,
                Err(_) => crate::input::count(m, "memory_budget")?,
            }),
        };
        let options = BuildOptions {
            ort_lib,
            profiles,
            force,
            memory_budget,
            precision: precision.as_deref().map(build_job::precision).transpose().map_err(to_py)?,
            graphs: graphs.as_deref().map(build_job::graph_form).transpose().map_err(to_py)?,
        };
        let target = build_job::target(target, device, cuda_graph, threads).map_err(to_py)?;
        let job = BuildJob { artifacts, out, target, options };
        let mut forward = Forward::new(progress);
        let result: engines::Result<BuildOutcome> = py.detach(|| job.run(&mut |r| forward.report(r)));
        let outcome = result.map_err(|e| errors::Kind::of(&e).err(format!("{}: {e}", job.context())))?;
        forward.finish(py, outcome.summary(&job.out))?;
        Ok(job.out)
    })
}
