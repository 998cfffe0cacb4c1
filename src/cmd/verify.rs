//! `totoc verify`: runs golden toto-ts cases through an engine and compares the deterministic outputs.
use std::process::ExitCode;

use anyhow::{bail, Context};
use engines::engine::{Engine, LoadOptions};
use engines::golden::{check_case, find_cases, GoldenCase, Tolerances};

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
