//! `totoc export` as one call: the options as the command line (and the Python package's `totoc.export`) give
//! them, the checks the command makes before exporting, the export, and the lines it reports. The `totoc` binary
//! and the Python package both run this, so the two say and do the same.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, Result};
use crate::export::{ExportEvent, ExportOptions};
use crate::graph::{Fp16Plan, Int8Plan};
use crate::manifest::Manifest;
use crate::profile_file::ProfileSet;
use crate::signature::Precision;
use crate::variant::OpsetVariant;

/// Progress of a long job as lines: for a progress bar (the CLI) or a callback / log (Python).
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// `n` units of work (graphs) to do.
    Total(usize),
    /// One unit done, described.
    Step(String),
    /// A message that is no unit of work (a rebuild's reason, a note).
    Note(String),
}

/// The inputs of `totoc export` (its flags, by the same names).
#[derive(Debug, Clone)]
pub struct ExportJob {
    /// `--checkpoint`: the checkpoint directory (config.json and model.safetensors).
    pub checkpoint: PathBuf,
    /// `--tokenizer`: the model's tokenizer checkpoint directory, for a family whose export reads one
    /// (`crate::registry::Capabilities::tokenizer_keys`).
    pub tokenizer: Option<PathBuf>,
    /// `--config`: the profiles YAML.
    pub config: PathBuf,
    /// `--out`: the bundle directory.
    pub out: PathBuf,
    /// `--profile` (empty: every profile of the config).
    pub profiles: Vec<String>,
    /// `--precision` (empty: fp32).
    pub precisions: Vec<Precision>,
    /// `--opset`: 24 or 18.
    pub opset: i64,
    /// `--force`.
    pub force: bool,
    /// `--golden`.
    pub golden: Option<PathBuf>,
    /// `--int8-roles`: the matmul roles int8 graphs run in int8 (`None`: the model family's default, chosen by
    /// its ablation on a trained model).
    pub int8_roles: Option<Int8Plan>,
}

/// What [`ExportJob::run`] did.
#[derive(Debug)]
pub enum ExportOutcome {
    /// The bundle at `out` was exported from the same inputs and is intact: nothing was written.
    UpToDate,
    /// A bundle was written, in `seconds`.
    Exported { manifest: Box<Manifest>, seconds: f64 },
}

impl ExportJob {
    /// A job with the command's defaults (all profiles, fp32, opset 24).
    pub fn new(checkpoint: PathBuf, config: PathBuf, out: PathBuf) -> Self {
        ExportJob {
            checkpoint,
            tokenizer: None,
            config,
            out,
            profiles: Vec::new(),
            precisions: Vec::new(),
            opset: 24,
            force: false,
            golden: None,
            int8_roles: None,
        }
    }

    /// What a failure is reported under: `exporting CHECKPOINT to OUT`.
    pub fn context(&self) -> String {
        format!("exporting {} to {}", self.checkpoint.display(), self.out.display())
    }

    /// The export's options: the config read and checked against the checkpoint, the profiles selected.
    pub fn options(&self) -> Result<ExportOptions> {
        let variant = OpsetVariant::from_opset(self.opset).ok_or_else(|| Error::Config {
            message: format!("opset {} is not supported: 24 (TensorScatter) or 18 (ScatterND)", self.opset),
        })?;
        let set = ProfileSet::from_file(&self.config)?;
        if let Some(model) = &set.model {
            let config = self.config.display().to_string();
            model.check_checkpoint(&self.checkpoint, &config)?;
            model.check_tokenizer(self.tokenizer.as_deref(), &config)?;
        }
        let mut precisions = self.precisions.clone();
        if precisions.is_empty() {
            precisions.push(Precision::Fp32);
        }
        Ok(ExportOptions {
            checkpoint: self.checkpoint.clone(),
            tokenizer: self.tokenizer.clone(),
            profiles: set.select(&self.profiles)?,
            out: self.out.clone(),
            precisions,
            variant,
            fp16_plan: Fp16Plan::DEFAULT,
            int8_plan: self.int8_roles,
            force: self.force,
            golden: self.golden.clone(),
        })
    }

    /// Exports, reporting each graph written (and a rebuild's reason) to `report`.
    pub fn run(&self, report: &mut dyn FnMut(Report)) -> Result<ExportOutcome> {
        let start = Instant::now();
        let opts = self.options()?;
        let mut up_to_date = false;
        let manifest = crate::registry::export_bundle(&opts, &mut |ev| match ev {
            ExportEvent::UpToDate => up_to_date = true,
            ExportEvent::Rebuilding { changed } => report(Report::Note(format!(
                "re-exporting {}: its inputs changed: {}",
                self.out.display(),
                changed.join("; ")
            ))),
            ExportEvent::Start { graphs } => report(Report::Total(graphs)),
            ExportEvent::Graph { file, nodes, index, total } => {
                report(Report::Step(format!("[{index}/{total}] wrote {file} ({nodes} nodes)")))
            }
        })?;
        Ok(if up_to_date {
            ExportOutcome::UpToDate
        } else {
            ExportOutcome::Exported { manifest: Box::new(manifest), seconds: start.elapsed().as_secs_f64() }
        })
    }
}

impl ExportOutcome {
    /// The line the command ends with.
    pub fn summary(&self, out: &Path) -> String {
        match self {
            ExportOutcome::UpToDate => format!(
                "{} is up to date (exported from the same checkpoint, profiles and options; every file intact): \
                 skipped the export (--force re-exports)",
                out.display()
            ),
            ExportOutcome::Exported { manifest, seconds } => {
                let bytes: u64 = manifest.files.iter().map(|f| f.bytes).sum();
                format!(
                    "exported {} {} profile(s), {} bucket graphs, to {} ({:.1} MB) in {seconds:.2} s",
                    manifest.profile_names().len(),
                    manifest.family().as_str(),
                    manifest.family.graph_count(),
                    out.display(),
                    bytes as f64 / 1e6,
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unsupported_opset_is_refused_before_anything_is_read() {
        let mut job = ExportJob::new("/no/checkpoint".into(), "/no/config.yaml".into(), "/no/out".into());
        job.opset = 17;
        let err = job.options().unwrap_err().to_string();
        assert!(err.contains("opset 17 is not supported"), "{err}");
    }

    #[test]
    fn a_missing_config_names_its_path() {
        let job = ExportJob::new("/no/checkpoint".into(), "/no/config.yaml".into(), "/no/out".into());
        let err = job.options().unwrap_err().to_string();
        assert!(err.contains("/no/config.yaml"), "{err}");
    }
}
