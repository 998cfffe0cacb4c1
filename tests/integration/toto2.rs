//! Toto 2.0 end to end with the real binary: the 4m fixture checkpoint (regenerated from its seed, weights
//! digest checked against the reference's) → `totoc export` (profiles of tests/fixtures/toto2/profiles.yaml,
//! golden cases carried) → `build-engine` → `forecast` matches toto-2's median and quantiles, `verify` passes on
//! every golden case (single pass and block decoding), sampling fields are refused with the reason, a CSV
//! table forecasts as its JSON request does (CSV and Parquet out, with `median` and `q0.1`… columns, and a
//! chart), `bench` times the engine and measures its peak RSS, and `serve` answers the v2 protocol with
//! `median`.
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arrow_array::cast::AsArray;
use serde_json::{json, Value};

use crate::common::*;

fn fixtures() -> PathBuf {
    root().join("tests/fixtures/toto2")
}

/// The 4m fixture checkpoint, written from its seed into `dir`.
fn checkpoint_4m(dir: &Path) {
    let prov: Value = serde_json::from_slice(&fs::read(fixtures().join("provenance.json")).unwrap()).unwrap();
    let p = &prov["checkpoints"]["4m"];
    let json = fs::read_to_string(fixtures().join("4m/config.json")).unwrap();
    let cfg = exporter::toto2::Toto2Config::from_json(&json).unwrap();
    let seed = p["seed"].as_u64().unwrap();
    assert_eq!(exporter::toto2::synth::weights_sha256(&cfg, seed), p["weights_sha256"].as_str().unwrap());
    exporter::toto2::synth::write_checkpoint(dir, &json, seed, p["shards"].as_u64().unwrap() as usize)
        .unwrap();
}

/// One CPU engine of the 4m checkpoint (export bundle next to it) for all tests of this module.
pub(crate) fn engine() -> &'static Path {
    static ENGINE: OnceLock<PathBuf> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let dir = shared_fixture_dir();
        let ck = dir.join("checkpoint");
        checkpoint_4m(&ck);
        let bundle = dir.join("bundle");
        let (profiles, golden) = (fixtures().join("profiles.yaml"), fixtures().join("4m/cases"));
        let out = totoc(&[
            "export",
            "--checkpoint",
            ck.to_str().unwrap(),
            "--config",
            profiles.to_str().unwrap(),
            "--golden",
            golden.to_str().unwrap(),
            "--out",
            bundle.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("toto-2.0"));
        let engine = dir.join("engine");
        build_engine(&bundle, &engine);
        engine
    })
}

pub(crate) fn case(name: &str) -> Value {
    serde_json::from_slice(&fs::read(fixtures().join("4m/cases").join(format!("{name}.json"))).unwrap())
        .unwrap()
}

fn sigma(series: &Value) -> f64 {
    let xs: Vec<f64> = series.as_array().unwrap().iter().filter_map(Value::as_f64).collect();
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64).sqrt()
}

/// `[V][H]` values against a reference, within 1e-4·σ + 1e-6·|ref| per element.
fn assert_close(got: &Value, want: &Value, target: &Value, what: &str) {
    let (got, want) = (got.as_array().unwrap(), want.as_array().unwrap());
    assert_eq!(got.len(), want.len(), "{what}");
    for (v, (g, w)) in got.iter().zip(want).enumerate() {
        let s = sigma(&target[v]);
        let (g, w) = (g.as_array().unwrap(), w.as_array().unwrap());
        assert_eq!(g.len(), w.len(), "{what}");
        for (t, (a, b)) in g.iter().zip(w).enumerate() {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            let tol = 1e-4 * s + 1e-6 * b.abs();
            assert!((a - b).abs() <= tol, "{what} variate {v}, t={t}: {a} vs toto-2 {b} (tol {tol:.2e})");
        }
    }
}

fn forecast(req: &Value, extra: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("req.json");
    fs::write(&input, req.to_string()).unwrap();
    let mut args =
        vec!["forecast", "--engine", engine().to_str().unwrap(), "--input", input.to_str().unwrap()];
    args.extend_from_slice(extra);
    totoc(&args)
}

