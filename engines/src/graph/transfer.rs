//! Copies between bound tensors on GPU targets: host (pinned or plain) ↔ CUDA device, with the CUDA runtime's
//! `cudaMemcpy`, and host ↔ host with a plain copy.
//!
//! Why not ort's `Tensor::copy_into`: it runs a cached one-node `Identity` session per (source, target) device
//! pair, and through it ONNX Runtime 1.31.1's CUDA provider refuses a device → pinned-host copy
//! (`GPUDataTransfer::CopyTensorAsync`: "dst_data != src_data was false", every forecast of a CUDA engine failed
//! with it on an H100). `cudaMemcpy` with `cudaMemcpyDefault` (unified addressing tells the direction) needs no
//! session, and it is the same runtime library the CUDA provider itself loaded (`libcudart.so.13`).
//!
//! Ordering with ONNX Runtime's own stream: a run synchronizes its stream before `RunWithBinding` returns (totoc
//! never sets `disable_synchronize_execution_providers`), so a download after a run reads finished outputs; an
//! upload is followed by a synchronization of the legacy default stream, so a copy from pageable memory (staged,
//! asynchronous to the host) has landed before the next run starts.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::OnceLock;

use ort::memory::AllocationDevice;
use ort::value::DynTensor;

use crate::error::{Error, Result};

type Memcpy = unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> c_int;
type SetDevice = unsafe extern "C" fn(c_int) -> c_int;
type StreamSynchronize = unsafe extern "C" fn(*mut c_void) -> c_int;
type GetErrorString = unsafe extern "C" fn(c_int) -> *const c_char;

/// `cudaMemcpyDefault`: the direction follows from the pointers (unified virtual addressing, every 64-bit CUDA).
const CUDA_MEMCPY_DEFAULT: c_int = 4;

/// The CUDA runtime functions the copies use, resolved once.
struct Cudart {
    _lib: libloading::Library,
    memcpy: Memcpy,
    set_device: SetDevice,
    stream_synchronize: StreamSynchronize,
    error_string: GetErrorString,
}

static CUDART: OnceLock<std::result::Result<Cudart, String>> = OnceLock::new();

fn cudart() -> std::result::Result<&'static Cudart, String> {
    CUDART
        .get_or_init(|| {
            let soname = "libcudart.so.13";
            // SAFETY: loading the CUDA runtime runs its (side-effect free) initialisers; the symbols below are
            // resolved with their documented C signatures.
            unsafe {
                let lib = libloading::Library::new(soname)
                    .map_err(|e| format!("loading {soname} (the CUDA 13 runtime) failed: {e}"))?;
                let sym = |name: &str| format!("{soname} has no {name}");
                let memcpy = *lib.get::<Memcpy>(b"cudaMemcpy\0").map_err(|_| sym("cudaMemcpy"))?;
                let set_device =
                    *lib.get::<SetDevice>(b"cudaSetDevice\0").map_err(|_| sym("cudaSetDevice"))?;
                let stream_synchronize = *lib
                    .get::<StreamSynchronize>(b"cudaStreamSynchronize\0")
                    .map_err(|_| sym("cudaStreamSynchronize"))?;
                let error_string = *lib
                    .get::<GetErrorString>(b"cudaGetErrorString\0")
                    .map_err(|_| sym("cudaGetErrorString"))?;
                Ok(Cudart { _lib: lib, memcpy, set_device, stream_synchronize, error_string })
            }
        })
        .as_ref()
        .map_err(Clone::clone)
}

impl Cudart {
    fn check(&self, code: c_int, what: &str) -> std::result::Result<(), String> {
        if code == 0 {
            return Ok(());
        }
        // SAFETY: cudaGetErrorString returns a static C string for any code.
        let text = unsafe { CStr::from_ptr((self.error_string)(code)) }.to_string_lossy().into_owned();
        Err(format!("{what}: CUDA error {code} ({text})"))
    }
}

fn fail(context: &str, message: String) -> Error {
    Error::Ort { context: context.to_string(), message }
}

