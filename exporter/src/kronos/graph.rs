//! The Kronos graphs, one function per model block in forward order, named after the checkpoint paths they read
//! (`embedding`, `time_emb`, `transformer.i`, `norm`, `dep_layer`, `head`; the tokenizer's `embed`, `encoder.i`,
//! `quant_embed`, `post_quant_embed`, `decoder.i`, `head`), with the I/O contract of
//! [`crate::kronos::signature`]. Ports `kronos.py` / `module.py` of kronos-finance 0.1.5 in eval mode (the line
//! references `k:` / `m:` are the model notes', ../shared/docs/kronos-model.md).
//!
//! What the graphs compute as upstream does, op for op where it decides a token:
//! * **RMSNorm** in f32: `x · 1/√(mean(x²) + 1e-5) · weight` (m:257-268).
//! * **Attention** with biases; RoPE rotate-half over the whole head (`[−x₂, x₁]`, `cat(freqs, freqs)`) at the
//!   call's positions, from each layer's *loaded* `inv_freq` (its cos/sin tables are computed at export from it:
//!   `f32(p) · inv_freq` is torch's product exactly, and cos/sin are rounded once from f64); scores `q·kᵀ` times
//!   1/√Dh, then the causal or slot mask, softmax, `·v` (long causal passes in blocks of query rows).
//! * **SwiGLU** without biases: `w2(silu(w1·x) ⊙ w3·x)`.
//! * **Token embedding**: `fusion_proj([emb_s1[s1]·f32(√D) ‖ emb_s2[s2]·f32(√D)])`; the **time embedding** of each
//!   row's own stamp summed `hour + weekday + day + month + minute` (m:562) and added after (k:294-297).
//! * **Dependency layer** (decode_s2): 4 heads whatever the model's, no rotation (its RoPE table has one position:
//!   cos 1, sin 0), the query `emb_s1[s1]` not scaled by √D, keys and values the final-normed states of the whole
//!   window, no causal mask (eval); then `proj_s2(RMSNorm(h_last + attention))`.
//! * **Tokenizer**: encode `embed → encoder blocks → quant_embed` (no final norm), bit j = `z_j > 0`, least
//!   significant first; decode bits → `±f32(1/√(2·bits))` → `post_quant_embed → decoder blocks → head`.
//!
//! Only what a call needs is computed: the s1 head and `h_last` at each row's last real token, the dependency
//! keys/values once per token (kept in a cache like the layers' keys/values), and a decode step attends over the
//! cache with the slots after `write_pos` masked, its new key/value written in place.
//!
//! Weights are stored transposed (`[in, out]`, for `MatMul`), the q/k/v projections of a layer as one `[D, 3D]`
//! matrix and `w1`/`w3` as one `[D, 2F]` (one matmul each: a decode step reads each weight once), under names
//! prefixed `predictor.` / `tokenizer.`.

mod attention;
mod causal;

use crate::bucket::Bucket;
use crate::error::{Error, Result};
use crate::graph::builder::{Attr, GraphBuilder};
use crate::kronos::checkpoint::{time_table, CheckpointDir, KronosCheckpoint};
use crate::kronos::config::{KronosConfig, DEP_HEADS, NORM_EPS, ROW_COLUMNS, TIME_FEATURES};
use crate::kronos::signature::{self as sig, dep_k_cache, dep_v_cache, inputs, outputs, ModelDims};
use crate::signature::{k_cache, v_cache, DType, GraphKind, TensorSig};
use crate::variant::CacheUpdate;
pub use attention::QUERY_BLOCK;
use attention::{folded_scale, sdpa, slot_mask};
pub use causal::DEFAULT_SPAN;
use causal::{causal_block, join, unfolded_zero, Stream};

/// Rows of the rotary tables each part stores once (the most positions any graph of the bundle reads): the
/// predictor's window, the tokenizer's longest encode or detokenize call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Positions {
    pub predictor: usize,
    pub tokenizer: usize,
}

/// The lengths a graph is built for besides its bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lengths {
    /// T: the caches' slots.
    pub window: usize,
    /// Positions a long pass runs its row-wise parts in at a time ([`causal`]).
    pub span: usize,
    /// Rows of the rotary tables.
    pub positions: Positions,
}

/// One of the two checkpoints, and the prefix of its weights' names in the bundle.
#[derive(Clone, Copy)]
struct Part<'a> {
    dir: &'a CheckpointDir,
    ns: &'static str,
    /// Rows of its rotary tables.
    positions: usize,
}

/// Per-graph values the blocks share.
struct Ctx<'a> {
    cfg: &'a KronosConfig,
    bucket: Bucket,
    /// T: the caches' slots.
    window: usize,
    /// A long pass's span ([`causal`]).
    span: usize,
    m: ModelDims,
    cache_update: CacheUpdate,
    predictor: Part<'a>,
    tokenizer: Part<'a>,
    /// A long causal pass's unfolded zero ([`causal::unfolded_zero`]); `None` in the per-step graphs.
    zero: Option<String>,
}

