//! Finding and loading the ONNX Runtime shared library (`libonnxruntime`), once per process.
//!
//! totoc builds `ort` with `load-dynamic`: nothing is linked at build time and the library is `dlopen`ed here.
//! [`init`] is the only way into ONNX Runtime for the rest of the crate — every session, tensor and allocator is
//! created from a [`Runtime`] — so ort's own fallback (which *panics* when `libonnxruntime.so` is not on the loader
//! path) can never run: the library is always loaded explicitly, and a missing or unusable library is an
//! [`Error::OrtLibrary`] that says how to get one.
//!
//! Search order (first hit wins; a path given explicitly that does not exist is an error, not a fall-through):
//! 1. the `--ort-lib` value passed to [`init`],
//! 2. `$TOTOC_ORT_LIB`, 3. `$ORT_DYLIB_PATH` (ort's own variable),
//! 4. `libonnxruntime.so*` next to the current executable,
//! 5. `$TOTOC_ORT_DIR/libonnxruntime.so.*`, then `~/.cache/totoc/onnxruntime/<version>/libonnxruntime.so.*`
//!    (newest version first) — where `scripts/fetch-onnxruntime.sh` puts it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use ort::environment::Environment;
use ort::logging::LogLevel;

use crate::error::{Error, Result};

/// The ONNX Runtime version totoc is built and tested against (`ort` 2.0.0-rc.15 = API 31).
pub const ORT_VERSION: &str = "1.31.1";
/// Environment variable naming the library (takes precedence over `ORT_DYLIB_PATH`).
pub const ENV_TOTOC_ORT_LIB: &str = "TOTOC_ORT_LIB";
/// ort's own environment variable naming the library.
pub const ENV_ORT_DYLIB_PATH: &str = "ORT_DYLIB_PATH";
/// Directory `scripts/fetch-onnxruntime.sh` installs into when set.
pub const ENV_TOTOC_ORT_DIR: &str = "TOTOC_ORT_DIR";

/// Where the library was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LibSource {
    /// `--ort-lib`.
    Explicit,
    /// `$TOTOC_ORT_LIB`.
    EnvTotoc,
    /// `$ORT_DYLIB_PATH`.
    EnvOrt,
    /// Next to the running executable.
    NextToExe,
    /// `$TOTOC_ORT_DIR` or `~/.cache/totoc/onnxruntime/<version>/`.
    Cache,
}

impl LibSource {
    pub fn describe(self) -> &'static str {
        match self {
            LibSource::Explicit => "--ort-lib",
            LibSource::EnvTotoc => "$TOTOC_ORT_LIB",
            LibSource::EnvOrt => "$ORT_DYLIB_PATH",
            LibSource::NextToExe => "next to the executable",
            LibSource::Cache => "totoc's onnxruntime cache",
        }
    }
}

/// How to get the library; appended to every [`Error::OrtLibrary`].
pub fn fetch_help() -> String {
    format!(
        "totoc needs the ONNX Runtime {ORT_VERSION} shared library (libonnxruntime.so.{ORT_VERSION}). Get it with \
         `scripts/fetch-onnxruntime.sh` from the totoc repository (installs into \
         ~/.cache/totoc/onnxruntime/{ORT_VERSION}/, where totoc looks by default), or by hand: \
         `python3 -m pip download --no-deps --only-binary=:all: onnxruntime=={ORT_VERSION}`, unzip \
         `onnxruntime/capi/libonnxruntime.so.{ORT_VERSION}` from the wheel into \
         ~/.cache/totoc/onnxruntime/{ORT_VERSION}/ or next to the totoc binary, or point \
         --ort-lib / ${ENV_TOTOC_ORT_LIB} at it. For CUDA/TensorRT use the onnxruntime-gpu {ORT_VERSION} wheel's \
         libraries (libonnxruntime.so.{ORT_VERSION} with libonnxruntime_providers_*.so beside it)."
    )
}

fn lib_error(message: String) -> Error {
    Error::OrtLibrary { message, help: fetch_help() }
}

