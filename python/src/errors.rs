//! Errors as Python exceptions: each engines error becomes one of the classes of `totoc.errors` (defined in
//! Python, so that each also derives from the built-in it refines: `InvalidInput` is a `ValueError`, ...), chosen
//! by the error's kind, with the engine's own message.

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
