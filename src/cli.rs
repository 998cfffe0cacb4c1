//! Command-line flags (clap derive). Validation that needs files happens in `cmd/`.
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
}

impl From<PrecisionArg> for exporter::signature::Precision {
    fn from(p: PrecisionArg) -> Self {
        match p {
            PrecisionArg::Fp32 => exporter::signature::Precision::Fp32,
            PrecisionArg::Fp16 => exporter::signature::Precision::Fp16,
        }
    }
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
    /// Benchmark engines on reference workloads, interleaved, side by side with toto-ts if given its checkpoint.
    Bench(BenchArgs),
    /// Report which ONNX Runtime providers, CUDA/cuDNN/TensorRT libraries and GPUs this machine has, and which
    /// engine targets will work here.
    Doctor(DoctorArgs),
}

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
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
    /// Memory the engine may use (weights + shape buckets), e.g. 8G; larger calls run in several passes.
    /// Default: 80% of this container's (or machine's) memory.
    #[arg(long)]
    pub memory_budget: Option<String>,
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
pub struct BenchArgs {
    /// An engine to time, as LABEL=DIR (or DIR); repeatable: every workload runs on every engine that can serve
    /// it, interleaved run by run, and the first engine is compared with the best of the others.
    #[arg(long = "engine", required = true, value_name = "LABEL=DIR")]
    pub engines: Vec<String>,
    /// Timed runs per workload and engine (the median is reported).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Context points of every benchmark series.
    #[arg(long, default_value_t = 512)]
    pub context: usize,
    /// The checkpoint the engines were exported from (HF layout): also time toto-ts eager on the same workloads
    /// in this run.
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
    /// Internal: run one workload in this process and print its peak RSS (the parent's RSS probe).
    #[arg(long, hide = true)]
    pub rss_probe: Option<String>,
    #[command(flatten)]
    pub ort: OrtArgs,
}

/// `--opset`: 24 or 18.
fn parse_opset(s: &str) -> Result<i64, String> {
    match s {
        "24" => Ok(24),
        "18" => Ok(18),
        other => Err(format!("{other} is not a supported opset: 24 (TensorScatter) or 18 (ScatterND)")),
    }
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
}
