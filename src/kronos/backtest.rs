//! `totoc backtest --reference-checkpoint PREDICTOR --reference-tokenizer TOKENIZER` on Kronos engines: upstream
//! Kronos (kronos-finance 0.1.5) `KronosPredictor.predict`, one window at a time in a loop, in eval mode or, with
//! `--reference-mode train`, as `from_pretrained` leaves it (`tests/reference/backtest_kronos_reference.py`,
//! embedded with the loader it imports so an installed totoc needs no source tree).

/// The harness (entry point first) and its import.
pub const REFERENCE_SCRIPTS: &[(&str, &str)] = &[
    ("backtest_kronos_reference.py", include_str!("../../tests/reference/backtest_kronos_reference.py")),
    ("run_kronos_reference.py", include_str!("../../tests/reference/run_kronos_reference.py")),
];
