//! Command-line flags (clap derive). Validation that needs files happens in `cmd/`.
//! long-file: every subcommand's flags and their help text in one place, the one definition clap reads.
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "totoc", version, about = "Compile Toto into static, verified ONNX inference artifacts")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// How an engine's buckets map to sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphsArg {
    /// One static graph and session per bucket.
    PerBucket,
    /// One shape-polymorphic graph and session per graph kind (opset-24 bundles).
    Shared,
}

/// Graph precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PrecisionArg {
    /// fp32 weights, activations and KV caches.
    Fp32,
    /// fp16 weights, activations and KV caches, with fp32 where precision needs it (strongly typed).
    Fp16,
    /// int8: the transformer's matmuls read 8-bit weights and run on 8-bit activation codes, per row (ONNX
    /// `MatMulInteger`) or in 16-value blocks (`MatMulNBits`) as `--int8-roles` says (CPU engines only);
    /// everything else, the KV caches included, stays fp32.
    Int8,
}

impl From<PrecisionArg> for exporter::signature::Precision {
    fn from(p: PrecisionArg) -> Self {
        match p {
            PrecisionArg::Fp32 => exporter::signature::Precision::Fp32,
            PrecisionArg::Fp16 => exporter::signature::Precision::Fp16,
            PrecisionArg::Int8 => exporter::signature::Precision::Int8,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Export a Toto HF checkpoint to a bundle of static-shape ONNX graphs (one prefill + one decode per profile).
    Export(ExportArgs),
    /// Build an engine bundle (ONNX Runtime CPU, CUDA or TensorRT) from an export bundle.
    BuildEngine(BuildEngineArgs),
    /// Forecast series from JSON, JSON Lines, CSV or Parquet; forecasts come back as JSON, CSV or Parquet.
    Forecast(ForecastArgs),
    /// Check an engine against golden toto-ts outputs (its own golden set, or --fixtures DIR).
    Verify(VerifyArgs),
    /// Draw saved forecasts over the history they continue (SVG or PNG): the input and the forecast file that
    /// `totoc forecast` read and wrote.
    Plot(PlotArgs),
    /// Time engines on reference workloads (one or eight series of --context points; mean forecasts and sample
    /// paths), interleaved, side by side with toto-ts when given the engines' checkpoint (`totoc bench serve`:
    /// load-test `totoc serve`).
    Bench(BenchArgs),
    /// Serve an engine over HTTP and gRPC: the Open Inference Protocol (KServe v2) and POST /v1/forecast.
    Serve(ServeArgs),
    /// Report which ONNX Runtime providers, CUDA/cuDNN/TensorRT libraries and GPUs this machine has, and which
    /// engine targets will work here.
    Doctor(DoctorArgs),
    /// Check (`verify`) or describe (`info`) an export or engine bundle.
    Bundle(BundleArgs),
    /// Rolling-origin backtest (Nixtla `cross_validation` windows): every window of every series through one or
    /// more engines as one packed workload, scored against the actual values with naive and seasonal-naive
    /// baselines, optionally beside the eager reference on the same windows.
    Backtest(BacktestArgs),
}

/// `totoc backtest --reference-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReferenceMode {
    Eval,
    Train,
}

#[derive(Debug, clap::Args)]
pub struct BundleArgs {
    #[command(subcommand)]
    pub command: BundleCommand,
}

#[derive(Debug, Subcommand)]
pub enum BundleCommand {
    /// Check a bundle's integrity: manifest.json against manifest.sha256, every listed file's size and sha256,
    /// no missing or unlisted files. Lists every problem by file name; exit status 1 if any.
    Verify {
        /// Export or engine bundle directory.
        dir: PathBuf,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print what a bundle holds: model config, profiles and buckets with the memory each needs, precision,
    /// target, file sizes and hashes; for an engine, with --measure-rates, each graph's speed (what `totoc
    /// serve` measures at warm-up and its cost estimates use).
    Info {
        /// Export or engine bundle directory.
        dir: PathBuf,
        /// Print it as JSON (format `totoc-bundle-info/1`, see docs/formats.md).
        #[arg(long)]
        json: bool,
        /// Engines: load the engine and time every graph as `totoc serve` does at warm-up (seconds per run and
        /// per row-step, the median of a few runs on placeholder inputs).
        #[arg(long)]
        measure_rates: bool,
        /// CPU intra-op threads for --measure-rates (default: the engine's recorded count, else physical cores).
        #[arg(long, requires = "measure_rates")]
        threads: Option<usize>,
        #[command(flatten)]
        ort: OrtArgs,
    },
}

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ort: OrtArgs,
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
    /// Memory the requests in progress may hold at once (e.g. 256MiB): their bodies as they arrive, what
    /// decoding them builds, and their answers, from the first byte until the last byte of the answer is written;
    /// a request that does not fit is refused with 503 / RESOURCE_EXHAUSTED and Retry-After.
    #[arg(long, default_value = "256MiB")]
    pub max_bytes_in_flight: String,
    /// ... of which one client address may hold at most this much (default: half of --max-bytes-in-flight;
    /// behind a proxy every client has its address, so give it the whole --max-bytes-in-flight there).
    #[arg(long)]
    pub max_bytes_per_peer: Option<String>,
    /// After its first 2 s, a request body must arrive at least this fast on average (bytes per second), else
    /// it is refused with 408 / DEADLINE_EXCEEDED; --body-read-timeout-ms bounds it in all.
    #[arg(long, default_value_t = 65_536)]
    pub min_upload_bytes_per_s: u64,
    /// After its first 2 s, an answer must be taken by its client at least this fast on average (bytes per
    /// second), else the connection is closed (see also --idle-timeout-ms).
    #[arg(long, default_value_t = 65_536)]
    pub min_read_bytes_per_s: u64,
    /// Largest encoded answer (HTTP body or gRPC message), estimated from the request's counts and refused with
    /// 413 / RESOURCE_EXHAUSTED before the engine runs (e.g. 64MiB).
    #[arg(long, default_value = "64MiB")]
    pub max_response_bytes: String,
    /// Series one request may hold (v2 `target` [N, V, T]: N; /v1/forecast: requests in the body).
    #[arg(long, default_value_t = 256)]
    pub max_series: usize,
    /// Variates one series may hold (the engine's own limit applies too).
    #[arg(long, default_value_t = 1024)]
    pub max_variates: usize,
    /// Quantile levels one request may ask for.
    #[arg(long, default_value_t = 99)]
    pub max_quantile_levels: usize,
    /// Values one response may hold: series × variates × horizon × (1 + quantile levels + samples).
    #[arg(long, default_value_t = 1 << 24)]
    pub max_response_values: u64,
    /// Estimated engine work one request may cost: series × variates × (context + horizon) × max(1, samples),
    /// the context counted up to what the engine keeps. Refused before it runs.
    #[arg(long, default_value_t = 1 << 32)]
    pub max_request_cost: u64,
    /// How long a client may take to send a request's headers (HTTP/1.1; also bounds the wait for the next
    /// request on a keep-alive connection), in ms.
    #[arg(long, default_value_t = 10_000)]
    pub header_read_timeout_ms: u64,
    /// How long a client may take to send a request body or gRPC message, in ms (408 / DEADLINE_EXCEEDED).
    #[arg(long, default_value_t = 30_000)]
    pub body_read_timeout_ms: u64,
    /// A connection with no request in progress and no answer being written that has started none for this long
    /// is closed (idle keep-alive and HTTP/2 connections; PINGs are not activity), and an answer that moves no
    /// byte for this long closes its connection (readers that stopped reading), in ms.
    #[arg(long, default_value_t = 60_000)]
    pub idle_timeout_ms: u64,
    /// Connections one client address may hold open on each port; more are closed at once.
    #[arg(long, default_value_t = 512)]
    pub max_connections_per_peer: usize,
    /// Concurrent HTTP/2 streams (gRPC calls) per connection.
    #[arg(long, default_value_t = 64)]
    pub max_concurrent_streams: u32,
    /// File holding a bearer token every request but the health probes must send (`Authorization: Bearer`).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// A higher-precision engine (e.g. fp32 CPU) to re-run a sample of live requests on (off unless given).
    #[arg(long, requires = "shadow_rate")]
    pub shadow_engine: Option<PathBuf>,
    /// Memory the shadow engine may hold, counted against the container beside --memory-budget (e.g. 1GiB).
    /// Default: 25% of the container, and the live engine's default budget drops to 55% so both stay within
    /// the usual 80%.
    #[arg(long, requires = "shadow_engine")]
    pub shadow_memory_budget: Option<String>,
    /// Engine-side failures in a row (panics, engine errors answered 500; never a client's 4xx) that make the
    /// server unready until a re-run of its golden cases passes (0: never).
    #[arg(long, default_value_t = 5)]
    pub unready_after_failures: u32,
    /// ... all within this many seconds.
    #[arg(long, default_value_t = 30)]
    pub failure_window_s: u64,
    /// Runs of the first readiness gate (warm-up and golden cases), 2 s apart and doubling, before the process
    /// exits non-zero with the reason.
    #[arg(long, default_value_t = 5)]
    pub ready_attempts: u32,
    /// Fraction of live requests re-run on --shadow-engine (0..=1), when the live engine is idle.
    #[arg(long, requires = "shadow_engine")]
    pub shadow_rate: Option<f64>,
    /// CPU intra-op threads (default: the engine's recorded count, else physical cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Memory the engine may hold (weights + loaded shape buckets), e.g. 2GiB: the server's resident memory
    /// stays near it, the buckets that fit stay warm and the others are loaded when a call needs them. Set it
    /// to the container's memory request. Default: 80% of this container's (or machine's) memory.
    #[arg(long)]
    pub memory_budget: Option<String>,
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
    /// Which of the bundle's precisions to build (default: fp32 if it holds fp32 graphs, else its only one). On
    /// the CPU, fp16 builds the fp16 emulation engine: it checks fp16 accuracy, it is not faster.
    #[arg(long, value_enum, conflicts_with = "fp16")]
    pub precision: Option<PrecisionArg>,
    /// Short for --precision fp16.
    #[arg(long)]
    pub fp16: bool,
    /// Sessions per bucket, or one shape-polymorphic session per graph kind serving all its buckets. Default:
    /// shared for tensorrt (one engine, and one GPU copy of the weights, per kind), per-bucket otherwise.
    #[arg(long, value_enum)]
    pub graphs: Option<GraphsArg>,
    /// CPU threads recorded in the engine: the default size of the process's thread pool when it is loaded
    /// (default: physical cores; `forecast --threads` overrides).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Build only these profiles (repeatable; default: all).
    #[arg(long = "profile")]
    pub profiles: Vec<String>,
    /// Memory the engine will have where it runs (weights + shape buckets), e.g. 8G; buckets that could never
    /// fit are left out with a note. Default: 80% of this container's (or machine's) memory.
    #[arg(long)]
    pub memory_budget: Option<String>,
    /// Replace the output directory if it exists.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub ort: OrtArgs,
}

/// Data formats of `forecast`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    /// One JSON request (in) or response (out).
    Json,
    /// One JSON request or response per line.
    Jsonl,
    /// A CSV table: long (id, timestamp, target columns) or wide (one column per variate).
    Csv,
    /// A Parquet table, shaped like the CSV ones.
    Parquet,
}

