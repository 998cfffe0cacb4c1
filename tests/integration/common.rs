//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

/// Repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A new directory for a fixture that the tests of this process share (an engine built once, kept in a static).
/// A `TempDir` in a static is never dropped, so each such fixture used to stay in the temp folder after every run
/// (~50 MB each, five per run of this binary), and a CI machine that keeps its temp folder filled its disk. These
/// directories are removed when the process exits (`atexit`: the test harness returns from `main` or calls
/// `exit`), and the first call removes what processes killed before their exit left behind (named by their pid).
pub fn shared_fixture_dir() -> PathBuf {
    static DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
    extern "C" fn remove_shared_fixture_dirs() {
        let dirs = std::mem::take(&mut *DIRS.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
        for dir in dirs {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
    let mut dirs = DIRS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if dirs.is_empty() {
        remove_dirs_of_dead_processes();
        // SAFETY: registers a plain extern "C" function with no arguments; it only takes a mutex and removes files.
        let registered = unsafe { libc::atexit(remove_shared_fixture_dirs) };
        assert_eq!(registered, 0, "atexit failed");
    }
    let dir = tempfile::Builder::new()
        .prefix(&format!("{SHARED_PREFIX}{}-", std::process::id()))
        .tempdir()
        .expect("create a shared fixture directory")
        .keep();
    dirs.push(dir.clone());
    dir
}

const SHARED_PREFIX: &str = "totoc-it-";

/// Removes `totoc-it-<pid>-*` directories whose process is gone (killed before its `atexit` ran).
fn remove_dirs_of_dead_processes() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SHARED_PREFIX)) else { continue };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The target directory this test binary was built into (`CARGO_TARGET_DIR` or `target/`).
pub fn target_dir() -> PathBuf {
    // target/debug/totoc -> target
    let bin = Path::new(env!("CARGO_BIN_EXE_totoc"));
    bin.parent().and_then(Path::parent).expect("totoc binary under target/<profile>/").to_path_buf()
}

/// totoc's own crates (the `totoc` binary's workspace members): the ones [`build_totoc_with_release_arithmetic`]
/// compiles without overflow checks and debug assertions.
const TOTOC_CRATES: [&str; 5] = ["totoc", "engines", "exporter", "tables", "backtest"];

/// Builds `totoc` from the workspace at `workspace` with a release build's arithmetic in totoc's own crates (no
/// overflow checks, no debug assertions: a size that wraps, wraps) and links the binary to `dest`. The hostile-client
/// test builds this workspace, the third-family test a copy of it with a toy family.
///
/// Why this shape: the build is the test build's own `dev` profile with per-crate overrides (`--config
/// profile.dev.package.<crate>...`), and its intermediate files go to this test build's build directory (cargo's
/// `build.build-dir`), so every dependency is the unit `cargo test` already compiled and only totoc's five crates
/// compile again (~35 s cold on 2 cores). A profile of its own (`release-arith`, until 2026-11-29) compiled all
/// ~400 dependencies once more: 137 s of a cold CI run. The binary is uplifted into a target directory of its own
/// beside `dest` (`<dest dir>/cargo-out`), so it never replaces the test build's `target/debug/totoc`, which other
/// tests are running. One build at a time: both share the build directory's lock anyway.
pub fn build_totoc_with_release_arithmetic(workspace: &Path, dest: &Path) {
    static BUILD: Mutex<()> = Mutex::new(());
    let _one_at_a_time = BUILD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let t = std::time::Instant::now();
    // An explicitly set build directory is where the test build's units are; otherwise it is the target directory.
    let build_dir = std::env::var_os("CARGO_BUILD_BUILD_DIR").map(PathBuf::from).unwrap_or_else(target_dir);
    let out = dest.parent().expect("dest in a folder").join("cargo-out");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--profile", "dev", "--bin", "totoc"]);
    for krate in TOTOC_CRATES {
        for setting in ["overflow-checks", "debug-assertions"] {
            cmd.arg("--config").arg(format!("profile.dev.package.{krate}.{setting}=false"));
        }
    }
    let status = cmd
        .env("CARGO_BUILD_BUILD_DIR", &build_dir)
        .env("CARGO_TARGET_DIR", &out)
        .current_dir(workspace)
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build (release arithmetic) failed in {}", workspace.display());
    eprintln!("release-arithmetic build of {}: {:.0} s", workspace.display(), t.elapsed().as_secs_f64());
    let built = out.join("debug/totoc");
    let _ = std::fs::remove_file(dest);
    // A hard link keeps this inode when a later build replaces the uplifted file; a copy where links fail.
    if std::fs::hard_link(&built, dest).is_err() {
        std::fs::copy(&built, dest)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", built.display(), dest.display()));
    }
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
