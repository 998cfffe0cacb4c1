//! `totoc doctor`: what this machine can run — the loaded ONNX Runtime (version, providers, provider libraries),
//! the CUDA / cuDNN / TensorRT libraries a GPU provider loads (found where, which version, or missing and which
//! package provides them), the GPUs, and which engine targets will work.
//!
//! Everything is probed the way ONNX Runtime's providers would find it: each library is `dlopen`ed by its soname
//! (so `LD_LIBRARY_PATH` and the system loader path count), and the GPUs are listed through the CUDA driver API
//! (`libcuda.so.1`). The probes only read versions and device properties; nothing is allocated on a GPU.
//! [`verdicts`] turns the findings into a verdict per target (a pure function, unit-tested), and the same
//! findings explain why `build-engine` cannot build a GPU target here ([`target_problems`]).
//!
//! The library list is what ONNX Runtime 1.31.1's onnxruntime-gpu wheel needs (its providers' `NEEDED` entries and
//! its pip extras): CUDA 13 runtime, cuBLAS/cuBLASLt 13, cuRAND 10 and cuDNN 9 for the CUDA provider, plus TensorRT
//! 10 (`libnvinfer.so.10`, `libnvonnxparser.so.10`) for the TensorRT provider.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::backend::{self, Target, Version, TENSORRT_TENSOR_SCATTER};
#[cfg(test)]
use crate::machine::VersionQuery;
pub use crate::machine::{gpu_architecture, tensorrt_version, Gpu, LibSpec, LibStatus, NeededBy, LIBRARIES};
use crate::machine::{missing_lib, probe_gpus, probe_library};
use crate::runtime::{self, ORT_VERSION};

/// The loaded ONNX Runtime.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OrtFacts {
    pub library: PathBuf,
    pub version: String,
    /// Providers compiled into it.
    pub providers: Vec<String>,
    /// `(provider library file, present beside the library)` for the GPU providers.
    pub provider_libraries: Vec<(String, bool)>,
}

/// Everything the doctor found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Facts {
    pub ort: Result<OrtFacts, String>,
    pub libraries: Vec<LibStatus>,
    /// The GPUs, or why none could be listed.
    pub gpus: Result<Vec<Gpu>, String>,
}

/// Whether a target will work here, and why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verdict {
    pub target: String,
    pub ready: bool,
    /// What is missing (each with what provides it), or caveats of a ready target.
    pub notes: Vec<String>,
}

/// The doctor's report: the findings and the verdicts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub facts: Facts,
    pub verdicts: Vec<Verdict>,
}

impl Facts {
    fn lib(&self, soname: &str) -> Option<&LibStatus> {
        self.libraries.iter().find(|l| l.soname == soname)
    }

    /// The TensorRT version found, if any.
    pub fn tensorrt_version(&self) -> Option<Version> {
        self.lib("libnvinfer.so.10")?.version.as_deref().and_then(Version::parse)
    }
}

fn gpu_onnxruntime_help() -> String {
    format!(
        "install onnxruntime-gpu {ORT_VERSION} (CUDA 13): `python3 -m pip download --no-deps --only-binary=:all: \
         onnxruntime-gpu=={ORT_VERSION}`, unzip onnxruntime/capi/ and pass --ort-lib <dir>/libonnxruntime.so.{ORT_VERSION}"
    )
}

