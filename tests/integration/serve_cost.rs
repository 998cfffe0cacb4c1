//! Cost in seconds (issue 36, class 5) with `totoc serve`'s default limits and deadline on the tiny engine: the
//! ~1 KB request that costs far more than its bytes (44 series × 4 variates of one point each, horizon 160, 256
//! sample paths, binary outputs: about the most the memory one client may hold lets one request ask for) is
//! refused up front — 429 (RESOURCE_EXHAUSTED over gRPC: `serve_hostile`, class 5) — naming its estimate, the
//! time it may take and the smallest changes that fit; every golden case and the
//! README's examples (the tour's CO2 forecast, the tritonclient call at the tiny engine's longest horizon) are
//! admitted and answered; the model metadata reports the graph rates measured at warm-up. Then the commands that
//! show the cost model: `totoc bundle info --measure-rates` and `totoc bench cost`.
//!
//! The refusal rests on the engine's measured speed: the request's estimate is 20–50 s on the 2-core reference
//! machine (docs/serving.md, "Cost in seconds") and a request over 13.5 s is refused (twice its estimate must fit
//! the 30 s deadline less its tenth), so it holds on a machine up to ~1.5× faster than that machine at its best;
//! on a much faster one the request would finish within the deadline and admitting it would be right. (Asked with
//! JSON outputs, or as 100 `/v1/forecast` lines, the same work is refused earlier, for the memory its answer
//! would hold: `--max-response-bytes`, `--max-bytes-per-peer`.)
use std::fs;

use serde_json::{json, Value};

use crate::common::{root, totoc_err, totoc_ok};
use crate::serve::{case, engine, error_of, get, metric, post, post_json, Server};

/// The class-5 request: ~1 KB of JSON.
fn class5() -> Value {
    json!({"parameters": {"horizon": 160, "samples": 256, "binary_data_output": true},
           "inputs": [{"name": "target", "datatype": "FP32", "shape": [44, 4, 1], "data": vec![1; 176]}]})
}

