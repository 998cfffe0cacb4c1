//! `totoc verify` on a Toto 1.0 engine: golden toto-ts cases (mean forecast and per-step mixture parameters),
//! within the engine's precision's tolerances; with `--compare-engine`, the mean forecast against another engine.
use std::process::ExitCode;

use anyhow::Context;
use engines::compare::{context_sigma, precision_errors};
use engines::engine::{Engine, LoadOptions};
use engines::toto1::golden::{check_case, GoldenCase, Tolerances};

use crate::cli::VerifyArgs;

/// Checks every case of `cases` on `engine` and prints one row per case and output.
pub fn run(
    engine: &Engine,
    cases: &[std::path::PathBuf],
    a: &VerifyArgs,
    opts: &LoadOptions,
) -> anyhow::Result<ExitCode> {
    let tol = Tolerances::for_precision(engine.manifest().precision);
    let other = match &a.compare_engine {
        Some(dir) => {
            Some(Engine::load(dir, opts).with_context(|| format!("loading engine {}", dir.display()))?)
        }
        None => None,
    };
    let mut versus = Vec::new();
    println!(
        "{:<28} {:<12} {:>6} {:>10} {:>10} {:>9}  verdict",
        "case", "output", "steps", "max |Δ|", "median", "worst/tol"
    );
    let (mut failed, mut checked) = (0, 0);
    for path in cases {
        let case = GoldenCase::read(path)?;
        let reports =
            check_case(engine, &case, &tol).with_context(|| format!("running {}", path.display()))?;
        if let Some(other) = &other {
            versus.push((case.name.clone(), mean_vs(engine, other, &case, &tol)?));
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
