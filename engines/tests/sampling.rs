//! Sampled forecasts against toto-ts: the sample paths cannot share torch's RNG stream, so they are compared as
//! distributions — a two-sample Kolmogorov–Smirnov test per horizon step (α = 0.01) against toto-ts's samples for
//! the same input, and the sample mean against toto-ts's within a few standard errors. Also: a perturbed engine
//! output makes the equivalence check fail with a message naming the output, step and error size.
mod support;

use engines::compare::find_cases;
use engines::toto1::golden::{compare_forecast, GoldenCase, Tolerances};
use exporter::variant::OpsetVariant;

use support::cpu_engine;
use support::ks::{check_samples, ks_critical, ks_statistic};

#[test]
fn ks_test_per_horizon_step_against_toto_samples() {
    let tmp = tempfile::tempdir().unwrap();
    let f = cpu_engine("tiny", tmp.path(), OpsetVariant::Opset24);
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("tests/fixtures/tiny/cases");
    for name in ["sampled_256", "sampled_2v"] {
        let case = GoldenCase::read(&root.join(format!("{name}.json"))).unwrap();
        let s = check_samples(&f, &case).unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "{name}: {} paths, {} steps: {} per-step rejections at α=0.01, worst KS D/crit {:.2}, worst mean z {:.2}",
            s.paths, s.steps, s.rejections, s.worst, s.worst_z
        );
    }
}

#[test]
#[ignore = "diagnostic: KS ratios over many seeds"]
fn ks_diagnostic_many_seeds() {
    let tmp = tempfile::tempdir().unwrap();
    let f = cpu_engine("tiny", tmp.path(), OpsetVariant::Opset24);
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("tests/fixtures/tiny/cases");
    let case = GoldenCase::read(&root.join("sampled_256.json")).unwrap();
    let theirs = case.reference.samples.clone().unwrap();
    for seed in 0..8u64 {
        let mut req = case.request.clone();
        req.seed = seed;
        let ours = f.forecast(vec![req.clone()]).remove(0).unwrap().samples.unwrap();
        let ratios: Vec<f64> = (0..req.horizon)
            .map(|t| {
                let a: Vec<f32> = ours.iter().map(|p| p[0][t]).collect();
                let b: Vec<f32> = theirs.iter().map(|p| p[0][t]).collect();
                ks_statistic(&a, &b) / ks_critical(a.len(), b.len())
            })
            .collect();
        let fails = ratios.iter().filter(|r| **r > 1.0).count();
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        eprintln!(
            "seed {seed}: fails {fails}/48, mean D/crit {mean:.2}, first16 {:?}",
            ratios.iter().take(16).map(|r| (r * 100.0).round() / 100.0).collect::<Vec<_>>()
        );
    }
}

#[test]
fn same_seed_same_paths_other_seed_other_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let f = cpu_engine("tiny", tmp.path(), OpsetVariant::Opset24);
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("tests/fixtures/tiny/cases");
    let case = GoldenCase::read(&root.join("sampled_2v.json")).unwrap();
    let a = f.forecast(vec![case.request.clone()]).remove(0).unwrap().samples;
    let b = f.forecast(vec![case.request.clone()]).remove(0).unwrap().samples;
    assert_eq!(a, b);
    let mut other = case.request.clone();
    other.seed += 1;
    let c = f.forecast(vec![other.clone()]).remove(0).unwrap().samples;
    assert_ne!(a, c);
}

#[test]
fn a_perturbed_engine_output_fails_naming_output_step_and_error() {
    let tmp = tempfile::tempdir().unwrap();
    let f = cpu_engine("tiny", tmp.path(), OpsetVariant::Opset24);
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("tests/fixtures/tiny/cases");
    let path = find_cases(&root).unwrap().into_iter().find(|p| p.ends_with("mean_4v_groups.json")).unwrap();
    let case = GoldenCase::read(&path).unwrap();
    let mut out = f.forecast_traced(vec![case.mean_request()], true).remove(0).unwrap();
    let tol = Tolerances::default();
    assert!(compare_forecast(&out, &case, &tol).unwrap().iter().all(|r| r.passed()));
    // One mixture location of variate 2, step 1, off by 0.01 (scaled units).
    let (p, k) = (16, 4);
    out.steps[1].loc[2 * p * k + 5 * k + 1] += 0.01;
    let reports = compare_forecast(&out, &case, &tol).unwrap();
    let bad: Vec<_> = reports.iter().filter(|r| !r.passed()).collect();
    assert_eq!(bad.len(), 1, "{bad:?}");
    let msg = bad[0].check().unwrap_err().to_string();
    assert!(
        msg.contains("loc") && msg.contains("step 1") && msg.contains("variate 2") && msg.contains("1.0e-2"),
        "{msg}"
    );
}
