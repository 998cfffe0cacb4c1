//! `totoc serve` on a Kronos engine (the k10 fixture checkpoints with configs/kronos-tiny.yaml's window and graphs
//! for one series of up to 16 paths, [`PROFILE`], and the k10 reference cases as golden cases): the readiness gate
//! runs them; the model metadata lists the named-column inputs and parameters; one series with all six columns,
//! wall-clock stamps, parameters and seed gives bitwise the same mean, quantiles and paths through `totoc
//! forecast`, `POST /v1/forecast`, KServe v2 REST JSON (and with UTC seconds plus `timezone`), and tritonclient
//! over REST binary and gRPC, greedy and with 16 paths; every response carries its provenance (`sampler`,
//! `engine_sha256`); each bad input is a 400 naming the problem and the fix. One engine and one server for all of
//! it.
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::common::*;
use crate::serve::{post_json, Server};

/// Paths per sampled request: the "same numbers everywhere" asks for 16.
const PATHS: u64 = 16;

/// configs/kronos-tiny.yaml's window and ladders for one series of up to [`PATHS`] paths (that profile holds 3
/// series of 4): the k10 cases and this test's requests are one series each. 16 bucket graphs to its 18; export
/// and build 1.2 s to its 1.0 s (2 loaded cores). The 16-path requests cost the test about 3 s more than 4 paths
/// did (10 s to 7 s, loaded): the debug build's top-p sampler, about 0.5 s per 16-path forecast.
const PROFILE: &str = "model:
  generation: kronos
  checkpoint: tests/fixtures/kronos/k10/predictor
  tokenizer: tests/fixtures/kronos/k10/tokenizer
profiles:
  - name: paths16
    batch: 1
    variates: 1
    context: 160
    horizon: 24
    samples: 16
    family:
      window: 128
      encode: [{rows: 1, slots: 160}]
      prefill: [{rows: 1, slots: 64}, {rows: 1, slots: 128}]
      detokenize: [{rows: 16, slots: 128}]
      rows: [1, 16]
";

/// The k10 engine of [`PROFILE`] with the k10 reference cases as its golden cases, built once.
fn k10_engine() -> &'static Path {
    static E: OnceLock<PathBuf> = OnceLock::new();
    E.get_or_init(|| {
        let dir = shared_fixture_dir();
        let k10 = root().join("tests/fixtures/kronos/k10");
        let (bundle, engine) = (dir.join("bundle"), dir.join("engine"));
        let config = dir.join("paths16.yaml");
        fs::write(&config, PROFILE).unwrap();
        totoc_ok(&[
            "export",
            "--checkpoint",
            k10.join("predictor").to_str().unwrap(),
            "--tokenizer",
            k10.join("tokenizer").to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
            "--golden",
            k10.join("cases").to_str().unwrap(),
            "--out",
            bundle.to_str().unwrap(),
        ]);
        build_engine(&bundle, &engine);
        engine
    })
}

/// The greedy_daily fixture's series with all six columns (amount = volume × close, f32-exact), as a JSON
/// request of `samples` paths.
fn six_column_request(samples: u64) -> Value {
    let case: Value = serde_json::from_slice(
        &fs::read(root().join("tests/fixtures/kronos/k10/cases/greedy_daily.json")).unwrap(),
    )
    .unwrap();
    let mut r = case["requests"][0].clone();
    let f32s = |row: &Value| -> Vec<f32> {
        row.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
    };
    let rows: Vec<Vec<f32>> = r["target"].as_array().unwrap().iter().map(f32s).collect();
    let amount: Vec<f32> = rows[4].iter().zip(&rows[3]).map(|(v, c)| v * c).collect();
    let target: Vec<Vec<f32>> = rows.into_iter().chain([amount]).collect();
    r["target"] = json!(target);
    r["columns"] = json!(["open", "high", "low", "close", "volume", "amount"]);
    r["samples"] = json!(samples);
    if samples > 0 {
        r["temperature"] = json!(0.9);
        r["top_p"] = json!(0.8);
        r["quantiles"] = json!([0.1, 0.5, 0.9]);
    }
    r
}

/// `2012-11-05T00:00:00` as seconds, read as if UTC.
fn wall_seconds(stamp: &str) -> i64 {
    let dt: jiff::civil::DateTime = stamp.parse().unwrap();
    jiff::tz::Offset::UTC.to_timestamp(dt).unwrap().as_second()
}