#[test]
fn the_class_5_request_is_refused_up_front_and_the_examples_are_admitted() {
    let s = Server::ready(engine(), &[]);
    // The rates measured at warm-up, one per bucket.
    let (status, meta) = get(&s.url("/v2/models/toto"));
    assert_eq!(status, 200);
    let meta: Value = serde_json::from_str(&meta).unwrap();
    let rates = meta["parameters"]["rates"]["graphs"].as_array().expect("rates measured at warm-up");
    assert_eq!(rates.len(), 16, "the tiny engine's 16 bucket graphs: {rates:?}");
    for r in rates {
        assert!(r["seconds_per_run"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["graph"].as_str().unwrap().contains(".n"), "{r}");
    }

    let body = class5().to_string();
    assert!(body.len() < 1024, "at most 1 KB: {} bytes", body.len());
    let t = std::time::Instant::now();
    let (status, headers, out) = post(&s.url("/v2/models/toto/infer"), &[], body.as_bytes());
    let e = error_of(&out);
    eprintln!("class 5, {} bytes: {status} in {:?}: {e}", body.len(), t.elapsed());
    assert_eq!(status, 429, "{e}");
    assert!(!headers.contains_key("retry-after"), "waiting cannot help");
    assert!(e.contains("estimated engine time is") && e.contains("2× that must fit"), "{e}");
    assert!(e.contains("it fits with") && e.contains("(it asks 256)"), "{e}");
    assert!(t.elapsed().as_secs() < 5, "refused up front, not after running: {:?}", t.elapsed());
    assert_eq!(metric(&s.metrics(), "totoc_rejected_total{reason=\"estimated_time\"}"), 1.0);

    // Every golden case, alone and all at once.
    let names = ["mean_1v", "mean_4v_groups", "mean_short", "sampled_256", "sampled_2v"];
    let mut all = String::new();
    for name in names {
        let req = case(name)["request"].clone();
        all.push_str(&format!("{req}\n"));
        let (status, out) = post_json(&s.url("/v1/forecast"), &req);
        assert_eq!(status, 200, "golden case {name}: {out}");
    }
    let (status, _, out) =
        post(&s.url("/v1/forecast"), &[("content-type", "application/x-ndjson")], all.as_bytes());
    assert_eq!(status, 200, "the golden cases together: {}", String::from_utf8_lossy(&out));

    // The README's tour: the CO2 series, 52 weeks ahead, 256 sample paths and three quantiles.
    let co2: Vec<f64> = fs::read_to_string(root().join("tests/fixtures/data/co2_wide.csv"))
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    let tour =
        json!({"target": [co2], "horizon": 52, "samples": 256, "quantiles": [0.1, 0.5, 0.9], "seed": 7});
    let (status, out) = post_json(&s.url("/v1/forecast"), &tour);
    assert_eq!(status, 200, "the README's tour: {out}");
    // The README's tritonclient call ([1, 512], 100 samples, seed 7) at the tiny engine's longest horizon.
    let x: Vec<f32> = (0..512).map(|t| 100.0 + (t as f32 / 9.0).sin()).collect();
    let triton = json!({"parameters": {"horizon": 160, "samples": 100, "seed": 7},
                        "inputs": [{"name": "target", "datatype": "FP32", "shape": [1, 512], "data": x}]});
    let (status, out) = post_json(&s.url("/v2/models/toto/infer"), &triton);
    assert_eq!(status, 200, "the README's tritonclient call: {out}");
}

#[test]
fn bundle_info_measures_rates_on_demand_and_bench_cost_prices_requests() {
    let engine_dir = engine();
    let engine = engine_dir.to_str().unwrap();
    let text = totoc_ok(&["bundle", "info", engine]);
    assert!(text.contains("rates:       measured at serve warm-up"), "{text}");
    let info: Value = serde_json::from_str(&totoc_ok(&[
        "bundle",
        "info",
        "--json",
        "--measure-rates",
        "--threads",
        "1",
        engine,
    ]))
    .unwrap();
    let rates = &info["rates"];
    assert_eq!(rates["host_factor"], 2.0, "{rates}");
    let graphs = rates["graphs"].as_array().expect("rates");
    assert_eq!(graphs.len(), 16, "one per bucket: {graphs:?}");
    for g in graphs {
        let (run, step) =
            (g["seconds_per_run"].as_f64().unwrap(), g["seconds_per_row_step"].as_f64().unwrap());
        let rows = g["rows"].as_f64().unwrap();
        assert!(run > 0.0 && (step * rows - run).abs() <= 1e-12 + 1e-9 * run, "{g}");
        assert!(g["timed_runs"].as_u64().unwrap() >= 2, "{g}");
        assert!(["prefill", "decode"].contains(&g["kind"].as_str().unwrap()), "{g}");
    }
    let text = totoc_ok(&["bundle", "info", "--measure-rates", engine]);
    assert!(text.contains("rates (measured now") && text.contains("µs/row-step"), "{text}");
    let bundle = engine_dir.parent().unwrap().join("bundle");
    let e = totoc_err(&["bundle", "info", "--measure-rates", bundle.to_str().unwrap()]);
    assert!(e.contains("export bundle"), "{e}");

    // A cheap request is admitted and timed; one far over a 1 s deadline is refused with what would fit.
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("cost.json");
    let out = totoc_ok(&[
        "bench",
        "cost",
        "--engine",
        engine,
        "--request",
        "1x1x16x0",
        "--request",
        "16x4x160x256",
        "--deadline-s",
        "1",
        "--runs",
        "1",
        "--threads",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.contains("refused; it fits with"), "{out}");
    let report: Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{report}");
    assert_eq!(rows[0]["admitted"], true, "{report}");
    assert!(rows[0]["measured_s"].as_f64().unwrap() > 0.0 && rows[0]["graph_runs"] == 1, "{report}");
    assert_eq!(rows[1]["admitted"], false, "{report}");
    assert!(rows[1]["estimate_s"].as_f64().unwrap() > 0.45, "{report}");
    assert!(!rows[1]["fits_with"].as_array().unwrap().is_empty(), "{report}");
    assert_eq!(report["rates"]["graphs"].as_array().unwrap().len(), 16);
    let e = totoc_err(&["bench", "cost", "--engine", engine, "--request", "1x4"]);
    assert!(e.contains("SERIESxVARIATESxHORIZONxSAMPLES"), "{e}");
}