/// Finds the library without loading it (see the module docs for the order).
pub fn find_library(explicit: Option<&Path>) -> Result<(PathBuf, LibSource)> {
    if let Some(p) = explicit {
        return existing(p, "--ort-lib").map(|p| (p, LibSource::Explicit));
    }
    for (var, source) in [(ENV_TOTOC_ORT_LIB, LibSource::EnvTotoc), (ENV_ORT_DYLIB_PATH, LibSource::EnvOrt)] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            return existing(Path::new(&v), &format!("${var}")).map(|p| (p, source));
        }
    }
    if let Some(dir) = std::env::current_exe().ok().and_then(|e| e.parent().map(Path::to_path_buf)) {
        if let Some(p) = best_lib_in(&dir) {
            return Ok((p, LibSource::NextToExe));
        }
    }
    if let Some(dir) = std::env::var_os(ENV_TOTOC_ORT_DIR).filter(|v| !v.is_empty()) {
        if let Some(p) = best_lib_in(Path::new(&dir)) {
            return Ok((p, LibSource::Cache));
        }
    }
    if let Some(root) = cache_root() {
        let mut versions: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(&root)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| (version_key(&e.file_name().to_string_lossy()), e.path()))
            .collect();
        versions.sort();
        for (_, dir) in versions.iter().rev() {
            if let Some(p) = best_lib_in(dir) {
                return Ok((p, LibSource::Cache));
            }
        }
    }
    let searched = [
        format!("--ort-lib, ${ENV_TOTOC_ORT_LIB}, ${ENV_ORT_DYLIB_PATH} (unset)"),
        std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.display().to_string()))
            .unwrap_or_else(|| "<executable directory unknown>".into()),
        cache_root()
            .map_or_else(|| "~/.cache/totoc/onnxruntime (HOME unset)".into(), |r| r.display().to_string()),
    ];
    Err(lib_error(format!("ONNX Runtime library not found (searched: {})", searched.join("; "))))
}

fn existing(p: &Path, what: &str) -> Result<PathBuf> {
    if p.is_file() {
        Ok(p.to_path_buf())
    } else if p.is_dir() {
        best_lib_in(p)
            .ok_or_else(|| lib_error(format!("{what} {}: no libonnxruntime in this directory", p.display())))
    } else {
        Err(lib_error(format!("{what} {}: no such file", p.display())))
    }
}

/// `~/.cache/totoc/onnxruntime`.
pub fn cache_root() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".cache/totoc/onnxruntime"))
}

/// Whether a file name is the main ONNX Runtime library (not a provider library).
fn is_ort_lib_name(name: &str) -> bool {
    name.starts_with("libonnxruntime.so")
        || (name.starts_with("libonnxruntime") && name.ends_with(".dylib") && !name.contains("providers"))
        || name == "onnxruntime.dll"
}

/// The most specific library in `dir`: the highest `libonnxruntime.so.X.Y.Z`, else `.so.1`, else `.so`.
fn best_lib_in(dir: &Path) -> Option<PathBuf> {
    let mut libs: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (is_ort_lib_name(&name) && e.path().is_file()).then(|| {
                let suffix = name.trim_start_matches("libonnxruntime.so").trim_start_matches('.');
                (version_key(suffix), e.path())
            })
        })
        .collect();
    libs.sort();
    libs.pop().map(|(_, p)| p)
}

/// `"1.31.1"` → `[1, 31, 1]`; non-numeric parts sort first.
fn version_key(s: &str) -> Vec<u64> {
    s.split('.').map(|p| p.parse().unwrap_or(0)).collect()
}

/// The loaded library and the process's ONNX Runtime environment.
pub struct Runtime {
    env: Environment,
    lib: PathBuf,
    source: LibSource,
    version: String,
    /// The process that started it. A child made by `fork()` inherits this static but not ONNX Runtime's
    /// threads (the global intra-op pool's workers exist in the parent only) nor the release of any lock a
    /// parent thread held at the fork (see [`inherited`]).
    pid: u32,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("lib", &self.lib)
            .field("version", &self.version)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    pub fn environment(&self) -> &Environment {
        &self.env
    }

    /// The library file that was loaded.
    pub fn library(&self) -> &Path {
        &self.lib
    }

    pub fn source(&self) -> LibSource {
        self.source
    }

    /// The id of the process that started this runtime.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// ONNX Runtime's version from the library's file name, e.g. `1.31.1` (`unknown` for an unversioned name).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Execution providers compiled into the loaded library (`CPUExecutionProvider`, and with the GPU build
    /// `CUDAExecutionProvider`, `TensorrtExecutionProvider`). Being listed does not mean the provider's own
    /// library and its CUDA dependencies load; registering it does that.
    pub fn available_providers(&self) -> Vec<String> {
        let api = ort::api();
        let mut list: *mut *mut std::ffi::c_char = std::ptr::null_mut();
        let mut n: std::ffi::c_int = 0;
        // SAFETY: out-pointers are valid; the list is released below with the count ORT returned.
        let status = unsafe { (api.GetAvailableProviders)(&mut list, &mut n) };
        if unsafe { ort::Error::result_from_status(status) }.is_err() || list.is_null() {
            return Vec::new();
        }
        let names = (0..n as usize)
            .filter_map(|i| {
                // SAFETY: ORT returned `n` valid C strings.
                let p = unsafe { *list.add(i) };
                (!p.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(p) }.to_string_lossy().into_owned())
            })
            .collect();
        // SAFETY: releasing what GetAvailableProviders returned.
        let _ = unsafe { ort::Error::result_from_status((api.ReleaseAvailableProviders)(list, n)) };
        names
    }
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();
static INIT: Mutex<()> = Mutex::new(());

