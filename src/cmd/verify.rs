//! `totoc verify`: runs golden toto-ts cases through an engine and compares the deterministic outputs.
use std::process::ExitCode;

use anyhow::{bail, Context};
use engines::compare::{context_sigma, precision_errors};
use engines::engine::{Engine, LoadOptions, ModelFamily};
use engines::toto1::golden::{check_case, find_cases, GoldenCase, Tolerances};
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
    let other = match &a.compare_engine {
        Some(dir) => {
            Some(Engine::load(dir, &opts).with_context(|| format!("loading engine {}", dir.display()))?)
        }
        None => None,
    };
    let mut versus = Vec::new();
    println!(
        "{:<28} {:<12} {:>6} {:>10} {:>10} {:>9}  verdict",
        "case", "output", "steps", "max |Δ|", "median", "worst/tol"
    );
    let (mut failed, mut checked) = (0, 0);
    for path in &cases {
        let case = GoldenCase::read(path)?;
        let reports =
            check_case(&engine, &case, &tol).with_context(|| format!("running {}", path.display()))?;
        if let Some(other) = &other {
            versus.push((case.name.clone(), mean_vs(&engine, other, &case, &tol)?));
        }
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
    if let Some(other) = &other {
        println!("mean forecast vs {} (same tolerance; a report, not a verdict):", other.info().label);
        println!("{:<28} {:>12} {:>9}", "case", "max |Δ|/σ", "worst/tol");
        for (name, (per_sigma, ratio)) in &versus {
            println!("{name:<28} {per_sigma:>12.2e} {ratio:>9.3}");
        }
    }
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

/// The engine's mean forecast against `other`'s on `case`: max `|Δ|/σ` and the worst `|Δ|` / tolerance, with the
/// tolerance's σ rule (σ at least the scaler scale where `tol` says so).
fn mean_vs(
    engine: &Engine,
    other: &Engine,
    case: &GoldenCase,
    tol: &Tolerances,
) -> anyhow::Result<(f64, f64)> {
    let req = case.mean_request();
    let run = |e: &Engine| e.forecast_traced(vec![req.clone()], true).remove(0);
    let (a, b) = (run(engine)?, run(other)?);
    let sigma: Vec<f64> = req.target.iter().map(|s| context_sigma(s)).collect();
    let sigma_eff: Vec<f64> = match (tol.sigma_at_least_scale, b.steps.first()) {
        (true, Some(step0)) => {
            sigma.iter().zip(&step0.scaler_scale).map(|(s, c)| s.max(f64::from(*c))).collect()
        }
        _ => sigma.clone(),
    };
    let x: Vec<f32> = a.response.point().iter().flatten().copied().collect();
    let y: Vec<f32> = b.response.point().iter().flatten().copied().collect();
    let (ratio, per_sigma) = precision_errors(&x, &y, req.variates(), &sigma_eff, &sigma, &tol.mean)?;
    Ok((per_sigma, ratio))
}