/// Layouts of forecast tables (`forecast --layout`; docs/formats.md, "Forecast tables").
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    /// Wide for a model whose inputs are named columns (one row per series and step, a point column per input
    /// column), long otherwise.
    Auto,
    /// One row per series, variate and step, one point column (`mean` / `median`).
    Long,
    /// One row per series and step, the point forecast under each target column's name.
    Wide,
}

/// Units of integer epoch timestamps.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TimestampUnitArg {
    S,
    Ms,
    Us,
    Ns,
}

/// `--calendar`: which slots of the week are grid points.
#[derive(Debug, Clone, Copy, Default, ValueEnum)]
pub enum CalendarArg {
    /// Inferred per series: the weekly slots it is observed in (trading days, an FX week, every hour), else
    /// continuous.
    #[default]
    Auto,
    /// Every step between the first and last timestamps.
    Continuous,
    /// Monday to Friday.
    Weekdays,
}

/// The session calendar of series with timestamps (`forecast`, `plot`).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CalendarArgs {
    /// Which slots of the week are grid points: auto (inferred per series: weekdays for daily trading data, the
    /// weekly session of hourly FX bars, ...), continuous (every step) or weekdays (Monday to Friday). Closed
    /// slots are neither missing points nor forecast steps.
    #[arg(long, value_enum, default_value = "auto")]
    pub calendar: CalendarArg,
    /// IANA time zone the weekly slots are read in, e.g. America/New_York (follows daylight saving time;
    /// default: each series' own UTC offset).
    #[arg(long)]
    pub timezone: Option<String>,
    /// File of closed dates, one YYYY-MM-DD per line (# comments): no forecast step falls on them and they are
    /// not missing points.
    #[arg(long)]
    pub holidays: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Long tables have one row per series and time step: an id column (unique_id, item_id, id, \
series_id), a timestamp column (ds, timestamp, date, time) and target columns (y, target, value; several target \
columns are the variates of one series). A table without an id column is one series with one column per variate. \
Forecasts come back in the same shape, with future timestamps. The formats: docs/formats.md."
)]
pub struct ForecastArgs {
    /// Engine directory (from `totoc build-engine`).
    #[arg(long)]
    pub engine: PathBuf,
    /// The series to forecast: .json (one request), .jsonl (one per line), .csv or .parquet (long or wide
    /// tables); `-` reads stdin (with --input-format).
    #[arg(long)]
    pub input: PathBuf,
    /// Format of --input (default: from its extension).
    #[arg(long, value_enum)]
    pub input_format: Option<FormatArg>,
    /// Where to write the forecasts: .json (one series), .jsonl, .csv or .parquet; `-` or absent: stdout.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Format of --output (default: from its extension; on stdout JSON for one series, JSON Lines for several).
    #[arg(long, value_enum)]
    pub output_format: Option<FormatArg>,
    /// Column of the series ids (default: unique_id, item_id, id or series_id if present).
    #[arg(long)]
    pub id_column: Option<String>,
    /// Column of the timestamps (default: ds, timestamp, date or time if present).
    #[arg(long)]
    pub timestamp_column: Option<String>,
    /// Target columns, e.g. sales,visits (default: y, target or value in a long table; every other column in
    /// a wide one).
    #[arg(long, value_delimiter = ',')]
    pub target_columns: Option<Vec<String>>,
    /// Unit of integer (epoch) timestamps.
    #[arg(long, value_enum, default_value = "s")]
    pub timestamp_unit: TimestampUnitArg,
    /// Spacing of every series, e.g. 1h, 15m, 1d, 1w, 1mo, 3mo, 1y (default: inferred per series).
    #[arg(long)]
    pub freq: Option<String>,
    #[command(flatten)]
    pub calendar: CalendarArgs,
    /// Forecast steps (replaces the requests' own; required for tables).
    #[arg(long)]
    pub horizon: Option<usize>,
    /// Sample paths per series (0 = the point forecast only).
    #[arg(long)]
    pub samples: Option<usize>,
    /// Quantile levels computed from the samples, e.g. 0.1,0.5,0.9.
    #[arg(long, value_delimiter = ',')]
    pub quantiles: Option<Vec<f64>>,
    /// Seed of the sample paths.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Fail on a series longer than the engine's context instead of keeping its most recent points.
    #[arg(long)]
    pub strict_context: bool,
    #[command(flatten)]
    pub model: ModelControlArgs,
    /// Also write every sample path (JSON `samples`; `sample_0`, `sample_1`, ... columns in tables).
    #[arg(long)]
    pub write_samples: bool,
    /// Layout of CSV / Parquet forecast tables (auto: wide for a model whose inputs are named columns, long
    /// otherwise).
    #[arg(long, value_enum, default_value = "auto")]
    pub layout: LayoutArg,
    /// CPU threads (default: the engine's setting, else physical cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Memory the engine may use (weights + shape buckets), e.g. 8G; larger calls run in several passes.
    /// Default: 80% of this container's (or machine's) memory.
    #[arg(long)]
    pub memory_budget: Option<String>,
    /// Also draw the forecasts: FILE.svg or FILE.png (the history's last part, the point forecast and bands
    /// between symmetric quantiles; one panel per series).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    #[command(flatten)]
    pub plot_options: PlotOptions,
    #[command(flatten)]
    pub ort: OrtArgs,
}

