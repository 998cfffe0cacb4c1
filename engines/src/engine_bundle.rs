//! Engine bundles: `totoc build-engine` turns a verified export bundle into a directory of graphs ready for one
//! target and precision, and [`EngineBundle`] loads it back (every file hash-checked) and loads each bucket's
//! graph on demand.
//!
//! Layout (written atomically through a staging directory):
//! ```text
//! manifest.json                           format totoc-engine/4: target, precision, session options, memory
//!                                         budget, source bundle hash, every bucket's graph and memory need,
//!                                         sha256 + size of every other file
//! weights.<precision>.bin                 CPU/CUDA: the export's weights of that precision, once for every bucket
//! <profile>.<kind>.n<N>.<s|t><S>[.fp16].onnx   CPU/CUDA: each bucket's graph, optimised by ONNX Runtime at load
//! weights.fp16-emulated.bin + *.fp16-emulated.onnx   CPU + fp16: the emulation (see below)
//! <stem>.trt_ctx.onnx + trt/              TensorRT: EPContext model (embed_mode 0) and the engine it points to
//! golden/*.json                           the export's golden cases, for `totoc verify`
//! ```
//! CPU and CUDA engines keep the exported graphs: ONNX Runtime's optimised graph runs no faster when it is saved
//! than when it is made at load (measured on the base model: prefill 47 vs 48 ms, decode 35 vs 35 ms), while
//! saving it wrote a full weight copy per graph — with a dozen buckets per profile, gigabytes of build output and
//! minutes of build time for nothing. The build instead checks every bucket: it loads it with the shared weights
//! and requires the graph's I/O to be the manifest's, and drops buckets that could never fit the memory budget
//! (with a note). Weights exist once on disk and, when loaded, once in memory however many buckets there are
//! (see [`crate::graph::SharedWeights`]).
//!
//! **Precision.** An export bundle may hold fp32 and fp16 graphs; an engine is built for one of them. On a GPU
//! an fp16 engine runs the fp16 graphs. On the CPU it runs their *emulation* (`exporter::graph::emulate`): ONNX
//! Runtime's CPU provider computes fp16 MatMul, Add, Softmax, … in fp32 without rounding in between, so it would
//! not show fp16 error; the emulation graph rounds every op's result to fp16 the way GPU kernels do. It checks
//! accuracy (`totoc verify`) and is not faster than fp32.

use std::path::{Path, PathBuf};
use std::time::Instant;

use exporter::bucket::Bucket;
use exporter::build_cache::{self, BuildInputs, CacheCheck};
use exporter::export::GOLDEN_DIR;
use exporter::fsutil::{sha256_file, write_atomic, StagingDir};
use exporter::graph::emulate::{self, EmulatedWeights};
use exporter::manifest::{
    file_entries, format_mismatch, CheckpointInfo, DynamicGraphEntry, FileEntry, FormatTag, GraphEntry,
    Manifest, Toto2ProfileEntry, MANIFEST_FILE,
};
use exporter::pb::ModelProto;
use exporter::profile::Profile;
use exporter::registry::AnyConfig;
use exporter::signature::{DType, GraphKind, Precision, TensorSig};
use exporter::toto1::signature::GraphDims;
use exporter::variant::OpsetVariant;
use prost::Message;
use serde::{Deserialize, Serialize};

use crate::backend::{self, session_config, SessionConfig, Stage, Target, Version};
use crate::error::{Error, Result};
use crate::graph::{GraphRunner, ProviderNodes, SharedSession, SharedWeights};
use crate::memory::human;
use crate::runtime::{self, Runtime};

/// Format tag of engine bundles.
pub const ENGINE_FORMAT: &str = "totoc-engine/4";
/// Version number of [`ENGINE_FORMAT`] (`format_version` in the manifest).
pub const ENGINE_FORMAT_VERSION: u32 = 4;
/// The f32 weight file of an fp16 emulation engine.
pub const EMULATED_WEIGHTS: &str = "weights.fp16-emulated.bin";

/// Where an engine came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceBundle {
    /// sha256 of the export bundle's `manifest.json` (which itself hashes every graph and weight file).
    pub manifest_sha256: String,
    pub totoc_version: String,
    pub checkpoint: CheckpointInfo,
    /// The runtimes its graphs were written for.
    pub variant: OpsetVariant,
    pub opset: i64,
    pub cache_update: String,
    /// Precisions it holds.
    pub precisions: Vec<Precision>,
    /// fp32 regions of its fp16 graphs.
    pub fp32_regions: Vec<String>,
}

/// One bucket's graph in an engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineGraph {
    pub bucket: Bucket,
    pub dims: GraphDims,
    /// The model to load, relative to the bundle.
    pub file: String,
    /// The export bundle's graph it was built from.
    pub source_file: String,
    /// Estimated bytes of the bucket's buffers when loaded (`Bucket::memory_bytes`).
    pub memory_bytes: u64,
    pub inputs: Vec<TensorSig>,
    pub outputs: Vec<TensorSig>,
    /// Session settings it is loaded with (paths relative to the bundle, as `./...`; re-derived at load).
    pub load_session: SessionConfig,
    /// Nodes per execution provider as ONNX Runtime assigned them when the build loaded it (empty if the build
    /// could not load it here, e.g. GPU engines built on a machine without the GPU).
    pub providers: Vec<ProviderNodes>,
    /// TensorRT: the engine's TensorRT version and GPU architecture (from its EPContext node), checked at load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensorrt: Option<crate::tensorrt::EngineStamp>,
    /// `file` is a shape-polymorphic graph whose one session serves every bucket listing it ([`GraphForm::Shared`]).
    pub shared: bool,
    /// The bucket's captured-CUDA-graph key on its session (`None`: not captured; see [`crate::graph::capture_keys`]).
    pub gpu_graph_id: Option<i64>,
}

/// One profile of an engine: its bounds and the buckets kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineProfile {
    pub profile: Profile,
    pub graphs: Vec<EngineGraph>,
}

/// A bucket `build-engine` left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DroppedBucket {
    pub profile: String,
    pub bucket: Bucket,
    pub memory_bytes: u64,
    pub reason: String,
}

