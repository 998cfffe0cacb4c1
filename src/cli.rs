//! Command-line flags (clap derive). Validation that needs files happens in `cmd/`.
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "totoc", version, about = "Compile Toto into static, verified ONNX inference artifacts")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// How the decode graph writes the KV cache.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CacheUpdateArg {
    /// ONNX TensorScatter (opset 24): in-place in ONNX Runtime, TensorRT's KV-cache update layer.
    TensorScatter,
    /// ONNX ScatterND: portable to older runtimes.
    ScatterNd,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Export a Toto HF checkpoint to a bundle of static-shape ONNX graphs (one prefill + one decode per profile).
    Export(ExportArgs),
    /// Build an engine bundle (ONNX Runtime CPU, CUDA or TensorRT) from an export bundle.
    BuildEngine(BuildEngineArgs),
    /// Forecast with an engine: JSON, JSON Lines or CSV in; JSON or JSON Lines out.
    Forecast(ForecastArgs),
    /// Check an engine against golden toto-ts outputs (its own golden set, or --fixtures DIR).
    Verify(VerifyArgs),
    /// Benchmark an engine on the reference workloads, side by side with toto-ts if given its checkpoint
    /// (`totoc bench serve`: load-test `totoc serve`).
    Bench(BenchArgs),
    /// Serve an engine over HTTP and gRPC: the Open Inference Protocol (KServe v2) and POST /v1/forecast.
    Serve(ServeArgs),
}

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    /// Engine bundle directory (from `totoc build-engine`).
    #[arg(long)]
    pub engine: PathBuf,
    /// HTTP address (port 0: any free port; the bound address is printed on stdout).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: std::net::SocketAddr,
    /// gRPC address (Open Inference Protocol over gRPC), or `off`.
    #[arg(long, default_value = "127.0.0.1:8081")]
    pub grpc_addr: String,
    /// The model name clients address (`/v2/models/NAME/infer`).
    #[arg(long, default_value = "toto")]
    pub model_name: String,
    /// How long the first waiting request may wait for others to share its engine call, in ms.
    #[arg(long, default_value_t = 2.0)]
    pub queue_delay_ms: f64,
    /// Series packed into one engine call at most (a single larger request still runs, alone).
    #[arg(long, default_value_t = 64)]
    pub max_batch: usize,
    /// Series that may wait for the engine; more are refused with 429 and Retry-After.
    #[arg(long, default_value_t = 256)]
    pub queue_capacity: usize,
    /// Forecast requests received or served at once; more are refused with 503 and Retry-After.
    #[arg(long, default_value_t = 128)]
    pub max_in_flight: usize,
    /// Largest request body (or gRPC message) in bytes; larger ones get 413.
    #[arg(long, default_value_t = 16 << 20)]
    pub max_body_bytes: usize,
    /// The longest a request may take, in ms (a client's `timeout` can only shorten it).
    #[arg(long, default_value_t = 30_000)]
    pub request_timeout_ms: u64,
    /// On SIGTERM, how long to wait for requests in flight before exiting anyway, in seconds.
    #[arg(long, default_value_t = 30)]
    pub shutdown_timeout_s: u64,
    /// File holding a bearer token every request but the health probes must send (`Authorization: Bearer`).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// A higher-precision engine (e.g. fp32 CPU) to re-run a sample of live requests on.
    #[arg(long, requires = "shadow_rate")]
    pub shadow_engine: Option<PathBuf>,
    /// Fraction of live requests re-run on --shadow-engine (0..=1), when the live engine is idle.
    #[arg(long, requires = "shadow_engine")]
    pub shadow_rate: Option<f64>,
    /// CPU intra-op threads (default: the engine's recorded count, else physical cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Log lines as JSON objects (default: text). `RUST_LOG` sets the level (default info).
    #[arg(long)]
    pub log_json: bool,
    #[command(flatten)]
    pub ort: OrtArgs,
}

/// Where ONNX Runtime comes from (shared by every command that runs graphs).
#[derive(Debug, clap::Args)]
pub struct OrtArgs {
    /// Path of libonnxruntime.so (default: $TOTOC_ORT_LIB, $ORT_DYLIB_PATH, next to totoc, ~/.cache/totoc).
    #[arg(long)]
    pub ort_lib: Option<PathBuf>,
}

/// Engine targets.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TargetArg {
    /// ONNX Runtime CPU (the embedded default).
    Cpu,
    /// ONNX Runtime CUDA execution provider (CUDA graphs with --cuda-graph).
    Cuda,
    /// ONNX Runtime TensorRT execution provider (EPContext engine files).
    Tensorrt,
}

#[derive(Debug, clap::Args)]
pub struct BuildEngineArgs {
    /// Export bundle directory (from `totoc export`).
    #[arg(long)]
    pub artifacts: PathBuf,
    /// Output engine directory (written atomically).
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, value_enum, default_value = "cpu")]
    pub target: TargetArg,
    /// GPU device ordinal (cuda, tensorrt).
    #[arg(long, default_value_t = 0)]
    pub device: i32,
    /// Capture each graph as a CUDA graph (cuda, tensorrt).
    #[arg(long)]
    pub cuda_graph: bool,
    /// CPU threads recorded in the engine: the default size of the process's thread pool when it is loaded
    /// (default: physical cores; `forecast --threads` overrides).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Build only these profiles (repeatable; default: all).
    #[arg(long = "profile")]
    pub profiles: Vec<String>,
    /// Replace the output directory if it exists.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub ort: OrtArgs,
}

