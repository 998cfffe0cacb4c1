//! KV-cache row copies between runners ([`CacheMove`]), the byte views they use, and the session logger that
//! counts ONNX Runtime's cache copies.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use exporter::signature::{DType, TensorSig};
use ort::logging::LogLevel;
use ort::session::builder::SessionBuilder;
use ort::value::DynTensor;

use crate::error::{Error, Result};

use super::ort_types::ort_error;

pub(super) fn dtype_size(d: DType) -> usize {
    match d {
        DType::F32 => 4,
        DType::F16 => 2,
        DType::I64 => 8,
    }
}

pub(super) fn bytes_of(t: &DynTensor) -> Result<&[u8]> {
    let len = t.size().unwrap_or(0);
    let ptr = t.data_ptr();
    if ptr.is_null() || !t.memory_info().is_cpu_accessible() {
        return Err(Error::Ort { context: "viewing a tensor".into(), message: "not in host memory".into() });
    }
    // SAFETY: host tensor of `len` bytes owned by `t`.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

pub(super) fn bytes_of_mut(t: &mut DynTensor) -> Result<&mut [u8]> {
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

/// One cache row copy of [`GraphRunner::copy_cache`](super::GraphRunner::copy_cache): slots `0..slots` of source row
/// `src` into row `dst`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheMove {
    pub dst: usize,
    pub src: usize,
    pub slots: usize,
}

/// The `[rows, heads, slots, width]` layout of a cache tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CacheLayout {
    pub(super) rows: usize,
    pub(super) heads: usize,
    pub(super) slots: usize,
    pub(super) width: usize,
}

impl CacheLayout {
    pub(super) fn of(sig: &TensorSig) -> Option<Self> {
        match sig.shape[..] {
            [rows, heads, slots, width] => Some(CacheLayout { rows, heads, slots, width }),
            _ => None,
        }
    }
}

/// Applies `moves` from `src` (layout `.1`) into `dst` (layout `.0`), elements of `elem` bytes.
pub(super) fn copy_slots(
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

/// Applies `moves` within one cache buffer of `layout`, in order (a move may read a row an earlier one wrote).
pub(super) fn copy_rows_within(buf: &mut [u8], layout: CacheLayout, elem: usize, moves: &[CacheMove]) {
    let len = |slots: usize| slots * layout.width * elem;
    for m in moves.iter().filter(|m| m.src != m.dst) {
        for h in 0..layout.heads {
            let at = |row: usize| ((row * layout.heads + h) * layout.slots) * layout.width * elem;
            let from = at(m.src);
            buf.copy_within(from..from + len(m.slots), at(m.dst));
        }
    }
}

/// Gives the session a logger that counts ORT's "copying past_cache to present_cache" warnings and prints the
/// rest of its warnings and errors.
pub(super) fn with_copy_counter(
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn cache_rows_copy_within_one_buffer_in_order() {
        // 3 rows × 2 heads × 2 slots × 1 wide: row 0 = [0, 1 | 2, 3], row 1 = [4, 5 | 6, 7], row 2 = [8, 9 | 10, 11]
        let l = CacheLayout { rows: 3, heads: 2, slots: 2, width: 1 };
        let mut buf: Vec<u8> = (0..12).collect();
        // row 2 ← row 1's first slot, then row 1 ← row 0 (whole), then a no-op self move
        let moves = [
            CacheMove { dst: 2, src: 1, slots: 1 },
            CacheMove { dst: 1, src: 0, slots: 2 },
            CacheMove { dst: 0, src: 0, slots: 2 },
        ];
        copy_rows_within(&mut buf, l, 1, &moves);
        assert_eq!(buf, [0, 1, 2, 3, 0, 1, 2, 3, 4, 9, 6, 11]);
    }
}
