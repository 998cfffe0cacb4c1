//! `totoc serve` end to end: the real binary on a loopback port (`--addr 127.0.0.1:0`), driven over HTTP with
//! `ureq` (and with the real `tritonclient[http]` / `tritonclient[grpc]` Python clients, from the venv made by
//! `scripts/setup-serve-venv.sh`). Grouped by theme: equal numbers to the CLI; the v2 protocol (JSON and
//! binary tensors); readiness; bad requests; overload and deadlines; tokens; request ids and metrics; the
//! shadow engine; SIGTERM.
//! long-file: one server process per test group; the requests and their expected answers read best side by side.
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::*;

// --- engines and servers

/// Exports `config`'s fixture checkpoint (tiny profiles) with `golden` cases (or none) and builds a CPU engine
/// in `dir`.
fn build_engine_in(dir: &Path, config: &str, golden: Option<&Path>) -> PathBuf {
    let bundle = dir.join("bundle");
    let mut extra = Vec::new();
    if let Some(g) = golden {
        extra.extend(["--golden", g.to_str().unwrap()]);
    }
    export_fixture_with(config, &bundle, &extra);
    let engine = dir.join("engine");
    crate::common::build_engine(&bundle, &engine);
    engine
}

/// An engine for one test: removed with the returned directory.
fn build_engine(config: &str, golden: Option<&Path>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let engine = build_engine_in(dir.path(), config, golden);
    (dir, engine)
}

fn cases_dir() -> PathBuf {
    root().join("tests/fixtures/tiny/cases")
}

/// The tiny engine with its golden set.
pub(crate) fn engine() -> &'static Path {
    static E: OnceLock<PathBuf> = OnceLock::new();
    E.get_or_init(|| build_engine_in(&shared_fixture_dir(), "tiny", Some(&cases_dir())))
}

pub(crate) fn case(name: &str) -> Value {
    serde_json::from_slice(&fs::read(cases_dir().join(format!("{name}.json"))).unwrap()).unwrap()
}

/// A running `totoc serve`; killed on drop. Its log (stderr) goes to a file.
/// Starts `bin serve --engine ENGINE` on loopback ports (`extra` appended, stderr to `log`) and returns the child
/// with the HTTP and gRPC addresses it printed (not once ready). Shared by the serve and hostile-client tests.
pub(crate) fn spawn_serve(
    bin: &Path,
    engine: &Path,
    extra: &[&str],
    rust_log: &str,
    log: &Path,
) -> (Child, String, String) {
    spawn_serve_env(bin, engine, extra, &[], rust_log, log)
}

/// [`spawn_serve`] with extra environment variables (the test-only fault switches).
pub(crate) fn spawn_serve_env(
    bin: &Path,
    engine: &Path,
    extra: &[&str],
    envs: &[(&str, &str)],
    rust_log: &str,
    log: &Path,
) -> (Child, String, String) {
    let mut child = Command::new(bin)
        .envs(envs.iter().copied())
        .args(["serve", "--engine", engine.to_str().unwrap(), "--addr", "127.0.0.1:0"])
        .args(["--grpc-addr", "127.0.0.1:0"])
        .args(extra)
        .env("RUST_LOG", rust_log)
        .stdout(Stdio::piped())
        .stderr(fs::File::create(log).unwrap())
        .spawn()
        .expect("start totoc serve");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut addr = |kind: &str| {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let prefix = format!("totoc serve: {kind} ");
        match line.trim().strip_prefix(&prefix) {
            Some(a) => a.to_string(),
            None => {
                panic!("expected `{prefix}ADDR`, got {line:?}; log:\n{}", fs::read_to_string(log).unwrap())
            }
        }
    };
    let http = addr("http");
    let grpc = addr("grpc");
    (child, http, grpc)
}

pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) http: String,
    pub(crate) grpc: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts the server on loopback ports and returns once it printed them (not once ready).
    fn spawn(engine: &Path, extra: &[&str]) -> Server {
        Server::spawn_env(engine, extra, &[])
    }

    /// Starts the server with extra environment variables; returns once it printed its ports (not once ready).
    pub(crate) fn spawn_env(engine: &Path, extra: &[&str], envs: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let bin = Path::new(env!("CARGO_BIN_EXE_totoc"));
        let (child, http, grpc) = spawn_serve_env(bin, engine, extra, envs, "info", &log);
        Server { child, http, grpc, log, _dir: dir }
    }

    /// Starts the server and waits until it reports ready.
    pub(crate) fn ready(engine: &Path, extra: &[&str]) -> Server {
        let s = Server::spawn(engine, extra);
        s.wait_ready();
        s
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    pub(crate) fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        while Instant::now() < deadline {
            if get(&self.url("/v2/health/ready")).0 == 200 {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("not ready after 120 s; log:\n{}", self.log());
    }

    pub(crate) fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub(crate) fn metrics(&self) -> String {
        get(&self.url("/metrics")).1
    }

    pub(crate) fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// (status, body)
pub(crate) fn get(url: &str) -> (u16, String) {
    match agent().get(url).call() {
        Ok(mut r) => (r.status().as_u16(), r.body_mut().read_to_string().unwrap_or_default()),
        Err(_) => (0, String::new()),
    }
}

/// A POST with headers; returns (status, headers, body bytes).
pub(crate) fn post(
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, ureq::http::HeaderMap, Vec<u8>) {
    let mut req = agent().post(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut r = req.send(body).expect("request sent");
    let status = r.status().as_u16();
    let headers = r.headers().clone();
    let body = r.body_mut().with_config().limit(256 << 20).read_to_vec().unwrap();
    (status, headers, body)
}

pub(crate) fn post_json(url: &str, body: &Value) -> (u16, Value) {
    let (s, _, b) = post(url, &[("content-type", "application/json")], body.to_string().as_bytes());
    (s, serde_json::from_slice(&b).unwrap_or(Value::Null))
}

/// `totoc forecast` on `requests` (one JSON request, or several as JSON Lines): its JSON output(s).
pub(crate) fn cli_forecast(requests: &[Value]) -> Vec<Value> {
    let tmp = tempfile::tempdir().unwrap();
    let input = if requests.len() == 1 { tmp.path().join("r.json") } else { tmp.path().join("r.jsonl") };
    let text: Vec<String> = requests.iter().map(Value::to_string).collect();
    fs::write(&input, text.join("\n")).unwrap();
    let out =
        totoc_ok(&["forecast", "--engine", engine().to_str().unwrap(), "--input", input.to_str().unwrap()]);
    out.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

pub(crate) fn metric(text: &str, line_prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(line_prefix))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no metric line {line_prefix:?} in\n{text}"))
}

pub(crate) fn error_of(body: &[u8]) -> String {
    let v: Value = serde_json::from_slice(body)
        .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(body)));
    v["error"].as_str().unwrap_or_else(|| panic!("no `error` in {v}")).to_string()
}

// --- the same numbers as the CLI

#[test]
fn v1_forecast_gives_the_clis_numbers() {
    let s = Server::ready(engine(), &[]);
    for name in ["mean_1v", "mean_4v_groups", "mean_short", "sampled_2v"] {
        let req = case(name)["request"].clone();
        let (status, got) = post_json(&s.url("/v1/forecast"), &req);
        assert_eq!(status, 200, "{name}: {got}");
        assert_eq!(got["model"], "toto-1.0", "{name}: the response names its model");
        assert_eq!(got, cli_forecast(&[req])[0], "{name}: server and CLI differ");
    }
    // JSON Lines in, JSON Lines out, in order.
    let reqs: Vec<Value> =
        ["mean_4v_groups", "sampled_2v", "mean_1v"].iter().map(|n| case(n)["request"].clone()).collect();
    let body: String = reqs.iter().map(|r| r.to_string() + "\n").collect();
    let (status, headers, out) =
        post(&s.url("/v1/forecast"), &[("content-type", "application/x-ndjson")], body.as_bytes());
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "application/x-ndjson");
    let got: Vec<Value> =
        String::from_utf8(out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(got, cli_forecast(&reqs));
}

/// `/v1/forecast` reads the request fields `calendar`, `timezone` and `holidays` as `totoc forecast` does.
#[test]
fn v1_forecast_follows_the_request_calendar() {
    let s = Server::ready(engine(), &[]);
    // Six weeks of weekday rows from Monday 1 January 2024: a weekday session, ending Friday 9 February.
    let days: Vec<String> = (1..=31)
        .map(|d| format!("2024-01-{d:02}"))
        .chain((1..=9).map(|d| format!("2024-02-{d:02}")))
        .enumerate()
        .filter(|(i, _)| i % 7 < 5)
        .map(|(_, d)| d)
        .collect();
    let target: Vec<f64> = (0..days.len()).map(|i| 100.0 + (i % 7) as f64).collect();
    let req = json!({"target": [target], "timestamps": days, "horizon": 2, "holidays": ["2024-02-12"]});
    let (status, got) = post_json(&s.url("/v1/forecast"), &req);
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["timestamps"], json!(["2024-02-13", "2024-02-14"]));
    assert_eq!(got["calendar"], "weekdays Mon–Fri, 1 holiday");
    assert_eq!(got, cli_forecast(std::slice::from_ref(&req))[0]);
    let mut bad = req.clone();
    bad["timezone"] = json!("Mars/Olympus");
    let (status, got) = post_json(&s.url("/v1/forecast"), &bad);
    assert_eq!(status, 400, "{got}");
    assert!(got.to_string().contains("not a time zone of the IANA database"), "{got}");
    let mut bad = req;
    bad["holidays"] = json!(vec!["2024-01-01"; 100_001]);
    let (status, got) = post_json(&s.url("/v1/forecast"), &bad);
    assert_eq!(status, 400, "{got}");
    assert!(got.to_string().contains("at most 100000 dates"), "{got}");
}

