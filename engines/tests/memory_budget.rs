//! The memory budget: an engine keeps its weights and loaded buckets within it. Work that would need a bucket
//! beyond the budget runs as several passes on the buckets that fit (same results: each sample path is its own
//! seeded stream), and work that fits no bucket within the budget is refused with a clear error — never an
//! allocation the process cannot hold.
mod support;

use engines::engine::{Engine, LoadOptions};
use engines::request::ForecastRequest;
use engines::toto1::golden::GoldenCase;
use exporter::signature::GraphKind;
use exporter::variant::OpsetVariant;
use support::{cpu_engine, root};

fn sampled_request() -> ForecastRequest {
    let case = GoldenCase::read(&root().join("tests/fixtures/tiny/cases/sampled_256.json")).unwrap();
    case.request
}

#[test]
fn a_small_budget_splits_sample_paths_into_passes_with_the_same_results() {
    let tmp = tempfile::tempdir().unwrap();
    let full = cpu_engine("tiny", tmp.path(), OpsetVariant::Opset24);
    let req = sampled_request();
    let want = full.forecast(vec![req.clone()]).remove(0).unwrap();
    let passes = |e: &Engine| e.last_call().iter().filter(|r| r.bucket.kind == GraphKind::Prefill).count();
    assert_eq!(passes(&full), 1);

    // A budget with room for the 64-row decode bucket but not the 128- or 256-row ones.
    let m = full.manifest();
    let mem = |rows: usize| {
        m.family
            .graphs()
            .map(|(_, g)| g)
            .filter(|g| g.bucket.kind == GraphKind::Decode && g.bucket.rows == rows && g.bucket.slots == 11)
            .map(|g| g.memory_bytes)
            .next()
            .unwrap()
    };
    let largest_prefill = m
        .family
        .graphs()
        .filter(|(_, g)| g.bucket.kind == GraphKind::Prefill)
        .map(|(_, g)| g.memory_bytes)
        .max()
        .unwrap();
    let budget = m.weights_bytes + mem(64) + largest_prefill;
    assert!(budget < m.weights_bytes + mem(128) + largest_prefill);
    let small =
        Engine::load(full.dir(), &LoadOptions { memory_budget: Some(budget), ..LoadOptions::default() })
            .unwrap();
    assert!(small.buckets().iter().all(|b| b.kind == GraphKind::Prefill || b.rows <= 64));
    let got = small.forecast(vec![req.clone()]).remove(0).unwrap();
    let runs = small.last_call();
    let decode_rows: Vec<usize> =
        runs.iter().filter(|r| r.bucket.kind == GraphKind::Decode).map(|r| r.bucket.rows).collect();
    assert!(decode_rows.iter().all(|&r| r <= 64), "{decode_rows:?}");
    assert!(passes(&small) >= 256 * req.variates() / 64, "one prefill per pass: {runs:?}");
    // The same paths, however they are split: equal up to the summation order of a different bucket size
    // (measured: 2 of 12,288 values differ, by ~1e-8), within 1e-6 of |value| + the scale the model's outputs
    // are de-normalised with (the scaler's, ≥ √0.1 here: far above this tiny series' σ of 0.002).
    let (a, b) = (got.samples.unwrap(), want.samples.unwrap());
    let cfg = engines::toto1::engine::scaler_config(full.manifest().model.toto1().expect("Toto 1.0"));
    let sigma: Vec<f64> = req
        .target
        .iter()
        .map(|s| f64::from(engines::host::scaler::CausalScaler::prefill(&cfg, s).0.last_stats().scale))
        .collect();
    let mut worst = 0.0f64;
    for (x, y) in a.iter().zip(&b) {
        for (v, (xs, ys)) in x.iter().zip(y).enumerate() {
            for (&u, &w) in xs.iter().zip(ys) {
                let tol = 1e-6 * (f64::from(w.abs()) + sigma[v]);
                worst = worst.max(f64::from((u - w).abs()) / tol);
            }
        }
    }
    assert!(worst <= 1.0, "worst difference / tolerance {worst}");
    for (x, y) in got.mean.unwrap()[0].iter().zip(&want.mean.unwrap()[0]) {
        assert!((x - y).abs() <= 1e-6 * (y.abs() + sigma[0] as f32), "{x} vs {y}");
    }
}

#[test]
fn work_that_fits_no_bucket_within_the_budget_is_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let full = cpu_engine("tiny", tmp.path(), OpsetVariant::Opset24);
    let m = full.manifest();
    // Room for the prefill buckets only: no decode bucket fits beside the largest prefill.
    let prefill = m
        .family
        .graphs()
        .filter(|(_, g)| g.bucket.kind == GraphKind::Prefill)
        .map(|(_, g)| g.memory_bytes)
        .max()
        .unwrap();
    let budget = m.weights_bytes + prefill;
    let e = Engine::load(full.dir(), &LoadOptions { memory_budget: Some(budget), ..LoadOptions::default() })
        .unwrap();
    assert!(e.buckets().iter().all(|b| b.kind == GraphKind::Prefill));
    // one patch: runs (prefill only); a longer horizon: refused, naming what it needs and the budget
    let mut one = sampled_request();
    one.horizon = 16;
    assert!(e.forecast(vec![one.clone()]).remove(0).is_ok());
    let long = ForecastRequest { horizon: 64, ..one };
    let err = e.forecast(vec![long]).remove(0).unwrap_err().to_string();
    assert!(err.contains("needs a decode") && err.contains("memory budget"), "{err}");
    // and a budget below the weights refuses to load at all
    let err = Engine::load(
        full.dir(),
        &LoadOptions { memory_budget: Some(m.weights_bytes), ..LoadOptions::default() },
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("exceed the memory budget") && err.contains("--memory-budget"), "{err}");
}
