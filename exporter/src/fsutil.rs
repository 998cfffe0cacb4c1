//! File helpers shared by every writer in totoc: streaming sha256, and atomic writes (temp file or temp dir in
//! the destination's parent, then rename) so a failed or interrupted run never leaves a half-written artifact.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};

/// Hex sha256 of a byte slice.
pub fn sha256_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Hex sha256 of a file, streamed in 1 MiB chunks (sha2 0.11 has no `io::Write` impl).
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `bytes` to `path` atomically (temp file beside it, fsync, rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = sibling(path, ".tmp");
    let res = (|| {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if let Err(e) = res {
        let _ = fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    Ok(())
}

/// A directory being written: lives at `<dest>.partial-<pid>` until [`StagingDir::commit`] renames it onto
/// `dest`; dropped without commit, it is removed.
pub struct StagingDir {
    path: PathBuf,
    dest: PathBuf,
    committed: bool,
}

impl StagingDir {
    /// Starts staging `dest`. Refuses an existing non-empty `dest` unless `overwrite`.
    pub fn new(dest: &Path, overwrite: bool) -> Result<Self> {
        if dest.exists() {
            let non_empty = fs::read_dir(dest).map_err(|e| Error::io(dest, e))?.next().is_some();
            if non_empty && !overwrite {
                return Err(Error::io(
                    dest,
                    std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        "output directory exists and is not empty (pass --force to replace it)",
                    ),
                ));
            }
        }
        if let Some(parent) = dest.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
        }
        let path = sibling(dest, &format!(".partial-{}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).map_err(|e| Error::io(&path, e))?;
        Ok(Self { path, dest: dest.to_path_buf(), committed: false })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Replaces `dest` with the staged directory. An old `dest` is first renamed aside and removed only after
    /// the new one is in place, so `dest` is at every moment either the whole old bundle or the whole new one
    /// (two renames on one filesystem; between them, for an instant, nothing).
    pub fn commit(mut self) -> Result<()> {
        let old = sibling(&self.dest, &format!(".old-{}", std::process::id()));
        let had_old = self.dest.exists();
        if had_old {
            let _ = fs::remove_dir_all(&old);
            fs::rename(&self.dest, &old).map_err(|e| Error::io(&self.dest, e))?;
        }
        if let Err(e) = fs::rename(&self.path, &self.dest) {
            if had_old {
                let _ = fs::rename(&old, &self.dest);
            }
            return Err(Error::io(&self.dest, e));
        }
        self.committed = true;
        if had_old {
            let _ = fs::remove_dir_all(&old);
        }
        Ok(())
    }
}

impl Drop for StagingDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_dir_all(&self.path);
        }
    }
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_else(|| "out".into());
    name.push(suffix);
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_known_vector() {
        assert_eq!(sha256_bytes(b"abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        write_atomic(&p, b"abc").unwrap();
        assert_eq!(sha256_file(&p).unwrap(), sha256_bytes(b"abc"));
    }

    #[test]
    fn staging_dir_is_removed_unless_committed() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("bundle");
        {
            let s = StagingDir::new(&dest, false).unwrap();
            fs::write(s.path().join("x"), b"1").unwrap();
        }
        assert!(!dest.exists());
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
        let s = StagingDir::new(&dest, false).unwrap();
        fs::write(s.path().join("x"), b"1").unwrap();
        s.commit().unwrap();
        assert!(dest.join("x").exists());
        assert!(StagingDir::new(&dest, false).is_err());
    }
}
