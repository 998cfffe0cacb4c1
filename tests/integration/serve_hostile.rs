//! Hostile clients against `totoc serve` built with a release build's arithmetic (issue 22): no request may
//! kill, exhaust or wedge it. A debug binary would hide the worst bug (it checks every multiplication, so a size
//! that wraps in release panics there and the panic is caught per connection), so the server under test is built
//! without overflow checks and debug assertions: by default the `release-arith` profile (`cargo build
//! --profile release-arith --bin totoc`: the release profile's arithmetic at a fraction of its build time, ~2 min cold on 2 cores
//! against ~8 for `--release`), or the binary `$TOTOC_RELEASE_BIN` names (e.g. `target/release/totoc`, the
//! shipped artifact, which also builds totoc's crates with overflow checks as a defence in depth). On the binary
//! of the commit before the fix, the first request of the first group aborts the process (SIGABRT).
//!
//! One server (tiny engine, tight limits and timeouts of at most 1 s) takes every group in turn, over REST and
//! gRPC: overflowing and negative shapes, declared sizes that disagree with the data, huge quantile / series /
//! sample counts, deeply nested and truncated JSON, NaN/Inf tokens in and out of tensor data, trickling uploads
//! and slow readers, 1,000 idle connections, many concurrent gRPC streams without a token and with one. Every
//! hostile request must get its 4xx (a panic that drops the connection fails the test too). After each group
//! the process is alive and ready, a golden request (REST binary and gRPC) is answered bit-identically to its
//! first answer, and its peak RSS (VmHWM) stays under [`RSS_BOUND_MIB`], printed. Then SIGTERM with stalled
//! uploads open: it exits within its shutdown timeout. All traffic goes to 127.0.0.1 (and from 127.0.0.2 for one
//! probe); every loop is bounded in count and time.
//! long-file: one hostile client per test against one server; each attack sits beside the answer it must get.
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use serde_json::{json, Value};

use crate::common::*;

/// The peak resident memory the server may reach over the whole test, in MiB: the tiny engine and the runtime
/// (~90 MiB at start), the bytes-in-flight budget of the test server (64 MiB) and room for decoding and the slow
/// readers' answers. Measured: 119–131 MiB (release), 134 MiB (hostile profile), 159 MiB (debug); before the
/// fix one request of 12 MB took 4.1 GB.
const RSS_BOUND_MIB: u64 = 256;

const TOKEN: &str = "hostile-test-token";

/// The server binary: `$TOTOC_RELEASE_BIN`, else built here with the `release-arith` profile (see the module
/// docs), into the same target directory as this test's binary.
fn server_bin() -> &'static Path {
    static B: OnceLock<PathBuf> = OnceLock::new();
    B.get_or_init(|| {
        if let Some(p) = std::env::var_os("TOTOC_RELEASE_BIN") {
            return PathBuf::from(p);
        }
        let bin = target_dir().join("release-arith-bins/hostile/totoc");
        build_release_arith_totoc(&root(), &bin);
        bin
    })
}

/// Raises this process's open-file limit (inherited by the server) to hold 1,000 connections on each side.
fn raise_nofile(want: libc::rlim_t) {
    // SAFETY: plain getrlimit/setrlimit on a local struct.
    unsafe {
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        let cur = want.min(r.rlim_max);
        if r.rlim_cur < cur {
            r.rlim_cur = cur;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0, "setrlimit NOFILE {cur}");
        }
        let mut after = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut after);
        assert!(after.rlim_cur >= 1200, "RLIMIT_NOFILE is {}; 1,000 connections need more", after.rlim_cur);
    }
}

struct Server {
    child: Child,
    http: SocketAddr,
    grpc: SocketAddr,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(engine: &Path) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let token = dir.path().join("token");
        fs::write(&token, TOKEN).unwrap();
        let extra = [
            "--token-file",
            token.to_str().unwrap(),
            "--threads",
            "1",
            "--queue-delay-ms",
            "0",
            "--max-bytes-in-flight",
            "64MiB",
            "--max-connections-per-peer",
            "200",
            "--header-read-timeout-ms",
            "500",
            "--body-read-timeout-ms",
            "1000",
            "--idle-timeout-ms",
            "1000",
            "--shutdown-timeout-s",
            "3",
        ];
        let (child, http, grpc) = super::serve::spawn_serve(server_bin(), engine, &extra, "warn", &log);
        let (http, grpc): (SocketAddr, SocketAddr) = (http.parse().unwrap(), grpc.parse().unwrap());
        let s = Server { child, http, grpc, log, _dir: dir };
        let deadline = Instant::now() + Duration::from_secs(120);
        while !s.ready() {
            assert!(Instant::now() < deadline, "not ready after 120 s:\n{}", s.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn ready(&self) -> bool {
        let r = http(self.http, "GET", "/v2/health/ready", &[], b"", Duration::from_secs(10));
        r.is_ok_and(|(s, _)| s == 200)
    }

    /// Peak resident memory (VmHWM), MiB.
    fn peak_rss_mib(&self) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM");
        kb / 1024
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// --- clients

/// One HTTP/1.1 request on a fresh connection (`Connection: close`): (status, body).
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(req.as_bytes())?;
    // The server may answer (and close) before it read everything (413, 400): that is not a failure here.
    let _ = s.write_all(body);
    read_response(&mut s)
}

fn read_response(s: &mut TcpStream) -> std::io::Result<(u16, Vec<u8>)> {
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let end = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| {
        std::io::Error::other(format!("no response head in {:?}", String::from_utf8_lossy(&raw)))
    })?;
    let head = String::from_utf8_lossy(&raw[..end]).to_string();
    let status: u16 = head.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let mut body = raw[end + 4..].to_vec();
    if head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        body = dechunk(&body);
    }
    Ok((status, body))
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let n = usize::from_str_radix(String::from_utf8_lossy(&b[..eol]).trim(), 16).unwrap_or(0);
        if n == 0 || b.len() < eol + 2 + n {
            break;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + n]);
        b = &b[(eol + 4 + n).min(b.len())..];
    }
    out
}