/// The verdict for each target (`cpu`, `cuda`, `tensorrt`) from `facts`.
pub fn verdicts(facts: &Facts) -> Vec<Verdict> {
    let mut out = Vec::new();
    let ort = match &facts.ort {
        Ok(o) => o,
        Err(e) => {
            let note = vec![format!("ONNX Runtime not loaded: {e}")];
            return ["cpu", "cuda", "tensorrt"]
                .iter()
                .map(|t| Verdict { target: t.to_string(), ready: false, notes: note.clone() })
                .collect();
        }
    };
    out.push(Verdict { target: "cpu".into(), ready: true, notes: Vec::new() });
    let mut cuda_notes = Vec::new();
    let provider = |name: &str, file: &str, notes: &mut Vec<String>| {
        if !ort.providers.iter().any(|p| p == name) {
            let note = format!(
                "the ONNX Runtime at {} has no GPU provider (providers: {}): {}",
                ort.library.display(),
                ort.providers.join(", "),
                gpu_onnxruntime_help()
            );
            if !notes.contains(&note) {
                notes.push(note);
            }
        } else if !ort.provider_libraries.iter().any(|(f, present)| f == file && *present) {
            notes.push(format!(
                "{file} is not next to {}: copy it from the onnxruntime-gpu {ORT_VERSION} wheel (onnxruntime/capi/)",
                ort.library.display()
            ));
        }
    };
    provider("CUDAExecutionProvider", "libonnxruntime_providers_cuda.so", &mut cuda_notes);
    for l in facts.libraries.iter().filter(|l| l.needed_by == NeededBy::Cuda && !l.found()) {
        cuda_notes.push(missing_lib(l));
    }
    match &facts.gpus {
        Ok(g) if g.is_empty() => cuda_notes.push("the CUDA driver reports no GPU".into()),
        Ok(_) => {}
        Err(e) => cuda_notes.push(format!("no GPU: {e}")),
    }
    let mut trt_notes = cuda_notes.clone();
    provider("TensorrtExecutionProvider", "libonnxruntime_providers_tensorrt.so", &mut trt_notes);
    for l in facts.libraries.iter().filter(|l| l.needed_by == NeededBy::TensorRt && !l.found()) {
        trt_notes.push(missing_lib(l));
    }
    let trt_ready = trt_notes.is_empty();
    if let Some(v) = facts.tensorrt_version().filter(|v| *v < TENSORRT_TENSOR_SCATTER) {
        trt_notes.push(format!(
            "TensorRT {v} does not import TensorScatter: build only `--opset 18` bundles (>= \
             {TENSORRT_TENSOR_SCATTER} for opset 24)"
        ));
    }
    out.push(Verdict { target: "cuda".into(), ready: cuda_notes.is_empty(), notes: cuda_notes });
    out.push(Verdict { target: "tensorrt".into(), ready: trt_ready, notes: trt_notes });
    out
}

/// Runs every probe (loads ONNX Runtime from `ort_lib` or the usual places, see [`runtime`]).
pub fn examine(ort_lib: Option<&Path>) -> Report {
    let ort = runtime::init(ort_lib).map_err(|e| e.to_string()).map(|rt| {
        let dir = rt.library().parent().unwrap_or(Path::new("."));
        let real_dir = rt.library().canonicalize().ok().and_then(|p| p.parent().map(Path::to_path_buf));
        let provider_libraries = ["CUDAExecutionProvider", "TensorrtExecutionProvider"]
            .iter()
            .filter_map(|p| backend::provider_library(p))
            .map(|f| {
                let present = dir.join(f).exists() || real_dir.as_ref().is_some_and(|d| d.join(f).exists());
                (f.to_string(), present)
            })
            .collect();
        OrtFacts {
            library: rt.library().to_path_buf(),
            version: rt.version().to_string(),
            providers: rt.available_providers(),
            provider_libraries,
        }
    });
    let libraries = LIBRARIES.iter().map(probe_library).collect();
    let facts = Facts { ort, libraries, gpus: probe_gpus() };
    Report { verdicts: verdicts(&facts), facts }
}

/// The problems that keep `target` from working here (empty: none found), for error messages: the machine's
/// findings ([`crate::machine::gpu_problems`]) for a GPU target.
pub fn target_problems(target: &Target) -> Vec<String> {
    if !target.is_gpu() {
        return Vec::new();
    }
    crate::machine::gpu_problems(matches!(target, Target::TensorRt { .. }))
}

