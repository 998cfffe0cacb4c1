//! `manifest.json` of an exported bundle: what was exported from what, and the sha256 of every file.
//!
//! The engines crate reads it to find each profile's graphs and their I/O, and refuses a bundle whose files do not
//! match their recorded hashes.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::fsutil::sha256_file;

use crate::registry::family::{AnyConfig, Family, FamilyGraphs};
use crate::signature::Precision;
use crate::variant::OpsetVariant;

/// Format tag of export bundles.
pub const BUNDLE_FORMAT: &str = "totoc-export/4";
/// Version number of [`BUNDLE_FORMAT`] (`format_version` in the manifest).
pub const BUNDLE_FORMAT_VERSION: u32 = 4;
pub use crate::bundle_files::MANIFEST_FILE;

/// The message for a bundle of another format: which totoc made it and what to run.
pub fn format_mismatch(kind: &str, found: &str, want: &str, rebuild: &str) -> String {
    let made_by = match found.rsplit_once('/') {
        Some((_, "1")) => " (written by totoc 0.1, before shape buckets)".to_string(),
        Some((_, "2")) => " (written before precisions and opset variants)".to_string(),
        Some((_, "3")) => " (written before manifests named the model generation)".to_string(),
        _ => String::new(),
    };
    format!(
        "{kind} format {found:?}{made_by}; this totoc {} reads {want:?}: rebuild it with `{rebuild}`",
        env!("CARGO_PKG_VERSION")
    )
}

/// What a build's output depends on: name → hash or value (`checkpoint.safetensors` → sha256, `totoc` → version).
/// Written in both bundles' manifests; [`crate::build_cache`] compares it with the next build's.
pub type BuildInputs = std::collections::BTreeMap<String, String>;

/// Where the weights came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointInfo {
    /// sha256 of `model.safetensors`.
    pub safetensors_sha256: String,
    /// sha256 of `config.json`.
    pub config_sha256: String,
    /// The tokenizer checkpoint's files, for a family whose export reads one (`--tokenizer`,
    /// `crate::registry::Capabilities::tokenizer_keys`); absent otherwise, so other manifests are as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<CheckpointFiles>,
}

/// The hashes of one checkpoint directory's two files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointFiles {
    /// sha256 of `model.safetensors`.
    pub safetensors_sha256: String,
    /// sha256 of `config.json`.
    pub config_sha256: String,
}

/// The weight file of one precision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WeightsEntry {
    pub precision: Precision,
    /// Path relative to the bundle root (`weights.fp16.bin`).
    pub file: String,
}

/// A file of the bundle with its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}

/// The whole manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub format_version: u32,
    pub totoc_version: String,
    pub checkpoint: CheckpointInfo,
    /// The model generation and its config: `{"generation": "toto-1.0" | "toto-2.0", "config": {...}}`.
    pub model: AnyConfig,
    /// Which runtimes the graphs are written for (`opset24`, `opset18`; see [`crate::variant`]).
    pub variant: OpsetVariant,
    /// ONNX opset of the default domain.
    pub opset: i64,
    /// How the KV cache slot is written: `tensor_scatter` (opset 24) or `scatter_nd`.
    pub cache_update: String,
    /// The precisions the bundle holds graphs of.
    pub precisions: Vec<Precision>,
    /// The fp32 regions of its fp16 graphs (`rms_norm`, `softmax`, ...; empty without fp16).
    pub fp32_regions: Vec<String>,
    /// One weight file per precision.
    pub weights: Vec<WeightsEntry>,
    /// Each family's graphs: `profiles` and `dynamic_graphs` (Toto 1.0), `toto2_profiles` (Toto 2.0); written
    /// in place, as top-level fields ([`crate::registry::FamilyGraphs`]).
    #[serde(flatten)]
    pub family: FamilyGraphs,
    pub files: Vec<FileEntry>,
    /// What the export was made from (checkpoint and profile hashes, totoc version, options): `totoc export`
    /// skips the work when they are unchanged ([`crate::build_cache`]). Absent in older manifests.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub inputs: BuildInputs,
}

impl Manifest {
    /// A manifest of this totoc's bundle format for `model` from `checkpoint`, its graphs written at opset
    /// `variant`; the precisions, weights, graphs and files are the exporter's to fill in.
    pub fn new(checkpoint: CheckpointInfo, model: AnyConfig, variant: OpsetVariant) -> Manifest {
        Manifest {
            format: BUNDLE_FORMAT.into(),
            format_version: BUNDLE_FORMAT_VERSION,
            totoc_version: env!("CARGO_PKG_VERSION").into(),
            checkpoint,
            model,
            variant,
            opset: variant.opset(),
            cache_update: variant.cache_update().as_str().into(),
            precisions: Vec::new(),
            fp32_regions: Vec::new(),
            weights: Vec::new(),
            family: FamilyGraphs::default(),
            files: Vec::new(),
            inputs: Default::default(),
        }
    }

    /// Reads `dir/manifest.json`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        // The format tag first: an older bundle's manifest has other fields, and what its user needs to hear is
        // which totoc made it and what to run, not a missing-field error.
        let tag: FormatTag = serde_json::from_str(&text).map_err(|e| {
            Error::Config { message: format!("not a totoc export manifest ({e})") }.in_file(&path)
        })?;
        if tag.format != BUNDLE_FORMAT {
            let message = format_mismatch("export bundle", &tag.format, BUNDLE_FORMAT, "totoc export");
            return Err(Error::Config { message }.in_file(&path));
        }
        serde_json::from_str(&text).map_err(|e| {
            Error::Config { message: format!("not a totoc export manifest ({e})") }.in_file(&path)
        })
    }

    pub fn family(&self) -> Family {
        self.model.family()
    }

    /// Names of the bundle's profiles.
    pub fn profile_names(&self) -> Vec<&str> {
        self.family.profile_names()
    }

    /// The weight file of `precision`, if the bundle holds that precision.
    pub fn weights_file(&self, precision: Precision) -> Option<&str> {
        self.weights.iter().find(|w| w.precision == precision).map(|w| w.file.as_str())
    }
}

/// Just the `format` field of a manifest.
#[derive(Deserialize)]
pub struct FormatTag {
    pub format: String,
}

/// Hashes `paths` (relative to `dir`) into manifest entries.
pub fn file_entries(dir: &Path, paths: &[String]) -> Result<Vec<FileEntry>> {
    paths
        .iter()
        .map(|p| {
            let full = dir.join(p);
            let bytes = std::fs::metadata(&full).map_err(|e| Error::io(&full, e))?.len();
            Ok(FileEntry { path: p.clone(), sha256: sha256_file(&full)?, bytes })
        })
        .collect()
}