const AUTH: (&str, &str) = ("Authorization", "Bearer hostile-test-token");

/// A v2 infer call with the token: (status, body).
fn infer(addr: SocketAddr, extra: &[(&str, &str)], body: &[u8]) -> (u16, Vec<u8>) {
    let mut h = vec![AUTH];
    h.extend_from_slice(extra);
    http(addr, "POST", "/v2/models/toto/infer", &h, body, Duration::from_secs(30)).expect("an answer")
}

/// A binary-extension body: the JSON header, then `binary`.
fn binary_body(header: &Value, binary: &[u8]) -> (Vec<u8>, String) {
    let h = header.to_string();
    let mut body = h.clone().into_bytes();
    body.extend_from_slice(binary);
    (body, h.len().to_string())
}

fn error_text(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(body).to_string())
}

/// Asserts a 4xx whose error names `want`.
fn refused(what: &str, (status, body): (u16, Vec<u8>), want: &str) {
    let e = error_text(&body);
    assert!((400..500).contains(&status), "{what}: status {status}: {e}");
    assert!(e.contains(want), "{what}: status {status}: {e:?} does not name {want:?}");
}

// --- gRPC over h2c, by hand (the messages written with prost; the protocol's field numbers)

mod pb {
    use std::collections::HashMap;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InferParameter {
        #[prost(oneof = "Choice", tags = "1, 2, 3")]
        pub choice: Option<Choice>,
    }
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Choice {
        #[prost(bool, tag = "1")]
        Bool(bool),
        #[prost(int64, tag = "2")]
        Int64(i64),
        #[prost(string, tag = "3")]
        Str(String),
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Contents {
        #[prost(int64, repeated, tag = "3")]
        pub int64: Vec<i64>,
        #[prost(float, repeated, tag = "6")]
        pub fp32: Vec<f32>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Input {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub datatype: String,
        #[prost(int64, repeated, tag = "3")]
        pub shape: Vec<i64>,
        #[prost(message, optional, tag = "5")]
        pub contents: Option<Contents>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InferRequest {
        #[prost(string, tag = "1")]
        pub model_name: String,
        #[prost(map = "string, message", tag = "4")]
        pub parameters: HashMap<String, InferParameter>,
        #[prost(message, repeated, tag = "5")]
        pub inputs: Vec<Input>,
        #[prost(bytes = "vec", repeated, tag = "7")]
        pub raw: Vec<Vec<u8>>,
    }
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ModelName {
        #[prost(string, tag = "1")]
        pub name: String,
    }
}

fn param(i: i64) -> pb::InferParameter {
    pb::InferParameter { choice: Some(pb::Choice::Int64(i)) }
}

fn grpc_frame(msg: &[u8]) -> Bytes {
    let mut f = Vec::with_capacity(msg.len() + 5);
    f.push(0);
    f.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    f.extend_from_slice(msg);
    Bytes::from(f)
}

type H2 = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    http_body_util::combinators::BoxBody<Bytes, std::io::Error>,
>;

fn h2_client() -> H2 {
    hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http()
}

/// One unary gRPC call: (grpc-status, message, response body without the frame header).
async fn grpc_call(
    client: &H2,
    addr: SocketAddr,
    method: &str,
    token: Option<&str>,
    body: http_body_util::combinators::BoxBody<Bytes, std::io::Error>,
) -> (i32, String, Vec<u8>) {
    let mut req = hyper::Request::post(format!("http://{addr}/inference.GRPCInferenceService/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let resp = match client.request(req.body(body).unwrap()).await {
        Ok(r) => r,
        Err(e) => return (-1, format!("transport: {e}"), Vec::new()),
    };
    let head = resp.headers().clone();
    let collected = match resp.into_body().collect().await {
        Ok(c) => c,
        Err(e) => return (-1, format!("body: {e}"), Vec::new()),
    };
    let trailers = collected.trailers().cloned().unwrap_or_default();
    let bytes = collected.to_bytes();
    let get = |k: &str| {
        trailers.get(k).or_else(|| head.get(k)).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
    };
    let code = get("grpc-status").parse().unwrap_or(-2);
    let message = get("grpc-message");
    (code, message, bytes.get(5..).map(<[u8]>::to_vec).unwrap_or_default())
}

fn full(b: Bytes) -> http_body_util::combinators::BoxBody<Bytes, std::io::Error> {
    Full::new(b).map_err(|never| match never {}).boxed()
}

const UNAUTHENTICATED: i32 = 16;
const INVALID_ARGUMENT: i32 = 3;
const RESOURCE_EXHAUSTED: i32 = 8;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

// --- golden requests

struct Golden {
    rest_body: Vec<u8>,
    rest_len: String,
    rest_answer: Vec<u8>,
    grpc_body: Vec<u8>,
    grpc_answer: Vec<u8>,
}

fn golden_case() -> Value {
    let text = fs::read(root().join("tests/fixtures/tiny/cases/sampled_2v.json")).unwrap();
    serde_json::from_slice::<Value>(&text).unwrap()["request"].clone()
}

impl Golden {
    fn new(s: &Server, rt: &tokio::runtime::Runtime) -> Golden {
        let req = golden_case();
        let target: Vec<Vec<f32>> = req["target"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                v.as_array().unwrap().iter().map(|x| x.as_f64().map_or(f32::NAN, |x| x as f32)).collect()
            })
            .collect();
        let (v, t) = (target.len(), target[0].len());
        let data: Vec<u8> = target.iter().flatten().flat_map(|x| x.to_le_bytes()).collect();
        let header = json!({
            "parameters": {"horizon": req["horizon"], "samples": req["samples"], "seed": req["seed"],
                           "binary_data_output": true},
            "inputs": [{"name": "target", "datatype": "FP32", "shape": [v, t],
                        "parameters": {"binary_data_size": data.len()}}],
        });
        let (rest_body, rest_len) = binary_body(&header, &data);
        let grpc = pb::InferRequest {
            model_name: "toto".into(),
            parameters: [
                ("horizon".to_string(), param(req["horizon"].as_i64().unwrap())),
                ("samples".to_string(), param(req["samples"].as_i64().unwrap())),
                ("seed".to_string(), param(req["seed"].as_i64().unwrap())),
            ]
            .into(),
            inputs: vec![pb::Input {
                name: "target".into(),
                datatype: "FP32".into(),
                shape: vec![v as i64, t as i64],
                contents: None,
            }],
            raw: vec![data],
        };
        let grpc_body = prost::Message::encode_to_vec(&grpc);
        let mut g =
            Golden { rest_body, rest_len, rest_answer: Vec::new(), grpc_body, grpc_answer: Vec::new() };
        let (rest, grpc) = g.ask(s, rt);
        g.rest_answer = rest;
        g.grpc_answer = grpc;
        g
    }

    fn ask(&self, s: &Server, rt: &tokio::runtime::Runtime) -> (Vec<u8>, Vec<u8>) {
        let (status, body) =
            infer(s.http, &[("Inference-Header-Content-Length", &self.rest_len)], &self.rest_body);
        assert_eq!(status, 200, "golden REST request: {}", error_text(&body));
        let (code, msg, grpc) = rt.block_on(grpc_call(
            &h2_client(),
            s.grpc,
            "ModelInfer",
            Some(TOKEN),
            full(grpc_frame(&self.grpc_body)),
        ));
        assert_eq!(code, 0, "golden gRPC request: {msg}");
        (body, grpc)
    }

    /// After a group: alive, ready, the same answers bit for bit, peak RSS under the bound.
    fn check(&self, s: &mut Server, rt: &tokio::runtime::Runtime, group: &str) {
        if let Some(code) = s.child.try_wait().unwrap() {
            panic!("{group}: the server exited ({code}); log:\n{}", s.log());
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !s.ready() {
            assert!(Instant::now() < deadline, "{group}: not ready; log:\n{}", s.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        let (rest, grpc) = self.ask(s, rt);
        assert!(rest == self.rest_answer, "{group}: the golden REST answer changed");
        assert!(grpc == self.grpc_answer, "{group}: the golden gRPC answer changed");
        let rss = s.peak_rss_mib();
        eprintln!("after {group}: alive, ready, golden answers identical; peak RSS {rss} MiB (bound {RSS_BOUND_MIB})");
        assert!(rss < RSS_BOUND_MIB, "{group}: peak RSS {rss} MiB over the bound of {RSS_BOUND_MIB} MiB");
    }
}

// --- the groups

fn shapes_and_sizes_rest(a: SocketAddr) {
    let huge = 1i64 << 62;
    // The request that aborted the release binary: a wrapping element count × size and 0 bytes of data.
    // [2^55, 128, 1]: 2^62 elements × 4 bytes wrap to 0 and the series vector asks for 5.5e18 bytes (SIGABRT).
    for shape in [
        json!([1i64 << 55, 128, 1]),
        json!([huge, 1, 1]),
        json!([huge, 4]),
        json!([1, huge, 4]),
        json!([1i64 << 61, 2]),
    ] {
        let header = json!({"parameters": {"horizon": 4},
            "inputs": [{"name": "target", "datatype": "FP32", "shape": shape, "parameters": {"binary_data_size": 0}}]});
        let (body, n) = binary_body(&header, b"");
        refused(
            &format!("binary shape {shape}"),
            infer(a, &[("Inference-Header-Content-Length", &n)], &body),
            "shape",
        );
    }
    for (shape, size) in [(json!([u64::MAX]), 0u64), (json!([i64::MAX, i64::MAX]), 0), (json!([1, 3]), 8)] {
        let header = json!({"parameters": {"horizon": 4},
            "inputs": [{"name": "target", "datatype": "FP32", "shape": shape, "parameters": {"binary_data_size": size}}]});
        let (body, n) = binary_body(&header, &vec![0u8; size as usize]);
        let r = infer(a, &[("Inference-Header-Content-Length", &n)], &body);
        assert!((400..500).contains(&r.0), "binary {shape} {size}: {} {}", r.0, error_text(&r.1));
    }
    // INT64 lengths with a wrapping size (×8).
    let header = json!({"parameters": {"horizon": 4}, "inputs": [
        {"name": "target", "datatype": "FP32", "shape": [1, 2], "parameters": {"binary_data_size": 8}},
        {"name": "lengths", "datatype": "INT64", "shape": [1i64 << 61], "parameters": {"binary_data_size": 0}}]});
    let (body, n) = binary_body(&header, &[0u8; 8]);
    refused("lengths 2^61", infer(a, &[("Inference-Header-Content-Length", &n)], &body), "shape");
    // Negative and disagreeing shapes, JSON data.
    let cases = [
        (json!([-1, 3]), json!([1, 2, 3]), "negative"),
        (json!([1, -3]), json!([1, 2, 3]), "negative"),
        (json!([1, 4]), json!([1, 2, 3]), "holds 4 elements"),
        (json!([1i64 << 62, 1i64 << 62]), json!([1]), "shape"),
        (json!([1, 1, 1, 1, 1, 1, 1, 1, 1, 1]), json!([1]), "must be [V, T]"),
    ];
    for (shape, data, want) in cases {
        let body = json!({"parameters": {"horizon": 4},
            "inputs": [{"name": "target", "datatype": "FP32", "shape": shape, "data": data}]});
        refused(&format!("json shape {shape}"), infer(a, &[], body.to_string().as_bytes()), want);
    }
    // Headers that lie about the JSON part.
    for n in ["99999999999999999999", "-1", "18446744073709551615", "1e3"] {
        let r = infer(a, &[("Inference-Header-Content-Length", n)], b"{}");
        assert!((400..500).contains(&r.0), "header length {n}: {}", r.0);
    }
}

fn huge_counts_rest(a: SocketAddr) {
    // 1,000,000 quantile levels in 4 MB of binary data: refused by count before any series is built.
    let levels: Vec<u8> =
        (0..1_000_000).flat_map(|i| (0.1f32 + (i % 7) as f32 * 0.1).to_le_bytes()).collect();
    let header = json!({"parameters": {"horizon": 4, "samples": 8}, "inputs": [
        {"name": "target", "datatype": "FP32", "shape": [1, 2], "parameters": {"binary_data_size": 8}},
        {"name": "quantile_levels", "datatype": "FP32", "shape": [1_000_000], "parameters": {"binary_data_size": 4_000_000}}]});
    let mut bin = vec![0u8; 0];
    bin.extend(1.0f32.to_le_bytes());
    bin.extend(2.0f32.to_le_bytes());
    bin.extend(&levels);
    let (body, n) = binary_body(&header, &bin);
    refused(
        "1e6 quantile levels",
        infer(a, &[("Inference-Header-Content-Length", &n)], &body),
        "--max-quantile-levels",
    );
    // 1,000,000 series of one point each (4 MB).
    let data = vec![0u8; 4_000_000];
    let header = json!({"parameters": {"horizon": 4}, "inputs": [
        {"name": "target", "datatype": "FP32", "shape": [1_000_000, 1, 1], "parameters": {"binary_data_size": 4_000_000}}]});
    let (body, n) = binary_body(&header, &data);
    refused("1e6 series", infer(a, &[("Inference-Header-Content-Length", &n)], &body), "--max-series");
    // Samples and horizons far beyond anything.
    for (params, want) in [
        (json!({"horizon": 4, "samples": 1u64 << 40}), "samples"),
        (json!({"horizon": u64::MAX}), "horizon"),
        (json!({"horizon": 4, "samples": 16, "timeout": u64::MAX}), ""),
        (json!({"horizon": 160, "samples": 256}), "--max-response-values"),
    ] {
        // 200 series of 4 variates at the engine's largest horizon and sample count: a response of 32M values.
        let body = json!({"parameters": params, "inputs": [
            {"name": "target", "datatype": "FP32", "shape": [200, 4, 1], "data": vec![1.0; 800]}]});
        let r = infer(a, &[], body.to_string().as_bytes());
        if want.is_empty() {
            assert!(r.0 == 200 || (400..500).contains(&r.0), "{params}: {}", r.0);
        } else {
            refused(&format!("{params}"), r, want);
        }
    }
    // /v1/forecast: many sampled series in JSON Lines, each at the limits: refused by the response budget.
    let line = json!({"target": [[1.0], [2.0], [3.0], [4.0]], "horizon": 160, "samples": 256}).to_string();
    let body = format!("{line}\n").repeat(200);
    let r = http(
        a,
        "POST",
        "/v1/forecast",
        &[AUTH, ("Content-Type", "application/x-ndjson")],
        body.as_bytes(),
        Duration::from_secs(30),
    )
    .unwrap();
    refused("v1 200 sampled series", r, "--max-response-values");
}

fn json_tokens_and_nesting_rest(a: SocketAddr) {
    // NaN = missing in tensor data: the same answer as null.
    let with = |data: &str| {
        format!(
            r#"{{"parameters": {{"horizon": 4}}, "inputs": [{{"name": "target", "datatype": "FP32", "shape": [1, 4], "data": {data}}}]}}"#
        )
    };
    let (s1, b1) = infer(a, &[], with("[1, NaN, 3, 4]").as_bytes());
    let (s2, b2) = infer(a, &[], with("[[1, null, 3, 4]]").as_bytes());
    assert_eq!((s1, s2), (200, 200), "{} {}", error_text(&b1), error_text(&b2));
    assert_eq!(b1, b2, "NaN and null differ");
    refused("Infinity in target", infer(a, &[], with("[1, Infinity, 3, 4]").as_bytes()), "not finite");
    refused("-Infinity in target", infer(a, &[], with("[1, -Infinity, 3, 4]").as_bytes()), "not finite");
    // Out of tensor data the tokens are still not JSON.
    for body in [
        r#"{"parameters": {"horizon": NaN}, "inputs": []}"#.to_string(),
        r#"{"parameters": {"horizon": 4}, "inputs": [{"name": "target", "datatype": "FP32", "shape": [NaN, 4], "data": [1]}]}"#.into(),
        r#"{"parameters": {"horizon": 4}, "inputs": [{"name": "target", "datatype": "FP32", "shape": [1, 1], "data": [1], "parameters": {"x": Infinity}}]}"#.into(),
        r#"{"id": NaN, "inputs": []}"#.into(),
    ] {
        refused(&body, infer(a, &[], body.as_bytes()), "JSON");
    }
    // Deeply nested: in the data, at the root, in parameters; 100,000 levels each (no stack overflow).
    for deep in [
        with(&format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000))),
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!(r#"{{"parameters": {{"a": {}}}}}, "inputs": []}}"#, "{\"a\": ".repeat(100_000)),
        format!("{}1", "[".repeat(1_000_000)),
    ] {
        let r = infer(a, &[], deep.as_bytes());
        assert!((400..500).contains(&r.0), "deep JSON: {} {}", r.0, error_text(&r.1));
    }
    // Truncated JSON, at every 7th byte of a real request, and the v1 route.
    let full = with("[1, 2, 3, 4]");
    for cut in (0..full.len()).step_by(7) {
        let r = infer(a, &[], &full.as_bytes()[..cut]);
        assert!((400..500).contains(&r.0), "cut at {cut}: {}", r.0);
    }
    let r = http(
        a,
        "POST",
        "/v1/forecast",
        &[AUTH],
        br#"{"target": [[1, NaN]], "horizon": 2}"#,
        Duration::from_secs(10),
    )
    .unwrap();
    refused("v1 NaN", r, "NaN");
}

fn grpc_groups(a: SocketAddr, rt: &tokio::runtime::Runtime) {
    let client = h2_client();
    let call = |req: &pb::InferRequest| {
        rt.block_on(grpc_call(
            &client,
            a,
            "ModelInfer",
            Some(TOKEN),
            full(grpc_frame(&prost::Message::encode_to_vec(req))),
        ))
    };
    let req = |shape: Vec<i64>, raw: Option<Vec<u8>>, fp32: Vec<f32>| pb::InferRequest {
        model_name: "toto".into(),
        parameters: [("horizon".to_string(), param(4))].into(),
        inputs: vec![pb::Input {
            name: "target".into(),
            datatype: "FP32".into(),
            shape,
            contents: raw.is_none().then(|| pb::Contents { fp32, int64: vec![] }),
        }],
        raw: raw.into_iter().collect(),
    };
    let huge = 1i64 << 62;
    for (r, what) in [
        (req(vec![1 << 55, 128, 1], Some(vec![]), vec![]), "raw 2^55 × 128 × 1, 0 bytes (aborted before)"),
        (req(vec![huge, 1, 1], Some(vec![]), vec![]), "raw 2^62 × 1 × 1, 0 bytes"),
        (req(vec![huge, 4], Some(vec![]), vec![]), "raw 2^62 × 4, 0 bytes"),
        (req(vec![i64::MAX, i64::MAX], Some(vec![]), vec![]), "raw i64::MAX²"),
        (req(vec![-1, 3], Some(vec![0; 12]), vec![]), "raw negative"),
        (req(vec![1, 3], Some(vec![0; 8]), vec![]), "raw 3 elements in 8 bytes"),
        (req(vec![huge, 1, 1], None, vec![]), "typed 2^62, no contents"),
        (req(vec![1, 4], None, vec![1.0; 3]), "typed 4 elements, 3 given"),
        (req(vec![-4], None, vec![1.0; 4]), "typed negative"),
        (req(vec![1_000_000, 1, 1], Some(vec![0; 4_000_000]), vec![]), "1e6 series"),
    ] {
        let (code, msg, _) = call(&r);
        assert_eq!(code, INVALID_ARGUMENT, "{what}: {code} {msg}");
    }
    // A message over the size limit: RESOURCE_EXHAUSTED.
    let big = req(vec![1, 5_000_000], Some(vec![0; 20_000_000]), vec![]);
    let (code, msg, _) = call(&big);
    assert_eq!(code, RESOURCE_EXHAUSTED, "20 MB message: {msg}");
}

/// `n` concurrent gRPC streams on a few connections, each declaring a 16 MiB message and sending `send` bytes
/// of it, then stalling: without a token every one is refused at once; with one, the bytes budget and the body
/// timeout end them.
fn grpc_stalled_streams(
    a: SocketAddr,
    rt: &tokio::runtime::Runtime,
    n: usize,
    token: Option<&str>,
    send: usize,
) -> Vec<i32> {
    rt.block_on(async {
        let clients: Vec<H2> = (0..4).map(|_| h2_client()).collect();
        let mut tasks = Vec::new();
        let mut senders = Vec::new();
        for i in 0..n {
            let (tx, rx) = tokio::sync::mpsc::channel::<Result<hyper::body::Frame<Bytes>, std::io::Error>>(4);
            let mut first = vec![0u8];
            first.extend_from_slice(&(16u32 << 20).to_be_bytes());
            first.extend(std::iter::repeat_n(0x0a, send));
            let _ = tx.try_send(Ok(hyper::body::Frame::data(Bytes::from(first))));
            senders.push(tx);
            let body = StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(rx)).boxed();
            let client = clients[i % clients.len()].clone();
            let token = token.map(str::to_string);
            tasks.push(tokio::spawn(async move {
                tokio::time::timeout(
                    Duration::from_secs(20),
                    grpc_call(&client, a, "ModelInfer", token.as_deref(), body),
                )
                .await
                .map_or(-3, |r| r.0)
            }));
        }
        let mut codes = Vec::new();
        for t in tasks {
            codes.push(t.await.unwrap());
        }
        drop(senders);
        codes
    })
}

/// Connections that send their headers and part of a body, then nothing: they hold no in-flight slot, and the
/// body timeout closes them.
fn trickle(a: SocketAddr, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = TcpStream::connect(a).unwrap();
            write!(s, "POST /v2/models/toto/infer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 100000\r\n\r\n{{\"inputs\"").unwrap();
            s
        })
        .collect()
}

/// Whether the server closed `s` (EOF or a response and then EOF) within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut buf = [0u8; 4096];
    let start = Instant::now();
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => return true,
            Err(_) => return false,
        }
        if start.elapsed() > within {
            return false;
        }
    }
}

