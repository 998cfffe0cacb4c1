//! The Python venvs some tests need, found in one place: a missing venv skips its test with a message saying how
//! to make it, unless `TOTOC_STRICT_TESTS=1` (set by `scripts/test.sh`, so by `.ci/run`), which turns every such
//! skip into a failure: CI skips nothing, a fresh `cargo test` passes.
//!
//! Shared by the root integration tests and the crates' tests through `#[path]` (one file, no test-only crate).
#![allow(dead_code)]

use std::path::Path;

/// One venv: the variable that overrides its Python, its default place under `~/.cache/totoc`, and the script
/// that makes it.
pub struct Venv {
    pub what: &'static str,
    pub env_var: &'static str,
    pub default_dir: &'static str,
    pub setup: &'static str,
}

/// The official `onnx` package (`onnx.checker` full check).
pub const ONNX: Venv = Venv {
    what: "the ONNX checker venv",
    env_var: "TOTOC_ONNX_PYTHON",
    default_dir: "onnx-venv",
    setup: "scripts/setup-onnx-checker.sh",
};

/// tritonclient[http,grpc], the real Open Inference Protocol clients.
pub const SERVE: Venv = Venv {
    what: "the tritonclient venv",
    env_var: "TOTOC_SERVE_PYTHON",
    default_dir: "serve-venv",
    setup: "scripts/setup-serve-venv.sh",
};

/// toto-ts 0.2.0 and toto-2 2.0.0, the eager references (`totoc backtest --reference-checkpoint`).
pub const REFERENCE: Venv = Venv {
    what: "the toto-ts / toto-2 reference venv",
    env_var: "TOTOC_REFERENCE_PYTHON",
    default_dir: "reference-venv",
    setup: "tests/reference/setup_venv.sh",
};

/// fev 0.10.0 and utilsforecast 0.2.17, the oracles of the backtest metrics.
pub const METRICS: Venv = Venv {
    what: "the metrics oracle venv (fev, utilsforecast)",
    env_var: "TOTOC_METRICS_PYTHON",
    default_dir: "metrics-venv",
    setup: "tests/metrics/setup_venv.sh",
};

/// statsmodels, pandas, pyarrow, bokeh-sampledata, and backtesting.py's sample market data (installed without
/// its dependencies: the real-data calendar tests read its CSV files, `tests/data/requirements-nodeps.txt`).
pub const DATA: Venv = Venv {
    what: "the data venv",
    env_var: "TOTOC_DATA_PYTHON",
    default_dir: "data-venv",
    setup: "tests/data/setup_venv.sh",
};

/// Whether `TOTOC_STRICT_TESTS=1`: a skip is a failure.
pub fn strict() -> bool {
    std::env::var("TOTOC_STRICT_TESTS").as_deref() == Ok("1")
}

/// Skips (returns) with `message`, or panics with it under `TOTOC_STRICT_TESTS=1`.
pub fn skip(message: &str) {
    assert!(!strict(), "{message} (TOTOC_STRICT_TESTS=1 makes this a failure)");
    eprintln!("SKIPPED: {message}");
}

/// The venv's Python (`$ENV_VAR`, else `~/.cache/totoc/<dir>/bin/python`), or `None` after [`skip`].
pub fn python(v: &Venv) -> Option<String> {
    let p = std::env::var(v.env_var).unwrap_or_else(|_| {
        format!("{}/.cache/totoc/{}/bin/python", std::env::var("HOME").unwrap_or_default(), v.default_dir)
    });
    if Path::new(&p).exists() {
        return Some(p);
    }
    skip(&format!("{} is missing ({p}): run {} (or set {})", v.what, v.setup, v.env_var));
    None
}