/// How forecast charts are drawn (`forecast --plot`, `plot`).
#[derive(Debug, Clone, clap::Args)]
pub struct PlotOptions {
    /// History points shown before the forecast (default: four horizons, at least 64).
    #[arg(long, requires = "plot")]
    pub plot_history: Option<usize>,
    /// Panels drawn at most (one per series, and per variate of multivariate series); the rest are left out
    /// with a note.
    #[arg(long, default_value_t = crate::plot::model::DEFAULT_PANELS, requires = "plot")]
    pub plot_panels: usize,
    /// Size of the image in pixels, WIDTHxHEIGHT (default: from the number of panels).
    #[arg(long, requires = "plot", value_name = "WxH")]
    pub plot_size: Option<String>,
    /// Title of the chart (default: the series id, or the number of series).
    #[arg(long, requires = "plot")]
    pub plot_title: Option<String>,
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: totoc forecast --engine E --input sales.csv --horizon 28 --samples 256 --output fc.csv; \
totoc plot --input sales.csv --forecast fc.csv --plot fc.png. Give the same column flags (--id-column, \
--timestamp-column, ...) as to forecast."
)]
pub struct PlotArgs {
    /// The series that were forecast: the --input of `totoc forecast` (.json, .jsonl, .csv, .parquet; `-` reads
    /// stdin with --input-format).
    #[arg(long)]
    pub input: PathBuf,
    /// Format of --input (default: from its extension).
    #[arg(long, value_enum)]
    pub input_format: Option<FormatArg>,
    /// The forecasts: the --output of `totoc forecast` (.json, .jsonl, .csv or .parquet).
    #[arg(long)]
    pub forecast: PathBuf,
    /// Format of --forecast (default: from its extension).
    #[arg(long, value_enum)]
    pub forecast_format: Option<FormatArg>,
    /// Where to draw: FILE.svg or FILE.png.
    #[arg(long)]
    pub plot: PathBuf,
    /// Column of the series ids (default: unique_id, item_id, id or series_id if present).
    #[arg(long)]
    pub id_column: Option<String>,
    /// Column of the timestamps (default: ds, timestamp, date or time if present).
    #[arg(long)]
    pub timestamp_column: Option<String>,
    /// Target columns, e.g. sales,visits (default: y, target or value in a long table; every other column in
    /// a wide one).
    #[arg(long, value_delimiter = ',')]
    pub target_columns: Option<Vec<String>>,
    /// Unit of integer (epoch) timestamps.
    #[arg(long, value_enum, default_value = "s")]
    pub timestamp_unit: TimestampUnitArg,
    /// Spacing of every series, e.g. 1h, 15m, 1d, 1w, 1mo, 3mo, 1y (default: inferred per series).
    #[arg(long)]
    pub freq: Option<String>,
    #[command(flatten)]
    pub calendar: CalendarArgs,
    #[command(flatten)]
    pub plot_options: PlotOptions,
}

