//! Errors as Python exceptions: each engines error becomes one of the classes of `totoc.errors` (defined in
//! Python, so that each also derives from the built-in it refines: `InvalidInput` is a `ValueError`, ...), chosen
//! by the error's kind, with the engine's own message.
//!
//! A Rust panic is a bug, but it must not escape as PyO3's `PanicException`, which derives from
//! `BaseException` (so `except Exception` misses it, and a worker loop dies): every entry point of the module runs
//! its body in [`guard`], which raises a panic as `TotocError`.

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// Which exception class an error raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The caller's input: its values, types or shapes (`totoc.InvalidInput`).
    Invalid,
    /// Beyond what this engine was built for: variates, horizon, samples, a context with `strict_context`
    /// (`totoc.EngineLimit`).
    Limit,
    /// The engine bundle: missing, malformed, modified, built for something else (`totoc.BundleIntegrity`).
    Bundle,
    /// No usable ONNX Runtime library (`totoc.RuntimeMissing`).
    Runtime,
    /// Anything else the engine reports (`totoc.TotocError`).
    Other,
}

impl Kind {
    /// The kind of an engines error: request errors ([`engines::Error::is_request_error`]) are the caller's,
    /// those that name an engine limit are [`Kind::Limit`]; the rest follow the variant.
    pub fn of(e: &engines::Error) -> Kind {
        use engines::Error as E;
        match e {
            E::Limit { .. }
            | E::TooManySamples { .. }
            | E::ContextTooLong { .. }
            | E::OverBudget { .. }
            | E::Unservable { .. } => Kind::Limit,
            e if e.is_request_error() => Kind::Invalid,
            // a setting of the caller's: a memory size it cannot read, or one too small for the weights
            E::Config { .. } => Kind::Invalid,
            E::OrtLibrary { .. } => Kind::Runtime,
            E::Engine { .. } | E::Exporter(_) | E::Io { .. } => Kind::Bundle,
            _ => Kind::Other,
        }
    }

    fn class_name(self) -> &'static str {
        match self {
            Kind::Invalid => "InvalidInput",
            Kind::Limit => "EngineLimit",
            Kind::Bundle => "BundleIntegrity",
            Kind::Runtime => "RuntimeMissing",
            Kind::Other => "TotocError",
        }
    }

    /// The exception of this kind with `message`.
    pub fn err(self, message: impl Into<String>) -> PyErr {
        let message = message.into();
        Python::attach(|py| match class(py, self) {
            Ok(cls) => PyErr::from_type(cls, message),
            // `totoc.errors` is part of the package; without it (the module imported on its own) the message
            // still reaches the caller.
            Err(_) => PyRuntimeError::new_err(message),
        })
    }
}

fn class(py: Python<'_>, kind: Kind) -> PyResult<Bound<'_, PyType>> {
    Ok(py.import("totoc.errors")?.getattr(kind.class_name())?.cast_into::<PyType>()?)
}

/// An engines error as the Python exception of its kind.
pub fn to_py(e: engines::Error) -> PyErr {
    Kind::of(&e).err(e.to_string())
}

/// `totoc.InvalidInput` with `message`.
pub fn invalid(message: impl Into<String>) -> PyErr {
    Kind::Invalid.err(message)
}

/// Runs an entry point's body, raising a panic in it (or in anything it calls, with or without the GIL) as
/// `totoc.TotocError` that says it is a bug and what panicked. The panic's own report (file and line) has been
/// printed on stderr by Rust's panic hook.
pub fn guard<T>(body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).unwrap_or_else(|payload| {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        Err(Kind::Other
            .err(format!("internal error in totoc (a bug: please report it with this message): {what}")))
    })
}

/// A test's way to make `at` panic (`TOTOC_TEST_PANIC=<at>`; python/tests/test_errors.py): compiled into dev
/// builds only (`debug_assertions`), so a release wheel has no such switch.
pub fn test_panic(at: &str) {
    #[cfg(debug_assertions)]
    if std::env::var("TOTOC_TEST_PANIC").is_ok_and(|v| v == at) {
        panic!("TOTOC_TEST_PANIC={at}: a panic a test asked for");
    }
    #[cfg(not(debug_assertions))]
    let _ = at;
}
