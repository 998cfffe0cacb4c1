//! The I/O contract of the Kronos graphs, defined once here for the exporter and the engine.
//!
//! Every graph is one static shape bucket ([`crate::bucket::Bucket`]: a [`GraphKind`], R rows, S slots); the
//! predictor's caches have T slots, the profile's `window` (`KronosPredictor`'s `max_context` bound). A row is one
//! series (encode, prefill) or one sample path of a series (the others). Token ids, stamps and positions are
//! `i64`; everything else `f32`. What the host fills:
//!
//! * **encode** `[R, S]`: `values [R, S, 6]`, the normalised, clipped candle rows (open, high, low, close,
//!   volume, amount), right-padded (the encoder is causal, so padding after a row's last real point changes
//!   nothing before it). Out: `s1`, `s2 [R, S]` (bit j of a half = `z_j > 0`, least significant first) and the
//!   pre-sign `z [R, S, 2·bits]` (the quantizer's input: its smallest |z| is a token's margin).
//! * **prefill** `[R, S]` (S ≤ T): `s1`, `s2 [R, S]`, `stamps [R, S, 5]` (each row's own minute, hour, weekday
//!   Mon=0, day, month), right-padded, and `last [R]`, the slot of each row's last real token. Out: `s1_logits
//!   [R, V]` and `h_last [R, D]` (the final-normed state) at `last`; per layer i `k_cache_out.i`, `v_cache_out.i
//!   [R, H, T, Dh]` (keys after RoPE at positions 0…S−1, then zeros to T); the dependency layer's keys and values
//!   of the final-normed states, `dep_k_cache_out`, `dep_v_cache_out [R, 4, T, D/4]` (no RoPE). The caches are
//!   in the layout decode reads, rows outermost: one row's cache is one contiguous block per tensor, so a series'
//!   prefill is copied to its paths' rows with one copy per tensor and row.
//! * **recompute** `[R, S]`: the same inputs and outputs without the layer caches: every step once the window
//!   slides (each then sees a new window at positions 0…S−1, so no cache is reusable).
//! * **decode** `[R, T]`: one token per row, `s1`, `s2 [R, 1]`, `stamps [R, 1, 5]` (the input row's own stamp),
//!   `write_pos [R]` (its position, and the cache slot it is written to), the caches `k_cache.i`, `v_cache.i`,
//!   `dep_k_cache`, `dep_v_cache`. Out: `s1_logits`, `h_last`, and the caches with the new slot written
//!   (`TensorScatter` at opset 24: bind each output to its input to update in place). Slots after `write_pos` are
//!   masked, whatever they hold.
//! * **refine** `[R, T]`: the s2 head for the s1 just sampled: `s1 [R]`, `h_last [R, D]`, `dep_k_cache`,
//!   `dep_v_cache` and `length [R]` (valid slots: `last + 1` after a prefill or recompute, `write_pos + 1` after a
//!   decode step). Out: `s2_logits [R, V]`.
//! * **detokenize** `[R, S]`: `s1`, `s2 [R, S]`, right-padded. Out: `values [R, S, 6]`, normalised rows.
//!
//! V = 2^bits (s1 and s2 have the same vocabulary), D the predictor's width, H its heads of Dh.

use serde::{Deserialize, Serialize};

use crate::bucket::Bucket;
use crate::kronos::config::{KronosConfig, DEP_HEADS, ROW_COLUMNS, TIME_FEATURES};
use crate::signature::{k_cache, v_cache, DType, GraphKind, TensorSig};

pub const VALUES: &str = "values";
pub const S1: &str = "s1";
pub const S2: &str = "s2";
pub const Z: &str = "z";
pub const STAMPS: &str = "stamps";
pub const LAST: &str = "last";
pub const WRITE_POS: &str = "write_pos";
pub const LENGTH: &str = "length";
pub const S1_LOGITS: &str = "s1_logits";
pub const S2_LOGITS: &str = "s2_logits";
pub const H_LAST: &str = "h_last";