#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Engine bundle directory.
    #[arg(long)]
    pub engine: PathBuf,
    /// Directory of golden case files (*.json, searched recursively); default: the engine's own golden set.
    #[arg(long)]
    pub fixtures: Option<PathBuf>,
    /// A second engine of the same model (e.g. the fp32 engine beside an int8 or fp16 one): also report how far
    /// the engine's mean forecast is from that engine's, in the same tolerance units (a report, not a verdict).
    #[arg(long)]
    pub compare_engine: Option<PathBuf>,
    #[command(flatten)]
    pub ort: OrtArgs,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    /// An engine to time, as LABEL=DIR (or DIR); repeatable: every workload runs on every engine that can serve
    /// it, interleaved run by run, and the first engine is compared with the best of the others.
    #[arg(long = "engine", value_name = "LABEL=DIR")]
    pub engines: Vec<String>,
    /// Timed runs per workload and engine (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Context points of every benchmark series.
    #[arg(long, default_value_t = 512)]
    pub context: usize,
    /// The engines' checkpoint (Hugging Face layout): also time toto-ts eager on the same workloads in this run
    /// (needs the toto-ts Python environment, see --reference-python).
    #[arg(long)]
    pub reference_checkpoint: Option<PathBuf>,
    /// Python of a venv with toto-ts 0.2.0 (default: ~/.cache/totoc/reference-venv/bin/python).
    #[arg(long)]
    pub reference_python: Option<PathBuf>,
    /// CPU intra-op threads, for totoc and toto-ts alike (default: physical cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Memory budget of each engine, e.g. 8G (default: 80% of this container's or machine's memory).
    #[arg(long)]
    pub memory_budget: Option<String>,
    /// Skip the per-workload peak-RSS measurements (one child process each).
    #[arg(long)]
    pub no_rss: bool,
    /// Also write the results as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Also draw the results: FILE.svg or FILE.png (every engine's and toto-ts's median per workload, log scale).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Toto 2.0 engines: series of the throughput workload (sent in calls of 512, as toto-2's leaderboard runs).
    #[arg(long, default_value_t = 1000)]
    pub throughput_series: usize,
    /// Internal: run one workload in this process and print its peak RSS (the parent's RSS probe).
    #[arg(long, hide = true)]
    pub rss_probe: Option<String>,
    #[command(flatten)]
    pub ort: OrtArgs,
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Load-test `totoc serve` on loopback: N concurrent clients for T seconds per phase; throughput, latency,
    /// batch occupancy, errors, server RSS, and the server's overhead over the engine's own compute time.
    Serve(BenchServeArgs),
    /// The cost model against the clock: the engine's graph rates measured at warm-up, each request's estimate
    /// (graph runs, row-steps, seconds), whether `totoc serve` would admit it within --deadline-s, and the time
    /// an admitted one takes alone; exits 1 if one took more than 2× its estimate.
    Cost(BenchCostArgs),
}