/// A KServe v2 JSON body of `request` (one series, [1, C, T]); `shift`: seconds subtracted from every stamp.
fn v2_body(request: &Value, timezone: Option<&str>, shift: i64) -> Value {
    let target = request["target"].as_array().unwrap();
    let (c, t) = (target.len(), target[0].as_array().unwrap().len());
    let flat: Vec<Value> = target.iter().flat_map(|row| row.as_array().unwrap().clone()).collect();
    let secs = |field: &str| -> Vec<i64> {
        request[field].as_array().unwrap().iter().map(|s| wall_seconds(s.as_str().unwrap()) - shift).collect()
    };
    let h = request["horizon"].as_u64().unwrap();
    let mut params = json!({"horizon": h, "samples": request["samples"], "seed": request["seed"],
                            "max_context": request["params"]["max_context"], "clip": request["params"]["clip"]});
    for k in ["temperature", "top_k", "top_p"] {
        if !request[k].is_null() {
            params[k] = request[k].clone();
        }
    }
    if let Some(z) = timezone {
        params["timezone"] = json!(z);
    }
    let mut inputs = vec![
        json!({"name": "target", "datatype": "FP32", "shape": [1, c, t], "data": flat}),
        json!({"name": "timestamps", "datatype": "INT64", "shape": [1, t], "data": secs("timestamps")}),
        json!({"name": "future_timestamps", "datatype": "INT64", "shape": [1, h], "data": secs("future_timestamps")}),
    ];
    if let Some(q) = request["quantiles"].as_array() {
        inputs.push(json!({"name": "quantile_levels", "datatype": "FP32", "shape": [q.len()], "data": q}));
    }
    json!({"id": "k1", "parameters": params, "inputs": inputs})
}

