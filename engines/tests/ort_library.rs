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
}
