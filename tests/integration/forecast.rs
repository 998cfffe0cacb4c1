//! `totoc build-engine`, `forecast` and `verify` end to end on the tiny fixture: JSON, JSON Lines and CSV input
//! give the toto-ts mean forecast; the engine carries and passes its golden set; bad input is a clear error with
//! a non-zero exit and no output file.
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::common::*;

/// One CPU engine of the tiny fixture (with its golden cases) for all tests of this module.
pub fn engine() -> &'static Path {
    static ENGINE: OnceLock<PathBuf> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let dir = shared_fixture_dir();
        let bundle = dir.join("bundle");
        let golden = root().join("tests/fixtures/tiny/cases");
        totoc_ok(&[
            "export",
            "--checkpoint",
            fixture_checkpoint("tiny").to_str().unwrap(),
            "--config",
            tiny_profiles().to_str().unwrap(),
            "--golden",
            golden.to_str().unwrap(),
            "--out",
            bundle.to_str().unwrap(),
        ]);
        let engine = dir.join("engine");
        build_engine(&bundle, &engine);
        engine
    })
}

fn case(name: &str) -> Value {
    let p = root().join("tests/fixtures/tiny/cases").join(format!("{name}.json"));
    serde_json::from_slice(&fs::read(p).unwrap()).unwrap()
}

/// Population σ of a variate's observed context points.
fn sigma(series: &Value) -> f64 {
    let xs: Vec<f64> = series.as_array().unwrap().iter().filter_map(Value::as_f64).collect();
    let m = xs.iter().sum::<f64>() / xs.len() as f64;
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / xs.len() as f64).sqrt()
}

/// `mean` of a response against a case's reference, within 1e-4·σ + 1e-6·|ref| per element.
fn assert_mean_matches(resp: &Value, case: &Value) {
    let target = case["request"]["target"].as_array().unwrap();
    let want = case["reference"]["mean"].as_array().unwrap();
    let got = resp["mean"].as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (v, (g, w)) in got.iter().zip(want).enumerate() {
        let s = sigma(&target[v]);
        let (g, w) = (g.as_array().unwrap(), w.as_array().unwrap());
        assert_eq!(g.len(), w.len());
        for (t, (a, b)) in g.iter().zip(w).enumerate() {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            let tol = 1e-4 * s + 1e-6 * b.abs();
            assert!((a - b).abs() <= tol, "variate {v}, t={t}: {a} vs toto-ts {b} (tol {tol:.2e})");
        }
    }
}

fn forecast_file(input: &Path, extra: &[&str]) -> String {
    let mut args =
        vec!["forecast", "--engine", engine().to_str().unwrap(), "--input", input.to_str().unwrap()];
    args.extend_from_slice(extra);
    totoc_ok(&args)
}

#[test]
fn json_request_gives_the_toto_mean() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["mean_1v", "mean_4v_groups", "mean_short"] {
        let c = case(name);
        let input = tmp.path().join(format!("{name}.json"));
        fs::write(&input, c["request"].to_string()).unwrap();
        let resp: Value = serde_json::from_str(&forecast_file(&input, &[])).unwrap();
        assert_mean_matches(&resp, &c);
        assert!(resp["profile"].is_string() && resp["engine"].as_str().unwrap().starts_with("cpu"));
        // provenance: the engine manifest's sha256; no sampler settings for a family without sampling controls
        use sha2::Digest;
        let manifest = fs::read(engine().join("manifest.json")).unwrap();
        let sha: String = sha2::Sha256::digest(&manifest).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(resp["engine_sha256"], sha.as_str(), "{resp}");
        assert!(resp.get("sampler").is_none(), "{resp}");
    }
}

#[test]
fn jsonl_requests_give_one_response_each_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let names = ["mean_4v_groups", "mean_1v", "mean_short"];
    let lines: Vec<String> = names.iter().map(|n| case(n)["request"].to_string()).collect();
    let input = tmp.path().join("reqs.jsonl");
    fs::write(&input, lines.join("\n") + "\n").unwrap();
    let output = tmp.path().join("out.jsonl");
    forecast_file(&input, &["--output", output.to_str().unwrap()]);
    let text = fs::read_to_string(&output).unwrap();
    let resps: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(resps.len(), names.len());
    for (r, n) in resps.iter().zip(names) {
        assert_mean_matches(r, &case(n));
    }
}

