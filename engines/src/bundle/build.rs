//! `totoc build-engine`'s shared machinery, used by every family: precision, build-cache inputs, golden cases,
//! the fp16 emulation, TensorRT engines. `registry::build_engine` reads and checks the source manifest and hands
//! it to its family's builder, which calls these.

use std::path::{Path, PathBuf};

use exporter::build_cache::{self, BuildInputs, CacheCheck};
use exporter::export::GOLDEN_DIR;
use exporter::fsutil::{write_atomic, StagingDir};
use exporter::graph::emulate::{self, EmulatedWeights};
use exporter::manifest::Manifest;
use exporter::pb::ModelProto;
use exporter::signature::{DType, Precision, TensorSig};
use prost::Message;

use super::format::{BuildEvent, BuildOptions, EngineManifest, GraphForm};
use crate::backend::{self, session_config, Stage, Target, Version};
use crate::error::{Error, Result};
use crate::runtime::Runtime;

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

/// Writes `manifest` (and its hash file) into the staged engine bundle and moves the bundle into place: the last
/// step of every family's build.
pub(crate) fn commit_engine(stage: StagingDir, manifest: EngineManifest) -> Result<EngineManifest> {
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

/// The external tensors the fp16 graph `files` (under `artifacts`) read: what the fp16 emulation engine widens into
/// its f32 copy of the weights. Every family's emulation build gathers them this way.
pub(crate) fn emulated_externals<'a>(
    artifacts: &Path,
    files: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<emulate::External>> {
    let mut all = Vec::new();
    for file in files {
        all.extend(emulate::externals(&read_model(&artifacts.join(file))?)?);
    }
    Ok(all)
}

/// Bytes of the emulation's f32 weight file for `tensors` (each tensor once, f16 widened; padding not counted).
pub(crate) fn emulated_bytes(tensors: &[emulate::External]) -> u64 {
    let mut seen = std::collections::HashSet::new();
    tensors
        .iter()
        .filter(|t| seen.insert((t.location.clone(), t.offset, t.length)))
        .map(|t| if t.elem == exporter::graph::types::ElemType::F16 { t.length * 2 } else { t.length })
        .sum()
}

/// An emulation graph's signature: every f16 input and output is f32.
pub(crate) fn widened(s: &TensorSig) -> TensorSig {
    let dtype = if s.dtype == DType::F16 { DType::F32 } else { s.dtype };
    TensorSig { dtype, ..s.clone() }
}

/// Writes the fp16 emulation of the graph at `model` (file stem `stem`, e.g. `small.decode.n8.t25.fp16`) into
/// `out`; returns its file name.
pub(crate) fn write_emulation(
    model: &Path,
    weights: &EmulatedWeights,
    out: &Path,
    stem: &str,
) -> Result<String> {
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

/// The session configuration [`build_tensorrt`] builds one graph's TensorRT engine with (both families): the
/// target's build-stage provider options ([`session_config`]: fp16 on for fp16 graphs only, EPContext dump) with a
/// shape-polymorphic graph's optimisation `profiles` appended (every bucket of its kind; see `crate::tensorrt`).
pub(crate) fn tensorrt_build_config(
    target: &Target,
    precision: Precision,
    profiles: &[(String, String)],
    out: &Path,
    stem: &str,
) -> backend::SessionConfig {
    let mut cfg = session_config(
        target,
        &Stage::Build { out_dir: out.to_path_buf(), stem: stem.to_string() },
        precision,
    );
    if let Some(p) = cfg.providers.first_mut() {
        p.options.extend(profiles.iter().cloned());
    }
    // Any node TensorRT does not take keeps its weights in a file next to the EPContext model.
    cfg.config_entries.push((
        "ep.context_model_external_initializers_file_name".into(),
        format!("{stem}.trt_ctx.weights.bin"),
    ));
    cfg
}

/// Builds the TensorRT engine of one graph as an EPContext model in `out`; returns its file (relative to `out`)
/// and the engine's stamp. Refuses an engine TensorRT did not take whole ([`crate::tensorrt`]).
pub(crate) fn build_tensorrt(
    rt: &Runtime,
    target: &Target,
    precision: Precision,
    profiles: &[(String, String)],
    model: &Path,
    out: &Path,
    stem: &str,
) -> Result<(String, crate::tensorrt::EngineStamp)> {
    let cfg = tensorrt_build_config(target, precision, profiles, out, stem);
    let graph_err = |message: String| Error::Session { graph: stem.to_string(), message };
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
pub(crate) fn relativize_ep_cache_paths(
    model: &mut ModelProto,
    roots: &[PathBuf],
) -> std::result::Result<bool, String> {
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
}
