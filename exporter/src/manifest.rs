//! `manifest.json` of an exported bundle: what was exported from what, and the sha256 of every file.
//!
//! The engines crate reads it to find each profile's graphs and their I/O, and refuses a bundle whose files do not
//! match their recorded hashes.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::ModelConfig;
use crate::error::{Error, Result};
use crate::fsutil::sha256_file;
use crate::profile::Profile;
use crate::signature::{DType, Dims, GraphKind, TensorSig};

/// Format tag of export bundles.
pub const BUNDLE_FORMAT: &str = "totoc-export/1";
pub const MANIFEST_FILE: &str = "manifest.json";

/// Where the weights came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointInfo {
    /// sha256 of `model.safetensors`.
    pub safetensors_sha256: String,
    /// sha256 of `config.json`.
    pub config_sha256: String,
}

/// One graph file of a profile and its I/O signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphEntry {
    pub kind: GraphKind,
    /// Path relative to the bundle root.
    pub file: String,
    pub inputs: Vec<TensorSig>,
    pub outputs: Vec<TensorSig>,
}

/// One exported profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileEntry {
    pub profile: Profile,
    pub dims: Dims,
    pub graphs: Vec<GraphEntry>,
}

impl ProfileEntry {
    pub fn graph(&self, kind: GraphKind) -> Option<&GraphEntry> {
        self.graphs.iter().find(|g| g.kind == kind)
    }
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
    pub totoc_version: String,
    pub checkpoint: CheckpointInfo,
    pub model: ModelConfig,
    /// Float type of graph inputs, caches and weights.
    pub precision: DType,
    /// ONNX opset of the default domain.
    pub opset: i64,
    /// How the KV cache slot is written: `tensor_scatter` (opset 24) or `scatter_nd`.
    pub cache_update: String,
    pub profiles: Vec<ProfileEntry>,
    pub files: Vec<FileEntry>,
}

impl Manifest {
    /// Reads `dir/manifest.json`.
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let m: Manifest = serde_json::from_str(&text).map_err(|e| {
            Error::Config { message: format!("not a totoc export manifest ({e})") }.in_file(&path)
        })?;
        if m.format != BUNDLE_FORMAT {
            return Err(Error::Config {
                message: format!("bundle format {:?}, this totoc reads {BUNDLE_FORMAT:?}", m.format),
            }
            .in_file(&path));
        }
        Ok(m)
    }

    /// Checks every listed file's size and sha256.
    pub fn verify_files(&self, dir: &Path) -> Result<()> {
        verify_files(dir, &self.files)
    }

    pub fn profile(&self, name: &str) -> Option<&ProfileEntry> {
        self.profiles.iter().find(|p| p.profile.name == name)
    }
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

/// Checks each entry's size and sha256 under `dir`; the error names the first file that differs.
pub fn verify_files(dir: &Path, files: &[FileEntry]) -> Result<()> {
    for f in files {
        let full = dir.join(&f.path);
        let bytes = std::fs::metadata(&full).map_err(|e| Error::io(&full, e))?.len();
        let ok = bytes == f.bytes && sha256_file(&full)? == f.sha256;
        if !ok {
            return Err(Error::Config {
                message: format!(
                    "file {} does not match its manifest sha256 (modified or truncated); re-create the bundle",
                    f.path
                ),
            }
            .in_file(&full));
        }
    }
    Ok(())
}
