//! Weights shared by every session of an engine ([`SharedWeights`]): host values over mapped weight files and
//! their release, or device copies uploaded once (see the [`super`] module docs). Most of the graph layer's
//! `unsafe` lives here.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use exporter::signature::{DType, TensorSig};
use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::builder::{PrepackedWeights, SessionBuilder};
use ort::session::Session;
use ort::value::{DynTensor, TensorElementType};
use ort::AsPointer;
use prost::Message;

use crate::backend::{self, Target};
use crate::error::{Error, Result};
use crate::runtime::Runtime;

use super::facts::{ExternalInit, ModelFacts};
use super::ort_types::{element_type, ort_error};

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
        // Upload through temporary values over the same memory (each released after the copy).
        let host_view = unsafe { host_tensor_view(host.ptr)? };
        // ort wants the allocator of every tensor it wraps (it keeps the allocator alive while the value lives);
        // the view does not own `buffer`, so dropping it releases the OrtValue only.
        let mut device_view: DynTensor = unsafe {
            ort::value::Value::from_ptr(
                std::ptr::NonNull::new(new_value()?).expect("non-null"),
                Some(&allocator.0),
            )
        };
        super::transfer::copy(
            &host_view,
            &mut device_view,
            &format!("uploading weight {} to CUDA device {}", init.name, dev.device),
        )?;
        let v = Arc::new(value);
        dev.values.lock().unwrap_or_else(|p| p.into_inner()).insert(key, v.clone());
        Ok(v)
    }

    /// Adds `facts.external` (files relative to `dir`) to `builder` as shared initializers — host values plus the
    /// prepacked container on CPU, device values on CUDA. Returns what the session must keep alive.
    pub(super) fn attach(
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
        /// Stops the trimming thread however `f` ends: `thread::scope` joins its threads before it re-raises a
        /// panic of `f`, so a flag set only on the normal path would leave a panicking build waiting for ever.
        struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
        impl Drop for StopOnDrop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let done = std::sync::atomic::AtomicBool::new(false);
        let maps = &self.maps;
        std::thread::scope(|s| {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    release_mapped_pages(maps);
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            });
            let _stop = StopOnDrop(&done);
            f()
        })
    }
}

/// The values a session holds on to (shared with the engine's other sessions).
#[derive(Default)]
pub(super) struct Held {
    host: Vec<Arc<RawValue>>,
    device: Vec<Arc<DeviceValue>>,
}

/// A non-owning view of a host weight value, for one upload.
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
        // ort wants an allocator with every tensor it wraps; the view does not own `data` (it was created over
        // existing memory), so the default CPU allocator is only kept alive, never asked to free it.
        Ok(ort::value::Value::from_ptr(
            std::ptr::NonNull::new(out).expect("non-null"),
            Some(&Allocator::default()),
        ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_live_where_the_target_runs() {
        assert_eq!(weight_placement(&Target::cpu(None)), WeightPlacement::Host);
        assert_eq!(weight_placement(&Target::cuda(3, true)), WeightPlacement::Device(3));
        assert_eq!(weight_placement(&Target::tensorrt(0, true)), WeightPlacement::InEngine);
    }

    fn runtime() -> &'static Runtime {
        crate::runtime::init(None).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A panicking build inside `trim_while` re-raises its panic instead of waiting for ever on the trimming thread
    /// (a CUDA build that panicked once hung until it was killed).
    #[test]
    fn a_panic_inside_trim_while_ends_the_trimming() {
        let weights = SharedWeights::new(runtime());
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                weights.trim_while(|| panic!("a build that fails"));
            }));
            tx.send(r.is_err()).unwrap();
        });
        let panicked = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("trim_while returned");
        assert!(panicked, "the closure's panic is re-raised");
        worker.join().unwrap();
    }

    /// The upload path's non-owning view of a host weight (`host_tensor_view`, what CUDA engines copy from) wraps
    /// the same bytes; ort panics on a tensor wrapped without an allocator, so this is the CPU half of the upload.
    #[test]
    fn a_host_weight_view_wraps_the_mapped_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let values: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 1.0).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        std::fs::write(dir.path().join("w.bin"), &bytes).unwrap();
        let init = ExternalInit {
            name: "w".into(),
            dims: vec![3, 4],
            data_type: 1,
            location: "w.bin".into(),
            offset: 0,
            length: bytes.len() as u64,
        };
        let weights = SharedWeights::new(runtime());
        let host = weights.value(dir.path(), &init).unwrap();
        let view = unsafe { host_tensor_view(host.ptr) }.unwrap();
        let (shape, data) = view.try_extract_tensor::<f32>().unwrap();
        assert_eq!(shape.to_vec(), vec![3, 4]);
        assert_eq!(data, values.as_slice());
        drop(view);
        // the host value is untouched by the view's release
        let again = unsafe { host_tensor_view(host.ptr) }.unwrap();
        assert_eq!(again.try_extract_tensor::<f32>().unwrap().1, values.as_slice());
    }
}
