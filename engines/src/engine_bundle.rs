//! Engine bundles: `totoc build-engine` turns a verified export bundle into a directory of graphs ready for one
//! target, and [`EngineBundle`] loads it back (hash-checked) and creates each profile's [`GraphRunner`]s lazily.
//!
//! Layout (written atomically through a staging directory):
//! ```text
//! manifest.json                 format totoc-engine/1: target, session options, source bundle hash and
//!                               signatures, sha256 + size of every other file
//! weights.opt.bin               CPU/CUDA: every weight of every optimised graph once (content-deduplicated)
//! <profile>.<graph>.opt.onnx    CPU/CUDA: ONNX Runtime's optimised graph (level Extended), weights external
//! <profile>.<graph>.trt_ctx.onnx  TensorRT: EPContext model (embed_mode 0) ...
//! trt/                            ... and the TensorRT engines + timing cache it points to
//! ```
//! ONNX Runtime writes one weight file per optimised graph (`session.optimized_model_external_initializers_file_name`,
//! initializers ≥ 1 KiB; ~0.93 MB per graph for the tiny test model, i.e. the whole model once per graph). The
//! prefill and decode graphs hold the same weights under the same names, so the build merges them into one
//! content-addressed `weights.opt.bin` and points every optimised graph at it; each rewritten graph is then
//! checked against ONNX Runtime's own file on a deterministic input (bit-for-bit) before it is kept.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use exporter::config::ModelConfig;
use exporter::export::GOLDEN_DIR;
use exporter::fsutil::{sha256_bytes, sha256_file, write_atomic, StagingDir};
use exporter::manifest::{file_entries, verify_files, CheckpointInfo, FileEntry, Manifest, MANIFEST_FILE};
use exporter::pb::{tensor_proto, ModelProto, StringStringEntryProto};
use exporter::profile::Profile;
use exporter::signature::{DType, Dims, GraphKind, TensorSig};
use prost::Message;
use serde::{Deserialize, Serialize};

use crate::backend::{self, session_config, SessionConfig, Stage, Target};
use crate::error::{Error, Result};
use crate::graph::{CacheMode, GraphRunner, ProviderNodes, SharedWeights};
use crate::runtime::{self, Runtime};

/// Format tag of engine bundles.
pub const ENGINE_FORMAT: &str = "totoc-engine/1";
/// The merged weight file of CPU/CUDA engines.
pub const ENGINE_WEIGHTS: &str = "weights.opt.bin";

/// Where an engine came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceBundle {
    /// sha256 of the export bundle's `manifest.json` (which itself hashes every graph and weight file).
    pub manifest_sha256: String,
    pub totoc_version: String,
    pub checkpoint: CheckpointInfo,
    pub precision: DType,
    pub opset: i64,
    pub cache_update: String,
}

/// One graph of an engine profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineGraph {
    pub kind: GraphKind,
    /// The model to load, relative to the bundle.
    pub file: String,
    /// The export bundle's graph it was built from.
    pub source_file: String,
    pub inputs: Vec<TensorSig>,
    pub outputs: Vec<TensorSig>,
    /// Session settings used to build it (paths relative to the bundle, as `./...`).
    pub build_session: SessionConfig,
    /// Session settings it is loaded with (same convention; re-derived from the target at load).
    pub load_session: SessionConfig,
    /// Nodes per execution provider as ONNX Runtime assigned them when the build loaded the result (empty if
    /// the build could not load it, e.g. TensorRT engines are only checked on their GPU).
    pub providers: Vec<ProviderNodes>,
}

/// One profile of an engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineProfile {
    pub profile: Profile,
    pub dims: Dims,
    pub graphs: Vec<EngineGraph>,
}

impl EngineProfile {
    pub fn graph(&self, kind: GraphKind) -> Option<&EngineGraph> {
        self.graphs.iter().find(|g| g.kind == kind)
    }
}

/// `manifest.json` of an engine bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineManifest {
    pub format: String,
    pub totoc_version: String,
    /// ONNX Runtime version that built it (TensorRT engines only load with the same one).
    pub ort_version: String,
    pub target: Target,
    pub source: SourceBundle,
    pub model: ModelConfig,
    pub profiles: Vec<EngineProfile>,
    /// Every file of the bundle except `manifest.json`.
    pub files: Vec<FileEntry>,
}