/// Where a tensor's bytes live, for the copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Readable by the CPU: plain host memory or CUDA-pinned host memory.
    Host,
    /// Device memory of CUDA device `n`.
    Device(i32),
}

fn side(t: &DynTensor) -> Side {
    let info = t.memory_info();
    if info.is_cpu_accessible() || info.allocation_device() != AllocationDevice::CUDA {
        Side::Host
    } else {
        Side::Device(info.device_id())
    }
}

/// Copies all of `src` into `dst` (same byte size): a plain copy between host tensors, `cudaMemcpy` when either is
/// in CUDA device memory. `context` names the copy in errors ("downloading `df`").
pub(crate) fn copy(src: &DynTensor, dst: &mut DynTensor, context: &str) -> Result<()> {
    let (n_src, n_dst) = (src.size().unwrap_or(0), dst.size().unwrap_or(0));
    if n_src != n_dst {
        return Err(fail(context, format!("{n_src} bytes into a tensor of {n_dst}")));
    }
    if n_src == 0 {
        return Ok(());
    }
    let (from, to) = (side(src), side(dst));
    let (s, d) = (src.data_ptr(), dst.data_ptr_mut());
    if s.is_null() || d.is_null() {
        return Err(fail(context, "a tensor without data".into()));
    }
    if std::ptr::eq(s, d) {
        return Ok(());
    }
    match (from, to) {
        (Side::Host, Side::Host) => {
            // SAFETY: both are host tensors of n_src bytes, distinct buffers (checked above), `dst` borrowed mutably.
            unsafe { std::ptr::copy_nonoverlapping(s.cast::<u8>(), d.cast::<u8>(), n_src) };
            Ok(())
        }
        (_, Side::Device(device)) | (Side::Device(device), Side::Host) => {
            let rt = cudart().map_err(|m| fail(context, m))?;
            // SAFETY: the pointers name n_src bytes each (host or device memory of `device`, owned by the tensors);
            // the CUDA runtime shares the provider's primary context.
            unsafe {
                rt.check((rt.set_device)(device), "cudaSetDevice").map_err(|m| fail(context, m))?;
                rt.check((rt.memcpy)(d, s, n_src, CUDA_MEMCPY_DEFAULT), "cudaMemcpy")
                    .map_err(|m| fail(context, m))?;
                if matches!(to, Side::Device(_)) {
                    rt.check((rt.stream_synchronize)(std::ptr::null_mut()), "cudaStreamSynchronize")
                        .map_err(|m| fail(context, m))?;
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ort::memory::Allocator;
    use ort::value::TensorElementType;

    fn host(values: &[f32]) -> DynTensor {
        crate::runtime::init(None).unwrap_or_else(|e| panic!("{e}"));
        let mut t =
            DynTensor::new(&Allocator::default(), TensorElementType::Float32, vec![values.len()]).unwrap();
        t.try_extract_tensor_mut::<f32>().unwrap().1.copy_from_slice(values);
        t
    }

    #[test]
    fn host_tensors_are_copied_byte_for_byte() {
        let src = host(&[1.0, -2.5, 3.25, f32::MIN_POSITIVE]);
        let mut dst = host(&[0.0; 4]);
        copy(&src, &mut dst, "test").unwrap();
        assert_eq!(dst.try_extract_tensor::<f32>().unwrap().1, &[1.0, -2.5, 3.25, f32::MIN_POSITIVE]);
    }

    #[test]
    fn a_size_mismatch_is_refused_naming_the_copy() {
        let src = host(&[1.0, 2.0, 3.0]);
        let mut dst = host(&[0.0; 4]);
        let e = copy(&src, &mut dst, "downloading `df`").unwrap_err().to_string();
        assert!(e.contains("downloading `df`") && e.contains("12 bytes into a tensor of 16"), "{e}");
        assert_eq!(dst.try_extract_tensor::<f32>().unwrap().1, &[0.0; 4], "nothing written");
    }
}
