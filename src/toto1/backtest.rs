//! `totoc backtest --reference-checkpoint` on Toto 1.0 engines: toto-ts 0.2.0 eager, one forecast per window in a
//! loop (`tests/reference/backtest_reference.py`, embedded with the harness it imports so an installed totoc
//! needs no source tree).

/// The harness (entry point first) and its import.
pub const REFERENCE_SCRIPTS: &[(&str, &str)] = &[
    ("backtest_reference.py", include_str!("../../tests/reference/backtest_reference.py")),
    ("run_reference.py", include_str!("../../tests/reference/run_reference.py")),
];
