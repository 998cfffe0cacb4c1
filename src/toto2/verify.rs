//! `totoc verify` on a Toto 2.0 engine: golden toto-2 cases (the median and the nine quantiles).
use std::process::ExitCode;

use anyhow::Context;
use engines::engine::Engine;
use engines::toto2::golden::{self as golden2, Toto2Case};

/// Toto 2.0 golden cases (`tests/fixtures/toto2/<config>/cases`): the median and the nine quantiles of each case,
/// on the engine's profiles with the case's `decode_block`, within the tolerance of the engine's precision
/// (`1e-4·σ + 1e-6·|ref|` for fp32; `1e-2·max(σ, scaler scale) + 1e-3·|ref|` for fp16 and int8).
pub fn run(engine: &Engine, cases: &[std::path::PathBuf]) -> anyhow::Result<ExitCode> {
    let tol = golden2::Toto2Tolerance::for_precision(engine.manifest().precision);
    println!("{:<28} {:<8} {:>10} {:>10} {:>9}  verdict", "case", "output", "max |Δ|", "median", "worst/tol");
    let (mut failed, mut checked) = (0, 0);
    for path in cases {
        let case = Toto2Case::read(path)?;
        let reports = golden2::check_case_with(engine, &case, &tol)
            .with_context(|| format!("running {}", path.display()))?;
        for r in reports {
            checked += 1;
            let ratio = r.worst.map_or(0.0, |w| if w.tol > 0.0 { w.error / w.tol } else { 0.0 });
            let verdict = match r.check() {
                Ok(()) => "ok".to_string(),
                Err(e) => {
                    failed += 1;
                    format!("FAIL: {e}")
                }
            };
            println!(
                "{:<28} {:<8} {:>10.2e} {:>10.2e} {:>9.3}  {verdict}",
                case.name, r.output, r.max_abs, r.median_abs, ratio
            );
        }
    }
    println!(
        "{} of {checked} output checks passed ({} Toto 2.0 cases on {}, tolerance {})",
        checked - failed,
        cases.len(),
        engine.info().label,
        tol.describe()
    );
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