/// Builds the graph of bucket `b` (T = `lengths.window`); `cache_update` is how decode writes its caches.
pub fn kronos_graph(
    g: &mut GraphBuilder,
    ckpt: &KronosCheckpoint,
    b: &Bucket,
    lengths: Lengths,
    cache_update: CacheUpdate,
) -> Result<()> {
    let Lengths { window, span, positions } = lengths;
    let mut ctx = Ctx {
        cfg: &ckpt.config,
        bucket: *b,
        window,
        span,
        m: ModelDims::of(&ckpt.config),
        cache_update,
        predictor: Part { dir: &ckpt.predictor, ns: "predictor", positions: positions.predictor },
        tokenizer: Part { dir: &ckpt.tokenizer, ns: "tokenizer", positions: positions.tokenizer },
        zero: None,
    };
    let fits = match b.kind {
        GraphKind::Encode | GraphKind::Detokenize => b.slots <= positions.tokenizer,
        k if k.per_row() => b.slots == window && window <= positions.predictor,
        _ => b.slots <= window && window <= positions.predictor,
    };
    if b.rows == 0 || b.slots == 0 || !fits {
        return Err(Error::Graph {
            graph: b.stem("kronos"),
            message: format!(
                "bucket {b:?} does not fit the window {window} and the rotary tables ({positions:?})"
            ),
        });
    }
    let ins = inputs(&ctx.m, b, window);
    for t in &ins {
        g.input(t);
    }
    if !b.kind.per_row() {
        ctx.zero = Some(unfolded_zero(g, &ins[0]));
    }
    let outs = outputs(&ctx.m, b, window);
    match b.kind {
        GraphKind::Encode => g.scoped("tokenizer", |g| encode(g, &ctx, &outs))?,
        GraphKind::Detokenize => g.scoped("tokenizer", |g| detokenize(g, &ctx, &outs))?,
        GraphKind::Prefill | GraphKind::Recompute => window_pass(g, &ctx, &outs)?,
        GraphKind::Decode => decode_step(g, &ctx, &outs)?,
        GraphKind::Refine => refine(g, &ctx, &outs)?,
    }
    Ok(())
}

/// Declares every output of `outs` whose value was produced under its own name (the caches).
fn declare_named(g: &mut GraphBuilder, outs: &[TensorSig], from: usize) {
    for o in &outs[from..] {
        g.output(&o.name.clone(), o);
    }
}

// --- weights

/// The transposed `[in, out]` weight of the torch `Linear`s `prefixes` (their outputs concatenated), stored once as
/// `{ns}.{first prefix}[+…].weight_t`, with their concatenated bias if they have one. With `first_scale`, the first
/// Linear's weight and bias are multiplied by it (an exact power of two, see [`folded_scale`]) and stored under
/// `….first_scaled.…`.
fn linear_weights(
    g: &mut GraphBuilder,
    part: Part,
    prefixes: &[&str],
    first_scale: Option<f32>,
) -> Result<(String, Option<String>, usize, usize)> {
    let shapes = prefixes
        .iter()
        .map(|p| Ok(part.dir.tensor(&format!("{p}.weight"))?.shape.to_vec()))
        .collect::<Result<Vec<_>>>()?;
    let inp = shapes[0][1];
    if shapes.iter().any(|s| s[1] != inp) {
        return Err(Error::Graph {
            graph: prefixes.join("+"),
            message: "fused linears read inputs of other widths".into(),
        });
    }
    let out: usize = shapes.iter().map(|s| s[0]).sum();
    let mut key = format!("{}.{}", part.ns, prefixes.join("+"));
    if first_scale.is_some() {
        key.push_str(".first_scaled");
    }
    let scale_of = |k: usize| if k == 0 { first_scale.unwrap_or(1.0) } else { 1.0 };
    let w = g.weight(&format!("{key}.weight_t"), &[inp, out], DType::F32, || {
        let mut t = vec![0f32; inp * out];
        let mut col = 0;
        for (k, p) in prefixes.iter().enumerate() {
            let w = part.dir.values(&format!("{p}.weight"))?;
            let o = w.len() / inp;
            let c = scale_of(k);
            for r in 0..o {
                for i in 0..inp {
                    t[i * out + col + r] = w[r * inp + i] * c;
                }
            }
            col += o;
        }
        Ok(t)
    })?;
    let has_bias = part.dir.names().any(|n| n == format!("{}.bias", prefixes[0]));
    let bias = if has_bias {
        Some(g.weight(&format!("{key}.bias"), &[out], DType::F32, || {
            let mut b = Vec::with_capacity(out);
            for (k, p) in prefixes.iter().enumerate() {
                let c = scale_of(k);
                b.extend(part.dir.values(&format!("{p}.bias"))?.into_iter().map(|v| v * c));
            }
            Ok(b)
        })?)
    } else {
        None
    };
    Ok((w, bias, inp, out))
}

