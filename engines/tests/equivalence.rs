//! Graph-level equivalence with toto-ts: every committed fixture config is exported, built for ONNX Runtime CPU
//! and run on every golden case through the forecast session (host scaler, rotary tables, mixture mean), on
//! **every** shape bucket the case fits (each prefill bucket, each decode bucket); every step's mixture
//! parameters and the mean forecast must match toto-ts's KV-cache path within `1e-4·σ + 1e-6·|ref|`.
mod support;

use engines::bundle::GraphForm;
use engines::compare::find_cases;
use engines::engine::{Engine, RunOptions};
use engines::plan::Pins;
use engines::request::ForecastRequest;
use engines::toto1::golden::{compare_forecast, GoldenCase, Tolerances};
use exporter::bucket::Bucket;
use exporter::graph::Fp16Plan;
use exporter::signature::GraphKind;
use exporter::signature::Precision;
use exporter::variant::OpsetVariant;
use support::{cpu_engine, cpu_engine_form, root};

/// The buckets of `engine` that can run `req`: prefill buckets holding its rows and context, decode buckets
/// holding its rows and cache (none when its horizon fits one patch).
fn fitting(engine: &Engine, req: &ForecastRequest) -> (Vec<Bucket>, Vec<Bucket>) {
    let p = engine.manifest().model.toto1().expect("a Toto 1.0 engine").patch_size;
    let (v, s, steps) = (req.variates(), req.context_len().div_ceil(p), req.horizon.div_ceil(p));
    let all = engine.buckets();
    let prefill =
        all.iter().filter(|b| b.kind == GraphKind::Prefill && b.rows >= v && b.slots >= s).copied().collect();
    let decode = all
        .iter()
        .filter(|b| b.kind == GraphKind::Decode && steps > 1 && b.rows >= v && b.slots >= s + steps - 1)
        .copied()
        .collect();
    (prefill, decode)
}

fn check_config(config: &str, variant: OpsetVariant) {
    let tmp = tempfile::tempdir().unwrap();
    check_engine(config, &cpu_engine(config, tmp.path(), variant));
}

