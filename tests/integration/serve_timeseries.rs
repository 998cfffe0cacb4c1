//! `POST /v1/timeseries/forecast`, KServe's time-series API, on a Toto 1.0, a Toto 2.0 and a Kronos engine (the
//! engines the serve, Toto 2.0 and Kronos tests build, shared): every request and answer validates against
//! KServe's own pydantic types (kserve 0.21, from the venv of `scripts/setup-serve-venv.sh`), every number equals
//! `/v1/forecast`'s for the same series and seed on the same server, and malformed, oversized and hostile
//! requests get KServe's `ErrorResponse` with a 4xx (tests/serve/test_kserve_timeseries.py does the checks).
use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{json, Value};

use crate::common::*;
use crate::serve::{metric, Server};

/// `n` hourly stamps from 2024-01-01T00:00:00 (at most 31 days of them).
fn hourly(n: usize) -> Vec<String> {
    assert!(n <= 31 * 24);
    (0..n).map(|i| format!("2024-01-{:02}T{:02}:00:00", 1 + i / 24, i % 24)).collect()
}

/// The request of a golden case file (`request`, or the first of `requests`), named `id`, with hourly stamps.
fn stamped(path: &Path, id: &str) -> Value {
    let case: Value = serde_json::from_slice(&fs::read(path).unwrap()).unwrap();
    let mut req = case.get("request").unwrap_or(&case["requests"][0]).clone();
    req["id"] = json!(id);
    let len = req["target"][0].as_array().unwrap().len();
    req["timestamps"] = json!(hourly(len));
    req
}

/// Starts a server on `engine`, runs the Python checks of `spec` against it, and returns it (`None`: no venv).
fn check(engine: &Path, extra: &[&str], spec: Value) -> Option<Server> {
    let py = crate::venv::python(&crate::venv::SERVE)?;
    let start = Instant::now();
    let s = Server::ready(engine, extra);
    let tmp = tempfile::tempdir().unwrap();
    let cases = tmp.path().join("cases.json");
    fs::write(&cases, spec.to_string()).unwrap();
    let out = Command::new(&py)
        .arg(root().join("tests/serve/test_kserve_timeseries.py"))
        .args(["--http", &s.http, "--cases", cases.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "KServe time-series checks failed:\n{text}\nserver log:\n{}", s.log());
    assert!(text.contains("OK"), "{text}");
    eprintln!("{text}(server start, readiness and checks: {:.1} s)", start.elapsed().as_secs_f64());
    Some(s)
}

/// Toto 1.0: a univariate and a grouped multivariate series in one request, and sampled quantiles with a seed,
/// each series' stamps continued from its `start_timestamp`; then the bad requests.
#[test]
fn kserve_timeseries_on_toto_1_equals_v1_and_refuses_bad_requests() {
    let cases = root().join("tests/fixtures/tiny/cases");
    let spec = json!({
        "model": "toto",
        "frequency": "H",
        "cases": [
            {"name": "mean", "start": true, "requests": [
                stamped(&cases.join("mean_1v.json"), "a"), stamped(&cases.join("mean_4v_groups.json"), "b")]},
            {"name": "sampled", "start": true, "requests": [stamped(&cases.join("sampled_2v.json"), "s")]},
        ],
        "errors": true,
        "max_body_bytes": 200_000,
    });
    let Some(s) = check(crate::serve::engine(), &["--max-body-bytes", "200000", "--max-series", "8"], spec)
    else {
        return;
    };
    // the route's requests are counted and logged as every route's
    let metrics = s.metrics();
    for code in [200, 400, 404, 413, 415] {
        let line = format!("totoc_http_requests_total{{route=\"/v1/timeseries/forecast\",code=\"{code}\"}}");
        assert!(metric(&metrics, &line) >= 1.0, "{line} missing:\n{metrics}");
    }
    assert!(s.log().contains("POST /v1/timeseries/forecast status=200"), "{}", s.log());
}

/// Toto 2.0: quantiles from its knots (the nine by default, and asked-for levels between them).
#[test]
fn kserve_timeseries_on_toto_2_gives_its_knots() {
    let cases = root().join("tests/fixtures/toto2/4m/cases");
    let mut levels = stamped(&cases.join("single_4v_groups.json"), "g");
    levels["quantiles"] = json!([0.25, 0.5, 0.9]);
    let spec = json!({
        "model": "toto",
        "frequency": "hour",
        "cases": [
            {"name": "knots", "start": true, "requests": [stamped(&cases.join("single_1v.json"), "k")]},
            {"name": "levels", "start": false, "requests": [levels]},
        ],
    });
    check(crate::toto2::engine(), &[], spec);
}

/// Kronos: OHLCV series in the model's column order with their own timestamps, future timestamps and sampling
/// parameters as extra fields: greedy, and sampled with temperature and top-p.
#[test]
fn kserve_timeseries_on_kronos_reads_its_extra_fields() {
    let cases = root().join("tests/fixtures/kronos/k10/cases");
    let read = |name: &str| -> Value {
        let case: Value = serde_json::from_slice(&fs::read(cases.join(name)).unwrap()).unwrap();
        case["requests"][0].clone()
    };
    let spec = json!({
        "model": "toto",
        "frequency": "D",
        "cases": [
            {"name": "greedy", "start": false, "requests": [read("greedy_daily.json")]},
            {"name": "top_p", "start": false, "requests": [read("topp_t07.json")]},
        ],
    });
    check(crate::kronos::shared_k10_engine(), &[], spec);
}
