//! Finding and loading libonnxruntime: bad paths are errors that say how to get the library, never panics, and
//! a later good load still works. One test: the library can be loaded once per process, so the order matters.
use std::path::Path;

use engines::runtime::{self, ENV_TOTOC_ORT_LIB};

fn assert_helpful(err: &str, names: &str) {
    assert!(err.contains(names), "error should name {names}: {err}");
    assert!(err.contains("scripts/fetch-onnxruntime.sh"), "{err}");
    assert!(
        err.contains("python3 -m pip download --no-deps --only-binary=:all: onnxruntime==1.31.1"),
        "{err}"
    );
    assert!(err.contains("TOTOC_ORT_LIB"), "{err}");
}

#[test]
fn bad_libraries_are_helpful_errors_and_a_good_one_still_loads() {
    assert!(runtime::get().is_none());
    // a path that does not exist
    let e = runtime::init(Some(Path::new("/nonexistent/libonnxruntime.so.1.31.1"))).unwrap_err().to_string();
    eprintln!("{e}");
    assert_helpful(&e, "/nonexistent/libonnxruntime.so.1.31.1");

    // a file that is not a library: dlopen fails inside ort, which must not panic
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("libonnxruntime.so.1.31.1");
    std::fs::write(&fake, b"not an ELF file").unwrap();
    let e = runtime::init(Some(&fake)).unwrap_err().to_string();
    assert_helpful(&e, "could not load ONNX Runtime from");

    // $TOTOC_ORT_LIB pointing nowhere is named
    let saved = std::env::var_os(ENV_TOTOC_ORT_LIB);
    std::env::set_var(ENV_TOTOC_ORT_LIB, "/nonexistent/dir/libonnxruntime.so");
    let e = runtime::init(None).unwrap_err().to_string();
    assert_helpful(&e, "$TOTOC_ORT_LIB /nonexistent/dir/libonnxruntime.so");
    match saved {
        Some(v) => std::env::set_var(ENV_TOTOC_ORT_LIB, v),
        None => std::env::remove_var(ENV_TOTOC_ORT_LIB),
    }
    assert!(runtime::get().is_none());

    // the regular search then loads the real library (CI fetches it first; if absent, say how to get it)
    let rt = match runtime::init(None) {
        Ok(rt) => rt,
        Err(e) => panic!("{e}"),
    };
    assert!(rt.version().starts_with("1.31"), "{}", rt.version());
    assert!(rt.available_providers().iter().any(|p| p == "CPUExecutionProvider"));
    // once loaded, the same runtime comes back; a different library is refused
    assert!(std::ptr::eq(runtime::init(None).unwrap(), rt));
    let e = runtime::init(Some(&fake)).unwrap_err().to_string();
    assert!(e.contains("already loaded"), "{e}");

    // the runtime records the process that started it; a forked child is refused it
    assert_eq!(rt.pid(), std::process::id());
    assert_eq!(runtime::inherited(), None);
    assert_eq!(forked_child_exit_code(), 0, "the forked child's checks failed (exit code 1 or 2)");
}

/// Forks; the child checks that it sees the runtime as its parent's and that `init` refuses it there, and
/// exits 0 if so (`_exit`: no destructor or test harness code runs in the child). Returns the child's exit code.
fn forked_child_exit_code() -> i32 {
    let parent = std::process::id();
    // SAFETY: the child calls only `inherited`, `init` (which returns before taking any lock in a forked
    // child), formats a string and `_exit`s.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let seen = runtime::inherited() == Some(parent);
        let refused = match runtime::init(None) {
            Err(e) => e.to_string().contains("load the engine in the worker (spawn / forkserver)"),
            Ok(_) => false,
        };
        let code = if !seen {
            1
        } else if !refused {
            2
        } else {
            0
        };
        // SAFETY: ends the child at once.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(libc::WIFEXITED(status), "the child did not exit normally (status {status})");
    libc::WEXITSTATUS(status)
}