/// `x · Wᵀ (+ b)` for the torch `Linear` `prefix`.
fn linear(g: &mut GraphBuilder, part: Part, prefix: &str, x: &str) -> Result<String> {
    fused_linear(g, part, &[prefix], x, None).map(|mut v| v.remove(0))
}

/// The `Linear`s `prefixes` on the same input as one matmul, split back into their outputs (the first scaled by
/// `first_scale`, see [`linear_weights`]).
fn fused_linear(
    g: &mut GraphBuilder,
    part: Part,
    prefixes: &[&str],
    x: &str,
    first_scale: Option<f32>,
) -> Result<Vec<String>> {
    let (w, b, _, _) = linear_weights(g, part, prefixes, first_scale)?;
    let y = g.op("MatMul", &[x, &w], vec![]);
    let y = match b {
        Some(b) => g.binary("Add", &y, &b),
        None => y,
    };
    if prefixes.len() == 1 {
        return Ok(vec![y]);
    }
    let sizes = prefixes
        .iter()
        .map(|p| Ok(part.dir.tensor(&format!("{p}.weight"))?.shape[0]))
        .collect::<Result<Vec<_>>>()?;
    Ok(g.split(&y, -1, &sizes))
}

/// A stored f32 tensor as a weight of the same shape.
fn table(g: &mut GraphBuilder, part: Part, name: &str) -> Result<String> {
    let shape = part.dir.tensor(name)?.shape.to_vec();
    g.weight(&format!("{}.{name}", part.ns), &shape, DType::F32, || part.dir.values(name))
}