fn check_engine(config: &str, f: &Engine) {
    let cases = find_cases(&root().join("tests/fixtures").join(config).join("cases")).unwrap();
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    for path in cases {
        let case = GoldenCase::read(&path).unwrap();
        let req = case.mean_request();
        let (prefill, decode) = fitting(f, &req);
        assert!(!prefill.is_empty(), "{}: no bucket", case.name);
        let pins = prefill
            .iter()
            .map(|&b| Pins { prefill: Some(b), decode: None })
            .chain(decode.iter().map(|&b| Pins { prefill: None, decode: Some(b) }));
        let mut worst = 0.0f64;
        let mut margin = 0.0f64;
        let mut runs = 0;
        for pins in pins {
            let opts = RunOptions { record_steps: true, pins, ..RunOptions::default() };
            let out = f.forecast_with(vec![req.clone()], opts).remove(0).unwrap();
            let reports = compare_forecast(&out, &case, &Tolerances::default()).unwrap();
            worst = reports.iter().filter(|r| r.output == "mean").map(|r| r.max_abs).fold(worst, f64::max);
            // |Δ|/tolerance of the worst value of any output: the margin a CPU with other kernels eats into
            margin = reports.iter().filter_map(|r| r.worst.map(|w| w.error / w.tol)).fold(margin, f64::max);
            runs += 1;
            for r in reports.iter().filter(|r| !r.passed()) {
                failures.push(format!("{config}/{} on {:?}: {r}", case.name, out.response.buckets));
            }
        }
        eprintln!(
            "{config}/{}: {runs} bucket runs, mean max |Δ| {worst:.2e}, worst |Δ|/tolerance {margin:.3}",
            case.name
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same request on the smallest buckets that hold it and on the profile's largest shapes: the same mean to
/// 1e-6 relative (padding rows, slots and cache length change nothing but summation order).
#[test]
fn smallest_and_largest_buckets_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let f = cpu_engine("tiny", tmp.path(), OpsetVariant::Opset24);
    let case = GoldenCase::read(&root().join("tests/fixtures/tiny/cases/mean_4v_groups.json")).unwrap();
    let req = case.mean_request();
    let (prefill, decode) = fitting(&f, &req);
    let smallest = Pins { prefill: prefill.first().copied(), decode: decode.first().copied() };
    let largest = Pins { prefill: prefill.last().copied(), decode: decode.last().copied() };
    assert_ne!(smallest, largest);
    let run = |pins| {
        f.forecast_with(vec![req.clone()], RunOptions { record_steps: false, pins, ..RunOptions::default() })
            .remove(0)
            .unwrap()
    };
    let (a, b) = (run(smallest), run(largest));
    assert_ne!(a.response.buckets, b.response.buckets);
    let mut worst = 0.0f64;
    for (va, vb) in a.response.point().iter().zip(b.response.point()) {
        for (x, y) in va.iter().zip(vb) {
            worst = worst.max(((x - y).abs() / y.abs().max(1e-6)) as f64);
        }
    }
    // The margin is printed so a CPU with other MLAS kernels shows how close it comes (docs/guide.md "CPUs").
    eprintln!(
        "{:?} vs {:?}: max relative difference {worst:.2e} = {:.3} of the 1e-6 bound",
        a.response.buckets,
        b.response.buckets,
        worst / 1e-6
    );
    assert!(worst <= 1e-6, "{worst}");
}

#[test]
fn tiny_matches_toto() {
    check_config("tiny", OpsetVariant::Opset24);
}

#[test]
fn tiny_spacefirst_matches_toto() {
    check_config("tiny_spacefirst", OpsetVariant::Opset24);
}

#[test]
fn tiny_alltime_matches_toto() {
    check_config("tiny_alltime", OpsetVariant::Opset24);
}

#[test]
fn tiny64_matches_toto() {
    check_config("tiny64", OpsetVariant::Opset24);
}

/// The shape-polymorphic graphs (what TensorRT engines are built from: one session per graph kind serving every
/// bucket, the time mask given by the host) on every bucket, fp32, against toto-ts.
#[test]
fn shared_dynamic_graphs_match_toto() {
    for config in ["tiny", "tiny64"] {
        let tmp = tempfile::tempdir().unwrap();
        let f = cpu_engine_form(
            config,
            tmp.path(),
            OpsetVariant::Opset24,
            Precision::Fp32,
            Fp16Plan::DEFAULT,
            GraphForm::Shared,
        );
        assert_eq!(f.manifest().graphs, GraphForm::Shared);
        assert!(f.manifest().family.graphs().all(|(_, g)| g.shared && g.file.starts_with("dynamic.")));
        check_engine(config, &f);
    }
}

#[test]
fn scatter_nd_variant_matches_toto() {
    check_config("tiny", OpsetVariant::Opset18);
}

/// Several requests packed into one call (different contexts, variate counts, horizons) give the same forecasts
/// as each request alone, within 1e-6 relative: they share prefill and decode runs.
#[test]
fn batching_matches_single_requests() {
    let tmp = tempfile::tempdir().unwrap();
    let f = cpu_engine("tiny", tmp.path(), OpsetVariant::Opset24);
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
    let mut worst = 0.0f64;
    for (i, r) in reqs.iter().enumerate() {
        let alone = f.forecast(vec![r.clone()]).remove(0).unwrap();
        let (a, b) = (together[i].point(), alone.point());
        for (va, vb) in a.iter().zip(b) {
            for (x, y) in va.iter().zip(vb) {
                let tol = 1e-6 * y.abs().max(1.0);
                worst = worst.max(f64::from((x - y).abs() / tol));
                assert!((x - y).abs() <= tol, "request {i}: {x} packed vs {y} alone");
            }
        }
    }
    eprintln!("packed vs alone: worst |Δ| = {worst:.3} of the 1e-6·max(|ref|, 1) bound");
}