/// A Toto 2.0 graph set `build-engine` left out, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Toto2Dropped {
    pub profile: String,
    pub set: String,
    pub memory_bytes: u64,
    pub reason: String,
}

/// `manifest.json` of an engine bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineManifest {
    pub format: String,
    pub format_version: u32,
    pub totoc_version: String,
    /// ONNX Runtime version that built it (TensorRT engines only load with the same one).
    pub ort_version: String,
    pub target: Target,
    /// The precision of the graphs it runs.
    pub precision: Precision,
    /// A CPU engine of fp16 graphs: it runs their fp16 emulation (accuracy, not speed; see the module docs).
    pub fp16_emulation: bool,
    /// Sessions per bucket or per graph kind.
    pub graphs: GraphForm,
    pub source: SourceBundle,
    /// The model generation and its config, as in the export manifest.
    pub model: AnyConfig,
    /// The weight file every bucket shares.
    pub weights_file: String,
    /// Bytes of the weights every bucket shares.
    pub weights_bytes: u64,
    /// How many copies of the weights the engine holds when every session is loaded: 1 on CPU and CUDA (shared
    /// by all sessions); on TensorRT one per engine (one per graph kind when shared, one per bucket otherwise).
    pub weight_copies: usize,
    /// The memory budget the engine was built for (buckets beyond it were dropped).
    pub memory_budget: u64,
    /// Toto 1.0 profiles (empty in a Toto 2.0 engine).
    pub profiles: Vec<EngineProfile>,
    pub dropped: Vec<DroppedBucket>,
    /// Toto 2.0 profiles: the graph sets kept (absent in a Toto 1.0 engine; see [`crate::toto2::engine`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toto2_profiles: Vec<Toto2ProfileEntry>,
    /// Toto 2.0 graph sets left out for the memory budget, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toto2_dropped: Vec<Toto2Dropped>,
    /// Every file of the bundle except `manifest.json`.
    pub files: Vec<FileEntry>,
    /// What the engine was built from (source manifest hash, totoc and ONNX Runtime versions, target, options;
    /// GPU targets also the GPU architecture and TensorRT version): `build-engine` skips the work when they are
    /// unchanged ([`exporter::build_cache`]). Absent in older manifests.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub inputs: BuildInputs,
}

impl EngineManifest {
    /// Reads `dir/manifest.json` (no hash check; [`EngineBundle::load`] does that).
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let not_engine = |e: serde_json::Error| Error::Engine {
            path: path.clone(),
            message: format!("not a totoc engine manifest ({e}); build one with `totoc build-engine`"),
        };
        let tag: FormatTag = serde_json::from_str(&text).map_err(not_engine)?;
        if tag.format.starts_with("totoc-export/") {
            return Err(Error::Engine {
                path,
                message: format!(
                    "this is an export bundle, not an engine: build an engine from it with `totoc build-engine \
                     --artifacts {} --out ENGINE`",
                    dir.display()
                ),
            });
        }
        if tag.format != ENGINE_FORMAT {
            let message = format_mismatch("engine bundle", &tag.format, ENGINE_FORMAT, "totoc build-engine");
            return Err(Error::Engine { path, message });
        }
        serde_json::from_str(&text).map_err(not_engine)
    }

    /// Every bucket graph of every profile.
    pub fn graphs(&self) -> impl Iterator<Item = (&EngineProfile, &EngineGraph)> {
        self.profiles.iter().flat_map(|p| p.graphs.iter().map(move |g| (p, g)))
    }

    /// Bytes of weights resident when every session is loaded: [`weights_bytes`](Self::weights_bytes) per copy.
    pub fn resident_weight_bytes(&self) -> u64 {
        self.weights_bytes * self.weight_copies.max(1) as u64
    }

    /// How responses name the engine: `cpu (onnxruntime 1.31.1)`, `cuda fp16 (onnxruntime 1.31.1)`,
    /// `cpu fp16-emulation (onnxruntime 1.31.1)`.
    pub fn label(&self) -> String {
        let precision = match (self.precision, self.fp16_emulation) {
            (Precision::Fp32, _) => String::new(),
            (_, true) => " fp16-emulation".to_string(),
            (p, false) => format!(" {p}"),
        };
        format!("{}{precision} (onnxruntime {})", self.target.name(), self.ort_version)
    }
}

/// How an engine's buckets map to sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GraphForm {
    /// One static graph, and one session, per bucket (CPU and CUDA: the weights are shared between sessions by
    /// [`SharedWeights`]; TensorRT: one engine, and one copy of the weights, per bucket, each with its own CUDA
    /// graph).
    PerBucket,
    /// One shape-polymorphic graph, and one session, per graph kind, serving all of that kind's buckets (TensorRT:
    /// one engine per kind — the weights once per kind on the GPU, however many buckets — built with
    /// optimisation profiles covering the buckets, see [`crate::tensorrt`]). Needs an opset-24 bundle.
    Shared,
}

impl GraphForm {
    /// TensorRT shares (its engines carry their weights); CPU and CUDA share weights across per-bucket sessions.
    pub fn default_for(target: &Target) -> GraphForm {
        match target {
            Target::TensorRt { .. } => GraphForm::Shared,
            _ => GraphForm::PerBucket,
        }
    }
}

/// Options of [`build_engine`] besides the paths and the target.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// `--ort-lib` (see [`runtime`]).
    pub ort_lib: Option<PathBuf>,
    /// Only these profiles (empty: all).
    pub profiles: Vec<String>,
    /// Replace a non-empty output directory.
    pub force: bool,
    /// Bytes the engine may use (weights + loaded buckets); default [`crate::memory::default_budget`].
    pub memory_budget: Option<u64>,
    /// Which of the bundle's precisions to build (default: fp32 if it holds fp32 graphs, else its only one).
    pub precision: Option<Precision>,
    /// Sessions per bucket or per graph kind (default: [`GraphForm::default_for`] the target).
    pub graphs: Option<GraphForm>,
}

