//! Graph-level equivalence with toto-ts: every committed fixture config is exported, built for ONNX Runtime CPU
//! and run on every golden case through the forecast session (host scaler, rotary tables, mixture mean); every
//! step's mixture parameters and the mean forecast must match toto-ts's KV-cache path within
//! `1e-4·σ + 1e-6·|ref|`.
mod support;

use engines::golden::{check_case, find_cases, GoldenCase, Tolerances};
use exporter::graph::CacheUpdate;
use support::{cpu_engine, root};

fn check_config(config: &str, cache_update: CacheUpdate) {
    let tmp = tempfile::tempdir().unwrap();
    let f = cpu_engine(config, tmp.path(), cache_update);
    let cases = find_cases(&root().join("tests/fixtures").join(config).join("cases")).unwrap();
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for path in cases {
        let case = GoldenCase::read(&path).unwrap();
        let reports = check_case(&f, &case, &Tolerances::default()).unwrap();
        let worst = reports.iter().filter(|r| r.output == "mean").map(|r| r.max_abs).fold(0.0, f64::max);
        eprintln!("{config}/{}: {} checks, mean max |Δ| {worst:.2e}", case.name, reports.len());
        for r in reports.iter().filter(|r| !r.passed()) {
            failures.push(format!("{config}/{}: {r}", case.name));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn tiny_matches_toto() {
    check_config("tiny", CacheUpdate::TensorScatter);
}

#[test]
fn tiny_spacefirst_matches_toto() {
    check_config("tiny_spacefirst", CacheUpdate::TensorScatter);
}

#[test]
fn tiny_alltime_matches_toto() {
    check_config("tiny_alltime", CacheUpdate::TensorScatter);
}

#[test]
fn tiny64_matches_toto() {
    check_config("tiny64", CacheUpdate::TensorScatter);
}

#[test]
fn scatter_nd_variant_matches_toto() {
    check_config("tiny", CacheUpdate::ScatterNd);
}

/// Several requests packed into one call (different contexts, variate counts, horizons) give the same forecasts
/// as each request alone, within 1e-6 relative: they share prefill and decode runs.
#[test]
fn batching_matches_single_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let f = cpu_engine("tiny", tmp.path(), CacheUpdate::TensorScatter);
    let dir = root().join("tests/fixtures/tiny/cases");
    let reqs: Vec<_> = ["mean_4v_groups", "mean_short", "mean_1v"]
        .iter()
        .map(|n| GoldenCase::read(&dir.join(format!("{n}.json"))).unwrap().mean_request())
        .collect();
    let together: Vec<_> = f.forecast(reqs.clone()).into_iter().map(|r| r.unwrap()).collect();
    let runs = f.last_call();
    let prefill_runs =
        runs.iter().filter(|r| r.bucket.kind == exporter::signature::GraphKind::Prefill).count();
    assert!(prefill_runs < reqs.len(), "packed: {runs:?}");
    for (i, r) in reqs.iter().enumerate() {
        let alone = f.forecast(vec![r.clone()]).remove(0).unwrap();
        let (a, b) = (together[i].point(), alone.point());
        for (va, vb) in a.iter().zip(b) {
            for (x, y) in va.iter().zip(vb) {
                assert!((x - y).abs() <= 1e-6 * y.abs().max(1.0), "request {i}: {x} packed vs {y} alone");
            }
        }
    }
}