#[test]
fn a_memory_budget_below_the_weights_is_refused_at_startup() {
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
        .args(["--memory-budget", "4K"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a 4 KiB budget must not serve: {err}");
    assert!(err.contains("exceed the memory budget") && err.contains("--memory-budget"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_totoc"))
        .args(["serve", "--engine", engine().to_str().unwrap(), "--memory-budget", "lots"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("\"lots\""), "{err}");
}

#[test]
fn long_contexts_follow_the_clis_policy() {
    let s = Server::ready(engine(), &[]);
    // 300 points > the engine's 256: the last 256 are kept and the cut reported, as the CLI does.
    let target: Vec<f64> = (0..300).map(|t| 100.0 + (t as f64 * 0.3).sin() * 5.0).collect();
    let req = json!({"target": [target], "horizon": 8});
    let (status, got) = post_json(&s.url("/v1/forecast"), &req);
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["context_truncated"], json!({"given": 300, "used": 256}));
    assert_eq!(got, cli_forecast(std::slice::from_ref(&req))[0]);
    let mut strict = req;
    strict["strict_context"] = json!(true);
    let (status, got) = post_json(&s.url("/v1/forecast"), &strict);
    assert_eq!(status, 400);
    assert!(got["error"].as_str().unwrap().contains("strict_context"), "{got}");
}

#[test]
fn packed_requests_give_the_same_numbers_as_solo_ones() {
    // A long queue delay makes concurrent requests share engine calls.
    let s = Server::ready(engine(), &["--queue-delay-ms", "400"]);
    let names = ["mean_1v", "mean_4v_groups", "mean_short", "sampled_2v", "mean_1v", "sampled_2v"];
    let url = s.url("/v1/forecast");
    let handles: Vec<_> = names
        .iter()
        .map(|n| {
            let (url, req) = (url.clone(), case(n)["request"].clone());
            std::thread::spawn(move || post_json(&url, &req))
        })
        .collect();
    let got: Vec<(u16, Value)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let m = s.metrics();
    let calls = metric(&m, "totoc_batch_requests_count");
    let packed = metric(&m, "totoc_batch_requests_sum");
    assert!(packed > calls, "requests were not packed: {packed} requests in {calls} engine calls");
    for ((status, resp), name) in got.iter().zip(names) {
        assert_eq!(*status, 200, "{name}: {resp}");
        let solo = &cli_forecast(&[case(name)["request"].clone()])[0];
        assert_close(resp, solo, 1e-6, name);
    }
}

/// Every number of `a` within `rel` (relative) of `b`, and every other field equal.
pub(crate) fn assert_close(a: &Value, b: &Value, rel: f64, what: &str) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= rel * y.abs().max(1e-30), "{what}: {x} vs {y}");
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{what}");
            for (x, y) in x.iter().zip(y) {
                assert_close(x, y, rel, what);
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(x.keys().collect::<Vec<_>>(), y.keys().collect::<Vec<_>>(), "{what}");
            // which buckets (and so which profile) ran a request depends on what it was packed with
            for (k, v) in x.iter().filter(|(k, _)| !["buckets", "profile"].contains(&k.as_str())) {
                assert_close(v, &y[k], rel, &format!("{what}.{k}"));
            }
        }
        _ => assert_eq!(a, b, "{what}"),
    }
}

// --- the Open Inference Protocol over REST (Rust client; tritonclient below)

/// A v2 request for N series of V variates, left-padded to a common length, with `lengths`.
fn v2_ragged(series: &[&Value], params: Value) -> (Value, Vec<f32>, Vec<i64>, Vec<i64>, [usize; 3]) {
    let v = series[0]["target"].as_array().unwrap().len();
    let t = series.iter().map(|s| s["target"][0].as_array().unwrap().len()).max().unwrap();
    let mut data = Vec::new();
    let mut ids = Vec::new();
    let mut lengths = Vec::new();
    for s in series {
        let len = s["target"][0].as_array().unwrap().len();
        lengths.push(len as i64);
        for var in s["target"].as_array().unwrap() {
            data.extend(std::iter::repeat_n(-999.0f32, t - len)); // padding: not part of the context
            data.extend(var.as_array().unwrap().iter().map(|x| x.as_f64().map_or(f32::NAN, |x| x as f32)));
        }
        let mask = s
            .get("id_mask")
            .and_then(Value::as_array)
            .map_or(vec![0; v], |m| m.iter().map(|x| x.as_i64().unwrap()).collect());
        ids.extend(mask);
    }
    let json_data: Vec<Value> =
        data.iter().map(|x| if x.is_nan() { Value::Null } else { json!(x) }).collect();
    let body = json!({
        "id": "ragged-1",
        "parameters": params,
        "inputs": [
            {"name": "target", "datatype": "FP32", "shape": [series.len(), v, t], "data": json_data},
            {"name": "id_mask", "datatype": "INT64", "shape": [series.len(), v], "data": ids},
            {"name": "lengths", "datatype": "INT64", "shape": [series.len()], "data": lengths},
        ],
    });
    (body, data, ids, lengths, [series.len(), v, t])
}

fn output<'a>(resp: &'a Value, name: &str) -> &'a Value {
    resp["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("no output {name} in {resp}"))
}

#[test]
fn v2_json_tensors_ragged_batches_give_each_series_its_cli_forecast() {
    let s = Server::ready(engine(), &[]);
    // Two bivariate series of different lengths (mean_short is shorter than mean_4v_groups' slice).
    let a = case("mean_4v_groups")["request"].clone();
    let mut two = a.clone();
    two["target"] = json!(a["target"].as_array().unwrap()[..2]);
    two["id_mask"] = json!([0, 1]);
    let mut short = two.clone();
    short["target"] = json!(two["target"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| json!(v.as_array().unwrap()[50..]))
        .collect::<Vec<_>>());
    let (body, ..) = v2_ragged(&[&two, &short], json!({"horizon": 12}));
    let (status, resp) = post_json(&s.url("/v2/models/toto/infer"), &body);
    assert_eq!(status, 200, "{resp}");
    assert_eq!(resp["id"], "ragged-1");
    assert_eq!(resp["model_name"], "toto");
    let mean = output(&resp, "mean");
    assert_eq!(mean["shape"], json!([2, 2, 12]));
    let flat: Vec<f64> = mean["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    for (i, series) in [&two, &short].iter().enumerate() {
        let mut req = (*series).clone();
        req["horizon"] = json!(12);
        let cli = &cli_forecast(&[req])[0];
        let want: Vec<f64> = cli["mean"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|v| v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()))
            .collect();
        assert_eq!(&flat[i * 24..(i + 1) * 24], want.as_slice(), "series {i}");
    }
}

