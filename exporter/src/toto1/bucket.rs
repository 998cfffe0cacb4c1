//! Toto 1.0's shape buckets: the ladder of static graph shapes one profile is exported as, and what a bucket's
//! dims and buffers are for a Toto 1.0 model ([`ModelBuckets`]).
//!
//! A profile bounds a call (series, variates, context, horizon, samples). Exporting only its full shape would make
//! every call pay for those bounds: a mean forecast would run the decode graph's `batch × samples` rows, a short
//! context the longest prefill. Each graph stays one fixed computation (what TensorRT plans and CUDA graphs
//! capture), so instead a profile gets a short ladder of static sizes along every dimension a call can under-fill,
//! and the engine runs each call on the smallest bucket that holds it (vLLM's captured batch sizes, TensorRT-LLM's
//! padded optimisation profiles, ONNX Runtime's `gpu_graph_id` do the same).
//!
//! * **prefill** buckets: rows N (series × variates) × context slots S;
//! * **decode** buckets: rows N (series × sample paths × variates) × cache slots T (context + forecast patches).
//!
//! The default ladder ([`default_ladder`]) is not the full cross product:
//! * prefill rows {1, 4, 16} up to the profile's series × variates (capped at [`PREFILL_ROWS_CAP`]: at 16 rows of
//!   8 patches the matmuls are compute-bound, so larger groups run as several prefill calls at no loss), context
//!   slots halving from the profile's down to [`MIN_CONTEXT_SLOTS`] (below that a prefill costs the same: it is
//!   bound by streaming the weights);
//! * decode rows {1, 8, 16, 32, 64, 128, 256} up to series × variates × samples (capped at [`DECODE_ROWS_CAP`]:
//!   compute-bound there, larger groups run as several passes), each with the profile's full cache length, plus a
//!   short cache (the shortest context's) from 64 rows up, where the cache dominates memory.
//!
//! For Toto-Open-Base-1.0 and the profile `batch 8, variates 4, context 4096, horizon 336, samples 256` that is 12
//! prefill and 10 decode graphs. A profile may list its own buckets instead (`buckets:` in the YAML, see
//! [`crate::profile`]). [`ModelBuckets::memory_bytes`] estimates what a bucket's buffers need, so an engine can drop or
//! avoid buckets beyond its memory budget.

use super::config::ModelConfig;
use super::signature::GraphDims;
use crate::bucket::{decode_slots, slots, Bucket};
use crate::profile::Profile;
use crate::signature::Precision;

/// Largest prefill rows of the default ladder.
pub const PREFILL_ROWS_CAP: usize = 16;
/// Largest decode rows of the default ladder.
pub const DECODE_ROWS_CAP: usize = 256;
/// Fewest context slots of the default ladder (a profile with less context has just its own).
pub const MIN_CONTEXT_SLOTS: usize = 8;
/// From this many decode rows on, the default ladder adds a short-cache bucket.
const SHORT_CACHE_FROM_ROWS: usize = 64;
const PREFILL_ROWS: [usize; 3] = [1, 4, 16];
const DECODE_ROWS: [usize; 7] = [1, 8, 16, 32, 64, 128, 256];

/// What a [`Bucket`] is for a Toto 1.0 model.
pub trait ModelBuckets {
    /// The graph dims of the bucket for `model`.
    fn dims(&self, model: &ModelConfig) -> GraphDims;

    /// Estimated bytes of the bucket's buffers when loaded and run: its inputs and outputs (the KV caches are
    /// most of it) plus a conservative bound on ONNX Runtime's planned intermediates (the widest MLP, attention
    /// score and output-head tensors, each counted with its producer and consumer alive). Weights are shared by
    /// every bucket and not counted. Caches and activations take `precision`'s bytes; attention scores count as
    /// f32 (an fp16 graph's softmax is an fp32 region).
    fn memory_bytes(&self, model: &ModelConfig, precision: Precision) -> u64;
}

impl ModelBuckets for Bucket {
    fn dims(&self, model: &ModelConfig) -> GraphDims {
        GraphDims::new(model, self.kind, self.rows, self.slots)
    }

    fn memory_bytes(&self, model: &ModelConfig, precision: Precision) -> u64 {
        let d = self.dims(model);
        let f = precision.bytes();
        let (n, s, dh, h) = (d.rows as u64, d.slots as u64, d.head_dim as u64, d.heads as u64);
        let (dm, mlp, p, k) =
            (model.embed_dim as u64, model.mlp_hidden_dim as u64, d.patch as u64, d.components as u64);
        let cache = 2 * d.time_layers as u64 * n * h * s * dh * f;
        let step = d.step_slots() as u64;
        let tokens = n * step;
        let io = tokens * (p + 3 * dh) * f + 4 * n * p * k * f + 2 * n * 8;
        let mlp_act = tokens * 4 * mlp * f;
        let time_scores = 2 * n * h * step * s * 4;
        let space_scores = 2 * step * h * n * n * 4;
        let head = 2 * n * p * 4 * k * f;
        let residual = 6 * tokens * dm * f;
        cache + io + residual + mlp_act.max(time_scores).max(space_scores).max(head)
    }
}