/// Loads ONNX Runtime (once per process) and returns the process's [`Runtime`].
///
/// Later calls return the same runtime; asking for a *different* library after one was loaded is an error (a
/// process can hold only one ONNX Runtime), and so is any call in a child forked after the runtime was loaded
/// ([`inherited`]).
pub fn init(explicit: Option<&Path>) -> Result<&'static Runtime> {
    // before the lock: a thread of the parent may have held it when the process forked
    if let Some(parent) = inherited() {
        return Err(forked_error(parent));
    }
    let _guard = INIT.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(rt) = RUNTIME.get() {
        if let Some(p) = explicit {
            let want = existing(p, "--ort-lib")?;
            if !same_file(&want, &rt.lib) {
                return Err(lib_error(format!(
                    "ONNX Runtime is already loaded from {} in this process; cannot switch to {}",
                    rt.lib.display(),
                    want.display()
                )));
            }
        }
        return Ok(rt);
    }
    let (lib, source) = find_library(explicit)?;
    MIN_LEVEL.store(level_rank(env_log_level()), std::sync::atomic::Ordering::Relaxed);
    let builder = ort::init_from(&lib).map_err(|e| {
        lib_error(format!("could not load ONNX Runtime from {} ({}): {e}", lib.display(), source.describe()))
    })?;
    // One intra-op thread pool for the whole process, shared by every session: each engine runs a prefill and a
    // decode session alternately, and per-session pools would leave one pool spinning on the cores while the
    // other works (measured on the base model, 2 cores: decode steps 27–48 ms with two pools). Sessions then
    // run with ORT's `DisablePerSessionThreads` (ort sets it when the environment has a global pool).
    let threads = intra_threads();
    let pool = ort::environment::GlobalThreadPoolOptions::default()
        .with_intra_threads(threads)
        .and_then(|p| p.with_inter_threads(1))
        .and_then(|p| p.with_spin_control(true))
        .map_err(|e| lib_error(format!("configuring the ONNX Runtime thread pool: {e}")))?;
    let env = builder
        .with_name("totoc")
        .with_telemetry(false)
        .with_logger(Arc::new(forward_log))
        .with_global_thread_pool(pool)
        .build()
        .map_err(|e| {
            lib_error(format!("ONNX Runtime from {} loaded but failed to start: {e}", lib.display()))
        })?;
    // `with_logger` registers at VERBOSE; only warnings and worse reach us unless ORT_LOG asks for more.
    env.set_log_level(env_log_level());
    let version = lib_version(&lib);
    let pid = std::process::id();
    Ok(RUNTIME.get_or_init(|| Runtime { env, lib, source, version, pid }))
}

/// `Some(parent pid)` when this process did not start the runtime it holds: it is a child made by `fork()` after
/// its parent loaded ONNX Runtime. Nothing of that runtime can run here (its thread pool's workers stayed in the
/// parent, and locks held by the parent's other threads at the fork stay held), and a fresh one cannot be
/// started either: ONNX Runtime's environment is a process-wide singleton that cannot be torn down or re-created
/// without those threads. [`init`] refuses in such a child ([`forked_error`]).
pub fn inherited() -> Option<u32> {
    RUNTIME.get().map(|rt| rt.pid).filter(|&pid| pid != std::process::id())
}

/// The error of using ONNX Runtime in a child forked from process `parent`, which had loaded it.
pub fn forked_error(parent: u32) -> Error {
    Error::Ort {
        context: format!("process {} is a child forked from process {parent}, which loaded it", std::process::id()),
        message: "it cannot run here (its thread pool's threads stay in the parent, and it cannot be started \
                  again in this process): load the engine in the worker (spawn / forkserver), i.e. start worker \
                  processes with the `spawn` or `forkserver` method and load the engine in each worker"
            .to_string(),
    }
}

