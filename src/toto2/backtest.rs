//! `totoc backtest --reference-checkpoint` on Toto 2.0 engines: toto-2 2.0.0 eager, one forecast per window in a
//! loop (`tests/reference/backtest_toto2_reference.py`, embedded with the harness it imports).

/// The harness (entry point first) and its import.
pub const REFERENCE_SCRIPTS: &[(&str, &str)] = &[
    ("backtest_toto2_reference.py", include_str!("../../tests/reference/backtest_toto2_reference.py")),
    ("run_toto2_reference.py", include_str!("../../tests/reference/run_toto2_reference.py")),
];
