//! The files every bundle has (`manifest.json` and its hash file) and what can be wrong with a bundle's files
//! ([`Problem`], each naming its file): the vocabulary of [`crate::integrity`]'s check and of
//! [`crate::error::Error::Integrity`]. A leaf module, so the error type can carry problems without depending on
//! the check that finds them, nor on the manifest.

use std::fmt;

/// Every bundle's manifest, at its root.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The hash file of `manifest.json`, beside it.
pub const MANIFEST_HASH_FILE: &str = "manifest.sha256";

/// One thing wrong with a bundle, naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// `manifest.json` is not the file its hash file was written for.
    ManifestEdited,
    /// No `manifest.sha256` (or an unreadable one).
    ManifestHashMissing { detail: String },
    /// `manifest.json` is missing or its `files` list cannot be read.
    ManifestUnreadable { detail: String },
    /// A listed file does not exist.
    Missing { file: String },
    /// A listed file is shorter than the manifest says.
    Truncated { file: String, bytes: u64, expected: u64 },
    /// A listed file is longer than the manifest says.
    Grown { file: String, bytes: u64, expected: u64 },
    /// A listed file has the right size but another sha256.
    Modified { file: String },
    /// A file in the bundle that the manifest does not list.
    Unlisted { file: String },
}

impl Problem {
    /// The bundle-relative file the problem is about.
    pub fn file(&self) -> &str {
        match self {
            Problem::ManifestEdited | Problem::ManifestUnreadable { .. } => MANIFEST_FILE,
            Problem::ManifestHashMissing { .. } => MANIFEST_HASH_FILE,
            Problem::Missing { file }
            | Problem::Truncated { file, .. }
            | Problem::Grown { file, .. }
            | Problem::Modified { file }
            | Problem::Unlisted { file } => file,
        }
    }

    /// A short machine-readable name (`modified`, `missing`, ...; `totoc bundle verify --json`).
    pub fn kind(&self) -> &'static str {
        match self {
            Problem::ManifestEdited => "manifest-edited",
            Problem::ManifestHashMissing { .. } => "manifest-hash-missing",
            Problem::ManifestUnreadable { .. } => "manifest-unreadable",
            Problem::Missing { .. } => "missing",
            Problem::Truncated { .. } => "truncated",
            Problem::Grown { .. } => "grown",
            Problem::Modified { .. } => "modified",
            Problem::Unlisted { .. } => "unlisted",
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::ManifestEdited => write!(
                f,
                "{MANIFEST_FILE}: edited after it was written (its sha256 is not the one in {MANIFEST_HASH_FILE})"
            ),
            Problem::ManifestHashMissing { detail } => write!(f, "{MANIFEST_HASH_FILE}: {detail}"),
            Problem::ManifestUnreadable { detail } => write!(f, "{MANIFEST_FILE}: {detail}"),
            Problem::Missing { file } => write!(f, "{file}: missing"),
            Problem::Truncated { file, bytes, expected } => {
                write!(f, "{file}: truncated ({bytes} of {expected} bytes)")
            }
            Problem::Grown { file, bytes, expected } => {
                write!(f, "{file}: {bytes} bytes, the manifest says {expected}")
            }
            Problem::Modified { file } => write!(f, "{file}: modified (sha256 differs from the manifest)"),
            Problem::Unlisted { file } => write!(f, "{file}: not listed in the manifest"),
        }
    }
}
