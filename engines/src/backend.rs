//! Targets (CPU, CUDA, TensorRT) and the ONNX Runtime session options each one gets.
//!
//! Everything target-specific lives here. The options are computed by pure functions —
//! [`session_config`] (session-level settings and config keys) and [`provider_options`] (the execution provider's
//! key/value options, exactly as ONNX Runtime receives them) — so they can be unit-tested without a GPU and are
//! recorded verbatim in the engine manifest. [`session_builder`] is the only place that turns them into an
//! `ort` [`SessionBuilder`]; GPU providers are registered with `error_on_failure`, and their provider library is
//! looked for first, so a machine without it gets [`Error::Provider`] saying what to install instead of a silent
//! CPU fallback.

use std::path::{Path, PathBuf};

use exporter::signature::Precision;
use exporter::variant::OpsetVariant;
use ort::ep::{self, ArbitrarilyConfigurableExecutionProvider};
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
// The CPU and machine probes are the bottom layer (`crate::cpu`, `crate::machine`); re-exported here, where
// callers have always found them.
pub use crate::cpu::{cpu_summary, physical_cores};
pub use crate::machine::Version;
use crate::runtime::{Runtime, ORT_VERSION};

/// Where the graphs run. Serialised into the engine manifest (`{"kind": "cpu", "threads": null}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Target {
    /// ONNX Runtime's CPU provider (MLAS).
    Cpu {
        /// Intra-op threads; `None` = the machine's physical cores (within this process's CPU affinity).
        #[serde(default)]
        threads: Option<usize>,
    },
    /// ONNX Runtime's CUDA provider (onnxruntime-gpu, CUDA 13).
    Cuda {
        #[serde(default)]
        device: i32,
        /// Capture each graph's kernels once and replay them (`enable_cuda_graph`); needs fixed I/O addresses,
        /// which [`crate::graph::GraphRunner`] provides.
        #[serde(default)]
        cuda_graph: bool,
    },
    /// ONNX Runtime's TensorRT provider; `build-engine` stores the engines as EPContext models (`embed_mode=0`).
    /// ONNX Runtime 1.31.1's provider links TensorRT **10** (`libnvinfer.so.10`): the fp16 builder flag is set for
    /// fp16 graphs ([`provider_options`]) and TF32, on by default in TensorRT 10, is turned off for fp32 ones
    /// ([`process_env`]).
    #[serde(rename = "tensorrt")]
    TensorRt {
        #[serde(default)]
        device: i32,
        /// `trt_cuda_graph_enable`.
        #[serde(default)]
        cuda_graph: bool,
        /// Engine and timing caches; relative paths are inside the engine bundle.
        #[serde(default = "default_trt_cache_dir")]
        engine_cache_dir: PathBuf,
        /// `trt_builder_optimization_level` (0–5, TensorRT's default 3).
        #[serde(default = "default_trt_opt_level")]
        builder_optimization_level: u8,
        /// `trt_max_workspace_size` in bytes; `None` = TensorRT's default (device memory).
        #[serde(default)]
        max_workspace_bytes: Option<u64>,
    },
}

fn default_trt_cache_dir() -> PathBuf {
    PathBuf::from("trt")
}

fn default_trt_opt_level() -> u8 {
    3
}

impl Target {
    /// CPU with `threads` (or physical cores).
    pub fn cpu(threads: Option<usize>) -> Self {
        Target::Cpu { threads }
    }

    pub fn cuda(device: i32, cuda_graph: bool) -> Self {
        Target::Cuda { device, cuda_graph }
    }

    /// TensorRT with caches in the bundle's `trt/` and TensorRT's default builder settings.
    pub fn tensorrt(device: i32, cuda_graph: bool) -> Self {
        Target::TensorRt {
            device,
            cuda_graph,
            engine_cache_dir: default_trt_cache_dir(),
            builder_optimization_level: default_trt_opt_level(),
            max_workspace_bytes: None,
        }
    }