/// Output `name` of a v2 response as f32s.
fn v2_output(resp: &Value, name: &str) -> (Vec<u64>, Vec<f32>) {
    let o = resp["outputs"].as_array().unwrap().iter().find(|o| o["name"] == name).unwrap();
    let shape = o["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
    (shape, o["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect())
}

/// A JSON response's `[..][..]` numbers flattened as f32s.
fn flat(v: &Value) -> Vec<f32> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        Value::Number(x) => vec![x.as_f64().unwrap() as f32],
        _ => panic!("not numbers: {v}"),
    }
}

/// `totoc forecast` of one request on the k10 engine.
fn cli(request: &Value) -> Value {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("r.json");
    fs::write(&input, request.to_string()).unwrap();
    let out = totoc_ok(&[
        "forecast",
        "--engine",
        k10_engine().to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--write-samples",
    ]);
    serde_json::from_str(out.trim()).unwrap()
}

fn sha256_hex(path: &Path) -> String {
    use sha2::Digest;
    let bytes = fs::read(path).unwrap();
    sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn kronos_over_kserve_v2_gives_the_clis_numbers_and_refuses_bad_input() {
    let engine = k10_engine();
    let s = Server::ready(engine, &[]);
    let sha = sha256_hex(&engine.join("manifest.json"));

    // the readiness gate ran the Kronos golden cases; the metadata lists the named-column inputs
    let (status, meta) = crate::serve::get(&s.url("/v2/models/toto"));
    assert_eq!(status, 200, "{meta}");
    let meta: Value = serde_json::from_str(&meta).unwrap();
    let verification = meta["parameters"]["verification"].as_str().unwrap();
    assert!(verification.starts_with("verified: ") && verification.contains("4 cases"), "{verification}");
    let names: Vec<&str> =
        meta["inputs"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["target", "lengths", "timestamps", "future_timestamps", "quantile_levels"]);
    assert_eq!(meta["parameters"]["columns"], json!(["open", "high", "low", "close", "volume", "amount"]));
    assert_eq!(meta["parameters"]["required_columns"], 4);
    assert_eq!(
        meta["parameters"]["request_parameters"],
        json!(["temperature", "top_k", "top_p", "max_context", "clip", "timezone"])
    );

    let mut expected = serde_json::Map::new();
    for samples in [0, PATHS] {
        let request = six_column_request(samples);
        let by_cli = cli(&request);
        let (status, by_v1) = post_json(&s.url("/v1/forecast?write_samples=true"), &request);
        assert_eq!(status, 200, "{by_v1}");
        // provenance: the engine's manifest hash, the sampler settings used (defaults filled in)
        for r in [&by_cli, &by_v1] {
            assert_eq!(r["engine_sha256"], sha, "{r}");
            let want = match samples {
                0 => json!({"samples": 0, "seed": 7, "temperature": 1.0, "top_k": 1, "top_p": 0.9,
                            "params": {"clip": 5.0, "max_context": 128.0}}),
                _ => json!({"samples": PATHS, "seed": 7, "temperature": 0.9, "top_k": 0, "top_p": 0.8,
                            "params": {"clip": 5.0, "max_context": 128.0}}),
            };
            assert_eq!(r["sampler"], want, "{r}");
        }
        assert_eq!(by_cli["samples"].is_null(), samples == 0, "{by_cli}");
        for k in ["mean", "quantiles", "samples"] {
            assert_eq!(
                by_v1[k], by_cli[k],
                "samples {samples}: /v1/forecast `{k}` differs from totoc forecast"
            );
        }
        // v2 REST JSON, wall-clock seconds; and UTC seconds on New York's clock (midnight there is 05:00Z in
        // winter): the same wall clocks, the same numbers
        for (zone, shift) in [(None, 0), (Some("America/New_York"), -5 * 3600)] {
            let (status, v2) = post_json(&s.url("/v2/models/toto/infer"), &v2_body(&request, zone, shift));
            assert_eq!(status, 200, "{v2}");
            let (shape, mean) = v2_output(&v2, "mean");
            assert_eq!(shape, [1, 6, 16]);
            assert_eq!(mean, flat(&by_cli["mean"]), "samples {samples}, timezone {zone:?}: v2 mean");
            let p = &v2["parameters"];
            assert_eq!(
                (p["engine_sha256"].as_str(), p["samples"].as_u64()),
                (Some(sha.as_str()), Some(samples))
            );
            assert_eq!((p["seed"].as_u64(), p["max_context"].as_u64()), (Some(7), Some(128)), "{p}");
            if samples > 0 {
                let (qs, q) = v2_output(&v2, "quantiles");
                assert_eq!(qs, [1, 3, 6, 16]);
                let want: Vec<f32> =
                    by_cli["quantiles"].as_array().unwrap().iter().flat_map(|q| flat(&q["values"])).collect();
                assert_eq!(q, want, "v2 quantiles");
                let (ss, paths) = v2_output(&v2, "samples");
                assert_eq!(ss, [1, PATHS, 6, 16]);
                assert_eq!(paths, flat(&by_cli["samples"]), "v2 paths");
                assert_eq!((p["temperature"].as_f64(), p["top_p"].as_f64()), (Some(0.9), Some(0.8)), "{p}");
            }
        }
        expected.insert(
            format!("samples_{samples}"),
            json!({"request": request, "cli": by_cli,
            "body": v2_body(&request, None, 0)}),
        );
    }

    // bad input: a 400 naming the problem and the fix
    let base = v2_body(&six_column_request(0), None, 0);
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut b = base.clone();
        f(&mut b);
        b
    };
    let bad: Vec<(&str, Value, &[&str])> = vec![
        (
            "three columns",
            edit(&|b| {
                let t = b["inputs"][0]["data"].as_array().unwrap()[..3 * 64].to_vec();
                b["inputs"][0]["data"] = json!(t);
                b["inputs"][0]["shape"] = json!([1, 3, 64]);
            }),
            &["misses the `close` column", "open, high, low, close, volume, amount"],
        ),
        (
            "timestamps of another length",
            edit(&|b| {
                b["inputs"][1]["data"].as_array_mut().unwrap().pop();
                b["inputs"][1]["shape"] = json!([1, 63]);
            }),
            &["input `timestamps` has shape [1, 63]", "[1, 64]", "one stamp per point"],
        ),
        (
            "timestamps out of order",
            edit(&|b| b["inputs"][1]["data"].as_array_mut().unwrap().swap(3, 4)),
            &["`timestamps` row 4", "is before row 3", "time order"],
        ),
        (
            "no such time zone",
            edit(&|b| b["parameters"]["timezone"] = json!("Mars/Olympus_Mons")),
            &["parameter `timezone`", "not a time zone of the IANA database"],
        ),
        (
            "NaN in a column",
            edit(&|b| b["inputs"][0]["data"][3 * 64 + 5] = Value::Null),
            &["column `close`, row 5 is missing", "takes no missing points"],
        ),
        (
            "no timestamps",
            edit(&|b| {
                b["inputs"].as_array_mut().unwrap().remove(1);
            }),
            &["input `timestamps` is missing", "INT64 [N, T] seconds"],
        ),
        (
            "a Toto input",
            edit(&|b| {
                b["inputs"].as_array_mut().unwrap().push(
                    json!({"name": "id_mask", "datatype": "INT64", "shape": [6], "data": [0, 0, 0, 0, 0, 0]}),
                )
            }),
            &["unknown input `id_mask`", "target, lengths, timestamps, future_timestamps, quantile_levels"],
        ),
        (
            "sampling controls on the greedy path",
            edit(&|b| b["parameters"]["temperature"] = json!(0.5)),
            &["`temperature` given with `samples: 0`"],
        ),
    ];
    for (what, body, want) in bad {
        let (status, resp) = post_json(&s.url("/v2/models/toto/infer"), &body);
        let e = resp["error"].as_str().unwrap_or_default();
        eprintln!("{what}: {status} {e}");
        assert_eq!(status, 400, "{what}: {resp}");
        for w in want {
            assert!(e.contains(w), "{what}: `{w}` not in: {e}");
        }
    }

    // tritonclient over REST (binary tensors, its default) and gRPC: the same numbers
    let Some(py) = crate::venv::python(&crate::venv::SERVE) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("expected.json");
    fs::write(&exp, Value::Object(expected).to_string()).unwrap();
    let out = Command::new(&py)
        .arg(root().join("tests/serve/test_tritonclient_kronos.py"))
        .args(["--http", &s.http, "--grpc", &s.grpc, "--expected", exp.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "tritonclient Kronos tests failed:\n{text}\nserver log:\n{}", s.log());
    assert!(text.contains("OK"), "{text}");
    eprintln!("{text}");
}
