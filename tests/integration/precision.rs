//! Precisions and targets from the command line: an fp32 + fp16 bundle, the CPU fp16 emulation engine verified
//! against its golden set, precisions a bundle does not hold, `totoc doctor`, and GPU targets on a machine without
//! a GPU (the doctor's findings, nothing written).
use std::fs;

use serde_json::Value;

use crate::common::*;

fn manifest(dir: &std::path::Path) -> Value {
    serde_json::from_slice(&fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

#[test]
fn fp16_emulation_engine_builds_says_so_and_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let golden = root().join("tests/fixtures/tiny/cases");
    export_fixture_with(
        "tiny",
        &bundle,
        &["--precision", "fp32", "--precision", "fp16", "--golden", golden.to_str().unwrap()],
    );
    let m = manifest(&bundle);
    assert_eq!(m["precisions"], serde_json::json!(["fp32", "fp16"]));
    assert_eq!(m["fp32_regions"], serde_json::json!(["rms_norm", "softmax", "head", "residual"]));
    let hashed: Vec<&str> =
        m["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert!(hashed.contains(&"weights.fp16.bin") && hashed.contains(&"weights.fp32.bin"));
    // fp16 weights are about half the fp32 ones (the fp32 regions' weights stay f32, the folded output head most
    // of them: 0.60 on the tiny model)
    let size = |f: &str| fs::metadata(bundle.join(f)).unwrap().len() as f64;
    let ratio = size("weights.fp16.bin") / size("weights.fp32.bin");
    assert!(ratio > 0.45 && ratio < 0.65, "{ratio}");

    let engine = tmp.path().join("e16");
    let out = totoc(&[
        "build-engine",
        "--artifacts",
        bundle.to_str().unwrap(),
        "--out",
        engine.to_str().unwrap(),
        "--fp16",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("emulation engine") && stderr.contains("not faster"), "{stderr}");
    let e = manifest(&engine);
    assert_eq!((e["precision"].as_str(), e["fp16_emulation"].as_bool()), (Some("fp16"), Some(true)));
    assert_eq!(e["weights_file"], "weights.fp16-emulated.bin");
    assert_eq!(e["format"], "totoc-engine/4");
    let verify = totoc_ok(&["verify", "--engine", engine.to_str().unwrap()]);
    assert!(verify.contains("35 of 35 output checks passed"), "{verify}");
    assert!(
        verify.contains("cpu fp16-emulation") && verify.contains("1e-2·max(σ, scaler scale)"),
        "{verify}"
    );

    // the same bundle's fp32 engine by default; --precision fp32 explicitly
    let e32 = tmp.path().join("e32");
    build_engine(&bundle, &e32);
    assert_eq!(manifest(&e32)["precision"], "fp32");
    let verify = totoc_ok(&["verify", "--engine", e32.to_str().unwrap()]);
    assert!(verify.contains("1e-4·σ + 1e-6·|ref|"), "{verify}");
}

#[test]
fn a_precision_the_bundle_lacks_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    export_fixture("tiny", &bundle);
    let out = tmp.path().join("e");
    let err = totoc_err(&[
        "build-engine",
        "--artifacts",
        bundle.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--precision",
        "fp16",
    ]);
    assert!(err.contains("holds fp32 graphs, not fp16") && err.contains("--precision fp16"), "{err}");
    assert!(!out.exists());
    let err = totoc_err(&[
        "build-engine",
        "--artifacts",
        bundle.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--precision",
        "fp32",
        "--fp16",
    ]);
    assert!(err.contains("cannot be used with"), "{err}");
}

#[test]
fn doctor_reports_providers_libraries_and_targets() {
    let text = totoc_ok(&["doctor"]);
    assert!(text.contains("ONNX Runtime 1.31.1 from"), "{text}");
    assert!(text.contains("cpu       ready"), "{text}");
    for lib in ["libcudart.so.13", "libcudnn.so.9", "libnvinfer.so.10"] {
        assert!(text.contains(lib), "{lib}: {text}");
    }
    let json: Value = serde_json::from_str(&totoc_ok(&["doctor", "--json"])).unwrap();
    let verdicts = json["verdicts"].as_array().unwrap();
    assert_eq!(
        verdicts.iter().map(|v| v["target"].as_str().unwrap()).collect::<Vec<_>>(),
        ["cpu", "cuda", "tensorrt"]
    );
    assert_eq!(verdicts[0]["ready"], true);
    if json["facts"]["gpus"]["Ok"].as_array().is_none_or(|g| g.is_empty()) {
        // a machine without a GPU: the GPU targets say why, with the package to install
        assert_eq!(verdicts[1]["ready"], false);
        assert!(!verdicts[1]["notes"].as_array().unwrap().is_empty());
    }
}

#[test]
fn gpu_targets_on_a_cpu_machine_give_the_doctors_findings_and_write_nothing() {
    let doctor: Value = serde_json::from_str(&totoc_ok(&["doctor", "--json"])).unwrap();
    if doctor["verdicts"][1]["ready"] == true {
        eprintln!("skipping: this machine can run the CUDA target");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    export_fixture("tiny", &bundle);
    for target in ["cuda", "tensorrt"] {
        let out = tmp.path().join(target);
        let err = totoc_err(&[
            "build-engine",
            "--artifacts",
            bundle.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--target",
            target,
            "--cuda-graph",
        ]);
        assert!(err.contains("not available") && err.contains("`totoc doctor`"), "{err}");
        assert!(err.contains("onnxruntime-gpu 1.31.1"), "{err}");
        if doctor["facts"]["libraries"].as_array().unwrap().iter().any(|l| l["path"].is_null()) {
            assert!(err.contains("this machine also lacks") && err.contains("pip install"), "{err}");
        }
        assert!(!out.exists(), "{target}: nothing written");
        let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.iter().all(|n| !n.to_string_lossy().contains("partial")), "{left:?}");
    }
}
