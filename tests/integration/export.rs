//! `totoc export`: the bundle's shape, determinism, the ONNX checker, and clear errors on bad input.
use std::fs;
use std::path::Path;
use std::process::Command;

use crate::common::*;
use crate::venv;

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

#[test]
fn export_writes_graphs_shared_weights_and_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bundle");
    export_fixture("tiny", &out);
    let m = manifest(&out);
    let files: Vec<&str> =
        m["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    // The default ladders of configs/tiny.yaml (patch 16): `small` (batch 2 × 4 variates, 256 + 160 points) and
    // `sampled` (1 × 2 variates × 256 paths, 128 + 64 points).
    let mut want = vec!["weights.fp32.bin".to_string()];
    for rows in [1, 4, 8] {
        for slots in [8, 16] {
            want.push(format!("small.prefill.n{rows}.s{slots}.onnx"));
        }
    }
    want.extend(["small.decode.n1.t25.onnx".into(), "small.decode.n8.t25.onnx".into()]);
    want.extend(["sampled.prefill.n1.s8.onnx".into(), "sampled.prefill.n2.s8.onnx".into()]);
    for rows in [1, 8, 16, 32, 64, 128, 256] {
        want.push(format!("sampled.decode.n{rows}.t11.onnx"));
    }
    // opset 24: each graph kind once more with rows and slots symbolic (what TensorRT engines are built from)
    want.extend(["dynamic.prefill.onnx".into(), "dynamic.decode.onnx".into()]);
    assert_eq!(files, want);
    let dynamic = m["dynamic_graphs"].as_array().unwrap();
    assert_eq!(dynamic.len(), 2);
    assert_eq!(dynamic[1]["inputs"][0]["dims"], serde_json::json!(["rows", 16]));
    assert!(dynamic[1]["inputs"].as_array().unwrap().iter().any(|i| i["name"] == "time_mask"));
    assert_eq!((m["format"].as_str(), m["format_version"].as_u64()), (Some("totoc-export/4"), Some(4)));
    assert_eq!(m["precisions"], serde_json::json!(["fp32"]));
    assert_eq!(m["weights"], serde_json::json!([{"precision": "fp32", "file": "weights.fp32.bin"}]));
    assert_eq!(m["variant"], "opset24");
    for g in m["profiles"].as_array().unwrap().iter().flat_map(|p| p["graphs"].as_array().unwrap()) {
        let (kind, rows, slots) = (
            g["bucket"]["kind"].as_str().unwrap(),
            g["bucket"]["rows"].as_u64().unwrap(),
            g["bucket"]["slots"].as_u64().unwrap(),
        );
        let letter = if kind == "prefill" { "s" } else { "t" };
        assert!(
            g["file"].as_str().unwrap().ends_with(&format!(".{kind}.n{rows}.{letter}{slots}.onnx")),
            "{g}"
        );
        assert!(g["memory_bytes"].as_u64().unwrap() > 0);
        assert_eq!(g["dims"]["rows"], g["bucket"]["rows"]);
    }
    // Weights are stored once: the graphs are small, the weight file holds every parameter once.
    let params: u64 = fs::metadata(out.join("weights.fp32.bin")).unwrap().len();
    for f in &files[1..] {
        assert!(fs::metadata(out.join(f)).unwrap().len() < 200_000, "{f} embeds weights");
    }
    assert!(params > 0);
    assert_eq!(m["opset"], 24);
    assert_eq!(m["cache_update"], "tensor_scatter");
    let dec = &m["profiles"][0]["graphs"][6];
    assert_eq!(dec["bucket"]["kind"], "decode");
    let ins: Vec<&str> =
        dec["inputs"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(ins.contains(&"k_cache.2") && ins.contains(&"write_pos"), "{ins:?}");
    // No partial directories left behind.
    let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

/// Every graph of both precisions must be capturable as one static computation (a CUDA graph, a TensorRT engine):
/// no control flow, no data-dependent shapes, no shape arithmetic at run time, fully static I/O — and the
/// shape-polymorphic graphs the same, except for their symbolic rows and slots.
#[test]
fn graphs_are_static_and_control_flow_free() {
    use exporter::pb::{tensor_shape_proto::dimension::Value as Dim, type_proto::Value as Ty, ModelProto};
    use prost::Message;
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bundle");
    export_fixture_with("tiny", &out, &["--precision", "fp32", "--precision", "fp16"]);
    assert!(out.join("weights.fp16.bin").exists() && out.join("small.decode.n8.t25.fp16.onnx").exists());
    let forbidden = ["If", "Loop", "Scan", "NonZero", "Shape", "Size", "Range", "Unique", "TopK", "Compress"];
    for e in fs::read_dir(&out).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_none_or(|x| x != "onnx") {
            continue;
        }
        let m = ModelProto::decode(fs::read(&path).unwrap().as_slice()).unwrap();
        let g = m.graph.unwrap();
        for n in &g.node {
            assert!(!forbidden.contains(&n.op_type.as_str()), "{path:?}: {} is a {}", n.name, n.op_type);
        }
        // The shape-polymorphic graphs (TensorRT) have symbolic rows and slots and nothing else dynamic; every
        // bucket's graph is fully static.
        let dynamic = path.file_name().unwrap().to_string_lossy().starts_with("dynamic.");
        for vi in g.input.iter().chain(&g.output) {
            let Some(Ty::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.clone()) else { panic!() };
            for d in t.shape.unwrap().dim {
                let ok = match d.value {
                    Some(Dim::DimValue(v)) => v > 0,
                    Some(Dim::DimParam(p)) => dynamic && (p == "rows" || p == "slots"),
                    None => false,
                };
                assert!(ok, "{path:?}: {} is not static", vi.name);
            }
        }
        // Every KV cache output has a cache input of the same name stem (the in-place contract).
        let ins: Vec<&str> = g.input.iter().map(|i| i.name.as_str()).collect();
        if path.to_string_lossy().contains(".decode.") {
            for o in g.output.iter().filter(|o| o.name.contains("cache_out")) {
                assert!(ins.contains(&o.name.replace("_out", "").as_str()), "{}", o.name);
            }
            let writes = g.node.iter().filter(|n| n.op_type == "TensorScatter").count();
            assert_eq!(writes, 2 * 3, "one TensorScatter per K and V cache of the 3 time-wise layers");
        }
    }
}

#[test]
fn reexport_is_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    export_fixture("tiny_spacefirst", &a);
    export_fixture("tiny_spacefirst", &b);
    for e in fs::read_dir(&a).unwrap() {
        let name = e.unwrap().file_name();
        assert_eq!(fs::read(a.join(&name)).unwrap(), fs::read(b.join(&name)).unwrap(), "{name:?} differs");
    }
}