    /// Short name: `cpu`, `cuda`, `tensorrt`.
    pub fn name(&self) -> &'static str {
        match self {
            Target::Cpu { .. } => "cpu",
            Target::Cuda { .. } => "cuda",
            Target::TensorRt { .. } => "tensorrt",
        }
    }

    /// Human name: `CPU`, `CUDA`, `TensorRT`.
    pub fn title(&self) -> &'static str {
        match self {
            Target::Cpu { .. } => "CPU",
            Target::Cuda { .. } => "CUDA",
            Target::TensorRt { .. } => "TensorRT",
        }
    }

    /// ONNX Runtime's name of the main execution provider.
    pub fn provider_name(&self) -> &'static str {
        match self {
            Target::Cpu { .. } => "CPUExecutionProvider",
            Target::Cuda { .. } => "CUDAExecutionProvider",
            Target::TensorRt { .. } => "TensorrtExecutionProvider",
        }
    }

    /// CUDA device of a GPU target.
    pub fn device(&self) -> Option<i32> {
        match self {
            Target::Cpu { .. } => None,
            Target::Cuda { device, .. } | Target::TensorRt { device, .. } => Some(*device),
        }
    }

    /// Whether graph I/O lives in device memory.
    pub fn is_gpu(&self) -> bool {
        self.device().is_some()
    }

    pub fn cuda_graph(&self) -> bool {
        match self {
            Target::Cpu { .. } => false,
            Target::Cuda { cuda_graph, .. } | Target::TensorRt { cuda_graph, .. } => *cuda_graph,
        }
    }
}

/// What a session is created for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// `build-engine`: optimise/compile graph `stem` and write the results into `out_dir`.
    Build { out_dir: PathBuf, stem: String },
    /// Loading an engine bundle at `bundle_dir`.
    Load { bundle_dir: PathBuf },
}

impl Stage {
    fn dir(&self) -> &Path {
        match self {
            Stage::Build { out_dir, .. } => out_dir,
            Stage::Load { bundle_dir } => bundle_dir,
        }
    }
}

/// Graph optimisation level, as recorded in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptLevel {
    Disable,
    Basic,
    Extended,
    All,
}

impl From<OptLevel> for GraphOptimizationLevel {
    fn from(l: OptLevel) -> Self {
        match l {
            OptLevel::Disable => GraphOptimizationLevel::Disable,
            OptLevel::Basic => GraphOptimizationLevel::Level1,
            OptLevel::Extended => GraphOptimizationLevel::Level2,
            OptLevel::All => GraphOptimizationLevel::All,
        }
    }
}

/// One execution provider and its options, in registration order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// ONNX Runtime's provider name (`CUDAExecutionProvider`, ...).
    pub name: String,
    pub options: Vec<(String, String)>,
}

/// Everything [`session_builder`] sets on a session; recorded in the engine manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionConfig {
    pub optimization_level: OptLevel,
    /// Intra-op threads (0 = ONNX Runtime's default).
    pub intra_threads: usize,
    pub memory_pattern: bool,
    pub cpu_arena: bool,
    /// Session config entries (`session.*` keys of `onnxruntime_session_options_config_keys.h`).
    pub config_entries: Vec<(String, String)>,
    /// Execution providers besides the always-present CPU provider, in priority order.
    pub providers: Vec<ProviderConfig>,
}

/// Minimum size of an initializer that the optimised model stores in its external weights file
/// (`session.optimized_model_external_initializers_min_size_in_bytes`): shape constants stay inline, weights go out.
pub const EXTERNAL_INITIALIZER_MIN_BYTES: usize = 1024;

/// File name of a graph's optimised model in the engine bundle.
pub fn optimized_model_file(stem: &str) -> String {
    format!("{stem}.opt.onnx")
}

/// File name of the external weights ONNX Runtime writes next to an optimised model.
pub fn optimized_weights_file(stem: &str) -> String {
    format!("{stem}.opt.weights.bin")
}

/// File name of a graph's TensorRT EPContext model in the engine bundle.
pub fn ep_context_file(stem: &str) -> String {
    format!("{stem}.trt_ctx.onnx")
}

