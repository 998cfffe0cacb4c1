//! End-to-end tests of the `totoc` binary, grouped by theme. They use the committed golden fixtures
//! (`tests/fixtures/`, made by toto-ts via `tests/reference/`), so they need no Python, except the ONNX checker
//! test, which uses the venv made by `scripts/setup-onnx-checker.sh`, and the tritonclient test of `serve`, which uses
//! the venv made by `scripts/setup-serve-venv.sh`, and the real market-data calendar tests, which read
//! backtesting.py's sample data from the data venv (`tests/data/setup_venv.sh`); without them those tests skip with
//! a message (fail under `TOTOC_STRICT_TESTS=1`, see `tests/support/venv.rs`).
mod backtest;
mod bundle;
mod cache;
mod calendar;
mod common;
mod data;
mod deploy;
mod export;
mod forecast;
mod kronos;
mod layers;
mod plot;
mod precision;
mod serve;
mod serve_cost;
mod serve_hostile;
mod serve_kronos;
mod serve_ops;
mod serve_timeseries;
mod third_family;
mod toto2;
mod trained;
#[path = "../support/venv.rs"]
mod venv;