/// Every variant the exporter writes: each fixture config at opset 24 (TensorScatter) in fp32 and fp16, and
/// the opset-18 (ScatterND) variant in both precisions.
#[test]
fn every_graph_passes_onnx_full_check() {
    let Some(py) = venv::python(&venv::ONNX) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let both = ["--precision", "fp32", "--precision", "fp16"];
    for config in ["tiny", "tiny_spacefirst", "tiny_alltime", "tiny64"] {
        let out = tmp.path().join(config);
        export_fixture_with(config, &out, &both);
        let res = Command::new(&py).arg(root().join("tests/onnx_check.py")).arg(&out).output().unwrap();
        assert!(res.status.success(), "{config}: {}", String::from_utf8_lossy(&res.stderr));
        let graphs = fs::read_dir(&out)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "onnx"))
            .count();
        assert!(graphs > 4);
        assert_eq!(String::from_utf8_lossy(&res.stdout).matches("full_check ok").count(), graphs);
    }
    // The opset-18 ScatterND variant for older runtimes, both precisions.
    let out = tmp.path().join("opset18");
    export_fixture_with("tiny", &out, &["--opset", "18", "--precision", "fp32", "--precision", "fp16"]);
    let res = Command::new(&py).arg(root().join("tests/onnx_check.py")).arg(&out).output().unwrap();
    assert!(res.status.success(), "opset 18: {}", String::from_utf8_lossy(&res.stderr));
    let m = manifest(&out);
    assert_eq!((m["variant"].as_str(), m["opset"].as_i64()), (Some("opset18"), Some(18)));
    assert_eq!(m["cache_update"], "scatter_nd");
    let err = totoc_err(&["export", "--checkpoint", "x", "--config", "y", "--out", "z", "--opset", "17"]);
    assert!(err.contains("17 is not a supported opset: 24 (TensorScatter) or 18 (ScatterND)"), "{err}");
}

