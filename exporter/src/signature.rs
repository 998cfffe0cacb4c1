//! The I/O contract of every exported graph, defined once here and used by the engines.
//!
//! Two graphs per profile, both with fully static shapes:
//!
//! * `prefill` runs the whole (padded) context of up to `batch` series and returns the mixture parameters of the
//!   first forecast patch plus the initial KV cache of every time-wise layer, already sized to `max_slots`.
//! * `decode` runs one patch for `decode_rows` sample paths (`batch × max(samples, 1)`), reading and updating the
//!   KV cache; `k_cache_out.i` may alias `k_cache.i` (the update is a `TensorScatter`/`ScatterND` of one slot).
//!
//! Layout conventions (B = rows of the graph, V = variates, P = patch size, Dh = head dim, K = mixture components):
//! * Real context patches are **left-aligned** in slots `0..S_b` of row `b`; slots past `S_b` hold zeros. Causal
//!   attention means no real query ever sees them, and the decode key mask `slot ≤ write_pos` hides them later.
//! * Rotary tables come from the host (see `engines::rope`): `rope_cos/rope_sin` are the interleaved angles of each
//!   slot's position, `xpos_scale` the xPos scale with the call's centre (prefill `(S_b-1)//2`, decode `p//2`).
//!   Queries are multiplied by it, keys divided, exactly as rotary-embedding-torch 0.8.6 does.
//! * Padded variates get unique negative ids so the space-wise mask (`id_i == id_j`) isolates them.
//! * KV caches are `[B·V, H, max_slots, Dh]`, row-major over (b, v), one pair per time-wise layer in layer order.

use serde::{Deserialize, Serialize};

use crate::config::ModelConfig;
use crate::profile::Profile;

/// Element type of a graph input or output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    I64,
}

/// Name, element type and static shape of one graph input or output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSig {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl TensorSig {
    fn new(name: impl Into<String>, dtype: DType, shape: &[usize]) -> Self {
        Self { name: name.into(), dtype, shape: shape.to_vec() }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Which of a profile's graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GraphKind {
    Prefill,
    Decode,
}

impl GraphKind {
    pub const ALL: [GraphKind; 2] = [GraphKind::Prefill, GraphKind::Decode];

    pub fn as_str(self) -> &'static str {
        match self {
            GraphKind::Prefill => "prefill",
            GraphKind::Decode => "decode",
        }
    }
}

/// Input names.
pub const PATCHES: &str = "patches";
pub const ID_MASK: &str = "id_mask";
pub const LAST_INDEX: &str = "last_index";
pub const WRITE_POS: &str = "write_pos";
pub const ROPE_COS: &str = "rope_cos";
pub const ROPE_SIN: &str = "rope_sin";
pub const XPOS_SCALE: &str = "xpos_scale";
/// Output names: the Student-T mixture of the next patch, in scaled units. `weights` are softmax probabilities.
pub const DF: &str = "df";
pub const LOC: &str = "loc";
pub const SCALE: &str = "scale";
pub const WEIGHTS: &str = "weights";
pub const MIXTURE_OUTPUTS: [&str; 4] = [DF, LOC, SCALE, WEIGHTS];

/// Name of time-wise layer `i`'s key cache input (`out = true`: the updated output).
pub fn k_cache(i: usize, out: bool) -> String {
    if out {
        format!("k_cache_out.{i}")
    } else {
        format!("k_cache.{i}")
    }
}

/// Name of time-wise layer `i`'s value cache input (`out = true`: the updated output).
pub fn v_cache(i: usize, out: bool) -> String {
    if out {
        format!("v_cache_out.{i}")
    } else {
        format!("v_cache.{i}")
    }
}

/// Static dimensions of one profile's graphs, derived from the profile and the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dims {
    /// Series rows of the prefill graph (= profile batch).
    pub batch: usize,
    /// Rows of the decode graph: `batch × max(samples, 1)`.
    pub decode_rows: usize,
    pub variates: usize,
    /// Context patch slots of the prefill graph: `ceil(context / P)`.
    pub context_slots: usize,
    /// KV cache slots: context slots plus one per forecast patch, `ceil(context/P) + ceil(horizon/P)`.
    pub max_slots: usize,
    pub patch: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub components: usize,
    pub time_layers: usize,
}

impl Dims {
    pub fn new(model: &ModelConfig, profile: &Profile) -> Self {
        let p = model.patch_size;
        let context_slots = profile.context.div_ceil(p);
        Dims {
            batch: profile.batch,
            decode_rows: profile.batch * profile.samples.max(1),
            variates: profile.variates,
            context_slots,
            max_slots: context_slots + profile.horizon.div_ceil(p),
            patch: p,
            heads: model.num_heads,
            head_dim: model.embed_dim / model.num_heads,
            components: model.k_components(),
            time_layers: model.time_layer_count(),
        }
    }

    /// Rows of the given graph.
    pub fn rows(&self, kind: GraphKind) -> usize {
        match kind {
            GraphKind::Prefill => self.batch,
            GraphKind::Decode => self.decode_rows,
        }
    }

    /// Shape of one KV cache tensor of the given graph.
    pub fn cache_shape(&self, kind: GraphKind) -> [usize; 4] {
        [self.rows(kind) * self.variates, self.heads, self.max_slots, self.head_dim]
    }

    /// Shape of each mixture output.
    pub fn mixture_shape(&self, kind: GraphKind) -> [usize; 4] {
        [self.rows(kind), self.variates, self.patch, self.components]
    }
}

/// The inputs of a graph, in order.
pub fn inputs(kind: GraphKind, d: &Dims, float: DType) -> Vec<TensorSig> {
    let b = d.rows(kind);
    let mut v = Vec::new();
    match kind {
        GraphKind::Prefill => {
            v.push(TensorSig::new(PATCHES, float, &[b, d.variates, d.context_slots, d.patch]));
            v.push(TensorSig::new(ID_MASK, DType::I64, &[b, d.variates]));
            v.push(TensorSig::new(LAST_INDEX, DType::I64, &[b]));
            for name in [ROPE_COS, ROPE_SIN, XPOS_SCALE] {
                v.push(TensorSig::new(name, float, &[b, d.context_slots, d.head_dim]));
            }
        }
        GraphKind::Decode => {
            v.push(TensorSig::new(PATCHES, float, &[b, d.variates, d.patch]));
            v.push(TensorSig::new(ID_MASK, DType::I64, &[b, d.variates]));
            v.push(TensorSig::new(WRITE_POS, DType::I64, &[b]));
            for name in [ROPE_COS, ROPE_SIN, XPOS_SCALE] {
                v.push(TensorSig::new(name, float, &[b, d.head_dim]));
            }
            for i in 0..d.time_layers {
                v.push(TensorSig::new(k_cache(i, false), float, &d.cache_shape(kind)));
                v.push(TensorSig::new(v_cache(i, false), float, &d.cache_shape(kind)));
            }
        }
    }
    v
}

/// The outputs of a graph, in order. The mixture outputs are always f32 (the host samples in f64).
pub fn outputs(kind: GraphKind, d: &Dims, float: DType) -> Vec<TensorSig> {
    let mut v: Vec<TensorSig> =
        MIXTURE_OUTPUTS.iter().map(|n| TensorSig::new(*n, DType::F32, &d.mixture_shape(kind))).collect();
    for i in 0..d.time_layers {
        v.push(TensorSig::new(k_cache(i, true), float, &d.cache_shape(kind)));
        v.push(TensorSig::new(v_cache(i, true), float, &d.cache_shape(kind)));
    }
    v
}