#[test]
fn no_request_kills_exhausts_or_wedges_the_server() {
    raise_nofile(4096);
    let mut s = Server::start(crate::serve::engine());
    let rt = rt();
    let golden = Golden::new(&s, &rt);
    golden.check(&mut s, &rt, "start");
    let t0 = Instant::now();

    shapes_and_sizes_rest(s.http);
    golden.check(&mut s, &rt, "REST shapes and sizes");
    huge_counts_rest(s.http);
    golden.check(&mut s, &rt, "REST huge counts");
    json_tokens_and_nesting_rest(s.http);
    golden.check(&mut s, &rt, "REST JSON tokens, nesting, truncation");
    grpc_groups(s.grpc, &rt);
    golden.check(&mut s, &rt, "gRPC shapes, sizes and counts");

    // Trickling uploads: 150 stalled bodies hold no in-flight slot; requests go on; the body timeout closes them.
    let mut stalled = trickle(s.http, 150);
    golden.check(&mut s, &rt, "150 trickling uploads (while open)");
    let closed =
        stalled.iter_mut().map(|c| closed_within(c, Duration::from_secs(5))).filter(|&closed| closed).count();
    assert_eq!(closed, 150, "trickling uploads still open after the body timeout");
    // Headers that never end: closed by the header timeout.
    let mut slow_headers: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut c = TcpStream::connect(s.http).unwrap();
            c.write_all(b"POST /v2/models/toto/infer HTTP/1.1\r\nHost: x\r\nX-Slow: ").unwrap();
            c
        })
        .collect();
    let closed = slow_headers
        .iter_mut()
        .map(|c| closed_within(c, Duration::from_secs(5)))
        .filter(|&closed| closed)
        .count();
    assert_eq!(closed, 50, "slow headers still open after the header timeout");
    // Slow readers: 2 clients ask for a ~7 MB JSON answer (16 series × 160 steps × (1 + 3 + 256) values, more than
    // the kernel buffers hold) and read nothing; the idle timeout cuts them off once the buffers are full.
    let big = {
        let header = json!({"parameters": {"horizon": 160, "samples": 256},
            "inputs": [{"name": "target", "datatype": "FP32", "shape": [16, 1, 8], "data": vec![1.5; 16 * 8]}]});
        (header.to_string().into_bytes(), String::new())
    };
    let full_len = {
        let (status, body) = infer(s.http, &[], &big.0);
        assert_eq!(status, 200, "{}", error_text(&body));
        body.len()
    };
    let mut readers: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut c = connect_from("127.0.0.1", s.http, Some(16 << 10)).expect("connect");
            write!(c, "POST /v2/models/toto/infer HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n", big.0.len()).unwrap();
            c.write_all(&big.0).unwrap();
            c
        })
        .collect();
    golden.check(&mut s, &rt, "trickling uploads, slow headers, 2 slow readers (while open)");
    std::thread::sleep(Duration::from_secs(4));
    for r in &mut readers {
        r.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        let _ = r.read_to_end(&mut got);
        assert!(
            got.len() < full_len,
            "a slow reader got the whole answer ({} bytes): not cut off",
            got.len()
        );
    }
    drop(readers);
    golden.check(&mut s, &rt, "slow readers cut off");

    // 1,000 idle connections from 127.0.0.1: the per-peer cap (200) closes the rest at once, the idle timeout
    // the others; a client from another address is served meanwhile.
    let idle: Vec<TcpStream> = (0..1000).filter_map(|_| TcpStream::connect(s.http).ok()).collect();
    assert!(idle.len() >= 900, "only {} connections opened", idle.len());
    std::thread::sleep(Duration::from_millis(200));
    let other = other_peer_ready(s.http);
    assert!(other, "a client from 127.0.0.2 was not served while 1,000 idle connections were open");
    let mut idle = idle;
    let closed =
        idle.iter_mut().map(|c| closed_within(c, Duration::from_secs(4))).filter(|&closed| closed).count();
    assert_eq!(closed, idle.len(), "idle connections still open after the idle timeout");
    drop(idle);
    golden.check(&mut s, &rt, "1,000 idle connections");

    // Many concurrent gRPC streams without a token: refused before their 16 MiB messages are read.
    let t = Instant::now();
    let codes = grpc_stalled_streams(s.grpc, &rt, 400, None, 64 << 10);
    assert!(codes.iter().all(|&c| c == UNAUTHENTICATED), "codes without a token: {codes:?}");
    eprintln!("400 stalled gRPC streams without a token: all UNAUTHENTICATED in {:?}", t.elapsed());
    for token in [None, Some("wrong")] {
        for method in ["ModelReady", "ServerMetadata", "ModelMetadata", "ModelInfer"] {
            let msg = prost::Message::encode_to_vec(&pb::ModelName { name: "toto".into() });
            let (code, _, _) =
                rt.block_on(grpc_call(&h2_client(), s.grpc, method, token, full(grpc_frame(&msg))));
            assert_eq!(code, UNAUTHENTICATED, "{method} with token {token:?}");
        }
    }
    golden.check(&mut s, &rt, "400 gRPC streams without a token");
    // With the token: 100 streams × 1 MiB sent of 16 MiB: the 64 MiB budget refuses some, the body timeout
    // ends the rest.
    let codes = grpc_stalled_streams(s.grpc, &rt, 100, Some(TOKEN), 1 << 20);
    assert!(codes.iter().all(|&c| c != 0 && c != -3), "stalled streams with a token: {codes:?}");
    assert!(codes.contains(&RESOURCE_EXHAUSTED), "no stream hit the bytes budget: {codes:?}");
    golden.check(&mut s, &rt, "100 stalled 16 MiB gRPC streams with a token");

    let metrics = http(s.http, "GET", "/metrics", &[AUTH], b"", Duration::from_secs(10)).unwrap();
    let metrics = String::from_utf8_lossy(&metrics.1).to_string();
    for reason in
        ["max_series", "max_quantile_levels", "max_response_values", "bytes_in_flight", "peer_connections"]
    {
        assert!(
            metrics.contains(&format!("totoc_rejected_total{{reason=\"{reason}\"}}")),
            "no rejection metric {reason}"
        );
    }
    eprintln!("hostile groups took {:.1} s", t0.elapsed().as_secs_f64());

    // SIGTERM with stalled uploads (REST and gRPC) open: exits within its shutdown timeout (3 s).
    let _stalled = trickle(s.http, 20);
    let grpc_stall = std::thread::spawn({
        let a = s.grpc;
        move || grpc_stalled_streams(a, &rt, 10, Some(TOKEN), 1024)
    });
    std::thread::sleep(Duration::from_millis(200));
    let sent = Instant::now();
    assert!(Command::new("kill").args(["-TERM", &s.child.id().to_string()]).status().unwrap().success());
    let code = loop {
        if let Some(c) = s.child.try_wait().unwrap() {
            break c;
        }
        assert!(sent.elapsed() < Duration::from_secs(10), "still running 10 s after SIGTERM:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(code.success(), "{code}\n{}", s.log());
    eprintln!("SIGTERM with stalled uploads: exited in {:?}", sent.elapsed());
    let _ = grpc_stall.join();
}

/// A readiness probe from 127.0.0.2 (another peer, still loopback).
fn other_peer_ready(a: SocketAddr) -> bool {
    let sock = connect_from("127.0.0.2", a, None);
    let Some(mut s) = sock else { return false };
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    if s.write_all(
        format!("GET /v2/health/ready HTTP/1.1\r\nHost: {a}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .is_err()
    {
        return false;
    }
    read_response(&mut s).is_ok_and(|(st, _)| st == 200)
}

/// A TCP connection to `to` from the loopback address `from` (bound with libc, no extra crate), with a small
/// receive buffer when asked (a slow reader whose kernel buffers do not hold the whole answer).
fn connect_from(from: &str, to: SocketAddr, rcvbuf: Option<i32>) -> Option<TcpStream> {
    use std::os::fd::FromRawFd;
    let from: std::net::Ipv4Addr = from.parse().ok()?;
    let SocketAddr::V4(to) = to else { return None };
    // SAFETY: a fresh socket, bound and connected with sockaddr_in structs that live across the calls.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        if fd < 0 {
            return None;
        }
        let sa = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(ip).to_be() },
            sin_zero: [0; 8],
        };
        let local = sa(from, 0);
        let remote = sa(*to.ip(), to.port());
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if let Some(b) = rcvbuf {
            let size = std::mem::size_of::<i32>() as libc::socklen_t;
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &b as *const i32 as *const libc::c_void,
                size,
            );
        }
        if libc::bind(fd, &local as *const _ as *const libc::sockaddr, len) != 0
            || libc::connect(fd, &remote as *const _ as *const libc::sockaddr, len) != 0
        {
            libc::close(fd);
            return None;
        }
        Some(TcpStream::from_raw_fd(fd))
    }
}

