//! The I/O contract of the Toto 2.0 graphs, defined once here and used by the engines' 2.0 driver.
//!
//! Rows are flattened: each of the `rows` graph rows is one variate of one series (R = rows). Every dimension is
//! static per graph ([`Toto2Dims`]); a profile (or shape bucket) instantiates one set of graphs:
//!
//! * without block decoding, one **pass** graph over `L = S + N` tokens: S context patch slots, then N mask-token
//!   slots (the horizon patches), no KV cache — what `Toto2Model.forecast` runs by default;
//! * with block decoding (a decode block of B patches), a **prefill** graph over `L = S + B` tokens, which also
//!   serves every horizon of at most B patches as a single pass, and returns the KV caches of the time layers
//!   sized to `T = S + N + B` slots; and a **decode** graph over `2B` tokens (B median-feedback patches, then B
//!   mask tokens built in the graph) that writes its 2B keys/values at each row's `write_pos` with a
//!   `TensorScatter` (the caches may be bound in place) and returns the next B patches.
//!
//! What the host fills (see `engines::toto2`):
//! * `patches [R, L, P]`: each row's patches left-aligned, `asinh((x − loc)/scale)` with the patch's causal
//!   statistics, 0 for missing points and mask tokens; slots after a row's last token are padding (causality
//!   hides them from its real queries). `missing [R, L, P]`: 1.0 for missing points, mask tokens and padding.
//!   Decode: `patches [R, B, P]` are the scaled medians fed back, all observed.
//! * `group_ids [R, L]` (decode `[R, 2B]`): one id per row and slot. Time layers attend to earlier slots of the
//!   row with the same id; the variate layer attends, at each slot, to the rows with the same id. The host gives
//!   each series group of each request a fresh id ≥ 0, the fully unobserved context patches of a request one more
//!   fresh id (toto-2 gives them id −1, which is shared by every variate of the request), and every padded row
//!   and padded slot a unique negative id. At decode, ids are those of the first 2B slots of the request's
//!   prefill (toto-2 reads `base_gids[..., :2B]`).
//! * `out_index [R, K]` (pass, prefill): the slot whose hidden state predicts output patch k (`S_r − 1 + k`).
//! * `rope_cos`, `rope_sin`, `xpos_scale [R, L, Dr]` (Dr = `qk_dim/2`, the rotated channels): interleaved angles
//!   and the interleaved xPos scale `ζ^((pos − c)/256)` of each token's absolute patch position, with the centre
//!   c = `(max position of the call + 1) // 2` of that row's request. Queries are multiplied by it, keys divided.
//! * decode: `write_pos [R]` (the slot of the first fed-back patch), `key_valid [R, T]` (0 for the slots of
//!   fully unobserved context patches, 1 elsewhere), `k_cache.i [R, G, T, qk]`, `v_cache.i [R, G, T, v]`.
//!
//! Output: `quantiles [R, K, P, 9]`, the head's nine knots per point in asinh space (knot order, unsorted; the
//! host applies `sinh·scale + loc`, the clamp and the sort). K = N (pass) or B (prefill, decode; the decode graph
//! reads tokens B−1 … 2B−2). Prefill/decode also output `k_cache_out.i`, `v_cache_out.i`.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::signature::{k_cache, v_cache, DType, TensorSig};
use crate::toto2::config::{Toto2Config, MAX_POSITIONS};

/// Input names (shared with Toto 1.0 where the meaning is the same).
pub const PATCHES: &str = "patches";
pub const MISSING: &str = "missing";
pub const GROUP_IDS: &str = "group_ids";
pub const OUT_INDEX: &str = "out_index";
pub const WRITE_POS: &str = "write_pos";
pub const KEY_VALID: &str = "key_valid";
pub const ROPE_COS: &str = "rope_cos";
pub const ROPE_SIN: &str = "rope_sin";
pub const XPOS_SCALE: &str = "xpos_scale";
/// Output name: the nine quantile knots per point, asinh space.
pub const QUANTILES: &str = "quantiles";

/// Which Toto 2.0 graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Toto2GraphKind {
    /// Single pass over context + horizon mask tokens, no cache.
    Pass,
    /// Block decoding: context + one block of mask tokens; emits the caches.
    Prefill,
    /// Block decoding: one block of fed-back medians + one block of mask tokens, against the caches.
    Decode,
}

impl Toto2GraphKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Toto2GraphKind::Pass => "pass",
            Toto2GraphKind::Prefill => "prefill",
            Toto2GraphKind::Decode => "decode",
        }
    }
}