/// Progress of a build.
#[derive(Debug, Clone)]
pub enum BuildEvent {
    /// The export bundle verified; `graphs` bucket graphs to build, of `precision` (`emulation`: CPU fp16).
    Start { graphs: usize, precision: Precision, emulation: bool },
    /// A bucket left out: its buffers plus the weights exceed the budget.
    Dropped { file: String, memory_bytes: u64, budget: u64 },
    /// One graph built and checked (`index` of `total`, from 1).
    Graph { file: String, seconds: f64, index: usize, total: usize },
    /// The engine at `out` was built from the same inputs and is intact: nothing is written.
    UpToDate,
    /// The engine at `out` came from other inputs (`name: old → new` each) and is being replaced.
    Rebuilding { changed: Vec<String> },
}

/// The precision to build: the one asked for (it must be in the bundle), else fp32 if present, else the only one.
pub fn pick_precision(asked: Option<Precision>, held: &[Precision], bundle: &Path) -> Result<Precision> {
    let held_list = held.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ");
    match asked {
        Some(p) if held.contains(&p) => Ok(p),
        Some(p) => Err(Error::Engine {
            path: bundle.to_path_buf(),
            message: format!(
                "the export bundle holds {held_list} graphs, not {p}: re-export it with `totoc export ... \
                 --precision {p}` (repeatable: a bundle can hold both)"
            ),
        }),
        None if held.contains(&Precision::Fp32) => Ok(Precision::Fp32),
        None => held.first().copied().ok_or_else(|| Error::Engine {
            path: bundle.to_path_buf(),
            message: "the export bundle lists no precision; re-export it".into(),
        }),
    }
}

