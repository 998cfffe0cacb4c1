//! Scaled dot-product attention of the Kronos graphs: masks (causal, over cache slots), the scale, and the query
//! blocks long causal passes attend in.

use crate::graph::builder::{Attr, GraphBuilder};

/// `where(keep, 0, −inf)`.
pub(super) fn additive(g: &mut GraphBuilder, keep: &str) -> String {
    let zero = g.scalar(0.0);
    let ninf = g.scalar(f32::NEG_INFINITY);
    g.op("Where", &[keep, &zero, &ninf], vec![])
}

/// The slot mask `[R, 1, 1, T]` of rows whose valid slots are those below `bound[r]` (or at or below it with
/// `inclusive`).
pub(super) fn slot_mask(g: &mut GraphBuilder, bound: &str, t: usize, inclusive: bool) -> String {
    let slots = g.const_i64(&[t], &(0..t as i64).collect::<Vec<_>>());
    let b = g.unsqueeze(bound, &[1]);
    let keep = g.binary(if inclusive { "LessOrEqual" } else { "Less" }, &slots, &b);
    let m = additive(g, &keep);
    g.unsqueeze(&m, &[1, 2])
}

/// Query rows of one block of a causal attention over more positions (see [`causal_sdpa_at`]). 64: a block's scores
/// are 2 MB per row (4 heads) at Kronos-mini's 2,048 positions, and the engine's exactness fixtures (windows of
/// 128, contexts up to 160) run every kind of long graph in blocks.
pub const QUERY_BLOCK: usize = 64;

/// The key positions `0…keys−1` as `[1, keys]`, computed at each run: offset by `zero`, an unfolded zero
/// (`causal::unfolded_zero`), so that ONNX Runtime does not fold the masks built from them ([`causal_keep`]) into
/// constants a loaded session would hold (4 MB a 2,048-position graph).
pub(super) fn key_positions(g: &mut GraphBuilder, keys: usize, zero: &str) -> String {
    let key = g.const_i64(&[1, keys], &(0..keys as i64).collect::<Vec<_>>());
    g.binary("Add", &key, zero)
}

/// Which keys (`key`, from [`key_positions`]) the queries at positions `first…first+rows−1` see: `[rows, keys]`
/// booleans (a key at or before the query), one byte per score, not the four of an additive mask.
fn causal_keep(g: &mut GraphBuilder, key: &str, first: usize, rows: usize) -> String {
    let query = g.const_i64(&[rows, 1], &(first as i64..(first + rows) as i64).collect::<Vec<_>>());
    g.binary("LessOrEqual", key, &query)
}

/// The attention scale 1/√Dh where it is a power of two (Dh = 4ᵏ: 64 for every published Kronos model and tokenizer),
/// to be folded into the query projection. Scaling by a power of two is exact (no rounding, short of the subnormal
/// range), and so is every step after it: `(x·s·W + s·b)` rotated and dotted with a key is `s·(q·k)` bit for bit,
/// the product ONNX Runtime computed before. Folded, the score is a plain `q·kᵀ`: ONNX Runtime fuses a scale left on
/// it into `FusedMatMul`'s alpha, which on CPU takes a path 3× slower for a decode step's one query row (2.2 against
/// 6.3 ms for Kronos-small's eight layers at 8 rows × 512 slots) and 1.4× for a 64-row query block.
pub(super) fn folded_scale(dh: usize) -> Option<f32> {
    (dh.is_power_of_two() && dh.trailing_zeros().is_multiple_of(2))
        .then(|| 1.0 / (1u64 << (dh.trailing_zeros() / 2)) as f32)
}

/// The scale an attention over heads of `dh` applies to its scores: none when the query projection carries it
/// ([`folded_scale`]).
pub(super) fn score_scale(dh: usize) -> Option<f32> {
    match folded_scale(dh) {
        Some(_) => None,
        None => Some((1.0 / (dh as f64).sqrt()) as f32),
    }
}

/// Causal attention of the queries at positions `first…first+n−1` (`q [R, H, n, dh]`) over the keys and values
/// of positions 0…keys−1 (`kt [R, H, dh, keys]`, transposed; `v [R, H, keys, dh]`; `key` their positions, from
/// [`key_positions`]). Over more than
/// [`QUERY_BLOCK`] queries they go in blocks of that many rows, each block's scores `[R, H, B, keys]` against every
/// key with its rows of the causal mask, softmax, `·v`, and the blocks' outputs concatenated: the graphs that
/// attend over a whole window or context (prefill, recompute, encode, detokenize; 2,048 positions for Kronos-mini)
/// then hold one block's scores at a time instead of `[R, H, S, S]` per layer. Each query row's softmax is over the
/// same keys with the same mask values as unblocked, and every product sums over the same axis in the same order,
/// so the rows are the same.
pub(super) fn causal_sdpa_at(
    g: &mut GraphBuilder,
    q: &str,
    kt: &str,
    v: &str,
    key: &str,
    (first, n): (usize, usize),
    dh: usize,
) -> String {
    if n <= QUERY_BLOCK {
        let keep = causal_keep(g, key, first, n);
        return attend(g, q, kt, v, Mask::Keep(&keep), score_scale(dh));
    }
    let sizes: Vec<usize> = (0..n).step_by(QUERY_BLOCK).map(|a| QUERY_BLOCK.min(n - a)).collect();
    let blocks = g.split(q, 2, &sizes);
    let mut at = first;
    let mut outs = Vec::with_capacity(sizes.len());
    for (qb, &rows) in blocks.iter().zip(&sizes) {
        let keep = causal_keep(g, key, at, rows);
        outs.push(attend(g, qb, kt, v, Mask::Keep(&keep), score_scale(dh)));
        at += rows;
    }
    let outs: Vec<&str> = outs.iter().map(String::as_str).collect();
    g.op("Concat", &outs, vec![("axis", Attr::Int(2))])
}

/// How an attention hides the keys a query must not see.
pub(super) enum Mask<'a> {
    /// Added to the scores: 0 where seen, −inf where hidden.
    Additive(&'a str),
    /// Booleans, true where seen: the hidden scores become −inf (`Where`). The same softmax inputs as the additive
    /// mask (a seen score + 0 is itself, a zero's sign aside, which no exponential sees), one byte per score.
    Keep(&'a str),
}

/// `softmax(q·kᵀ·scale + mask)·v` over the last two axes.
pub(super) fn sdpa(g: &mut GraphBuilder, q: &str, k: &str, v: &str, mask: &str, dh: usize) -> String {
    let kt = g.transpose(k, &[0, 1, 3, 2]);
    attend(g, q, &kt, v, Mask::Additive(mask), score_scale(dh))
}

/// [`sdpa`] with the keys already transposed (`kt` `[R, H, dh, T]`); the scores times `scale` unless the query
/// already carries it.
pub(super) fn attend(
    g: &mut GraphBuilder,
    q: &str,
    kt: &str,
    v: &str,
    mask: Mask,
    scale: Option<f32>,
) -> String {
    let scores = g.binary("MatMul", q, kt);
    let scores = match scale {
        Some(c) => {
            let c = g.scalar(c);
            g.binary("Mul", &scores, &c)
        }
        None => scores,
    };
    let scores = match mask {
        Mask::Additive(m) => g.binary("Add", &scores, m),
        Mask::Keep(keep) => {
            let ninf = g.scalar(f32::NEG_INFINITY);
            g.op("Where", &[keep, &scores, &ninf], vec![])
        }
    };
    let p = g.op("Softmax", &[&scores], vec![("axis", Attr::Int(-1))]);
    g.binary("MatMul", &p, v)
}