/// The rotary tables `[P, Dh]` of the `inv_freq` buffer `name` (P = the part's positions), computed as torch does
/// from the stored buffer: `freqs = f32(p) · inv_freq` (one f32 product), `cat(freqs, freqs)`, then its cos, and
/// its sin with the first half negated (the sign of rotate-half's `−x₂`, see [`apply_rope`]). Tables of equal
/// buffers are stored once.
fn rope_tables(g: &mut GraphBuilder, part: Part, name: &str) -> Result<[String; 2]> {
    let inv = part.dir.values(name)?;
    let digest = crate::fsutil::sha256_bytes(&inv.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
    let (p, half) = (part.positions, inv.len());
    let freqs = |pos: usize, j: usize| f64::from(pos as f32 * inv[j % half]);
    let mut out = [String::new(), String::new()];
    for (k, what) in ["cos", "signed_sin"].into_iter().enumerate() {
        let key = format!("{}.rotary.{}.p{p}.{what}", part.ns, &digest[..16]);
        out[k] = g.weight(&key, &[p, 2 * half], DType::F32, || {
            Ok((0..p)
                .flat_map(|pos| {
                    (0..2 * half).map(move |j| match (k, j < half) {
                        (0, _) => freqs(pos, j).cos() as f32,
                        (_, true) => -(freqs(pos, j).sin() as f32),
                        (_, false) => freqs(pos, j).sin() as f32,
                    })
                })
                .collect())
        })?;
    }
    Ok(out)
}

// --- shared blocks

/// `RMSNorm` (m:257-268): `x / √(mean(x², −1) + 1e-5) · weight`, in f32, written as the pattern ONNX Runtime
/// fuses into one `SimplifiedLayerNormalization` (`Pow` 2, `ReduceMean`, `Add`, `Sqrt`, `Div`, `Mul`; torch
/// multiplies by `rsqrt` instead of dividing: the two differ by an ulp at most).
fn rms_norm(g: &mut GraphBuilder, part: Part, weight: &str, x: &str) -> Result<String> {
    let w = table(g, part, weight)?;
    let two = g.scalar(2.0);
    let sq = g.binary("Pow", x, &two);
    let axes = g.const_i64(&[1], &[-1]);
    let mean = g.op("ReduceMean", &[&sq, &axes], vec![("keepdims", Attr::Int(1))]);
    let eps = g.scalar(NORM_EPS);
    let var = g.binary("Add", &mean, &eps);
    let root = g.op("Sqrt", &[&var], vec![]);
    let y = g.binary("Div", x, &root);
    Ok(g.binary("Mul", &y, &w))
}

/// `[R, S, heads·dh]` → `[R, heads, S, dh]`.
fn split_heads(g: &mut GraphBuilder, y: &str, rows: usize, tokens: usize, heads: usize, dh: usize) -> String {
    let y = g.reshape(y, &[rows, tokens, heads, dh]);
    g.transpose(&y, &[0, 2, 1, 3])
}

/// `[R, heads, S, dh]` → `[R, S, heads·dh]`.
fn merge_heads(g: &mut GraphBuilder, y: &str, rows: usize, tokens: usize, d: usize) -> String {
    let y = g.transpose(y, &[0, 2, 1, 3]);
    g.reshape(&y, &[rows, tokens, d])
}

/// RoPE rotate-half (m:284-312): `x·cos + [−x₂, x₁]·sin`, as `x·cos + [x₂, x₁]·[−sin₁, sin₂]` (the halves
/// swapped by a split and a concat, which copy; `(−a)·b` and `a·(−b)` are the same float); `cos` and the signed
/// sin broadcast over `x [R, H, S, Dh]`.
fn apply_rope(g: &mut GraphBuilder, x: &str, cos: &str, signed_sin: &str, dh: usize) -> String {
    let halves = g.split(x, -1, &[dh / 2, dh / 2]);
    let swapped = g.op("Concat", &[&halves[1], &halves[0]], vec![("axis", Attr::Int(-1))]);
    let a = g.binary("Mul", x, cos);
    let b = g.binary("Mul", &swapped, signed_sin);
    g.binary("Add", &a, &b)
}

/// Writes `update [R, heads, 1, dh]` into `cache [R, heads, T, dh]` at slot `write_pos[r]`, producing the graph
/// output `out` (bind it to the input to update in place): `TensorScatter` (opset 24) or `ScatterND`.
fn cache_write(
    g: &mut GraphBuilder,
    cache: &str,
    update: &str,
    out: &str,
    heads: usize,
    ctx: &Ctx,
) -> String {
    let r = ctx.bucket.rows;
    match ctx.cache_update {
        CacheUpdate::TensorScatter => g.op_to(
            "TensorScatter",
            &[cache, update, sig::WRITE_POS],
            out,
            vec![("axis", Attr::Int(2)), ("mode", Attr::Str("linear"))],
        ),
        CacheUpdate::ScatterNd => {
            let n = r * heads;
            let rows =
                g.const_i64(&[r, heads, 1, 1], &(0..n).map(|i| (i / heads) as i64).collect::<Vec<_>>());
            let hs = g.const_i64(&[r, heads, 1, 1], &(0..n).map(|i| (i % heads) as i64).collect::<Vec<_>>());
            let pos = g.reshape(sig::WRITE_POS, &[r, 1, 1, 1]);
            let zero = g.const_i64(&[r, heads, 1, 1], &vec![0; n]);
            let slots = g.binary("Add", &pos, &zero);
            let idx = g.op("Concat", &[&rows, &hs, &slots], vec![("axis", Attr::Int(-1))]);
            g.op_to("ScatterND", &[cache, &idx, update], out, vec![])
        }
    }
}

/// `MultiHeadAttentionWithRoPE` of block `prefix` in a decode step: each row's token `x [R, D]` at its
/// `write_pos`, its key and value written into layer `layer`'s caches, attention over the slots up to it; returns
/// `[R, D]`. (The long causal passes: [`causal::causal_block`].)
fn step_attention(
    g: &mut GraphBuilder,
    part: Part,
    prefix: &str,
    x: &str,
    heads: usize,
    layer: usize,
    ctx: &Ctx,
) -> Result<String> {
    let rope = rope_at_write_pos(g, part, prefix)?;
    let d = part.dir.tensor(&format!("{prefix}.q_proj.weight"))?.shape[0];
    let dh = d / heads;
    let r = ctx.bucket.rows;
    let p = |s: &str| format!("{prefix}.{s}");
    let qkv = g.scoped("qkv", |g| {
        fused_linear(g, part, &[&p("q_proj"), &p("k_proj"), &p("v_proj")], x, folded_scale(dh))
    })?;
    // one token per row is `[R, D]`: its heads are a reshape, no transpose
    let q = g.reshape(&qkv[0], &[r, heads, 1, dh]);
    let k = g.reshape(&qkv[1], &[r, heads, 1, dh]);
    let v = g.reshape(&qkv[2], &[r, heads, 1, dh]);
    let q = g.scoped("rope_q", |g| apply_rope(g, &q, &rope[0], &rope[1], dh));
    let k = g.scoped("rope_k", |g| apply_rope(g, &k, &rope[0], &rope[1], dh));
    let k_all = g.scoped("k_update", |g| {
        cache_write(g, &k_cache(layer, false), &k, &k_cache(layer, true), heads, ctx)
    });
    let v_all = g.scoped("v_update", |g| {
        cache_write(g, &v_cache(layer, false), &v, &v_cache(layer, true), heads, ctx)
    });
    let mask = slot_mask(g, sig::WRITE_POS, ctx.window, true);
    let o = sdpa(g, &q, &k_all, &v_all, &mask, dh);
    let o = g.reshape(&o, &[r, d]);
    g.scoped("out_proj", |g| linear(g, part, &p("out_proj"), &o))
}

/// `FeedForward` (m:271-281): `w2(silu(w1·x) ⊙ w3·x)`, `w1` and `w3` as one matmul.
fn ffn(g: &mut GraphBuilder, part: Part, prefix: &str, x: &str) -> Result<String> {
    let (w1, w3, w2) = (format!("{prefix}.w1"), format!("{prefix}.w3"), format!("{prefix}.w2"));
    let ab = g.scoped("w1+w3", |g| fused_linear(g, part, &[&w1, &w3], x, None))?;
    let s = g.op("Sigmoid", &[&ab[0]], vec![]);
    let silu = g.binary("Mul", &ab[0], &s);
    let h = g.binary("Mul", &silu, &ab[1]);
    g.scoped("w2", |g| linear(g, part, &w2, &h))
}

/// One `TransformerBlock` (m:465-483) of a decode step: `x += attn(norm1(x))`, `x += ffn(norm2(x))` on `[R, D]`.
fn step_block(
    g: &mut GraphBuilder,
    part: Part,
    prefix: &str,
    x: &str,
    heads: usize,
    layer: usize,
    ctx: &Ctx,
) -> Result<String> {
    let h = g.scoped("norm1", |g| rms_norm(g, part, &format!("{prefix}.norm1.weight"), x))?;
    let a = g.scoped("self_attn", |g| {
        step_attention(g, part, &format!("{prefix}.self_attn"), &h, heads, layer, ctx)
    })?;
    let x = g.binary("Add", x, &a);
    let h = g.scoped("norm2", |g| rms_norm(g, part, &format!("{prefix}.norm2.weight"), &x))?;
    let f = g.scoped("ffn", |g| ffn(g, part, &format!("{prefix}.ffn"), &h))?;
    Ok(g.binary("Add", &x, &f))
}

/// The cos/sin a decode step's queries and keys (attention `prefix`) are rotated by: each row's `write_pos`
/// (`[R, 1, 1, Dh]`).
fn rope_at_write_pos(g: &mut GraphBuilder, part: Part, prefix: &str) -> Result<[String; 2]> {
    let tables = rope_tables(g, part, &format!("{prefix}.rotary.inv_freq"))?;
    Ok(tables.map(|t| {
        let rows = g.op("Gather", &[&t, sig::WRITE_POS], vec![("axis", Attr::Int(0))]);
        g.unsqueeze(&rows, &[1, 2])
    }))
}

// --- the predictor

/// The graph's token inputs: s1, s2 `[R, S]` and stamps `[R, S, 5]` (or a span of them).
#[derive(Clone, Copy)]
struct TokenInputs<'a> {
    s1: &'a str,
    s2: &'a str,
    stamps: &'a str,
}

