//! `totoc serve`: a forecasting server over one engine that speaks the Open Inference Protocol (KServe v2) over
//! REST and gRPC, plus the CLI's own format at `POST /v1/forecast`, and proves its own equivalence (a readiness
//! gate of golden cases, and optionally a shadow engine).
//!
//! One module per concern:
//! * [`routes`] (REST, axum) and [`grpc`] (gRPC, tonic): decode, call [`service::Service`], map errors
//!   ([`error`]); [`kserve`] is the v2 REST codec (JSON tensors and the binary extension), [`model`] the
//!   forecaster as a v2 model (inputs → forecast requests → outputs);
//! * [`batcher`]: the bounded queue and the engine thread that packs concurrent requests into one
//!   `Engine::forecast` call; [`cost`]: a request's estimated engine time against its deadline;
//! * [`readiness`]: warm-up and golden cases before ready; [`shadow`]: live vs high-precision engine drift;
//!   [`metrics`]: `GET /metrics`.
//!
//! * [`hold`]: what one request holds of the server (bytes budget, in-flight slot) for as long as its work
//!   lasts; [`codec`] and [`pbscan`]: gRPC messages counted before prost builds them.
//!
//! [`run`] loads the engine (a bad bundle fails the command before anything listens), binds both ports and
//! prints them (`totoc serve: http 127.0.0.1:PORT`, `... grpc ...` on stdout, so `--addr 127.0.0.1:0` works),
//! runs the readiness gate on its own thread while already answering health probes (a failed first gate is
//! retried with backoff, and after `--ready-attempts` failures the process exits non-zero with the reason), and
//! on SIGTERM or SIGINT stops reporting ready, closes its listeners (new connections are refused), finishes
//! every request in flight (and everything queued), then exits, within `--shutdown-timeout-s` whatever clients
//! still hold open; a second signal exits at once (status 128 + the signal when requests were still in
//! progress). Both ports run on [`conn`] (per-peer connection cap,
//! header-read and idle timeouts, minimum read rate, HTTP/2 stream limit).

pub mod batcher;
pub mod clock_inputs;
pub mod codec;
pub mod conn;
pub mod cost;
pub mod error;
pub mod grpc;
pub mod hold;
pub mod jsonscan;
pub mod kserve;
pub mod metrics;
pub mod model;
pub mod pbscan;
#[cfg(test)]
mod props;
pub mod readiness;
pub mod routes;
pub mod service;
pub mod shadow;
pub mod timeseries;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use engines::engine::{Engine, LoadOptions};

use batcher::{Batcher, BatcherConfig};
use metrics::Metrics;
use model::ModelSpec;
use readiness::Readiness;
use service::{Limits, Service};
use shadow::Shadow;

/// How to run the server (validated `totoc serve` flags).
#[derive(Debug, Clone)]
pub struct Options {
    pub engine: PathBuf,
    pub load: LoadOptions,
    pub addr: SocketAddr,
    /// `None`: no gRPC port.
    pub grpc_addr: Option<SocketAddr>,
    pub model_name: String,
    pub batcher: BatcherConfig,
    pub limits: Limits,
    /// Per-connection limits and timeouts of both ports.
    pub conn: conn::ConnLimits,
    pub token_file: Option<PathBuf>,
    pub shadow_engine: Option<PathBuf>,
    pub shadow_rate: f64,
    /// The shadow engine's own memory budget (its memory counts against the container beside the live one's).
    pub shadow_memory_budget: Option<u64>,
    /// When engine failures make the server unready.
    pub health: readiness::HealthPolicy,
    /// Failed runs of the first readiness gate after which the process exits.
    pub ready_attempts: u32,
    pub shutdown_timeout: Duration,
    pub json_logs: bool,
}

/// Initialises logging: `RUST_LOG` filters (default `info`), text or JSON lines on stderr.
fn init_logging(json: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    // A second init (tests) keeps the first subscriber.
    let _ = if json { builder.json().flatten_event(true).try_init() } else { builder.try_init() };
    // Panics go through the log like everything else (one line, JSON with --log-json), not raw to stderr.
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current().name().unwrap_or("unnamed").to_string();
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        let at = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        tracing::error!(thread, at, "panic: {payload}");
    }));
}

fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading --token-file {}", path.display()))?;
    let token = text.trim().to_string();
    if token.is_empty() {
        bail!("--token-file {} is empty; put the bearer token in it", path.display());
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        bail!("--token-file {}: the token must be one word without spaces", path.display());
    }
    // HTTP header values and gRPC metadata are visible ASCII: any other token could never be sent.
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "--token-file {}: the token holds non-ASCII characters, which no client can send in an \
             Authorization header; use visible ASCII only (e.g. `openssl rand -hex 32`)",
            path.display()
        );
    }
    Ok(token)
}

/// Runs the server until SIGTERM/SIGINT (see the module docs).
pub fn run(opts: Options) -> anyhow::Result<()> {
    init_logging(opts.json_logs);
    let token = opts.token_file.as_deref().map(read_token).transpose()?;
    let engine = Arc::new(
        Engine::load(&opts.engine, &opts.load)
            .with_context(|| format!("loading engine {}", opts.engine.display()))?,
    );
    let info = engine.info().clone();
    tracing::info!(engine = %opts.engine.display(), label = %info.label, model = info.model.as_str(),
        max_context = info.limits.max_context, max_horizon = info.limits.max_horizon,
        max_variates = info.limits.max_variates, max_samples = info.limits.max_samples, "engine loaded");
    let shadow_engine = match &opts.shadow_engine {
        None => None,
        Some(dir) => {
            let load = LoadOptions { memory_budget: opts.shadow_memory_budget, ..opts.load.clone() };
            let e = Engine::load(dir, &load)
                .with_context(|| format!("loading shadow engine {}", dir.display()))?;
            if e.info().model != info.model {
                bail!(
                    "--shadow-engine {} holds {} but the live engine holds {}; shadow the same model",
                    dir.display(),
                    e.info().model.as_str(),
                    info.model.as_str()
                );
            }
            tracing::info!(engine = %dir.display(), label = %e.info().label, rate = opts.shadow_rate, "shadow engine loaded");
            Some(Arc::new(e))
        }
    };

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 8))
        .thread_name("totoc-io")
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(serve(opts, engine, shadow_engine, token));
    // Whatever is left after --shutdown-timeout-s (a stalled upload, a decode on the blocking pool) is dropped
    // rather than waited for.
    runtime.shutdown_background();
    result
}