#[derive(Debug, clap::Args)]
pub struct BenchCostArgs {
    /// Engine bundle directory.
    #[arg(long)]
    pub engine: PathBuf,
    /// A request as SERIESxVARIATESxHORIZONxSAMPLES, e.g. 1x4x336x256 (repeatable; default: a ladder from the
    /// engine's limits, one series to 16, one variate to all, mean forecasts and all sample paths).
    #[arg(long = "request", value_name = "SxVxHxN")]
    pub requests: Vec<String>,
    /// Context points of every series (default: the engine's longest context).
    #[arg(long)]
    pub context: Option<usize>,
    /// The deadline a request is admitted against, in seconds (`totoc serve --request-timeout-ms`'s default).
    #[arg(long, default_value_t = 30.0)]
    pub deadline_s: f64,
    /// Timed runs of each admitted request (the median is reported).
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// CPU intra-op threads (default: the engine's recorded count, else physical cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// The engine's memory budget, e.g. 4GiB (default: 80% of this container's or machine's memory).
    #[arg(long)]
    pub memory_budget: Option<String>,
    /// Also write the rates and results as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub ort: OrtArgs,
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
    /// How far apart the request's timestamps are, for an engine whose family reads each point's wall clock
    /// (default daily); refused for other engines.
    #[arg(long, value_enum)]
    pub frequency: Option<Frequency>,
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
    /// The server's (and the engine timing's) --memory-budget.
    #[arg(long)]
    pub memory_budget: Option<String>,
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
    /// The model's tokenizer checkpoint directory (config.json and model.safetensors), for a model exported with
    /// its tokenizer (the config names it as `model.tokenizer`); refused for models without one.
    #[arg(long)]
    pub tokenizer: Option<PathBuf>,
    /// Profiles YAML (e.g. configs/toto-base.yaml).
    #[arg(long)]
    pub config: PathBuf,
    /// Output bundle directory (written atomically).
    #[arg(long)]
    pub out: PathBuf,
    /// Export only these profiles (repeatable; default: all in the config).
    #[arg(long = "profile")]
    pub profiles: Vec<String>,
    /// Precision of the graphs to write (repeatable: a bundle can hold fp32 and fp16 graphs, each over its own
    /// weight file).
    #[arg(long = "precision", value_enum, default_values_t = [PrecisionArg::Fp32])]
    pub precisions: Vec<PrecisionArg>,
    /// The runtimes to write the graphs for: 24 = opset 24 with TensorScatter (ONNX Runtime >= 1.31 CPU/CUDA,
    /// TensorRT >= 10.15); 18 = opset 18 with ScatterND (ONNX Runtime 1.22-1.30, TensorRT < 10.15).
    #[arg(long, default_value_t = 24, value_parser = parse_opset)]
    pub opset: i64,
    /// Replace the output directory if it exists.
    #[arg(long)]
    pub force: bool,
    /// Golden toto-ts cases of this checkpoint to carry in the bundle (for `totoc verify` anywhere).
    #[arg(long)]
    pub golden: Option<PathBuf>,
    /// The transformer matmuls int8 graphs run in int8: `all` (every one per row), or a comma list of qkv,
    /// out_proj, fc1, fc2 (the rest stay fp32), each per row (`MatMulInteger`) or with `:blocks` in 16-value
    /// blocks (`MatMulNBits`). Default: the family's set, chosen by ablation on a trained model (Toto 1.0:
    /// qkv,out_proj,fc1:blocks,fc2:blocks; Toto 2.0: qkv,fc1,fc2; docs/precision.md). `all` misses the accuracy
    /// goal on the trained models; `totoc verify` tells.
    #[arg(long, value_name = "ROLES", value_parser = exporter::graph::Int8Plan::parse)]
    pub int8_roles: Option<exporter::graph::Int8Plan>,
}

