//! `totoc verify` on a Kronos engine: the bundle's reference cases (upstream's `predict` in eval mode, the
//! fixtures of tests/fixtures/kronos/<config>/cases: `<case>.json` and its arrays, `<case>.safetensors`), each run
//! with upstream's recorded noise replayed for its sampled series and compared quantity by quantity
//! (`engines::kronos::golden`): tokens exactly, logits within τ, decoded rows within 1e-4·σ.
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use engines::compare::{Report, Worst};
use engines::engine::Engine;
use engines::kronos::engine::KronosEngine;
use engines::kronos::golden::{self, CheckOptions, KronosCase, Quantity};

fn kronos(engine: &Engine) -> anyhow::Result<&KronosEngine> {
    engine.family_engine().as_any().downcast_ref::<KronosEngine>().context("not a Kronos engine")
}

/// The quantities of the case at `path`, run on `engine`.
pub fn quantities(engine: &Engine, path: &Path) -> anyhow::Result<(KronosCase, Vec<Quantity>)> {
    let case = KronosCase::read(path)?;
    let q = golden::check_case(kronos(engine)?, engine.call(), &case, CheckOptions::default())
        .with_context(|| format!("running {}", path.display()))?;
    Ok((case, q))
}

/// One report per quantity, for the server's readiness check (`worst` as a ratio to a tolerance of 1).
pub fn reports(engine: &Engine, path: &Path) -> anyhow::Result<(String, Vec<Report>)> {
    let (case, q) = quantities(engine, path)?;
    let reports = q
        .iter()
        .map(|x| Report {
            output: format!("{} {}", x.what, x.series),
            step: 0,
            count: x.count,
            failures: x.failures,
            max_abs: x.max_abs,
            median_abs: 0.0,
            worst: Some(Worst {
                index: 0,
                variate: x.series,
                t: 0,
                actual: 0.0,
                reference: 0.0,
                error: x.worst,
                tol: 1.0,
            }),
        })
        .collect();
    Ok((case.name, reports))
}

/// Runs every case and prints one line per series and quantity; exit 1 if any fails.
pub fn run(engine: &Engine, cases: &[PathBuf]) -> anyhow::Result<ExitCode> {
    println!(
        "{:<22} {:>6} {:<14} {:>7} {:>6} {:>10} {:>9}  verdict",
        "case", "series", "quantity", "values", "over", "max |Δ|", "worst/tol"
    );
    let (mut failed, mut checked) = (0, 0);
    let mut worst = std::collections::BTreeMap::<&'static str, f64>::new();
    for path in cases {
        let (case, q) = quantities(engine, path)?;
        for x in &q {
            checked += 1;
            let w = worst.entry(x.what).or_insert(0.0);
            *w = w.max(x.worst);
            let verdict = if x.ok() {
                "ok".to_string()
            } else {
                failed += 1;
                format!("FAIL: {} of {} ({})", x.failures, x.count, x.at)
            };
            println!(
                "{:<22} {:>6} {:<14} {:>7} {:>6} {:>10.2e} {:>9.3}  {verdict}",
                case.name, x.series, x.what, x.count, x.failures, x.max_abs, x.worst
            );
        }
    }
    let summary: Vec<String> = worst.iter().map(|(k, v)| format!("{k} {v:.3}")).collect();
    println!(
        "{} of {checked} checks passed ({} Kronos cases on {}; tokens exact, logits within {:.0e}·(1 + |ref|), rows \
         within {:.0e}·(σ + 1e-5) + {:.0e}·|ref|); worst ratio to the tolerance: {}",
        checked - failed,
        cases.len(),
        engine.info().label,
        golden::LOGITS_TAU,
        golden::ROWS_SIGMA,
        golden::ROWS_REL,
        summary.join(", ")
    );
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
