//! The long causal passes (encode, prefill, recompute, detokenize) in spans of positions.
//!
//! A pass over S positions keeps its residual stream as spans of a profile's `span` positions (`[R, C, D]` each;
//! [`DEFAULT_SPAN`]) and runs every row-wise part span by span (the embedding, each block's norms, q/k/v and output
//! projections and MLP, the final norm and the dependency keys/values): only the attention needs every position
//! at once, and it reads the layer's keys and values `[R, H, S, Dh]`, which the spans' projections are
//! concatenated into. ONNX Runtime then holds one span's activations at a time instead of the whole pass's
//! (Kronos-mini's 2,048-position runs: 63–66 MiB of activations in one piece, 39–43 in spans of 512).
//! Every row is computed by the same kernels over the same sums as in one piece: a matmul's row depends only on
//! that row and the weight, a norm or softmax on its own row; the attention itself is unchanged (each query block
//! against all the keys, [`super::attention::causal_sdpa_at`]).
//!
//! The masks and rotary rows a pass reads are computed at each run from an unfolded zero ([`unfolded_zero`]):
//! folded into constants at load they were 6 MB a 2,048-position graph, held by every loaded session.

use super::attention::{causal_sdpa_at, key_positions, QUERY_BLOCK};
use super::{
    apply_rope, ffn, folded_scale, fused_linear, linear, merge_heads, rms_norm, rope_tables, split_heads,
};
use super::{Ctx, Part};
use crate::error::Result;
use crate::graph::builder::{Attr, GraphBuilder};
use crate::signature::{DType, TensorSig};

/// Positions of one span of a long causal pass unless a profile sets its own (`family.span`, a multiple of
/// [`QUERY_BLOCK`]: a span's queries are whole blocks, but the last). Shorter spans hold less during a run and add
/// nodes, whose state every loaded session keeps (`totoc bench --rss-probe`, MB above ONNX Runtime): Kronos-small's
/// 392+120 greedy call peaked at 191 with spans of 256, 198 with 512 (one span) and 191 with 128; Kronos-mini's
/// 2,000+48 at 130 with 512, 134 with 256, 151 with 128, 138 with 1,024 and 166 in one piece, so
/// `configs/kronos-mini.yaml` sets 512. The exactness fixtures' profiles set shorter spans, so that their passes
/// (up to 160 positions) run in several.
pub const DEFAULT_SPAN: usize = 4 * QUERY_BLOCK;

/// An i64 zero `[1]` that ONNX Runtime cannot fold at load: `x₀ < x₀` (false for every value, NaN included) of
/// the graph input `input`'s first element, cast. Index constants offset by it make their masks and table rows
/// per-run values instead of folded constants each loaded session keeps.
pub(super) fn unfolded_zero(g: &mut GraphBuilder, input: &TensorSig) -> String {
    let n = input.shape.iter().product();
    let flat = g.reshape(&input.name, &[n]);
    let (starts, ends) = (g.const_i64(&[1], &[0]), g.const_i64(&[1], &[1]));
    let first = g.op("Slice", &[&flat, &starts, &ends], vec![]);
    let never = g.binary("Less", &first, &first);
    g.cast(&never, DType::I64)
}

/// A causal pass's residual stream: `[R, C, D]` per span, spans from position 0.
pub(super) struct Stream {
    /// (first position, positions) of each span.
    spans: Vec<(usize, usize)>,
    xs: Vec<String>,
}

impl Stream {
    /// (first position, positions) of the spans of `span` positions that cover `tokens`.
    pub(super) fn spans(tokens: usize, span: usize) -> Vec<(usize, usize)> {
        (0..tokens).step_by(span).map(|a| (a, span.min(tokens - a))).collect()
    }

    /// A graph input `[R, S, …]` cut along its positions (axis 1) into `spans`.
    pub(super) fn split_input(g: &mut GraphBuilder, input: &str, spans: &[(usize, usize)]) -> Vec<String> {
        if spans.len() == 1 {
            return vec![input.to_string()];
        }
        let sizes: Vec<usize> = spans.iter().map(|s| s.1).collect();
        g.split(input, 1, &sizes)
    }

    /// `x [R, S, D]` cut into spans of `span` positions.
    pub(super) fn split(g: &mut GraphBuilder, x: &str, tokens: usize, span: usize) -> Self {
        let spans = Self::spans(tokens, span);
        let xs = Self::split_input(g, x, &spans);
        Self { spans, xs }
    }

    /// The stream of the spans' values `xs` (`[R, C, D]` each).
    pub(super) fn of(spans: Vec<(usize, usize)>, xs: Vec<String>) -> Self {
        debug_assert_eq!(spans.len(), xs.len());
        Self { spans, xs }
    }

    /// Each span's value and positions.
    pub(super) fn parts(&self) -> impl Iterator<Item = (&str, usize)> {
        self.xs.iter().map(String::as_str).zip(self.spans.iter().map(|s| s.1))
    }