#[test]
fn csv_input_gives_the_toto_mean() {
    let c = case("mean_4v_groups");
    let target = c["request"]["target"].as_array().unwrap();
    let t = target[0].as_array().unwrap().len();
    let mut csv = String::from("a,b,c,d\n");
    for i in 0..t {
        let row: Vec<String> = target
            .iter()
            .map(|s| s[i].as_f64().map(|x| format!("{}", x as f32)).unwrap_or_default())
            .collect();
        csv += &(row.join(",") + "\n");
    }
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("series.csv");
    fs::write(&input, csv).unwrap();
    // CSV has no id_mask column: with a single group the space-wise layer mixes all four variates, so compare
    // against the JSON path with the same (default) ids rather than the fixture's two-group reference.
    let from_csv: Value = serde_json::from_str(&forecast_file(&input, &["--horizon", "40"])).unwrap();
    let mut req = c["request"].clone();
    req.as_object_mut().unwrap().remove("id_mask");
    let json_in = tmp.path().join("same.json");
    fs::write(&json_in, req.to_string()).unwrap();
    let from_json: Value = serde_json::from_str(&forecast_file(&json_in, &[])).unwrap();
    assert_eq!(from_csv["mean"], from_json["mean"]);
    // And the univariate fixture through CSV matches toto-ts itself.
    let c1 = case("mean_1v");
    let col: Vec<String> = c1["request"]["target"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().map(|x| format!("{}", x as f32)).unwrap_or_default())
        .collect();
    let input = tmp.path().join("one.csv");
    fs::write(&input, format!("y\n{}\n", col.join("\n"))).unwrap();
    let h = c1["request"]["horizon"].to_string();
    let resp: Value = serde_json::from_str(&forecast_file(&input, &["--horizon", &h])).unwrap();
    assert_mean_matches(&resp, &c1);
}

#[test]
fn sampled_request_returns_paths_and_quantiles() {
    let c = case("sampled_2v");
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("s.json");
    fs::write(&input, c["request"].to_string()).unwrap();
    let resp: Value = serde_json::from_str(&forecast_file(&input, &["--write-samples"])).unwrap();
    let samples = resp["samples"].as_array().unwrap();
    assert_eq!(samples.len(), 64);
    assert_eq!(resp["quantiles"].as_array().unwrap().len(), 3);
    let (lo, hi) = (&resp["quantiles"][0]["values"][0], &resp["quantiles"][2]["values"][0]);
    for t in 0..20 {
        assert!(lo[t].as_f64().unwrap() <= hi[t].as_f64().unwrap());
    }
}

#[test]
fn verify_passes_on_the_engines_own_golden_set() {
    let out = totoc_ok(&["verify", "--engine", engine().to_str().unwrap()]);
    assert!(out.contains("35 of 35 output checks passed"), "{out}");
}

#[test]
fn verify_fails_on_a_mismatching_reference() {
    // A reference that disagrees with the engine (one mixture location moved by 0.01) must fail verify.
    let tmp = tempfile::tempdir().unwrap();
    let mut c = case("mean_1v");
    let loc = &mut c["reference"]["steps"][1]["loc"][0][3][2];
    *loc = json!(loc.as_f64().unwrap() + 0.01);
    fs::write(tmp.path().join("mean_1v.json"), c.to_string()).unwrap();
    let out = totoc(&[
        "verify",
        "--engine",
        engine().to_str().unwrap(),
        "--fixtures",
        tmp.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("FAIL: loc at step 1") && stdout.contains("1.0e-2"), "{stdout}");
}

#[test]
fn a_modified_engine_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("engine");
    copy_dir(engine(), &copy);
    let w = copy.join("weights.fp32.bin");
    let mut bytes = fs::read(&w).unwrap();
    bytes[4096] ^= 1;
    fs::write(&w, bytes).unwrap();
    let err = totoc_err(&["verify", "--engine", copy.to_str().unwrap()]);
    assert!(err.contains("weights.fp32.bin") && err.contains("sha256"), "{err}");
}

