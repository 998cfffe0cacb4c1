//! One loaded graph with preallocated, fixed-address I/O: [`GraphRunner`].
//!
//! At load every input and output tensor is allocated once and bound once to an ONNX Runtime `IoBinding`;
//! [`GraphRunner::run`] is a single `RunWithBinding` call (no tensor allocation, no re-binding, no output
//! extraction). Host code writes inputs through [`GraphRunner::input_mut`] and reads outputs through
//! [`GraphRunner::output`], both views of the bound buffers.
//!
//! **KV caches** (`k_cache.i` in, `k_cache_out.i` out, same shape) are updated *in place*: the output is bound to
//! the input's tensor, so the cache lives in one buffer for the whole forecast. Measured with ONNX Runtime 1.31.1
//! on CPU (`tests/ort_experiments.rs`, `kv_cache_update_schemes`: `TensorScatter` + a read of the whole cache,
//! one thread), per decode step:
//!
//! | cache | in place | ping-pong (swap bindings) | separate output + host copy-back |
//! |---|---|---|---|
//! | `[64,12,64,64]` f32, 12 MiB | 0.52 ms | 2.09 ms | 3.25 ms |
//! | `[256,12,128,64]` f32, 96 MiB | 8.4 ms | 23.8 ms | 36.5 ms |
//!
//! In place is correct over many steps and ORT logs no copy; with any other binding the `TensorScatter` kernel
//! first copies the whole past cache into the present one (`TensorScatter: in-place optimization not activated,
//! copying past_cache to present_cache`, once per run) — ping-pong only saves the host copy, not that one. So
//! in place it is, whenever the graph allows it: the cache input's only consumer must be the `TensorScatter` /
//! `ScatterND` node producing the output (checked at load; otherwise the runner falls back to ping-pong). The
//! runner counts ORT's copy warnings ([`GraphRunner::cache_copies_logged`]) so tests can prove the copy is gone.
//!
//! **Weights** shared by the sessions of an engine ([`SharedWeights`], CPU): every external initializer is added
//! to each session as one ORT value over a read-only `mmap` of its weight file (`AddInitializer`), and all
//! sessions use one `PrepackedWeightsContainer`, so MLAS prepacks each weight once for all graphs and profiles;
//! after the sessions are built the mapped pages are released (`MADV_DONTNEED`; they fault back in from the page
//! cache if ever read). See `tests/ort_experiments.rs` (`rss_two_sessions_one_weight`) for the numbers.
//!
//! **Weights on a GPU** (CUDA target, [`SharedWeights::for_target`]): each external initializer is uploaded once
//! into a device buffer the engine owns and added to every bucket's session as the same device `OrtValue`
//! (`AddInitializer`). ONNX Runtime uses such a value in place when its device is the one the session planned
//! for the initializer (`initializers_to_share_map`, session_state_utils.cc since microsoft/onnxruntime#5092), so
//! however many bucket sessions are loaded, the weights exist once on the GPU. (`AddExternalInitializers` would
//! not do: before microsoft/onnxruntime#29013 it copied a device value into each session.) The value must not own
//! its buffer (ONNX Runtime refuses one that does), so the buffer comes from the CUDA allocator of a small
//! bootstrap session kept alive with the weights. TensorRT engines carry their weights inside the engine.
//!
//! **Sessions shared by buckets** ([`SharedSession`]): a bucket's graph is its own session, or — for a
//! shape-polymorphic graph (rows and slots symbolic; what TensorRT engines are built from) — one session serves
//! every bucket of its kind, each bucket a runner with its own I/O at its own sizes
//! ([`GraphRunner::load_bucket`]). On the CUDA provider each such bucket captures its own CUDA graph under its own
//! `gpu_graph_id`; [`capture_keys`] assigns them and refuses what cannot work.
//!
//! **GPU I/O** (CUDA / TensorRT): I/O lives in device memory (fixed addresses, as CUDA graphs need); non-cache I/O
//! has a pinned host mirror copied before/after each run, caches stay on the device. [`binding_plan`] decides
//! all of it, and whether the graph may be captured ([`Capture`]), as a pure, unit-tested function. These paths
//! compile and their plans are unit-tested, but have not run: no GPU on the development machine
//! (`scripts/gpu-smoke.sh` runs them on the first one).

use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use exporter::bucket::Bucket;
use exporter::pb::{tensor_proto, ModelProto};
use exporter::signature::{DType, TensorSig};
use ort::logging::LogLevel;
use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::builder::{PrepackedWeights, SessionBuilder};
use ort::session::{IoBinding, Session};
use ort::value::{DynTensor, PrimitiveTensorElementType, TensorElementType};
use ort::AsPointer;
use prost::Message;

use crate::backend::{self, SessionConfig, Target};
use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// How a graph's KV caches are carried from one run to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheMode {
    /// The graph has no cache outputs that update a cache input (e.g. prefill).
    None,
    /// Each cache output is bound to its input's buffer.
    InPlace,
    /// Two buffers per cache, input/output bindings swapped after each run.
    PingPong,
}

/// Nodes an execution provider ran.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProviderNodes {
    pub provider: String,
    pub nodes: usize,
}

/// The name of the input a cache output updates: `k_cache_out.3` → `k_cache.3`.
pub fn state_input_name(output: &str) -> Option<String> {
    output.find("_out.").map(|i| format!("{}{}", &output[..i], &output[i + 4..]))
}

/// The graph facts the runner needs from the ONNX file (the model is small: weights are external).
#[derive(Debug, Clone, Default)]
pub struct ModelFacts {
    /// Initializers stored in external files.
    pub external: Vec<ExternalInit>,
    /// Graph outputs that may alias a graph input (the in-place rule of the module docs holds).
    pub in_place: Vec<(String, String)>,
}

/// An initializer stored in an external file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalInit {
    pub name: String,
    pub dims: Vec<i64>,
    /// ONNX `TensorProto.DataType`.
    pub data_type: i32,
    /// File, relative to the model's directory.
    pub location: String,
    pub offset: u64,
    pub length: u64,
}

/// Reads [`ModelFacts`] from a model file.
pub fn model_facts(path: &Path) -> Result<ModelFacts> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let model = ModelProto::decode(&*bytes).map_err(|e| Error::Session {
        graph: path.display().to_string(),
        message: format!("not an ONNX model: {e}"),
    })?;
    Ok(facts_of(&model))
}

pub(crate) fn facts_of(model: &ModelProto) -> ModelFacts {
    let Some(g) = &model.graph else { return ModelFacts::default() };
    let external = g
        .initializer
        .iter()
        .filter(|t| t.data_location == tensor_proto::DataLocation::External as i32)
        .filter_map(|t| {
            let kv = |k: &str| t.external_data.iter().find(|e| e.key == k).map(|e| e.value.clone());
            Some(ExternalInit {
                name: t.name.clone(),
                dims: t.dims.clone(),
                data_type: t.data_type,
                location: kv("location")?,
                offset: kv("offset").and_then(|v| v.parse().ok()).unwrap_or(0),
                length: kv("length").and_then(|v| v.parse().ok())?,
            })
        })
        .collect();
    let inputs: Vec<&str> = g.input.iter().map(|v| v.name.as_str()).collect();
    let mut consumers: HashMap<&str, usize> = HashMap::new();
    for n in &g.node {
        for i in &n.input {
            *consumers.entry(i.as_str()).or_default() += 1;
        }
    }
    let mut in_place = Vec::new();
    for out in &g.output {
        let Some(input) = state_input_name(&out.name) else { continue };
        if !inputs.contains(&input.as_str()) {
            continue;
        }
        let producer = g.node.iter().find(|n| n.output.first() == Some(&out.name));
        let ok = producer.is_some_and(|n| {
            matches!(n.op_type.as_str(), "TensorScatter" | "ScatterND") && n.input.first() == Some(&input)
        }) && consumers.get(input.as_str()) == Some(&1);
        if ok {
            in_place.push((input, out.name.clone()));
        }
    }
    ModelFacts { external, in_place }
}

/// An ORT value over memory it does not own (a weight in a mapped file); released on drop.
struct RawValue {
    ptr: *mut ort::sys::OrtValue,
    _map: Arc<memmap2::Mmap>,
}

// SAFETY: the value is an immutable tensor over read-only mapped memory kept alive by `_map`.
unsafe impl Send for RawValue {}
unsafe impl Sync for RawValue {}

impl Drop for RawValue {
    fn drop(&mut self) {
        // SAFETY: created by CreateTensorWithDataAsOrtValue and released once.
        unsafe { (ort::api().ReleaseValue)(self.ptr) };
    }
}

/// Weights shared by every session of an engine (see the module docs): host values over the mapped weight file
/// (CPU, with one prepacked-weights container), or device copies uploaded once (CUDA).
pub struct SharedWeights {
    prepacked: PrepackedWeights,
    maps: Mutex<HashMap<PathBuf, Arc<memmap2::Mmap>>>,
    values: Mutex<HashMap<(PathBuf, u64, u64), Arc<RawValue>>>,
    device: Option<DeviceWeights>,
}

/// Where an engine's sessions find their weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightPlacement {
    /// Shared host values over the mapped file, prepacked once for all sessions (CPU).
    Host,
    /// One device copy on CUDA device `n`, shared by every session (CUDA).
    Device(i32),
    /// Inside each TensorRT engine (nothing to share at the ONNX Runtime level).
    InEngine,
}