/// Session settings for `target` at `stage`, for graphs of `precision`. Pure: no ONNX Runtime call.
pub fn session_config(target: &Target, stage: &Stage, precision: Precision) -> SessionConfig {
    let mut config_entries = Vec::new();
    let kv = |k: &str, v: String| (k.to_string(), v);
    let (optimization_level, intra_threads) = match (target, stage) {
        // Build: optimise offline at Extended (fusions; no CPU-layout transforms, so the saved model stays
        // portable across x86 CPUs). Load: the saved model only needs what is left (layout transforms).
        (Target::Cpu { threads }, Stage::Build { .. }) => {
            (OptLevel::Extended, threads.unwrap_or_else(physical_cores))
        }
        (Target::Cpu { threads }, Stage::Load { .. }) => {
            (OptLevel::All, threads.unwrap_or_else(physical_cores))
        }
        // GPU sessions barely use host threads: one, and no spinning (it would burn a core per session).
        (Target::Cuda { .. } | Target::TensorRt { .. }, _) => {
            config_entries.push(kv("session.intra_op.allow_spinning", "0".into()));
            config_entries.push(kv("session.inter_op.allow_spinning", "0".into()));
            (OptLevel::Extended, 1)
        }
    };
    if let (Target::Cpu { .. } | Target::Cuda { .. }, Stage::Build { stem, .. }) = (target, stage) {
        config_entries.push(kv(
            "session.optimized_model_external_initializers_file_name",
            optimized_weights_file(stem),
        ));
        config_entries.push(kv(
            "session.optimized_model_external_initializers_min_size_in_bytes",
            EXTERNAL_INITIALIZER_MIN_BYTES.to_string(),
        ));
    }
    // int8 graphs on a CPU without VNNI: ONNX Runtime's u8·s8 GEMM (`vpmaddubsw`) adds pairs of u8·s8 products in
    // saturating int16, so full-range int8 weights overflow and the forecast drifts (measured on an AMD EPYC
    // without VNNI: mixture parameters off by 0.26, 8× the int8 goal). With this entry ONNX Runtime converts the
    // constant int8 weights to uint8 at load (`Avx2WeightS8ToU8Transformer`) and runs the exact u8·u8 kernel.
    // ONNX Runtime applies it on every x86 CPU with AVX2 (`MlasPlatformU8S8Overflow()` compares dispatch tables,
    // which differ on VNNI CPUs too), where it would trade the exact VNNI/AMX u8·s8 kernels for slower u8·u8 ones
    // with the same bits — so it is asked for only where the u8·s8 kernel saturates (`cpu::int8_needs_u8u8_gemm`).
    // Load only: the build's saved model must stay the same on every CPU.
    if let (Target::Cpu { .. }, Stage::Load { .. }, Precision::Int8, true) =
        (target, stage, precision, crate::cpu::int8_needs_u8u8_gemm())
    {
        config_entries.push(kv("session.x64quantprecision", "1".into()));
    }
    // Lets `GraphRunner` report which provider each node landed on (`Session_GetEpGraphAssignmentInfo`).
    config_entries.push(kv("session.record_ep_graph_assignment_info", "1".into()));
    let providers = match target {
        Target::Cpu { .. } => Vec::new(),
        Target::Cuda { .. } => vec![ProviderConfig {
            name: target.provider_name().into(),
            options: provider_options(target, stage, precision),
        }],
        Target::TensorRt { device, .. } => vec![
            ProviderConfig {
                name: target.provider_name().into(),
                options: provider_options(target, stage, precision),
            },
            // Registered so that ONNX Runtime can place a node TensorRT rejects at all; `build-engine` then
            // refuses the engine (every node must be on TensorRT: a fallback node would defeat CUDA graphs and
            // the KV-cache layer) and names the node.
            ProviderConfig { name: "CUDAExecutionProvider".into(), options: cuda_options(*device, false) },
        ],
    };
    SessionConfig {
        optimization_level,
        intra_threads,
        // Static shapes: the memory planner's pattern is exact and reused every run.
        memory_pattern: true,
        cpu_arena: true,
        config_entries,
        providers,
    }
}

fn cuda_options(device: i32, cuda_graph: bool) -> Vec<(String, String)> {
    let b = |v: bool| if v { "1" } else { "0" }.to_string();
    vec![
        ("device_id".into(), device.to_string()),
        ("enable_cuda_graph".into(), b(cuda_graph)),
        // Static shapes: grow the arena by what is asked, not to the next power of two.
        ("arena_extend_strategy".into(), "kSameAsRequested".into()),
        // fp32 graphs stay fp32 (TF32 matmuls would change results at the 1e-3 level); fp16 graphs are the
        // fast path.
        ("use_tf32".into(), "0".into()),
        ("do_copy_in_default_stream".into(), "1".into()),
    ]
}