/// Static dimensions of one set of Toto 2.0 graphs (one profile or shape bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toto2Dims {
    /// R: graph rows (series × variates, flattened).
    pub rows: usize,
    /// S: context patch slots.
    pub context_slots: usize,
    /// N: forecast patches (`ceil(horizon/P)`).
    pub horizon_slots: usize,
    /// B: decode block in patches, when block decoding (`B < N`).
    pub block: Option<usize>,
    pub patch: usize,
    pub heads: usize,
    /// G: key/value heads.
    pub kv_heads: usize,
    pub qk_dim: usize,
    pub v_dim: usize,
    /// Dr: rotated channels per query/key head.
    pub rotary_dim: usize,
    pub quantiles: usize,
    pub time_layers: usize,
}

impl Toto2Dims {
    /// Dims for `rows` rows, `context` and `horizon` points and an optional `decode_block` in points (a multiple
    /// of the patch; a block that covers the horizon means a single pass, as in toto-2).
    pub fn new(
        cfg: &Toto2Config,
        rows: usize,
        context: usize,
        horizon: usize,
        decode_block: Option<usize>,
    ) -> Result<Self> {
        let p = cfg.patch_size;
        let bad = |message: String| Err(Error::Profile { message });
        if rows == 0 || horizon == 0 || context < p {
            return bad(format!(
                "Toto 2.0 graphs need rows ≥ 1, horizon ≥ 1 and a context of at least one patch ({p} points); got \
                 rows {rows}, context {context}, horizon {horizon}"
            ));
        }
        let (s, n) = (context / p, horizon.div_ceil(p));
        let block = match decode_block {
            None => None,
            Some(b) if b == 0 || !b.is_multiple_of(p) => {
                return bad(format!("decode_block {b} must be a positive multiple of the patch size {p}"))
            }
            Some(b) => Some(b / p).filter(|&b| b < n),
        };
        let d = Toto2Dims {
            rows,
            context_slots: s,
            horizon_slots: n,
            block,
            patch: p,
            heads: cfg.num_heads,
            kv_heads: cfg.num_groups,
            qk_dim: cfg.qk_dim,
            v_dim: cfg.v_dim,
            rotary_dim: cfg.rotary_dim(),
            quantiles: cfg.quantiles(),
            time_layers: cfg.time_layer_count(),
        };
        // toto-2's rotary tables cover positions < 8192; block decoding numbers its tokens up to S + 2N.
        let positions = s + if block.is_some() { 2 * n } else { n };
        if positions > MAX_POSITIONS {
            return bad(format!(
                "context {context} and horizon {horizon} need {positions} patch positions, more than Toto 2.0's \
                 {MAX_POSITIONS}; lower context or horizon"
            ));
        }
        Ok(d)
    }

    /// The graphs of this set: `[Pass]`, or `[Prefill, Decode]` when block decoding.
    pub fn graphs(&self) -> Vec<Toto2GraphKind> {
        match self.block {
            None => vec![Toto2GraphKind::Pass],
            Some(_) => vec![Toto2GraphKind::Prefill, Toto2GraphKind::Decode],
        }
    }

    /// Tokens per row of a graph: `S + N`, `S + B` or `2B`.
    pub fn tokens(&self, kind: Toto2GraphKind) -> usize {
        let b = self.block.unwrap_or(0);
        match kind {
            Toto2GraphKind::Pass => self.context_slots + self.horizon_slots,
            Toto2GraphKind::Prefill => self.context_slots + b,
            Toto2GraphKind::Decode => 2 * b,
        }
    }

    /// Forecast patches per row a graph outputs: N, or B.
    pub fn outputs(&self, kind: Toto2GraphKind) -> usize {
        match kind {
            Toto2GraphKind::Pass => self.horizon_slots,
            _ => self.block.unwrap_or(0),
        }
    }

    /// T: KV cache slots, `S + N + B` (the last decode call writes its 2B tokens below that).
    pub fn cache_slots(&self) -> usize {
        self.context_slots + self.horizon_slots + self.block.unwrap_or(0)
    }

    pub fn k_cache_shape(&self) -> [usize; 4] {
        [self.rows, self.kv_heads, self.cache_slots(), self.qk_dim]
    }

    pub fn v_cache_shape(&self) -> [usize; 4] {
        [self.rows, self.kv_heads, self.cache_slots(), self.v_dim]
    }