#[test]
fn v2_binary_tensors_give_the_same_answer_as_json_tensors() {
    let s = Server::ready(engine(), &[]);
    let c = case("sampled_2v")["request"].clone();
    let (json_body, data, ids, lengths, shape) =
        v2_ragged(&[&c], json!({"horizon": 20, "samples": 64, "seed": 11}));
    let (status, json_resp) = post_json(&s.url("/v2/models/toto/infer"), &json_body);
    assert_eq!(status, 200, "{json_resp}");
    // The same request with every tensor in the binary extension, and binary outputs.
    let header = json!({
        "id": "ragged-1",
        "parameters": {"horizon": 20, "samples": 64, "seed": 11, "binary_data_output": true},
        "inputs": [
            {"name": "target", "datatype": "FP32", "shape": shape, "parameters": {"binary_data_size": data.len() * 4}},
            {"name": "id_mask", "datatype": "INT64", "shape": [1, shape[1]], "parameters": {"binary_data_size": ids.len() * 8}},
            {"name": "lengths", "datatype": "INT64", "shape": [1], "parameters": {"binary_data_size": 8}},
        ],
    })
    .to_string();
    let mut body = header.clone().into_bytes();
    body.extend(data.iter().flat_map(|x| x.to_le_bytes()));
    body.extend(ids.iter().flat_map(|x| x.to_le_bytes()));
    body.extend(lengths.iter().flat_map(|x| x.to_le_bytes()));
    let n = header.len().to_string();
    let (status, headers, out) =
        post(&s.url("/v2/models/toto/infer"), &[("inference-header-content-length", &n)], &body);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&out));
    let json_len: usize = headers["inference-header-content-length"].to_str().unwrap().parse().unwrap();
    let head: Value = serde_json::from_slice(&out[..json_len]).unwrap();
    let mut offset = json_len;
    for o in head["outputs"].as_array().unwrap() {
        let size = o["parameters"]["binary_data_size"].as_u64().unwrap() as usize;
        let values: Vec<f32> = out[offset..offset + size]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        offset += size;
        let from_json: Vec<f32> = output(&json_resp, o["name"].as_str().unwrap())["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(values, from_json, "output {}", o["name"]);
        assert_eq!(o["shape"], output(&json_resp, o["name"].as_str().unwrap())["shape"]);
    }
    assert_eq!(offset, out.len());
    let names: Vec<&str> =
        head["outputs"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mean", "quantiles", "quantile_levels", "samples"]);
    assert_eq!(output(&json_resp, "samples")["shape"], json!([1, 64, 2, 20]));
    assert_eq!(output(&json_resp, "quantiles")["shape"], json!([1, 3, 2, 20]));
}

#[test]
fn v2_metadata_health_and_versions() {
    let s = Server::ready(engine(), &[]);
    let (status, body) = get(&s.url("/v2"));
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["extensions"], json!(["binary_tensor_data"]));
    assert_eq!(get(&s.url("/v2/health/live")).0, 200);
    assert_eq!(get(&s.url("/v2/models/toto/ready")).0, 200);
    assert_eq!(get(&s.url("/v2/models/toto/versions/1/ready")).0, 200);
    let (status, body) = get(&s.url("/v2/models/toto/versions/1"));
    assert_eq!(status, 200);
    let m: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(m["platform"], "totoc");
    assert_eq!(m["inputs"][0], json!({"name": "target", "datatype": "FP32", "shape": [-1, -1, -1]}));
    let outputs: Vec<&str> =
        m["outputs"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(outputs, ["mean", "quantiles", "quantile_levels", "samples"]);
    assert_eq!(m["parameters"]["max_context"], 256);
    assert!(m["parameters"]["verification"].as_str().unwrap().starts_with("verified: 35 of 35"), "{m}");
    let (status, body) = get(&s.url("/v2/models/toto/versions/2"));
    assert_eq!(status, 404);
    assert!(error_of(body.as_bytes()).contains("no version `2`"));
}

// --- readiness

#[test]
fn readiness_is_false_until_the_golden_gate_passes() {
    let s = Server::spawn(engine(), &[]);
    // The gate (warm-up of every bucket, then 5 golden cases) has only just started.
    let (status, body) = get(&s.url("/v2/health/ready"));
    assert_eq!(status, 503, "ready before the gate ran: {body}");
    assert!(body.contains("warming up"), "{body}");
    let (status, _, _) = post(&s.url("/v1/forecast"), &[], case("mean_1v")["request"].to_string().as_bytes());
    assert_eq!(status, 503);
    assert_eq!(get(&s.url("/v2/health/live")).0, 200);
    s.wait_ready();
    let m = s.metrics();
    assert_eq!(metric(&m, "totoc_ready "), 1.0);
    assert_eq!(metric(&m, "totoc_verified "), 1.0);
    assert_eq!(metric(&m, "totoc_golden_checks{result=\"passed\"}"), 35.0);
    assert_eq!(metric(&m, "totoc_golden_checks{result=\"failed\"}"), 0.0);
    assert!(s.log().contains("golden case ok"), "{}", s.log());
}

/// An engine whose bundle is intact (hashes match) but whose golden reference disagrees with the model: one
/// mixture location moved by 0.01, as `verify_fails_on_a_mismatching_reference` does for `totoc verify`.
pub(crate) fn engine_with_a_corrupted_golden_set() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    for e in fs::read_dir(cases_dir()).unwrap() {
        fs::copy(e.as_ref().unwrap().path(), tmp.path().join(e.unwrap().file_name())).unwrap();
    }
    let mut c = case("mean_1v");
    let loc = &mut c["reference"]["steps"][1]["loc"][0][3][2];
    *loc = json!(loc.as_f64().unwrap() + 0.01);
    fs::write(tmp.path().join("mean_1v.json"), c.to_string()).unwrap();
    build_engine("tiny", Some(tmp.path()))
}