/// Where `target`'s sessions get their weights.
pub fn weight_placement(target: &Target) -> WeightPlacement {
    match target {
        Target::Cpu { .. } => WeightPlacement::Host,
        Target::Cuda { device, .. } => WeightPlacement::Device(*device),
        Target::TensorRt { .. } => WeightPlacement::InEngine,
    }
}

/// A weight in device memory owned by the engine: the buffer, and the non-owning `OrtValue` over it that every
/// session gets.
struct DeviceValue {
    value: *mut ort::sys::OrtValue,
    buffer: *mut c_void,
    allocator: Arc<DeviceAllocator>,
}

/// The CUDA allocator that owns the weight buffers.
struct DeviceAllocator(Allocator);

// SAFETY: ONNX Runtime's allocators are thread-safe (its own kernels allocate from them concurrently; the CUDA
// arena locks internally); totoc only allocates here and frees in `DeviceValue::drop`.
unsafe impl Send for DeviceAllocator {}
unsafe impl Sync for DeviceAllocator {}

// SAFETY: an immutable device tensor; the buffer is freed once, by its allocator, when the last holder drops.
unsafe impl Send for DeviceValue {}
unsafe impl Sync for DeviceValue {}

impl Drop for DeviceValue {
    fn drop(&mut self) {
        // SAFETY: created by CreateTensorWithDataAsOrtValue over `buffer`, which `allocator` allocated.
        unsafe {
            (ort::api().ReleaseValue)(self.value);
            self.allocator.0.free(self.buffer);
        }
    }
}

/// The device side of [`SharedWeights`]: a bootstrap session whose CUDA allocator owns the weight buffers.
struct DeviceWeights {
    device: i32,
    target: Target,
    /// (bootstrap session, its CUDA allocator), created with the first weight.
    alloc: Mutex<Option<(Session, Arc<DeviceAllocator>)>>,
    values: Mutex<HashMap<(PathBuf, u64, u64), Arc<DeviceValue>>>,
}

impl std::fmt::Debug for SharedWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let maps = self.maps.lock().map(|m| m.len()).unwrap_or(0);
        f.debug_struct("SharedWeights").field("files", &maps).finish_non_exhaustive()
    }
}

impl SharedWeights {
    /// A new, empty host set (needs the runtime: it creates ORT's prepacked-weights container).
    pub fn new(_rt: &Runtime) -> Self {
        SharedWeights {
            prepacked: PrepackedWeights::new(),
            maps: Mutex::default(),
            values: Mutex::default(),
            device: None,
        }
    }

    /// A new, empty set placed as `target` needs ([`weight_placement`]).
    pub fn for_target(rt: &Runtime, target: &Target) -> Self {
        let mut w = SharedWeights::new(rt);
        if let WeightPlacement::Device(device) = weight_placement(target) {
            w.device = Some(DeviceWeights {
                device,
                target: target.clone(),
                alloc: Mutex::default(),
                values: Mutex::default(),
            });
        }
        w
    }

    /// Where these weights live.
    pub fn placement(&self) -> WeightPlacement {
        self.device.as_ref().map_or(WeightPlacement::Host, |d| WeightPlacement::Device(d.device))
    }

    /// Weights uploaded to the device so far (each once, however many sessions use them).
    pub fn device_values(&self) -> usize {
        self.device.as_ref().map_or(0, |d| d.values.lock().unwrap_or_else(|p| p.into_inner()).len())
    }

    fn map(&self, path: &Path) -> Result<Arc<memmap2::Mmap>> {
        let mut maps = self.maps.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = maps.get(path) {
            return Ok(m.clone());
        }
        let f = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: engine bundle files are written once (atomically) and only read afterwards.
        let m = Arc::new(unsafe { memmap2::Mmap::map(&f) }.map_err(|e| Error::io(path, e))?);
        maps.insert(path.to_path_buf(), m.clone());
        Ok(m)
    }

    fn value(&self, dir: &Path, init: &ExternalInit) -> Result<Arc<RawValue>> {
        let path = dir.join(&init.location);
        let key = (path.clone(), init.offset, init.length);
        if let Some(v) = self.values.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(v.clone());
        }
        let map = self.map(&path)?;
        let (start, end) = (init.offset as usize, (init.offset + init.length) as usize);
        let elem = element_type(init.data_type).ok_or_else(|| Error::Session {
            graph: path.display().to_string(),
            message: format!("initializer {} has unsupported ONNX data type {}", init.name, init.data_type),
        })?;
        let numel: i64 = init.dims.iter().product();
        let elem_size = elem.byte_size(1).unwrap_or(0);
        let aligned = (map.as_ptr() as usize + start).is_multiple_of(elem_size.max(1));
        if end > map.len() || numel as usize * elem_size != init.length as usize || !aligned {
            return Err(Error::Session {
                graph: path.display().to_string(),
                message: format!(
                    "initializer {} ({:?}, {} bytes at {}) does not fit its weight file ({} bytes) or is misaligned",
                    init.name,
                    init.dims,
                    init.length,
                    init.offset,
                    map.len()
                ),
            });
        }
        let info = MemoryInfo::new(AllocationDevice::CPU, 0, AllocatorType::Device, MemoryType::Default)
            .map_err(|e| ort_error("creating CPU memory info", e))?;
        // SAFETY: the pointer/length stay valid (and unmodified) while `_map` lives; ORT only reads initializers.
        let ptr = unsafe {
            tensor_over(&info, map.as_ptr().add(start) as *mut c_void, init, elem, "wrapping initializer")?
        };
        let v = Arc::new(RawValue { ptr, _map: map });
        self.values.lock().unwrap_or_else(|p| p.into_inner()).insert(key, v.clone());
        Ok(v)
    }

    /// The device copy of `init` (uploaded on first use).
    fn device_value(&self, rt: &Runtime, dir: &Path, init: &ExternalInit) -> Result<Arc<DeviceValue>> {
        let dev = self.device.as_ref().expect("device weights");
        let key = (dir.join(&init.location), init.offset, init.length);
        if let Some(v) = dev.values.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(v.clone());
        }
        let allocator = {
            let mut a = dev.alloc.lock().unwrap_or_else(|p| p.into_inner());
            if a.is_none() {
                *a = Some(bootstrap_device_allocator(rt, &dev.target, dev.device)?);
            }
            a.as_ref().expect("set").1.clone()
        };
        let host = self.value(dir, init)?;
        let elem = element_type(init.data_type).expect("checked by value()");
        let block = allocator
            .0
            .alloc::<u8>(init.length as usize)
            .map_err(|e| ort_error(format!("allocating {} on CUDA device {}", init.name, dev.device), e))?;
        let buffer = block.into_raw();
        let info = allocator.0.memory_info();
        // SAFETY: `buffer` holds `length` bytes on the device `info` names; the value does not own it.
        let new_value = || unsafe { tensor_over(info, buffer, init, elem, "wrapping device weight") };
        let value = DeviceValue { value: new_value()?, buffer, allocator: allocator.clone() };
        // Upload through temporary values over the same memory (`copy_into` releases what it is given).
        let host_view = unsafe { host_tensor_view(host.ptr)? };
        let mut device_view: DynTensor = unsafe {
            ort::value::Value::from_ptr(std::ptr::NonNull::new(new_value()?).expect("non-null"), None)
        };
        host_view.copy_into(&mut device_view).map_err(|e| {
            ort_error(format!("uploading weight {} to CUDA device {}", init.name, dev.device), e)
        })?;
        let v = Arc::new(value);
        dev.values.lock().unwrap_or_else(|p| p.into_inner()).insert(key, v.clone());
        Ok(v)
    }

    /// Adds `facts.external` (files relative to `dir`) to `builder` as shared initializers — host values plus the
    /// prepacked container on CPU, device values on CUDA. Returns what the session must keep alive.
    fn attach(
        &self,
        rt: &Runtime,
        mut builder: SessionBuilder,
        dir: &Path,
        facts: &ModelFacts,
    ) -> Result<(SessionBuilder, Held)> {
        let mut held = Held::default();
        for init in &facts.external {
            let name = CString::new(init.name.as_str()).map_err(|_| Error::Session {
                graph: dir.display().to_string(),
                message: format!("initializer name {:?} contains NUL", init.name),
            })?;
            let ptr = if self.device.is_some() {
                let v = self.device_value(rt, dir, init)?;
                let p = v.value;
                held.device.push(v);
                p
            } else {
                let v = self.value(dir, init)?;
                let p = v.ptr;
                held.host.push(v);
                p
            };
            // SAFETY: valid options, C string and value; ORT keeps a reference, `held` keeps the value alive for
            // as long as the session.
            let status = unsafe { (ort::api().AddInitializer)(builder.ptr_mut(), name.as_ptr(), ptr) };
            unsafe { ort::Error::result_from_status(status) }
                .map_err(|e| ort_error(format!("adding shared initializer {}", init.name), e))?;
        }
        if self.device.is_none() {
            builder = builder
                .with_prepacked_weights(&self.prepacked)
                .map_err(|e| ort_error("prepacked weights", e))?;
        }
        Ok((builder, held))
    }

    /// Drops the mapped weight pages from this process's resident set (`MADV_DONTNEED`): after the sessions
    /// are built, prepacked weights live in the shared container and the raw pages are rarely read again; any
    /// later read faults them back in from the page cache.
    pub fn release_pages(&self) {
        release_mapped_pages(&self.maps);
    }

    /// Runs `f`, which builds sessions over these weights, while a background thread drops the mapped pages
    /// every few milliseconds. ONNX Runtime reads each weight once to prepack it; without trimming, the whole
    /// mapped file and the prepacked copy are resident together at the end of a build (base model: peak RSS
    /// 1.39 GB = 2.3× the weights for one profile); with it only the prepacked copy plus the pages read in the
    /// last window are.
    pub fn trim_while<R>(&self, f: impl FnOnce() -> R) -> R {
        let done = std::sync::atomic::AtomicBool::new(false);
        let maps = &self.maps;
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    release_mapped_pages(maps);
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            });
            let r = f();
            done.store(true, Ordering::Relaxed);
            r
        })
    }
}

