//! `totoc serve` in operation: an engine call that panics while it holds a bucket, readiness that follows the
//! engine (unready after a run of engine failures, ready again after a passing re-check), liveness, and clean
//! drains. Faults are injected with the test-only `TOTOC_TEST_PANIC_AT_CALL` variable of the server's own
//! environment (a panic inside the real engine, while a runner is out of its pool).
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::serve::{
    assert_close, case, cli_forecast, engine, engine_with_a_corrupted_golden_set, get, metric, post_json,
    Server,
};

fn wait_for(what: &str, s: &Server, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !ok() {
        assert!(Instant::now() < deadline, "{what} never happened; log:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_panicking_engine_call_is_survived_and_a_run_of_them_makes_the_server_unready_until_a_recheck() {
    // Live engine calls 2, 4, 5 and 6 panic inside the engine with the request's bucket taken out of its pool.
    let s = Server::spawn_env(
        engine(),
        &["--queue-delay-ms", "0", "--unready-after-failures", "3", "--failure-window-s", "60"],
        &[("TOTOC_TEST_PANIC_AT_CALL", "2,4,5,6")],
    );
    s.wait_ready();
    let req = case("mean_1v")["request"].clone();
    let cli = cli_forecast(std::slice::from_ref(&req)).remove(0);
    let url = s.url("/v1/forecast");
    let answer = |call: u32| -> (u16, Value) {
        let (status, got) = post_json(&url, &req);
        eprintln!("call {call}: {status}");
        (status, got)
    };
    let (status, got) = answer(1);
    assert_eq!(status, 200, "{got}");
    assert_close(&got, &cli, 1e-6, "call 1");
    let (status, got) = answer(2);
    assert_eq!(status, 500, "{got}");
    assert!(!got.to_string().contains(".rs"), "an internal error names a source file: {got}");
    // The same bucket answers again, with the same numbers (it was rebuilt, not left "in use").
    let (status, got) = answer(3);
    assert_eq!(status, 200, "the bucket whose call panicked is unusable: {got}\n{}", s.log());
    assert_close(&got, &cli, 1e-6, "call 3");
    assert_eq!(get(&s.url("/v2/health/ready")).0, 200, "one failure must not make it unready");
    for call in 4..=6 {
        assert_eq!(answer(call).0, 500);
    }
    // Three engine failures in a row: unready (503) but live; the panics went through the log.
    let (ready, _) = get(&s.url("/v2/health/ready"));
    assert_eq!(ready, 503, "{}", s.log());
    assert_eq!(get(&s.url("/v2/health/live")).0, 200);
    let m = s.metrics();
    assert!(metric(&m, "totoc_engine_failures_total") >= 4.0, "{m}");
    assert!(metric(&m, "totoc_ready ") == 0.0, "{m}");
    let (status, got) = answer(7);
    assert_eq!(status, 503, "{got}");
    // The health thread re-runs the gate (warm-up and golden cases) and makes it ready again.
    let t = Instant::now();
    wait_for("ready again", &s, || get(&s.url("/v2/health/ready")).0 == 200);
    eprintln!("ready again after {:?}", t.elapsed());
    let (status, got) = answer(8);
    assert_eq!(status, 200, "{got}");
    assert_close(&got, &cli, 1e-6, "after the re-check");
    assert!(s.log().contains("panic: test fault"), "the panic did not go through the log:\n{}", s.log());
    // the state flips just before its log line is written: wait for the line
    wait_for("the re-check logged", &s, || s.log().contains("ready again"));
}

/// Sends SIGTERM to the server and waits for it to exit; returns how long it took.
fn terminate(s: &mut Server, within: Duration) -> Duration {
    let sent = Instant::now();
    assert!(Command::new("kill").args(["-TERM", &s.pid()]).status().unwrap().success());
    wait_exit(s, sent, within)
}

/// Waits for the server to exit with status 0 after a SIGTERM sent at `sent`; returns how long it took.
fn wait_exit(s: &mut Server, sent: Instant, within: Duration) -> Duration {
    loop {
        if let Some(code) = s.child.try_wait().unwrap() {
            assert!(code.success(), "{code}\n{}", s.log());
            return sent.elapsed();
        }
        assert!(sent.elapsed() < within, "still running {within:?} after SIGTERM:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_during_uploads_lets_them_finish_within_the_timeout() {
    use std::io::{Read, Write};
    let mut s = Server::ready(engine(), &["--shutdown-timeout-s", "10"]);
    let body = case("mean_1v")["request"].to_string();
    // Three clients have sent their headers and half their body when SIGTERM comes; they finish afterwards.
    let uploads: Vec<_> = (0..3)
        .map(|_| {
            let mut c = std::net::TcpStream::connect(&s.http).unwrap();
            let head = format!(
                "POST /v1/forecast HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            c.write_all(head.as_bytes()).unwrap();
            c.write_all(&body.as_bytes()[..body.len() / 2]).unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let pid = s.pid();
    let sent = Instant::now();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    std::thread::sleep(Duration::from_millis(300));
    for mut c in uploads {
        c.write_all(&body.as_bytes()[body.len() / 2..]).unwrap();
        let mut out = String::new();
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.read_to_string(&mut out).unwrap();
        assert!(
            out.starts_with("HTTP/1.1 200"),
            "an upload in progress at SIGTERM was not served: {out}\n{}",
            s.log()
        );
    }
    // The one SIGTERM above ends the process once the drain is done: a second signal would mean "exit now,
    // abandon what is in progress" (and exit 143), so none is sent.
    let took = wait_exit(&mut s, sent, Duration::from_secs(15));
    eprintln!("exited {took:?} after SIGTERM with 3 uploads in progress");
}

#[test]
fn a_first_readiness_gate_that_keeps_failing_is_retried_then_ends_the_process() {
    let (_dir, bad_engine) = engine_with_a_corrupted_golden_set();
    let mut s = Server::spawn_env(&bad_engine, &["--ready-attempts", "3"], &[]);
    let start = Instant::now();
    let code = loop {
        if let Some(code) = s.child.try_wait().unwrap() {
            break code;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "still running:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = s.log();
    eprintln!("exited with {code} after {:?}", start.elapsed());
    assert!(!code.success(), "{code}");
    // Three runs of the gate, 2 s then 4 s apart, each failing; then the reason, and the process ends.
    assert_eq!(log.matches("NOT READY: the readiness gate failed").count(), 3, "{log}");
    assert!(log.contains("running the readiness gate again"), "{log}");
    assert!(start.elapsed() >= Duration::from_secs(6), "{:?}", start.elapsed());
    assert!(
        log.contains("the readiness gate failed 3 times (--ready-attempts); the last time: 34 of 35"),
        "{log}"
    );
}

#[test]
fn conformance_with_the_real_clients() {
    let Some(py) = crate::venv::python(&crate::venv::SERVE) else { return };
    // Every request waits 1.5 s in the queue: a 0.5 s gRPC deadline passes there.
    let s = Server::ready(engine(), &["--queue-delay-ms", "1500"]);
    let tmp = tempfile::tempdir().unwrap();
    let req = tmp.path().join("request.json");
    std::fs::write(&req, case("mean_1v")["request"].to_string()).unwrap();
    let out = Command::new(&py)
        .arg(crate::common::root().join("tests/serve/test_conformance.py"))
        .args(["--http", &s.http, "--grpc", &s.grpc, "--request", req.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "conformance failed:\n{text}\nserver log:\n{}", s.log());
    eprintln!("{text}");
    // The deadline went through the metrics and the access log.
    let m = s.metrics();
    assert!(
        metric(&m, "totoc_grpc_requests_total{method=\"ModelInfer\",code=\"DeadlineExceeded\"}") >= 1.0,
        "{m}"
    );
    assert!(s.log().contains("code=DeadlineExceeded"), "{}", s.log());
}

#[test]
fn a_token_no_client_can_send_is_refused_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let token = tmp.path().join("token");
    std::fs::write(&token, "sécret\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_totoc"))
        .args([
            "serve",
            "--engine",
            engine().to_str().unwrap(),
            "--addr",
            "127.0.0.1:0",
            "--grpc-addr",
            "off",
        ])
        .args(["--token-file", token.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started with a non-ASCII token");
    assert!(err.contains("non-ASCII") && err.contains("--token-file"), "{err}");
}

/// A raw HTTP/1.1 POST of `body` to `/v1/forecast` (the caller decides when to read or hang up).
fn raw_post(addr: &str, body: &str) -> std::net::TcpStream {
    use std::io::Write;
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /v1/forecast HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes()).unwrap();
    c.write_all(body.as_bytes()).unwrap();
    c
}

/// With the test-only pause of 500 ms before each graph run, `mean_1v` (a prefill and two decode steps) takes
/// about 1.5 s on the tiny engine.
const SLOW: (&str, &str) = ("TOTOC_TEST_STEP_DELAY_MS", "500");

#[test]
fn a_client_that_leaves_mid_call_stops_the_engine_work() {
    let s = Server::spawn_env(engine(), &["--queue-delay-ms", "0"], &[SLOW]);
    s.wait_ready();
    let body = case("mean_1v")["request"].to_string();
    let c = raw_post(&s.http, &body);
    std::thread::sleep(Duration::from_millis(700));
    drop(c); // the client hangs up while the call runs
    let t = Instant::now();
    wait_for("the cancelled call counted", &s, || {
        metric(&s.metrics(), "totoc_cancelled_total{reason=\"client_gone\"}") >= 1.0
    });
    // The counter is bumped just before the log line is written: wait for the line too (a loaded CI machine can
    // read the log in between).
    wait_for("the cancellation logged", &s, || s.log().contains("engine call cancelled between graph runs"));
    eprintln!("cancelled {:?} after the client left", t.elapsed());
    // The engine is free again at once and answers the next request.
    let (status, got) = post_json(&s.url("/v1/forecast"), &case("mean_1v")["request"]);
    assert_eq!(status, 200, "{got}");
}

#[test]
fn sigterm_during_a_long_request_answers_it_then_exits() {
    let mut s =
        Server::spawn_env(engine(), &["--queue-delay-ms", "0", "--shutdown-timeout-s", "10"], &[SLOW]);
    s.wait_ready();
    let url = s.url("/v1/forecast");
    let req = case("mean_1v")["request"].clone();
    let want = cli_forecast(std::slice::from_ref(&req)).remove(0);
    let in_flight = std::thread::spawn(move || post_json(&url, &req));
    std::thread::sleep(Duration::from_millis(600));
    let took = terminate(&mut s, Duration::from_secs(12));
    let (status, got) = in_flight.join().unwrap();
    assert_eq!(status, 200, "{got}");
    assert_close(&got, &want, 1e-6, "answered during the drain");
    eprintln!("exited {took:?} after SIGTERM during a long request");
}

#[test]
fn sigterm_with_the_shadow_busy_exits_within_the_timeout() {
    // The shadow re-runs every request (on the same engine), each graph run 1 s apart: a long shadow run.
    let shadow = engine().to_str().unwrap();
    let mut s = Server::spawn_env(
        engine(),
        &[
            "--queue-delay-ms",
            "0",
            "--shutdown-timeout-s",
            "5",
            "--shadow-engine",
            shadow,
            "--shadow-rate",
            "1",
        ],
        &[("TOTOC_TEST_STEP_DELAY_MS", "1000")],
    );
    s.wait_ready();
    let req = case("mean_1v")["request"].clone();
    let (status, got) = post_json(&s.url("/v1/forecast"), &req);
    assert_eq!(status, 200, "{got}");
    // The live call is done; the shadow run starts now and would take ~3 s. SIGTERM in its middle.
    std::thread::sleep(Duration::from_millis(1200));
    let took = terminate(&mut s, Duration::from_secs(8));
    assert!(took < Duration::from_secs(3), "the shadow run held up the exit: {took:?}\n{}", s.log());
    eprintln!("exited {took:?} after SIGTERM with the shadow busy");
}

/// The CI variant of `scripts/soak-serve.sh`: 60 s of mixed valid and invalid traffic (40 requests/s for a 6 s
/// warm-up, then 20 and 40) on the tiny engine with the shadow on; the script's checks (0 crashes, 0 wrong answers,
/// only documented status codes, end RSS within 5% of the RSS after the warm-up).
#[test]
fn soak_60_seconds_on_the_tiny_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let reqs: Vec<Value> = ["mean_1v", "mean_4v_groups", "mean_short", "sampled_2v"]
        .iter()
        .map(|n| case(n)["request"].clone())
        .collect();
    let file = tmp.path().join("requests.json");
    std::fs::write(&file, Value::Array(reqs).to_string()).unwrap();
    let out = Command::new(crate::common::root().join("scripts/soak-serve.sh"))
        .args([engine().to_str().unwrap(), file.to_str().unwrap(), "20", "60"])
        .env("TOTOC", env!("CARGO_BIN_EXE_totoc"))
        .env("SOAK_LOG", tmp.path().join("server.log"))
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "soak failed:\n{text}\nserver log tail:\n{}",
        std::fs::read_to_string(tmp.path().join("server.log"))
            .unwrap_or_default()
            .lines()
            .rev()
            .take(40)
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!("{text}");
}

#[test]
fn toto2_over_v2_returns_its_nine_knots_by_default() {
    let s = Server::ready(crate::toto2::engine(), &[]);
    let c = crate::toto2::case("single_1v");
    let target: Vec<Value> = c["request"]["target"][0].as_array().unwrap().clone();
    let t = target.len();
    for outputs in [None, Some(serde_json::json!([]))] {
        let mut body = serde_json::json!({
            "inputs": [{"name": "target", "datatype": "FP32", "shape": [1, 1, t], "data": target}],
            "parameters": {"horizon": 20},
        });
        if let Some(o) = &outputs {
            body["outputs"] = o.clone();
        }
        let (status, resp) = post_json(&s.url("/v2/models/toto/infer"), &body);
        assert_eq!(status, 200, "{resp}");
        let out = |name: &str| -> Value {
            resp["outputs"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["name"] == name)
                .cloned()
                .unwrap_or_else(|| panic!("outputs {outputs:?}: no `{name}` in {resp}"))
        };
        let levels = out("quantile_levels");
        let knots: Vec<f64> =
            levels["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
        assert_eq!(knots.len(), 9, "{levels}");
        assert!((knots[0] - 0.1).abs() < 1e-6 && (knots[8] - 0.9).abs() < 1e-6, "{knots:?}");
        let q = out("quantiles");
        assert_eq!(q["shape"], serde_json::json!([1, 9, 1, 20]));
        // The 0.5 knot is the median output.
        let median = out("median")["data"].clone();
        let data = q["data"].as_array().unwrap();
        assert_eq!(Value::Array(data[4 * 20..5 * 20].to_vec()), median);
    }
}
