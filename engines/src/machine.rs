//! What GPU libraries and GPUs this machine has, probed the way ONNX Runtime's providers would find them: each
//! library `dlopen`ed by its soname (so `LD_LIBRARY_PATH` and the system loader path count), the GPUs listed
//! through the CUDA driver API (`libcuda.so.1`); only versions and device properties are read, nothing is
//! allocated on a GPU. A bottom layer beside [`crate::cpu`]: the backends (their error messages), the bundle
//! loader (TensorRT stamps) and `totoc doctor` read it; it reads nothing of theirs.

use std::ffi::{c_char, c_int};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A runtime version `major.minor[.patch]`, for the checks below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    /// Parses `1.31.1`, `10.15`, `10.15.1.29` (extra parts ignored).
    pub fn parse(s: &str) -> Option<Version> {
        let mut it = s.trim().split('.').map(|p| p.parse::<u32>().ok());
        let major = it.next()??;
        let minor = it.next()??;
        let patch = it.next().flatten().unwrap_or(0);
        Some(Version(major, minor, patch))
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// A TensorRT version as the provider or the library reports it: `10.15.1`, or `getInferLibVersion()`'s
/// `major·10000 + minor·100 + patch` (`101501`).
pub fn parse_tensorrt_version(s: &str) -> Option<Version> {
    if s.contains('.') {
        return Version::parse(s);
    }
    let n: u32 = s.trim().parse().ok()?;
    (n >= 10_000).then_some(Version(n / 10_000, (n / 100) % 100, n % 100))
}

/// Which GPU providers need a library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NeededBy {
    /// The CUDA provider (and so TensorRT too, which runs on it).
    Cuda,
    /// The TensorRT provider only.
    #[serde(rename = "tensorrt")]
    TensorRt,
}