/// Name of the dependency layer's key cache input (`out`: the updated output).
pub fn dep_k_cache(out: bool) -> String {
    if out { "dep_k_cache_out" } else { "dep_k_cache" }.to_string()
}

/// Name of the dependency layer's value cache input (`out`: the updated output).
pub fn dep_v_cache(out: bool) -> String {
    if out { "dep_v_cache_out" } else { "dep_v_cache" }.to_string()
}

/// The kinds of graphs a Kronos profile is exported as, in the order they are written.
pub const KINDS: [GraphKind; 6] = [
    GraphKind::Encode,
    GraphKind::Prefill,
    GraphKind::Recompute,
    GraphKind::Decode,
    GraphKind::Refine,
    GraphKind::Detokenize,
];

/// The model sizes the graphs' shapes depend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelDims {
    /// D: the predictor's width.
    pub d_model: usize,
    /// H heads of Dh.
    pub heads: usize,
    pub head_dim: usize,
    pub layers: usize,
    /// Bits per token half (s1 and s2).
    pub bits: usize,
    /// The dependency layer's head size, D/4.
    pub dep_head_dim: usize,
}

impl ModelDims {
    pub fn of(cfg: &KronosConfig) -> Self {
        let p = &cfg.predictor;
        ModelDims {
            d_model: p.d_model,
            heads: p.n_heads,
            head_dim: p.head_dim(),
            layers: p.n_layers,
            bits: cfg.bits(),
            dep_head_dim: p.dep_head_dim(),
        }
    }

    /// V: entries of each token vocabulary.
    pub fn vocab(&self) -> usize {
        1 << self.bits
    }

    /// A layer's key or value cache: `[R, H, T, Dh]`.
    pub fn cache_shape(&self, rows: usize, window: usize) -> [usize; 4] {
        [rows, self.heads, window, self.head_dim]
    }

    /// The dependency layer's key or value cache: `[R, 4, T, D/4]`.
    pub fn dep_cache_shape(&self, rows: usize, window: usize) -> [usize; 4] {
        [rows, DEP_HEADS, window, self.dep_head_dim]
    }
}

fn sig(name: &str, dtype: DType, shape: &[usize]) -> TensorSig {
    TensorSig::new(name, dtype, shape)
}

/// The layer caches then the dependency caches, as inputs (`out = false`) or outputs.
fn caches(m: &ModelDims, rows: usize, window: usize, layers: bool, out: bool) -> Vec<TensorSig> {
    let mut v = Vec::new();
    if layers {
        for i in 0..m.layers {
            v.push(sig(&k_cache(i, out), DType::F32, &m.cache_shape(rows, window)));
            v.push(sig(&v_cache(i, out), DType::F32, &m.cache_shape(rows, window)));
        }
    }
    v.push(sig(&dep_k_cache(out), DType::F32, &m.dep_cache_shape(rows, window)));
    v.push(sig(&dep_v_cache(out), DType::F32, &m.dep_cache_shape(rows, window)));
    v
}

/// The inputs of bucket `b`'s graph, in order (`window`: T, the caches' slots).
pub fn inputs(m: &ModelDims, b: &Bucket, window: usize) -> Vec<TensorSig> {
    let (r, s) = (b.rows, b.slots);
    let stamps = TIME_FEATURES.len();
    match b.kind {
        GraphKind::Encode => vec![sig(VALUES, DType::F32, &[r, s, ROW_COLUMNS])],
        GraphKind::Prefill | GraphKind::Recompute => vec![
            sig(S1, DType::I64, &[r, s]),
            sig(S2, DType::I64, &[r, s]),
            sig(STAMPS, DType::I64, &[r, s, stamps]),
            sig(LAST, DType::I64, &[r]),
        ],
        GraphKind::Decode => {
            let mut v = vec![
                sig(S1, DType::I64, &[r, 1]),
                sig(S2, DType::I64, &[r, 1]),
                sig(STAMPS, DType::I64, &[r, 1, stamps]),
                sig(WRITE_POS, DType::I64, &[r]),
            ];
            v.extend(caches(m, r, window, true, false));
            v
        }
        GraphKind::Refine => {
            let mut v = vec![sig(S1, DType::I64, &[r]), sig(H_LAST, DType::F32, &[r, m.d_model])];
            v.extend(caches(m, r, window, false, false));
            v.push(sig(LENGTH, DType::I64, &[r]));
            v
        }
        GraphKind::Detokenize => vec![sig(S1, DType::I64, &[r, s]), sig(S2, DType::I64, &[r, s])],
    }
}

