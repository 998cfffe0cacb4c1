//! Bundle integrity end to end: `totoc bundle verify`, and every loader (`build-engine` for export bundles;
//! `forecast` and `serve` for engines), refuse a damaged bundle — a flipped byte in every kind of file, a
//! truncated, missing or unlisted file, an edited manifest — naming the file. `bundle info` describes both kinds.
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use crate::common::*;

/// An export bundle (with golden cases) and its CPU engine, made once; tests damage copies.
fn pristine() -> &'static (PathBuf, PathBuf) {
    static DIRS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    DIRS.get_or_init(|| {
        let dir = shared_fixture_dir();
        let (bundle, engine) = (dir.join("bundle"), dir.join("engine"));
        let golden = root().join("tests/fixtures/tiny/cases");
        export_fixture_with("tiny", &bundle, &["--golden", golden.to_str().unwrap()]);
        build_engine(&bundle, &engine);
        (bundle, engine)
    })
}

/// A way to damage a bundle, and the `file: problem` text every refusal must contain.
struct Damage {
    name: &'static str,
    apply: fn(&Path) -> String,
}

fn flip_byte(dir: &Path, file: &str) -> String {
    let p = dir.join(file);
    let mut bytes = fs::read(&p).unwrap();
    let i = bytes.len() / 2;
    bytes[i] ^= 0x01;
    fs::write(&p, bytes).unwrap();
    format!("{file}: modified")
}