/// What an engine's bytes depend on ([`exporter::build_cache`]): the source bundle, totoc, ONNX Runtime, the
/// target and the build options; GPU targets also the GPU architecture and (TensorRT) its version.
#[allow(clippy::too_many_arguments)]
pub(crate) fn engine_inputs(
    source_sha: &str,
    ort_version: &str,
    target: &Target,
    precision: Precision,
    form: GraphForm,
    options: &BuildOptions,
    budget: u64,
    tensorrt: Option<Version>,
) -> BuildInputs {
    let mut inputs = BuildInputs::from([
        ("source.manifest.json".to_string(), source_sha.to_string()),
        ("totoc".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ("onnxruntime".to_string(), ort_version.to_string()),
        ("target".to_string(), serde_json::to_string(target).expect("target serialises")),
        ("precision".to_string(), precision.as_str().to_string()),
        ("graphs".to_string(), format!("{form:?}")),
        (
            "profiles".to_string(),
            if options.profiles.is_empty() { "all".into() } else { options.profiles.join(",") },
        ),
        ("memory_budget".to_string(), budget.to_string()),
    ]);
    if let Some(v) = tensorrt {
        inputs.insert("tensorrt".into(), v.to_string());
    }
    if let Target::Cuda { device, .. } | Target::TensorRt { device, .. } = target {
        let arch = crate::doctor::gpu_architecture(*device as usize);
        inputs.insert("gpu_architecture".into(), arch.unwrap_or_else(|| "unknown".into()));
    }
    inputs
}

/// The engine at `out` when it was built from `inputs` and is intact (`Ok`: skip the build), else how it differs
/// (`Err`, reported through `progress`). `--force` never skips.
pub(crate) fn check_cache(
    out: &Path,
    options: &BuildOptions,
    inputs: &BuildInputs,
    progress: &mut dyn FnMut(BuildEvent),
) -> Result<std::result::Result<EngineManifest, CacheCheck>> {
    let cache = if options.force { CacheCheck::Absent } else { build_cache::check(out, inputs) };
    match cache {
        CacheCheck::Hit => {
            progress(BuildEvent::UpToDate);
            Ok(Ok(EngineManifest::read(out)?))
        }
        CacheCheck::Changed(changed) => {
            progress(BuildEvent::Rebuilding { changed: changed.clone() });
            Ok(Err(CacheCheck::Changed(changed)))
        }
        CacheCheck::Absent => Ok(Err(CacheCheck::Absent)),
    }
}

impl SourceBundle {
    /// The export bundle `source` (whose `manifest.json` has sha256 `manifest_sha256`) as an engine records it.
    pub(crate) fn of(source: &Manifest, manifest_sha256: String) -> SourceBundle {
        SourceBundle {
            manifest_sha256,
            totoc_version: source.totoc_version.clone(),
            checkpoint: source.checkpoint.clone(),
            variant: source.variant,
            opset: source.opset,
            cache_update: source.cache_update.clone(),
            precisions: source.precisions.clone(),
            fp32_regions: source.fp32_regions.clone(),
        }
    }
}

/// Copies the export's golden reference cases into the engine being built (`stage`), so `totoc verify --engine`
/// works wherever the engine goes.
pub(crate) fn copy_golden_cases(source: &Manifest, artifacts: &Path, stage: &Path) -> Result<()> {
    for f in source.files.iter().filter(|f| f.path.starts_with(&format!("{GOLDEN_DIR}/"))) {
        let dst = stage.join(&f.path);
        std::fs::create_dir_all(dst.parent().expect("golden/")).map_err(|e| Error::io(&dst, e))?;
        std::fs::copy(artifacts.join(&f.path), &dst).map_err(|e| Error::io(&dst, e))?;
    }
    Ok(())
}

/// Builds an engine bundle for `target` from the export bundle at `artifacts` into `out`.
pub fn build_engine(
    artifacts: &Path,
    target: &Target,
    out: &Path,
    options: &BuildOptions,
    progress: &mut dyn FnMut(BuildEvent),
) -> Result<EngineManifest> {
    let source = Manifest::read(artifacts)?;
    source.verify_files(artifacts)?;
    let source_sha = sha256_file(&artifacts.join(MANIFEST_FILE))?;
    let model = match &source.model {
        AnyConfig::Toto1(m) => m.clone(),
        AnyConfig::Toto2(_) => {
            return crate::toto2::build::build_engine(
                artifacts, &source, source_sha, target, out, options, progress,
            )
        }
    };
    let precision = pick_precision(options.precision, &source.precisions, artifacts)?;
    backend::check_precision(target, precision)
        .map_err(|message| Error::Engine { path: artifacts.to_path_buf(), message })?;
    let emulation = matches!(target, Target::Cpu { .. }) && precision == Precision::Fp16;
    let rt = runtime::init(options.ort_lib.as_deref())?;
    let tensorrt = matches!(target, Target::TensorRt { .. }).then(crate::doctor::tensorrt_version).flatten();
    backend::check_variant(target, source.variant, Version::parse(rt.version()), tensorrt)
        .map_err(|message| Error::Engine { path: artifacts.to_path_buf(), message })?;
    // A GPU engine is built where its provider runs (TensorRT compiles for the GPU at hand, and every graph is
    // checked by loading it): registering the provider says what is missing (`totoc doctor`'s findings), before
    // anything is written.
    backend::apply_process_env(target, precision);
    backend::session_builder(
        rt,
        target,
        &session_config(target, &Stage::Load { bundle_dir: out.to_path_buf() }, precision),
    )?;
    if let Some(missing) = options.profiles.iter().find(|n| source.profile(n).is_none()) {
        return Err(Error::Engine {
            path: artifacts.to_path_buf(),
            message: format!(
                "profile {missing:?} is not in this export bundle (it has: {})",
                source.profiles.iter().map(|p| p.profile.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        });
    }
    let selected: Vec<_> = source
        .profiles
        .iter()
        .filter(|p| options.profiles.is_empty() || options.profiles.contains(&p.profile.name))
        .collect();
    let budget = options.memory_budget.unwrap_or_else(crate::memory::default_budget);
    let source_weights = source.weights_file(precision).map(str::to_string).ok_or_else(|| Error::Engine {
        path: artifacts.to_path_buf(),
        message: format!("the export bundle lists no {precision} weight file; re-export it"),
    })?;
    // The emulation's f32 copy of the fp16 weights: every tensor the selected graphs read, widened.
    let emulated_tensors = if emulation {
        let mut all = Vec::new();
        for p in &selected {
            for g in p.graphs.iter().filter(|g| g.precision == precision) {
                all.extend(emulate::externals(&read_model(&artifacts.join(&g.file))?)?);
            }
        }
        Some(all)
    } else {
        None
    };
    let weights_bytes = match &emulated_tensors {
        Some(t) => emulated_bytes(t),
        None => source.files.iter().find(|f| f.path == source_weights).map(|f| f.bytes).ok_or_else(|| {
            Error::Engine {
                path: artifacts.to_path_buf(),
                message: format!("the export bundle lists no {source_weights}; re-export it"),
            }
        })?,
    };
    if weights_bytes >= budget {
        return Err(Error::Engine {
            path: artifacts.to_path_buf(),
            message: format!(
                "the weights alone ({}) exceed the memory budget ({}); give a larger --memory-budget",
                human(weights_bytes),
                human(budget)
            ),
        });
    }

    // Which buckets to keep: every one whose buffers fit beside the weights.
    let mut dropped = Vec::new();
    let mut kept: Vec<(&Profile, Vec<&GraphEntry>)> = Vec::new();
    for p in &selected {
        let mut graphs = Vec::new();
        for g in p.graphs.iter().filter(|g| g.precision == precision) {
            // the emulation's buffers are f32
            let memory_bytes =
                if emulation { g.bucket.memory_bytes(&model, Precision::Fp32) } else { g.memory_bytes };
            if weights_bytes + memory_bytes > budget {
                progress(BuildEvent::Dropped { file: g.file.clone(), memory_bytes, budget });
                dropped.push(DroppedBucket {
                    profile: p.profile.name.clone(),
                    bucket: g.bucket,
                    memory_bytes,
                    reason: format!(
                        "its buffers ({}) and the weights ({}) exceed the memory budget ({})",
                        human(memory_bytes),
                        human(weights_bytes),
                        human(budget)
                    ),
                });
            } else {
                graphs.push(g);
            }
        }
        if !graphs.iter().any(|g| g.bucket.kind == GraphKind::Prefill) {
            return Err(Error::Engine {
                path: artifacts.to_path_buf(),
                message: format!(
                    "no prefill bucket of profile {:?} fits the memory budget ({}); give a larger --memory-budget",
                    p.profile.name,
                    human(budget)
                ),
            });
        }
        kept.push((&p.profile, graphs));
    }
    let total: usize = kept.iter().map(|(_, g)| g.len()).sum();

    // Sessions per bucket, or one shape-polymorphic session per graph kind.
    let form = options.graphs.unwrap_or_else(|| GraphForm::default_for(target));
    let mut dynamic: Vec<&DynamicGraphEntry> = Vec::new();
    if form == GraphForm::Shared {
        for kind in GraphKind::ALL {
            if !kept.iter().flat_map(|(_, g)| g.iter()).any(|g| g.bucket.kind == kind) {
                continue;
            }
            let d = source.dynamic_graphs.iter().find(|d| d.kind == kind && d.precision == precision);
            dynamic.push(d.ok_or_else(|| Error::Engine {
                path: artifacts.to_path_buf(),
                message: format!(
                    "the export bundle has no shape-polymorphic {precision} {} graph (bundles written with \
                     --opset 24 have them): re-export it, or build with `--graphs per-bucket`",
                    kind.as_str()
                ),
            })?);
        }
    }
    let session_file = |g: &GraphEntry| -> String {
        match dynamic.iter().find(|d| d.kind == g.bucket.kind) {
            Some(d) => d.file.clone(),
            None => g.file.clone(),
        }
    };
    let keyed: Vec<(Bucket, String)> =
        kept.iter().flat_map(|(_, gs)| gs.iter().map(|g| (g.bucket, session_file(g)))).collect();
    let captures = crate::graph::capture_keys(target, &keyed)
        .map_err(|message| Error::Engine { path: artifacts.to_path_buf(), message })?;
    let weight_copies = match (target, form) {
        (Target::TensorRt { .. }, GraphForm::Shared) => dynamic.len(),
        (Target::TensorRt { .. }, GraphForm::PerBucket) => total,
        _ => 1,
    };

    let inputs = engine_inputs(&source_sha, rt.version(), target, precision, form, options, budget, tensorrt);
    let cache = match check_cache(out, options, &inputs, progress)? {
        Ok(up_to_date) => return Ok(up_to_date),
        Err(cache) => cache,
    };

    progress(BuildEvent::Start { graphs: total, precision, emulation });
    let stage = StagingDir::new(out, options.force || cache.replaces())?;
    let load_cfg = session_config(target, &Stage::Load { bundle_dir: stage.path().to_path_buf() }, precision);
    let (weights_file, emulated) = match &emulated_tensors {
        Some(tensors) => {
            let w = emulate::write_emulated_weights(
                artifacts,
                tensors,
                &stage.path().join(EMULATED_WEIGHTS),
                EMULATED_WEIGHTS,
            )?;
            (EMULATED_WEIGHTS.to_string(), Some(w))
        }
        None => {
            if !matches!(target, Target::TensorRt { .. }) {
                let (from, to) = (artifacts.join(&source_weights), stage.path().join(&source_weights));
                std::fs::copy(&from, &to).map_err(|e| Error::io(&to, e))?;
            }
            (source_weights.clone(), None)
        }
    };
    let check = provider_present(rt, target);
    // The check needs ONNX Runtime to parse, optimise and plan each graph, not to repack its weights for the
    // matmul kernels (half of a session's creation time, and it would be redone at load anyway).
    let mut check_cfg = load_cfg.clone();
    check_cfg.config_entries.push(("session.disable_prepacking".into(), "1".into()));
    let weights = SharedWeights::for_target(rt, target);
    // Shared form: each kind's graph is built (or copied) once, with every kept bucket of the kind in its
    // TensorRT profiles, and checked as one session.
    let mut built: Vec<(GraphKind, String, Option<crate::tensorrt::EngineStamp>, Option<SharedSession>)> =
        Vec::new();
    for d in &dynamic {
        let buckets: Vec<Vec<TensorSig>> = kept
            .iter()
            .flat_map(|(_, gs)| gs.iter())
            .filter(|g| g.bucket.kind == d.kind)
            .map(|g| d.inputs.iter().map(|s| s.at(g.bucket.rows, g.bucket.slots)).collect())
            .collect();
        let stem = d.file.strip_suffix(".onnx").unwrap_or(&d.file).to_string();
        let (file, stamp) = match (target, &emulated) {
            (Target::TensorRt { .. }, _) => {
                let layout = crate::tensorrt::profile_layout(Version::parse(rt.version()));
                let profiles = crate::tensorrt::profile_options(&d.inputs, &buckets, layout);
                let (file, stamp) = build_tensorrt(
                    rt,
                    target,
                    precision,
                    &profiles,
                    &artifacts.join(&d.file),
                    stage.path(),
                    &stem,
                )?;
                (file, Some(stamp))
            }
            (_, Some(w)) => (write_emulation(&artifacts.join(&d.file), w, stage.path(), &stem)?, None),
            _ => {
                let to = stage.path().join(&d.file);
                std::fs::copy(artifacts.join(&d.file), &to).map_err(|e| Error::io(&to, e))?;
                (d.file.clone(), None)
            }
        };
        let session =
            if check {
                let path = stage.path().join(&file);
                Some(weights.trim_while(|| {
                    SharedSession::open(rt, &path, &file, target, &check_cfg, Some(&weights))
                })?)
            } else {
                None
            };
        built.push((d.kind, file, stamp, session));
    }
    let mut profiles = Vec::new();
    let mut index = 0;
    for (profile, graphs) in kept {
        let mut out_graphs = Vec::new();
        for g in graphs {
            index += 1;
            let t = Instant::now();
            let stem = g.file.strip_suffix(".onnx").unwrap_or(&g.file).to_string();
            let shared = built.iter().find(|b| b.0 == g.bucket.kind);
            let (file, stamp) = match (target, &emulated, shared) {
                (_, _, Some((_, file, stamp, _))) => (file.clone(), stamp.clone()),
                (Target::TensorRt { .. }, _, None) => {
                    let (file, stamp) = build_tensorrt(
                        rt,
                        target,
                        precision,
                        &[],
                        &artifacts.join(&g.file),
                        stage.path(),
                        &stem,
                    )?;
                    (file, Some(stamp))
                }
                (_, Some(w), None) => {
                    (write_emulation(&artifacts.join(&g.file), w, stage.path(), &stem)?, None)
                }
                _ => {
                    let to = stage.path().join(&g.file);
                    std::fs::copy(artifacts.join(&g.file), &to).map_err(|e| Error::io(&to, e))?;
                    (g.file.clone(), None)
                }
            };
            // A shared graph's bucket binds the graph's inputs (its time mask too) at the bucket's sizes.
            let (inputs, outputs) = match dynamic.iter().find(|d| d.kind == g.bucket.kind) {
                Some(d) => (
                    d.inputs.iter().map(|s| s.at(g.bucket.rows, g.bucket.slots)).collect(),
                    d.outputs.iter().map(|s| s.at(g.bucket.rows, g.bucket.slots)).collect(),
                ),
                None => (g.inputs.clone(), g.outputs.clone()),
            };
            let (inputs, outputs, memory_bytes): (Vec<TensorSig>, Vec<TensorSig>, u64) = if emulation {
                (
                    inputs.iter().map(widened).collect(),
                    outputs.iter().map(widened).collect(),
                    g.bucket.memory_bytes(&model, Precision::Fp32),
                )
            } else {
                (inputs, outputs, g.memory_bytes)
            };
            let gpu_graph_id = match captures[index - 1] {
                crate::graph::Capture::Graph { gpu_graph_id } => Some(gpu_graph_id),
                crate::graph::Capture::No => None,
            };
            let mut entry = EngineGraph {
                bucket: g.bucket,
                dims: g.dims,
                file,
                source_file: g.file.clone(),
                memory_bytes,
                inputs,
                outputs,
                load_session: session_config(target, &Stage::Load { bundle_dir: ".".into() }, precision),
                providers: Vec::new(),
                tensorrt: stamp,
                shared: shared.is_some(),
                gpu_graph_id,
            };
            // Create its session where its provider exists: the graph must load and its I/O must be the
            // manifest's. No I/O is allocated (the largest caches are gigabytes), so the check stays cheap.
            match shared {
                Some((_, _, _, Some(session))) => {
                    let path = stage.path().join(&entry.file);
                    session
                        .check_bucket(&entry.inputs, &entry.outputs)
                        .map_err(|message| Error::Engine { path, message })?;
                    entry.providers = session.providers().to_vec();
                }
                Some((_, _, _, None)) => {}
                None if check => {
                    let path = stage.path().join(&entry.file);
                    let c = weights.trim_while(|| {
                        GraphRunner::check(rt, &path, &entry.file, target, &check_cfg, Some(&weights))
                    })?;
                    check_signature(&c.inputs, &c.outputs, &entry, &path)?;
                    entry.providers = c.providers;
                }
                None => {}
            }
            progress(BuildEvent::Graph {
                file: entry.file.clone(),
                seconds: t.elapsed().as_secs_f64(),
                index,
                total,
            });
            out_graphs.push(entry);
        }
        profiles.push(EngineProfile { profile: profile.clone(), graphs: out_graphs });
    }

    // The export's golden toto-ts cases travel with the engine, so `totoc verify --engine` works anywhere.
    copy_golden_cases(&source, artifacts, stage.path())?;
    let files = bundle_files(stage.path())?;
    let manifest = EngineManifest {
        format: ENGINE_FORMAT.into(),
        format_version: ENGINE_FORMAT_VERSION,
        totoc_version: env!("CARGO_PKG_VERSION").into(),
        ort_version: rt.version().to_string(),
        target: target.clone(),
        precision,
        fp16_emulation: emulation,
        graphs: form,
        source: SourceBundle::of(&source, source_sha),
        model: AnyConfig::Toto1(model),
        weights_file,
        weights_bytes,
        weight_copies,
        memory_budget: budget,
        profiles,
        dropped,
        toto2_profiles: Vec::new(),
        toto2_dropped: Vec::new(),
        files: file_entries(stage.path(), &files)?,
        inputs,
    };
    let json = serde_json::to_vec_pretty(&manifest).expect("engine manifest serialises");
    exporter::integrity::write_manifest(stage.path(), &json)?;
    stage.commit()?;
    Ok(manifest)
}

pub(crate) fn read_model(path: &Path) -> Result<ModelProto> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    ModelProto::decode(&*bytes).map_err(|e| Error::Engine {
        path: path.to_path_buf(),
        message: format!("not an ONNX model ({e}); re-export the bundle"),
    })
}

/// Bytes of the emulation's f32 weight file for `tensors` (each tensor once, f16 widened; padding not counted).
fn emulated_bytes(tensors: &[emulate::External]) -> u64 {
    let mut seen = std::collections::HashSet::new();
    tensors
        .iter()
        .filter(|t| seen.insert((t.location.clone(), t.offset, t.length)))
        .map(|t| if t.elem == exporter::graph::types::ElemType::F16 { t.length * 2 } else { t.length })
        .sum()
}

/// An emulation graph's signature: every f16 input and output is f32.
fn widened(s: &TensorSig) -> TensorSig {
    let dtype = if s.dtype == DType::F16 { DType::F32 } else { s.dtype };
    TensorSig { dtype, ..s.clone() }
}

/// Writes the fp16 emulation of the graph at `model` (file stem `stem`, e.g. `small.decode.n8.t25.fp16`) into
/// `out`; returns its file name.
fn write_emulation(model: &Path, weights: &EmulatedWeights, out: &Path, stem: &str) -> Result<String> {
    let m = emulate::emulate(&read_model(model)?, weights)?;
    let file = format!("{}-emulated.onnx", stem);
    write_atomic(&out.join(&file), &m.encode_to_vec())?;
    Ok(file)
}

/// Whether `target`'s provider can be used here (always for CPU).
pub(crate) fn provider_present(rt: &Runtime, target: &Target) -> bool {
    match target {
        Target::Cpu { .. } => true,
        _ => rt.available_providers().iter().any(|p| p == target.provider_name()),
    }
}

/// Builds the TensorRT engine of one graph as an EPContext model in `out`; returns its file (relative to `out`)
/// and the engine's stamp. Refuses an engine TensorRT did not take whole ([`crate::tensorrt`]).
fn build_tensorrt(
    rt: &Runtime,
    target: &Target,
    precision: Precision,
    profiles: &[(String, String)],
    model: &Path,
    out: &Path,
    stem: &str,
) -> Result<(String, crate::tensorrt::EngineStamp)> {
    let mut cfg = session_config(
        target,
        &Stage::Build { out_dir: out.to_path_buf(), stem: stem.to_string() },
        precision,
    );
    // A shape-polymorphic graph's optimisation profiles (every bucket of its kind; see `crate::tensorrt`).
    if let Some(p) = cfg.providers.first_mut() {
        p.options.extend(profiles.iter().cloned());
    }
    let graph_err = |message: String| Error::Session { graph: stem.to_string(), message };
    // Any node TensorRT does not take keeps its weights in a file next to the EPContext model.
    cfg.config_entries.push((
        "ep.context_model_external_initializers_file_name".into(),
        format!("{stem}.trt_ctx.weights.bin"),
    ));
    std::fs::create_dir_all(out.join("trt")).map_err(|e| Error::io(&out.join("trt"), e))?;
    let mut b = backend::session_builder(rt, target, &cfg)?;
    b.commit_from_file(model)
        .map_err(|e| graph_err(format!("building TensorRT engines for {}: {e}", model.display())))?;
    let file = backend::ep_context_file(stem);
    let ctx = out.join(&file);
    if !ctx.exists() {
        return Err(graph_err(format!(
            "TensorRT did not write the EPContext model {file} (is the whole graph supported by TensorRT?)"
        )));
    }
    let mut model = ModelProto::decode(&*std::fs::read(&ctx).map_err(|e| Error::io(&ctx, e))?)
        .map_err(|e| graph_err(format!("reading the EPContext model {file}: {e}")))?;
    crate::tensorrt::check_all_on_tensorrt(&model).map_err(graph_err)?;
    let stamp = crate::tensorrt::EngineStamp::of(&model).expect("checked: has an EPContext node");
    let roots = [out.to_path_buf(), out.canonicalize().unwrap_or_else(|_| out.to_path_buf())];
    if relativize_ep_cache_paths(&mut model, &roots).map_err(graph_err)? {
        write_atomic(&ctx, &model.encode_to_vec())?;
    }
    Ok((file, stamp))
}

/// With `embed_mode=0` an EPContext node's `ep_cache_context` is the engine's path. Paths that point into the
/// build directory (absolute, as `trt_engine_cache_path` is) become relative to it, so the bundle can move; ONNX
/// Runtime resolves relative paths against the EPContext model's directory. Returns whether anything changed.
fn relativize_ep_cache_paths(model: &mut ModelProto, roots: &[PathBuf]) -> std::result::Result<bool, String> {
    let mut changed = false;
    let Some(g) = model.graph.as_mut() else { return Ok(false) };
    for n in g.node.iter_mut().filter(|n| n.op_type == "EPContext") {
        let embedded = n.attribute.iter().any(|a| a.name == "embed_mode" && a.i == 1);
        for a in n.attribute.iter_mut().filter(|a| a.name == "ep_cache_context" && !embedded) {
            let value = String::from_utf8_lossy(&a.s).into_owned();
            let p = Path::new(&value);
            if !p.is_absolute() {
                continue;
            }
            let rel = roots.iter().find_map(|r| p.strip_prefix(r).ok()).ok_or_else(|| {
                format!("EPContext node {} points at {value}, outside the engine bundle", n.name)
            })?;
            a.s = rel.to_string_lossy().into_owned().into_bytes();
            changed = true;
        }
    }
    Ok(changed)
}

/// Every file under `dir` (relative, `/`-separated, sorted), except `manifest.json` and its hash file.
pub(crate) fn bundle_files(dir: &Path) -> Result<Vec<String>> {
    let mut files = exporter::integrity::files_under(dir)?;
    files.retain(|f| f != MANIFEST_FILE && f != exporter::integrity::MANIFEST_HASH_FILE);
    Ok(files)
}

/// The loaded graph's I/O must be exactly the signature the manifest records.
fn check_signature(inputs: &[TensorSig], outputs: &[TensorSig], g: &EngineGraph, path: &Path) -> Result<()> {
    check_io(inputs, outputs, &g.inputs, &g.outputs, path)
}

/// [`check_signature`] against explicit expected inputs and outputs.
pub(crate) fn check_io(
    inputs: &[TensorSig],
    outputs: &[TensorSig],
    want_inputs: &[TensorSig],
    want_outputs: &[TensorSig],
    path: &Path,
) -> Result<()> {
    for (what, want, got) in [("input", want_inputs, inputs), ("output", want_outputs, outputs)] {
        for w in want {
            match got.iter().find(|s| s.name == w.name) {
                Some(s) if s == w => {}
                Some(s) => {
                    return Err(Error::Engine {
                        path: path.to_path_buf(),
                        message: format!(
                            "{what} `{}` is {:?} {:?}, the manifest says {:?} {:?}",
                            w.name, s.dtype, s.shape, w.dtype, w.shape
                        ),
                    })
                }
                None => {
                    return Err(Error::Engine {
                        path: path.to_path_buf(),
                        message: format!("{what} `{}` of the manifest is missing from the graph", w.name),
                    })
                }
            }
        }
    }
    Ok(())
}

/// A verified engine bundle: its manifest, the runtime and the weights its graphs share. Bucket graphs are
/// loaded on demand with [`load_graph`](Self::load_graph).
pub struct EngineBundle {
    dir: PathBuf,
    manifest: EngineManifest,
    rt: &'static Runtime,
    weights: SharedWeights,
    /// Sessions of shape-polymorphic graphs, opened once and shared by their buckets' runners.
    shared: std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<SharedSession>>>,
}

impl std::fmt::Debug for EngineBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBundle")
            .field("dir", &self.dir)
            .field("target", &self.manifest.target)
            .finish_non_exhaustive()
    }
}

