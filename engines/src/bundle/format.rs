//! The engine bundle format: `manifest.json`'s types ([`EngineManifest`] and what it holds) and the build
//! options and events of `totoc build-engine`.

use std::path::{Path, PathBuf};

use exporter::build_cache::BuildInputs;
use exporter::manifest::{format_mismatch, CheckpointInfo, FileEntry, FormatTag, Manifest, MANIFEST_FILE};
use exporter::registry::AnyConfig;
use exporter::signature::Precision;
use exporter::variant::OpsetVariant;
use serde::{Deserialize, Serialize};

use crate::backend::Target;
use crate::error::{Error, Result};
use crate::registry::graphs::EngineGraphs;

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
    /// Each family's graphs, written in place as top-level fields ([`crate::registry::EngineGraphs`]):
    /// `profiles` and `dropped` (Toto 1.0), `toto2_profiles` and `toto2_dropped` (Toto 2.0).
    #[serde(flatten)]
    pub family: EngineGraphs,
    /// Every file of the bundle except `manifest.json`.
    pub files: Vec<FileEntry>,
    /// What the engine was built from (source manifest hash, totoc and ONNX Runtime versions, target, options;
    /// GPU targets also the GPU architecture and TensorRT version): `build-engine` skips the work when they are
    /// unchanged ([`exporter::build_cache`]). Absent in older manifests.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub inputs: BuildInputs,
}

impl EngineManifest {
    /// Reads `dir/manifest.json` (no hash check; [`EngineBundle::load`](super::EngineBundle::load) does that).
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
    /// [`SharedWeights`](crate::graph::SharedWeights); TensorRT: one engine, and one copy of the weights, per bucket,
    /// each with its own CUDA graph).
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

/// Options of [`build_engine`](super::build_engine) besides the paths and the target.
#[derive(Debug, Clone, Default)]
pub struct BuildOptions {
    /// `--ort-lib` (see [`runtime`](crate::runtime)).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{session_config, Stage};

    #[test]
    fn manifest_json_round_trips() {
        let target = Target::tensorrt(0, true);
        let cfg = session_config(&target, &Stage::Load { bundle_dir: ".".into() }, Precision::Fp16);
        let json = serde_json::to_string(&cfg).unwrap();
        assert_eq!(serde_json::from_str::<crate::backend::SessionConfig>(&json).unwrap(), cfg);
    }
}