impl TokenInputs<'static> {
    const GRAPH: Self = TokenInputs { s1: sig::S1, s2: sig::S2, stamps: sig::STAMPS };
}

/// `HierarchicalEmbedding` (m:400-443) plus `TemporalEmbedding` (m:536-562): `[R, S]` tokens and `[R, S, 5]`
/// stamps (`tokens` S) → `[R, S, D]`.
fn embed_tokens(g: &mut GraphBuilder, ctx: &Ctx, inputs: TokenInputs, tokens: usize) -> Result<String> {
    let part = ctx.predictor;
    let d = ctx.m.d_model;
    let root = g.scalar(((d as f64).sqrt()) as f32);
    let mut halves = Vec::new();
    for (input, name) in [(inputs.s1, "embedding.emb_s1.weight"), (inputs.s2, "embedding.emb_s2.weight")] {
        let t = table(g, part, name)?;
        let e = g.op("Gather", &[&t, input], vec![("axis", Attr::Int(0))]);
        halves.push(g.binary("Mul", &e, &root));
    }
    let cat = g.op("Concat", &[&halves[0], &halves[1]], vec![("axis", Attr::Int(-1))]);
    let x = g.scoped("embedding.fusion_proj", |g| linear(g, part, "embedding.fusion_proj", &cat))?;
    let t = g.scoped("time_emb", |g| time_embedding(g, ctx, inputs.stamps, tokens))?;
    Ok(g.binary("Add", &x, &t))
}

/// The time features' tables summed `hour + weekday + day + month + minute` (m:562).
fn time_embedding(g: &mut GraphBuilder, ctx: &Ctx, stamps: &str, tokens: usize) -> Result<String> {
    let part = ctx.predictor;
    let cfg = &ctx.cfg.predictor;
    let cols = g.split(stamps, -1, &[1; TIME_FEATURES.len()]);
    let mut looked = Vec::new();
    for ((feature, _), col) in TIME_FEATURES.iter().zip(&cols) {
        let idx = g.reshape(col, &[ctx.bucket.rows, tokens]);
        let t = table(g, part, &time_table(cfg, feature))?;
        looked.push(g.op("Gather", &[&t, &idx], vec![("axis", Attr::Int(0))]));
    }
    // stamp columns: minute 0, hour 1, weekday 2, day 3, month 4
    let mut sum = g.binary("Add", &looked[1], &looked[2]);
    for i in [3, 4, 0] {
        sum = g.binary("Add", &sum, &looked[i]);
    }
    Ok(sum)
}

