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
/// 128), a call of 9 series, 1,000 paths; long passes in spans of 64 positions.
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
            // long passes in spans of one query block: every fixture's encode, prefill, recompute and detokenize
            // runs in several
            "span": 64,
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

/// Whether `q` shows a defect: a token that differs, or a value at least 10× its tolerance.
fn caught(q: &[Quantity]) -> Option<&Quantity> {
    q.iter().filter(|x| x.worst >= 10.0).max_by(|a, b| a.worst.total_cmp(&b.worst))
}

fn case(config: &str, name: &str) -> KronosCase {
    let mut c =
        KronosCase::read(&fixtures().join(config).join("cases").join(format!("{name}.json"))).unwrap();
    c.name = format!("{config}/{name}");
    c
}

#[test]
fn planted_defects_fail_a_fixture() {
    use crate::kronos::defects::{plant, Defects};
    let dir = tempfile::tempdir().unwrap();
    let (k10, k4) = (engine("k10", &dir.path().join("k10")), engine("k4", &dir.path().join("k4")));
    let off = Defects::default();
    let defects = [
        ("bits MSB-first", Defects { bits_msb_first: true, ..off }, vec!["k10/greedy_daily"]),
        ("the dependency layer causal", Defects { dep_causal: true, ..off }, vec!["k10/greedy_daily"]),
        ("the next row's stamp", Defects { next_stamp: true, ..off }, vec!["k4/greedy_intraday"]),
        ("std with ddof 1", Defects { std_ddof1: true, ..off }, vec!["k10/greedy_daily"]),
        (
            "temperature after filtering",
            Defects { temperature_after_filter: true, ..off },
            vec!["k10/topp_t07", "k4/samples4"],
        ),
        (
            "top-p without the right shift",
            Defects { top_p_no_shift: true, ..off },
            vec!["k10/topp_t07", "k4/samples4"],
        ),
        (
            "the window after the slide off by one",
            Defects { slide_off_by_one: true, ..off },
            vec!["k10/slide"],
        ),
        (
            "the final decode over the wrong window",
            Defects { final_window_wrong: true, ..off },
            vec!["k10/slide"],
        ),
    ];
    for (what, d, fixtures) in defects {
        let mut hits = Vec::new();
        for f in &fixtures {
            let (config, name) = f.split_once('/').unwrap();
            let e = if config == "k10" { &k10 } else { &k4 };
            let c = case(config, name);
            let clean = check(e, &c, CheckOptions::default());
            assert!(clean.iter().all(Quantity::ok), "{}: fails without the defect", c.name);
            let q = {
                let _planted = plant(d);
                check(e, &c, CheckOptions::default())
            };
            match caught(&q) {
                Some(hit) => {
                    eprintln!(
                        "{what:<40} {:<18} {} series {}: worst/tol {:.1} ({} of {} over)",
                        c.name, hit.what, hit.series, hit.worst, hit.failures, hit.count
                    );
                    hits.push(c.name.clone());
                }
                None => eprintln!("{what:<40} {:<18} not caught", c.name),
            }
        }
        assert!(!hits.is_empty(), "{what}: no fixture of {fixtures:?} fails by a token or 10× a tolerance");
    }
    // a graph defect: the dependency query scaled by √D (its export only)
    exporter::kronos::graph::planted::scale_dep_query(true);
    let scaled = engine("k10", &dir.path().join("k10-scaled"));
    exporter::kronos::graph::planted::scale_dep_query(false);
    let c = case("k10", "greedy_daily");
    let q = check(&scaled, &c, CheckOptions::default());
    let hit = caught(&q).expect("the dependency query × √D does not fail k10/greedy_daily");
    eprintln!(
        "{:<40} {:<18} {} series {}: worst/tol {:.1}",
        "the dependency query × √D", c.name, hit.what, hit.series, hit.worst
    );
}

/// The Kolmogorov distribution's survival function Q(λ) = 2 Σ (−1)^(k−1) e^(−2k²λ²).
fn kolmogorov_q(lambda: f64) -> f64 {
    if lambda < 0.2 {
        return 1.0;
    }
    let sum: f64 = (1..=100)
        .map(|k| (if k % 2 == 1 { 1.0 } else { -1.0 }) * (-2.0 * (k * k) as f64 * lambda * lambda).exp())
        .sum();
    (2.0 * sum).clamp(0.0, 1.0)
}

/// The two-sample Kolmogorov–Smirnov statistic D of `a` and `b` and its asymptotic p-value (Stephens' small-sample
/// correction of λ).
fn ks_two_sample(a: &mut [f64], b: &mut [f64]) -> (f64, f64) {
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let (n, m) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / n - j as f64 / m).abs());
    }
    let ne = (n * m / (n + m)).sqrt();
    (d, kolmogorov_q((ne + 0.12 + 0.11 / ne) * d))
}