impl EngineBundle {
    /// Opens the engine bundle at `dir`: reads its manifest, checks the size and sha256 of **every** file (a
    /// mismatch names the file and refuses the bundle) and loads ONNX Runtime (`ort_lib`: see [`runtime`]).
    /// No graph is loaded yet.
    pub fn load(dir: &Path, ort_lib: Option<&Path>) -> Result<Self> {
        let manifest = EngineManifest::read(dir)?;
        exporter::integrity::require_intact(dir, "totoc build-engine")?;
        // CPU threads are one process-wide pool (see `runtime`): a count recorded at build time is its default,
        // unless the caller already chose one (`runtime::set_intra_threads`) or the runtime is already running.
        if let Target::Cpu { threads: Some(n) } = manifest.target {
            runtime::default_intra_threads(n);
        }
        let rt = runtime::init(ort_lib)?;
        if let Target::TensorRt { device, .. } = manifest.target {
            if manifest.ort_version != rt.version() {
                return Err(Error::Engine {
                    path: dir.to_path_buf(),
                    message: format!(
                        "TensorRT engines were built with ONNX Runtime {}, this process loaded {} from {}; rebuild \
                         the engine with `totoc build-engine --target tensorrt`",
                        manifest.ort_version,
                        rt.version(),
                        rt.library().display()
                    ),
                });
            }
            // An engine runs only with the TensorRT and GPU architecture it was built for: say so before the
            // provider fails to deserialise it (or silently rebuilds it without the EPContext).
            let (trt, arch) =
                (crate::doctor::tensorrt_version(), crate::doctor::gpu_architecture(device as usize));
            for (_, g) in manifest.graphs() {
                if let Some(stamp) = &g.tensorrt {
                    crate::tensorrt::check_stamp(stamp, trt, arch.as_deref())
                        .map_err(|message| Error::Engine { path: dir.join(&g.file), message })?;
                }
            }
        }
        if manifest.target.is_gpu() {
            backend::apply_process_env(&manifest.target, manifest.precision);
        }
        let weights = SharedWeights::for_target(rt, &manifest.target);
        Ok(EngineBundle { dir: dir.to_path_buf(), manifest, rt, weights, shared: Default::default() })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &EngineManifest {
        &self.manifest
    }

    pub fn target(&self) -> &Target {
        &self.manifest.target
    }

    /// Loads one Toto 2.0 graph (weights shared as for [`load_graph`](Self::load_graph)) and checks its I/O
    /// against the manifest.
    pub fn load_toto2_graph(&self, g: &exporter::toto2::export::Toto2GraphFile) -> Result<GraphRunner> {
        let mut cfg = session_config(
            self.target(),
            &Stage::Load { bundle_dir: self.dir.clone() },
            self.manifest.precision,
        );
        // No memory pattern: a Toto 2.0 pass allocates a few large activations, and ONNX Runtime's second run
        // allocates the pattern's one block beside the first run's separate buffers still held in the arena
        // (22m, 64 rows: 261 MB after one run, 375 MB after two; without the pattern 261 and 286 MB).
        cfg.memory_pattern = false;
        let path = self.dir.join(&g.file);
        let name = g.file.strip_suffix(".onnx").unwrap_or(&g.file);
        let r = self.weights.trim_while(|| {
            GraphRunner::load(self.rt, &path, name, self.target(), &cfg, Some(&self.weights))
        })?;
        self.weights.release_pages();
        let (inputs, outputs): (Vec<TensorSig>, Vec<TensorSig>) =
            (r.inputs().cloned().collect(), r.outputs().cloned().collect());
        check_io(&inputs, &outputs, &g.inputs, &g.outputs, &path)?;
        Ok(r)
    }

    /// Loads one bucket's graph (its weights shared with every other loaded graph of this bundle on CPU), with
    /// all of its I/O allocated, and checks its I/O against the manifest.
    pub fn load_graph(&self, g: &EngineGraph) -> Result<GraphRunner> {
        let cfg = session_config(
            self.target(),
            &Stage::Load { bundle_dir: self.dir.clone() },
            self.manifest.precision,
        );
        let path = self.dir.join(&g.file);
        let name = g.file.strip_suffix(".onnx").unwrap_or(&g.file);
        if g.shared {
            // one session of the shape-polymorphic graph for every bucket listing it (opened on first use)
            let session = {
                let mut open = self.shared.lock().unwrap_or_else(|p| p.into_inner());
                match open.get(&g.file) {
                    Some(s) => s.clone(),
                    None => {
                        let s = self.weights.trim_while(|| {
                            SharedSession::open(
                                self.rt,
                                &path,
                                name,
                                self.target(),
                                &cfg,
                                Some(&self.weights),
                            )
                        })?;
                        let s = std::sync::Arc::new(s);
                        open.insert(g.file.clone(), s.clone());
                        s
                    }
                }
            };
            self.weights.release_pages();
            let label = g.source_file.strip_suffix(".onnx").unwrap_or(&g.source_file);
            return GraphRunner::load_bucket(
                &session,
                label,
                self.target(),
                g.inputs.clone(),
                g.outputs.clone(),
                g.gpu_graph_id.unwrap_or(0),
            );
        }
        let r = self.weights.trim_while(|| {
            GraphRunner::load(self.rt, &path, name, self.target(), &cfg, Some(&self.weights))
        })?;
        self.weights.release_pages();
        let (inputs, outputs): (Vec<TensorSig>, Vec<TensorSig>) =
            (r.inputs().cloned().collect(), r.outputs().cloned().collect());
        check_signature(&inputs, &outputs, g, &path)?;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exporter::pb::{AttributeProto, GraphProto, NodeProto};

    fn ctx_model(path: &str, embed: i64) -> ModelProto {
        let attr = |name: &str, s: &str, i: i64| AttributeProto {
            name: name.into(),
            s: s.as_bytes().to_vec(),
            i,
            ..Default::default()
        };
        ModelProto {
            graph: Some(GraphProto {
                node: vec![NodeProto {
                    op_type: "EPContext".into(),
                    name: "trt_0".into(),
                    domain: "com.microsoft".into(),
                    attribute: vec![attr("embed_mode", "", embed), attr("ep_cache_context", path, 0)],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn cache_context(m: &ModelProto) -> String {
        let n = &m.graph.as_ref().unwrap().node[0];
        String::from_utf8(n.attribute.iter().find(|a| a.name == "ep_cache_context").unwrap().s.clone())
            .unwrap()
    }

    #[test]
    fn ep_context_engine_paths_become_bundle_relative() {
        let roots = [PathBuf::from("/out/engine.partial-1")];
        let mut m = ctx_model("/out/engine.partial-1/trt/p.decode_sm90.engine", 0);
        assert_eq!(relativize_ep_cache_paths(&mut m, &roots), Ok(true));
        assert_eq!(cache_context(&m), "trt/p.decode_sm90.engine");
        let mut rel = ctx_model("trt/x.engine", 0);
        assert_eq!(relativize_ep_cache_paths(&mut rel, &roots), Ok(false));
        let mut outside = ctx_model("/elsewhere/x.engine", 0);
        assert!(relativize_ep_cache_paths(&mut outside, &roots)
            .unwrap_err()
            .contains("outside the engine bundle"));
        // embed_mode 1: the attribute is the engine itself, never a path
        let mut embedded = ctx_model("/out/engine.partial-1/bytes", 1);
        assert_eq!(relativize_ep_cache_paths(&mut embedded, &roots), Ok(false));
    }

    #[test]
    fn precision_defaults_to_fp32_and_must_be_held() {
        let b = Path::new("/b");
        let both = [Precision::Fp32, Precision::Fp16];
        assert_eq!(pick_precision(None, &both, b).unwrap(), Precision::Fp32);
        assert_eq!(pick_precision(None, &[Precision::Fp16], b).unwrap(), Precision::Fp16);
        assert_eq!(pick_precision(Some(Precision::Fp16), &both, b).unwrap(), Precision::Fp16);
        let e = pick_precision(Some(Precision::Fp16), &[Precision::Fp32], b).unwrap_err().to_string();
        assert!(e.contains("holds fp32 graphs, not fp16") && e.contains("--precision fp16"), "{e}");
    }

    #[test]
    fn bundles_can_be_shared_between_threads() {
        fn sync<T: Send + Sync>() {}
        sync::<EngineBundle>();
    }

    #[test]
    fn manifest_json_round_trips() {
        let target = Target::tensorrt(0, true);
        let cfg = session_config(&target, &Stage::Load { bundle_dir: ".".into() }, Precision::Fp16);
        let json = serde_json::to_string(&cfg).unwrap();
        assert_eq!(serde_json::from_str::<SessionConfig>(&json).unwrap(), cfg);
    }
}