/// The values a session holds on to (shared with the engine's other sessions).
#[derive(Default)]
struct Held {
    host: Vec<Arc<RawValue>>,
    device: Vec<Arc<DeviceValue>>,
}

/// A non-owning view of a host weight value, for one upload (`copy_into` takes ownership of a fresh value).
///
/// # Safety
/// `v` must be a live tensor value whose memory outlives the returned view's use.
unsafe fn host_tensor_view(v: *mut ort::sys::OrtValue) -> Result<DynTensor> {
    let api = ort::api();
    let mut info: *const ort::sys::OrtMemoryInfo = std::ptr::null();
    let mut data: *mut c_void = std::ptr::null_mut();
    let mut shape_info: *mut ort::sys::OrtTensorTypeAndShapeInfo = std::ptr::null_mut();
    let ok = |s, what: &str| {
        unsafe { ort::Error::result_from_status(s) }.map_err(|e| ort_error(what.to_string(), e))
    };
    unsafe {
        ok((api.GetTensorMemoryInfo)(v, &mut info), "reading a weight's memory info")?;
        ok((api.GetTensorMutableData)(v, &mut data), "reading a weight's data")?;
        ok((api.GetTensorTypeAndShape)(v, &mut shape_info), "reading a weight's shape")?;
        let mut elem = ort::sys::ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
        let mut ndim = 0usize;
        let r = ok((api.GetTensorElementType)(shape_info, &mut elem), "reading a weight's type")
            .and_then(|_| ok((api.GetDimensionsCount)(shape_info, &mut ndim), "reading a weight's rank"));
        let mut dims = vec![0i64; ndim];
        let r = r.and_then(|_| {
            ok((api.GetDimensions)(shape_info, dims.as_mut_ptr(), ndim), "reading a weight's dims")
        });
        (api.ReleaseTensorTypeAndShapeInfo)(shape_info);
        r?;
        let mut size = 0usize;
        ok((api.GetTensorSizeInBytes)(v, &mut size), "reading a weight's size")?;
        let mut out: *mut ort::sys::OrtValue = std::ptr::null_mut();
        ok(
            (api.CreateTensorWithDataAsOrtValue)(info, data, size, dims.as_ptr(), dims.len(), elem, &mut out),
            "viewing a weight",
        )?;
        Ok(ort::value::Value::from_ptr(std::ptr::NonNull::new(out).expect("non-null"), None))
    }
}

/// A small session on `target`'s CUDA device, only to get its CUDA allocator (ORT hands out device allocators
/// per session); kept alive as long as the weights it allocated.
fn bootstrap_device_allocator(
    rt: &Runtime,
    target: &Target,
    device: i32,
) -> Result<(Session, Arc<DeviceAllocator>)> {
    use exporter::graph::builder::value_info;
    use exporter::pb::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto};
    let sig = TensorSig { name: "x".into(), dtype: DType::F32, shape: vec![1] };
    let y = TensorSig { name: "y".into(), ..sig.clone() };
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: 18 }],
        graph: Some(GraphProto {
            node: vec![NodeProto {
                input: vec!["x".into()],
                output: vec!["y".into()],
                op_type: "Identity".into(),
                name: "bootstrap".into(),
                ..Default::default()
            }],
            name: "totoc_device_bootstrap".into(),
            input: vec![value_info(&sig)],
            output: vec![value_info(&y)],
            ..Default::default()
        }),
        ..Default::default()
    };
    let cfg = backend::session_config(
        target,
        &backend::Stage::Load { bundle_dir: PathBuf::from(".") },
        exporter::signature::Precision::Fp32,
    );
    let session = backend::session_builder(rt, target, &cfg)?
        .commit_from_memory(&model.encode_to_vec())
        .map_err(|e| Error::Session { graph: "device bootstrap".into(), message: e.to_string() })?;
    let alloc = MemoryInfo::new(AllocationDevice::CUDA, device, AllocatorType::Device, MemoryType::Default)
        .and_then(|info| Allocator::new(&session, info))
        .map_err(|e| ort_error("creating the CUDA allocator for the weights", e))?;
    Ok((session, Arc::new(DeviceAllocator(alloc))))
}

fn release_mapped_pages(maps: &Mutex<HashMap<PathBuf, Arc<memmap2::Mmap>>>) {
    let maps: Vec<Arc<memmap2::Mmap>> =
        maps.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
    for m in maps {
        // SAFETY: read-only file mapping: discarded pages are re-read from the file on access.
        let _ = unsafe { m.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
    }
}

/// An `OrtValue` of `init`'s shape and element type over `length` bytes at `data` in the memory `info` names; the
/// value does not own the bytes. `what` prefixes the error.
///
/// # Safety
/// `data` must hold `init.length` bytes, valid and unmoved for as long as the value is used.
unsafe fn tensor_over(
    info: &MemoryInfo,
    data: *mut c_void,
    init: &ExternalInit,
    elem: TensorElementType,
    what: &str,
) -> Result<*mut ort::sys::OrtValue> {
    let mut ptr: *mut ort::sys::OrtValue = std::ptr::null_mut();
    let status = (ort::api().CreateTensorWithDataAsOrtValue)(
        info.ptr(),
        data,
        init.length as usize,
        init.dims.as_ptr(),
        init.dims.len(),
        elem.into(),
        &mut ptr,
    );
    ort::Error::result_from_status(status).map_err(|e| ort_error(format!("{what} {}", init.name), e))?;
    Ok(ptr)
}

fn element_type(onnx: i32) -> Option<TensorElementType> {
    use tensor_proto::DataType as D;
    Some(match D::try_from(onnx).ok()? {
        D::Float => TensorElementType::Float32,
        D::Float16 => TensorElementType::Float16,
        D::Bfloat16 => TensorElementType::Bfloat16,
        D::Double => TensorElementType::Float64,
        D::Int64 => TensorElementType::Int64,
        D::Int32 => TensorElementType::Int32,
        D::Int8 => TensorElementType::Int8,
        D::Uint8 => TensorElementType::Uint8,
        D::Bool => TensorElementType::Bool,
        _ => return None,
    })
}

fn ort_error<R>(context: impl Into<String>, e: ort::Error<R>) -> Error {
    Error::Ort { context: context.into(), message: e.message().to_string() }
}

fn dtype_of(t: TensorElementType) -> Option<DType> {
    match t {
        TensorElementType::Float32 => Some(DType::F32),
        TensorElementType::Float16 => Some(DType::F16),
        TensorElementType::Int64 => Some(DType::I64),
        _ => None,
    }
}

fn element_of(d: DType) -> TensorElementType {
    match d {
        DType::F32 => TensorElementType::Float32,
        DType::F16 => TensorElementType::Float16,
        DType::I64 => TensorElementType::Int64,
    }
}

/// Creates `model`'s session for `target` (weights shared through `weights` on CPU), with the logger that counts
/// ONNX Runtime's cache-copy warnings. Returns the session, the model's facts and the shared values it holds.
fn open_session(
    rt: &Runtime,
    model: &Path,
    name: &str,
    target: &Target,
    cfg: &SessionConfig,
    weights: Option<&SharedWeights>,
    copies_logged: Arc<AtomicUsize>,
) -> Result<(Session, ModelFacts, Held)> {
    let facts = model_facts(model)?;
    let builder = backend::session_builder(rt, target, cfg)?;
    let builder = with_copy_counter(builder, name, copies_logged)?;
    let (mut builder, held) = match (weights, weight_placement(target)) {
        (Some(w), WeightPlacement::Host | WeightPlacement::Device(_)) => {
            let dir = model.parent().unwrap_or(Path::new("."));
            w.attach(rt, builder, dir, &facts)?
        }
        _ => (builder, Held::default()),
    };
    let session = builder.commit_from_file(model).map_err(|e| Error::Session {
        graph: name.to_string(),
        message: format!("creating the {} session from {}: {e}", target.name(), model.display()),
    })?;
    Ok((session, facts, held))
}

/// A session input's or output's static signature (an error for anything totoc graphs never have).
fn signature_of(o: &ort::value::Outlet, graph: &str) -> Result<TensorSig> {
    let err = |message: String| Error::Session { graph: graph.to_string(), message };
    let ty = o.dtype();
    let (Some(elem), Some(shape)) = (ty.tensor_type(), ty.tensor_shape()) else {
        return Err(err(format!("`{}` is not a tensor", o.name())));
    };
    let dtype = dtype_of(elem).ok_or_else(|| {
        err(format!("`{}` has element type {elem:?}; totoc graphs use f32/f16/i64", o.name()))
    })?;
    if shape.iter().any(|&d| d <= 0) {
        return Err(err(format!(
            "`{}` has a dynamic shape {:?}; totoc graphs are static",
            o.name(),
            &**shape
        )));
    }
    Ok(TensorSig { name: o.name().to_string(), dtype, shape: shape.iter().map(|&d| d as usize).collect() })
}

/// Where a bound tensor lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    Host,
    /// CUDA device memory (fixed address for the runner's lifetime).
    Device(i32),
}

