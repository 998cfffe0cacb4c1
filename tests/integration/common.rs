//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A committed fixture checkpoint, e.g. `tiny`.
pub fn fixture_checkpoint(config: &str) -> PathBuf {
    root().join("tests/fixtures").join(config).join("checkpoint")
}

pub fn tiny_profiles() -> PathBuf {
    root().join("configs/tiny.yaml")
}

/// Runs the built `totoc` binary.
pub fn totoc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_totoc")).args(args).output().expect("run totoc")
}

/// Runs the built `totoc` binary with `input` on its stdin.
pub fn totoc_stdin(args: &[&str], input: &[u8]) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_totoc"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run totoc");
    // A refused run may exit before reading its input: a closed pipe is not a failure here.
    let _ = child.stdin.take().expect("stdin").write_all(input);
    child.wait_with_output().expect("wait for totoc")
}

/// Runs totoc and asserts success, returning stdout.
pub fn totoc_ok(args: &[&str]) -> String {
    let out = totoc(args);
    assert!(
        out.status.success(),
        "totoc {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

/// Runs totoc expecting failure; returns stderr.
pub fn totoc_err(args: &[&str]) -> String {
    let out = totoc(args);
    assert!(!out.status.success(), "totoc {args:?} unexpectedly succeeded");
    String::from_utf8(out.stderr).expect("utf8")
}

/// Exports `config`'s fixture checkpoint with the tiny profiles into `out`.
pub fn export_fixture(config: &str, out: &Path) {
    export_fixture_with(config, out, &[]);
}

/// [`export_fixture`] with extra `totoc export` flags.
pub fn export_fixture_with(config: &str, out: &Path, extra: &[&str]) {
    let (ck, profiles) = (fixture_checkpoint(config), tiny_profiles());
    let mut args = vec![
        "export",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--config",
        profiles.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    totoc_ok(&args);
}

/// Copies a directory tree.
/// `totoc build-engine --artifacts bundle --out engine` (CPU, defaults), which must succeed.
pub fn build_engine(bundle: &Path, engine: &Path) {
    totoc_ok(&["build-engine", "--artifacts", bundle.to_str().unwrap(), "--out", engine.to_str().unwrap()]);
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