impl EngineManifest {
    /// Reads `dir/manifest.json` (no hash check; [`EngineBundle::load`] does that).
    pub fn read(dir: &Path) -> Result<Self> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        let m: EngineManifest = serde_json::from_str(&text).map_err(|e| Error::Engine {
            path: path.clone(),
            message: format!("not a totoc engine manifest ({e}); build one with `totoc build-engine`"),
        })?;
        if m.format != ENGINE_FORMAT {
            return Err(Error::Engine {
                path,
                message: format!(
                    "engine format {:?}, this totoc reads {ENGINE_FORMAT:?}; rebuild the engine",
                    m.format
                ),
            });
        }
        Ok(m)
    }

    pub fn profile(&self, name: &str) -> Option<&EngineProfile> {
        self.profiles.iter().find(|p| p.profile.name == name)
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
}

/// Progress of a build.
#[derive(Debug, Clone)]
pub enum BuildEvent {
    /// The export bundle verified; `graphs` graphs to build.
    Start { graphs: usize },
    /// One graph optimised/compiled.
    Graph { file: String, seconds: f64 },
    /// Weights of the optimised graphs merged into one file: `unique_bytes` now in [`ENGINE_WEIGHTS`] (each
    /// tensor once), `merged_bytes` in the per-graph files ONNX Runtime wrote before merging.
    Weights { unique_bytes: u64, merged_bytes: u64 },
    /// A built graph loaded back and checked.
    Checked { file: String },
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
    check_precision(target, source.precision, artifacts)?;
    let rt = runtime::init(options.ort_lib.as_deref())?;
    let selected: Vec<_> = source
        .profiles
        .iter()
        .filter(|p| options.profiles.is_empty() || options.profiles.contains(&p.profile.name))
        .collect();
    if let Some(missing) = options.profiles.iter().find(|n| source.profile(n).is_none()) {
        return Err(Error::Engine {
            path: artifacts.to_path_buf(),
            message: format!(
                "profile {missing:?} is not in this export bundle (it has: {})",
                source.profiles.iter().map(|p| p.profile.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        });
    }
    let stage = StagingDir::new(out, options.force)?;
    progress(BuildEvent::Start { graphs: selected.len() * GraphKind::ALL.len() });

    let mut profiles = Vec::new();
    for p in &selected {
        let mut graphs = Vec::new();
        for g in &p.graphs {
            let stem = g.file.strip_suffix(".onnx").unwrap_or(&g.file).to_string();
            let t = Instant::now();
            let file = build_graph(rt, target, &artifacts.join(&g.file), stage.path(), &stem)?;
            progress(BuildEvent::Graph { file: g.file.clone(), seconds: t.elapsed().as_secs_f64() });
            graphs.push(EngineGraph {
                kind: g.kind,
                file,
                source_file: g.file.clone(),
                inputs: g.inputs.clone(),
                outputs: g.outputs.clone(),
                build_session: session_config(target, &Stage::Build { out_dir: ".".into(), stem }),
                load_session: session_config(target, &Stage::Load { bundle_dir: ".".into() }),
                providers: Vec::new(),
            });
        }
        profiles.push(EngineProfile { profile: p.profile.clone(), dims: p.dims, graphs });
    }

    if !matches!(target, Target::TensorRt { .. }) {
        let models: Vec<String> =
            profiles.iter().flat_map(|p| p.graphs.iter().map(|g| g.file.clone())).collect();
        let (unique, merged) = merge_weights(rt, target, stage.path(), &models)?;
        progress(BuildEvent::Weights { unique_bytes: unique, merged_bytes: merged });
    }

    // Load every built graph back on this machine (where its provider exists) to record what ran where.
    if provider_present(rt, target) {
        let cfg = session_config(target, &Stage::Load { bundle_dir: stage.path().to_path_buf() });
        let weights = SharedWeights::new(rt);
        for p in &mut profiles {
            for g in &mut p.graphs {
                let r = GraphRunner::load(
                    rt,
                    &stage.path().join(&g.file),
                    &g.file,
                    target,
                    &cfg,
                    Some(&weights),
                )?;
                check_signature(&r, g, &stage.path().join(&g.file))?;
                g.providers = r.providers().to_vec();
                progress(BuildEvent::Checked { file: g.file.clone() });
            }
        }
    }

    // The export's golden toto-ts cases travel with the engine, so `totoc verify --engine` works anywhere.
    for f in source.files.iter().filter(|f| f.path.starts_with(&format!("{GOLDEN_DIR}/"))) {
        let dst = stage.path().join(&f.path);
        std::fs::create_dir_all(dst.parent().expect("golden/")).map_err(|e| Error::io(&dst, e))?;
        std::fs::copy(artifacts.join(&f.path), &dst).map_err(|e| Error::io(&dst, e))?;
    }
    let files = bundle_files(stage.path())?;
    let manifest = EngineManifest {
        format: ENGINE_FORMAT.into(),
        totoc_version: env!("CARGO_PKG_VERSION").into(),
        ort_version: rt.version().to_string(),
        target: target.clone(),
        source: SourceBundle {
            manifest_sha256: source_sha,
            totoc_version: source.totoc_version.clone(),
            checkpoint: source.checkpoint.clone(),
            precision: source.precision,
            opset: source.opset,
            cache_update: source.cache_update.clone(),
        },
        model: source.model.clone(),
        profiles,
        files: file_entries(stage.path(), &files)?,
    };
    let json = serde_json::to_vec_pretty(&manifest).expect("engine manifest serialises");
    write_atomic(&stage.path().join(MANIFEST_FILE), &json)?;
    stage.commit()?;
    Ok(manifest)
}

fn check_precision(target: &Target, precision: DType, artifacts: &Path) -> Result<()> {
    if let Target::TensorRt { fp16_graph, .. } = target {
        let graph_fp16 = precision == DType::F16;
        if *fp16_graph != graph_fp16 {
            return Err(Error::Engine {
                path: artifacts.to_path_buf(),
                message: format!(
                    "TensorRT fp16_graph={fp16_graph} but the export bundle's graphs are {precision:?}: TensorRT 11 \
                     has no fp16 builder flag, half precision must come from the exported graph (export it in fp16, \
                     or build with fp16_graph={graph_fp16})"
                ),
            });
        }
    }
    Ok(())
}

/// Whether `target`'s provider can be used here (always for CPU).
fn provider_present(rt: &Runtime, target: &Target) -> bool {
    match target {
        Target::Cpu { .. } => true,
        _ => rt.available_providers().iter().any(|p| p == target.provider_name()),
    }
}

/// Optimises/compiles one graph into `out`; returns the file to load, relative to `out`.
fn build_graph(rt: &Runtime, target: &Target, model: &Path, out: &Path, stem: &str) -> Result<String> {
    let mut cfg =
        session_config(target, &Stage::Build { out_dir: out.to_path_buf(), stem: stem.to_string() });
    let graph_err = |message: String| Error::Session { graph: stem.to_string(), message };
    match target {
        Target::Cpu { .. } | Target::Cuda { .. } => {
            let file = backend::optimized_model_file(stem);
            let mut b = backend::session_builder(rt, target, &cfg)?
                .with_optimized_model_path(out.join(&file))
                .map_err(|e| graph_err(format!("setting the optimised model path: {e}")))?;
            b.commit_from_file(model)
                .map_err(|e| graph_err(format!("optimising {}: {e}", model.display())))?;
            Ok(file)
        }
        Target::TensorRt { .. } => {
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
            let roots = [out.to_path_buf(), out.canonicalize().unwrap_or_else(|_| out.to_path_buf())];
            if relativize_ep_cache_paths(&mut model, &roots).map_err(graph_err)? {
                write_atomic(&ctx, &model.encode_to_vec())?;
            }
            Ok(file)
        }
    }
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

/// Merges the external weights of `models` (optimised graphs in `dir`, each with its own weight file) into
/// [`ENGINE_WEIGHTS`], identical tensors stored once, rewrites each model to point there and removes the
/// per-graph files. Each rewritten model must give bit-identical outputs to ONNX Runtime's original on a
/// deterministic input, or the build fails. Returns (unique bytes, bytes before merging).
fn merge_weights(rt: &Runtime, target: &Target, dir: &Path, models: &[String]) -> Result<(u64, u64)> {
    const ALIGN: u64 = 4096;
    let merged_path = dir.join(ENGINE_WEIGHTS);
    let mut out =
        std::io::BufWriter::new(std::fs::File::create(&merged_path).map_err(|e| Error::io(&merged_path, e))?);
    let mut len = 0u64;
    let mut by_hash: HashMap<String, (u64, u64)> = HashMap::new();
    let (mut unique, mut before) = (0u64, 0u64);
    let mut old_files = Vec::new();
    let mut rewritten = Vec::new();
    for file in models {
        let path = dir.join(file);
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let mut model = ModelProto::decode(&*bytes).map_err(|e| Error::Session {
            graph: file.clone(),
            message: format!("reading the optimised model: {e}"),
        })?;
        let Some(graph) = model.graph.as_mut() else { continue };
        let mut cache: HashMap<String, Vec<u8>> = HashMap::new();
        for t in graph
            .initializer
            .iter_mut()
            .filter(|t| t.data_location == tensor_proto::DataLocation::External as i32)
        {
            let get = |k: &str| t.external_data.iter().find(|e| e.key == k).map(|e| e.value.clone());
            let (Some(loc), Some(length)) =
                (get("location"), get("length").and_then(|v| v.parse::<u64>().ok()))
            else {
                continue;
            };
            let offset = get("offset").and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            if !cache.contains_key(&loc) {
                let p = dir.join(&loc);
                cache.insert(loc.clone(), std::fs::read(&p).map_err(|e| Error::io(&p, e))?);
                old_files.push(loc.clone());
            }
            let data = &cache[&loc];
            let slice =
                data.get(offset as usize..(offset + length) as usize).ok_or_else(|| Error::Session {
                    graph: file.clone(),
                    message: format!("initializer {} lies outside {loc}", t.name),
                })?;
            before += length;
            let key = format!("{}:{}:{:?}:{}", sha256_bytes(slice), t.data_type, t.dims, length);
            let new_offset = match by_hash.get(&key) {
                Some(&(o, _)) => o,
                None => {
                    let pad = (ALIGN - len % ALIGN) % ALIGN;
                    out.write_all(&vec![0u8; pad as usize]).map_err(|e| Error::io(&merged_path, e))?;
                    out.write_all(slice).map_err(|e| Error::io(&merged_path, e))?;
                    let o = len + pad;
                    len = o + length;
                    unique += length;
                    by_hash.insert(key, (o, length));
                    o
                }
            };
            let kv = |k: &str, v: String| StringStringEntryProto { key: k.into(), value: v };
            t.external_data = vec![
                kv("location", ENGINE_WEIGHTS.into()),
                kv("offset", new_offset.to_string()),
                kv("length", length.to_string()),
            ];
        }
        rewritten.push((file.clone(), model));
    }
    out.flush().map_err(|e| Error::io(&merged_path, e))?;
    drop(out);
    for (file, model) in &rewritten {
        let tmp = dir.join(format!("{file}.merged"));
        std::fs::write(&tmp, model.encode_to_vec()).map_err(|e| Error::io(&tmp, e))?;
        if provider_present(rt, target) {
            check_same_outputs(rt, target, &dir.join(file), &tmp, file)?;
        }
        std::fs::rename(&tmp, dir.join(file)).map_err(|e| Error::io(&dir.join(file), e))?;
    }
    old_files.sort();
    old_files.dedup();
    for f in old_files.iter().filter(|f| f.as_str() != ENGINE_WEIGHTS) {
        let p = dir.join(f);
        std::fs::remove_file(&p).map_err(|e| Error::io(&p, e))?;
    }
    Ok((unique, before))
}

/// Runs `a` and `b` (the same graph with differently stored weights) on one deterministic input and requires
/// bit-identical outputs.
fn check_same_outputs(rt: &Runtime, target: &Target, a: &Path, b: &Path, name: &str) -> Result<()> {
    let cfg =
        session_config(target, &Stage::Load { bundle_dir: a.parent().unwrap_or(Path::new(".")).into() });
    let mut ra = GraphRunner::load(rt, a, name, target, &cfg, None)?;
    let mut rb = GraphRunner::load(rt, b, name, target, &cfg, None)?;
    fill_deterministic(&mut ra)?;
    fill_deterministic(&mut rb)?;
    ra.run()?;
    rb.run()?;
    for sig in ra.outputs().cloned().collect::<Vec<_>>() {
        let same = match sig.dtype {
            DType::F32 => bits(ra.output::<f32>(&sig.name)?) == bits(rb.output::<f32>(&sig.name)?),
            DType::F16 => ra.output::<half::f16>(&sig.name)? == rb.output::<half::f16>(&sig.name)?,
            DType::I64 => ra.output::<i64>(&sig.name)? == rb.output::<i64>(&sig.name)?,
        };
        if !same {
            return Err(Error::Session {
                graph: name.to_string(),
                message: format!(
                    "output {} changed when its weights were merged into {ENGINE_WEIGHTS}",
                    sig.name
                ),
            });
        }
    }
    Ok(())
}

/// Fills every input with a fixed pattern (zeros for ids and positions).
fn fill_deterministic(r: &mut GraphRunner) -> Result<()> {
    for sig in r.inputs().cloned().collect::<Vec<_>>() {
        match sig.dtype {
            DType::F32 => {
                for (i, x) in r.input_mut::<f32>(&sig.name)?.iter_mut().enumerate() {
                    *x = ((i % 17) as f32 - 8.0) * 0.125;
                }
            }
            DType::F16 => {
                for (i, x) in r.input_mut::<half::f16>(&sig.name)?.iter_mut().enumerate() {
                    *x = half::f16::from_f32(((i % 17) as f32 - 8.0) * 0.125);
                }
            }
            DType::I64 => r.input_mut::<i64>(&sig.name)?.fill(0),
        }
    }
    Ok(())
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every file under `dir` (relative, `/`-separated, sorted), except `manifest.json`.
fn bundle_files(dir: &Path) -> Result<Vec<String>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
        for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
            let e = e.map_err(|e| Error::io(dir, e))?;
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out)?;
            } else {
                let rel = p.strip_prefix(root).expect("under root");
                let rel =
                    rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
                if rel != MANIFEST_FILE {
                    out.push(rel);
                }
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    out.sort();
    Ok(out)
}

/// The loaded graph's I/O must be exactly the signature the manifest records.
fn check_signature(r: &GraphRunner, g: &EngineGraph, path: &Path) -> Result<()> {
    let got_in: Vec<&TensorSig> = r.inputs().collect();
    let got_out: Vec<&TensorSig> = r.outputs().collect();
    for (what, want, got) in [("input", &g.inputs, got_in), ("output", &g.outputs, got_out)] {
        for w in want {
            match got.iter().find(|s| s.name == w.name) {
                Some(s) if *s == w => {}
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

/// The two runners of one profile.
#[derive(Debug)]
pub struct ProfileEngine {
    pub profile: EngineProfile,
    pub prefill: GraphRunner,
    pub decode: GraphRunner,
}

impl ProfileEngine {
    /// `(prefill, decode)`, both mutable.
    pub fn runners(&mut self) -> (&mut GraphRunner, &mut GraphRunner) {
        (&mut self.prefill, &mut self.decode)
    }

    pub fn cache_mode(&self) -> CacheMode {
        self.decode.cache_mode()
    }
}

/// A verified engine bundle; profiles are loaded on first use.
pub struct EngineBundle {
    dir: PathBuf,
    manifest: EngineManifest,
    rt: &'static Runtime,
    target: Target,
    weights: SharedWeights,
    loaded: Vec<ProfileEngine>,
}

impl std::fmt::Debug for EngineBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineBundle")
            .field("dir", &self.dir)
            .field("target", &self.target)
            .field("loaded", &self.loaded.iter().map(|p| p.profile.profile.name.as_str()).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl EngineBundle {
    /// Opens the engine bundle at `dir`: reads its manifest, checks the size and sha256 of **every** file (a
    /// mismatch names the file and refuses the bundle) and loads ONNX Runtime (`ort_lib`: see [`runtime`]).
    /// No graph is loaded yet.
    pub fn load(dir: &Path, ort_lib: Option<&Path>) -> Result<Self> {
        let manifest = EngineManifest::read(dir)?;
        verify_files(dir, &manifest.files).map_err(|e| Error::Engine {
            path: dir.to_path_buf(),
            message: format!("{e} (rebuild it with `totoc build-engine`)"),
        })?;
        // CPU threads are one process-wide pool (see `runtime`): a count recorded at build time is its default,
        // unless the caller already chose one (`runtime::set_intra_threads`) or the runtime is already running.
        if let Target::Cpu { threads: Some(n) } = manifest.target {
            runtime::default_intra_threads(n);
        }
        let rt = runtime::init(ort_lib)?;
        if matches!(manifest.target, Target::TensorRt { .. }) && manifest.ort_version != rt.version() {
            return Err(Error::Engine {
                path: dir.to_path_buf(),
                message: format!(
                    "TensorRT engines were built with ONNX Runtime {}, this process loaded {} from {}; rebuild the engine",
                    manifest.ort_version,
                    rt.version(),
                    rt.library().display()
                ),
            });
        }
        let target = manifest.target.clone();
        Ok(EngineBundle {
            dir: dir.to_path_buf(),
            manifest,
            rt,
            target,
            weights: SharedWeights::new(rt),
            loaded: Vec::new(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &EngineManifest {
        &self.manifest
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    pub fn profile_names(&self) -> impl Iterator<Item = &str> {
        self.manifest.profiles.iter().map(|p| p.profile.name.as_str())
    }

    /// Profile `name`'s runners, loading both graphs on first use (their weights are shared with every other
    /// loaded graph of this bundle on CPU).
    pub fn profile(&mut self, name: &str) -> Result<&mut ProfileEngine> {
        if let Some(i) = self.loaded.iter().position(|p| p.profile.profile.name == name) {
            return Ok(&mut self.loaded[i]);
        }
        let entry = self.manifest.profile(name).cloned().ok_or_else(|| Error::Engine {
            path: self.dir.clone(),
            message: format!(
                "no profile {name:?} (this engine has: {})",
                self.profile_names().collect::<Vec<_>>().join(", ")
            ),
        })?;
        let cfg = session_config(&self.target, &Stage::Load { bundle_dir: self.dir.clone() });
        let load = |kind: GraphKind| -> Result<GraphRunner> {
            let g = entry.graph(kind).ok_or_else(|| Error::Engine {
                path: self.dir.clone(),
                message: format!("profile {name:?} has no {} graph", kind.as_str()),
            })?;
            let path = self.dir.join(&g.file);
            let r = GraphRunner::load(
                self.rt,
                &path,
                &format!("{name}.{}", kind.as_str()),
                &self.target,
                &cfg,
                Some(&self.weights),
            )?;
            check_signature(&r, g, &path)?;
            Ok(r)
        };
        let (prefill, decode) = self
            .weights
            .trim_while(|| Ok::<_, Error>((load(GraphKind::Prefill)?, load(GraphKind::Decode)?)))?;
        self.weights.release_pages();
        self.loaded.push(ProfileEngine { profile: entry, prefill, decode });
        Ok(self.loaded.last_mut().expect("pushed"))
    }

    /// `(prefill, decode)` runners of profile `name` (see [`profile`](Self::profile)).
    pub fn runners(&mut self, name: &str) -> Result<(&mut GraphRunner, &mut GraphRunner)> {
        Ok(self.profile(name)?.runners())
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
    fn bundles_can_move_between_threads() {
        fn send<T: Send>() {}
        send::<EngineBundle>();
    }

    #[test]
    fn manifest_json_round_trips() {
        let target = Target::tensorrt(0, false, true);
        let cfg = session_config(&target, &Stage::Load { bundle_dir: ".".into() });
        let json = serde_json::to_string(&cfg).unwrap();
        assert_eq!(serde_json::from_str::<SessionConfig>(&json).unwrap(), cfg);
    }
}