/// How one graph input or output is bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotPlan {
    pub name: String,
    pub memory: Memory,
    /// A pinned host mirror the host writes (inputs) or reads (outputs), copied to/from the device around each
    /// run. Caches have none: they stay on the device between steps.
    pub host_mirror: bool,
    /// For a KV-cache output: the cache input it updates (bound to that input's buffer in place, or to its
    /// ping-pong partner).
    pub cache_of: Option<String>,
}

/// Whether a runner's session is captured as a CUDA graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capture {
    /// Kernels launched every run (CPU, or CUDA graphs off).
    No,
    /// The session captures its kernels once and replays them, under ONNX Runtime's graph annotation
    /// `gpu_graph_id` (the run option key). Every bucket is its own session, so every bucket gets its own captured
    /// graph, all under the default id 0; a replay reads and writes the addresses bound at capture, which the
    /// runner never changes.
    Graph { gpu_graph_id: i64 },
}

/// A runner's whole binding: every slot, how caches carry over, and whether it is captured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindingPlan {
    pub inputs: Vec<SlotPlan>,
    pub outputs: Vec<SlotPlan>,
    pub cache_mode: CacheMode,
    pub capture: Capture,
}

/// The binding of a graph with `inputs`/`outputs` on `target`; `in_place` are the (input, output) cache pairs the
/// graph lets update in place ([`ModelFacts::in_place`]). Pure: what [`GraphRunner::load`] allocates and binds.
///
/// Refuses CUDA graphs over a ping-pong cache: a captured graph replays the device addresses bound at capture, so
/// swapping the cache bindings between runs would make it read the stale buffer and write the live one.
pub fn binding_plan(
    target: &Target,
    inputs: &[TensorSig],
    outputs: &[TensorSig],
    in_place: &[(String, String)],
) -> std::result::Result<BindingPlan, String> {
    let memory = target.device().map_or(Memory::Host, Memory::Device);
    let gpu = target.is_gpu();
    let cache_of = |o: &TensorSig| {
        state_input_name(&o.name)
            .and_then(|n| inputs.iter().find(|i| i.name == n))
            .filter(|i| i.shape == o.shape && i.dtype == o.dtype)
            .map(|i| i.name.clone())
    };
    let outs: Vec<SlotPlan> = outputs
        .iter()
        .map(|o| {
            let c = cache_of(o);
            SlotPlan { name: o.name.clone(), memory, host_mirror: gpu && c.is_none(), cache_of: c }
        })
        .collect();
    let cache_inputs: Vec<&String> = outs.iter().filter_map(|o| o.cache_of.as_ref()).collect();
    let ins = inputs
        .iter()
        .map(|i| SlotPlan {
            name: i.name.clone(),
            memory,
            host_mirror: gpu && !cache_inputs.contains(&&i.name),
            cache_of: None,
        })
        .collect();
    let pairs: Vec<(&String, &String)> =
        outs.iter().filter_map(|o| o.cache_of.as_ref().map(|c| (c, &o.name))).collect();
    let cache_mode = if pairs.is_empty() {
        CacheMode::None
    } else if pairs.iter().all(|(i, o)| in_place.iter().any(|(a, b)| a == *i && b == *o)) {
        CacheMode::InPlace
    } else {
        CacheMode::PingPong
    };
    let capture = match (target.cuda_graph(), cache_mode) {
        (false, _) => Capture::No,
        (true, CacheMode::PingPong) => {
            return Err("this graph's caches cannot be updated in place (the cache input feeds more than the \
                        TensorScatter/ScatterND that writes it), and a captured CUDA graph replays fixed buffers; \
                        build the engine without --cuda-graph"
                .into())
        }
        (true, _) => Capture::Graph { gpu_graph_id: 0 },
    };
    Ok(BindingPlan { inputs: ins, outputs: outs, cache_mode, capture })
}

/// A loaded session that one or more [`GraphRunner`]s bind their I/O to: one per static bucket graph, or one for
/// every bucket of a shape-polymorphic graph (a TensorRT engine serving several buckets holds its weights once).
pub struct SharedSession {
    session: Arc<Session>,
    facts: ModelFacts,
    held: Arc<Held>,
    providers: Vec<ProviderNodes>,
    copies_logged: Arc<AtomicUsize>,
}

impl std::fmt::Debug for SharedSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSession").field("providers", &self.providers).finish_non_exhaustive()
    }
}

impl SharedSession {
    /// Opens `model` for `target` (see [`GraphRunner::load`]).
    pub fn open(
        rt: &Runtime,
        model: &Path,
        name: &str,
        target: &Target,
        cfg: &SessionConfig,
        weights: Option<&SharedWeights>,
    ) -> Result<Self> {
        let copies_logged = Arc::new(AtomicUsize::new(0));
        let (session, facts, held) =
            open_session(rt, model, name, target, cfg, weights, copies_logged.clone())?;
        let providers = ep_assignment(&session);
        Ok(SharedSession {
            session: Arc::new(session),
            facts,
            held: Arc::new(held),
            providers,
            copies_logged,
        })
    }

    /// Nodes per execution provider.
    pub fn providers(&self) -> &[ProviderNodes] {
        &self.providers
    }

    /// Whether a bucket with static `inputs`/`outputs` fits this (shape-polymorphic) session: the same names and
    /// types in order, every fixed dimension equal.
    pub fn check_bucket(
        &self,
        inputs: &[TensorSig],
        outputs: &[TensorSig],
    ) -> std::result::Result<(), String> {
        let fits = |o: &ort::value::Outlet, s: &TensorSig| {
            let ty = o.dtype();
            let (Some(elem), Some(shape)) = (ty.tensor_type(), ty.tensor_shape()) else { return false };
            o.name() == s.name
                && dtype_of(elem) == Some(s.dtype)
                && shape.len() == s.shape.len()
                && shape.iter().zip(&s.shape).all(|(&d, &n)| d < 0 || d as usize == n)
        };
        let session = &self.session;
        for (what, outlets, sigs) in
            [("input", session.inputs(), inputs), ("output", session.outputs(), outputs)]
        {
            if outlets.len() != sigs.len() || !outlets.iter().zip(sigs.iter()).all(|(o, s)| fits(o, s)) {
                return Err(format!(
                    "the bucket's {what}s {:?} do not fit the shared graph's ({:?})",
                    sigs.iter().map(|s| (&s.name, &s.shape)).collect::<Vec<_>>(),
                    outlets.iter().map(|o| o.name()).collect::<Vec<_>>()
                ));
            }
        }
        Ok(())
    }
}

/// ONNX Runtime's run option selecting a captured CUDA graph (`kOrtRunOptionsConfigCudaGraphAnnotation`).
pub const GPU_GRAPH_ID: &str = "gpu_graph_id";

/// The CUDA-graph key of every bucket of an engine: `buckets` are `(bucket, session file)` in load order; buckets
/// with the same file share one session (the shape-polymorphic form).
///
/// * One session per bucket: each captures its own graph under the default id 0.
/// * CUDA, one session for several buckets: each bucket gets its own `gpu_graph_id` (0, 1, …), and ONNX Runtime's
///   CUDA provider keeps one captured graph per id, each replaying that bucket's fixed addresses.
/// * TensorRT, one session for several buckets: refused — ONNX Runtime 1.31's TensorRT provider keeps a single
///   captured graph per provider instance (no annotation ids), so a second bucket would replay the first one's
///   shapes and buffers.
pub fn capture_keys(
    target: &Target,
    buckets: &[(Bucket, String)],
) -> std::result::Result<Vec<Capture>, String> {
    if !target.cuda_graph() {
        return Ok(vec![Capture::No; buckets.len()]);
    }
    // the same bucket listed by several profiles is one graph (the engine loads it once): one key
    let mut keys: Vec<(&str, Bucket)> = Vec::new();
    for (bucket, file) in buckets {
        if !keys.iter().any(|(f, b)| *f == file.as_str() && b == bucket) {
            keys.push((file.as_str(), *bucket));
        }
    }
    let mut out = Vec::with_capacity(buckets.len());
    for (bucket, file) in buckets {
        let on_session: Vec<Bucket> =
            keys.iter().filter(|(f, _)| *f == file.as_str()).map(|(_, b)| *b).collect();
        if on_session.len() > 1 && matches!(target, Target::TensorRt { .. }) {
            return Err(format!(
                "{} buckets share the TensorRT engine {file} and ONNX Runtime's TensorRT provider captures \
                 one CUDA graph per engine: build without --cuda-graph, or with `--graphs per-bucket` (one engine, \
                 and one copy of the weights, per bucket) to capture each bucket ({bucket:?})",
                on_session.len()
            ));
        }
        let id = on_session.iter().position(|b| b == bucket).expect("listed") as i64;
        out.push(Capture::Graph { gpu_graph_id: id });
    }
    Ok(out)
}