/// The default ladder of a profile (see the module docs), prefill buckets first, each kind in ascending order.
pub fn default_ladder(profile: &Profile, model: &ModelConfig) -> Vec<Bucket> {
    let p = model.patch_size;
    let s_max = slots(profile.context, p);
    let mut context_slots = vec![s_max];
    while let Some(&s) = context_slots.last() {
        if s <= MIN_CONTEXT_SLOTS {
            break;
        }
        context_slots.push(s.div_ceil(2).max(MIN_CONTEXT_SLOTS));
    }
    let prefill_rows = rows_ladder(&PREFILL_ROWS, profile.batch * profile.variates, PREFILL_ROWS_CAP);
    let mut out = Vec::new();
    for &rows in &prefill_rows {
        for &s in &context_slots {
            out.push(Bucket::prefill(rows, s));
        }
    }
    if slots(profile.horizon, p) > 1 {
        let t_max = decode_slots(profile.context, profile.horizon, p);
        let t_short = context_slots.iter().min().copied().unwrap_or(s_max) + slots(profile.horizon, p) - 1;
        let max_rows = profile.batch * profile.variates * profile.samples.max(1);
        for rows in rows_ladder(&DECODE_ROWS, max_rows, DECODE_ROWS_CAP) {
            if rows >= SHORT_CACHE_FROM_ROWS && t_short < t_max {
                out.push(Bucket::decode(rows, t_short));
            }
            out.push(Bucket::decode(rows, t_max));
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The ladder values below `min(max, cap)`, then `min(max, cap)` itself.
fn rows_ladder(ladder: &[usize], max: usize, cap: usize) -> Vec<usize> {
    let top = max.min(cap).max(1);
    let mut v: Vec<usize> = ladder.iter().copied().filter(|&r| r < top).collect();
    v.push(top);
    v
}

#[cfg(test)]
mod tests {
    use super::super::checkpoint::tests::{base_config, tiny_config};
    use super::*;
    use crate::signature::GraphKind;

    fn profile(batch: usize, variates: usize, context: usize, horizon: usize, samples: usize) -> Profile {
        Profile {
            name: "p".into(),
            batch,
            variates,
            context,
            horizon,
            samples,
            buckets: None,
            decode_block: None,
            family: None,
        }
    }

    #[test]
    fn wide_base_profile_gets_a_short_ladder() {
        let ladder = default_ladder(&profile(8, 4, 4096, 336, 256), &base_config());
        let prefill: Vec<(usize, usize)> =
            ladder.iter().filter(|b| b.kind == GraphKind::Prefill).map(|b| (b.rows, b.slots)).collect();
        let decode: Vec<(usize, usize)> =
            ladder.iter().filter(|b| b.kind == GraphKind::Decode).map(|b| (b.rows, b.slots)).collect();
        assert_eq!(prefill.len(), 12);
        assert!(prefill.contains(&(1, 8)) && prefill.contains(&(16, 64)) && prefill.contains(&(4, 32)));
        // 4096 + 336 points: 64 context slots + 6 forecast patches, the first predicted by the prefill
        assert_eq!(
            decode,
            [
                (1, 69),
                (8, 69),
                (16, 69),
                (32, 69),
                (64, 13),
                (64, 69),
                (128, 13),
                (128, 69),
                (256, 13),
                (256, 69)
            ]
        );
    }

    #[test]
    fn small_profiles_get_few_buckets_and_short_horizons_no_decode() {
        let mean = default_ladder(&profile(1, 1, 512, 336, 0), &base_config());
        assert_eq!(mean, [Bucket::prefill(1, 8), Bucket::decode(1, 13)]);
        let one_patch = default_ladder(&profile(1, 1, 512, 64, 256), &base_config());
        assert_eq!(one_patch, [Bucket::prefill(1, 8)]);
        let tiny = default_ladder(&profile(2, 4, 256, 160, 0), &tiny_config(16));
        assert_eq!(tiny.iter().filter(|b| b.kind == GraphKind::Prefill).count(), 3 * 2);
        assert!(tiny.contains(&Bucket::decode(8, 25)) && tiny.contains(&Bucket::decode(1, 25)));
    }

    #[test]
    fn context_ladder_halves_down_to_eight_slots() {
        let odd = default_ladder(&profile(1, 1, 640, 64, 0), &base_config());
        assert_eq!(odd, [Bucket::prefill(1, 8), Bucket::prefill(1, 10)]);
        let short = default_ladder(&profile(1, 1, 100, 64, 0), &base_config());
        assert_eq!(short, [Bucket::prefill(1, 2)]);
    }

    #[test]
    fn memory_is_mostly_the_cache_and_grows_with_rows_and_slots() {
        let base = base_config();
        let small = Bucket::decode(64, 13).memory_bytes(&base, Precision::Fp32);
        let long = Bucket::decode(64, 69).memory_bytes(&base, Precision::Fp32);
        // 11 time-wise layers × K and V × 12 heads × 64 dims × 4 bytes = 67.6 kB per row and slot
        let cache = |rows: u64, slots: u64| rows * slots * 2 * 11 * 12 * 64 * 4;
        assert!(small >= cache(64, 13) && small < cache(64, 13) * 3, "{small}");
        assert!(long > small && long >= cache(64, 69));
        assert!(Bucket::decode(256, 69).memory_bytes(&base, Precision::Fp32) > long);
        let prefill = |rows, slots| Bucket::prefill(rows, slots).memory_bytes(&base, Precision::Fp32);
        assert!(prefill(16, 64) > prefill(1, 8));
        // fp16 caches take half the bytes
        let half = Bucket::decode(64, 69).memory_bytes(&base, Precision::Fp16);
        assert!(half < long && half >= cache(64, 69) / 2, "{half} vs {long}");
    }

    #[test]
    fn stems_name_kind_rows_and_slots() {
        assert_eq!(Bucket::prefill(16, 8).stem("default"), "default.prefill.n16.s8");
        assert_eq!(Bucket::decode(64, 13).stem("x"), "x.decode.n64.t13");
    }
}
