//! What CI and the Dockerfile run, run here (no container runtime exists on these machines): the real
//! `scripts/build-artifacts.sh` on the tiny config gives verified bundles and a SHA256SUMS that `sha256sum -c`
//! accepts, and the engine it builds, served as the Dockerfile and the KServe runtime serve it, answers the probe
//! routes the KServe manifests name.
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

fn yaml(rel: &str) -> Value {
    serde_saphyr::from_str(&std::fs::read_to_string(root().join(rel)).unwrap()).unwrap()
}

/// Every httpGet probe path (and its port) in the KServe manifests.
fn probe_paths() -> Vec<(String, u64)> {
    let rt = yaml("deploy/kserve/servingruntime.yaml");
    let isvc = yaml("deploy/kserve/inferenceservice.yaml");
    let mut out = Vec::new();
    for spec in [&rt["spec"]["containers"][0], &isvc["spec"]["predictor"]["model"]] {
        for k in ["readinessProbe", "livenessProbe"] {
            let g = &spec[k]["httpGet"];
            out.push((g["path"].as_str().unwrap().to_string(), g["port"].as_u64().unwrap()));
        }
    }
    out
}

#[test]
fn build_artifacts_script_makes_verified_bundles_that_serve_the_kserve_probes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("artifacts");
    let run = Command::new(root().join("scripts/build-artifacts.sh"))
        .args(["--config", "configs/tiny.yaml", "--out", out.to_str().unwrap()])
        .args(["--totoc", env!("CARGO_BIN_EXE_totoc")])
        .current_dir(root())
        .output()
        .unwrap();
    let log = format!("{}{}", String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "build-artifacts.sh failed:\n{log}");
    assert!(log.contains("output checks passed"), "totoc verify did not run:\n{log}");
    let engine = out.join("tiny/engine-cpu");
    for dir in [out.join("tiny/export"), engine.clone()] {
        totoc_ok(&["bundle", "verify", dir.to_str().unwrap()]);
        assert!(dir.join("manifest.sha256").is_file());
    }
    let info: Value =
        serde_json::from_slice(&std::fs::read(out.join("tiny/engine-cpu.info.json")).unwrap()).unwrap();
    assert_eq!(info["kind"], "engine");
    let sums =
        Command::new("sha256sum").args(["-c", "--quiet", "SHA256SUMS"]).current_dir(&out).output().unwrap();
    assert!(sums.status.success(), "{}", String::from_utf8_lossy(&sums.stdout));
    let listed = std::fs::read_to_string(out.join("SHA256SUMS")).unwrap();
    assert!(
        listed.contains("./tiny/engine-cpu/manifest.json")
            && listed.contains("./tiny/export/weights.fp32.bin")
    );

    // a config whose checkpoint is not there: a clear refusal naming it
    let bad = Command::new(root().join("scripts/build-artifacts.sh"))
        .args(["--config", "configs/toto-base.yaml", "--checkpoint-root", tmp.path().to_str().unwrap()])
        .args(["--out", out.to_str().unwrap(), "--totoc", env!("CARGO_BIN_EXE_totoc")])
        .current_dir(root())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(2), "{err}");
    assert!(
        err.contains("checkpoint Datadog/Toto-Open-Base-1.0 of configs/toto-base.yaml not found"),
        "{err}"
    );

    // serve the built engine (loopback ports here; the manifests' 8080 is the container's) and GET every probe
    let mut child = Command::new(env!("CARGO_BIN_EXE_totoc"))
        .args(["serve", "--engine", engine.to_str().unwrap(), "--addr", "127.0.0.1:0", "--grpc-addr", "off"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr =
        line.trim().strip_prefix("totoc serve: http ").unwrap_or_else(|| panic!("{line:?}")).to_string();
    let probes = probe_paths();
    assert!(probes.iter().all(|(_, port)| *port == 8080));
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = |path: &str| match ureq::get(&format!("http://{addr}{path}")).call() {
        Ok(r) => r.status().as_u16(),
        Err(ureq::Error::StatusCode(c)) => c,
        Err(_) => 0,
    };
    for (path, _) in &probes {
        while status(path) != 200 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
        }
        assert_eq!(status(path), 200, "{path} on the served engine");
    }
    assert_eq!(status("/v2/health/nope"), 404, "an unknown route must not pass for a probe");
    let _ = child.kill();
    let _ = child.wait();
}