/// The main execution provider's options for `target` at `stage` and graphs of `precision`, as ONNX Runtime
/// receives them (empty for CPU).
///
/// TensorRT: engine + timing caches in `engine_cache_dir` (resolved against the stage's directory), CUDA graph,
/// builder optimisation level, the fp16 builder flag for fp16 graphs (TensorRT 10 still has it — ONNX Runtime
/// 1.31.1 links `libnvinfer.so.10` — and only builds fp16 kernels with it), and at build time an EPContext dump
/// with `embed_mode=0` (the engine stays a separate file next to a small `*.trt_ctx.onnx`).
pub fn provider_options(target: &Target, stage: &Stage, precision: Precision) -> Vec<(String, String)> {
    let b = |v: bool| if v { "1" } else { "0" }.to_string();
    match target {
        Target::Cpu { .. } => Vec::new(),
        Target::Cuda { device, cuda_graph } => cuda_options(*device, *cuda_graph),
        Target::TensorRt {
            device,
            cuda_graph,
            engine_cache_dir,
            builder_optimization_level,
            max_workspace_bytes,
            ..
        } => {
            let cache = stage.dir().join(engine_cache_dir);
            let cache = cache.to_string_lossy().into_owned();
            let mut o: Vec<(String, String)> = vec![
                ("device_id".into(), device.to_string()),
                ("trt_engine_cache_enable".into(), "1".into()),
                ("trt_engine_cache_path".into(), cache.clone()),
                ("trt_timing_cache_enable".into(), "1".into()),
                ("trt_timing_cache_path".into(), cache),
                ("trt_cuda_graph_enable".into(), b(*cuda_graph)),
                ("trt_builder_optimization_level".into(), builder_optimization_level.to_string()),
                ("trt_fp16_enable".into(), b(precision == Precision::Fp16)),
            ];
            if let Some(ws) = max_workspace_bytes {
                o.push(("trt_max_workspace_size".into(), ws.to_string()));
            }
            if let Stage::Build { out_dir, stem } = stage {
                o.push(("trt_dump_ep_context_model".into(), "1".into()));
                o.push((
                    "trt_ep_context_file_path".into(),
                    out_dir.join(ep_context_file(stem)).to_string_lossy().into_owned(),
                ));
                o.push(("trt_ep_context_embed_mode".into(), "0".into()));
            }
            o
        }
    }
}

/// Environment variables a GPU process must have before CUDA starts, for graphs of `precision`.
///
/// fp32 graphs stay fp32 on the GPU: TensorRT 10 builds TF32 tactics by default (`BuilderFlag::kTF32`) and ONNX
/// Runtime's TensorRT provider has no option to clear it; `NVIDIA_TF32_OVERRIDE=0` turns TF32 off in TensorRT,
/// cuBLAS and cuDNN alike (the CUDA provider also gets `use_tf32=0`). fp16 graphs need nothing.
pub fn process_env(target: &Target, precision: Precision) -> Vec<(&'static str, &'static str)> {
    match (target.is_gpu(), precision) {
        (true, Precision::Fp32) => vec![("NVIDIA_TF32_OVERRIDE", "0")],
        _ => Vec::new(),
    }
}

/// Sets [`process_env`] in this process unless the user already set those variables (their choice wins).
/// Called before the first GPU session is created.
pub fn apply_process_env(target: &Target, precision: Precision) {
    for (k, v) in process_env(target, precision) {
        if std::env::var_os(k).is_none() {
            // Set before any CUDA library reads it; totoc creates its GPU sessions after this point.
            std::env::set_var(k, v);
        }
    }
}

/// The first TensorRT whose ONNX parser imports `TensorScatter` (into its KV-cache update layer).
pub const TENSORRT_TENSOR_SCATTER: Version = Version(10, 15, 0);
/// The first ONNX Runtime with CPU and CUDA kernels for every op of an opset-24 graph.
pub const ORT_OPSET24: Version = Version(1, 31, 0);