/// `--opset`: 24 or 18.
/// `--param NAME=VALUE`: a name and a number.
fn parse_param(s: &str) -> Result<(String, f64), String> {
    let (name, value) = s
        .split_once('=')
        .ok_or_else(|| format!("`{s}` is not NAME=VALUE; write e.g. --param max_context=512"))?;
    let x: f64 = value.trim().parse().map_err(|_| {
        format!("`{value}` (the value of `{name}`) is not a number; write e.g. --param {name}=512")
    })?;
    Ok((name.trim().to_string(), x))
}

fn parse_opset(s: &str) -> Result<i64, String> {
    match s {
        "24" => Ok(24),
        "18" => Ok(18),
        other => Err(format!("{other} is not a supported opset: 24 (TensorScatter) or 18 (ScatterND)")),
    }
}

#[derive(Debug, clap::Args)]
#[command(
    after_help = "Example: totoc backtest --engine fp32=E32 --engine int8=E8 --input prices.csv --horizon 5 \
--windows 200 --step 1 --output cv.csv --metrics metrics.csv --plot cv.png. The input is read as by `totoc \
forecast` (same column flags). Outputs: docs/formats.md, \"Backtest forecasts\" and \"Backtest metrics\"."
)]
pub struct BacktestArgs {
    /// An engine to backtest, as LABEL=DIR (or DIR, labelled by its directory name); repeatable: every engine
    /// runs the same windows and is scored in one report.
    #[arg(long = "engine", value_name = "LABEL=DIR", required = true)]
    pub engines: Vec<String>,
    /// The series: .csv, .parquet, .json or .jsonl, as `totoc forecast --input` reads them.
    #[arg(long)]
    pub input: PathBuf,
    /// Format of --input (default: from its extension).
    #[arg(long, value_enum)]
    pub input_format: Option<FormatArg>,
    /// Column of the series ids (default: unique_id, item_id, id or series_id if present).
    #[arg(long)]
    pub id_column: Option<String>,
    /// Column of the timestamps (default: ds, timestamp, date or time if present).
    #[arg(long)]
    pub timestamp_column: Option<String>,
    /// The target column (one: a backtest scores one target per series; default: y, target or value). An engine
    /// whose model reads named columns (open, high, low, close, ...) reads its own from the table and is scored
    /// on this one, e.g. --target-columns close.
    #[arg(long, value_delimiter = ',')]
    pub target_columns: Option<Vec<String>>,
    /// Unit of integer (epoch) timestamps.
    #[arg(long, value_enum, default_value = "s")]
    pub timestamp_unit: TimestampUnitArg,
    /// Spacing of every series, e.g. 1h, 1d (default: inferred per series).
    #[arg(long)]
    pub freq: Option<String>,
    #[command(flatten)]
    pub calendar: CalendarArgs,
    /// Forecast steps of every window.
    #[arg(long)]
    pub horizon: usize,
    /// Windows per series; the last one ends at the series' last point.
    #[arg(long)]
    pub windows: usize,
    /// Grid positions between consecutive cutoffs (default: the horizon, i.e. windows that do not overlap).
    #[arg(long)]
    pub step: Option<usize>,
    /// Most recent points each window's forecast sees (default: the smallest maximum context of the engines;
    /// every engine and the reference see the same points).
    #[arg(long)]
    pub context: Option<usize>,
    /// Sample paths per window (0: the deterministic point forecast; Toto 1.0 then has no quantiles).
    #[arg(long, default_value_t = 0)]
    pub samples: usize,
    /// Quantile levels, e.g. 0.1,0.5,0.9 (default: 0.1,0.5,0.9 where the engine makes quantiles: sampling Toto
    /// 1.0 engines and every Toto 2.0 engine).
    #[arg(long, value_delimiter = ',')]
    pub quantiles: Option<Vec<f64>>,
    /// Seed of the sample paths (the same for every window).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub model: ModelControlArgs,
    /// Season length of MASE's scale and of the seasonal-naive baseline (default: from the series' calendar:
    /// daily trading data (weekdays) 5, other daily 7, hourly 24, n minutes 1440/n, monthly 12, quarterly 4,
    /// else 1).
    #[arg(long)]
    pub season: Option<usize>,
    /// Windows per engine call (the engine packs each call's windows onto its shape buckets).
    #[arg(long, default_value_t = backtest::run::DEFAULT_CHUNK)]
    pub chunk: usize,
    /// Where to write the per-window forecasts: .csv, .parquet, .json or .jsonl.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Also write each sampled engine's paths into --output (`LABEL-sample-0`, `LABEL-sample-1`, ... columns,
    /// after the others): what the report's calibration figures are computed from.
    #[arg(long, requires = "output")]
    pub write_samples: bool,
    /// Where to write the metrics (long format: model, scope, unique_id, cutoff, metric, value): .csv,
    /// .parquet, .json or .jsonl.
    #[arg(long)]
    pub metrics: Option<PathBuf>,
    /// Also draw the report: FILE.svg or FILE.png (MAE per engine and baseline as bars, and a second image
    /// FILE-forecasts.svg/png with the forecasts at --plot-cutoffs cutoffs over the history).
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Cutoffs drawn per series in the forecasts image (spread evenly, the last always included).
    #[arg(long, default_value_t = 3, requires = "plot")]
    pub plot_cutoffs: usize,
    /// The engines' checkpoint (Hugging Face layout): also run the eager reference (toto-ts for Toto 1.0,
    /// toto-2 for Toto 2.0; for a model with a tokenizer, its upstream: give its predictor here and
    /// --reference-tokenizer) on the same windows and report what each engine changes.
    #[arg(long)]
    pub reference_checkpoint: Option<PathBuf>,
    /// The tokenizer of a model read from two checkpoint directories: the reference is then the first
    /// engine of such a model, --reference-checkpoint its predictor.
    #[arg(long, requires = "reference_checkpoint")]
    pub reference_tokenizer: Option<PathBuf>,
    /// How the reference runs: eval (what totoc reproduces), or train (a model with a tokenizer: the modules left
    /// in training mode, as upstream's from_pretrained leaves them; each metric's difference is reported, no
    /// verdict).
    #[arg(long, value_enum, default_value = "eval", requires = "reference_tokenizer")]
    pub reference_mode: ReferenceMode,
    /// Windows per series run through the reference (spread evenly, the last included; default: all).
    #[arg(long, requires = "reference_checkpoint")]
    pub reference_windows: Option<usize>,
    /// A reference with near-tie margins (a tokenizer's model in eval mode, greedy): a window whose greedy top-2
    /// logit gap or encoded |z| is below this many times the measured kernel drift is a flagged near-tie, listed
    /// and left out of the comparison (default: the harness's, 100, as the golden generators).
    #[arg(long, requires = "reference_tokenizer")]
    pub near_tie_factor: Option<f64>,
    /// Python of a venv with toto-ts 0.2.0 / toto-2 2.0.0 (default: ~/.cache/totoc/reference-venv/bin/python).
    #[arg(long)]
    pub reference_python: Option<PathBuf>,
    /// CPU threads, for the engines and the reference alike (default: the engine's setting, else physical
    /// cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Memory each engine may hold (weights + shape buckets), e.g. 8G.
    #[arg(long)]
    pub memory_budget: Option<String>,
    #[command(flatten)]
    pub ort: OrtArgs,
}

/// How far apart `totoc bench serve`'s series timestamps are (families that read them). Defined here, with the
/// other flag values, so the bench modules that read it import the CLI and not the other way round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Frequency {
    Daily,
    Hourly,
}

/// The sampling controls and parameters of a model family that takes them (its `Capabilities` say so), as
/// `forecast` and `backtest` read them: each replaces a request's own; an engine whose family takes none refuses them by name.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ModelControlArgs {
    /// Sampling temperature of a model that takes sampling controls (sampled paths, --samples N).
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Sample among the k likeliest tokens (0: off), for a model that takes sampling controls.
    #[arg(long, allow_negative_numbers = true)]
    pub top_k: Option<i64>,
    /// Nucleus sampling threshold in (0, 1], for a model that takes sampling controls.
    #[arg(long)]
    pub top_p: Option<f64>,
    /// A model parameter, NAME=VALUE (a number), e.g. --param max_context=512 or --param clip=5; repeat for
    /// several.
    #[arg(long = "param", value_name = "NAME=VALUE", value_parser = parse_param)]
    pub params: Vec<(String, f64)>,
}