    /// The spans joined back into `[R, S, D]`.
    pub(super) fn join(&self, g: &mut GraphBuilder) -> String {
        join(g, &self.xs, 1)
    }

    /// The first span, replaced by `f` of it (see `super::after`).
    pub(super) fn map_first(mut self, f: impl FnOnce(&str) -> String) -> Self {
        self.xs[0] = f(&self.xs[0]);
        self
    }

    fn tokens(&self) -> usize {
        self.spans.iter().map(|s| s.1).sum()
    }
}

/// Per-span pieces joined along their positions' `axis` (1 for `[R, C, D]`, 2 for `[R, H, C, Dh]`).
pub(super) fn join(g: &mut GraphBuilder, parts: &[String], axis: i64) -> String {
    match parts {
        [p] => p.clone(),
        ps => {
            let ps: Vec<&str> = ps.iter().map(String::as_str).collect();
            g.op("Concat", &ps, vec![("axis", Attr::Int(axis))])
        }
    }
}

/// Rows `first…first+n−1` of a `[P, Dh]` rotary table, sliced at each run (see [`unfolded_zero`]).
fn table_rows(g: &mut GraphBuilder, t: &str, first: usize, n: usize, zero: &str) -> String {
    let (starts, ends, axes) = (
        g.const_i64(&[1], &[first as i64]),
        g.const_i64(&[1], &[(first + n) as i64]),
        g.const_i64(&[1], &[0]),
    );
    let ends = g.binary("Add", &ends, zero);
    g.op("Slice", &[t, &starts, &ends, &axes], vec![])
}

/// One `TransformerBlock` (m:465-483) over a causal pass's spans: `x += attn(norm1(x))`, `x += ffn(norm2(x))`,
/// every part but the attention span by span. Returns the new stream and the layer's keys (after RoPE) and
/// values `[R, H, S, Dh]` (a prefill's caches).
pub(super) fn causal_block(
    g: &mut GraphBuilder,
    ctx: &Ctx,
    part: Part,
    prefix: &str,
    x: &Stream,
    heads: usize,
) -> Result<(Stream, String, String)> {
    let attn = format!("{prefix}.self_attn");
    let d = part.dir.tensor(&format!("{attn}.q_proj.weight"))?.shape[0];
    let dh = d / heads;
    let r = ctx.bucket.rows;
    let zero = ctx.zero.as_deref().expect("a causal pass's graph has an unfolded zero");
    let p = |s: &str| format!("{attn}.{s}");
    let tables = rope_tables(g, part, &format!("{attn}.rotary.inv_freq"))?;
    let (mut qs, mut ks, mut vs) = (Vec::new(), Vec::new(), Vec::new());
    for (xi, &(first, n)) in x.xs.iter().zip(&x.spans) {
        let h = g.scoped("norm1", |g| rms_norm(g, part, &format!("{prefix}.norm1.weight"), xi))?;
        g.scoped("self_attn", |g| -> Result<()> {
            let qkv = g.scoped("qkv", |g| {
                fused_linear(g, part, &[&p("q_proj"), &p("k_proj"), &p("v_proj")], &h, folded_scale(dh))
            })?;
            let [cos, sin] = tables.clone().map(|t| table_rows(g, &t, first, n, zero));
            let q = split_heads(g, &qkv[0], r, n, heads, dh);
            let k = split_heads(g, &qkv[1], r, n, heads, dh);
            qs.push(g.scoped("rope_q", |g| apply_rope(g, &q, &cos, &sin, dh)));
            ks.push(g.scoped("rope_k", |g| apply_rope(g, &k, &cos, &sin, dh)));
            vs.push(split_heads(g, &qkv[2], r, n, heads, dh));
            Ok(())
        })?;
    }
    let (k, v) = g.scoped("self_attn", |g| (join(g, &ks, 2), join(g, &vs, 2)));
    let kt = g.transpose(&k, &[0, 1, 3, 2]);
    // the layer's key positions once; each query block's mask compares them with its queries'
    let key = key_positions(g, x.tokens(), zero);
    let mut ys = Vec::with_capacity(x.xs.len());
    for ((xi, &(first, n)), q) in x.xs.iter().zip(&x.spans).zip(&qs) {
        let a = g.scoped("self_attn", |g| {
            let o = causal_sdpa_at(g, q, &kt, &v, &key, (first, n), dh);
            let o = merge_heads(g, &o, r, n, d);
            g.scoped("out_proj", |g| linear(g, part, &p("out_proj"), &o))
        })?;
        let x = g.binary("Add", xi, &a);
        let h = g.scoped("norm2", |g| rms_norm(g, part, &format!("{prefix}.norm2.weight"), &x))?;
        let f = g.scoped("ffn", |g| ffn(g, part, &format!("{prefix}.ffn"), &h))?;
        ys.push(g.binary("Add", &x, &f));
    }
    Ok((Stream { spans: x.spans.clone(), xs: ys }, k, v))
}