static INTRA_THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Sets the size of the process-wide intra-op thread pool (default: physical cores). Must be called before the
/// first [`init`]; later calls have no effect on an already-started runtime.
pub fn set_intra_threads(threads: Option<usize>) {
    INTRA_THREADS.store(threads.unwrap_or(0), std::sync::atomic::Ordering::Relaxed);
}

/// Sets the pool size unless one was already set (used for the thread count recorded in an engine).
pub fn default_intra_threads(threads: usize) {
    let _ = INTRA_THREADS.compare_exchange(
        0,
        threads,
        std::sync::atomic::Ordering::Relaxed,
        std::sync::atomic::Ordering::Relaxed,
    );
}

/// Threads of the global intra-op pool.
pub fn intra_threads() -> usize {
    match INTRA_THREADS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => crate::cpu::physical_cores(),
        n => n,
    }
}

/// The runtime if [`init`] already succeeded.
pub fn get() -> Option<&'static Runtime> {
    RUNTIME.get()
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The version in the (symlink-resolved) file name, `libonnxruntime.so.1.31.1` → `1.31.1`. ort has already
/// refused a library older than its API version (1.31) while loading it.
fn lib_version(lib: &Path) -> String {
    let real = lib.canonicalize().unwrap_or_else(|_| lib.to_path_buf());
    let name = real.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match name.strip_prefix("libonnxruntime.so.") {
        Some(v) if v.split('.').count() >= 2 => v.to_string(),
        _ => "unknown".to_string(),
    }
}

/// `ORT_LOG=verbose|info|warning|error|fatal` (ort's variable) sets what ONNX Runtime logs; default warning.
fn env_log_level() -> LogLevel {
    match std::env::var("ORT_LOG").as_deref() {
        Ok("verbose") => LogLevel::Verbose,
        Ok("info") => LogLevel::Info,
        Ok("error") => LogLevel::Error,
        Ok("fatal") => LogLevel::Fatal,
        _ => LogLevel::Warning,
    }
}

/// Least severe level [`forward_log`] prints (ONNX Runtime calls a custom logger at every level until
/// `set_log_level` narrows it, so the filter must also live here).
static MIN_LEVEL: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(2);

fn level_rank(l: LogLevel) -> u8 {
    match l {
        LogLevel::Verbose => 0,
        LogLevel::Info => 1,
        LogLevel::Warning => 2,
        LogLevel::Error => 3,
        LogLevel::Fatal => 4,
    }
}

/// The environment logger: ONNX Runtime's messages go to stderr, one line each.
fn forward_log(level: LogLevel, _category: &str, id: &str, location: &str, message: &str) {
    if level_rank(level) < MIN_LEVEL.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let tag = match level {
        LogLevel::Verbose => "V",
        LogLevel::Info => "I",
        LogLevel::Warning => "W",
        LogLevel::Error => "E",
        LogLevel::Fatal => "F",
    };
    eprintln!("[onnxruntime {tag} {id} {location}] {message}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_order_numerically() {
        assert!(version_key("1.31.1") > version_key("1.9.0"));
        assert!(version_key("1.31.1") > version_key("1"));
        assert!(version_key("2.0.0") > version_key("1.31.1"));
    }

    #[test]
    fn picks_the_most_specific_library_and_skips_providers() {
        let dir = tempfile::tempdir().unwrap();
        for n in [
            "libonnxruntime.so",
            "libonnxruntime.so.1",
            "libonnxruntime.so.1.31.1",
            "libonnxruntime_providers_shared.so",
        ] {
            std::fs::write(dir.path().join(n), b"x").unwrap();
        }
        assert_eq!(best_lib_in(dir.path()).unwrap(), dir.path().join("libonnxruntime.so.1.31.1"));
        let empty = tempfile::tempdir().unwrap();
        std::fs::write(empty.path().join("libonnxruntime_providers_cuda.so"), b"x").unwrap();
        assert!(best_lib_in(empty.path()).is_none());
    }

    #[test]
    fn a_bogus_explicit_path_says_how_to_get_the_library() {
        let err = find_library(Some(Path::new("/nonexistent/libonnxruntime.so.9"))).unwrap_err().to_string();
        assert!(err.contains("/nonexistent/libonnxruntime.so.9"), "{err}");
        assert!(err.contains("scripts/fetch-onnxruntime.sh"), "{err}");
        assert!(err.contains("pip download --no-deps --only-binary=:all: onnxruntime==1.31.1"), "{err}");
        assert!(err.contains("TOTOC_ORT_LIB"), "{err}");
    }
}
