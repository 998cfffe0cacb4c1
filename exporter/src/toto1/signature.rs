//! The I/O contract of every exported graph, defined once here and used by the engines.
//!
//! A profile is exported as a ladder of static-shape graphs ("buckets", see [`crate::bucket`]), each either a
//! `prefill` or a `decode` graph with fully static shapes:
//!
//! * `prefill` runs the (padded) context of N rows over S patch slots and returns the mixture parameters of the
//!   first forecast patch of every row plus every time-wise layer's keys and values for those S slots.
//! * `decode` runs one patch for N rows, reading and updating KV caches of T slots per row; `k_cache_out.i` may
//!   alias `k_cache.i` (the update is a `TensorScatter`/`ScatterND` of one slot at each row's `write_pos`).
//!
//! **Rows are flat.** A row is one variate of one series (prefill) or one variate of one sample path of one series
//! (decode); series, variates and sample paths share the row axis N. The space-wise layers attend across rows
//! whose `group_id` is equal: the host gives the variates of one series (one path) that share an `id_mask` group
//! the same id, and every padded row a unique negative id, so nothing real ever attends across series, paths or
//! to padding. Any mix of requests therefore packs onto one graph without padding variates up to a bound.
//!
//! Layout conventions (N = rows, S = context slots, T = cache slots, P = patch size, Dh = head dim, K = mixture
//! components):
//! * Real context patches are **left-aligned** in slots `0..S_r` of row `r`; slots past `S_r` hold zeros. Causal
//!   attention means no real query ever sees them, and the decode key mask `slot ≤ write_pos` hides them later.
//! * Rotary tables come from the host (see `engines::rope`): `rope_cos/rope_sin` are the interleaved angles of each
//!   slot's position, `xpos_scale` the xPos scale with the call's centre (prefill `(S_r-1)//2`, decode `p//2`).
//!   Queries are multiplied by it, keys divided, exactly as rotary-embedding-torch 0.8.6 does.
//! * KV caches are `[N, H, slots, Dh]`, one pair per time-wise layer in layer order: the prefill emits its S slots,
//!   the host copies each row's real slots into the decode cache of T slots.

use serde::{Deserialize, Serialize};

use super::config::ModelConfig;
// The shared types the contract is written in, re-exported so 1.0 code reads `signature::X` for all of it.
/// What the arms no Toto 1.0 graph reaches say: its buckets are prefill or decode, the kinds [`check_kind`] lets
/// through where a manifest is read (the other kinds of [`GraphKind`] are other families').
pub const ONLY_PREFILL_DECODE: &str = "Toto 1.0 graphs are prefill or decode graphs (check_kind)";

/// A Toto 1.0 bucket's kind must be prefill or decode.
pub fn check_kind(kind: GraphKind) -> crate::error::Result<()> {
    if GraphKind::PREFILL_DECODE.contains(&kind) {
        return Ok(());
    }
    Err(crate::error::Error::Config {
        message: format!(
            "a Toto 1.0 bucket of kind {:?}: its graphs are prefill or decode graphs",
            kind.as_str()
        ),
    })
}

pub use crate::signature::{
    k_cache, v_cache, DType, Dim, DynSig, GraphKind, IoTypes, Precision, TensorSig, ROWS, SLOTS,
};

/// Input names.
pub const PATCHES: &str = "patches";
/// Per-row group id: rows with equal ids attend to each other in the space-wise layers.
pub const GROUP_ID: &str = "group_id";
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

/// Input of a shape-polymorphic graph (the TensorRT variant): the additive time-wise attention mask the static
/// graphs build from constants — `[S, S]` causal at prefill, `[N, T]` (`0` for slots `≤ write_pos`, `-inf`
/// after) at decode — given by the host, so the graph needs no `Range`/`Shape` to make it.
pub const TIME_MASK: &str = "time_mask";
/// Placeholder sizes for the symbolic dimensions while deriving [`DynSig`]s from the static signatures (no model
/// dimension is anywhere near them).
const ROWS_MARK: usize = 1_000_003;
const SLOTS_MARK: usize = 1_000_033;

/// A graph's dims with symbolic rows and slots (placeholder values; see [`dynamic_signature`]).
pub fn symbolic_dims(model: &ModelConfig, kind: GraphKind) -> GraphDims {
    GraphDims::new(model, kind, ROWS_MARK, SLOTS_MARK)
}

fn to_dyn(s: TensorSig) -> DynSig {
    let dims = s
        .shape
        .iter()
        .map(|&d| match d {
            ROWS_MARK => Dim::Named(ROWS.into()),
            SLOTS_MARK => Dim::Named(SLOTS.into()),
            n => Dim::Fixed(n),
        })
        .collect();
    DynSig { name: s.name, dtype: s.dtype, dims }
}