/// The first file of the bundle whose name satisfies `pick`.
fn file_like(dir: &Path, pick: fn(&str) -> bool) -> String {
    let m: Value = serde_json::from_slice(&fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    m["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .find(|p| pick(p))
        .unwrap_or_else(|| panic!("no such file in {}", dir.display()))
}

const DAMAGES: &[Damage] = &[
    Damage {
        name: "flipped byte in the weights",
        apply: |d| flip_byte(d, &file_like(d, |p| p.starts_with("weights.") && p.ends_with(".bin"))),
    },
    Damage {
        name: "flipped byte in a prefill graph",
        apply: |d| flip_byte(d, &file_like(d, |p| p.contains(".prefill."))),
    },
    Damage {
        name: "flipped byte in a decode graph",
        apply: |d| flip_byte(d, &file_like(d, |p| p.contains(".decode."))),
    },
    Damage {
        name: "flipped byte in a golden case",
        apply: |d| flip_byte(d, &file_like(d, |p| p.starts_with("golden/"))),
    },
    Damage {
        name: "truncated weights",
        apply: |d| {
            let f = file_like(d, |p| p.starts_with("weights."));
            let p = d.join(&f);
            let len = fs::metadata(&p).unwrap().len();
            fs::OpenOptions::new().write(true).open(&p).unwrap().set_len(len / 2).unwrap();
            format!("{f}: truncated ({} of {len} bytes)", len / 2)
        },
    },
    Damage {
        name: "missing graph",
        apply: |d| {
            let f = file_like(d, |p| p.contains(".decode."));
            fs::remove_file(d.join(&f)).unwrap();
            format!("{f}: missing")
        },
    },
    Damage {
        name: "extra unlisted file",
        apply: |d| {
            fs::write(d.join("extra.onnx"), b"not listed").unwrap();
            "extra.onnx: not listed in the manifest".into()
        },
    },
    Damage {
        name: "edited manifest",
        apply: |d| {
            let p = d.join("manifest.json");
            let text = fs::read_to_string(&p).unwrap();
            // a plausible edit that keeps it valid JSON of the same format: another memory estimate
            let edited = text.replacen("\"memory_bytes\": ", "\"memory_bytes\": 1", 1);
            assert_ne!(text, edited);
            fs::write(&p, edited).unwrap();
            "manifest.json: edited after it was written".into()
        },
    },
    Damage {
        name: "missing manifest hash",
        apply: |d| {
            fs::remove_file(d.join("manifest.sha256")).unwrap();
            "manifest.sha256: missing".into()
        },
    },
];

/// A damaged copy of `from` and the text naming its problem.
fn damaged(from: &Path, tmp: &Path, d: &Damage) -> (PathBuf, String) {
    let dir = tmp.join(d.name.replace(' ', "-"));
    copy_dir(from, &dir);
    let want = (d.apply)(&dir);
    (dir, want)
}

fn bundle_verify_refuses(dir: &Path, want: &str, case: &str) {
    let out = totoc(&["bundle", "verify", dir.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{case}: bundle verify: {err}");
    assert!(err.contains(want) && err.contains("FAILED (1 problem(s))"), "{case}: bundle verify: {err}");
}

#[test]
fn intact_bundles_pass_verify_and_info_describes_them() {
    let (bundle, engine) = pristine();
    for dir in [bundle, engine] {
        let ok = totoc_ok(&["bundle", "verify", dir.to_str().unwrap()]);
        assert!(ok.contains(": OK (manifest.json matches manifest.sha256;"), "{ok}");
        let v: Value =
            serde_json::from_str(&totoc_ok(&["bundle", "verify", "--json", dir.to_str().unwrap()])).unwrap();
        assert_eq!((v["ok"].as_bool(), v["problems"].as_array().unwrap().len()), (Some(true), 0));
    }
    let info: Value =
        serde_json::from_str(&totoc_ok(&["bundle", "info", "--json", engine.to_str().unwrap()])).unwrap();
    assert_eq!(info["info_format"], "totoc-bundle-info/1");
    assert_eq!((info["kind"].as_str(), info["intact"].as_bool()), (Some("engine"), Some(true)));
    assert_eq!(info["target"]["kind"], "cpu");
    assert_eq!(info["precisions"], serde_json::json!(["fp32"]));
    assert_eq!(info["model"]["generation"], "toto-1.0");
    assert_eq!(info["model"]["config"]["embed_dim"], 64);
    let want_sha = exporter::fsutil::sha256_bytes(&fs::read(engine.join("manifest.json")).unwrap());
    assert_eq!(info["manifest_sha256"].as_str(), Some(want_sha.as_str()));
    let profiles = info["profiles"].as_array().unwrap();
    assert_eq!(
        profiles.iter().map(|p| p["name"].as_str().unwrap()).collect::<Vec<_>>(),
        ["small", "sampled"]
    );
    let small = &profiles[0]["buckets"][0];
    assert_eq!(
        (small["kind"].as_str(), small["rows"].as_u64(), small["slots"].as_u64()),
        (Some("prefill"), Some(1), Some(8))
    );
    assert!(small["memory_bytes"].as_u64().unwrap() > 0);
    let files = info["files"].as_array().unwrap();
    let total: u64 = files.iter().map(|f| f["bytes"].as_u64().unwrap()).sum();
    assert_eq!(info["total_bytes"].as_u64(), Some(total));
    assert!(files.iter().all(|f| f["sha256"].as_str().unwrap().len() == 64));
    let export: Value =
        serde_json::from_str(&totoc_ok(&["bundle", "info", "--json", bundle.to_str().unwrap()])).unwrap();
    assert_eq!((export["kind"].as_str(), export["target"].is_null()), (Some("export"), true));
    // the text form names the same things
    let text = totoc_ok(&["bundle", "info", engine.to_str().unwrap()]);
    for needle in [
        "engine bundle",
        "integrity:   OK",
        "profile small:",
        "prefill rows    1 slots     8 fp32",
        "weights.fp32.bin",
    ] {
        assert!(text.contains(needle), "{needle:?} not in:\n{text}");
    }
}

#[test]
fn damaged_export_bundles_are_refused_by_verify_and_build_engine() {
    let tmp = tempfile::tempdir().unwrap();
    for d in DAMAGES {
        let (dir, want) = damaged(&pristine().0, tmp.path(), d);
        bundle_verify_refuses(&dir, &want, d.name);
        let out = tmp.path().join("engine-of-damaged");
        let err = totoc_err(&[
            "build-engine",
            "--artifacts",
            dir.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(
            err.contains("failed its integrity check") && err.contains(&want),
            "{}: build-engine: {err}",
            d.name
        );
        assert!(err.contains("re-create it with `totoc export`"), "{err}");
        assert!(!out.exists(), "{}: nothing may be built from a damaged bundle", d.name);
    }
}

#[test]
fn damaged_engines_are_refused_by_verify_forecast_and_serve() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("req.json");
    let case: Value =
        serde_json::from_slice(&fs::read(root().join("tests/fixtures/tiny/cases/mean_1v.json")).unwrap())
            .unwrap();
    fs::write(&input, case["request"].to_string()).unwrap();
    // the pristine engine forecasts, so the refusals below are the damage's doing
    totoc_ok(&["forecast", "--engine", pristine().1.to_str().unwrap(), "--input", input.to_str().unwrap()]);
    for d in DAMAGES {
        let (dir, want) = damaged(&pristine().1, tmp.path(), d);
        bundle_verify_refuses(&dir, &want, d.name);
        let err =
            totoc_err(&["forecast", "--engine", dir.to_str().unwrap(), "--input", input.to_str().unwrap()]);
        assert!(
            err.contains("failed its integrity check") && err.contains(&want),
            "{}: forecast: {err}",
            d.name
        );
        assert!(err.contains("re-create it with `totoc build-engine`"), "{err}");
        // serve exits at startup, before binding, with the same message
        let out = Command::new(env!("CARGO_BIN_EXE_totoc"))
            .args(["serve", "--engine", dir.to_str().unwrap(), "--addr", "127.0.0.1:0", "--grpc-addr", "off"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{}: serve started on a damaged engine", d.name);
        assert!(
            err.contains("failed its integrity check") && err.contains(&want),
            "{}: serve: {err}",
            d.name
        );
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("totoc serve: http"),
            "{}: serve bound",
            d.name
        );
    }
}
