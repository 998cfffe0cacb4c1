//! Graph-level equivalence with toto-ts: every committed fixture config is exported, built for ONNX Runtime CPU
//! and run on every golden case through the forecast session (host scaler, rotary tables, mixture mean); every
//! step's mixture parameters and the mean forecast must match toto-ts's KV-cache path within
//! `1e-4·σ + 1e-6·|ref|`.
use std::path::{Path, PathBuf};

use engines::backend::Target;
use engines::engine_bundle::{build_engine, BuildOptions, EngineBundle};
use engines::forecaster::Forecaster;
use engines::golden::{check_case, find_cases, GoldenCase, Tolerances};
use exporter::export::{export, ExportOptions};
use exporter::graph::CacheUpdate;
use exporter::profile::ProfileSet;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Exports and builds `config`'s fixture checkpoint; returns a forecaster on the CPU engine.
pub fn cpu_forecaster(config: &str, dir: &Path, cache_update: CacheUpdate) -> Forecaster {
    let profiles = ProfileSet::from_file(&root().join("configs/tiny.yaml")).unwrap().profiles;
    let bundle = dir.join("bundle");
    let opts = ExportOptions {
        checkpoint: root().join("tests/fixtures").join(config).join("checkpoint"),
        profiles,
        out: bundle.clone(),
        cache_update,
        force: false,
    };
    export(&opts, &mut |_| {}).unwrap();
    let engine = dir.join("engine");
    build_engine(&bundle, &Target::cpu(Some(1)), &engine, &BuildOptions::default(), &mut |_| {}).unwrap();
    Forecaster::new(EngineBundle::load(&engine, None).unwrap())
}

fn check_config(config: &str, cache_update: CacheUpdate) {
    let tmp = tempfile::tempdir().unwrap();
    let mut f = cpu_forecaster(config, tmp.path(), cache_update);
    let cases = find_cases(&root().join("tests/fixtures").join(config).join("cases")).unwrap();
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for path in cases {
        let case = GoldenCase::read(&path).unwrap();
        let reports = check_case(&mut f, &case, &Tolerances::default()).unwrap();
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
