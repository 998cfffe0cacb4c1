//! `totoc bench serve`: a bounded load test of `totoc serve` on loopback.
//!
//! 1. Times the engine alone on the benchmark request (in this process, `--engine-runs` calls
//!    `--engine-gap-ms` apart, median), then frees it.
//! 2. Starts the real server (`totoc serve --addr 127.0.0.1:0`, this binary) and waits for ready.
//! 3. Per `--clients` value, N closed-loop clients send the same `POST /v1/forecast` request for `--duration-s`
//!    (or `--max-requests`): throughput, p50/p99 latency, the server's own queue/compute split (its
//!    `Server-Timing` header), batch occupancy (series per engine call, from `/metrics`), status codes and the
//!    server's RSS after the phase. Below capacity every request must succeed.
//! 4. With `--overload-clients`, a second server with a small queue (8 series) and in-flight limit (16) gets that
//!    many clients: it must answer only 200, 429 or 503, and its RSS must stay flat.
//! 5. SIGTERM to each server: it must drain and exit 0.
//!
//! Server overhead is the 1-client HTTP p50 minus the engine-alone median for the same request (run it with
//! `--queue-delay-ms 0`, the default); because the engine-alone runs and the HTTP runs happen at different
//! times, the bench also reports, per request, its HTTP latency minus the engine call that served it (the
//! server's `Server-Timing`), whose median does not depend on the machine's speed drifting between the two.
//! Everything is bounded: at most 120 s per phase, loopback only, servers are killed if they do not stop.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use engines::engine::{Engine, LoadOptions};

use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::json;

use crate::cli::BenchServeArgs;
use crate::cmd::bench_body::{decode, request_body, BodySpec};
use crate::cmd::bench_support::engine_options;

type HttpClient = Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>;

/// One client request's outcome.
struct Sample {
    status: u16,
    latency: Duration,
    /// When its answer arrived, from the phase's start.
    done: Duration,
    /// The server's engine-call time for it (`Server-Timing: compute`).
    compute_ms: Option<f64>,
    queue_ms: Option<f64>,
}

/// A phase's figures.
#[derive(Debug, Clone, serde::Serialize)]
struct Phase {
    name: String,
    clients: usize,
    seconds: f64,
    requests: usize,
    ok: usize,
    rejected_429: usize,
    rejected_503: usize,
    /// Anything else: other statuses and transport errors.
    errors: usize,
    throughput_rps: f64,
    /// Answers a second over the phase's steady part (see [`steady_rps`]).
    steady_rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    server_queue_p50_ms: f64,
    server_compute_p50_ms: f64,
    /// Median over requests of (HTTP latency − the server's engine-call time for that request).
    overhead_p50_ms: f64,
    /// Mean series per engine call during the phase (`totoc_batch_series`).
    batch_occupancy: f64,
    engine_calls: f64,
    rss_mb_after: f64,
}

