//! Loading a verified engine bundle ([`EngineBundle`]) and checking its files and graph signatures.

use std::path::{Path, PathBuf};

use exporter::manifest::MANIFEST_FILE;
use exporter::signature::TensorSig;

use super::format::EngineManifest;
pub use super::graph_file::GraphFile;
use crate::backend::{self, session_config, Stage, Target};
use crate::error::{Error, Result};
use crate::graph::{GraphRunner, SharedSession, SharedWeights};
use crate::runtime::{self, Runtime};

/// Every file under `dir` (relative, `/`-separated, sorted), except `manifest.json` and its hash file.
pub(crate) fn bundle_files(dir: &Path) -> Result<Vec<String>> {
    let mut files = exporter::integrity::files_under(dir)?;
    files.retain(|f| f != MANIFEST_FILE && f != exporter::integrity::MANIFEST_HASH_FILE);
    Ok(files)
}

/// The loaded graph's I/O must be exactly the signature the manifest records.
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
            for (file, stamp) in manifest.family.tensorrt_stamps() {
                crate::tensorrt::check_stamp(stamp, trt, arch.as_deref())
                    .map_err(|message| Error::Engine { path: dir.join(file), message })?;
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

    /// Loads one graph (its weights shared with every other loaded graph of this bundle on CPU), with all of
    /// its I/O allocated, and checks its I/O against the manifest.
    pub fn load_graph(&self, g: &GraphFile<'_>) -> Result<GraphRunner> {
        let mut cfg = session_config(
            self.target(),
            &Stage::Load { bundle_dir: self.dir.clone() },
            self.manifest.precision,
        );
        if !g.memory_pattern {
            cfg.memory_pattern = false;
        }
        if !g.cpu_arena {
            cfg.cpu_arena = false;
        }
        let path = self.dir.join(g.file);
        let name = g.file.strip_suffix(".onnx").unwrap_or(g.file);
        if g.shared {
            // one session of the shape-polymorphic graph for every bucket listing it (opened on first use)
            let session = {
                let mut open = self.shared.lock().unwrap_or_else(|p| p.into_inner());
                match open.get(g.file) {
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
                        open.insert(g.file.to_string(), s.clone());
                        s
                    }
                }
            };
            self.weights.release_pages();
            let label = g.label.strip_suffix(".onnx").unwrap_or(g.label);
            return GraphRunner::load_bucket(
                &session,
                label,
                self.target(),
                g.inputs.to_vec(),
                g.outputs.to_vec(),
                g.gpu_graph_id.unwrap_or(0),
            );
        }
        let r = self.weights.trim_while(|| {
            GraphRunner::load(self.rt, &path, name, self.target(), &cfg, Some(&self.weights))
        })?;
        self.weights.release_pages();
        let (inputs, outputs): (Vec<TensorSig>, Vec<TensorSig>) =
            (r.inputs().cloned().collect(), r.outputs().cloned().collect());
        check_io(&inputs, &outputs, g.inputs, g.outputs, &path)?;
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundles_can_be_shared_between_threads() {
        fn sync<T: Send + Sync>() {}
        sync::<EngineBundle>();
    }
}
