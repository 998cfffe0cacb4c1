//! `totoc export` of a Kronos model, two checkpoint directories: the predictor (`--checkpoint`) and its tokenizer
//! (`--tokenizer`), on a tiny random-weight model (`exporter::kronos::synth`) and `configs/kronos-tiny.yaml`.
//! The graphs' numbers against upstream are the engine's equivalence tests' (on the reference fixtures); here:
//! what the command takes and refuses, the bundle it writes, byte-identical re-exports, the build cache over both
//! directories, the ONNX checker, and the engine build that this totoc does not have yet.
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

    // this totoc exports Kronos bundles but builds no Kronos engine yet: said, not crashed
    let err = totoc_err(&[
        "build-engine",
        "--artifacts",
        out.to_str().unwrap(),
        "--out",
        tmp.path().join("engine").to_str().unwrap(),
    ]);
    assert!(err.contains("Kronos engines are built by the Kronos engine") && err.contains("not in"), "{err}");
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
