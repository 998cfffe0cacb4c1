//! Kronos through the CLI: `totoc export` of a model of two checkpoint directories, the predictor (`--checkpoint`)
//! and its tokenizer (`--tokenizer`), on a tiny random-weight model (`exporter::kronos::synth`) and
//! `configs/kronos-tiny.yaml`; `build-engine`, `verify` on the reference fixtures the bundle carries, `bundle info`.
//! The numbers against upstream, case by case, are the engine's equivalence tests' (engines/src/kronos/
//! equivalence.rs); here: what the commands take and refuse, the bundles they write, byte-identical re-exports,
//! the build cache over both directories, the ONNX checker.
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use exporter::kronos::synth::{tiny_config, write_checkpoint};

use crate::common::*;
use crate::venv;

/// A tiny Kronos model under `dir`: (predictor, tokenizer).
fn tiny_model(dir: &Path, seed: u64) -> (PathBuf, PathBuf) {
    let (p, t) = (dir.join("predictor"), dir.join("tokenizer"));
    write_checkpoint(&p, &t, &tiny_config(), seed).unwrap();
    (p, t)
}

fn profiles() -> PathBuf {
    root().join("configs/kronos-tiny.yaml")
}

/// `totoc export` of predictor `p` with tokenizer `t` (if any) to `out`, plus `extra` flags.
fn export(p: &Path, t: Option<&Path>, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["export", "--checkpoint", p.to_str().unwrap()];
    if let Some(t) = t {
        args.extend(["--tokenizer", t.to_str().unwrap()]);
    }
    let config = profiles();
    args.extend(["--config", config.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    args.extend(extra);
    totoc(&args)
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// Every file of a bundle, by name, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (p.file_name().unwrap().to_string_lossy().into_owned(), fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_kronos_model_exports_from_both_directories() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, t) = tiny_model(tmp.path(), 5);
    let out = tmp.path().join("bundle");
    let res = export(&p, Some(&t), &out, &[]);
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    let m = manifest(&out);
    assert_eq!(m["model"]["generation"], "kronos");
    assert_eq!(m["model"]["config"]["tokenizer"]["group_size"], 4);
    let sha = |path: &Path| exporter::fsutil::sha256_file(path).unwrap();
    assert_eq!(m["checkpoint"]["safetensors_sha256"], sha(&p.join("model.safetensors")));
    assert_eq!(m["checkpoint"]["tokenizer"]["safetensors_sha256"], sha(&t.join("model.safetensors")));
    assert_eq!(m["checkpoint"]["tokenizer"]["config_sha256"], sha(&t.join("config.json")));
    assert_eq!(m["inputs"]["tokenizer.config.json"], sha(&t.join("config.json")));
    assert_eq!(m["precisions"], serde_json::json!(["fp32"]));
    assert_eq!(m["profiles"], serde_json::json!([]));
    let profile = &m["kronos_profiles"][0];
    assert_eq!((profile["profile"]["name"].as_str(), profile["window"].as_u64()), (Some("small"), Some(128)));
    let graphs: Vec<String> = profile["graphs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["file"].as_str().unwrap().to_string())
        .collect();
    // configs/kronos-tiny.yaml: listed encode/prefill/detokenize ladders, rows [1, 12] for the per-path graphs
    assert_eq!(
        graphs,
        [
            "small.encode.n1.s160.onnx",
            "small.encode.n3.s160.onnx",
            "small.prefill.n1.s64.onnx",
            "small.prefill.n1.s128.onnx",
            "small.prefill.n3.s128.onnx",
            "small.recompute.n1.s32.onnx",
            "small.recompute.n1.s64.onnx",
            "small.recompute.n1.s96.onnx",
            "small.recompute.n1.s128.onnx",
            "small.recompute.n12.s32.onnx",
            "small.recompute.n12.s64.onnx",
            "small.recompute.n12.s96.onnx",
            "small.recompute.n12.s128.onnx",
            "small.decode.n1.t128.onnx",
            "small.decode.n12.t128.onnx",
            "small.refine.n1.t128.onnx",
            "small.refine.n12.t128.onnx",
            "small.detokenize.n12.s128.onnx",
        ]
    );
    let decode = &profile["graphs"][14];
    assert_eq!(decode["bucket"], serde_json::json!({"kind": "decode", "rows": 12, "slots": 128}));
    let names: Vec<&str> =
        decode["inputs"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(names[..5], ["s1", "s2", "stamps", "write_pos", "k_cache.0"]);
    assert_eq!(decode["inputs"][4]["shape"], serde_json::json!([12, 2, 128, 8]));

    // `bundle info` prints both directories' hashes and every graph
    let info = totoc_ok(&["bundle", "info", out.to_str().unwrap()]);
    assert!(
        info.contains(&format!("tokenizer:   safetensors {}", sha(&t.join("model.safetensors")))),
        "{info}"
    );
    assert!(info.contains("refine") && info.contains("small.detokenize.n12.s128.onnx"), "{info}");

    // the same model and profiles again: byte for byte the same bundle
    let again = tmp.path().join("again");
    assert!(export(&p, Some(&t), &again, &[]).status.success());
    assert_eq!(files(&out), files(&again));

    // the build cache reads both directories: an edited tokenizer config re-exports, naming it
    let res = export(&p, Some(&t), &out, &[]);
    assert!(String::from_utf8_lossy(&res.stderr).contains("is up to date"));
    let text = fs::read_to_string(t.join("config.json")).unwrap().replace("\"zeta\": 0.05", "\"zeta\": 0.06");
    fs::write(t.join("config.json"), text).unwrap();
    let res = export(&p, Some(&t), &out, &[]);
    assert!(res.status.success());
    assert!(String::from_utf8_lossy(&res.stderr).contains("tokenizer.config.json:"), "{res:?}");

    // an fp32 CPU engine builds; other precisions and targets are refused by the family's capabilities
    let engine = tmp.path().join("engine");
    totoc_ok(&["build-engine", "--artifacts", out.to_str().unwrap(), "--out", engine.to_str().unwrap()]);
    let info = totoc_ok(&["bundle", "info", engine.to_str().unwrap()]);
    assert!(info.contains("small.decode.n12.t128.onnx") && info.contains("refine"), "{info}");
    for (flag, value, want) in
        [("--target", "cuda", "not built for Kronos bundles"), ("--precision", "fp16", "fp16")]
    {
        let e = totoc_err(&[
            "build-engine",
            "--artifacts",
            out.to_str().unwrap(),
            "--out",
            tmp.path().join("other").to_str().unwrap(),
            flag,
            value,
        ]);
        assert!(e.contains(want), "{flag} {value}: {e}");
    }
}

/// The k10 fixture checkpoints exported with configs/kronos-tiny.yaml and their reference cases (`--golden`):
/// `totoc verify` runs every case from the engine's own `golden/` and passes, printing each quantity.
#[test]
fn verify_runs_the_reference_cases_a_kronos_bundle_carries() {
    let tmp = tempfile::tempdir().unwrap();
    let k10 = root().join("tests/fixtures/kronos/k10");
    let (out, engine) = (tmp.path().join("bundle"), tmp.path().join("engine"));
    let cases = k10.join("cases");
    let res = export(
        &k10.join("predictor"),
        Some(&k10.join("tokenizer")),
        &out,
        &["--golden", cases.to_str().unwrap()],
    );
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    assert!(out.join("golden/slide.safetensors").is_file(), "the cases' arrays travel with them");
    totoc_ok(&["build-engine", "--artifacts", out.to_str().unwrap(), "--out", engine.to_str().unwrap()]);
    let report = totoc_ok(&["verify", "--engine", engine.to_str().unwrap()]);
    for case in ["greedy_daily", "slide", "topp_t07", "window_cut"] {
        assert!(report.contains(case), "{report}");
    }
    assert!(
        report.contains("s2 logits") && report.contains("encode tokens") && !report.contains("FAIL"),
        "{report}"
    );
    assert!(report.contains("checks passed"), "{report}");
    // a tampered reference token fails verify (exit 1), naming the quantity
    let golden = engine.join("golden/greedy_daily.json");
    let text = std::fs::read_to_string(&golden).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let first = v["reference"]["series"][0]["tokens"]["s1"][0][0].as_i64().unwrap();
    let mut v2 = v.clone();
    v2["reference"]["series"][0]["tokens"]["s1"][0][0] = serde_json::json!((first + 1) % 1024);
    let fixtures = tmp.path().join("tampered");
    std::fs::create_dir_all(&fixtures).unwrap();
    std::fs::write(fixtures.join("greedy_daily.json"), serde_json::to_string(&v2).unwrap()).unwrap();
    std::fs::copy(engine.join("golden/greedy_daily.safetensors"), fixtures.join("greedy_daily.safetensors"))
        .unwrap();
    let res =
        totoc(&["verify", "--engine", engine.to_str().unwrap(), "--fixtures", fixtures.to_str().unwrap()]);
    assert_eq!(res.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&res.stdout);
    assert!(stdout.contains("FAIL") && stdout.contains("tokens"), "{stdout}");
}

#[test]
fn the_tokenizer_is_asked_for_and_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, t) = tiny_model(tmp.path(), 6);
    let out = tmp.path().join("bundle");
    let err = |res: std::process::Output| {
        assert!(!res.status.success());
        String::from_utf8_lossy(&res.stderr).into_owned()
    };
    // the tokenizer's directory given as the checkpoint
    let e = err(export(&t, None, &out, &[]));
    assert!(e.contains("Kronos tokenizer config") && e.contains("--tokenizer"), "{e}");
    // no tokenizer: the config's model block names it, and the export asks for the flag
    let e = err(export(&p, None, &out, &[]));
    assert!(e.contains("tests/fixtures/kronos/k10/tokenizer") && e.contains("--tokenizer"), "{e}");
    // the predictor given as the tokenizer too
    let e = err(export(&p, Some(&p), &out, &[]));
    assert!(e.contains("holds a Kronos predictor (model) config, not a tokenizer's"), "{e}");
    // a tokenizer of other bit counts
    let mut other = tiny_config();
    other.tokenizer.s1_bits = 2;
    other.tokenizer.s2_bits = 2;
    let d = tmp.path().join("other");
    write_checkpoint(&d.join("p"), &d.join("t"), &tiny_config(), 6).unwrap();
    exporter::kronos::synth::write_dir(
        &d.join("t"),
        &other.tokenizer,
        &exporter::kronos::synth::tokenizer_stored(&other.tokenizer, 6),
    )
    .unwrap();
    let e = err(export(&p, Some(&d.join("t")), &out, &[]));
    assert!(e.contains("4/4 but the tokenizer's 2/2"), "{e}");
    // a predictor whose halves differ (upstream decodes such tokens into the wrong bits without a word)
    let uneven = tmp.path().join("uneven");
    write_checkpoint(&uneven, &d.join("t2"), &tiny_config(), 6).unwrap();
    let text = fs::read_to_string(uneven.join("config.json")).unwrap();
    let changed = text.replace("\"s2_bits\": 4", "\"s2_bits\": 3");
    assert_ne!(text, changed);
    fs::write(uneven.join("config.json"), changed).unwrap();
    let e = err(export(&uneven, Some(&t), &out, &[]));
    assert!(e.contains("s1_bits 4 ≠ s2_bits 3"), "{e}");
    // fp32 only, CPU only
    let e = err(export(&p, Some(&t), &out, &["--precision", "fp16"]));
    assert!(e.contains("fp32 only"), "{e}");
    assert!(!out.exists(), "a failed export left {out:?}");
}

#[test]
fn kronos_graphs_pass_onnx_full_check_at_both_opsets() {
    let Some(py) = venv::python(&venv::ONNX) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let (p, t) = tiny_model(tmp.path(), 7);
    for opset in ["24", "18"] {
        let out = tmp.path().join(format!("opset{opset}"));
        let res = export(&p, Some(&t), &out, &["--opset", opset]);
        assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
        let res = Command::new(&py).arg(root().join("tests/onnx_check.py")).arg(&out).output().unwrap();
        assert!(res.status.success(), "opset {opset}: {}", String::from_utf8_lossy(&res.stderr));
        assert_eq!(String::from_utf8_lossy(&res.stdout).matches("full_check ok").count(), 18);
    }
}

/// One k10 engine for the tests of this process that only read it (built once, in a shared fixture folder).
pub(crate) fn shared_k10_engine() -> &'static Path {
    static ENGINE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ENGINE.get_or_init(|| k10_engine(&shared_fixture_dir()))
}

/// A k10 engine (configs/kronos-tiny.yaml: window 128, horizons up to 24, up to 4 paths) under `dir`.
fn k10_engine(dir: &Path) -> PathBuf {
    let k10 = root().join("tests/fixtures/kronos/k10");
    let (out, engine) = (dir.join("bundle"), dir.join("engine"));
    let res = export(&k10.join("predictor"), Some(&k10.join("tokenizer")), &out, &[]);
    assert!(res.status.success(), "{}", String::from_utf8_lossy(&res.stderr));
    totoc_ok(&["build-engine", "--artifacts", out.to_str().unwrap(), "--out", engine.to_str().unwrap()]);
    engine
}

/// `totoc forecast` of `request` (JSON) on `engine`: the output, or the error.
fn forecast(engine: &Path, dir: &Path, request: &serde_json::Value) -> Result<serde_json::Value, String> {
    let (input, output) = (dir.join("request.json"), dir.join("response.json"));
    fs::write(&input, serde_json::to_vec(request).unwrap()).unwrap();
    let _ = fs::remove_file(&output);
    let res = totoc(&[
        "forecast",
        "--engine",
        engine.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ]);
    match res.status.success() {
        true => Ok(serde_json::from_slice(&fs::read(&output).unwrap()).unwrap()),
        false => Err(String::from_utf8_lossy(&res.stderr).into_owned()),
    }
}

/// `totoc forecast` reaches the Kronos engine through the request seam: the k10 greedy fixture's request (the
/// contract's JSON: named columns, a derived amount, stamps, params) gives upstream's recorded forecast within the
/// rows' tolerance, its columns in the request's order; the same series as a CSV table gives the same forecast;
/// and each bad input is one error naming the problem and the fix.
#[test]
fn forecast_reads_kronos_requests_and_refuses_bad_input() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = shared_k10_engine();
    let case: serde_json::Value = serde_json::from_slice(
        &fs::read(root().join("tests/fixtures/kronos/k10/cases/greedy_daily.json")).unwrap(),
    )
    .unwrap();
    let request = case["requests"][0].clone();
    let reference = &case["reference"]["series"][0];
    let got = forecast(engine, tmp.path(), &request).unwrap();
    let got = if got.is_array() { got[0].clone() } else { got };
    assert_eq!(got["model"], "kronos", "{got}");
    let mean = got["mean"].as_array().expect("mean [column][step]");
    assert_eq!(mean.len(), 5, "the request's five columns, in its order (amount derived, not returned)");
    let mut worst = 0f64;
    for (c, column) in mean.iter().enumerate() {
        let sigma = reference["stats"]["std"][c].as_f64().unwrap();
        for (t, v) in column.as_array().unwrap().iter().enumerate() {
            let want = reference["output"][t][c].as_f64().unwrap();
            let tol = 1e-4 * (sigma + 1e-5) + 1e-6 * want.abs();
            worst = worst.max((v.as_f64().unwrap() - want).abs() / tol);
        }
    }
    eprintln!("greedy_daily through totoc forecast: worst |Δ| / tolerance {worst:.3}");
    assert!(worst <= 1.0, "{worst}");

    // the same series with its columns in another order: the same forecast, its rows in that order
    let mut permuted = request.clone();
    permuted["columns"] = serde_json::json!(["close", "volume", "open", "high", "low"]);
    permuted["target"] = serde_json::json!([3, 4, 0, 1, 2].map(|c| request["target"][c].clone()));
    let p = forecast(engine, tmp.path(), &permuted).unwrap();
    let p = if p.is_array() { p[0].clone() } else { p };
    assert_eq!(p["mean"], serde_json::json!([3, 4, 0, 1, 2].map(|c| got["mean"][c].clone())));

    // the same series as a table (a timestamp column and the OHLCV columns; the weekday calendar with the
    // exchange's holiday, Presidents' Day, continues it to the fixture's future stamps): the same forecast
    let mut csv = format!("timestamp,{}\n", ["open", "high", "low", "close", "volume"].join(","));
    for (t, stamp) in request["timestamps"].as_array().unwrap().iter().enumerate() {
        let row: Vec<String> = (0..5).map(|c| request["target"][c][t].to_string()).collect();
        csv += &format!("{},{}\n", stamp.as_str().unwrap(), row.join(","));
    }
    let (table, out) = (tmp.path().join("series.csv"), tmp.path().join("forecast.csv"));
    let holidays = tmp.path().join("holidays.txt");
    fs::write(&table, csv).unwrap();
    fs::write(&holidays, "2013-02-18\n").unwrap();
    let args = ["forecast", "--engine", engine.to_str().unwrap(), "--input", table.to_str().unwrap()];
    let more =
        ["--horizon", "16", "--holidays", holidays.to_str().unwrap(), "--output", out.to_str().unwrap()];
    // the wide layout (the default for named columns): a row per step, a point column per input column
    totoc_ok(&[&args[..], &more[..]].concat());
    let wide = fs::read_to_string(&out).unwrap();
    let mut lines = wide.lines();
    assert_eq!(lines.next(), Some("timestamp,model,open,high,low,close,volume"), "{wide}");
    for (t, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        let want = request["future_timestamps"][t].as_str().unwrap();
        assert_eq!((f[0], f[1]), (want, "kronos"), "{line}");
        for c in 0..5 {
            let v: f32 = f[2 + c].parse().unwrap();
            assert_eq!(v, got["mean"][c][t].as_f64().unwrap() as f32, "step {t}, column {c}");
        }
    }
    assert_eq!(wide.lines().count(), 17);
    // the long layout, by flag: a row per column and step
    totoc_ok(&[&args[..], &more[..], &["--layout", "long"]].concat());
    let text = fs::read_to_string(&out).unwrap();
    let future: Vec<&str> =
        request["future_timestamps"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for (c, name) in ["open", "high", "low", "close", "volume"].iter().enumerate() {
        let rows: Vec<(&str, f32)> = text
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (f.get(1) == Some(name)).then(|| (f[0], f[3].parse().unwrap()))
            })
            .collect();
        let want: Vec<(&str, f32)> = future
            .iter()
            .zip(got["mean"][c].as_array().unwrap())
            .map(|(&t, v)| (t, v.as_f64().unwrap() as f32))
            .collect();
        assert_eq!(rows, want, "column {name} of the table's forecast");
    }

    // ±inf and NaN in a table's column: refused naming the column and the row
    for bad in ["inf", "-inf", "NaN"] {
        let text = fs::read_to_string(&table).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut cells: Vec<String> = lines[6].split(',').map(str::to_string).collect();
        cells[2] = bad.to_string();
        lines[6] = cells.join(",");
        let broken = tmp.path().join("broken.csv");
        fs::write(&broken, lines.join("\n") + "\n").unwrap();
        let e = totoc_err(&[
            "forecast",
            "--engine",
            engine.to_str().unwrap(),
            "--input",
            broken.to_str().unwrap(),
            "--horizon",
            "4",
        ]);
        eprintln!("{bad} in a table: {}", e.trim());
        assert!(e.contains("high") && e.contains(":7") && !e.contains("panicked"), "{bad}: {e}");
    }

    let with = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut r = request.clone();
        edit(&mut r);
        r
    };
    let bad: Vec<(&str, serde_json::Value, &[&str])> = vec![
        (
            "a missing price column",
            with(&|r| {
                r["columns"] = serde_json::json!(["open", "high", "low", "volume"]);
                r["target"].as_array_mut().unwrap().remove(3);
            }),
            &["close"],
        ),
        ("NaN in a column", with(&|r| r["target"][2][5] = serde_json::Value::Null), &["low", "5"]),
        (
            "duplicate timestamps",
            with(&|r| r["timestamps"][9] = r["timestamps"][8].clone()),
            &["timestamp", "2012-11-15"],
        ),
        (
            "no timestamps",
            with(&|r| {
                r.as_object_mut().unwrap().remove("timestamps");
            }),
            &["timestamps"],
        ),
        (
            "an empty context",
            with(&|r| {
                r["target"] = serde_json::json!([[], [], [], [], []]);
                r["timestamps"] = serde_json::json!([]);
            }),
            &["empty"],
        ),
        (
            "H beyond max_context",
            with(&|r| r["params"]["max_context"] = serde_json::json!(12)),
            &["horizon 16 exceeds max_context 12"],
        ),
        (
            "temperature with samples 0",
            with(&|r| r["temperature"] = serde_json::json!(0.7)),
            &["temperature"],
        ),
        (
            "top_p above 1",
            with(&|r| {
                r["samples"] = serde_json::json!(2);
                r["top_p"] = serde_json::json!(1.5);
            }),
            &["top_p", "1.5"],
        ),
        (
            "top_k below 0",
            with(&|r| {
                r["samples"] = serde_json::json!(2);
                r["top_k"] = serde_json::json!(-1);
            }),
            &["top_k", "-1"],
        ),
        (
            "temperature 0",
            with(&|r| {
                r["samples"] = serde_json::json!(2);
                r["temperature"] = serde_json::json!(0);
            }),
            &["temperature", "0"],
        ),
        (
            "a fractional max_context",
            with(&|r| r["params"]["max_context"] = serde_json::json!(64.5)),
            &["max_context"],
        ),
    ];
    for (what, r, want) in bad {
        let e = forecast(engine, tmp.path(), &r).expect_err(what);
        assert!(want.iter().all(|w| e.contains(w)), "{what}: {e}");
        assert!(!e.contains("panicked"), "{what}: {e}");
        eprintln!("{what}: {}", e.trim());
    }
}

/// `totoc bench cost` prices and times Kronos requests: its synthetic series carry the candle columns and wall
/// clocks the family reads (it refused them for want of `timestamps` before).
#[test]
fn bench_cost_prices_and_times_kronos_requests() {
    let engine = shared_k10_engine().to_str().unwrap();
    let out = totoc_ok(&[
        "bench",
        "cost",
        "--engine",
        engine,
        "--request",
        "1x1x8x0",
        "--request",
        "2x1x8x3",
        "--context",
        "64",
        "--runs",
        "1",
        "--threads",
        "1",
    ]);
    for row in ["1×1 h8 s0", "2×1 h8 s3"] {
        let line = out.lines().find(|l| l.starts_with(row)).unwrap_or_else(|| panic!("no row {row}: {out}"));
        assert!(line.contains(" yes "), "admitted and timed: {line}");
    }
}