/// The dependency layer's keys and values of the final-normed states `h [R, S, D]` (`tokens` S; `None`: a step's
/// `[R, D]`):
/// `[R, 4, S, D/4]` each, no rotation (its RoPE runs at q_len 1: cos 1, sin 0 for every key).
fn dep_keys_values(
    g: &mut GraphBuilder,
    ctx: &Ctx,
    h: &str,
    tokens: Option<usize>,
) -> Result<(String, String)> {
    let part = ctx.predictor;
    let kv = g.scoped("dep_layer.cross_attn.kv", |g| {
        fused_linear(g, part, &["dep_layer.cross_attn.k_proj", "dep_layer.cross_attn.v_proj"], h, None)
    })?;
    let (r, dh) = (ctx.bucket.rows, ctx.m.dep_head_dim);
    let mut heads = |y: &str| match tokens {
        Some(s) => split_heads(g, y, r, s, DEP_HEADS, dh),
        None => g.reshape(y, &[r, DEP_HEADS, 1, dh]),
    };
    Ok((heads(&kv[0]), heads(&kv[1])))
}

/// `head.proj_s1` on `h_last [R, D]` → `[R, V]`.
fn s1_head(g: &mut GraphBuilder, ctx: &Ctx, h_last: &str) -> Result<String> {
    g.scoped("head.proj_s1", |g| linear(g, ctx.predictor, "head.proj_s1", h_last))
}

/// Pads `[R, heads, S, dh]` with zeros to T slots.
fn pad_slots(g: &mut GraphBuilder, x: &str, s: usize, t: usize, out: &str) -> String {
    let pads = g.const_i64(&[8], &[0, 0, 0, 0, 0, 0, (t - s) as i64, 0]);
    g.op_to("Pad", &[x, &pads], out, vec![])
}

/// `x` itself, computed only once the nodes writing `outputs` have run. ONNX Runtime orders a graph's nodes by
/// a depth-first walk back from its last node, so a layer's cache outputs, which nothing inside the graph reads,
/// would run after the whole pass and keep every layer's keys and values (`[R, H, S, Dh]` each) alive until then:
/// 16 MB at Kronos-small's 512 slots, a third of a prefill's activations. Reading one element of each output
/// into the next layer's input makes the walk write them first and free them layer by layer. `Where` with a
/// constant `false` condition passes `x` through bit for bit (`x + 0·first` would not: a −0 becomes +0, and an
/// infinite key makes it NaN).
fn after(g: &mut GraphBuilder, x: &str, outputs: &[&str]) -> String {
    let (one, zero) = (g.scalar(1.0), g.scalar(0.0));
    // folded to a constant `false` when the graph loads
    let never = g.binary("Less", &one, &zero);
    let mut x = x.to_string();
    for out in outputs {
        // the outputs are `[R, H, T, Dh]`: their first element
        let (starts, ends) = (g.const_i64(&[4], &[0; 4]), g.const_i64(&[4], &[1; 4]));
        let first = g.op("Slice", &[out, &starts, &ends], vec![]);
        let first = g.reshape(&first, &[1]);
        x = g.op("Where", &[&never, &first, &x], vec![]);
    }
    x
}

/// Prefill and recompute: the window's tokens at positions 0…S−1 through every layer; outputs at each row's
/// `last` slot, the dependency keys/values of every slot, and (prefill) each layer's keys/values.
fn window_pass(g: &mut GraphBuilder, ctx: &Ctx, outs: &[TensorSig]) -> Result<()> {
    let (r, s, t, d) = (ctx.bucket.rows, ctx.bucket.slots, ctx.window, ctx.m.d_model);
    let part = ctx.predictor;
    let keep_caches = ctx.bucket.kind == GraphKind::Prefill;
    // the embedding, the layers and the final norm with the dependency keys/values span by span
    let spans = Stream::spans(s, ctx.span);
    let [s1, s2, stamps] = [sig::S1, sig::S2, sig::STAMPS].map(|input| Stream::split_input(g, input, &spans));
    let mut xs = Vec::with_capacity(spans.len());
    for (k, &(_, n)) in spans.iter().enumerate() {
        let inputs = TokenInputs { s1: &s1[k], s2: &s2[k], stamps: &stamps[k] };
        xs.push(embed_tokens(g, ctx, inputs, n)?);
    }
    let mut x = Stream::of(spans, xs);
    for i in 0..ctx.m.layers {
        let prefix = format!("transformer.{i}");
        let (y, k, v) = g.scoped(prefix.clone(), |g| causal_block(g, ctx, part, &prefix, &x, ctx.m.heads))?;
        x = if keep_caches {
            let kc = pad_slots(g, &k, s, t, &k_cache(i, true));
            let vc = pad_slots(g, &v, s, t, &v_cache(i, true));
            y.map_first(|y0| after(g, y0, &[&kc, &vc]))
        } else {
            y
        };
    }
    let (mut hs, mut dks, mut dvs) = (Vec::new(), Vec::new(), Vec::new());
    for (xi, n) in x.parts() {
        let h = g.scoped("norm", |g| rms_norm(g, part, "norm.weight", xi))?;
        let (dk, dv) = dep_keys_values(g, ctx, &h, Some(n))?;
        hs.push(h);
        dks.push(dk);
        dvs.push(dv);
    }
    let h = join(g, &hs, 1);
    let (dk, dv) = (join(g, &dks, 2), join(g, &dvs, 2));
    pad_slots(g, &dk, s, t, &dep_k_cache(true));
    pad_slots(g, &dv, s, t, &dep_v_cache(true));
    // h at each row's last real token: a flat gather keeps it exact
    let flat = g.reshape(&h, &[r * s, d]);
    let base = g.const_i64(&[r], &(0..r).map(|i| (i * s) as i64).collect::<Vec<_>>());
    let idx = g.binary("Add", &base, sig::LAST);
    let h_last = g.op("Gather", &[&flat, &idx], vec![("axis", Attr::Int(0))]);
    let logits = s1_head(g, ctx, &h_last)?;
    g.output(&logits, &outs[0]);
    g.output(&h_last, &outs[1]);
    declare_named(g, outs, 2);
    Ok(())
}

