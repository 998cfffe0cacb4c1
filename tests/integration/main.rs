//! End-to-end tests of the `totoc` binary, grouped by theme. They use the committed golden fixtures
//! (`tests/fixtures/`, made by toto-ts via `tests/reference/`), so they need no Python, except the ONNX checker
//! test, which uses the venv made by `scripts/setup-onnx-checker.sh`.
mod common;
mod export;
mod forecast;
mod precision;