/// Exports a modified copy of the tiny checkpoint and expects a failure mentioning `needle`, with nothing written.
fn expect_export_error(modify: impl FnOnce(&Path), profiles: Option<&str>, needle: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let ck = tmp.path().join("ck");
    copy_dir(&fixture_checkpoint("tiny"), &ck);
    modify(&ck);
    let yaml = tmp.path().join("p.yaml");
    fs::write(&yaml, profiles.unwrap_or(&fs::read_to_string(tiny_profiles()).unwrap())).unwrap();
    let out = tmp.path().join("out");
    let err = totoc_err(&[
        "export",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--config",
        yaml.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
    assert!(!out.exists(), "a failed export left {out:?}");
    let stray: Vec<_> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("out"))
        .collect();
    assert!(stray.is_empty(), "partial output left: {stray:?}");
}

#[test]
fn truncated_safetensors_is_a_clear_error() {
    expect_export_error(
        |ck| {
            let p = ck.join("model.safetensors");
            let len = fs::metadata(&p).unwrap().len();
            let f = fs::OpenOptions::new().write(true).open(&p).unwrap();
            f.set_len(len - 100).unwrap();
        },
        None,
        "model.safetensors",
    );
}

/// Rewrites one tensor's header entry of a safetensors file, keeping the byte layout valid.
fn edit_header(ck: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let p = ck.join("model.safetensors");
    let bytes = fs::read(&p).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    edit(&mut header);
    let mut h = serde_json::to_vec(&header).unwrap();
    while h.len() < n {
        h.push(b' ');
    }
    assert!(h.len() <= n, "edited header grew");
    let mut out = bytes[..8].to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&bytes[8 + n..]);
    fs::write(&p, out).unwrap();
}

/// Rewrites a safetensors file without one tensor (offsets of the others recomputed).
fn drop_tensor(ck: &Path, name: &str) {
    let p = ck.join("model.safetensors");
    let bytes = fs::read(&p).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    let mut out_header = serde_json::Map::new();
    let mut out_data = Vec::new();
    for (k, v) in header {
        if k == name || k == "__metadata__" {
            continue;
        }
        let offs = v["data_offsets"].as_array().unwrap();
        let (a, b) = (offs[0].as_u64().unwrap() as usize, offs[1].as_u64().unwrap() as usize);
        let start = out_data.len();
        out_data.extend_from_slice(&data[a..b]);
        let mut v = v.clone();
        v["data_offsets"] = serde_json::json!([start, out_data.len()]);
        out_header.insert(k, v);
    }
    let h = serde_json::to_vec(&out_header).unwrap();
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(&out_data);
    fs::write(&p, out).unwrap();
}

#[test]
fn wrong_dtype_is_a_clear_error() {
    expect_export_error(
        |ck| {
            edit_header(ck, |h| {
                // Same byte size: an I32 tensor where F32 is expected.
                h["model.unembed.bias"]["dtype"] = "I32".into();
            })
        },
        None,
        "model.unembed.bias",
    );
}

#[test]
fn missing_tensor_is_a_clear_error() {
    expect_export_error(|ck| drop_tensor(ck, "model.unembed.bias"), None, "model.unembed.bias");
}

#[test]
fn unknown_config_key_is_a_clear_error() {
    expect_export_error(
        |ck| {
            let p = ck.join("config.json");
            let mut c: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
            c["rope_scaling"] = 2.into();
            fs::write(&p, serde_json::to_vec(&c).unwrap()).unwrap();
        },
        None,
        "rope_scaling",
    );
}

#[test]
fn profile_larger_than_the_model_allows_is_a_clear_error() {
    expect_export_error(
        |_| {},
        Some("profiles:\n  - name: huge\n    batch: 1\n    variates: 1\n    context: 1000000\n    horizon: 64\n"),
        "huge",
    );
}

