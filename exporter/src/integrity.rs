//! Bundle integrity: the one check every reader of a bundle runs, export bundles and engine bundles alike.
//!
//! A bundle directory holds `manifest.json` (whose `files` list gives every other file's path, size and sha256)
//! and `manifest.sha256`, the sha256 of `manifest.json`'s exact bytes in `sha256sum` format
//! (`<hex>  manifest.json`). [`check_bundle`] finds every problem at once: a manifest edited after it was written
//! (or its hash file missing), files missing, truncated, grown or modified, and files the manifest does not list.
//! [`require_intact`] turns any problem into one [`Error::Integrity`], so `totoc bundle verify`, engine loading
//! (`forecast`, `serve`, `verify`) and export-bundle loading (`build-engine`) refuse with the same message.
//! [`write_manifest`] is the only way bundles write their manifest, so the hash file always travels with it.
//!
//! The hash file guards against a manifest edited by hand or by a tool that does not know about it (a hand
//! edit cannot silently pass); protection against a deliberate forger is the CI's `SHA256SUMS` and the
//! artifact store, not this file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::bundle_files::MANIFEST_FILE;
pub use crate::bundle_files::{Problem, MANIFEST_HASH_FILE};
use crate::error::{Error, Result};
use crate::fsutil::{sha256_bytes, sha256_file, write_atomic};
use crate::manifest::FileEntry;

/// Every problem of the bundle at `dir`, in a stable order (manifest first, then files by name). Empty: intact.
/// Only I/O failures other than a missing file are errors.
pub fn check_bundle(dir: &Path) -> Result<Vec<Problem>> {
    let mut problems = Vec::new();
    let manifest_path = dir.join(MANIFEST_FILE);
    let text = match std::fs::read(&manifest_path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            problems.push(Problem::ManifestUnreadable {
                detail: "missing (not a totoc bundle, or an incomplete copy)".into(),
            });
            return Ok(problems);
        }
        Err(e) => return Err(Error::io(&manifest_path, e)),
    };
    match read_hash_file(dir)? {
        Ok(want) if want == sha256_bytes(&text) => {}
        Ok(_) => problems.push(Problem::ManifestEdited),
        Err(detail) => problems.push(Problem::ManifestHashMissing { detail }),
    }
    let files = match serde_json::from_slice::<FilesOnly>(&text) {
        Ok(f) => f.files,
        Err(e) => {
            problems.push(Problem::ManifestUnreadable { detail: format!("no readable `files` list ({e})") });
            return Ok(problems);
        }
    };
    let mut per_file = Vec::new();
    for f in &files {
        if let Some(p) = check_file(dir, f)? {
            per_file.push(p);
        }
    }
    let listed: BTreeSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    for rel in files_under(dir)? {
        if rel != MANIFEST_FILE && rel != MANIFEST_HASH_FILE && !listed.contains(rel.as_str()) {
            per_file.push(Problem::Unlisted { file: rel });
        }
    }
    per_file.sort_by(|a, b| a.file().cmp(b.file()));
    problems.extend(per_file);
    Ok(problems)
}

/// [`check_bundle`], any problem an [`Error::Integrity`] listing all of them; `rebuild` is the command that
/// re-creates this kind of bundle (`totoc export`, `totoc build-engine`).
pub fn require_intact(dir: &Path, rebuild: &str) -> Result<()> {
    let problems = check_bundle(dir)?;
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::Integrity { dir: dir.to_path_buf(), problems, rebuild: rebuild.to_string() })
}

/// Writes `manifest.json` (atomically) and then its `manifest.sha256` into `dir`.
pub fn write_manifest(dir: &Path, json: &[u8]) -> Result<()> {
    write_atomic(&dir.join(MANIFEST_FILE), json)?;
    let line = format!("{}  {MANIFEST_FILE}\n", sha256_bytes(json));
    write_atomic(&dir.join(MANIFEST_HASH_FILE), line.as_bytes())
}

/// The sha256 in `manifest.sha256`, or why there is none.
fn read_hash_file(dir: &Path) -> Result<std::result::Result<String, String>> {
    let path = dir.join(MANIFEST_HASH_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Err(
                "missing (bundles from totoc before bundle integrity have none; re-create the bundle)".into(),
            ))
        }
        Err(e) => return Err(Error::io(&path, e)),
    };
    let mut parts = text.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some(hash), Some(MANIFEST_FILE))
            if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            Ok(Ok(hash.to_ascii_lowercase()))
        }
        _ => Ok(Err(format!("not `<sha256>  {MANIFEST_FILE}` (edited or damaged)"))),
    }
}