#[test]
fn forecast_gives_toto2s_median_and_nine_quantiles() {
    for name in ["single_4v_groups", "single_1v"] {
        let c = case(name);
        let out = forecast(&c["request"], &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let resp: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(resp.get("mean").is_none_or(Value::is_null), "a 2.0 response has no mean: {resp}");
        let target = &c["request"]["target"];
        assert_close(&resp["median"], &c["reference"]["median"], target, name);
        let qs = resp["quantiles"].as_array().unwrap();
        assert_eq!(qs.len(), 9, "default: the nine knots");
        for (k, q) in qs.iter().enumerate() {
            assert!((q["q"].as_f64().unwrap() - 0.1 * (k + 1) as f64).abs() < 1e-9);
            assert_close(&q["values"], &c["reference"]["quantiles"][k], target, &format!("{name} q{k}"));
        }
        assert!(resp["buckets"][0].as_str().unwrap().starts_with("single."), "{}", resp["buckets"]);
    }
}

#[test]
fn verify_passes_every_golden_case_single_pass_and_block_decoding() {
    let out = totoc(&["verify", "--engine", engine().to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    // 5 cases × (median + nine quantiles)
    assert!(stdout.contains("50 of 50 output checks passed"), "{stdout}");
    assert!(stdout.contains("block_1v_long") && stdout.contains("q0.9"), "{stdout}");
}

#[test]
fn bundle_verify_and_info_cover_toto2_engines_and_a_rebuild_is_skipped() {
    let dir = engine().to_str().unwrap();
    totoc_ok(&["bundle", "verify", dir]);
    let info: Value = serde_json::from_str(&totoc_ok(&["bundle", "info", "--json", dir])).unwrap();
    assert_eq!(info["model"]["generation"], "toto-2.0");
    let buckets: Vec<&Value> =
        info["profiles"].as_array().unwrap().iter().flat_map(|p| p["buckets"].as_array().unwrap()).collect();
    assert!(!buckets.is_empty(), "{info}");
    assert!(buckets.iter().any(|b| b["kind"] == "pass"), "{info}");
    assert!(buckets.iter().any(|b| b["kind"] == "decode"), "{info}");
    assert!(buckets.iter().all(|b| b["memory_bytes"].as_u64().unwrap() > 0), "{info}");
    // The same build again is skipped (the engine's inputs are recorded for Toto 2.0 too).
    let bundle = engine().parent().unwrap().join("bundle");
    let out = totoc(&["build-engine", "--artifacts", bundle.to_str().unwrap(), "--out", dir]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.contains("up to date"), "{err}");
}

/// `--target tensorrt` builds 2.0 engines from the bundle's shared graphs (an opset-24 export writes them per
/// profile): on a machine that cannot run TensorRT it fails with `totoc doctor`'s findings, as for Toto 1.0, in
/// either graph form, and writes nothing. The shared form is TensorRT's only: a CPU build of it is refused.
#[test]
fn a_tensorrt_build_of_a_toto2_bundle_without_tensorrt_gives_the_doctors_findings() {
    let bundle = engine().parent().unwrap().join("bundle");
    let manifest: Value = serde_json::from_slice(&fs::read(bundle.join("manifest.json")).unwrap()).unwrap();
    for p in manifest["toto2_profiles"].as_array().unwrap() {
        let shared = p["shared"].as_array().unwrap_or_else(|| panic!("no shared graphs: {p}"));
        assert!(shared.iter().all(|g| g["file"].as_str().unwrap().contains(".dynamic.")), "{p}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let doctor: Value = serde_json::from_str(&totoc_ok(&["doctor", "--json"])).unwrap();
    if doctor["verdicts"][2]["ready"] == true {
        eprintln!("skipping the no-TensorRT check: this machine can run the TensorRT target");
    } else {
        for form in ["shared", "per-bucket"] {
            let out = tmp.path().join(form);
            let err = totoc_err(&[
                "build-engine",
                "--artifacts",
                bundle.to_str().unwrap(),
                "--target",
                "tensorrt",
                "--graphs",
                form,
                "--out",
                out.to_str().unwrap(),
            ]);
            assert!(!err.contains("not built for Toto 2.0"), "{err}");
            assert!(err.contains("not available") && err.contains("`totoc doctor`"), "{form}: {err}");
            assert!(err.contains("onnxruntime-gpu 1.31.1"), "{form}: {err}");
            assert!(!out.exists(), "{form}: a failed build left {}", out.display());
        }
    }
    let out = tmp.path().join("cpu-shared");
    let err = totoc_err(&[
        "build-engine",
        "--artifacts",
        bundle.to_str().unwrap(),
        "--graphs",
        "shared",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("`--target tensorrt` only") && err.contains("--graphs per-bucket"), "{err}");
    assert!(!out.exists());
}

/// `--target cuda` (which 2.0 builds from its static graphs) on a machine that cannot run it fails with
/// `totoc doctor`'s findings — the package to install — and writes nothing, as for Toto 1.0.
#[test]
fn a_cuda_build_of_a_toto2_bundle_without_a_gpu_gives_the_doctors_findings() {
    let doctor: Value = serde_json::from_str(&totoc_ok(&["doctor", "--json"])).unwrap();
    if doctor["verdicts"][1]["ready"] == true {
        eprintln!("skipping: this machine can run the CUDA target");
        return;
    }
    let bundle = engine().parent().unwrap().join("bundle");
    let out = tempfile::tempdir().unwrap().path().join("cuda");
    let err = totoc_err(&[
        "build-engine",
        "--artifacts",
        bundle.to_str().unwrap(),
        "--target",
        "cuda",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("not available") && err.contains("`totoc doctor`"), "{err}");
    assert!(err.contains("onnxruntime-gpu 1.31.1"), "{err}");
    assert!(!out.exists(), "a failed build left {}", out.display());
}

#[test]
fn verify_fails_on_a_perturbed_reference() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = case("single_1v");
    let x = c["reference"]["median"][0][3].as_f64().unwrap();
    c["reference"]["median"][0][3] = json!(x + 1.0);
    fs::write(dir.path().join("bad.json"), c.to_string()).unwrap();
    let out = totoc(&[
        "verify",
        "--engine",
        engine().to_str().unwrap(),
        "--fixtures",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FAIL") && stdout.contains("median"), "{stdout}");
}

#[test]
fn samples_and_seed_are_refused_with_the_reason_and_levels_between_knots_are_interpolated() {
    let req = case("single_1v")["request"].clone();
    let out = forecast(&req, &["--samples", "8"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`samples` is not supported by a Toto 2.0 engine"), "{err}");
    let mut seeded = req.clone();
    seeded["seed"] = json!(3);
    let err = String::from_utf8_lossy(&forecast(&seeded, &[]).stderr).into_owned();
    assert!(err.contains("`seed` is not supported"), "{err}");
    let out = forecast(&req, &["--quantiles", "0.5,0.95"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[0.1, 0.9]"));

    let out = forecast(&req, &["--quantiles", "0.25,0.5"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("interpolated"));
    let resp: Value = serde_json::from_slice(&out.stdout).unwrap();
    let (q25, q50) = (&resp["quantiles"][0]["values"][0], &resp["quantiles"][1]["values"][0]);
    let reference = &case("single_1v")["reference"]["quantiles"];
    let t = 5;
    let mid = (reference[1][0][t].as_f64().unwrap() + reference[2][0][t].as_f64().unwrap()) / 2.0;
    let got = q25[t].as_f64().unwrap();
    assert!((got - mid).abs() <= 1e-3 * mid.abs().max(1.0), "q0.25 {got} vs mid of knots {mid}");
    assert_eq!(q50, &resp["median"][0]);
}

#[test]
fn a_context_past_the_engines_is_cut_and_too_short_is_an_error() {
    let mut req = case("single_1v")["request"].clone();
    let short: Vec<Value> = req["target"][0].as_array().unwrap()[..20].to_vec();
    req["target"] = json!([short]);
    let out = forecast(&req, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("at least 32"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 700 points: the engine keeps its 512 most recent
    let mut long = case("single_1v")["request"].clone();
    let pts: Vec<Value> = (0..700).map(|i| json!((i as f64 * 0.1).sin())).collect();
    long["target"] = json!([pts]);
    let out = forecast(&long, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let resp: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(resp["context_truncated"], json!({"given": 700, "used": 512}));
}

#[test]
fn serve_answers_v1_and_v2_with_the_median_and_refuses_samples() {
    use crate::serve::{post_json, Server};
    let s = Server::ready(engine(), &[]);
    let c = case("single_1v");
    let (status, resp) = post_json(&s.url("/v1/forecast"), &c["request"]);
    assert_eq!(status, 200, "{resp}");
    assert!(resp.get("mean").is_none_or(Value::is_null), "{resp}");
    assert_close(&resp["median"], &c["reference"]["median"], &c["request"]["target"], "v1 median");
    let mut sampled = c["request"].clone();
    sampled["samples"] = json!(16);
    let (status, resp) = post_json(&s.url("/v1/forecast"), &sampled);
    assert_eq!(status, 400, "{resp}");
    assert!(resp["error"].as_str().unwrap().contains("`samples` is not supported"), "{resp}");

    let target: Vec<Value> = c["request"]["target"][0].as_array().unwrap().clone();
    let t = target.len();
    let body = json!({
        "inputs": [{"name": "target", "datatype": "FP32", "shape": [1, 1, t], "data": target}],
        "parameters": {"horizon": 100},
    });
    let (status, resp) = post_json(&s.url("/v2/models/toto/infer"), &body);
    assert_eq!(status, 200, "{resp}");
    let outputs = resp["outputs"].as_array().unwrap();
    assert!(outputs.iter().all(|o| o["name"] != "mean"), "{resp}");
    let median =
        outputs.iter().find(|o| o["name"] == "median").unwrap_or_else(|| panic!("no median: {resp}"));
    assert_eq!(median["shape"], json!([1, 1, 100]));
    let got = json!([median["data"].clone()]);
    assert_close(&got, &c["reference"]["median"], &c["request"]["target"], "v2 median");
}

#[test]
fn a_table_forecasts_as_its_json_request_with_median_and_quantile_columns() {
    // The data-I/O path on a 2.0 engine: golden case single_1v as series "a" of a long CSV with hourly epoch
    // timestamps, and the same history again as series "b" (packed into the same pass).
    let c = case("single_1v");
    let target = c["request"]["target"][0].as_array().unwrap();
    let h = c["request"]["horizon"].as_u64().unwrap() as usize;
    let dir = tempfile::tempdir().unwrap();
    let mut table = String::from("unique_id,ds,y\n");
    for id in ["a", "b"] {
        for (i, x) in target.iter().enumerate() {
            let x = x.as_f64().map(|x| (x as f32).to_string()).unwrap_or_default();
            table.push_str(&format!("{id},{},{x}\n", 1_700_000_000 + 3600 * i));
        }
    }
    let input = dir.path().join("history.csv");
    fs::write(&input, table).unwrap();
    let (csv, parquet, svg) =
        (dir.path().join("f.csv"), dir.path().join("f.parquet"), dir.path().join("f.svg"));
    let e = engine().to_str().unwrap();
    let hs = h.to_string();
    let base = ["forecast", "--engine", e, "--input", input.to_str().unwrap(), "--horizon", &hs];
    totoc_ok(&[&base[..], &["--output", csv.to_str().unwrap(), "--plot", svg.to_str().unwrap()]].concat());
    totoc_ok(&[&base[..], &["--output", parquet.to_str().unwrap()]].concat());

    let text = fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let levels: Vec<String> = (1..=9).map(|k| format!("q{}", k as f64 / 10.0)).collect();
    let mut want_header = vec!["unique_id", "ds", "model", "median"];
    want_header.extend(levels.iter().map(String::as_str));
    assert_eq!(header, want_header);
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2 * h);
    let sig = sigma(&c["request"]["target"][0]);
    for (r, row) in rows.iter().enumerate() {
        let (id, t) = (if r < h { "a" } else { "b" }, r % h);
        assert_eq!(row[0], id);
        assert_eq!(row[2], "toto-2.0", "the model column names the family");
        // the next hours after each series' last point
        assert_eq!(
            row[1].parse::<u64>().unwrap(),
            1_700_000_000 + 3600 * (target.len() + t) as u64,
            "row {r}"
        );
        let want = std::iter::once(&c["reference"]["median"][0][t])
            .chain((0..9).map(|k| &c["reference"]["quantiles"][k][0][t]));
        for (col, w) in want.enumerate() {
            let (got, w) = (row[3 + col].parse::<f64>().unwrap(), w.as_f64().unwrap());
            let tol = 1e-4 * sig + 1e-6 * w.abs();
            assert!((got - w).abs() <= tol, "row {r} {}: {got} vs toto-2 {w}", header[3 + col]);
        }
        if r >= h {
            assert_eq!(row[2..], rows[r - h][2..], "b is a's history: the same forecast, row {r}");
        }
    }

    // Parquet carries the same numbers as f32
    let file = fs::File::open(&parquet).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.map(Result::unwrap).collect();
    let b = &batches[0];
    let names: Vec<String> = b.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, want_header);
    assert_eq!(b.num_rows(), 2 * h);
    for col in 3..names.len() {
        let values = b.column(col).as_primitive::<arrow_array::types::Float32Type>();
        for (r, row) in rows.iter().enumerate() {
            assert_eq!(values.value(r), row[col].parse::<f32>().unwrap(), "{} row {r}", names[col]);
        }
    }

    // the chart draws the median as the point forecast
    let svg = fs::read_to_string(&svg).unwrap();
    assert!(svg.contains("median"), "the legend names the median");
    assert_eq!(svg.matches("class=\"panel\"").count(), 2, "one panel per series");
}

#[test]
fn bench_times_a_toto2_engine_and_measures_its_peak_rss() {
    // The 2.0 benchmark's own path (toto-2 eager is left out here: it is timed only with --reference-checkpoint).
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let e = format!("small={}", engine().display());
    let out = totoc_ok(&[
        "bench",
        "--engine",
        &e,
        "--runs",
        "2",
        "--throughput-series",
        "20",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.contains("20 series × 512 points, H=336"), "{out}");
    let v: Value = serde_json::from_slice(&fs::read(&json).unwrap()).unwrap();
    assert_eq!(v["model"], "toto-2.0");
    assert_eq!(v["cpu"].as_str(), engines::backend::cpu_summary().as_deref(), "{v}");
    let row = &v["engines"][0];
    assert_eq!(row["engine"], "small");
    assert!(row["single_h336_ms"].as_f64().unwrap() > 0.0, "{row}");
    assert!(row["throughput_series_per_s"].as_f64().unwrap() > 0.0, "{row}");
    let weights = row["weights_bytes"].as_f64().unwrap();
    for w in ["single_h336", "throughput_h336"] {
        // measured in a child process: at least the weights, which every forecast reads
        let rss = row["peak_rss_mb"][w].as_f64().unwrap() * 1e6;
        assert!(rss > weights, "{w}: peak RSS {rss} below the weights' {weights} bytes");
    }
    assert!(v["reference"].is_null(), "no toto-2 timing without --reference-checkpoint: {}", v["reference"]);
}

/// fp16 and int8 2.0 bundles (docs/precision.md). On the trained 4m, `build-engine --fp16` on the CPU builds the
/// fp16 emulation engine and `--precision int8` the int8 one, and `verify` passes both on the model's toto-2 cases
/// within `1e-2·max(σ, scaler scale) + 1e-3·|ref|`. On the random-weight 4m fixture the int8 engine is built too
/// (an export cannot tell random weights from trained ones) and `verify` reports its miss and exits 1: random
/// weights are the bound, not the instrument.
#[test]
fn fp16_and_int8_engines_of_the_trained_4m_pass_verify_and_random_weights_report_their_miss() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("trained");
    totoc_ok(&[
        "export",
        "--checkpoint",
        root().join("tests/fixtures/trained/toto2-4m").to_str().unwrap(),
        "--config",
        root().join("configs/trained-toto2-4m.yaml").to_str().unwrap(),
        "--golden",
        root().join("tests/fixtures/trained/toto2-4m-cases").to_str().unwrap(),
        "--precision",
        "fp16",
        "--precision",
        "int8",
        "--out",
        bundle.to_str().unwrap(),
    ]);
    for (flag, label) in [(["--fp16", ""], "fp16-emulation"), (["--precision", "int8"], "int8")] {
        let engine = tmp.path().join(label);
        let mut args =
            vec!["build-engine", "--artifacts", bundle.to_str().unwrap(), "--out", engine.to_str().unwrap()];
        args.extend(flag.iter().filter(|a| !a.is_empty()));
        totoc_ok(&args);
        let out = totoc(&["verify", "--engine", engine.to_str().unwrap()]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{label}: {stdout}");
        assert!(stdout.contains("20 of 20 output checks passed"), "{label}: {stdout}");
        assert!(stdout.contains(&format!("cpu {label}")), "{label}: {stdout}");
        assert!(stdout.contains("1e-2·max(σ, scaler scale) + 1e-3·|ref|"), "{label}: {stdout}");
    }

    let ck = tmp.path().join("checkpoint");
    checkpoint_4m(&ck);
    let random = tmp.path().join("random");
    totoc_ok(&[
        "export",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--config",
        fixtures().join("profiles.yaml").to_str().unwrap(),
        "--profile",
        "single",
        "--precision",
        "int8",
        "--out",
        random.to_str().unwrap(),
    ]);
    let engine = tmp.path().join("random-int8");
    build_engine(&random, &engine);
    let cases = tmp.path().join("cases");
    fs::create_dir_all(&cases).unwrap();
    fs::copy(fixtures().join("4m/cases/single_1v.json"), cases.join("single_1v.json")).unwrap();
    let out = totoc(&["verify", "--engine", engine.to_str().unwrap(), "--fixtures", cases.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("FAIL") && stdout.contains("cpu int8"), "{stdout}");
}