/// What [`GraphRunner::check`] found: the session's I/O and where its nodes run.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphCheck {
    pub inputs: Vec<TensorSig>,
    pub outputs: Vec<TensorSig>,
    pub providers: Vec<ProviderNodes>,
}

/// One bound input or output.
struct Slot {
    sig: TensorSig,
    /// The bound tensor (host memory on CPU, device memory on GPU).
    bound: DynTensor,
    /// Ping-pong partner of a cache input (the buffer the output is written to).
    spare: Option<DynTensor>,
    /// Pinned host mirror of a device tensor.
    host: Option<DynTensor>,
    /// Host mirror written since the last upload.
    dirty: bool,
}

/// A loaded graph with all I/O preallocated and bound once (see the module docs).
pub struct GraphRunner {
    name: String,
    target: Target,
    /// The session; shared by every bucket of a shape-polymorphic graph (TensorRT, [`SharedSession`]).
    session: Arc<Session>,
    binding: IoBinding,
    inputs: Vec<Slot>,
    outputs: Vec<Slot>,
    /// (input index, output index) of each cache pair.
    caches: Vec<(usize, usize)>,
    cache_mode: CacheMode,
    capture: Capture,
    /// Run options carrying a non-default `gpu_graph_id` (several captured graphs on one session).
    run_options: Option<ort::session::RunOptions>,
    providers: Vec<ProviderNodes>,
    copies_logged: Arc<AtomicUsize>,
    pinned: Option<Allocator>,
    /// Pinned scratch for `copy_cache` on GPU, by source output name.
    scratch: HashMap<String, DynTensor>,
    _weights: Arc<Held>,
}

impl std::fmt::Debug for GraphRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphRunner")
            .field("name", &self.name)
            .field("target", &self.target)
            .field("cache_mode", &self.cache_mode)
            .field("providers", &self.providers)
            .finish_non_exhaustive()
    }
}

impl GraphRunner {
    /// Loads `model` for `target` with the session settings `cfg` (see [`backend::session_config`]).
    ///
    /// `weights`: share external initializers and prepacked weights with other sessions (CPU only; ignored on
    /// GPU targets). `name` names the graph in errors (`small.decode`).
    pub fn load(
        rt: &Runtime,
        model: &Path,
        name: &str,
        target: &Target,
        cfg: &SessionConfig,
        weights: Option<&SharedWeights>,
    ) -> Result<Self> {
        let shared = SharedSession::open(rt, model, name, target, cfg, weights)?;
        let sig_of = |o: &ort::value::Outlet| signature_of(o, name);
        let in_sigs: Vec<TensorSig> = shared.session.inputs().iter().map(sig_of).collect::<Result<_>>()?;
        let out_sigs: Vec<TensorSig> = shared.session.outputs().iter().map(sig_of).collect::<Result<_>>()?;
        Self::bind(&shared, name, target, in_sigs, out_sigs, 0)
    }

    /// One bucket of a shape-polymorphic graph's `shared` session, with this bucket's static I/O (`inputs`,
    /// `outputs`: the graph's inputs and outputs, in order, at the bucket's sizes) allocated and bound.
    ///
    /// `gpu_graph_id` keys this bucket's captured CUDA graph on the shared session (see [`capture_keys`]).
    pub fn load_bucket(
        shared: &SharedSession,
        name: &str,
        target: &Target,
        inputs: Vec<TensorSig>,
        outputs: Vec<TensorSig>,
        gpu_graph_id: i64,
    ) -> Result<Self> {
        let err = |message: String| Error::Session { graph: name.to_string(), message };
        shared.check_bucket(&inputs, &outputs).map_err(err)?;
        Self::bind(shared, name, target, inputs, outputs, gpu_graph_id)
    }

    /// Allocates and binds `in_sigs`/`out_sigs` on `shared`'s session per [`binding_plan`].
    fn bind(
        shared: &SharedSession,
        name: &str,
        target: &Target,
        in_sigs: Vec<TensorSig>,
        out_sigs: Vec<TensorSig>,
        gpu_graph_id: i64,
    ) -> Result<Self> {
        let session = shared.session.clone();
        let (facts, copies_logged) = (&shared.facts, shared.copies_logged.clone());
        let providers = shared.providers.clone();

        let host_alloc = Allocator::default();
        let (device_alloc, pinned) = if let Some(device) = target.device() {
            let dev =
                MemoryInfo::new(AllocationDevice::CUDA, device, AllocatorType::Device, MemoryType::Default)
                    .and_then(|info| Allocator::new(&session, info))
                    .map_err(|e| ort_error("creating the CUDA allocator", e))?;
            let pin = MemoryInfo::new(
                AllocationDevice::CUDA_PINNED,
                0,
                AllocatorType::Device,
                MemoryType::CPUOutput,
            )
            .and_then(|info| Allocator::new(&session, info))
            .map_err(|e| ort_error("creating the pinned host allocator", e))?;
            (dev, Some(pin))
        } else {
            (Allocator::default(), None)
        };
        let session_err = |message: String| Error::Session { graph: name.to_string(), message };
        let new_tensor = |alloc: &Allocator, sig: &TensorSig| {
            DynTensor::new(alloc, element_of(sig.dtype), sig.shape.clone())
                .map_err(|e| ort_error(format!("allocating `{}` of graph {name}", sig.name), e))
        };
        let plan = binding_plan(target, &in_sigs, &out_sigs, &facts.in_place).map_err(session_err)?;
        let alloc_for = |m: Memory| match m {
            Memory::Host => &host_alloc,
            Memory::Device(_) => &device_alloc,
        };
        let mut inputs = Vec::new();
        for (sig, p) in in_sigs.into_iter().zip(&plan.inputs) {
            let bound = new_tensor(alloc_for(p.memory), &sig)?;
            let host = match (&pinned, p.host_mirror) {
                (Some(pin), true) => Some(new_tensor(pin, &sig)?),
                _ => None,
            };
            inputs.push(Slot { sig, bound, spare: None, host, dirty: false });
        }
        let mut outputs = Vec::new();
        let mut caches = Vec::new();
        for (sig, p) in out_sigs.into_iter().zip(&plan.outputs) {
            match p.cache_of.as_ref().and_then(|n| inputs.iter().position(|s| &s.sig.name == n)) {
                Some(i) => {
                    if plan.cache_mode == CacheMode::PingPong {
                        inputs[i].spare = Some(new_tensor(alloc_for(p.memory), &sig)?);
                    }
                    caches.push((i, outputs.len()));
                    // the output slot's own tensor is unused for a cache: it is the input's (or its spare)
                    let bound = new_tensor(&host_alloc, &TensorSig { shape: vec![1], ..sig.clone() })?;
                    outputs.push(Slot { sig, bound, spare: None, host: None, dirty: false });
                }
                None => {
                    let bound = new_tensor(alloc_for(p.memory), &sig)?;
                    let host = match (&pinned, p.host_mirror) {
                        (Some(pin), true) => Some(new_tensor(pin, &sig)?),
                        _ => None,
                    };
                    outputs.push(Slot { sig, bound, spare: None, host, dirty: false });
                }
            }
        }
        let mut binding = session.create_binding().map_err(|e| ort_error("creating the I/O binding", e))?;
        for s in &inputs {
            binding
                .bind_input(&s.sig.name, &s.bound)
                .map_err(|e| ort_error(format!("binding `{}`", s.sig.name), e))?;
        }
        for (idx, s) in outputs.iter_mut().enumerate() {
            let target_tensor = match caches.iter().find(|(_, o)| *o == idx) {
                Some((i, _)) => match &mut inputs[*i].spare {
                    Some(spare) => spare,
                    None => &mut inputs[*i].bound,
                },
                None => &mut s.bound,
            };
            binding
                .bind_output(&s.sig.name, target_tensor)
                .map_err(|e| ort_error(format!("binding `{}`", s.sig.name), e))?;
        }
        let cache_mode = plan.cache_mode;
        let capture = match plan.capture {
            Capture::Graph { .. } => Capture::Graph { gpu_graph_id },
            Capture::No => Capture::No,
        };
        let run_options = match capture {
            Capture::Graph { gpu_graph_id } if gpu_graph_id != 0 => {
                let mut o =
                    ort::session::RunOptions::new().map_err(|e| ort_error("creating run options", e))?;
                o.set(GPU_GRAPH_ID, gpu_graph_id.to_string())
                    .map_err(|e| ort_error("setting gpu_graph_id", e))?;
                Some(o)
            }
            _ => None,
        };
        Ok(GraphRunner {
            name: name.to_string(),
            target: target.clone(),
            session,
            binding,
            inputs,
            outputs,
            caches,
            cache_mode,
            capture,
            run_options,
            providers,
            copies_logged,
            pinned,
            scratch: HashMap::new(),
            _weights: shared.held.clone(),
        })
    }

