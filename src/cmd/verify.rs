//! `totoc verify`: runs golden toto-ts cases through an engine and compares the deterministic outputs.
use std::process::ExitCode;

use anyhow::{bail, Context};
use engines::engine::{Engine, LoadOptions, ModelFamily};
use engines::golden::{check_case, find_cases, GoldenCase, Tolerances};
use engines::toto2::golden::{self as golden2, Toto2Case};

use crate::cli::VerifyArgs;

pub fn run(a: VerifyArgs) -> anyhow::Result<ExitCode> {
    let dir = a.fixtures.clone().unwrap_or_else(|| a.engine.join("golden"));
    if !dir.is_dir() {
        bail!(
            "no golden cases at {}: pass --fixtures DIR (e.g. tests/fixtures/tiny/cases), or export with --golden DIR \
             so the bundle carries its own",
            dir.display()
        );
    }
    let cases = find_cases(&dir)?;
    if cases.is_empty() {
        bail!("{} holds no golden case (*.json)", dir.display());
    }
    let opts = LoadOptions { ort_lib: a.ort.ort_lib.clone(), ..LoadOptions::default() };
    let engine =
        Engine::load(&a.engine, &opts).with_context(|| format!("loading engine {}", a.engine.display()))?;
    if engine.info().model == ModelFamily::Toto2 {
        return verify_toto2(&engine, &cases);
    }
    let tol = Tolerances::for_precision(engine.manifest().precision);
    println!(
        "{:<28} {:<12} {:>6} {:>10} {:>10} {:>9}  verdict",
        "case", "output", "steps", "max |Δ|", "median", "worst/tol"
    );
    let (mut failed, mut checked) = (0, 0);
    for path in &cases {
        let case = GoldenCase::read(path)?;
        let reports =
            check_case(&engine, &case, &tol).with_context(|| format!("running {}", path.display()))?;
        // One row per output: the worst step.
        // Output names in first-seen order (reports come step by step).
        let mut seen = std::collections::BTreeSet::new();
        let names: Vec<&str> =
            reports.iter().map(|r| r.output.as_str()).filter(|n| seen.insert(*n)).collect();
        for name in names {
            let of: Vec<_> = reports.iter().filter(|r| r.output == name).collect();
            let max = of.iter().map(|r| r.max_abs).fold(0.0, f64::max);
            let med = of.iter().map(|r| r.median_abs).fold(0.0, f64::max);
            let ratio = of
                .iter()
                .filter_map(|r| r.worst.map(|w| if w.tol > 0.0 { w.error / w.tol } else { 0.0 }))
                .fold(0.0, f64::max);
            let bad: Vec<_> = of.iter().filter(|r| !r.passed()).collect();
            checked += 1;
            let verdict = if bad.is_empty() {
                "ok".to_string()
            } else {
                failed += 1;
                format!("FAIL: {}", bad[0].check().unwrap_err())
            };
            println!(
                "{:<28} {:<12} {:>6} {:>10.2e} {:>10.2e} {:>9.3}  {verdict}",
                case.name,
                name,
                of.len(),
                max,
                med,
                ratio
            );
        }
    }
    println!(
        "{} of {checked} output checks passed ({} cases on {}, mean tolerance {})",
        checked - failed,
        cases.len(),
        engine.info().label,
        tol.describe()
    );
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// Toto 2.0 golden cases (`tests/fixtures/toto2/<config>/cases`): the median and the nine quantiles of each case,
/// on the engine's profiles with the case's `decode_block`, within `1e-4·σ + 1e-6·|ref|`.
fn verify_toto2(engine: &Engine, cases: &[std::path::PathBuf]) -> anyhow::Result<ExitCode> {
    println!("{:<28} {:<8} {:>10} {:>10} {:>9}  verdict", "case", "output", "max |Δ|", "median", "worst/tol");
    let (mut failed, mut checked) = (0, 0);
    for path in cases {
        let case = Toto2Case::read(path)?;
        let reports =
            golden2::check_case(engine, &case).with_context(|| format!("running {}", path.display()))?;
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
        "{} of {checked} output checks passed ({} Toto 2.0 cases on {}, tolerance 1e-4·σ + 1e-6·|ref|)",
        checked - failed,
        cases.len(),
        engine.info().label
    );
    Ok(if failed == 0 { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