/// One decode step: each row's token at `write_pos` against the caches, which it updates.
fn decode_step(g: &mut GraphBuilder, ctx: &Ctx, outs: &[TensorSig]) -> Result<()> {
    let (r, d) = (ctx.bucket.rows, ctx.m.d_model);
    let part = ctx.predictor;
    let x = embed_tokens(g, ctx, TokenInputs::GRAPH, 1)?;
    // one token per row: the step runs on `[R, D]`
    let mut x = g.reshape(&x, &[r, d]);
    for i in 0..ctx.m.layers {
        let prefix = format!("transformer.{i}");
        x = g.scoped(prefix.clone(), |g| step_block(g, part, &prefix, &x, ctx.m.heads, i, ctx))?;
    }
    let h = g.scoped("norm", |g| rms_norm(g, part, "norm.weight", &x))?;
    let (dk, dv) = dep_keys_values(g, ctx, &h, None)?;
    g.scoped("dep_k_update", |g| {
        cache_write(g, &dep_k_cache(false), &dk, &dep_k_cache(true), DEP_HEADS, ctx)
    });
    g.scoped("dep_v_update", |g| {
        cache_write(g, &dep_v_cache(false), &dv, &dep_v_cache(true), DEP_HEADS, ctx)
    });
    let logits = s1_head(g, ctx, &h)?;
    g.output(&logits, &outs[0]);
    g.output(&h, &outs[1]);
    declare_named(g, outs, 2);
    Ok(())
}

/// `decode_s2` (k:308-326): the dependency layer's one query `emb_s1[s1]` (not ×√D) over the valid slots of its
/// cache, `RMSNorm(h_last + attention)`, `head.proj_s2`.
fn refine(g: &mut GraphBuilder, ctx: &Ctx, outs: &[TensorSig]) -> Result<()> {
    let (r, d, dh) = (ctx.bucket.rows, ctx.m.d_model, ctx.m.dep_head_dim);
    let part = ctx.predictor;
    let emb = table(g, part, "embedding.emb_s1.weight")?;
    let q_in = g.op("Gather", &[&emb, sig::S1], vec![("axis", Attr::Int(0))]);
    #[cfg(feature = "planted-defects")]
    let q_in = if planted::dep_query_scaled() {
        let root = g.scalar(((d as f64).sqrt()) as f32);
        g.binary("Mul", &q_in, &root)
    } else {
        q_in
    };
    let q = g.scoped("dep_layer.cross_attn.q_proj", |g| {
        let q = fused_linear(g, part, &["dep_layer.cross_attn.q_proj"], &q_in, folded_scale(dh))?;
        Ok(q.into_iter().next().expect("one linear"))
    })?;
    let q = g.reshape(&q, &[r, DEP_HEADS, 1, dh]);
    let mask = slot_mask(g, sig::LENGTH, ctx.window, false);
    let o = sdpa(g, &q, &dep_k_cache(false), &dep_v_cache(false), &mask, dh);
    let o = g.reshape(&o, &[r, d]);
    let o =
        g.scoped("dep_layer.cross_attn.out_proj", |g| linear(g, part, "dep_layer.cross_attn.out_proj", &o))?;
    let x = g.binary("Add", sig::H_LAST, &o);
    let x = g.scoped("dep_layer.norm", |g| rms_norm(g, part, "dep_layer.norm.weight", &x))?;
    let logits = g.scoped("head.proj_s2", |g| linear(g, part, "head.proj_s2", &x))?;
    g.output(&logits, &outs[0]);
    Ok(())
}

// --- the tokenizer

/// The tokenizer's blocks `{stack}.0…n−1` over `[R, S, D]`, causal at positions 0…S−1.
fn tokenizer_blocks(g: &mut GraphBuilder, ctx: &Ctx, stack: &str, n: usize, x: String) -> Result<String> {
    let part = ctx.tokenizer;
    let heads = ctx.cfg.tokenizer.n_heads;
    let mut x = Stream::split(g, &x, ctx.bucket.slots, ctx.span);
    for i in 0..n {
        let prefix = format!("{stack}.{i}");
        x = g.scoped(prefix.clone(), |g| causal_block(g, ctx, part, &prefix, &x, heads))?.0;
    }
    Ok(x.join(g))
}