/// `--tokenizer` belongs to models exported with their tokenizer; a Toto checkpoint has none, so it is refused
/// by name, with nothing written.
#[test]
fn a_tokenizer_for_a_model_without_one_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let ck = fixture_checkpoint("tiny");
    let err = totoc_err(&[
        "export",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--tokenizer",
        ck.to_str().unwrap(),
        "--config",
        tiny_profiles().to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("has no tokenizer checkpoint; remove --tokenizer"), "{err}");
    assert!(!out.exists());
}

/// A profile may list its own buckets; they must cover the profile's bounds, and mistakes name the line.
#[test]
fn listed_buckets_replace_the_default_ladder_and_are_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let yaml = tmp.path().join("p.yaml");
    let good = "profiles:\n  - name: own\n    batch: 2\n    variates: 1\n    context: 128\n    horizon: 64\n    samples: 4\n    buckets:\n      prefill:\n        - {rows: 2, context: 128}\n      decode:\n        - {rows: 1, context: 64, horizon: 64}\n        - {rows: 8, context: 128, horizon: 64}\n";
    fs::write(&yaml, good).unwrap();
    let out = tmp.path().join("b");
    let ck = fixture_checkpoint("tiny");
    totoc_ok(&[
        "export",
        "--checkpoint",
        ck.to_str().unwrap(),
        "--config",
        yaml.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let mut names: Vec<String> = fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".onnx") && !n.starts_with("dynamic."))
        .collect();
    names.sort();
    assert_eq!(names, ["own.decode.n1.t7.onnx", "own.decode.n8.t11.onnx", "own.prefill.n2.s8.onnx"]);
    assert!(out.join("dynamic.prefill.onnx").exists() && out.join("dynamic.decode.onnx").exists());
    for (bad, needle) in [
        (
            good.replace("{rows: 2, context: 128}", "{rows: 2, context: 64}"),
            "largest listed prefill bucket must hold",
        ),
        (
            good.replace("{rows: 8, context: 128, horizon: 64}", "{rows: 9, context: 128, horizon: 64}"),
            "line 13",
        ),
        (
            good.replace("{rows: 8, context: 128, horizon: 64}", "{rows: 8, context: 64, horizon: 64}"),
            "largest listed decode bucket",
        ),
        (good.replace("rows: 2, context", "rowz: 2, context"), "unknown field `rowz`"),
    ] {
        fs::write(&yaml, bad).unwrap();
        let err = totoc_err(&[
            "export",
            "--checkpoint",
            ck.to_str().unwrap(),
            "--config",
            yaml.to_str().unwrap(),
            "--out",
            tmp.path().join("x").to_str().unwrap(),
        ]);
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

/// A bundle from an older totoc says which totoc made it and what to run.
#[test]
fn an_older_bundle_says_to_rebuild_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("old");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("manifest.json"), r#"{"format": "totoc-export/1", "profiles": []}"#).unwrap();
    let err = totoc_err(&[
        "build-engine",
        "--artifacts",
        dir.to_str().unwrap(),
        "--out",
        tmp.path().join("e").to_str().unwrap(),
    ]);
    assert!(
        err.contains("totoc-export/1")
            && err.contains("totoc 0.1")
            && err.contains("rebuild it with `totoc export`"),
        "{err}"
    );
    fs::write(dir.join("manifest.json"), r#"{"format": "totoc-export/2", "profiles": []}"#).unwrap();
    let err = totoc_err(&[
        "build-engine",
        "--artifacts",
        dir.to_str().unwrap(),
        "--out",
        tmp.path().join("e").to_str().unwrap(),
    ]);
    assert!(err.contains("totoc-export/2") && err.contains("before precisions"), "{err}");
    fs::write(dir.join("manifest.json"), r#"{"format": "totoc-engine/1"}"#).unwrap();
    let req = tmp.path().join("r.json");
    fs::write(&req, r#"{"target": [[1.0, 2.0]], "horizon": 4}"#).unwrap();
    let err = totoc_err(&["forecast", "--engine", dir.to_str().unwrap(), "--input", req.to_str().unwrap()]);
    assert!(err.contains("totoc-engine/1") && err.contains("rebuild it with `totoc build-engine`"), "{err}");
}