async fn serve(
    opts: Options,
    engine: Arc<Engine>,
    shadow_engine: Option<Arc<Engine>>,
    token: Option<String>,
) -> anyhow::Result<()> {
    let metrics = Arc::new(Metrics::new());
    let readiness = Arc::new(Readiness::new(opts.health));
    let batcher = Arc::new(Batcher::start(engine.clone(), opts.batcher, metrics.clone()));
    batcher.report_to(readiness.clone());
    let shadow = shadow_engine.map(|e| Shadow::start(e, opts.shadow_rate, batcher.clone(), metrics.clone()));
    let spec = ModelSpec {
        name: opts.model_name.clone(),
        info: engine.info().clone(),
        rates: engine.rates().clone(),
    };
    let svc = Arc::new(Service::new(
        engine.clone(),
        spec,
        batcher.clone(),
        readiness.clone(),
        metrics.clone(),
        shadow,
        opts.limits,
        token.as_deref(),
    ));

    let http = tokio::net::TcpListener::bind(opts.addr)
        .await
        .with_context(|| format!("binding --addr {}", opts.addr))?;
    let http_addr = http.local_addr()?;
    let grpc = match opts.grpc_addr {
        None => None,
        Some(a) => {
            Some(tokio::net::TcpListener::bind(a).await.with_context(|| format!("binding --grpc-addr {a}"))?)
        }
    };
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "totoc serve: http {http_addr}")?;
        if let Some(g) = &grpc {
            writeln!(out, "totoc serve: grpc {}", g.local_addr()?)?;
        }
        out.flush()?;
    }
    tracing::info!(http = %http_addr, grpc = ?grpc.as_ref().and_then(|g| g.local_addr().ok()), model = %opts.model_name, "listening");
    let grpc_addr = grpc.as_ref().and_then(|g| g.local_addr().ok());
    for addr in std::iter::once(http_addr).chain(grpc_addr) {
        if !addr.ip().is_loopback() {
            tracing::warn!(
                "listening on {addr}, beyond this machine; {}",
                if token.is_some() {
                    "a bearer token is required"
                } else {
                    "no --token-file: anyone who reaches it can use it"
                }
            );
        }
    }

    // The readiness gate, then the health re-checks, run on their own thread while health probes are already
    // answered. A first gate that keeps failing ends the process (`failed`).
    let (failed_tx, failed_rx) = tokio::sync::oneshot::channel::<String>();
    {
        let (engine, readiness, metrics) = (engine.clone(), readiness.clone(), metrics.clone());
        let attempts = opts.ready_attempts;
        std::thread::Builder::new()
            .name("totoc-health".into())
            .spawn(move || {
                let give_up = move |why: String| {
                    let _ = failed_tx.send(why);
                };
                readiness::run_health(&engine, &readiness, &metrics, attempts, give_up)
            })
            .context("starting the readiness gate")?;
    }

    // SIGTERM / SIGINT: stop reporting ready at once, then let both servers drain; a second signal exits now.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    {
        let (readiness, metrics, svc) = (readiness.clone(), metrics.clone(), svc.clone());
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("shutting down: no new connections; finishing the requests in flight");
            readiness.drain(&metrics);
            let _ = stop_tx.send(true);
            let again = wait_for_signal().await;
            // Abandoning requests is a failure (128 + the signal, as a process killed by it); with none left the
            // drain was over anyway.
            if svc.busy() {
                tracing::warn!(
                    "a second signal during the drain: exiting now, abandoning the requests in progress"
                );
                std::process::exit(128 + again);
            }
            tracing::info!("a second signal during the drain, nothing in progress: exiting now");
            std::process::exit(0);
        });
    }
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let app = routes::Rest(routes::router(svc.clone(), timeseries::routes()));
    let http_task = tokio::spawn(conn::serve(http, app, opts.conn, false, metrics.clone(), stop_rx.clone()));
    let grpc_task = grpc.map(|listener| {
        let front = grpc::Front::new(svc.clone());
        tokio::spawn(conn::serve(listener, front, opts.conn, true, metrics.clone(), stop_rx.clone()))
    });

    // Wait for the signal (or a readiness gate that failed for good), then for both servers to finish their
    // requests, within --shutdown-timeout.
    let mut gave_up = None;
    tokio::select! {
        _ = stopped(stop_rx.clone()) => {}
        Ok(why) = failed_rx => {
            readiness.drain(&metrics);
            gave_up = Some(why);
        }
    }
    if let Some(why) = gave_up {
        bail!(
            "the readiness gate failed {} times (--ready-attempts); the last time: {why}",
            opts.ready_attempts
        );
    }
    let drain = async {
        let h = http_task.await;
        let g = match grpc_task {
            Some(t) => Some(t.await),
            None => None,
        };
        (h, g)
    };
    match tokio::time::timeout(opts.shutdown_timeout, drain).await {
        Ok((h, g)) => {
            h.context("HTTP server task")?;
            if let Some(g) = g {
                g.context("gRPC server task")?;
            }
        }
        Err(_) => {
            tracing::warn!(
                timeout_s = opts.shutdown_timeout.as_secs(),
                "requests still in flight after --shutdown-timeout-s; exiting anyway"
            );
        }
    }
    // Everything accepted has been answered; stop the engine and shadow threads, within a bounded wait (a
    // shadow run in progress is abandoned, never waited for past it).
    let svc_batcher = svc.batcher.clone();
    let stop = tokio::task::spawn_blocking(move || {
        let engine_done = svc_batcher.close_within(JOIN_TIMEOUT);
        let shadow_done = svc.shadow.as_ref().is_none_or(|s| s.close_within(JOIN_TIMEOUT));
        (engine_done, shadow_done)
    });
    match tokio::time::timeout(JOIN_TIMEOUT * 3, stop).await {
        Ok(Ok((true, true))) => {}
        _ => tracing::warn!("the engine or shadow thread did not stop in time; exiting anyway"),
    }
    tracing::info!("stopped");
    Ok(())
}

/// The longest the engine and shadow threads are waited for once every request was answered.
const JOIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Waits for SIGTERM or SIGINT; returns its number (15 or 2).
async fn wait_for_signal() -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install the SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install the SIGINT handler");
    tokio::select! {
        _ = term.recv() => 15,
        _ = int.recv() => 2,
    }
}
