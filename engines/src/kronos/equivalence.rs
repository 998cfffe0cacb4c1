//! The engine against upstream on every reference fixture (`tests/fixtures/kronos/`, tests/reference/README.md,
//! "Kronos"): each config's checkpoints exported with one test profile, built into a CPU engine, and every case
//! run and compared ([`crate::kronos::golden`]): encode tokens and every path's tokens identical, logits within
//! τ, decoded rows within 1e-4·σ. Then the planted defects, each of which must fail one fixture by a token or by
//! ≥ 10× a tolerance; then the statistics of totoc's own noise against upstream's 1,000 paths; then determinism.

use std::path::{Path, PathBuf};

use exporter::export::ExportOptions;
use exporter::graph::Fp16Plan;
use exporter::profile::Profile;
use exporter::signature::Precision;
use exporter::variant::OpsetVariant;

use crate::backend::Target;
use crate::bundle::BuildOptions;
use crate::engine::{Engine, LoadOptions};
use crate::kronos::engine::KronosEngine;
use crate::kronos::golden::{check_case, CheckOptions, KronosCase, Quantity};

pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/kronos")
}

/// The test profile: every fixture case (up to 3 series of up to 150 rows, horizons up to 16, max_context up to
/// 128), a call of 9 series, 1,000 paths.
pub(crate) fn test_profile() -> Profile {
    Profile {
        name: "test".into(),
        batch: 9,
        variates: 1,
        context: 160,
        horizon: 24,
        samples: 1000,
        buckets: None,
        decode_block: None,
        family: Some(serde_json::json!({
            "window": 128,
            "encode": [{"rows": 1, "slots": 64}, {"rows": 1, "slots": 160}, {"rows": 9, "slots": 160}],
            "prefill": [{"rows": 1, "slots": 64}, {"rows": 1, "slots": 128}, {"rows": 9, "slots": 128}],
            "detokenize": [{"rows": 16, "slots": 128}, {"rows": 64, "slots": 128}],
            "rows": [1, 4, 16, 64],
        })),
    }
}

/// A CPU engine of fixture config `config` (`k10`, `k4`, `k5g5`, `k6te`) under `dir`.
pub(crate) fn engine(config: &str, dir: &Path) -> Engine {
    let root = fixtures().join(config);
    let bundle = dir.join("bundle");
    let opts = ExportOptions {
        checkpoint: root.join("predictor"),
        tokenizer: Some(root.join("tokenizer")),
        profiles: vec![test_profile()],
        out: bundle.clone(),
        precisions: vec![Precision::Fp32],
        variant: OpsetVariant::Opset24,
        fp16_plan: Fp16Plan::DEFAULT,
        int8_plan: None,
        force: true,
        golden: None,
    };
    exporter::registry::export_bundle(&opts, &mut |_| {}).unwrap();
    let out = dir.join("engine");
    let build = BuildOptions { force: true, ..BuildOptions::default() };
    crate::registry::build_engine(&bundle, &Target::cpu(None), &out, &build, &mut |_| {}).unwrap();
    Engine::load(&out, &LoadOptions::default()).unwrap()
}

pub(crate) fn kronos(engine: &Engine) -> &KronosEngine {
    engine.family_engine().as_any().downcast_ref::<KronosEngine>().expect("a Kronos engine")
}

/// Every case of `config`, in name order.
pub(crate) fn cases(config: &str) -> Vec<KronosCase> {
    let dir = fixtures().join(config).join("cases");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| {
            let mut c = KronosCase::read(p).unwrap();
            c.name = format!("{config}/{}", c.name);
            c
        })
        .collect()
}

/// Runs `case` and returns its quantities.
pub(crate) fn check(engine: &Engine, case: &KronosCase, opts: CheckOptions) -> Vec<Quantity> {
    check_case(kronos(engine), engine.call(), case, opts).unwrap_or_else(|e| panic!("{}: {e}", case.name))
}

/// Prints a case's quantities, one line each.
pub(crate) fn print(case: &str, q: &[Quantity]) {
    for x in q {
        eprintln!(
            "{case:<22} series {} {:<14} {:>6} values, {:>4} over, worst/tol {:>9.3} {}",
            x.series, x.what, x.count, x.failures, x.worst, x.at
        );
    }
}

#[test]
fn every_fixture_matches_upstream() {
    for config in ["k10", "k4", "k5g5", "k6te"] {
        let dir = tempfile::tempdir().unwrap();
        let e = engine(config, dir.path());
        for case in cases(config) {
            let q = check(&e, &case, CheckOptions::default());
            print(&case.name, &q);
            let bad: Vec<&Quantity> = q.iter().filter(|x| !x.ok()).collect();
            assert!(bad.is_empty(), "{}: {bad:?}", case.name);
        }
    }
}