pub fn run(a: BenchServeArgs) -> anyhow::Result<ExitCode> {
    if a.clients.is_empty() || a.clients.iter().any(|&c| c == 0 || c > 1024) {
        bail!("--clients must list client counts in 1..=1024");
    }
    if !(a.duration_s > 0.0 && a.duration_s <= 120.0) {
        bail!("--duration-s must be in (0, 120]");
    }
    if a.overload_clients > 1024 {
        bail!("--overload-clients must be at most 1024");
    }
    // 1. The engine alone.
    let (engine_ms, body) = engine_alone(&a)?;
    println!(
        "engine alone: {:.2} ms median of {} calls {} ms apart ({} points, H={}, {} samples)",
        engine_ms, a.engine_runs, a.engine_gap_ms, a.context, a.horizon, a.samples
    );

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let client: HttpClient = Client::builder(TokioExecutor::new()).pool_max_idle_per_host(1100).build_http();

    // 2.–3. Phases below capacity.
    let mut server = Server::start(&a, &[])?;
    let rss_before = server.rss_mb();
    let mut phases = Vec::new();
    for &n in &a.clients {
        let p = rt.block_on(phase(&client, &server, &body, n, &a, format!("{n} client(s)")))?;
        println!(
            "  {:>4} clients: {:>8.1} req/s ({:.2} steady), p50 {:.2} ms, p99 {:.2} ms, occupancy {:.2}, {} ok / {} requests",
            n, p.throughput_rps, p.steady_rps, p.p50_ms, p.p99_ms, p.batch_occupancy, p.ok, p.requests
        );
        phases.push(p);
    }
    let rss_after = server.rss_mb();
    let exit = server.stop()?;

    // 4. Overload.
    let mut overload = None;
    if a.overload_clients > 0 {
        let mut s = Server::start(&a, &["--queue-capacity", "8", "--max-in-flight", "16"])?;
        let before = s.rss_mb();
        let p = rt.block_on(phase(&client, &s, &body, a.overload_clients, &a, "overload".into()))?;
        let after = s.rss_mb();
        let exit = s.stop()?;
        println!(
            "  overload {:>4} clients: {} ok, {} × 429, {} × 503, {} other errors",
            p.clients, p.ok, p.rejected_429, p.rejected_503, p.errors
        );
        overload = Some((p, before, after, exit));
    }

    // 5. Report.
    let one = phases.iter().find(|p| p.clients == 1);
    // (the first 1-client phase gives the overhead)
    let overhead_ms = one.map(|p| p.p50_ms - engine_ms);
    println!();
    println!(
        "| clients | req/s | steady req/s | p50 ms | p99 ms | server queue p50 ms | engine call p50 ms | HTTP − engine call p50 ms | series per engine call | 200 | 429 | 503 | errors | server RSS MB after |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let all: Vec<&Phase> = phases.iter().chain(overload.as_ref().map(|o| &o.0)).collect();
    for p in &all {
        println!(
            "| {}{} | {:.1} | {:.2} | {:.2} | {:.2} | {:.3} | {:.2} | {:.3} | {:.2} | {} | {} | {} | {} | {:.0} |",
            p.clients,
            if p.name == "overload" { " (overload, queue 8, in-flight 16)" } else { "" },
            p.throughput_rps,
            p.steady_rps,
            p.p50_ms,
            p.p99_ms,
            p.server_queue_p50_ms,
            p.server_compute_p50_ms,
            p.overhead_p50_ms,
            p.batch_occupancy,
            p.ok,
            p.rejected_429,
            p.rejected_503,
            p.errors,
            p.rss_mb_after
        );
    }
    println!();
    println!("server RSS: {rss_before:.0} MB after warm-up, {rss_after:.0} MB after the phases");
    if let Some((_, b, af, _)) = &overload {
        println!("overload server RSS: {b:.0} MB before, {af:.0} MB after");
    }
    if let (Some(o), Some(p)) = (overhead_ms, one) {
        println!(
            "server overhead (1 client, queue delay {} ms): HTTP p50 {:.3} ms − engine alone p50 {:.3} ms = {:.3} ms; \
             per request, HTTP latency − that request's engine call: median {:.3} ms",
            a.queue_delay_ms, p.p50_ms, engine_ms, o, p.overhead_p50_ms
        );
    }
    // Repeated client counts (`--clients 1,8,1,8`) interleave the phases, so a machine whose speed drifts
    // affects both sides of the ratio alike; each side is the mean over its phases.
    let mean_rps = |n: usize, rate: fn(&Phase) -> f64| {
        let v: Vec<f64> = phases.iter().filter(|p| p.clients == n).map(rate).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let ratio_of = |rate: fn(&Phase) -> f64| match (mean_rps(1, rate), mean_rps(8, rate)) {
        (Some(one), Some(eight)) => Some(eight / one),
        _ => None,
    };
    let (ratio, whole) = (ratio_of(|p| p.steady_rps), ratio_of(|p| p.throughput_rps));
    if let (Some(r), Some(w)) = (ratio, whole) {
        println!(
            "throughput 8 clients / 1 client: {r:.2}× over the phases' steady parts ({w:.2}× over whole phases; \
             mean req/s over the phases of each)"
        );
    }

    let mut failed = Vec::new();
    for p in &phases {
        if p.ok != p.requests {
            failed.push(format!(
                "{} clients: {} of {} requests failed below capacity",
                p.clients,
                p.requests - p.ok,
                p.requests
            ));
        }
    }
    if !exit.success() {
        failed.push(format!("the server exited with {exit} after SIGTERM"));
    }
    if let Some((p, _, _, e)) = &overload {
        if p.errors > 0 {
            failed.push(format!("overload: {} responses were neither 200, 429 nor 503", p.errors));
        }
        if !e.success() {
            failed.push(format!("the overload server exited with {e} after SIGTERM"));
        }
    }
    if let Some(path) = &a.json {
        let doc = json!({
            "engine": a.engine, "context": a.context, "horizon": a.horizon, "samples": a.samples,
            "queue_delay_ms": a.queue_delay_ms, "engine_alone_ms": engine_ms, "phases": phases,
            "overload": overload.as_ref().map(|o| &o.0), "rss_mb_before": rss_before, "rss_mb_after": rss_after,
            "overhead_ms": overhead_ms, "throughput_ratio_8_over_1": ratio,
            "throughput_ratio_8_over_1_whole_phases": whole, "failures": failed,
        });
        exporter::fsutil::write_atomic(path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
    }
    if failed.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        for f in &failed {
            eprintln!("FAIL: {f}");
        }
        Ok(ExitCode::from(1))
    }
}

/// The benchmark request's body for the engine's family ([`request_body`]) and the median wall time of
/// `Engine::forecast` on it, in ms (after the warm-up), calls `--engine-gap-ms` apart. The engine gets the request
/// the server decodes from the body (the same reader and limits), so both time the same work.
fn engine_alone(a: &BenchServeArgs) -> anyhow::Result<(f64, Bytes)> {
    let memory_budget = a.memory_budget.as_deref().map(engines::memory::parse_size).transpose()?;
    let opts = LoadOptions { ort_lib: a.ort.ort_lib.clone(), threads: a.threads, memory_budget };
    let engine =
        Engine::load(&a.engine, &opts).with_context(|| format!("loading engine {}", a.engine.display()))?;
    engine.warm_up()?;
    let spec =
        BodySpec { context: a.context, horizon: a.horizon, samples: a.samples, frequency: a.frequency };
    let body = request_body(engine.info().model.capabilities(), &spec)?;
    let mut admitted = decode(&engine, &body)?;
    engine.admit(&mut admitted, "benchmark request")?;
    let mut times = Vec::with_capacity(a.engine_runs.max(1));
    let gap = Duration::from_secs_f64(a.engine_gap_ms.clamp(0.0, 1000.0) / 1e3);
    for _ in 0..a.engine_runs.max(1) {
        std::thread::sleep(gap);
        let t = Instant::now();
        let out = engine.forecast(vec![admitted.clone()]);
        times.push(t.elapsed().as_secs_f64() * 1e3);
        out.into_iter().next().context("one result")??;
    }
    Ok((percentile(&mut times, 0.5), body))
}

fn percentile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// A `totoc serve` child process on a loopback port.
struct Server {
    child: Child,
    addr: String,
    _log: tempfile::NamedTempFile,
}

impl Server {
    fn start(a: &BenchServeArgs, extra: &[&str]) -> anyhow::Result<Server> {
        let log = tempfile::NamedTempFile::new()?;
        let exe = std::env::current_exe()?;
        let mut cmd = Command::new(exe);
        cmd.args(["serve", "--engine"]).arg(&a.engine);
        cmd.args(["--addr", "127.0.0.1:0", "--grpc-addr", "off"]);
        cmd.args([
            "--queue-delay-ms",
            &a.queue_delay_ms.to_string(),
            "--max-batch",
            &a.max_batch.to_string(),
        ]);
        engine_options(&mut cmd, a.threads, a.memory_budget.as_deref(), a.ort.ort_lib.as_deref());
        cmd.args(extra).env("RUST_LOG", "warn").stdout(Stdio::piped()).stderr(log.reopen()?);
        let mut child = cmd.spawn().context("starting totoc serve")?;
        let stdout = child.stdout.take().context("server stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let Some(addr) = line.trim().strip_prefix("totoc serve: http ") else {
            let _ = child.kill();
            let log_text = std::fs::read_to_string(log.path()).unwrap_or_default();
            bail!("totoc serve did not start: {line}\n{log_text}");
        };
        let server = Server { child, addr: addr.to_string(), _log: log };
        server.wait_ready()?;
        Ok(server)
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn wait_ready(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(300);
        while Instant::now() < deadline {
            if let Ok(r) = ureq_like_get(&self.url("/v2/health/ready")) {
                if r.0 == 200 {
                    return Ok(());
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bail!("the server did not get ready within 300 s")
    }

    fn rss_mb(&self) -> f64 {
        rss_mb(self.child.id())
    }

    /// SIGTERM, then wait for the drain (kill after 60 s).
    fn stop(&mut self) -> anyhow::Result<std::process::ExitStatus> {
        Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status()?;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait()? {
                return Ok(s);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                return Ok(self.child.wait()?);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A blocking GET over a plain TCP socket (startup polling only): (status, body).
fn ureq_like_get(url: &str) -> anyhow::Result<(u16, String)> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").context("http URL")?;
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_string()), |(h, p)| (h, format!("/{p}")));
    let mut s = std::net::TcpStream::connect(host)?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let status = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).context("status line")?;
    let body = text.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string());
    Ok((status, body))
}

/// Resident set size of a process, MB (VmRSS).
fn rss_mb(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb * 1024.0 / 1e6)
}

/// Sum of a metric's samples (every label set) in a `/metrics` text.
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn get_text(client: &HttpClient, url: &str) -> anyhow::Result<String> {
    let req = hyper::Request::get(url).body(Full::new(Bytes::new()))?;
    let resp = client.request(req).await?;
    let body = resp.into_body().collect().await?.to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// The `dur` of one `Server-Timing` metric.
fn timing(header: Option<&hyper::header::HeaderValue>, metric: &str) -> Option<f64> {
    let h = header?.to_str().ok()?;
    h.split(',')
        .map(str::trim)
        .find(|m| m.starts_with(metric))?
        .split(';')
        .find_map(|p| p.trim().strip_prefix("dur="))?
        .parse()
        .ok()
}

/// Answers a second over a phase's steady part, from `answers` (each 200's arrival since the phase's start and
/// its engine call's time): from its first answer to its last, counting those after the first engine call's
/// (the answers with the first one's `Server-Timing: compute`, the same call's). A closed-loop burst's first call
/// holds only the request that reached the idle engine first (queue delay 0; the other clients' requests wait
/// through it): a start-up transient of the phase, one lone call in a phase of a few calls, not the rate the
/// server keeps. NaN with fewer than two calls.
fn steady_rps(answers: &[(Duration, Option<f64>)]) -> f64 {
    let Some(&(first, call)) = answers.iter().min_by_key(|a| a.0) else {
        return f64::NAN;
    };
    let later: Vec<Duration> =
        answers.iter().filter(|a| call.is_none() || a.1 != call).map(|a| a.0).collect();
    match later.iter().max() {
        Some(&last) if last > first => later.len() as f64 / (last - first).as_secs_f64(),
        _ => f64::NAN,
    }
}

/// `n` closed-loop clients for the phase's time or request budget.
async fn phase(
    client: &HttpClient,
    server: &Server,
    body: &Bytes,
    n: usize,
    a: &BenchServeArgs,
    name: String,
) -> anyhow::Result<Phase> {
    let metrics_url = server.url("/metrics");
    let before = get_text(client, &metrics_url).await?;
    let samples = Arc::new(Mutex::new(Vec::<Sample>::with_capacity(a.max_requests.min(1 << 20))));
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let start = Instant::now();
    let stop = start + Duration::from_secs_f64(a.duration_s);
    let mut tasks = Vec::with_capacity(n);
    for _ in 0..n {
        let (client, body, samples, sent) = (client.clone(), body.clone(), samples.clone(), sent.clone());
        let url = server.url("/v1/forecast");
        let max = a.max_requests;
        tasks.push(tokio::spawn(async move {
            while Instant::now() < stop && sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < max {
                let t = Instant::now();
                let req = hyper::Request::post(url.as_str())
                    .header("content-type", "application/json")
                    .body(Full::new(body.clone()))
                    .expect("request");
                let sample = match client.request(req).await {
                    Ok(resp) => {
                        let status = resp.status().as_u16();
                        let st = resp.headers().get("server-timing").cloned();
                        let ok = resp.into_body().collect().await.is_ok();
                        Sample {
                            status: if ok { status } else { 0 },
                            latency: t.elapsed(),
                            done: start.elapsed(),
                            compute_ms: timing(st.as_ref(), "compute"),
                            queue_ms: timing(st.as_ref(), "queue"),
                        }
                    }
                    Err(_) => Sample {
                        status: 0,
                        latency: t.elapsed(),
                        done: start.elapsed(),
                        compute_ms: None,
                        queue_ms: None,
                    },
                };
                let backoff = matches!(sample.status, 429 | 503);
                samples.lock().expect("samples").push(sample);
                if backoff {
                    // A real client honours Retry-After; a benchmark client retries soon to keep the pressure on.
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    let seconds = start.elapsed().as_secs_f64();
    let after = get_text(client, &metrics_url).await?;
    let samples = std::mem::take(&mut *samples.lock().expect("samples"));
    let count = |f: &dyn Fn(u16) -> bool| samples.iter().filter(|s| f(s.status)).count();
    let ok = count(&|s| s == 200);
    let mut lat: Vec<f64> =
        samples.iter().filter(|s| s.status == 200).map(|s| s.latency.as_secs_f64() * 1e3).collect();
    let mut compute: Vec<f64> = samples.iter().filter_map(|s| s.compute_ms).collect();
    let mut queue: Vec<f64> = samples.iter().filter_map(|s| s.queue_ms).collect();
    let mut overhead: Vec<f64> = samples
        .iter()
        .filter(|s| s.status == 200)
        .filter_map(|s| Some(s.latency.as_secs_f64() * 1e3 - s.compute_ms?))
        .collect();
    let calls =
        metric_sum(&after, "totoc_batch_requests_count") - metric_sum(&before, "totoc_batch_requests_count");
    let series = metric_sum(&after, "totoc_batch_series_sum") - metric_sum(&before, "totoc_batch_series_sum");
    Ok(Phase {
        name,
        clients: n,
        seconds,
        requests: samples.len(),
        ok,
        rejected_429: count(&|s| s == 429),
        rejected_503: count(&|s| s == 503),
        errors: count(&|s| !matches!(s, 200 | 429 | 503)),
        throughput_rps: ok as f64 / seconds,
        steady_rps: steady_rps(
            &samples.iter().filter(|s| s.status == 200).map(|s| (s.done, s.compute_ms)).collect::<Vec<_>>(),
        ),
        p50_ms: percentile(&mut lat, 0.5),
        p99_ms: percentile(&mut lat, 0.99),
        server_queue_p50_ms: percentile(&mut queue, 0.5),
        server_compute_p50_ms: percentile(&mut compute, 0.5),
        overhead_p50_ms: percentile(&mut overhead, 0.5),
        batch_occupancy: if calls > 0.0 { series / calls } else { f64::NAN },
        engine_calls: calls,
        rss_mb_after: server.rss_mb(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_timing_and_metric_sums_parse() {
        let h = hyper::header::HeaderValue::from_static(
            "queue;dur=0.012, compute;dur=4.500;desc=\"engine call, 3 series\"",
        );
        assert_eq!(timing(Some(&h), "queue"), Some(0.012));
        assert_eq!(timing(Some(&h), "compute"), Some(4.5));
        assert_eq!(timing(None, "queue"), None);
        let text = "totoc_batch_series_sum{bucket=\"a\"} 3.0\ntotoc_batch_series_sum{bucket=\"b\"} 2\ntotoc_batch_series_count{bucket=\"a\"} 1\n";
        assert_eq!(metric_sum(text, "totoc_batch_series_sum"), 5.0);
        assert_eq!(metric_sum(text, "totoc_batch_series"), 0.0);
        let mut v = vec![3.0, 1.0, 2.0];
        assert_eq!(percentile(&mut v, 0.5), 2.0);
        assert!(percentile(&mut [], 0.5).is_nan());
    }

    #[test]
    fn the_steady_rate_leaves_out_the_first_engine_call() {
        let at = |ms: u64, call: f64| (Duration::from_millis(ms), Some(call));
        // 8 closed-loop clients: a lone first call of 1 s, then calls of 8 every 4 s
        let mut eight = vec![at(1000, 1000.0)];
        for k in 1..=5u64 {
            eight.extend((0..8).map(|i| at(1000 + 4000 * k + i, 4000.0 + k as f64)));
        }
        // 40 answers after the first call, over 20.007 s; the whole phase's 41 / 21.007 s would be 1.95
        let r = steady_rps(&eight);
        assert!((r - 40.0 / 20.007).abs() < 1e-9, "{r}");
        // a first call of 8 (its batch-mates share its engine time): none of them counts
        let mut full = (0..8).map(|i| at(4000 + i, 4000.0)).collect::<Vec<_>>();
        full.extend((0..8).map(|i| at(8000 + i, 4001.0)));
        assert!((steady_rps(&full) - 8.0 / 4.007).abs() < 1e-9);
        // one client: every answer after the first, over the time since it
        let one: Vec<_> = (1..=10u64).map(|k| at(1000 * k, 1000.0 + k as f64)).collect();
        assert!((steady_rps(&one) - 1.0).abs() < 1e-9);
        // a single call has no steady part
        assert!(steady_rps(&[at(5, 5.0)]).is_nan() && steady_rps(&[]).is_nan());
    }

    #[test]
    fn rss_of_this_process_is_read() {
        assert!(rss_mb(std::process::id()) > 0.0);
    }
}