    /// The inputs of a graph, in order.
    pub fn inputs(&self, kind: Toto2GraphKind) -> Vec<TensorSig> {
        let (r, l, p, dr) = (self.rows, self.tokens(kind), self.patch, self.rotary_dim);
        let sig = |name: &str, dtype, shape: &[usize]| TensorSig {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
        };
        let mut v = Vec::new();
        match kind {
            Toto2GraphKind::Pass | Toto2GraphKind::Prefill => {
                v.push(sig(PATCHES, DType::F32, &[r, l, p]));
                v.push(sig(MISSING, DType::F32, &[r, l, p]));
                v.push(sig(GROUP_IDS, DType::I64, &[r, l]));
                v.push(sig(OUT_INDEX, DType::I64, &[r, self.outputs(kind)]));
            }
            Toto2GraphKind::Decode => {
                v.push(sig(PATCHES, DType::F32, &[r, self.outputs(kind), p]));
                v.push(sig(GROUP_IDS, DType::I64, &[r, l]));
                v.push(sig(WRITE_POS, DType::I64, &[r]));
                v.push(sig(KEY_VALID, DType::I64, &[r, self.cache_slots()]));
            }
        }
        for name in [ROPE_COS, ROPE_SIN, XPOS_SCALE] {
            v.push(sig(name, DType::F32, &[r, l, dr]));
        }
        if kind == Toto2GraphKind::Decode {
            for i in 0..self.time_layers {
                v.push(sig(&k_cache(i, false), DType::F32, &self.k_cache_shape()));
                v.push(sig(&v_cache(i, false), DType::F32, &self.v_cache_shape()));
            }
        }
        v
    }

    /// The outputs of a graph, in order.
    pub fn outputs_sigs(&self, kind: Toto2GraphKind) -> Vec<TensorSig> {
        let shape = vec![self.rows, self.outputs(kind), self.patch, self.quantiles];
        let mut v = vec![TensorSig { name: QUANTILES.into(), dtype: DType::F32, shape }];
        if kind != Toto2GraphKind::Pass {
            for i in 0..self.time_layers {
                let (k, val) = (self.k_cache_shape().to_vec(), self.v_cache_shape().to_vec());
                v.push(TensorSig { name: k_cache(i, true), dtype: DType::F32, shape: k });
                v.push(TensorSig { name: v_cache(i, true), dtype: DType::F32, shape: val });
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toto2::config::tests::config_4m_json;

    #[test]
    fn pass_and_block_dims() {
        let cfg = Toto2Config::from_json(&config_4m_json()).unwrap();
        let d = Toto2Dims::new(&cfg, 2, 512, 336, None).unwrap();
        assert_eq!((d.context_slots, d.horizon_slots, d.block), (16, 11, None));
        assert_eq!(d.graphs(), [Toto2GraphKind::Pass]);
        assert_eq!(d.tokens(Toto2GraphKind::Pass), 27);
        // a block that covers the horizon is a single pass
        assert_eq!(Toto2Dims::new(&cfg, 2, 512, 336, Some(768)).unwrap().block, None);
        let d = Toto2Dims::new(&cfg, 3, 500, 336, Some(128)).unwrap();
        assert_eq!((d.context_slots, d.block, d.cache_slots()), (15, Some(4), 15 + 11 + 4));
        assert_eq!(d.graphs(), [Toto2GraphKind::Prefill, Toto2GraphKind::Decode]);
        assert_eq!((d.tokens(Toto2GraphKind::Prefill), d.tokens(Toto2GraphKind::Decode)), (19, 8));
        let dec = d.inputs(Toto2GraphKind::Decode);
        assert_eq!(dec[0].shape, [3, 4, 32]);
        assert_eq!(dec.iter().filter(|s| s.name.starts_with("k_cache.")).count(), 3);
        assert_eq!(d.outputs_sigs(Toto2GraphKind::Decode)[0].shape, [3, 4, 32, 9]);
        assert_eq!(d.inputs(Toto2GraphKind::Prefill)[4].shape, [3, 19, 32]);
    }

    #[test]
    fn bad_dims_are_errors() {
        let cfg = Toto2Config::from_json(&config_4m_json()).unwrap();
        let e = |r| Toto2Dims::new(&cfg, 1, 512, 336, r).unwrap_err().to_string();
        assert!(e(Some(100)).contains("multiple of the patch size 32"));
        let s = Toto2Dims::new(&cfg, 1, 31, 10, None).unwrap_err().to_string();
        assert!(s.contains("at least one patch (32 points)"), "{s}");
        let s = Toto2Dims::new(&cfg, 1, 32 * 8000, 32 * 100, Some(64)).unwrap_err().to_string();
        assert!(s.contains("8192"), "{s}");
    }
}
