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
}