#[test]
fn a_corrupted_golden_set_keeps_the_server_unready() {
    let (_dir, bad_engine) = engine_with_a_corrupted_golden_set();
    let s = Server::spawn(&bad_engine, &[]);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !s.log().contains("NOT READY") {
        assert!(Instant::now() < deadline, "the gate did not finish; log:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    let (status, body) = get(&s.url("/v2/health/ready"));
    assert_eq!(status, 503);
    assert!(body.contains("readiness gate failed (34 of 35 golden output checks passed"), "{body}");
    let (status, headers, body) =
        post(&s.url("/v1/forecast"), &[], case("mean_1v")["request"].to_string().as_bytes());
    assert_eq!(status, 503);
    assert!(headers.contains_key("retry-after"));
    assert!(error_of(&body).contains("not ready"));
    let m = s.metrics();
    assert_eq!(metric(&m, "totoc_ready "), 0.0);
    assert_eq!(metric(&m, "totoc_verified "), 0.0);
    assert_eq!(metric(&m, "totoc_golden_checks{result=\"failed\"}"), 1.0);
    let log = s.log();
    assert!(log.contains("golden check") && log.contains("FAIL: loc at step 1"), "{log}");
    let (_, meta) = get(&s.url("/v2/models/toto"));
    assert!(meta.contains("\"verification\":\"failed: 34 of 35"), "{meta}");
}

#[test]
fn a_bundle_without_golden_cases_is_ready_but_says_unverified() {
    let (_dir, plain) = build_engine("tiny", None);
    let s = Server::ready(&plain, &[]);
    let (_, meta) = get(&s.url("/v2/models/toto"));
    let meta: Value = serde_json::from_str(&meta).unwrap();
    assert!(meta["parameters"]["verification"].as_str().unwrap().starts_with("unverified"), "{meta}");
    assert!(s.log().contains("UNVERIFIED"), "{}", s.log());
    assert!(s.log().contains("warmed up every bucket"));
    assert_eq!(metric(&s.metrics(), "totoc_verified "), 0.0);
}

// --- bad requests

#[test]
fn bad_requests_get_4xx_with_a_reason() {
    let s = Server::ready(engine(), &["--max-body-bytes", "65536"]);
    let v2 = s.url("/v2/models/toto/infer");
    let v1 = s.url("/v1/forecast");
    let (nope, v3) = (s.url("/v2/models/nope/infer"), s.url("/v3/nothing"));
    let tensor = |datatype: &str, shape: Value, data: Value| {
        json!({"parameters": {"horizon": 4}, "inputs": [{"name": "target", "datatype": datatype, "shape": shape, "data": data}]}).to_string()
    };
    let big = json!({"target": [vec![1.0; 20_000]], "horizon": 4}).to_string();
    let ct = [("content-type", "application/json")];
    type Case<'a> = (&'a str, String, &'a [(&'a str, &'a str)], u16, &'a str);
    let cases: Vec<Case> = vec![
        (&v2, "{\"inputs\": [".into(), &[], 400, "request JSON"),
        (&v2, tensor("FP64", json!([1, 3]), json!([1, 2, 3])), &[], 400, "datatype FP64 is not taken"),
        (&v2, tensor("FP32", json!([1, 4]), json!([1, 2, 3])), &[], 400, "holds 4 elements but `data` has 3"),
        (&v2, tensor("FP32", json!([3]), json!([1, 2, 3])), &[], 400, "it must be [V, T]"),
        (
            &v2,
            tensor("FP32", json!([2, 2]), json!([1, 2, null, null])),
            &[],
            400,
            "variate 1 has no observed point",
        ),
        (&v2, tensor("FP32", json!([1, 2]), json!([1, "x"])), &[], 400, "holds a string"),
        (&nope, tensor("FP32", json!([1, 2]), json!([1, 2])), &[], 404, "unknown model `nope`"),
        (&v1, "{\"target\": [[1, 2]], \"horizon\": 4".into(), &ct, 400, "EOF while parsing"),
        (
            &v1,
            "{\"target\": [[null, null]], \"horizon\": 4}".into(),
            &ct,
            400,
            "variate 0 has no observed point",
        ),
        (&v1, "{\"target\": [[1, NaN]], \"horizon\": 4}".into(), &ct, 400, "use null"),
        (
            &v1,
            "{\"target\": [[1, 2]], \"horizon\": 400}".into(),
            &ct,
            400,
            "horizon 400 exceed this engine's limit of 160",
        ),
        (&v1, "{\"target\": [[1],[1],[1],[1],[1]], \"horizon\": 4}".into(), &ct, 400, "5 variates"),
        (&v1, "{\"target\": [[1, 2]], \"horizon\": 4, \"samples\": 1000}".into(), &ct, 400, "1000 samples"),
        (&v1, "{\"target\": [[1, 2]], \"horizon\": 4}{}".into(), &ct, 400, "application/x-ndjson"),
        (
            &v1,
            "{\"target\": [[1, 2]], \"horizon\": 4}".into(),
            &[("content-type", "text/csv")],
            415,
            "Content-Type `text/csv`",
        ),
        (&v1, big, &ct, 413, "exceeds the server's limit of 65536 bytes"),
        (&v3, "{}".into(), &[], 404, "no route POST /v3/nothing"),
    ];
    for (url, body, headers, want_status, needle) in cases {
        let (status, h, out) = post(url, headers, body.as_bytes());
        let err = error_of(&out);
        assert_eq!(status, want_status, "{url} {body:.80}: {err}");
        assert!(err.contains(needle), "{url} {body:.80}\n  gave: {err}\n  want: {needle}");
        assert_eq!(h["content-type"], "application/json");
    }
    // A chunked body (no Content-Length) over the limit is cut off at the limit, not read to the end.
    let mut tcp = std::net::TcpStream::connect(&s.http).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(tcp, "POST /v1/forecast HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
    let chunk = "9".repeat(8192);
    for _ in 0..10 {
        if write!(tcp, "{:x}\r\n{chunk}\r\n", chunk.len()).is_err() {
            break;
        }
    }
    let _ = write!(tcp, "0\r\n\r\n");
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut tcp, &mut answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("exceeds the server's limit"), "{answer}");
    // A method the route does not take.
    let (status, body) = get(&v1);
    assert_eq!(status, 405, "{body}");
    assert!(error_of(body.as_bytes()).contains("does not take GET"));
    // The server is still fine.
    let (status, _) = post_json(&v1, &case("mean_1v")["request"]);
    assert_eq!(status, 200);
}

#[test]
fn a_bearer_token_guards_everything_but_the_health_probes() {
    let tmp = tempfile::tempdir().unwrap();
    let token = tmp.path().join("token");
    fs::write(&token, "s3cret-token\n").unwrap();
    let s = Server::ready(engine(), &["--token-file", token.to_str().unwrap()]);
    assert_eq!(get(&s.url("/v2/health/live")).0, 200);
    let body = case("mean_1v")["request"].to_string();
    let (status, h, out) = post(&s.url("/v1/forecast"), &[], body.as_bytes());
    assert_eq!(status, 401);
    assert_eq!(h["www-authenticate"], "Bearer");
    assert!(error_of(&out).contains("bearer token"));
    let (status, _, _) = post(&s.url("/v1/forecast"), &[("authorization", "Bearer wrong")], body.as_bytes());
    assert_eq!(status, 401);
    assert_eq!(get(&s.url("/metrics")).0, 401);
    assert_eq!(get(&s.url("/v2/models/toto")).0, 401);
    let (status, _, _) =
        post(&s.url("/v1/forecast"), &[("authorization", "Bearer s3cret-token")], body.as_bytes());
    assert_eq!(status, 200);
    // The v2 infer routes: without a token, with a wrong one (also with the right one in the wrong scheme), then
    // with the right one (the scheme in any case).
    let v2 = json!({"parameters": {"horizon": 4},
                    "inputs": [{"name": "target", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]})
    .to_string();
    for route in ["/v2/models/toto/infer", "/v2/models/toto/versions/1/infer"] {
        for auth in [None, Some("Bearer wrong"), Some("Basic s3cret-token"), Some("Bearer s3cret-token2")] {
            let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", *a)).collect();
            let (status, _, out) = post(&s.url(route), &headers, v2.as_bytes());
            assert_eq!(status, 401, "{route} with {auth:?}: {}", String::from_utf8_lossy(&out));
        }
        for auth in ["Bearer s3cret-token", "bearer s3cret-token", "BEARER s3cret-token"] {
            let (status, _, out) = post(&s.url(route), &[("authorization", auth)], v2.as_bytes());
            assert_eq!(status, 200, "{route} with {auth}: {}", String::from_utf8_lossy(&out));
        }
    }
}

// --- overload and deadlines

/// Opens a connection and sends headers and half of a body, then nothing.
fn stalled_request(addr: &str) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(s, "POST /v1/forecast HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"target\": ").unwrap();
    s.flush().unwrap();
    s
}

#[test]
fn overload_is_429_or_503_with_retry_after_and_deadlines_are_503() {
    let s = Server::ready(
        engine(),
        &[
            "--queue-delay-ms",
            "1500",
            "--queue-capacity",
            "2",
            "--max-in-flight",
            "2",
            "--body-read-timeout-ms",
            "700",
        ],
    );
    let body = case("mean_1v")["request"].to_string();
    let url = s.url("/v1/forecast");
    let waiting = |url: &String, body: &String| {
        let (url, body) = (url.clone(), body.clone());
        std::thread::spawn(move || post(&url, &[], body.as_bytes()).0)
    };
    // A client still sending its body holds no in-flight slot, and is answered 408 after the body timeout.
    let mut stalled = stalled_request(&s.http);
    // One request waits in the queue (delay 1.5 s): 1 of 2 series, 1 of 2 slots.
    let first = waiting(&url, &body);
    std::thread::sleep(Duration::from_millis(300));
    // Two more series do not fit in the queue.
    let two = json!({"parameters": {"horizon": 4},
                     "inputs": [{"name": "target", "datatype": "FP32", "shape": [2, 1, 3], "data": [1, 2, 3, 4, 5, 6]}]});
    let (status, h, out) = post(&s.url("/v2/models/toto/infer"), &[], two.to_string().as_bytes());
    assert_eq!(status, 429, "{}", String::from_utf8_lossy(&out));
    assert_eq!(h["retry-after"], "1");
    assert!(error_of(&out).contains("queue is full"));
    // A second waiting request takes the second slot; the next is refused: the in-flight limit (2) is reached.
    let second = waiting(&url, &body);
    std::thread::sleep(Duration::from_millis(200));
    let (status, h, out) = post(&url, &[], body.as_bytes());
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&out));
    assert!(h.contains_key("retry-after"));
    assert!(error_of(&out).contains("in flight"));
    assert_eq!(first.join().unwrap(), 200);
    assert_eq!(second.join().unwrap(), 200);
    let mut answer = String::new();
    let _ = std::io::Read::read_to_string(&mut stalled, &mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("--body-read-timeout-ms"), "{answer}");
    let m = s.metrics();
    assert_eq!(metric(&m, "totoc_rejected_total{reason=\"queue_full\"}"), 1.0);
    assert_eq!(metric(&m, "totoc_rejected_total{reason=\"in_flight\"}"), 1.0);
    assert_eq!(metric(&m, "totoc_rejected_total{reason=\"body_timeout\"}"), 1.0);

    // Deadlines: the header (ms) and the v2 `timeout` parameter (µs) both cut the wait short.
    let s = Server::ready(engine(), &["--queue-delay-ms", "1500"]);
    let t = Instant::now();
    let (status, h, out) = post(&s.url("/v1/forecast"), &[("x-request-timeout-ms", "200")], body.as_bytes());
    assert_eq!(status, 503);
    assert!(h.contains_key("retry-after"));
    assert!(error_of(&out).contains("deadline of 200 ms passed"), "{}", error_of(&out));
    assert!(t.elapsed() < Duration::from_millis(1400), "{:?}", t.elapsed());
    let v2 = json!({"parameters": {"horizon": 4, "timeout": 100_000},
                    "inputs": [{"name": "target", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]});
    let (status, out) = post_json(&s.url("/v2/models/toto/infer"), &v2);
    assert_eq!(status, 503, "{out}");
    assert!(out["error"].as_str().unwrap().contains("deadline of 100 ms"), "{out}");
}