/// Whether `target`'s runtime (ONNX Runtime `ort`, and for TensorRT the `tensorrt` library found) can run a
/// bundle written for `variant`; the error says why not and what to export instead (see
/// `exporter::variant`). An unknown version is not refused here: loading the graph will say.
pub fn check_variant(
    target: &Target,
    variant: OpsetVariant,
    ort: Option<Version>,
    tensorrt: Option<Version>,
) -> std::result::Result<(), String> {
    if variant != OpsetVariant::Opset24 {
        return Ok(());
    }
    if let Some(v) = ort.filter(|v| *v < ORT_OPSET24) {
        return Err(format!(
            "the bundle's graphs are opset 24 (TensorScatter), which ONNX Runtime {v} cannot run on {} (it lacks \
             opset-24 kernels); re-export with `totoc export --opset 18`, or use ONNX Runtime >= {ORT_OPSET24}",
            target.name()
        ));
    }
    if let (Target::TensorRt { .. }, Some(v)) = (target, tensorrt) {
        if v < TENSORRT_TENSOR_SCATTER {
            return Err(format!(
                "the bundle's graphs write the KV cache with TensorScatter (opset 24), which TensorRT {v} does not \
                 import (TensorRT >= {TENSORRT_TENSOR_SCATTER} maps it to its KV-cache update layer); re-export \
                 with `totoc export --opset 18` (ScatterND), or install TensorRT >= {TENSORRT_TENSOR_SCATTER}"
            ));
        }
    }
    Ok(())
}

/// Whether `target` can run graphs of `precision`; the error says why not and what to build instead. int8
/// graphs are CPU graphs: their matmuls are ONNX `MatMulInteger` over uint8 activation codes and int8 weights
/// (`exporter::quantize`), which ONNX Runtime's CPU provider runs with MLAS's prepacked u8·s8 GEMM. Its CUDA
/// provider implements `MatMulInteger` for int8 × int8 only, so ONNX Runtime would place every quantized matmul
/// on the CPU between GPU nodes, and TensorRT imports quantized graphs as Q/DQ pairs, not `MatMulInteger`: an
/// int8 GPU engine is refused rather than built slow.
pub fn check_precision(target: &Target, precision: Precision) -> std::result::Result<(), String> {
    match (target, precision) {
        (Target::TensorRt { .. } | Target::Cuda { .. }, Precision::Int8) => Err(format!(
            "int8 engines are CPU engines: their MatMulInteger nodes (uint8 activations × int8 weights) have no \
             {} kernel, so they would run on the CPU between GPU nodes; build the int8 engine with \
             `--target cpu`, or a GPU engine from fp16 or fp32 graphs (`--precision fp16`)",
            if matches!(target, Target::TensorRt { .. }) { "TensorRT" } else { "CUDA" }
        )),
        _ => Ok(()),
    }
}

/// What to install when a GPU provider cannot be registered.
pub fn provider_help(target: &Target) -> String {
    let cuda = format!(
        "install onnxruntime-gpu {ORT_VERSION} (CUDA 13): `python3 -m pip download --no-deps --only-binary=:all: \
         onnxruntime-gpu=={ORT_VERSION}`, unzip onnxruntime/capi/ and pass --ort-lib <dir>/libonnxruntime.so.{ORT_VERSION} \
         (the libonnxruntime_providers_*.so files must sit beside it), with the CUDA 13 runtime, cuBLAS and cuDNN 9 \
         libraries on the loader path (e.g. pip nvidia-cuda-runtime, nvidia-cublas, nvidia-cudnn-cu13)"
    );
    match target {
        Target::TensorRt { .. } => {
            format!("{cuda}, and TensorRT 10 (libnvinfer.so.10, libnvonnxparser.so.10)")
        }
        _ => cuda,
    }
}

/// File name of a provider's shared library (`libonnxruntime_providers_cuda.so`).
pub fn provider_library(provider: &str) -> Option<&'static str> {
    match provider {
        "CUDAExecutionProvider" => Some("libonnxruntime_providers_cuda.so"),
        "TensorrtExecutionProvider" => Some("libonnxruntime_providers_tensorrt.so"),
        _ => None,
    }
}

fn short_provider(name: &str) -> &str {
    match name {
        "CUDAExecutionProvider" => "CUDA",
        "TensorrtExecutionProvider" => "TensorRT",
        other => other,
    }
}

fn ort_err(context: impl Into<String>) -> impl FnOnce(ort::Error<SessionBuilder>) -> Error {
    let context = context.into();
    move |e| Error::Ort { context, message: e.to_string() }
}