/// A shared library a GPU provider loads.
#[derive(Debug, Clone, Copy)]
pub struct LibSpec {
    pub soname: &'static str,
    pub what: &'static str,
    /// Where to get it.
    pub package: &'static str,
    pub needed_by: NeededBy,
    /// Version query, if the library exports one.
    pub(crate) version: VersionQuery,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum VersionQuery {
    None,
    /// `int f(int*)`, value `major·1000 + minor·10` (CUDA).
    CudaStyle(&'static str),
    /// `size_t f()`, value `major·10000 + minor·100 + patch` (cuDNN 9).
    Cudnn(&'static str),
    /// `int f()`, value `major·10000 + minor·100 + patch` (TensorRT 10).
    TensorRt(&'static str),
}

/// The libraries ONNX Runtime 1.31.1's GPU providers load.
pub const LIBRARIES: &[LibSpec] = &[
    LibSpec {
        soname: "libcuda.so.1",
        what: "NVIDIA driver (CUDA driver API)",
        package: "the NVIDIA GPU driver of this machine (not on PyPI)",
        needed_by: NeededBy::Cuda,
        version: VersionQuery::CudaStyle("cuDriverGetVersion"),
    },
    LibSpec {
        soname: "libcudart.so.13",
        what: "CUDA 13 runtime",
        package: "pip install nvidia-cuda-runtime (CUDA 13)",
        needed_by: NeededBy::Cuda,
        version: VersionQuery::CudaStyle("cudaRuntimeGetVersion"),
    },
    LibSpec {
        soname: "libcublas.so.13",
        what: "cuBLAS 13",
        package: "pip install nvidia-cublas (CUDA 13)",
        needed_by: NeededBy::Cuda,
        version: VersionQuery::None,
    },
    LibSpec {
        soname: "libcublasLt.so.13",
        what: "cuBLASLt 13",
        package: "pip install nvidia-cublas (CUDA 13)",
        needed_by: NeededBy::Cuda,
        version: VersionQuery::None,
    },
    LibSpec {
        soname: "libcurand.so.10",
        what: "cuRAND",
        package: "pip install nvidia-curand (CUDA 13)",
        needed_by: NeededBy::Cuda,
        version: VersionQuery::None,
    },
    LibSpec {
        soname: "libcudnn.so.9",
        what: "cuDNN 9",
        package: "pip install nvidia-cudnn-cu13",
        needed_by: NeededBy::Cuda,
        version: VersionQuery::Cudnn("cudnnGetVersion"),
    },
    LibSpec {
        soname: "libnvinfer.so.10",
        what: "TensorRT 10",
        package: "pip install tensorrt-cu13-libs (TensorRT 10; 10.15+ for opset-24 bundles)",
        needed_by: NeededBy::TensorRt,
        version: VersionQuery::TensorRt("getInferLibVersion"),
    },
    LibSpec {
        soname: "libnvonnxparser.so.10",
        what: "TensorRT ONNX parser",
        package: "pip install tensorrt-cu13-libs",
        needed_by: NeededBy::TensorRt,
        version: VersionQuery::TensorRt("getNvOnnxParserVersion"),
    },
];

/// What the probe found for one library.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LibStatus {
    pub soname: String,
    pub what: String,
    pub package: String,
    pub needed_by: NeededBy,
    /// Where it was loaded from (`None`: not found).
    pub path: Option<PathBuf>,
    pub version: Option<String>,
    /// The loader's message when it was not found.
    pub error: Option<String>,
}

impl LibStatus {
    pub fn found(&self) -> bool {
        self.path.is_some()
    }
}

/// A GPU as the CUDA driver reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gpu {
    pub index: usize,
    pub name: String,
    /// `(major, minor)`.
    pub compute_capability: (i32, i32),
    pub memory_bytes: u64,
}

pub(crate) fn missing_lib(l: &LibStatus) -> String {
    format!("{} ({}) not found: {}", l.soname, l.what, l.package)
}

/// What keeps a GPU target from working here (empty: nothing found missing), for error messages: the missing
/// libraries of the CUDA provider (and, with `tensorrt`, of the TensorRT provider) and the GPUs. Probes only the
/// libraries and GPUs (the runtime is already loaded by the caller).
pub fn gpu_problems(tensorrt: bool) -> Vec<String> {
    let libraries: Vec<LibStatus> =
        LIBRARIES.iter().filter(|l| l.needed_by == NeededBy::Cuda || tensorrt).map(probe_library).collect();
    let mut out: Vec<String> = libraries.iter().filter(|l| !l.found()).map(missing_lib).collect();
    match &probe_gpus() {
        Ok(g) if g.is_empty() => out.push("the CUDA driver reports no GPU".into()),
        Ok(_) => {}
        Err(e) => out.push(format!("no GPU: {e}")),
    }
    out
}

/// The TensorRT version this machine's `libnvinfer.so.10` reports, if it loads.
pub fn tensorrt_version() -> Option<Version> {
    let spec = LIBRARIES.iter().find(|l| l.soname == "libnvinfer.so.10")?;
    probe_library(spec).version.as_deref().and_then(Version::parse)
}

/// The compute capability of CUDA device `index` as digits (`90` for sm_90), if the driver lists it.
pub fn gpu_architecture(index: usize) -> Option<String> {
    let gpus = probe_gpus().ok()?;
    let g = gpus.iter().find(|g| g.index == index)?;
    Some(format!("{}{}", g.compute_capability.0, g.compute_capability.1))
}

/// Where the loaded library `soname` lives (from `/proc/self/maps`).
fn mapped_path(soname: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| Path::new(p).file_name().is_some_and(|n| n.to_string_lossy().starts_with(soname)))
        .map(PathBuf::from)
}

pub(crate) fn probe_library(spec: &LibSpec) -> LibStatus {
    let mut status = LibStatus {
        soname: spec.soname.into(),
        what: spec.what.into(),
        package: spec.package.into(),
        needed_by: spec.needed_by,
        path: None,
        version: None,
        error: None,
    };
    // SAFETY: loading a vendor library runs its initialisers, as ONNX Runtime's provider would when it loads it;
    // only version queries with the documented C signatures are called below.
    let lib = match unsafe { libloading::Library::new(spec.soname) } {
        Ok(l) => l,
        Err(e) => {
            status.error = Some(e.to_string());
            return status;
        }
    };
    status.path = mapped_path(spec.soname).or_else(|| Some(PathBuf::from(spec.soname)));
    status.version = unsafe { query_version(&lib, spec.version) };
    status
}

/// # Safety
/// `lib` must export the queried symbol with the signature its [`VersionQuery`] variant documents.
unsafe fn query_version(lib: &libloading::Library, q: VersionQuery) -> Option<String> {
    match q {
        VersionQuery::None => None,
        VersionQuery::CudaStyle(sym) => {
            let f = unsafe { lib.get::<unsafe extern "C" fn(*mut c_int) -> c_int>(sym.as_bytes()) }.ok()?;
            let mut v: c_int = 0;
            (unsafe { f(&mut v) } == 0).then(|| format!("{}.{}", v / 1000, (v % 1000) / 10))
        }
        VersionQuery::Cudnn(sym) => {
            let f = unsafe { lib.get::<unsafe extern "C" fn() -> usize>(sym.as_bytes()) }.ok()?;
            let v = unsafe { f() };
            Some(format!("{}.{}.{}", v / 10_000, (v % 10_000) / 100, v % 100))
        }
        VersionQuery::TensorRt(sym) => {
            let f = unsafe { lib.get::<unsafe extern "C" fn() -> c_int>(sym.as_bytes()) }.ok()?;
            let v = unsafe { f() };
            parse_tensorrt_version(&v.to_string()).map(|v| v.to_string())
        }
    }
}

/// The GPUs through the CUDA driver API.
pub(crate) fn probe_gpus() -> Result<Vec<Gpu>, String> {
    // SAFETY: the CUDA driver API functions below have these C signatures (cuda.h); `CUdevice` is an int.
    let lib = unsafe { libloading::Library::new("libcuda.so.1") }
        .map_err(|e| format!("libcuda.so.1 (NVIDIA driver) not loadable: {e}"))?;
    type InitFn = unsafe extern "C" fn(u32) -> c_int;
    type CountFn = unsafe extern "C" fn(*mut c_int) -> c_int;
    type GetFn = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
    type NameFn = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
    type AttrFn = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;
    type MemFn = unsafe extern "C" fn(*mut usize, c_int) -> c_int;
    let sym = |name: &str| format!("libcuda.so.1 lacks {name}");
    unsafe {
        let init = lib.get::<InitFn>(b"cuInit").map_err(|_| sym("cuInit"))?;
        let count = lib.get::<CountFn>(b"cuDeviceGetCount").map_err(|_| sym("cuDeviceGetCount"))?;
        let get = lib.get::<GetFn>(b"cuDeviceGet").map_err(|_| sym("cuDeviceGet"))?;
        let name = lib.get::<NameFn>(b"cuDeviceGetName").map_err(|_| sym("cuDeviceGetName"))?;
        let attr = lib.get::<AttrFn>(b"cuDeviceGetAttribute").map_err(|_| sym("cuDeviceGetAttribute"))?;
        let mem = lib.get::<MemFn>(b"cuDeviceTotalMem_v2").map_err(|_| sym("cuDeviceTotalMem_v2"))?;
        let rc = init(0);
        if rc != 0 {
            return Err(format!("cuInit failed with CUDA error {rc} (driver installed but no usable GPU?)"));
        }
        let mut n: c_int = 0;
        if count(&mut n) != 0 {
            return Err("cuDeviceGetCount failed".into());
        }
        let mut out = Vec::new();
        for i in 0..n {
            let mut dev: c_int = 0;
            if get(&mut dev, i) != 0 {
                continue;
            }
            let mut buf = [0 as c_char; 256];
            name(buf.as_mut_ptr(), buf.len() as c_int, dev);
            let gpu_name = std::ffi::CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned();
            let (mut major, mut minor) = (0, 0);
            // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
            attr(&mut major, 75, dev);
            attr(&mut minor, 76, dev);
            let mut bytes = 0usize;
            mem(&mut bytes, dev);
            out.push(Gpu {
                index: i as usize,
                name: gpu_name,
                compute_capability: (major, minor),
                memory_bytes: bytes as u64,
            });
        }
        Ok(out)
    }
}