/// Each bad request fails with a message containing `needle`, exit code 2, and no output file.
#[test]
fn bad_input_is_a_clear_error_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        ("nan.json", r#"{"target": [[1.0, NaN, 3.0]], "horizon": 4}"#.into(), "null"),
        ("inf.json", r#"{"target": [[1.0, 1e400, 3.0]], "horizon": 4}"#.into(), "finite"),
        ("f32inf.json", r#"{"target": [[1.0, 1e39, 3.0]], "horizon": 4}"#.into(), "overflows f32"),
        ("empty.json", r#"{"target": [[]], "horizon": 4}"#.into(), "empty"),
        ("allmissing.json", r#"{"target": [[1.0, 2.0], [null, null]], "horizon": 4}"#.into(), "variate 1"),
        ("h0.json", r#"{"target": [[1.0, 2.0, 3.0]], "horizon": 0}"#.into(), "horizon"),
        ("hbig.json", r#"{"target": [[1.0, 2.0, 3.0]], "horizon": 100000}"#.into(), "horizon 100000"),
        ("ragged.json", r#"{"target": [[1.0, 2.0, 3.0], [1.0]], "horizon": 4}"#.into(), "variate 1"),
        ("wide.json", r#"{"target": [[1.0],[1.0],[1.0],[1.0],[1.0]], "horizon": 4}"#.into(), "5 variates"),
        ("unknown.json", r#"{"target": [[1.0, 2.0]], "horizon": 4, "horizn": 5}"#.into(), "horizn"),
        // (a CSV `nan` is a missing point since issue 36, as Parquet's NaN; an infinity is still refused)
        ("inf.csv", "a\n1\ninf\n3\n".into(), "finite"),
    ];
    for (file, body, needle) in cases {
        let input = tmp.path().join(file);
        fs::write(&input, body).unwrap();
        let output = tmp.path().join(format!("{file}.out.json"));
        let mut args = vec![
            "forecast",
            "--engine",
            engine().to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--output",
            output.to_str().unwrap(),
        ];
        if file.ends_with(".csv") {
            args.extend(["--horizon", "4"]);
        }
        let out = totoc(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{file}: {err}");
        assert!(err.contains(needle), "{file}: expected {needle:?} in: {err}");
        assert!(!output.exists(), "{file}: output written");
        let stray = fs::read_dir(tmp.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains(".tmp"));
        assert_eq!(stray.count(), 0, "{file}: temp file left");
    }
}

/// `export --precision int8` → `build-engine --precision int8` → `verify --compare-engine` (the fp32 engine):
/// the int8 engine passes its golden set with the int8 tolerances and reports its distance to the fp32 engine.
#[test]
fn int8_engine_verifies_and_reports_against_fp32() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let golden = root().join("tests/fixtures/tiny/cases");
    totoc_ok(&[
        "export",
        "--checkpoint",
        fixture_checkpoint("tiny").to_str().unwrap(),
        "--config",
        tiny_profiles().to_str().unwrap(),
        "--golden",
        golden.to_str().unwrap(),
        "--precision",
        "int8",
        "--out",
        bundle.to_str().unwrap(),
    ]);
    let int8 = tmp.path().join("int8");
    build_engine(&bundle, &int8);
    let out = totoc_ok(&[
        "verify",
        "--engine",
        int8.to_str().unwrap(),
        "--compare-engine",
        engine().to_str().unwrap(),
    ]);
    assert!(out.contains("35 of 35 output checks passed") && out.contains("cpu int8"), "{out}");
    assert!(out.contains("mean forecast vs cpu") && out.contains("mean_short"), "{out}");
    // int8 engines are CPU engines: both GPU targets refuse them, naming the target that works
    for target in ["tensorrt", "cuda"] {
        let out = tmp.path().join(target);
        let err = totoc_err(&[
            "build-engine",
            "--artifacts",
            bundle.to_str().unwrap(),
            "--target",
            target,
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(err.contains("MatMulInteger") && err.contains("--target cpu"), "{target}: {err}");
        assert!(!out.exists(), "{target}: a refused build left {}", out.display());
    }
}