/// The time mask's signature for dims `d` (mask type `mask`): `[S, S]` at prefill, `[N, T]` at decode.
pub fn time_mask(d: &GraphDims, mask: DType) -> TensorSig {
    let shape = match d.kind {
        GraphKind::Prefill => vec![d.slots, d.slots],
        GraphKind::Decode => vec![d.rows, d.slots],
        _ => unreachable!("{ONLY_PREFILL_DECODE}"),
    };
    TensorSig::new(TIME_MASK, mask, &shape)
}

/// The inputs of the shape-polymorphic graph of `kind` (those of [`inputs`] with rows and slots symbolic, then
/// [`TIME_MASK`]), and its outputs.
pub fn dynamic_signature(
    model: &ModelConfig,
    kind: GraphKind,
    io: IoTypes,
    mask: DType,
) -> (Vec<DynSig>, Vec<DynSig>) {
    let d = symbolic_dims(model, kind);
    let mut ins: Vec<DynSig> = inputs(&d, io).into_iter().map(to_dyn).collect();
    ins.push(to_dyn(time_mask(&d, mask)));
    (ins, outputs(&d, io).into_iter().map(to_dyn).collect())
}

/// The static inputs one bucket `d` binds on the shape-polymorphic graph: [`inputs`] plus the time mask.
pub fn dynamic_bucket_inputs(d: &GraphDims, io: IoTypes, mask: DType) -> Vec<TensorSig> {
    let mut v = inputs(d, io);
    v.push(time_mask(d, mask));
    v
}

/// Static dimensions of one graph (one bucket), derived from its kind, rows and slots and the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphDims {
    pub kind: GraphKind,
    /// Rows N (prefill: series × variates; decode: series × sample paths × variates).
    pub rows: usize,
    /// Patch slots: the prefill's context slots S (its cache outputs have S slots), the decode's cache slots T.
    pub slots: usize,
    pub patch: usize,
    pub heads: usize,
    pub head_dim: usize,
    pub components: usize,
    pub time_layers: usize,
}

impl GraphDims {
    pub fn new(model: &ModelConfig, kind: GraphKind, rows: usize, slots: usize) -> Self {
        GraphDims {
            kind,
            rows,
            slots,
            patch: model.patch_size,
            heads: model.num_heads,
            head_dim: model.embed_dim / model.num_heads,
            components: model.k_components(),
            time_layers: model.time_layer_count(),
        }
    }

    /// Patch slots this call processes: S at prefill, 1 at decode.
    pub fn step_slots(&self) -> usize {
        match self.kind {
            GraphKind::Prefill => self.slots,
            GraphKind::Decode => 1,
            _ => unreachable!("{ONLY_PREFILL_DECODE}"),
        }
    }

    /// Shape of one KV cache tensor: `[N, H, slots, Dh]`.
    pub fn cache_shape(&self) -> [usize; 4] {
        [self.rows, self.heads, self.slots, self.head_dim]
    }

    /// Shape of each mixture output: `[N, P, K]`.
    pub fn mixture_shape(&self) -> [usize; 3] {
        [self.rows, self.patch, self.components]
    }
}

/// The inputs of a graph, in order.
pub fn inputs(d: &GraphDims, io: IoTypes) -> Vec<TensorSig> {
    let n = d.rows;
    let float = io.float;
    let mut v = Vec::new();
    match d.kind {
        GraphKind::Prefill => {
            v.push(TensorSig::new(PATCHES, float, &[n, d.slots, d.patch]));
            v.push(TensorSig::new(GROUP_ID, DType::I64, &[n]));
            v.push(TensorSig::new(LAST_INDEX, DType::I64, &[n]));
            for name in [ROPE_COS, ROPE_SIN, XPOS_SCALE] {
                v.push(TensorSig::new(name, io.rope, &[n, d.slots, d.head_dim]));
            }
        }
        GraphKind::Decode => {
            v.push(TensorSig::new(PATCHES, float, &[n, d.patch]));
            v.push(TensorSig::new(GROUP_ID, DType::I64, &[n]));
            v.push(TensorSig::new(WRITE_POS, DType::I64, &[n]));
            for name in [ROPE_COS, ROPE_SIN, XPOS_SCALE] {
                v.push(TensorSig::new(name, io.rope, &[n, d.head_dim]));
            }
            for i in 0..d.time_layers {
                v.push(TensorSig::new(k_cache(i, false), float, &d.cache_shape()));
                v.push(TensorSig::new(v_cache(i, false), float, &d.cache_shape()));
            }
        }
        _ => unreachable!("{ONLY_PREFILL_DECODE}"),
    }
    v
}

/// The outputs of a graph, in order. The mixture outputs are always f32 (the host samples in f64).
pub fn outputs(d: &GraphDims, io: IoTypes) -> Vec<TensorSig> {
    let float = io.float;
    let mut v: Vec<TensorSig> =
        MIXTURE_OUTPUTS.iter().map(|n| TensorSig::new(*n, DType::F32, &d.mixture_shape())).collect();
    for i in 0..d.time_layers {
        v.push(TensorSig::new(k_cache(i, true), float, &d.cache_shape()));
        v.push(TensorSig::new(v_cache(i, true), float, &d.cache_shape()));
    }
    v
}