// --- observability

#[test]
fn request_ids_are_echoed_and_on_every_log_line_of_the_request() {
    let s = Server::ready(engine(), &["--log-json"]);
    let (status, h, _) = post(
        &s.url("/v1/forecast"),
        &[("x-request-id", "rid-4242")],
        case("mean_1v")["request"].to_string().as_bytes(),
    );
    assert_eq!(status, 200);
    assert_eq!(h["x-request-id"], "rid-4242");
    let (_, h, _) = post(&s.url("/v1/forecast"), &[], case("mean_1v")["request"].to_string().as_bytes());
    let minted = h["x-request-id"].to_str().unwrap().to_string();
    assert!(!minted.is_empty());
    // Every log line emitted while serving a request carries its id (the access line, the engine call).
    std::thread::sleep(Duration::from_millis(100));
    let log = s.log();
    let lines: Vec<Value> = log.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    assert!(lines.len() > 5, "{log}");
    let of = |rid: &str| lines.iter().filter(|l| l.to_string().contains(rid)).count();
    assert!(of("rid-4242") >= 1 && of(&minted) >= 1, "{log}");
    for l in &lines {
        let msg = l["message"].as_str().unwrap_or("");
        if msg.starts_with("POST /v1/forecast") {
            let rid = l["span"]["request_id"].as_str().or(l["spans"][0]["request_id"].as_str());
            assert!(rid.is_some(), "access line without request id: {l}");
        }
    }
}