/// Just the `files` list, which export and engine manifests share.
#[derive(Deserialize)]
struct FilesOnly {
    files: Vec<FileEntry>,
}

fn check_file(dir: &Path, f: &FileEntry) -> Result<Option<Problem>> {
    let full = dir.join(&f.path);
    let bytes = match std::fs::metadata(&full) {
        Ok(m) if m.is_file() => m.len(),
        Ok(_) => return Ok(Some(Problem::Missing { file: f.path.clone() })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Some(Problem::Missing { file: f.path.clone() }))
        }
        Err(e) => return Err(Error::io(&full, e)),
    };
    let file = f.path.clone();
    Ok(if bytes < f.bytes {
        Some(Problem::Truncated { file, bytes, expected: f.bytes })
    } else if bytes > f.bytes {
        Some(Problem::Grown { file, bytes, expected: f.bytes })
    } else if sha256_file(&full)? != f.sha256 {
        Some(Problem::Modified { file })
    } else {
        None
    })
}

/// Every file under `dir`, relative and `/`-separated, sorted.
pub fn files_under(dir: &Path) -> Result<Vec<String>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
        for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let p: PathBuf = e.map_err(|e| Error::io(dir, e))?.path();
            if p.is_dir() {
                walk(root, &p, out)?;
            } else {
                let rel = p.strip_prefix(root).expect("under root");
                out.push(
                    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/"),
                );
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    out.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::file_entries;

    /// A bundle of two files and a manifest listing them.
    fn bundle() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.bin"), b"0123456789").unwrap();
        std::fs::create_dir(d.path().join("golden")).unwrap();
        std::fs::write(d.path().join("golden/c.json"), b"{}").unwrap();
        let files = file_entries(d.path(), &["a.bin".into(), "golden/c.json".into()]).unwrap();
        let json =
            serde_json::to_vec_pretty(&serde_json::json!({ "format": "x/1", "files": files })).unwrap();
        write_manifest(d.path(), &json).unwrap();
        d
    }

    fn kinds(d: &Path) -> Vec<(String, &'static str)> {
        check_bundle(d).unwrap().iter().map(|p| (p.file().to_string(), p.kind())).collect()
    }

    #[test]
    fn an_intact_bundle_has_no_problems() {
        let d = bundle();
        assert_eq!(kinds(d.path()), vec![]);
        require_intact(d.path(), "totoc export").unwrap();
    }

    #[test]
    fn every_problem_is_found_at_once_and_named() {
        let d = bundle();
        let p = d.path();
        std::fs::write(p.join("a.bin"), b"0123456788").unwrap(); // same size, other bytes
        std::fs::remove_file(p.join("golden/c.json")).unwrap();
        std::fs::write(p.join("extra.onnx"), b"x").unwrap();
        assert_eq!(
            kinds(p),
            vec![
                ("a.bin".into(), "modified"),
                ("extra.onnx".into(), "unlisted"),
                ("golden/c.json".into(), "missing")
            ]
        );
        std::fs::write(p.join("a.bin"), b"0123").unwrap();
        assert_eq!(kinds(p)[0], ("a.bin".into(), "truncated"));
        let e = require_intact(p, "totoc export").unwrap_err().to_string();
        assert!(
            e.contains("a.bin: truncated (4 of 10 bytes)") && e.contains("golden/c.json: missing"),
            "{e}"
        );
        assert!(e.contains("totoc export"), "{e}");
    }

    #[test]
    fn an_edited_manifest_or_a_missing_hash_file_is_refused() {
        let d = bundle();
        let m = d.path().join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&m).unwrap().replace("x/1", "x/2");
        std::fs::write(&m, text).unwrap();
        assert_eq!(kinds(d.path()), vec![(MANIFEST_FILE.into(), "manifest-edited")]);
        std::fs::remove_file(d.path().join(MANIFEST_HASH_FILE)).unwrap();
        assert_eq!(kinds(d.path()), vec![(MANIFEST_HASH_FILE.into(), "manifest-hash-missing")]);
        std::fs::remove_file(&m).unwrap();
        assert_eq!(kinds(d.path()), vec![(MANIFEST_FILE.into(), "manifest-unreadable")]);
    }
}
