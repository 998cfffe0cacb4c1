//! Engines and `fork()`. A child made by `fork()` (multiprocessing's default start method on Linux before Python
//! 3.14, gunicorn `--preload`, Celery's prefork pool) is a copy of its parent with one thread: ONNX Runtime's
//! process-wide thread pool comes without its worker threads, and any lock a parent thread held at the fork stays
//! held (an engine forked in the middle of another thread's forecast waits on its own lock for ever in the child). A
//! new engine in the child would reuse the same runtime (ONNX Runtime's environment cannot be started again: see
//! `engines::runtime::inherited`). So each engine records the process that loaded it ([`Owner`]) and refuses to run
//! anywhere else, with an error that says to load the engine in the worker, and the package's `os.register_at_fork`
//! hook (python/totoc/_engine.py) marks inherited engines unusable as soon as the child starts.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use pyo3::PyResult;

use crate::errors::Kind;

/// The process an engine belongs to.
pub struct Owner {
    pid: u32,
    /// Set by the at-fork hook in a child; the process id says the same (it also covers a `fork()` made
    /// outside Python, which runs no hook).
    forked: AtomicBool,
}

impl Owner {
    /// The calling process.
    pub fn this_process() -> Self {
        Owner { pid: std::process::id(), forked: AtomicBool::new(false) }
    }

    /// Whether this is a child forked from the owning process.
    pub fn forked(&self) -> bool {
        self.forked.load(Ordering::Relaxed) || std::process::id() != self.pid
    }

    /// Records that this process is a forked child (the at-fork hook).
    pub fn mark_forked(&self) {
        self.forked.store(true, Ordering::Relaxed);
    }

    /// `Ok` in the owning process; in a forked child the error of using the engine at `path` there.
    pub fn check(&self, path: &Path) -> PyResult<()> {
        if !self.forked() {
            return Ok(());
        }
        Err(Kind::Other.err(format!(
            "the engine {} was loaded by process {} and this process ({}) is a child forked from it: an engine \
             cannot run after fork() (ONNX Runtime's thread pool does not survive it, and a new engine in this \
             process cannot start one either): load the engine in the worker (spawn / forkserver), e.g. \
             multiprocessing.get_context(\"spawn\").Pool(initializer=...) with totoc.Engine(path) in the \
             initializer, or without gunicorn's --preload",
            path.display(),
            self.pid,
            std::process::id()
        )))
    }
}