#[test]
fn metrics_cover_requests_latency_batches_rejections_and_readiness() {
    let s = Server::ready(engine(), &[]);
    for _ in 0..3 {
        assert_eq!(post_json(&s.url("/v1/forecast"), &case("mean_1v")["request"]).0, 200);
    }
    let _ = post_json(&s.url("/v1/forecast"), &json!({"target": [[1]], "horizon": 0}));
    let m = s.metrics();
    assert_eq!(metric(&m, "totoc_http_requests_total{route=\"/v1/forecast\",code=\"200\"}"), 3.0);
    assert_eq!(metric(&m, "totoc_http_requests_total{route=\"/v1/forecast\",code=\"400\"}"), 1.0);
    assert_eq!(metric(&m, "totoc_queue_wait_seconds_count"), 3.0);
    assert_eq!(metric(&m, "totoc_compute_seconds_count"), 3.0);
    assert_eq!(metric(&m, "totoc_batch_series_count "), 3.0);
    // every graph run of those calls, by bucket: the tiny engine's mean forecasts run a prefill and decode steps
    assert!(m.lines().any(|l| l.starts_with("totoc_bucket_occupancy_count{bucket=\"small.prefill.")), "{m}");
    assert_eq!(metric(&m, "totoc_ready "), 1.0);
    assert_eq!(metric(&m, "totoc_rejected_total{reason=\"queue_full\"}"), 0.0);
    for family in [
        "totoc_rejected",
        "totoc_in_flight",
        "totoc_queued_series",
        "totoc_shadow_error_ratio",
        "totoc_http_request_seconds",
    ] {
        assert!(m.contains(&format!("# TYPE {family}")), "no {family} in\n{m}");
    }
}