#[derive(Debug, clap::Args)]
pub struct ForecastArgs {
    /// Engine bundle directory (from `totoc build-engine`).
    #[arg(long)]
    pub engine: PathBuf,
    /// Requests: .json (one request), .jsonl (one per line) or .csv (one column per variate).
    #[arg(long)]
    pub input: PathBuf,
    /// Where to write the responses (.json for one, .jsonl for several); default: stdout.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Forecast points (overrides the requests'; required for CSV).
    #[arg(long)]
    pub horizon: Option<usize>,
    /// Sample paths (0 = mean forecast).
    #[arg(long)]
    pub samples: Option<usize>,
    /// Quantile levels from the samples, e.g. 0.1,0.5,0.9.
    #[arg(long, value_delimiter = ',')]
    pub quantiles: Option<Vec<f64>>,
    /// Seed of the sample paths.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Leave out the sample paths from the output (keep mean and quantiles).
    #[arg(long)]
    pub no_samples_output: bool,
    /// CPU intra-op threads (default: physical cores).
    #[arg(long)]
    pub threads: Option<usize>,
    #[command(flatten)]
    pub ort: OrtArgs,
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Engine bundle directory.
    #[arg(long)]
    pub engine: PathBuf,
    /// Directory of golden case files (*.json, searched recursively); default: the engine's own golden set.
    #[arg(long)]
    pub fixtures: Option<PathBuf>,
    #[command(flatten)]
    pub ort: OrtArgs,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    /// Engine bundle directory (CPU engine of the base model for the figures).
    #[arg(long)]
    pub engine: Option<PathBuf>,
    /// Runs per case (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Context points of the benchmark series.
    #[arg(long, default_value_t = 512)]
    pub context: usize,
    /// The same checkpoint in HF layout: also time toto-ts eager (tests/reference/bench_reference.py) in this run.
    #[arg(long)]
    pub reference_checkpoint: Option<PathBuf>,
    /// Python of the toto-ts venv (default: ~/.cache/totoc/reference-venv/bin/python).
    #[arg(long)]
    pub reference_python: Option<PathBuf>,
    /// CPU intra-op threads (default: physical cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Write the results as JSON too.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub ort: OrtArgs,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Load-test `totoc serve` on loopback: N concurrent clients for T seconds per phase; throughput, latency,
    /// batch occupancy, errors, server RSS, and the server's overhead over the engine's own compute time.
    Serve(BenchServeArgs),
}

#[derive(Debug, clap::Args)]
pub struct BenchServeArgs {
    /// Engine bundle directory to serve.
    #[arg(long)]
    pub engine: PathBuf,
    /// Concurrent clients per phase (below capacity: every request must succeed).
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    pub clients: Vec<usize>,
    /// Seconds per phase (at most 120).
    #[arg(long, default_value_t = 10.0)]
    pub duration_s: f64,
    /// Requests per phase at most (the phase also stops at --duration-s).
    #[arg(long, default_value_t = 20_000)]
    pub max_requests: usize,
    /// Context points of each request's series.
    #[arg(long, default_value_t = 512)]
    pub context: usize,
    /// Forecast horizon of each request.
    #[arg(long, default_value_t = 336)]
    pub horizon: usize,
    /// Sample paths per request (0: mean forecast).
    #[arg(long, default_value_t = 0)]
    pub samples: usize,
    /// The server's --queue-delay-ms (0 for the overhead figure: nothing waits on purpose).
    #[arg(long, default_value_t = 0.0)]
    pub queue_delay_ms: f64,
    /// The server's --max-batch.
    #[arg(long, default_value_t = 64)]
    pub max_batch: usize,
    /// Clients of a final overload phase against a server with a small queue (0: skip it); it must see only
    /// 200, 429 and 503.
    #[arg(long, default_value_t = 64)]
    pub overload_clients: usize,
    /// Engine-only timings (in this process, before the server starts) of the same request, for the overhead.
    #[arg(long, default_value_t = 30)]
    pub engine_runs: usize,
    /// Idle time between the engine-only calls, in ms: one client's requests reach the engine with gaps (the
    /// HTTP round trip), and an engine called after a gap runs a little slower than back to back.
    #[arg(long, default_value_t = 1.0)]
    pub engine_gap_ms: f64,
    /// CPU intra-op threads (server and engine timing).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Write the results as JSON too.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub ort: OrtArgs,
}

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Checkpoint directory with config.json and model.safetensors (HF layout).
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Profiles YAML (e.g. configs/toto-base.yaml).
    #[arg(long)]
    pub config: PathBuf,
    /// Output bundle directory (written atomically).
    #[arg(long)]
    pub out: PathBuf,
    /// Export only these profiles (repeatable; default: all in the config).
    #[arg(long = "profile")]
    pub profiles: Vec<String>,
    /// KV cache update op.
    #[arg(long, value_enum, default_value = "tensor-scatter")]
    pub cache_update: CacheUpdateArg,
    /// Replace the output directory if it exists.
    #[arg(long)]
    pub force: bool,
    /// Golden toto-ts cases of this checkpoint to carry in the bundle (for `totoc verify` anywhere).
    #[arg(long)]
    pub golden: Option<PathBuf>,
}