impl Report {
    /// The report as text, one finding per line.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let mut line = |t: String| {
            s.push_str(&t);
            s.push('\n');
        };
        match &self.facts.ort {
            Ok(o) => {
                line(format!("ONNX Runtime {} from {}", o.version, o.library.display()));
                line(format!("  providers: {}", o.providers.join(", ")));
                for (f, present) in &o.provider_libraries {
                    line(format!("  {f}: {}", if *present { "present" } else { "missing" }));
                }
            }
            Err(e) => line(format!("ONNX Runtime: not loaded: {e}")),
        }
        line("GPU libraries (dlopen by soname; LD_LIBRARY_PATH counts):".into());
        for l in &self.facts.libraries {
            match &l.path {
                Some(p) => line(format!(
                    "  ok       {:<24} {}{}",
                    l.soname,
                    p.display(),
                    l.version.as_ref().map(|v| format!(" (version {v})")).unwrap_or_default()
                )),
                None => line(format!("  missing  {:<24} {} — {}", l.soname, l.what, l.package)),
            }
        }
        match &self.facts.gpus {
            Ok(g) if g.is_empty() => line("GPUs: none".into()),
            Ok(g) => {
                for gpu in g {
                    line(format!(
                        "GPU {}: {} (sm_{}{}, {:.1} GiB)",
                        gpu.index,
                        gpu.name,
                        gpu.compute_capability.0,
                        gpu.compute_capability.1,
                        gpu.memory_bytes as f64 / (1u64 << 30) as f64
                    ));
                }
            }
            Err(e) => line(format!("GPUs: none found ({e})")),
        }
        line("Targets:".into());
        for v in &self.verdicts {
            line(format!("  {:<9} {}", v.target, if v.ready { "ready" } else { "not available" }));
            for n in &v.notes {
                line(format!("            - {n}"));
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib(soname: &str, found: bool, version: Option<&str>) -> LibStatus {
        let spec = LIBRARIES.iter().find(|l| l.soname == soname).unwrap();
        LibStatus {
            soname: soname.into(),
            what: spec.what.into(),
            package: spec.package.into(),
            needed_by: spec.needed_by,
            path: found.then(|| PathBuf::from(format!("/x/{soname}"))),
            version: version.map(String::from),
            error: (!found).then(|| "not found".into()),
        }
    }

    fn gpu_facts(trt: &str) -> Facts {
        Facts {
            ort: Ok(OrtFacts {
                library: "/ort/libonnxruntime.so.1.31.1".into(),
                version: "1.31.1".into(),
                providers: vec![
                    "TensorrtExecutionProvider".into(),
                    "CUDAExecutionProvider".into(),
                    "CPUExecutionProvider".into(),
                ],
                provider_libraries: vec![
                    ("libonnxruntime_providers_cuda.so".into(), true),
                    ("libonnxruntime_providers_tensorrt.so".into(), true),
                ],
            }),
            libraries: LIBRARIES
                .iter()
                .map(|l| lib(l.soname, true, (l.soname == "libnvinfer.so.10").then_some(trt)))
                .collect(),
            gpus: Ok(vec![Gpu {
                index: 0,
                name: "H100".into(),
                compute_capability: (9, 0),
                memory_bytes: 80 << 30,
            }]),
        }
    }

    #[test]
    fn a_full_gpu_machine_is_ready_for_every_target() {
        let v = verdicts(&gpu_facts("10.15.1"));
        assert!(v.iter().all(|v| v.ready && v.notes.is_empty()), "{v:?}");
        // an older TensorRT works, for opset-18 bundles only
        let v = verdicts(&gpu_facts("10.13.3"));
        assert!(v[2].ready && v[2].notes[0].contains("--opset 18"), "{v:?}");
    }

    #[test]
    fn a_cpu_machine_says_what_is_missing_and_where_to_get_it() {
        let facts = Facts {
            ort: Ok(OrtFacts {
                library: "/c/libonnxruntime.so.1.31.1".into(),
                version: "1.31.1".into(),
                providers: vec!["CPUExecutionProvider".into()],
                provider_libraries: vec![("libonnxruntime_providers_cuda.so".into(), false)],
            }),
            libraries: LIBRARIES.iter().map(|l| lib(l.soname, false, None)).collect(),
            gpus: Err("libcuda.so.1 (NVIDIA driver) not loadable".into()),
        };
        let v = verdicts(&facts);
        assert_eq!(
            v.iter().map(|v| (v.target.as_str(), v.ready)).collect::<Vec<_>>(),
            [("cpu", true), ("cuda", false), ("tensorrt", false)]
        );
        let cuda = v[1].notes.join("\n");
        assert!(cuda.contains("no GPU provider") && cuda.contains("onnxruntime-gpu 1.31.1"), "{cuda}");
        assert!(
            cuda.contains("libcudart.so.13") && cuda.contains("pip install nvidia-cuda-runtime"),
            "{cuda}"
        );
        assert!(cuda.contains("libcudnn.so.9") && cuda.contains("nvidia-cudnn-cu13"), "{cuda}");
        assert!(cuda.contains("no GPU"), "{cuda}");
        assert!(!cuda.contains("libnvinfer"), "TensorRT is not a CUDA requirement: {cuda}");
        let trt = v[2].notes.join("\n");
        assert_eq!(trt.matches("no GPU provider").count(), 1, "said once: {trt}");
        assert!(trt.contains("libnvinfer.so.10") && trt.contains("tensorrt-cu13-libs"), "{trt}");
        let text = Report { facts, verdicts: v }.render();
        assert!(text.contains("missing  libcudart.so.13") && text.contains("cpu       ready"), "{text}");
    }

    #[test]
    fn no_runtime_means_no_target() {
        let facts = Facts { ort: Err("not found".into()), libraries: Vec::new(), gpus: Ok(Vec::new()) };
        assert!(verdicts(&facts).iter().all(|v| !v.ready));
    }

    #[test]
    fn probing_a_missing_library_reports_its_package() {
        let spec = LibSpec {
            soname: "libtotoc-does-not-exist.so.1",
            what: "test",
            package: "nothing",
            needed_by: NeededBy::Cuda,
            version: VersionQuery::None,
        };
        let s = probe_library(&spec);
        assert!(!s.found() && s.error.is_some());
    }
}