/// An `ort` session builder configured with `cfg` for `target`. GPU providers must load: a missing provider
/// library or CUDA dependency is [`Error::Provider`].
pub fn session_builder(rt: &Runtime, target: &Target, cfg: &SessionConfig) -> Result<SessionBuilder> {
    let mut b = ort::session::Session::builder(rt.environment())
        .map_err(|e| Error::Ort { context: "creating session options".into(), message: e.to_string() })?
        .with_optimization_level(cfg.optimization_level.into())
        .map_err(ort_err("setting the optimisation level"))?
        .with_intra_threads(cfg.intra_threads)
        .map_err(ort_err("setting intra-op threads"))?
        .with_memory_pattern(cfg.memory_pattern)
        .map_err(ort_err("setting the memory pattern"))?;
    for (k, v) in &cfg.config_entries {
        b = b.with_config_entry(k, v).map_err(ort_err(format!("setting session config {k}={v}")))?;
    }
    let mut eps = Vec::new();
    for p in &cfg.providers {
        check_provider(rt, target, &p.name)?;
        let dispatch = match p.name.as_str() {
            "CUDAExecutionProvider" => {
                let mut e = ep::CUDA::default();
                for (k, v) in &p.options {
                    e = e.with_arbitrary_config(k, v);
                }
                e.build()
            }
            "TensorrtExecutionProvider" => {
                let mut e = ep::TensorRT::default();
                for (k, v) in &p.options {
                    e = e.with_arbitrary_config(k, v);
                }
                e.build()
            }
            other => {
                return Err(Error::Provider {
                    provider: other.into(),
                    message: "not supported by totoc".into(),
                })
            }
        };
        eps.push(dispatch.error_on_failure());
    }
    eps.push(ep::CPU::default().with_arena_allocator(cfg.cpu_arena).build().error_on_failure());
    b.with_execution_providers(eps).map_err(|e| {
        let failed = cfg.providers.first().map_or("CPUExecutionProvider", |p| p.name.as_str());
        provider_error(target, failed, format!("registering it failed: {e}"))
    })
}

/// A GPU provider that cannot be used here: why, what this machine lacks for it (`totoc doctor`'s findings), and
/// what to install.
fn provider_error(target: &Target, provider: &str, why: String) -> Error {
    let problems = if target.is_gpu() {
        crate::machine::gpu_problems(matches!(target, Target::TensorRt { .. }))
    } else {
        Vec::new()
    };
    let found = if problems.is_empty() {
        String::new()
    } else {
        format!("; this machine also lacks: {}", problems.join("; "))
    };
    Error::Provider {
        provider: short_provider(provider).into(),
        message: format!(
            "not available: {why}{found} — {}. `totoc doctor` lists what is found and missing",
            provider_help(target)
        ),
    }
}