// --- group 5 (issue 36, class 5): requests small on the wire whose work is far larger than any byte limit sees.
// Self-contained: its own server (the tiny engine with the default request budget and a 10 s deadline), its own
// clients; the helpers above (Golden, http, grpc_call) as they are.

/// Group 5's server: default limits, `--request-timeout-ms 10000` (so an admitted expensive request takes
/// seconds, not half a minute), one intra-op thread, the test token.
fn cost_server(engine: &Path) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let token = dir.path().join("token");
    fs::write(&token, TOKEN).unwrap();
    let extra = [
        "--token-file",
        token.to_str().unwrap(),
        "--threads",
        "1",
        "--queue-delay-ms",
        "0",
        "--request-timeout-ms",
        "10000",
    ];
    let (child, http, grpc) = super::serve::spawn_serve(server_bin(), engine, &extra, "warn", &log);
    let s = Server { child, http: http.parse().unwrap(), grpc: grpc.parse().unwrap(), log, _dir: dir };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !s.ready() {
        assert!(Instant::now() < deadline, "not ready after 120 s:\n{}", s.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    s
}

/// One trigger of class 5 and what it must get.
#[derive(Debug, Clone, Copy)]
enum Costly {
    /// ~1 KB of v2 JSON: 100 series × 4 variates of one point, horizon 160, 256 sample paths: refused.
    SamplesJson,
    /// The same as binary tensor data: refused.
    SamplesBinary,
    /// The same as 100 `/v1/forecast` JSON lines: refused.
    SamplesV1,
    /// The same over gRPC: RESOURCE_EXHAUSTED.
    SamplesGrpc,
    /// 256 series × 4 variates, the longest horizon, mean forecasts: served, or refused behind the work ahead.
    ManySeries,
    /// 8 series × 4 variates × 256 paths at the longest horizon: seconds of work; served, or refused (alone or
    /// behind the work ahead).
    SomeSamples,
    /// A cheap request with a 2 s deadline sent beside the expensive ones (to be packed with them): served, or
    /// refused behind the work ahead; never made to miss its deadline by a packed call.
    CheapBeside,
}

impl Costly {
    const ALL: [Costly; 7] = [
        Costly::SamplesJson,
        Costly::SamplesBinary,
        Costly::SamplesV1,
        Costly::SamplesGrpc,
        Costly::ManySeries,
        Costly::SomeSamples,
        Costly::CheapBeside,
    ];

    /// Whether its estimate alone exceeds what it may take (429 / RESOURCE_EXHAUSTED up front, whatever else runs).
    fn refused_alone(self) -> bool {
        matches!(self, Costly::SamplesJson | Costly::SamplesBinary | Costly::SamplesV1 | Costly::SamplesGrpc)
    }

    /// Sends it once: (HTTP status, or 1000 + the gRPC code; the error message).
    fn send(self, s: &Server) -> (u16, String) {
        let v2 = |shape: [usize; 3], horizon: usize, samples: usize| {
            let n = shape.iter().product::<usize>();
            let body = json!({"parameters": {"horizon": horizon, "samples": samples},
                "inputs": [{"name": "target", "datatype": "FP32", "shape": shape, "data": vec![1.5; n]}]});
            body.to_string().into_bytes()
        };
        let answer = |(status, body): (u16, Vec<u8>)| (status, error_text(&body));
        match self {
            Costly::SamplesJson => answer(infer(s.http, &[], &v2([100, 4, 1], 160, 256))),
            Costly::SamplesBinary => {
                let header = json!({"parameters": {"horizon": 160, "samples": 256}, "inputs": [
                    {"name": "target", "datatype": "FP32", "shape": [100, 4, 1], "parameters": {"binary_data_size": 1600}}]});
                let (body, n) = binary_body(&header, &[0x3f; 1600]);
                answer(infer(s.http, &[("Inference-Header-Content-Length", &n)], &body))
            }
            Costly::SamplesV1 => {
                let line = json!({"target": [[1.0], [2.0], [3.0], [4.0]], "horizon": 160, "samples": 256});
                let body = format!("{line}\n").repeat(100);
                let h = [AUTH, ("Content-Type", "application/x-ndjson")];
                answer(
                    http(s.http, "POST", "/v1/forecast", &h, body.as_bytes(), Duration::from_secs(30))
                        .unwrap(),
                )
            }
            Costly::SamplesGrpc => {
                let req = pb::InferRequest {
                    model_name: "toto".into(),
                    parameters: [("horizon".to_string(), param(160)), ("samples".to_string(), param(256))]
                        .into(),
                    inputs: vec![pb::Input {
                        name: "target".into(),
                        datatype: "FP32".into(),
                        shape: vec![100, 4, 1],
                        contents: Some(pb::Contents { fp32: vec![1.5; 400], int64: vec![] }),
                    }],
                    raw: vec![],
                };
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                let frame = grpc_frame(&prost::Message::encode_to_vec(&req));
                let (code, msg, _) =
                    rt.block_on(grpc_call(&h2_client(), s.grpc, "ModelInfer", Some(TOKEN), full(frame)));
                (1000 + code as u16, percent_decoded(&msg))
            }
            Costly::ManySeries => answer(infer(s.http, &[], &v2([256, 4, 1], 160, 0))),
            Costly::SomeSamples => answer(infer(s.http, &[], &v2([8, 4, 1], 160, 256))),
            Costly::CheapBeside => {
                answer(infer(s.http, &[("x-request-timeout-ms", "2000")], &v2([1, 2, 64], 20, 64)))
            }
        }
    }
}

/// A `grpc-message` as sent: percent-encoded UTF-8.
fn percent_decoded(text: &str) -> String {
    let (b, mut out, mut i) = (text.as_bytes(), Vec::new(), 0);
    while i < b.len() {
        let hex = b.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (b[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A well-behaved client: the golden ~1 KB request every 200 ms until `stop`; its answers' statuses (each must be
/// 200), the errors of the others, and its worst latency.
fn well_behaved(
    s: &Server,
    body: Vec<u8>,
    len: String,
    stop: &std::sync::atomic::AtomicBool,
) -> (Vec<u16>, Vec<String>, Duration) {
    let (mut statuses, mut errors, mut worst) = (Vec::new(), Vec::new(), Duration::ZERO);
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let t = Instant::now();
        let (status, answer) = infer(s.http, &[("Inference-Header-Content-Length", &len)], &body);
        worst = worst.max(t.elapsed());
        statuses.push(status);
        if status != 200 {
            errors.push(format!("{status} after {:?}: {}", t.elapsed(), error_text(&answer)));
        }
        std::thread::sleep(Duration::from_millis(200).saturating_sub(t.elapsed()));
    }
    (statuses, errors, worst)
}

/// A liveness prober: `/v2/health/live` every 100 ms until `stop`; (probes, worst answer time, failures).
fn live_prober(s: &Server, stop: &std::sync::atomic::AtomicBool) -> (usize, Duration, usize) {
    let (mut n, mut worst, mut failed) = (0, Duration::ZERO, 0);
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        let t = Instant::now();
        let ok = http(s.http, "GET", "/v2/health/live", &[], b"", Duration::from_secs(1))
            .is_ok_and(|(st, _)| st == 200);
        worst = worst.max(t.elapsed());
        n += 1;
        failed += usize::from(!ok);
        std::thread::sleep(Duration::from_millis(100).saturating_sub(t.elapsed()));
    }
    (n, worst, failed)
}

#[test]
fn expensive_but_small_requests_are_refused_up_front_and_starve_nobody() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mut s = cost_server(crate::serve::engine());
    let rt = rt();
    let golden = Golden::new(&s, &rt);
    golden.check(&mut s, &rt, "group 5 start");
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let (polite, live, hostile) = std::thread::scope(|scope| {
        let polite =
            scope.spawn(|| well_behaved(&s, golden.rest_body.clone(), golden.rest_len.clone(), &stop));
        let live = scope.spawn(|| live_prober(&s, &stop));
        // Two rounds of 16 at once.
        let mut hostile = Vec::new();
        for round in 0..2 {
            let barrier = std::sync::Barrier::new(16);
            let answers: Vec<(Costly, (u16, String))> = std::thread::scope(|inner| {
                let handles: Vec<_> = (0..16)
                    .map(|i| {
                        let kind = Costly::ALL[(i + round * 3) % Costly::ALL.len()];
                        let (s, barrier) = (&s, &barrier);
                        inner.spawn(move || {
                            barrier.wait();
                            (kind, kind.send(s))
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            hostile.extend(answers);
        }
        // The well-behaved client goes on a little after the attack.
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::SeqCst);
        (polite.join().unwrap(), live.join().unwrap(), hostile)
    });
    let mut served = 0;
    for (kind, (status, msg)) in &hostile {
        if kind.refused_alone() {
            let refused = *status == 429 || *status == 1000 + RESOURCE_EXHAUSTED as u16;
            assert!(refused, "{kind:?}: {status} {msg}");
            assert!(
                msg.contains("estimated engine time is") && msg.contains("it fits with"),
                "{kind:?}: {msg}"
            );
        } else {
            // served, or refused on its estimate behind the work ahead; never a missed deadline or a failure
            assert!(*status == 200 || *status == 429, "{kind:?}: {status} {msg}");
            served += usize::from(*status == 200);
        }
    }
    let mut outcomes: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for (kind, (status, _)) in &hostile {
        *outcomes.entry(format!("{kind:?} {status}")).or_default() += 1;
    }
    eprintln!("group 5 answers (kind, status or 1000 + gRPC code): {outcomes:?}");
    let (statuses, errors, worst) = polite;
    let (probes, live_worst, live_failed) = live;
    eprintln!(
        "group 5: {} hostile requests in {:.1} s ({served} of the admissible ones served); well-behaved client: {} \
         requests, all 200: {}, worst latency {:?}; /v2/health/live: {probes} probes, worst {:?}, {live_failed} failed",
        hostile.len(),
        t0.elapsed().as_secs_f64(),
        statuses.len(),
        statuses.iter().all(|&c| c == 200),
        worst,
        live_worst
    );
    assert!(statuses.len() >= 5 && errors.is_empty(), "well-behaved answers: {statuses:?}: {errors:?}");
    assert!(
        live_failed == 0 && live_worst < Duration::from_secs(1),
        "liveness: worst {live_worst:?}, {live_failed} failed"
    );
    let metrics = http(s.http, "GET", "/metrics", &[AUTH], b"", Duration::from_secs(10)).unwrap();
    let metrics = String::from_utf8_lossy(&metrics.1).to_string();
    assert!(
        metrics.contains("totoc_rejected_total{reason=\"estimated_time\"}"),
        "no estimated_time rejections"
    );
    golden.check(&mut s, &rt, "group 5: expensive-but-small requests, 2 rounds of 16 at once");
}