    /// Creates the graph's session as [`load`](Self::load) does — so ONNX Runtime parses, optimises and plans it
    /// for `target` — and reports its I/O and providers, without allocating any of its I/O (a build checks every
    /// bucket, and the largest caches are gigabytes).
    pub fn check(
        rt: &Runtime,
        model: &Path,
        name: &str,
        target: &Target,
        cfg: &SessionConfig,
        weights: Option<&SharedWeights>,
    ) -> Result<GraphCheck> {
        let shared = SharedSession::open(rt, model, name, target, cfg, weights)?;
        let session = &shared.session;
        Ok(GraphCheck {
            inputs: session.inputs().iter().map(|o| signature_of(o, name)).collect::<Result<_>>()?,
            outputs: session.outputs().iter().map(|o| signature_of(o, name)).collect::<Result<_>>()?,
            providers: shared.providers.clone(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Input signatures, in graph order.
    pub fn inputs(&self) -> impl Iterator<Item = &TensorSig> {
        self.inputs.iter().map(|s| &s.sig)
    }

    /// Output signatures, in graph order.
    pub fn outputs(&self) -> impl Iterator<Item = &TensorSig> {
        self.outputs.iter().map(|s| &s.sig)
    }

    pub fn cache_mode(&self) -> CacheMode {
        self.cache_mode
    }

    /// Whether (and under which key) this runner's session captures it as a CUDA graph.
    pub fn capture(&self) -> Capture {
        self.capture
    }

    /// Nodes per execution provider, as ONNX Runtime assigned them (`session.record_ep_graph_assignment_info`).
    pub fn providers(&self) -> &[ProviderNodes] {
        &self.providers
    }

    /// The provider that ran the most nodes (`CPUExecutionProvider`, `CUDAExecutionProvider`, ...).
    pub fn main_provider(&self) -> Option<&str> {
        self.providers.iter().max_by_key(|p| p.nodes).map(|p| p.provider.as_str())
    }

    /// How many times ONNX Runtime reported copying a whole KV cache (`TensorScatter` not in place). 0 with the
    /// in-place binding.
    pub fn cache_copies_logged(&self) -> usize {
        self.copies_logged.load(Ordering::Relaxed)
    }

    fn slot_index(slots: &[Slot], name: &str) -> Option<usize> {
        slots.iter().position(|s| s.sig.name == name)
    }

    fn tensor_error(&self, name: &str, message: impl Into<String>) -> Error {
        Error::Tensor { graph: self.name.clone(), name: name.to_string(), message: message.into() }
    }

    /// The host buffer of input `name`, to be filled before [`run`](Self::run). On GPU targets this is the
    /// pinned mirror, uploaded by `run` (a cache input is first downloaded, so partial writes keep the rest).
    pub fn input_mut<T: PrimitiveTensorElementType + std::fmt::Debug>(
        &mut self,
        name: &str,
    ) -> Result<&mut [T]> {
        let i = Self::slot_index(&self.inputs, name).ok_or_else(|| {
            self.tensor_error(name, format!("no such input (inputs: {})", self.input_names()))
        })?;
        if let (Some(pin), None) = (&self.pinned, &self.inputs[i].host) {
            let mut host =
                DynTensor::new(pin, element_of(self.inputs[i].sig.dtype), self.inputs[i].sig.shape.clone())
                    .map_err(|e| ort_error(format!("allocating a host mirror of `{name}`"), e))?;
            self.inputs[i]
                .bound
                .copy_into(&mut host)
                .map_err(|e| ort_error(format!("downloading `{name}`"), e))?;
            self.inputs[i].host = Some(host);
        }
        let graph = self.name.clone();
        let slot = &mut self.inputs[i];
        slot.dirty = true;
        let t = slot.host.as_mut().unwrap_or(&mut slot.bound);
        t.try_extract_tensor_mut::<T>().map(|(_, d)| d).map_err(|e| Error::Tensor {
            graph,
            name: name.to_string(),
            message: format!("cannot view as {}: {e}", std::any::type_name::<T>()),
        })
    }

    /// Whether the graph has an input `name` (shape-polymorphic graphs take the time mask as one).
    pub fn has_input(&self, name: &str) -> bool {
        Self::slot_index(&self.inputs, name).is_some()
    }

    /// The element type of input `name`.
    pub fn input_dtype(&self, name: &str) -> Result<DType> {
        Self::slot_index(&self.inputs, name)
            .map(|i| self.inputs[i].sig.dtype)
            .ok_or_else(|| self.tensor_error(name, format!("no such input (inputs: {})", self.input_names())))
    }

    /// Writes f32 `values` into float input `name` from element `offset`, rounding to nearest f16 when the graph
    /// takes f16 (fp16 graphs take f16 patches, rotary tables and caches; the host computes in f32/f64).
    pub fn write_f32(&mut self, name: &str, offset: usize, values: &[f32]) -> Result<()> {
        let dtype = self.input_dtype(name)?;
        let out_of_range =
            |len: usize| format!("writing {} values at {offset} into {len} elements", values.len());
        match dtype {
            DType::F32 => {
                let dst = self.input_mut::<f32>(name)?;
                let len = dst.len();
                let d = dst.get_mut(offset..offset + values.len()).ok_or_else(|| out_of_range(len));
                match d {
                    Ok(d) => d.copy_from_slice(values),
                    Err(m) => return Err(self.tensor_error(name, m)),
                }
            }
            DType::F16 => {
                let dst = self.input_mut::<half::f16>(name)?;
                let len = dst.len();
                match dst.get_mut(offset..offset + values.len()) {
                    Some(d) => d.iter_mut().zip(values).for_each(|(d, v)| *d = half::f16::from_f32(*v)),
                    None => return Err(self.tensor_error(name, out_of_range(len))),
                }
            }
            DType::I64 => return Err(self.tensor_error(name, "is an integer input, not a float one")),
        }
        Ok(())
    }

    /// Sets every element of float input `name` to `v` (f32 or f16).
    pub fn fill_f32(&mut self, name: &str, v: f32) -> Result<()> {
        match self.input_dtype(name)? {
            DType::F32 => self.input_mut::<f32>(name)?.fill(v),
            DType::F16 => self.input_mut::<half::f16>(name)?.fill(half::f16::from_f32(v)),
            DType::I64 => return Err(self.tensor_error(name, "is an integer input, not a float one")),
        }
        Ok(())
    }

    /// The current contents of input `name` (host view; on GPU the pinned mirror, if any).
    pub fn input<T: PrimitiveTensorElementType + std::fmt::Debug>(&self, name: &str) -> Result<&[T]> {
        let i = Self::slot_index(&self.inputs, name).ok_or_else(|| {
            self.tensor_error(name, format!("no such input (inputs: {})", self.input_names()))
        })?;
        let slot = &self.inputs[i];
        self.view(slot.host.as_ref().unwrap_or(&slot.bound), name)
    }

    /// Output `name` of the last run. For a KV cache this is the updated cache (the input's buffer after an
    /// in-place run). On GPU, caches are device-resident: read them with [`input_mut`](Self::input_mut) on the
    /// cache input or move them with [`copy_cache`](Self::copy_cache).
    pub fn output<T: PrimitiveTensorElementType + std::fmt::Debug>(&self, name: &str) -> Result<&[T]> {
        let o = Self::slot_index(&self.outputs, name).ok_or_else(|| {
            self.tensor_error(name, format!("no such output (outputs: {})", self.output_names()))
        })?;
        let t = match self.caches.iter().find(|(_, oi)| *oi == o) {
            // after a ping-pong run the inputs were swapped: the fresh state is the bound input
            Some((i, _)) => &self.inputs[*i].bound,
            None => self.outputs[o].host.as_ref().unwrap_or(&self.outputs[o].bound),
        };
        self.view(t, name)
    }

    fn view<'a, T: PrimitiveTensorElementType + std::fmt::Debug>(
        &self,
        t: &'a DynTensor,
        name: &str,
    ) -> Result<&'a [T]> {
        t.try_extract_tensor::<T>().map(|(_, d)| d).map_err(|e| {
            self.tensor_error(name, format!("cannot view as {} on the host: {e}", std::any::type_name::<T>()))
        })
    }

    fn input_names(&self) -> String {
        self.inputs.iter().map(|s| s.sig.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    fn output_names(&self) -> String {
        self.outputs.iter().map(|s| s.sig.name.as_str()).collect::<Vec<_>>().join(", ")
    }

    /// Runs the graph on the bound buffers: one `RunWithBinding` (plus, on GPU, the uploads of written inputs
    /// and downloads of non-cache outputs).
    pub fn run(&mut self) -> Result<()> {
        if self.pinned.is_some() {
            for s in self.inputs.iter_mut().filter(|s| s.dirty) {
                if let Some(host) = &s.host {
                    host.copy_into(&mut s.bound)
                        .map_err(|e| ort_error(format!("uploading `{}`", s.sig.name), e))?;
                }
                s.dirty = false;
            }
        }
        let api = ort::api();
        // SAFETY: session and binding are alive and belong together; all bound values are owned by `self`.
        let options = self.run_options.as_ref().map_or(std::ptr::null(), |o| o.ptr());
        let status =
            unsafe { (api.RunWithBinding)(self.session.ptr().cast_mut(), options, self.binding.ptr()) };
        unsafe { ort::Error::result_from_status(status) }
            .map_err(|e| Error::Session { graph: self.name.clone(), message: format!("run failed: {e}") })?;
        if self.pinned.is_some() {
            for s in self.outputs.iter_mut() {
                if let Some(host) = &mut s.host {
                    s.bound
                        .copy_into(host)
                        .map_err(|e| ort_error(format!("downloading `{}`", s.sig.name), e))?;
                }
            }
        }
        if self.cache_mode == CacheMode::PingPong {
            self.swap_ping_pong()?;
        }
        Ok(())
    }

    fn swap_ping_pong(&mut self) -> Result<()> {
        for &(i, o) in &self.caches {
            let slot = &mut self.inputs[i];
            let Some(spare) = slot.spare.as_mut() else { continue };
            std::mem::swap(&mut slot.bound, spare);
            self.binding
                .bind_input(&slot.sig.name, &slot.bound)
                .map_err(|e| ort_error("re-binding a cache", e))?;
            let out_name = &self.outputs[o].sig.name;
            self.binding
                .bind_output(out_name, slot.spare.as_mut().expect("spare"))
                .map_err(|e| ort_error("re-binding a cache", e))?;
        }
        Ok(())
    }

    /// The cache inputs this graph carries (`k_cache.0`, `v_cache.0`, ...).
    pub fn cache_inputs(&self) -> impl Iterator<Item = &str> {
        self.caches.iter().map(|&(i, _)| self.inputs[i].sig.name.as_str())
    }

    /// Copies KV cache rows from `src`'s cache outputs into this graph's cache inputs: for every move and every
    /// `k_cache.i`/`v_cache.i`, slots `0..slots` of every head of row `dst` become those of `src`'s row `src_row`
    /// of `k_cache_out.i`/`v_cache_out.i`. The two graphs may have different rows and slot counts (a prefill
    /// bucket's S context slots go into a decode bucket's T-slot cache); slots past `slots` are left as they are
    /// (the decode key mask hides them until written). Used to give every sample path of a series its prefill
    /// cache once.
    pub fn copy_cache(&mut self, src: &GraphRunner, moves: &[CacheMove]) -> Result<()> {
        let pairs: Vec<(usize, usize)> = self
            .inputs
            .iter()
            .enumerate()
            .filter(|(i, _)| self.caches.iter().any(|(ci, _)| ci == i))
            .filter_map(|(i, s)| {
                src.outputs
                    .iter()
                    .position(|o| state_input_name(&o.sig.name).as_deref() == Some(&s.sig.name))
                    .map(|o| (i, o))
            })
            .collect();
        if pairs.is_empty() {
            return Err(
                self.tensor_error("k_cache.0", format!("no cache input matches an output of {}", src.name))
            );
        }
        for (i, o) in pairs {
            let (dst_sig, src_sig) = (&self.inputs[i].sig, &src.outputs[o].sig);
            let layout = match (CacheLayout::of(dst_sig), CacheLayout::of(src_sig)) {
                (Some(d), Some(s))
                    if dst_sig.dtype == src_sig.dtype && d.heads == s.heads && d.width == s.width =>
                {
                    (d, s)
                }
                _ => {
                    return Err(self.tensor_error(
                        &dst_sig.name,
                        format!(
                            "cache {:?} {:?} does not match {}'s {} {:?} {:?}",
                            dst_sig.dtype,
                            dst_sig.shape,
                            src.name,
                            src_sig.name,
                            src_sig.dtype,
                            src_sig.shape
                        ),
                    ))
                }
            };
            if let Some(m) = moves.iter().find(|m| {
                m.dst >= layout.0.rows
                    || m.src >= layout.1.rows
                    || m.slots > layout.0.slots
                    || m.slots > layout.1.slots
            }) {
                return Err(self.tensor_error(
                    &dst_sig.name,
                    format!("cache move {m:?} outside {:?} ← {:?}", dst_sig.shape, src_sig.shape),
                ));
            }
            let elem = dtype_size(dst_sig.dtype);
            let src_name = src_sig.name.clone();
            if let Some(pin) = &self.pinned {
                // GPU: device → pinned scratch (source rows), host copy into the pinned mirror, one upload.
                if !self.scratch.contains_key(&src_name) {
                    let t = DynTensor::new(pin, element_of(src_sig.dtype), src_sig.shape.clone())
                        .map_err(|e| ort_error("allocating cache scratch", e))?;
                    self.scratch.insert(src_name.clone(), t);
                }
                let scratch = self.scratch.get_mut(&src_name).expect("inserted");
                src.output_tensor(o)
                    .copy_into(&mut *scratch)
                    .map_err(|e| ort_error("downloading a cache", e))?;
                if self.inputs[i].host.is_none() {
                    let mut t = DynTensor::new(pin, element_of(dst_sig.dtype), dst_sig.shape.clone())
                        .map_err(|e| ort_error("allocating a cache mirror", e))?;
                    // the mirror must start as the device cache, or the upload would overwrite untouched slots
                    self.inputs[i]
                        .bound
                        .copy_into(&mut t)
                        .map_err(|e| ort_error("downloading a cache", e))?;
                    self.inputs[i].host = Some(t);
                }
                let slot = &mut self.inputs[i];
                let host = slot.host.as_mut().expect("mirror");
                copy_slots(bytes_of(scratch)?, bytes_of_mut(host)?, layout, elem, moves);
                host.copy_into(&mut slot.bound).map_err(|e| ort_error("uploading a cache", e))?;
                slot.dirty = false;
            } else {
                let s = bytes_of(src.output_tensor(o))?;
                let d = bytes_of_mut(&mut self.inputs[i].bound)?;
                copy_slots(s, d, layout, elem, moves);
            }
        }
        Ok(())
    }

    /// The tensor holding output `o` after a run.
    fn output_tensor(&self, o: usize) -> &DynTensor {
        match self.caches.iter().find(|(_, oi)| *oi == o) {
            Some((i, _)) => &self.inputs[*i].bound,
            None => &self.outputs[o].bound,
        }
    }
}

fn dtype_size(d: DType) -> usize {
    match d {
        DType::F32 => 4,
        DType::F16 => 2,
        DType::I64 => 8,
    }
}

fn bytes_of(t: &DynTensor) -> Result<&[u8]> {
    let len = t.size().unwrap_or(0);
    let ptr = t.data_ptr();
    if ptr.is_null() || !t.memory_info().is_cpu_accessible() {
        return Err(Error::Ort { context: "viewing a tensor".into(), message: "not in host memory".into() });
    }
    // SAFETY: host tensor of `len` bytes owned by `t`.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

fn bytes_of_mut(t: &mut DynTensor) -> Result<&mut [u8]> {
    let len = t.size().unwrap_or(0);
    if !t.memory_info().is_cpu_accessible() {
        return Err(Error::Ort { context: "viewing a tensor".into(), message: "not in host memory".into() });
    }
    let ptr = t.data_ptr_mut();
    if ptr.is_null() {
        return Err(Error::Ort { context: "viewing a tensor".into(), message: "null data".into() });
    }
    // SAFETY: host tensor of `len` bytes owned by `t`, borrowed mutably.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast::<u8>(), len) })
}

/// One cache row copy of [`GraphRunner::copy_cache`]: slots `0..slots` of source row `src` into row `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheMove {
    pub dst: usize,
    pub src: usize,
    pub slots: usize,
}

/// The `[rows, heads, slots, width]` layout of a cache tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CacheLayout {
    rows: usize,
    heads: usize,
    slots: usize,
    width: usize,
}

impl CacheLayout {
    fn of(sig: &TensorSig) -> Option<Self> {
        match sig.shape[..] {
            [rows, heads, slots, width] => Some(CacheLayout { rows, heads, slots, width }),
            _ => None,
        }
    }
}

/// Applies `moves` from `src` (layout `.1`) into `dst` (layout `.0`), elements of `elem` bytes.
fn copy_slots(
    src: &[u8],
    dst: &mut [u8],
    (d, s): (CacheLayout, CacheLayout),
    elem: usize,
    moves: &[CacheMove],
) {
    let run = |slots: usize| slots * d.width * elem;
    for m in moves {
        let len = run(m.slots);
        for h in 0..d.heads {
            let from = ((m.src * s.heads + h) * s.slots) * s.width * elem;
            let to = ((m.dst * d.heads + h) * d.slots) * d.width * elem;
            dst[to..to + len].copy_from_slice(&src[from..from + len]);
        }
    }
}

/// Gives the session a logger that counts ORT's "copying past_cache to present_cache" warnings and prints the
/// rest of its warnings and errors.
fn with_copy_counter(
    builder: SessionBuilder,
    name: &str,
    counter: Arc<AtomicUsize>,
) -> Result<SessionBuilder> {
    let graph = name.to_string();
    let builder = builder
        .with_logger(Arc::new(move |level: LogLevel, _cat: &str, _id: &str, loc: &str, msg: &str| {
            if msg.contains("in-place optimization not activated") {
                counter.fetch_add(1, Ordering::Relaxed);
            } else if level >= LogLevel::Warning {
                eprintln!("[onnxruntime {graph} {loc}] {msg}");
            }
        }))
        .map_err(|e| ort_error("installing the session logger", e))?;
    builder.with_log_level(LogLevel::Warning).map_err(|e| ort_error("setting the session log level", e))
}

/// Nodes per execution provider (empty if ONNX Runtime did not record the assignment).
fn ep_assignment(session: &Session) -> Vec<ProviderNodes> {
    let api = ort::api();
    let mut subgraphs: *const *const ort::sys::OrtEpAssignedSubgraph = std::ptr::null();
    let mut n = 0usize;
    // SAFETY: out-pointers valid; the arrays are owned by the session and read before it can drop.
    let status = unsafe { (api.Session_GetEpGraphAssignmentInfo)(session.ptr(), &mut subgraphs, &mut n) };
    if unsafe { ort::Error::result_from_status(status) }.is_err() || subgraphs.is_null() {
        return Vec::new();
    }
    let mut out: Vec<ProviderNodes> = Vec::new();
    for i in 0..n {
        // SAFETY: `n` valid subgraph pointers.
        let sg = unsafe { *subgraphs.add(i) };
        let mut name: *const std::ffi::c_char = std::ptr::null();
        let mut nodes: *const *const ort::sys::OrtEpAssignedNode = std::ptr::null();
        let mut count = 0usize;
        let ok = unsafe {
            ort::Error::result_from_status((api.EpAssignedSubgraph_GetEpName)(sg, &mut name)).is_ok()
                && ort::Error::result_from_status((api.EpAssignedSubgraph_GetNodes)(
                    sg, &mut nodes, &mut count,
                ))
                .is_ok()
        };
        if !ok || name.is_null() {
            continue;
        }
        // SAFETY: NUL-terminated string owned by the session.
        let provider = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        match out.iter_mut().find(|p| p.provider == provider) {
            Some(p) => p.nodes += count,
            None => out.push(ProviderNodes { provider, nodes: count }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names() {
        assert_eq!(state_input_name("k_cache_out.3").as_deref(), Some("k_cache.3"));
        assert_eq!(state_input_name("v_cache_out.10").as_deref(), Some("v_cache.10"));
        assert_eq!(state_input_name("loc"), None);
    }

    #[test]
    fn runners_can_move_between_threads() {
        fn send<T: Send>() {}
        send::<GraphRunner>();
        send::<SharedWeights>();
    }

    fn sig(name: &str, dtype: DType, shape: &[usize]) -> TensorSig {
        TensorSig { name: name.into(), dtype, shape: shape.to_vec() }
    }

    /// A decode graph's I/O: patches, write_pos, one cache pair, one mixture output.
    fn decode_io(dtype: DType) -> (Vec<TensorSig>, Vec<TensorSig>) {
        let cache = [2, 4, 8, 16];
        (
            vec![
                sig("patches", dtype, &[2, 16]),
                sig("write_pos", DType::I64, &[2]),
                sig("k_cache.0", dtype, &cache),
            ],
            vec![sig("loc", DType::F32, &[2, 16, 4]), sig("k_cache_out.0", dtype, &cache)],
        )
    }

    fn in_place() -> Vec<(String, String)> {
        vec![("k_cache.0".into(), "k_cache_out.0".into())]
    }

    #[test]
    fn cpu_binding_is_host_memory_with_caches_in_place() {
        let (i, o) = decode_io(DType::F32);
        let p = binding_plan(&Target::cpu(Some(1)), &i, &o, &in_place()).unwrap();
        assert_eq!(p.cache_mode, CacheMode::InPlace);
        assert_eq!(p.capture, Capture::No);
        assert!(p.inputs.iter().chain(&p.outputs).all(|s| s.memory == Memory::Host && !s.host_mirror));
        assert_eq!(p.outputs[1].cache_of.as_deref(), Some("k_cache.0"));
        assert_eq!(p.outputs[0].cache_of, None);
        // a graph that reads the old cache elsewhere cannot update in place
        assert_eq!(binding_plan(&Target::cpu(None), &i, &o, &[]).unwrap().cache_mode, CacheMode::PingPong);
        // a prefill has no cache inputs
        let prefill = binding_plan(&Target::cpu(None), &i[..2], &o, &[]).unwrap();
        assert_eq!(prefill.cache_mode, CacheMode::None);
        assert!(prefill.outputs.iter().all(|s| s.cache_of.is_none()));
    }

    #[test]
    fn gpu_binding_keeps_caches_on_the_device_and_mirrors_the_rest() {
        let (i, o) = decode_io(DType::F16);
        let p = binding_plan(&Target::cuda(2, true), &i, &o, &in_place()).unwrap();
        assert!(p.inputs.iter().chain(&p.outputs).all(|s| s.memory == Memory::Device(2)));
        let mirrored: Vec<(&str, bool)> =
            p.inputs.iter().chain(&p.outputs).map(|s| (s.name.as_str(), s.host_mirror)).collect();
        assert_eq!(
            mirrored,
            [
                ("patches", true),
                ("write_pos", true),
                ("k_cache.0", false),
                ("loc", true),
                ("k_cache_out.0", false)
            ]
        );
        // one captured graph per bucket session, under the default annotation id
        assert_eq!(p.capture, Capture::Graph { gpu_graph_id: 0 });
        let trt = binding_plan(&Target::tensorrt(0, true), &i, &o, &in_place()).unwrap();
        assert_eq!((trt.capture, trt.cache_mode), (Capture::Graph { gpu_graph_id: 0 }, CacheMode::InPlace));
        let no_graph = binding_plan(&Target::cuda(0, false), &i, &o, &in_place()).unwrap();
        assert_eq!(no_graph.capture, Capture::No);
    }

    #[test]
    fn cuda_graphs_refuse_ping_pong_caches() {
        let (i, o) = decode_io(DType::F16);
        let e = binding_plan(&Target::cuda(0, true), &i, &o, &[]).unwrap_err();
        assert!(e.contains("cannot be updated in place") && e.contains("without --cuda-graph"), "{e}");
        // without CUDA graphs the swap is fine
        let p = binding_plan(&Target::cuda(0, false), &i, &o, &[]).unwrap();
        assert_eq!((p.cache_mode, p.capture), (CacheMode::PingPong, Capture::No));
    }

    #[test]
    fn a_cache_output_must_match_its_input() {
        let (i, mut o) = decode_io(DType::F16);
        o[1].dtype = DType::F32;
        let p = binding_plan(&Target::cpu(None), &i, &o, &in_place()).unwrap();
        assert_eq!(p.outputs[1].cache_of, None);
        assert_eq!(p.cache_mode, CacheMode::None);
    }

    #[test]
    fn captured_graph_keys_per_session() {
        let (p1, p2, d1) = (Bucket::prefill(1, 8), Bucket::prefill(4, 8), Bucket::decode(8, 13));
        let own = |b: Bucket| (b, format!("{b:?}.onnx"));
        // one session per bucket: each its own graph under id 0
        let keys = capture_keys(&Target::cuda(0, true), &[own(p1), own(p2), own(d1)]).unwrap();
        assert_eq!(keys, vec![Capture::Graph { gpu_graph_id: 0 }; 3]);
        // CUDA, shared sessions: one id per bucket of each session
        let shared = [
            (p1, "dynamic.prefill.onnx".to_string()),
            (p2, "dynamic.prefill.onnx".into()),
            (d1, "dynamic.decode.onnx".into()),
        ];
        let keys = capture_keys(&Target::cuda(0, true), &shared).unwrap();
        let ids: Vec<i64> = keys
            .iter()
            .map(|k| match k {
                Capture::Graph { gpu_graph_id } => *gpu_graph_id,
                Capture::No => -1,
            })
            .collect();
        assert_eq!(ids, [0, 1, 0]);
        // TensorRT keeps one captured graph per engine: sharing is refused with the way out
        let e = capture_keys(&Target::tensorrt(0, true), &shared).unwrap_err();
        assert!(e.contains("2 buckets share") && e.contains("--graphs per-bucket"), "{e}");
        assert!(capture_keys(&Target::tensorrt(0, true), &shared[2..]).is_ok());
        // no CUDA graphs: nothing captured
        assert_eq!(capture_keys(&Target::tensorrt(0, false), &shared).unwrap(), vec![Capture::No; 3]);
        // the same bucket in two profiles is one graph: one key, and no sharing on its own
        let twice = [(p1, "dynamic.prefill.onnx".to_string()), (p1, "dynamic.prefill.onnx".to_string())];
        let keys = capture_keys(&Target::tensorrt(0, true), &twice).unwrap();
        assert_eq!(keys, vec![Capture::Graph { gpu_graph_id: 0 }; 2]);
    }

    #[test]
    fn weights_live_where_the_target_runs() {
        assert_eq!(weight_placement(&Target::cpu(None)), WeightPlacement::Host);
        assert_eq!(weight_placement(&Target::cuda(3, true)), WeightPlacement::Device(3));
        assert_eq!(weight_placement(&Target::tensorrt(0, true)), WeightPlacement::InEngine);
    }

    #[test]
    fn cache_slots_copy_between_layouts() {
        // src: 2 rows × 2 heads × 3 slots × 1 wide; dst: 3 rows × 2 heads × 4 slots × 1 wide
        let s = CacheLayout { rows: 2, heads: 2, slots: 3, width: 1 };
        let d = CacheLayout { rows: 3, heads: 2, slots: 4, width: 1 };
        let src: Vec<u8> = (0..12).collect();
        let mut dst = vec![99u8; 24];
        let moves = [CacheMove { dst: 2, src: 1, slots: 2 }, CacheMove { dst: 0, src: 1, slots: 3 }];
        copy_slots(&src, &mut dst, (d, s), 1, &moves);
        // row 1 of src: head 0 = [6, 7, 8], head 1 = [9, 10, 11]
        assert_eq!(&dst[0..8], &[6, 7, 8, 99, 9, 10, 11, 99]);
        assert_eq!(&dst[8..16], &[99; 8]);
        assert_eq!(&dst[16..24], &[6, 7, 99, 99, 9, 10, 99, 99]);
    }
}