/// Checks a GPU provider before registering it: compiled into the loaded library and its provider library
/// present beside it. ONNX Runtime would otherwise report a bare `dlopen` failure.
fn check_provider(rt: &Runtime, target: &Target, provider: &str) -> Result<()> {
    if let Some(file) = provider_library(provider) {
        let dir = rt.library().parent().unwrap_or(Path::new("."));
        let real_dir = rt.library().canonicalize().ok().and_then(|p| p.parent().map(Path::to_path_buf));
        let found = dir.join(file).exists() || real_dir.is_some_and(|d| d.join(file).exists());
        if !found {
            return Err(provider_error(
                target,
                provider,
                format!("{file} not found next to {}", rt.library().display()),
            ));
        }
    }
    if !rt.available_providers().iter().any(|p| p == provider) {
        return Err(provider_error(
            target,
            provider,
            format!(
                "the ONNX Runtime at {} was built without it (available: {})",
                rt.library().display(),
                rt.available_providers().join(", ")
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(o: &'a [(String, String)], k: &str) -> Option<&'a str> {
        o.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn int8_runs_on_cpu_only() {
        for p in Precision::ALL {
            assert!(check_precision(&Target::cpu(None), p).is_ok());
        }
        for gpu in [Target::cuda(0, false), Target::tensorrt(0, false)] {
            assert!(
                check_precision(&gpu, Precision::Fp16).is_ok()
                    && check_precision(&gpu, Precision::Fp32).is_ok()
            );
            let e = check_precision(&gpu, Precision::Int8).unwrap_err();
            assert!(e.contains("MatMulInteger") && e.contains("--target cpu"), "{e}");
        }
        let e = check_precision(&Target::cuda(0, false), Precision::Int8).unwrap_err();
        assert!(e.contains("no CUDA kernel"), "{e}");
    }

    fn build_stage() -> Stage {
        Stage::Build { out_dir: PathBuf::from("/eng"), stem: "p1.decode".into() }
    }

    #[test]
    fn target_serialises_with_a_kind_tag() {
        let t = Target::tensorrt(1, true);
        let json = serde_json::to_value(&t).unwrap();
        assert_eq!(json["kind"], "tensorrt");
        assert_eq!(json["engine_cache_dir"], "trt");
        assert_eq!(serde_json::from_value::<Target>(json).unwrap(), t);
        let cpu: Target = serde_json::from_str(r#"{"kind":"cpu"}"#).unwrap();
        assert_eq!(cpu, Target::Cpu { threads: None });
        assert!(serde_json::from_str::<Target>(r#"{"kind":"cpu","thread":2}"#).is_err());
    }

    #[test]
    fn cpu_options_optimise_offline_and_keep_weights_external() {
        let t = Target::cpu(Some(3));
        let c = session_config(&t, &build_stage(), Precision::Fp32);
        assert_eq!(c.intra_threads, 3);
        assert_eq!(c.optimization_level, OptLevel::Extended);
        assert!(c.providers.is_empty() && c.memory_pattern && c.cpu_arena);
        assert_eq!(
            get(&c.config_entries, "session.optimized_model_external_initializers_file_name"),
            Some("p1.decode.opt.weights.bin")
        );
        assert_eq!(
            get(&c.config_entries, "session.optimized_model_external_initializers_min_size_in_bytes"),
            Some("1024")
        );
        let l = session_config(&t, &Stage::Load { bundle_dir: "/eng".into() }, Precision::Fp32);
        assert_eq!(l.optimization_level, OptLevel::All);
        assert_eq!(get(&l.config_entries, "session.optimized_model_external_initializers_file_name"), None);
        assert!(session_config(&Target::cpu(None), &build_stage(), Precision::Fp32).intra_threads >= 1);
        assert!(provider_options(&t, &build_stage(), Precision::Fp32).is_empty());
    }

    /// int8 CPU sessions ask ONNX Runtime for the exact u8·u8 GEMM on CPUs whose u8·s8 kernel saturates (and
    /// only there), at load only (the built model stays CPU-independent), and no other session does.
    #[test]
    fn int8_cpu_loads_ask_for_the_exact_gemm() {
        let key = "session.x64quantprecision";
        let load = Stage::Load { bundle_dir: "/eng".into() };
        let cpu = Target::cpu(Some(2));
        let want = crate::cpu::int8_needs_u8u8_gemm().then_some("1");
        assert_eq!(get(&session_config(&cpu, &load, Precision::Int8).config_entries, key), want);
        for (t, s, p) in [
            (&cpu, &load, Precision::Fp32),
            (&cpu, &load, Precision::Fp16),
            (&cpu, &build_stage(), Precision::Int8),
            (&Target::cuda(0, false), &load, Precision::Fp32),
        ] {
            assert_eq!(get(&session_config(t, s, p).config_entries, key), None, "{t:?} {p:?}");
        }
    }

    #[test]
    fn cuda_options_enable_cuda_graph() {
        let o = provider_options(&Target::cuda(2, true), &build_stage(), Precision::Fp16);
        assert_eq!(get(&o, "device_id"), Some("2"));
        assert_eq!(get(&o, "enable_cuda_graph"), Some("1"));
        assert_eq!(get(&o, "arena_extend_strategy"), Some("kSameAsRequested"));
        assert_eq!(get(&o, "use_tf32"), Some("0"));
        let c = session_config(&Target::cuda(0, false), &build_stage(), Precision::Fp32);
        assert_eq!(c.intra_threads, 1);
        assert_eq!(c.providers.len(), 1);
        assert_eq!(get(&c.providers[0].options, "enable_cuda_graph"), Some("0"));
        assert_eq!(get(&c.config_entries, "session.intra_op.allow_spinning"), Some("0"));
    }

    #[test]
    fn tensorrt_options_dump_ep_context_at_build_only() {
        let t = Target::TensorRt {
            device: 0,
            cuda_graph: true,
            engine_cache_dir: "trt".into(),
            builder_optimization_level: 5,
            max_workspace_bytes: Some(1 << 30),
        };
        let o = provider_options(&t, &build_stage(), Precision::Fp32);
        assert_eq!(get(&o, "trt_cuda_graph_enable"), Some("1"));
        assert_eq!(get(&o, "trt_engine_cache_enable"), Some("1"));
        assert_eq!(get(&o, "trt_engine_cache_path"), Some("/eng/trt"));
        assert_eq!(get(&o, "trt_timing_cache_enable"), Some("1"));
        assert_eq!(get(&o, "trt_timing_cache_path"), Some("/eng/trt"));
        assert_eq!(get(&o, "trt_dump_ep_context_model"), Some("1"));
        assert_eq!(get(&o, "trt_ep_context_file_path"), Some("/eng/p1.decode.trt_ctx.onnx"));
        assert_eq!(get(&o, "trt_ep_context_embed_mode"), Some("0"));
        assert_eq!(get(&o, "trt_builder_optimization_level"), Some("5"));
        assert_eq!(get(&o, "trt_max_workspace_size"), Some("1073741824"));
        // TensorRT 10 builds fp16 kernels only with its fp16 flag: set for fp16 graphs, clear for fp32 ones
        assert_eq!(get(&o, "trt_fp16_enable"), Some("0"));
        let h = provider_options(&t, &build_stage(), Precision::Fp16);
        assert_eq!(get(&h, "trt_fp16_enable"), Some("1"));
        let l = provider_options(&t, &Stage::Load { bundle_dir: "/b".into() }, Precision::Fp32);
        assert_eq!(get(&l, "trt_dump_ep_context_model"), None);
        assert_eq!(get(&l, "trt_engine_cache_path"), Some("/b/trt"));
        let c = session_config(&t, &build_stage(), Precision::Fp32);
        let names: Vec<&str> = c.providers.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["TensorrtExecutionProvider", "CUDAExecutionProvider"]);
        // the EPContext model replaces the optimised model: no external-initializer keys for TensorRT
        assert_eq!(get(&c.config_entries, "session.optimized_model_external_initializers_file_name"), None);
    }

    #[test]
    fn fp32_gpu_processes_turn_tf32_off() {
        assert_eq!(
            process_env(&Target::tensorrt(0, false), Precision::Fp32),
            [("NVIDIA_TF32_OVERRIDE", "0")]
        );
        assert_eq!(process_env(&Target::cuda(0, false), Precision::Fp32), [("NVIDIA_TF32_OVERRIDE", "0")]);
        assert!(process_env(&Target::tensorrt(0, false), Precision::Fp16).is_empty());
        assert!(process_env(&Target::cpu(None), Precision::Fp32).is_empty());
    }

    #[test]
    fn runtimes_refuse_variants_they_cannot_run() {
        let v = |s: &str| Version::parse(s);
        assert_eq!(v("10.15.1.29"), Some(Version(10, 15, 1)));
        assert_eq!(v("1.31"), Some(Version(1, 31, 0)));
        assert_eq!(v("x"), None);
        let (trt, cpu) = (Target::tensorrt(0, true), Target::cpu(None));
        assert!(check_variant(&trt, OpsetVariant::Opset24, v("1.31.1"), v("10.15.0")).is_ok());
        let e = check_variant(&trt, OpsetVariant::Opset24, v("1.31.1"), v("10.13.3")).unwrap_err();
        assert!(e.contains("TensorRT 10.13.3") && e.contains("--opset 18"), "{e}");
        assert!(check_variant(&trt, OpsetVariant::Opset18, v("1.31.1"), v("10.8.0")).is_ok());
        let e = check_variant(&cpu, OpsetVariant::Opset24, v("1.24.4"), None).unwrap_err();
        assert!(e.contains("ONNX Runtime 1.24.4") && e.contains("--opset 18"), "{e}");
        assert!(check_variant(&cpu, OpsetVariant::Opset18, v("1.24.4"), None).is_ok());
        // unknown versions are left to the loader
        assert!(check_variant(&trt, OpsetVariant::Opset24, None, None).is_ok());
    }
}