// --- shadow equivalence

#[test]
fn the_shadow_engine_exports_the_observed_error() {
    // The same engine as its own shadow: the error is 0.
    let s = Server::ready(engine(), &["--shadow-engine", engine().to_str().unwrap(), "--shadow-rate", "1"]);
    for name in ["mean_1v", "sampled_2v"] {
        assert_eq!(post_json(&s.url("/v1/forecast"), &case(name)["request"]).0, 200);
        std::thread::sleep(Duration::from_millis(300)); // the shadow runs while the live engine idles
    }
    let m = wait_for_metric(&s, "totoc_shadow_requests_total{result=\"compared\"}", 2.0);
    assert_eq!(metric(&m, "totoc_shadow_error_ratio_max "), 0.0);
    drop(s);
    // A shadow with other weights (the space-wise-first fixture, same shapes) disagrees: the ratio shows it.
    let (_dir, other) = build_engine("tiny_spacefirst", None);
    let s = Server::ready(engine(), &["--shadow-engine", other.to_str().unwrap(), "--shadow-rate", "1"]);
    assert_eq!(post_json(&s.url("/v1/forecast"), &case("mean_1v")["request"]).0, 200);
    let m = wait_for_metric(&s, "totoc_shadow_requests_total{result=\"compared\"}", 1.0);
    assert!(metric(&m, "totoc_shadow_error_ratio_max ") > 1.0, "{m}");
    assert_eq!(metric(&m, "totoc_shadow_out_of_tolerance_total "), 1.0);
    assert!(s.log().contains("shadow engine disagrees"));
}

pub(crate) fn wait_for_metric(s: &Server, line: &str, at_least: f64) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = s.metrics();
        if m.lines().any(|l| {
            l.starts_with(line)
                && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).is_some_and(|v| v >= at_least)
        }) {
            return m;
        }
        assert!(Instant::now() < deadline, "{line} never reached {at_least}:\n{m}\n{}", s.log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

// --- SIGTERM

#[test]
fn sigterm_drains_in_flight_requests_then_exits() {
    let mut s = Server::ready(engine(), &["--queue-delay-ms", "1500"]);
    let url = s.url("/v1/forecast");
    let body = case("mean_1v")["request"].to_string();
    let in_flight = std::thread::spawn(move || {
        let (status, _, out) = post(&url, &[], body.as_bytes());
        (status, out)
    });
    std::thread::sleep(Duration::from_millis(400));
    let sent = Instant::now();
    assert!(Command::new("kill").args(["-TERM", &s.pid()]).status().unwrap().success());
    let (status, out) = in_flight.join().unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&out));
    let deadline = Instant::now() + Duration::from_secs(30);
    let code = loop {
        if let Some(c) = s.child.try_wait().unwrap() {
            break c;
        }
        assert!(Instant::now() < deadline, "still running 30 s after SIGTERM:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(code.success(), "{code}\n{}", s.log());
    let log = s.log();
    assert!(log.contains("shutting down") && log.contains("stopped"), "{log}");
    // Nothing listens any more.
    assert!(std::net::TcpStream::connect(&s.http).is_err());
    eprintln!("drained and exited {:?} after SIGTERM", sent.elapsed());
}

// --- the real Python clients

#[test]
fn tritonclient_http_and_grpc_with_their_defaults() {
    let Some(py) = crate::venv::python(&crate::venv::SERVE) else { return };
    let s = Server::ready(engine(), &[]);
    // What the CLI gives for each case, for the Python side to compare with.
    let tmp = tempfile::tempdir().unwrap();
    let mut expected = serde_json::Map::new();
    for name in ["mean_1v", "mean_4v_groups", "mean_short", "sampled_2v"] {
        let req = case(name)["request"].clone();
        expected
            .insert(name.into(), json!({"request": req, "cli": cli_forecast(std::slice::from_ref(&req))[0]}));
    }
    // Univariate series of different lengths (for one ragged [N, 1, T] batch) and the CLI's answer to each.
    let long = case("mean_1v")["request"].clone();
    let short = json!({"target": [case("mean_4v_groups")["request"]["target"][0].as_array().unwrap()[30..]], "horizon": long["horizon"]});
    let ragged: Vec<Value> = [long, short]
        .into_iter()
        .map(|r| json!({"request": r, "cli": cli_forecast(std::slice::from_ref(&r))[0]}))
        .collect();
    let exp = tmp.path().join("expected.json");
    fs::write(&exp, json!({"cases": expected, "ragged": ragged}).to_string()).unwrap();
    let out = Command::new(&py)
        .arg(root().join("tests/serve/test_tritonclient.py"))
        .args(["--http", &s.http, "--grpc", &s.grpc, "--expected", exp.to_str().unwrap()])
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "tritonclient tests failed:\n{text}\nserver log:\n{}", s.log());
    assert!(text.contains("OK"), "{text}");
    eprintln!("{text}");
}
