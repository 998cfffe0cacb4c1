//! Which runtimes a bundle's graphs are written for: the ONNX opset and the KV-cache write op.
//!
//! The exporter writes what the target's runtime supports, and records it in the manifest (`variant`); the
//! engines refuse a bundle their runtime cannot run (`engines::backend::check_variant`). The facts behind the two
//! variants (from the kernel tables of the onnxruntime-gpu wheels and the ONNX Runtime / onnx-tensorrt sources):
//!
//! * **opset 24 + `TensorScatter`** ([`OpsetVariant::Opset24`], the default). ONNX Runtime 1.31 has CPU and CUDA
//!   kernels for every op of both graphs at opset 24, `TensorScatter` included (so nothing falls back to the CPU
//!   and CUDA graphs can be captured), and updates the cache in place when the output is bound to the input.
//!   onnx-tensorrt maps `TensorScatter` to TensorRT's KV-cache update layer from TensorRT 10.15 on.
//! * **opset 18 + `ScatterND`** ([`OpsetVariant::Opset18`]) for older runtimes: ONNX Runtime ≤ 1.24 has no CUDA
//!   kernel at opset 24 for Reshape, Transpose, Unsqueeze, Pad, Identity (23+), Softplus 22, Equal 19 nor
//!   `TensorScatter`, and TensorRT before 10.15 does not import `TensorScatter`. `ScatterND` writes the same slot
//!   (ONNX Runtime still updates in place; TensorRT copies the whole cache each step).

use serde::{Deserialize, Serialize};

/// The opset and KV-cache write op of a bundle's graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpsetVariant {
    /// ONNX opset 24, caches written with `TensorScatter`: ONNX Runtime ≥ 1.31 (CPU, CUDA), TensorRT ≥ 10.15.
    Opset24,
    /// ONNX opset 18, caches written with `ScatterND`: ONNX Runtime 1.22–1.30 and TensorRT < 10.15.
    Opset18,
}

impl OpsetVariant {
    /// The ONNX opset of the default domain.
    pub fn opset(self) -> i64 {
        match self {
            OpsetVariant::Opset24 => 24,
            OpsetVariant::Opset18 => 18,
        }
    }

    /// The IR version that goes with the opset (onnx's `VERSION_TABLE`: opset 18 ↔ IR 8, opset 24 ↔ IR 11).
    pub fn ir_version(self) -> i64 {
        match self {
            OpsetVariant::Opset24 => 11,
            OpsetVariant::Opset18 => 8,
        }
    }

    /// How the decode graphs write the new KV slot.
    pub fn cache_update(self) -> CacheUpdate {
        match self {
            OpsetVariant::Opset24 => CacheUpdate::TensorScatter,
            OpsetVariant::Opset18 => CacheUpdate::ScatterNd,
        }
    }

    /// `opset24`, `opset18`.
    pub fn as_str(self) -> &'static str {
        match self {
            OpsetVariant::Opset24 => "opset24",
            OpsetVariant::Opset18 => "opset18",
        }
    }

    /// The runtimes that run it, for messages and `totoc doctor`.
    pub fn runs_on(self) -> &'static str {
        match self {
            OpsetVariant::Opset24 => "ONNX Runtime >= 1.31 (CPU, CUDA) and TensorRT >= 10.15",
            OpsetVariant::Opset18 => "ONNX Runtime >= 1.22 (CPU, CUDA) and TensorRT 10 (any minor version)",
        }
    }

    /// The variant of an opset number (`--opset 24`).
    pub fn from_opset(opset: i64) -> Option<Self> {
        match opset {
            24 => Some(OpsetVariant::Opset24),
            18 => Some(OpsetVariant::Opset18),
            _ => None,
        }
    }
}

/// How the decode graph writes the new K/V slot into the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheUpdate {
    /// ONNX `TensorScatter` (opset 24): one op per cache with per-row write indices. TensorRT (10.15+) lowers it
    /// to its KV-cache update layer, and ONNX Runtime updates in place when the output is bound to the input.
    TensorScatter,
    /// ONNX `ScatterND` with computed `(row, head, slot)` indices: the portable form for runtimes without
    /// opset 24.
    ScatterNd,
}

impl CacheUpdate {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheUpdate::TensorScatter => "tensor_scatter",
            CacheUpdate::ScatterNd => "scatter_nd",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variants_pair_opset_ir_and_cache_write() {
        assert_eq!(OpsetVariant::Opset24.opset(), 24);
        assert_eq!(OpsetVariant::Opset24.ir_version(), 11);
        assert_eq!(OpsetVariant::Opset24.cache_update(), CacheUpdate::TensorScatter);
        assert_eq!(OpsetVariant::Opset18.opset(), 18);
        assert_eq!(OpsetVariant::Opset18.ir_version(), 8);
        assert_eq!(OpsetVariant::Opset18.cache_update(), CacheUpdate::ScatterNd);
        assert_eq!(OpsetVariant::from_opset(18), Some(OpsetVariant::Opset18));
        assert_eq!(OpsetVariant::from_opset(17), None);
        assert_eq!(serde_json::to_string(&OpsetVariant::Opset18).unwrap(), "\"opset18\"");
    }
}