/// The outputs of bucket `b`'s graph, in order.
pub fn outputs(m: &ModelDims, b: &Bucket, window: usize) -> Vec<TensorSig> {
    let (r, s, v) = (b.rows, b.slots, m.vocab());
    let head = || vec![sig(S1_LOGITS, DType::F32, &[r, v]), sig(H_LAST, DType::F32, &[r, m.d_model])];
    match b.kind {
        GraphKind::Encode => vec![
            sig(S1, DType::I64, &[r, s]),
            sig(S2, DType::I64, &[r, s]),
            sig(Z, DType::F32, &[r, s, 2 * m.bits]),
        ],
        GraphKind::Prefill | GraphKind::Decode => {
            let mut out = head();
            out.extend(caches(m, r, window, true, true));
            out
        }
        GraphKind::Recompute => {
            let mut out = head();
            out.extend(caches(m, r, window, false, true));
            out
        }
        GraphKind::Refine => vec![sig(S2_LOGITS, DType::F32, &[r, v])],
        GraphKind::Detokenize => vec![sig(VALUES, DType::F32, &[r, s, ROW_COLUMNS])],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronos::config::tests::{small_json, tokenizer_base_json};
    use crate::kronos::config::{PredictorConfig, TokenizerConfig};

    fn small() -> ModelDims {
        let cfg = KronosConfig::new(
            PredictorConfig::from_json(&small_json()).unwrap(),
            TokenizerConfig::from_json(&tokenizer_base_json()).unwrap(),
        )
        .unwrap();
        ModelDims::of(&cfg)
    }

    #[test]
    fn decode_reads_and_writes_the_caches_prefill_emits() {
        let m = small();
        let prefill = outputs(&m, &Bucket::of(GraphKind::Prefill, 1, 392), 512);
        let decode_in = inputs(&m, &Bucket::of(GraphKind::Decode, 8, 512), 512);
        let decode_out = outputs(&m, &Bucket::of(GraphKind::Decode, 8, 512), 512);
        // 8 layers × (k, v) + the dependency layer's (k, v), after the logits and h_last
        assert_eq!(prefill.len(), 2 + 16 + 2);
        assert_eq!(prefill[2].shape, [1, 8, 512, 64]);
        assert_eq!(prefill[18].shape, [1, 4, 512, 128]);
        for (i, o) in decode_in[4..].iter().zip(&decode_out[2..]) {
            let want = match i.name.split_once('.') {
                Some((base, layer)) => format!("{base}_out.{layer}"),
                None => format!("{}_out", i.name),
            };
            assert_eq!(o.name, want);
            assert_eq!(i.shape, o.shape);
            // a prefill of one series fills the same layout, rows outermost
            let p = prefill.iter().find(|p| p.name == o.name).unwrap();
            assert_eq!(p.shape[1..], o.shape[1..]);
        }
        let recompute = outputs(&m, &Bucket::of(GraphKind::Recompute, 4, 512), 512);
        assert_eq!(
            recompute.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["s1_logits", "h_last", "dep_k_cache_out", "dep_v_cache_out"]
        );
        let refine = inputs(&m, &Bucket::of(GraphKind::Refine, 4, 512), 512);
        assert_eq!(
            refine.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
            ["s1", "h_last", "dep_k_cache", "dep_v_cache", "length"]
        );
        assert_eq!(outputs(&m, &Bucket::of(GraphKind::Encode, 2, 100), 512)[2].shape, [2, 100, 20]);
        assert_eq!(outputs(&m, &Bucket::of(GraphKind::Detokenize, 2, 100), 512)[0].shape, [2, 100, 6]);
    }
}