/// `KronosTokenizer.encode(half=True)` (k:140-157): `[R, S, 6]` → s1, s2 `[R, S]` and z `[R, S, 2·bits]`.
fn encode(g: &mut GraphBuilder, ctx: &Ctx, outs: &[TensorSig]) -> Result<()> {
    let part = ctx.tokenizer;
    let bits = ctx.m.bits;
    let x = g.scoped("embed", |g| linear(g, part, "embed", sig::VALUES))?;
    let x = tokenizer_blocks(g, ctx, "encoder", ctx.cfg.tokenizer.encoder_blocks(), x)?;
    let z = g.scoped("quant_embed", |g| linear(g, part, "quant_embed", &x))?;
    // bit j = [z_j > 0] (normalising and scaling never change a sign; z = 0 or NaN gives 0), LSB first per half
    let zero = g.scalar(0.0);
    let on = g.binary("Greater", &z, &zero);
    let on = g.cast(&on, DType::I64);
    let weights: Vec<i64> = (0..2 * bits).map(|j| 1i64 << (j % bits)).collect();
    let weights = g.const_i64(&[2 * bits], &weights);
    let weighted = g.binary("Mul", &on, &weights);
    let halves = g.split(&weighted, -1, &[bits, bits]);
    let axes = g.const_i64(&[1], &[-1]);
    let s1 = g.op("ReduceSum", &[&halves[0], &axes], vec![("keepdims", Attr::Int(0))]);
    let s2 = g.op("ReduceSum", &[&halves[1], &axes], vec![("keepdims", Attr::Int(0))]);
    g.output(&s1, &outs[0]);
    g.output(&s2, &outs[1]);
    g.output(&z, &outs[2]);
    Ok(())
}

/// `KronosTokenizer.decode(half=True)` (k:159-175): s1, s2 `[R, S]` → `[R, S, 6]`.
fn decode_tokens(g: &mut GraphBuilder, ctx: &Ctx) -> Result<String> {
    let bits = ctx.m.bits;
    // bit j of a token: ⌊t/2^j⌋ − 2·⌊t/2^(j+1)⌋ (integer division of non-negative ids)
    let lo = g.const_i64(&[bits], &(0..bits).map(|j| 1i64 << j).collect::<Vec<_>>());
    let hi = g.const_i64(&[bits], &(0..bits).map(|j| 1i64 << (j + 1)).collect::<Vec<_>>());
    let two = g.const_i64(&[], &[2]);
    let mut halves = Vec::new();
    for input in [sig::S1, sig::S2] {
        let t = g.unsqueeze(input, &[2]);
        let a = g.binary("Div", &t, &lo);
        let b = g.binary("Div", &t, &hi);
        let b = g.binary("Mul", &b, &two);
        halves.push(g.binary("Sub", &a, &b));
    }
    let bits_all = g.op("Concat", &[&halves[0], &halves[1]], vec![("axis", Attr::Int(-1))]);
    let one = g.const_i64(&[], &[1]);
    let on = g.binary("Equal", &bits_all, &one);
    // ±1 × f32(1/√(2·bits)) (k:135-137), exactly the values torch computes
    let c = (1.0 / ((2 * bits) as f64).sqrt()) as f32;
    let (pos, neg) = (g.scalar(c), g.scalar(-c));
    let q = g.op("Where", &[&on, &pos, &neg], vec![]);
    let part = ctx.tokenizer;
    let x = g.scoped("post_quant_embed", |g| linear(g, part, "post_quant_embed", &q))?;
    let x = tokenizer_blocks(g, ctx, "decoder", ctx.cfg.tokenizer.decoder_blocks(), x)?;
    g.scoped("head", |g| linear(g, part, "head", &x))
}

fn detokenize(g: &mut GraphBuilder, ctx: &Ctx, outs: &[TensorSig]) -> Result<()> {
    let y = decode_tokens(g, ctx)?;
    debug_assert_eq!(outs[0].shape[2], ROW_COLUMNS);
    g.output(&y, &outs[0]);
    Ok(())
}

#[cfg(test)]
mod tests;

/// Planted defects of the engine's equivalence tests: switches that break one thing upstream does in a graph, so
/// the tests can show they would catch it. Only in builds with the test-only `planted-defects` feature (the
/// engines crate's tests turn it on); per thread, so only the test that plants one exports with it.
#[cfg(feature = "planted-defects")]
pub mod planted {
    use std::cell::Cell;

    thread_local! {
        static DEP_QUERY_SCALED: Cell<bool> = const { Cell::new(false) };
    }

    /// Whether the refine graph scales the dependency layer's query `emb_s1[s1]` by √D (as the token embedding
    /// does; upstream's decode_s2 does not).
    pub fn dep_query_scaled() -> bool {
        DEP_QUERY_SCALED.with(Cell::get)
    }

    /// Plants (or clears) the scaled dependency query on this thread.
    pub fn scale_dep_query(on: bool) {
        DEP_QUERY_SCALED.with(|c| c.set(on));
    }
}
