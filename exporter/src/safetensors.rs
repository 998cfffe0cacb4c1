//! The safetensors format, read strictly: the header's bounds, offsets, overlaps and truncation are checked
//! so a damaged file is an error naming the file and tensor, never a panic. Shared by every family's
//! checkpoint loader (each then matches the stored tensors against what its config implies).

use std::ops::Range;
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};

/// A Hugging Face checkpoint directory's config file.
pub const CONFIG_FILE: &str = "config.json";
/// A single-file checkpoint's weights.
pub const SAFETENSORS_FILE: &str = "model.safetensors";

/// A borrowed view of one f32 tensor of the checkpoint.
#[derive(Debug, Clone, Copy)]
pub struct TensorView<'a> {
    /// Canonical name.
    pub name: &'a str,
    pub shape: &'a [usize],
    /// Raw little-endian f32 data, `numel · 4` bytes (not necessarily 4-byte aligned).
    pub bytes: &'a [u8],
}

impl TensorView<'_> {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// The values, decoded from little-endian.
    pub fn to_f32_vec(&self) -> Vec<f32> {
        self.bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
    }
}

/// One tensor of a safetensors file, any dtype, as stored ([`read_tensors`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredArray {
    pub name: String,
    /// The format's dtype name (`F32`, `I64`, `I32`, ...).
    pub dtype: String,
    pub shape: Vec<usize>,
    /// Little-endian data, exactly `numel · width` bytes.
    pub bytes: Vec<u8>,
}

/// Every tensor of the safetensors file at `path` (any dtype the format names), checked as [`parse_safetensors`]
/// checks a checkpoint: for files of arrays that are not a model's (reference cases' recorded arrays).
pub fn read_tensors(path: &Path) -> Result<Vec<StoredArray>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    Ok(parse_safetensors(path, &bytes)?
        .into_iter()
        .map(|t| StoredArray {
            bytes: bytes[t.range.clone()].to_vec(),
            name: t.name,
            dtype: t.dtype,
            shape: t.shape,
        })
        .collect())
}

// --- safetensors parsing

/// One header entry as written (safetensors format: `{"dtype", "shape", "data_offsets"}`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: [usize; 2],
}

/// A header entry whose byte range has been checked against the file.
#[derive(Debug)]
pub(crate) struct StoredTensor {
    pub(crate) name: String,
    pub(crate) dtype: String,
    pub(crate) shape: Vec<usize>,
    /// Absolute range in the file.
    pub(crate) range: Range<usize>,
}

/// The safetensors crate refuses headers over 100 MB; a larger one is certainly garbage.
const MAX_HEADER: u64 = 100 << 20;

/// Parses and validates the header: every byte range lies in the data section, matches its dtype and shape,
/// and the ranges tile the data section exactly (no overlap, no hole, no truncation), as the format requires.
pub(crate) fn parse_safetensors(path: &Path, bytes: &[u8]) -> Result<Vec<StoredTensor>> {
    let bad = |message: String| Error::SafetensorsFormat { path: path.to_path_buf(), message };
    if bytes.len() < 8 {
        return Err(bad(format!("file is {} bytes, shorter than the 8-byte header length", bytes.len())));
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes"));
    let available = bytes.len() as u64 - 8;
    if n > available || n > MAX_HEADER {
        return Err(bad(format!(
            "header length {n} exceeds the {available} bytes after it or the 100 MB limit (truncated or not \
             safetensors)"
        )));
    }
    let data_start = 8 + n as usize;
    let header: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&bytes[8..data_start])
        .map_err(|e| bad(format!("header is not a JSON object: {e}")))?;
    let data_len = bytes.len() - data_start;
    let mut tensors = Vec::with_capacity(header.len());
    for (name, value) in header {
        if name == "__metadata__" {
            continue;
        }
        let bad_tensor =
            |message: String| Error::TensorData { path: path.to_path_buf(), name: name.clone(), message };
        let raw: RawEntry =
            serde_json::from_value(value).map_err(|e| bad_tensor(format!("bad header entry: {e}")))?;
        let width =
            dtype_size(&raw.dtype).ok_or_else(|| bad_tensor(format!("unknown dtype {:?}", raw.dtype)))?;
        let [begin, end] = raw.data_offsets;
        let expected = raw.shape.iter().try_fold(width, |acc, &d| acc.checked_mul(d));
        if begin > end {
            return Err(bad_tensor(format!("data_offsets [{begin}, {end}] end before they begin")));
        }
        if end > data_len {
            return Err(bad_tensor(format!(
                "data_offsets [{begin}, {end}] lie outside the {data_len}-byte data section (file truncated?)"
            )));
        }
        if expected != Some(end - begin) {
            return Err(bad_tensor(format!(
                "data_offsets [{begin}, {end}] span {} bytes, but {} {:?} needs {}",
                end - begin,
                raw.dtype,
                raw.shape,
                expected.map_or("more than usize".to_string(), |e| format!("{e}")),
            )));
        }
        tensors.push(StoredTensor {
            name,
            dtype: raw.dtype,
            shape: raw.shape,
            range: data_start + begin..data_start + end,
        });
    }
    check_tiling(path, &mut tensors, data_start, bytes.len())?;
    Ok(tensors)
}

/// Requires the tensors' ranges to tile `[data_start, file_len)`; sorts `tensors` by offset.
fn check_tiling(path: &Path, tensors: &mut [StoredTensor], data_start: usize, file_len: usize) -> Result<()> {
    tensors.sort_by_key(|t| (t.range.start, t.range.end));
    let mut pos = data_start;
    let mut prev: Option<&str> = None;
    for t in tensors.iter() {
        let after = prev.map_or("the header".to_string(), |p| format!("`{p}`"));
        let message = if t.range.start < pos {
            format!("its data overlaps the data of {after}")
        } else if t.range.start > pos {
            format!("{} unused bytes lie between {after} and its data", t.range.start - pos)
        } else {
            String::new()
        };
        if !message.is_empty() {
            return Err(Error::TensorData { path: path.to_path_buf(), name: t.name.clone(), message });
        }
        pos = t.range.end;
        prev = Some(&t.name);
    }
    if pos != file_len {
        let message = format!(
            "the data section is {} bytes but its tensors use {} (trailing bytes after the last tensor)",
            file_len - data_start,
            pos - data_start
        );
        return Err(Error::SafetensorsFormat { path: path.to_path_buf(), message });
    }
    Ok(())
}

/// Element size of a safetensors dtype.
fn dtype_size(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "BOOL" | "U8" | "I8" | "F8_E5M2" | "F8_E4M3" => 1,
        "U16" | "I16" | "F16" | "BF16" => 2,
        "U32" | "I32" | "F32" => 4,
        "U64" | "I64" | "F64" => 8,
        _ => return None,
    })
}