/// The standard normal's upper quantile z with P(Z > z) = `p` (bisection on erfc, Abramowitz–Stegun 7.1.26).
fn normal_upper_quantile(p: f64) -> f64 {
    let erfc = |x: f64| {
        let t = 1.0 / (1.0 + 0.327_591_1 * x);
        let poly = t
            * (0.254_829_592
                + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
        poly * (-x * x).exp()
    };
    let (mut lo, mut hi) = (0.0, 10.0);
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if 0.5 * erfc(mid / std::f64::consts::SQRT_2) > p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// totoc's own noise over the whole chain: 1,000 paths of every sampled fixture's request (its seed, its
/// settings) against upstream's stored 1,000 (`<case>.paths.safetensors`): per step and column a two-sample KS
/// test (Bonferroni over steps × columns, family-wise α = 0.01), and each column's horizon mean (per path, the
/// mean over the steps) within a Bonferroni-corrected z bound (six columns, α = 0.01).
#[test]
fn own_paths_follow_upstreams_1000() {
    const PATHS: usize = 1000;
    const ALPHA: f64 = 0.01;
    let dir = tempfile::tempdir().unwrap();
    let mut engines: Vec<(&str, Engine)> = Vec::new();
    for f in ["k10/topp_t07", "k4/topk5", "k4/unfiltered", "k4/samples4", "k5g5/topp_t07"] {
        let (config, name) = f.split_once('/').unwrap();
        if !engines.iter().any(|(c, _)| *c == config) {
            engines.push((config, engine(config, &dir.path().join(config))));
        }
        let e = &engines.iter().find(|(c, _)| *c == config).unwrap().1;
        let c = case(config, name);
        let request = crate::request::RequestFields { samples: Some(PATHS), ..c.requests[0].clone() };
        let job = kronos(e).job_of_fields(request, f).unwrap();
        let t0 = std::time::Instant::now();
        let got = kronos(e).forecast_jobs(e.call(), &[&job], Default::default(), None).remove(0).unwrap();
        let runs = e.last_call();
        let graph_s: f64 = runs.iter().map(|r| r.seconds).sum();
        eprintln!(
            "{f}: {PATHS} paths in {:.2} s ({} graph runs, {graph_s:.2} s)",
            t0.elapsed().as_secs_f64(),
            runs.len()
        );
        let up_file = fixtures().join(config).join("cases").join(format!("{name}.paths.safetensors"));
        let arrays = exporter::safetensors::read_tensors(&up_file).unwrap();
        let up = arrays.iter().find(|a| a.name == "series.0.paths").unwrap();
        let up: Vec<f32> =
            up.bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        let h = job.horizon;
        assert_eq!((got.forecast.paths.len(), up.len()), (PATHS * h * 6, PATHS * h * 6), "{f}");
        let value = |v: &[f32], p: usize, t: usize, col: usize| f64::from(v[(p * h + t) * 6 + col]);
        // per step and column: KS, Bonferroni over h × 6 tests
        let per_test = ALPHA / (h * 6) as f64;
        let mut worst = (1.0f64, 0, 0, 0.0);
        for t in 0..h {
            for col in 0..6 {
                let mut a: Vec<f64> = (0..PATHS).map(|p| value(&got.forecast.paths, p, t, col)).collect();
                let mut b: Vec<f64> = (0..PATHS).map(|p| value(&up, p, t, col)).collect();
                let (d, pv) = ks_two_sample(&mut a, &mut b);
                if pv < worst.0 {
                    worst = (pv, t, col, d);
                }
            }
        }
        eprintln!(
            "{f}: smallest KS p {:.4} (step {}, column {}, D {:.4}); per-test α {per_test:.2e}",
            worst.0, worst.1, worst.2, worst.3
        );
        assert!(
            worst.0 >= per_test,
            "{f}: KS step {} column {}: D {:.4}, p {:.2e} < {per_test:.2e}",
            worst.1,
            worst.2,
            worst.3,
            worst.0
        );
        // each column's horizon mean: Welch's z, Bonferroni over 6 columns
        let bound = normal_upper_quantile(ALPHA / 12.0);
        for col in 0..6 {
            let mean_of = |v: &[f32]| -> Vec<f64> {
                (0..PATHS).map(|p| (0..h).map(|t| value(v, p, t, col)).sum::<f64>() / h as f64).collect()
            };
            let (a, b) = (mean_of(&got.forecast.paths), mean_of(&up));
            let stats = |x: &[f64]| {
                let m = x.iter().sum::<f64>() / x.len() as f64;
                (m, x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / (x.len() - 1) as f64)
            };
            let ((ma, va), (mb, vb)) = (stats(&a), stats(&b));
            let se = (va / PATHS as f64 + vb / PATHS as f64).sqrt();
            let z = if se > 0.0 { (ma - mb) / se } else { 0.0 };
            eprintln!(
                "{f}: column {col} horizon mean {ma:.6e} vs upstream {mb:.6e}: z = {z:.2} (bound {bound:.2})"
            );
            assert!(z.abs() <= bound, "{f}: column {col}: z {z:.2} beyond {bound:.2}");
        }
    }
}

/// Determinism: a series' paths (its seed, its settings) are bitwise the same alone, in a call with 8 other series
/// of other lengths, horizons and sample counts, and on other buckets (lanes of 1, 16 and 64 rows, every window
/// on the largest slots, every item in a run of its own); and every series of that ragged call equals itself
/// alone, bitwise.
#[test]
fn paths_do_not_depend_on_the_call_or_the_buckets() {
    use crate::kronos::hooks::Hooks;
    use crate::kronos::plan::KronosPins;
    let dir = tempfile::tempdir().unwrap();
    let e = engine("k4", dir.path());
    let k = kronos(&e);
    let mut jobs = Vec::new();
    for name in ["samples4", "greedy_intraday", "topk5", "unfiltered", "ragged", "batch"] {
        let c = case("k4", name);
        for (b, r) in c.requests.iter().enumerate() {
            jobs.push(k.job_of_fields(r.clone(), &format!("{name} {b}")).unwrap());
        }
    }
    jobs.truncate(9);
    let lengths: Vec<(usize, usize, usize)> = jobs.iter().map(|j| (j.rows(), j.horizon, j.samples)).collect();
    eprintln!("series (N, H, samples): {lengths:?}");
    let bits = |f: &crate::kronos::driver::SeriesForecast| -> Vec<u32> {
        f.forecast.paths.iter().chain(&f.forecast.mean).map(|x| x.to_bits()).collect()
    };
    let run = |jobs: &[&crate::kronos::job::KronosJob], pins: KronosPins| -> Vec<Vec<u32>> {
        let hooks = Hooks { pins, ..Hooks::default() };
        k.forecast_jobs(e.call(), jobs, hooks, None).into_iter().map(|r| bits(&r.unwrap())).collect()
    };
    let alone: Vec<Vec<u32>> = jobs.iter().map(|j| run(&[j], KronosPins::default()).remove(0)).collect();
    let released = crate::memory::heap_releases();
    let together = run(&jobs.iter().collect::<Vec<_>>(), KronosPins::default());
    let released = crate::memory::heap_releases() - released;
    for (b, (a, t)) in alone.iter().zip(&together).enumerate() {
        assert_eq!(a, t, "series {b} {:?}: in the ragged call of 9 it differs from alone", lengths[b]);
    }
    estimates_are_the_runs_the_call_made(&e, &jobs);
    // memory: every prefill and recompute run gives its freed activations back before the next run (the count is
    // this thread's: the call runs here)
    use exporter::signature::GraphKind::{Prefill, Recompute};
    let one_off = e.last_call().iter().filter(|r| matches!(r.bucket.kind, Prefill | Recompute)).count();
    assert!(released >= one_off, "{released} heap releases for {one_off} prefill and recompute runs");
    let sampled = &jobs[0];
    assert!(sampled.samples == 4, "the first series samples");
    for pins in [
        KronosPins { rows: Some(1), largest_slots: true, alone: true },
        KronosPins { rows: Some(16), ..KronosPins::default() },
        KronosPins { rows: Some(64), largest_slots: true, alone: false },
    ] {
        assert_eq!(run(&[sampled], pins).remove(0), alone[0], "{pins:?}");
        let all = run(&jobs.iter().collect::<Vec<_>>(), pins);
        assert_eq!(all, alone, "the ragged call on {pins:?}");
    }
    // another seed draws other paths (the comparison above can fail)
    let mut other = sampled.clone();
    other.seed += 1;
    assert_ne!(run(&[&other], KronosPins::default()).remove(0), alone[0]);
}

/// Memory: once a path's window slides it recomputes every step and never reads its layers' caches again, so the
/// driver gives their pages back (they read as zeros); the dependency caches, which each recompute rewrites and the
/// refine graph reads, stay. A path that never slides keeps its layers' caches.
#[test]
fn a_slid_paths_layer_caches_are_given_back() {
    use exporter::bucket::Bucket;
    use exporter::kronos::signature::{dep_k_cache, dep_v_cache};
    use exporter::signature::GraphKind;
    let dir = tempfile::tempdir().unwrap();
    let e = engine("k10", dir.path());
    let k = kronos(&e);
    let window = test_profile().family.unwrap()["window"].as_u64().unwrap() as usize;
    let decode = Bucket::of(GraphKind::Decode, 1, window);
    // (layer caches, all of them zeros, the dependency key cache zeros) of the one-row decode graph
    let caches = || {
        k.inspect_loaded(decode, |r| {
            let zero = |n: &str| r.input::<f32>(n).unwrap().iter().all(|&x| x == 0.0);
            let layers: Vec<&str> =
                r.cache_inputs().filter(|n| *n != dep_k_cache(false) && *n != dep_v_cache(false)).collect();
            (layers.len(), layers.iter().all(|n| zero(n)), zero(&dep_k_cache(false)))
        })
        .expect("the decode graph of one row is loaded")
    };
    let forecast = |name: &str| {
        let c = case("k10", name);
        let job = k.job_of_fields(c.requests[0].clone(), name).unwrap();
        k.forecast_jobs(e.call(), &[&job], Default::default(), None).remove(0).unwrap();
    };
    // never slides (64 + 16 rows within max_context 128): the caches hold the last step's
    forecast("greedy_daily");
    let (layers, layers_zero, dep_zero) = caches();
    assert!(layers >= 2 && !layers_zero && !dep_zero, "{:?}", caches());
    // slides (56 + 16 rows, max_context 64)
    forecast("slide");
    assert_eq!(
        caches(),
        (layers, true, false),
        "a slid path's layer caches are given back, its dependency cache kept"
    );
}

/// Cost (`crate::cost`): the estimate of the ragged call just run (its series' counts) is the runs it made, graph
/// by graph; every graph has a measured rate of its rows, so the engine prices what it plans; the counts the
/// server passes (no `max_context`: the default, here the window) give the same plan for series at the default.
fn estimates_are_the_runs_the_call_made(e: &Engine, jobs: &[crate::kronos::job::KronosJob]) {
    use std::collections::BTreeMap;
    let k = kronos(e);
    let counts = |j: &crate::kronos::job::KronosJob| crate::kronos::plan::SeriesCounts {
        rows: j.rows(),
        horizon: j.horizon,
        paths: j.paths(),
        max_context: j.max_context,
    };
    let estimate = k.estimate_counts(&jobs.iter().map(counts).collect::<Vec<_>>()).expect("an estimate");
    let mut ran: BTreeMap<String, u64> = BTreeMap::new();
    for run in e.last_call() {
        *ran.entry(e.bucket_name(run.bucket)).or_default() += 1;
    }
    let want: BTreeMap<String, u64> = estimate.graphs.iter().map(|g| (g.graph.clone(), g.runs)).collect();
    assert_eq!(want, ran, "estimated runs (left) against the call's runs (right)");
    assert!(ran.keys().any(|g| g.contains("recompute")), "the call slides: {ran:?}");
    let rates = e.measure_rates().unwrap();
    assert_eq!(rates.graphs.len(), e.buckets().len(), "one rate per graph");
    for g in &estimate.graphs {
        let r = rates.get(&g.graph).unwrap_or_else(|| panic!("no rate for {}", g.graph));
        assert_eq!(g.row_steps, g.runs * r.rows as u64, "{}", g.graph);
    }
    let window = k.job_limits().window;
    let at_default: Vec<crate::kronos::job::KronosJob> =
        jobs.iter().map(|j| crate::kronos::job::KronosJob { max_context: window, ..j.clone() }).collect();
    let sizes: Vec<crate::budget::RequestSize> = at_default
        .iter()
        .map(|j| crate::budget::RequestSize {
            series: 1,
            variates: 1,
            context: j.rows(),
            horizon: j.horizon,
            samples: j.samples,
            quantiles: 0,
            max_context: None,
        })
        .collect();
    let ours = k.estimate_counts(&at_default.iter().map(counts).collect::<Vec<_>>());
    assert_eq!(e.estimate(&sizes), ours);
    // a request's own `params.max_context` is estimated at that window
    let own: Vec<crate::budget::RequestSize> = jobs
        .iter()
        .zip(&sizes)
        .map(|(j, s)| crate::budget::RequestSize { max_context: Some(j.max_context), ..*s })
        .collect();
    assert_eq!(e.estimate(&own), k.estimate_counts(&jobs.iter().map(counts).collect::<Vec<_>>()));
    assert!(e.estimate_seconds(&sizes).is_some_and(|t| t > 0.0));
}
