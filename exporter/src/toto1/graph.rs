//! The Toto 1.0 forward pass as static ONNX graphs, one function per model block in forward order.
//!
//! Ports `toto/model/{embedding,transformer,attention,rope,util,feed_forward,distribution}.py` (toto-ts 0.2.0)
//! with the decode state made explicit (see [`crate::signature`] for the I/O contract). Shapes in the docs use
//! N = graph rows (one variate of one series, or of one sample path, each), S = patch slots of this call (context
//! slots at prefill, 1 at decode), D = embed dim, H = heads, Dh = head dim, P = patch size, K = mixture
//! components, T = KV cache slots. toto-ts keeps series and variates as separate axes `[B, V, …]`; here they are
//! one row axis, and the space-wise layers attend across rows of equal `group_id` instead of across the V axis —
//! the same attention, with the grouping given by the host.
//!
//! Every block is written once for both precisions: each computes in the float type [`FloatTypes`] gives its
//! part of the model (fp32 everywhere in an fp32 graph; fp16 with the fp32 regions of
//! [`crate::graph::precision`] in an fp16 graph), entering and leaving a region through explicit casts.

use super::checkpoint::Checkpoint;
use super::config::LayerKind;
use super::signature::{self, GraphDims};
use crate::error::Result;
use crate::graph::builder::{Attr, GraphBuilder};
use crate::graph::precision::{FloatTypes, Fp16Plan, Int8Kernel, Int8Plan};
use crate::signature::{DType, GraphKind, Precision};
use crate::variant::CacheUpdate;

/// RMSNorm epsilon, hard-coded in `toto/model/util.py`.
const RMS_EPS: f32 = 1e-8;
/// `torch.finfo(float32).eps`, the floor of the Student-T df/scale softplus (`distribution.py`).
const F32_EPS: f32 = f32::EPSILON;

/// The set totoc's int8 Toto 1.0 graphs use: the attention's matmuls (`qkv`, `out_proj`) per row through
/// `MatMulInteger`, the MLP's (`fc1`, `fc2`) in 16-value blocks through `MatMulNBits` (`fc1:blocks,fc2:blocks`).
/// Chosen by the ablation on the trained toto1-small (docs/precision.md, `engines/tests/int8.rs`
/// `toto1_int8_role_ablation`): every matmul per row misses the goal (1.80×), and so does every set with an MLP
/// role per row (each alone: 1.76×, 1.47×), because the MLP's activations have outlier channels that coarsen a
/// whole row's scale; in blocks an outlier coarsens only its own 16 values, and the MLP in blocks with the
/// attention per row meets it (0.75×; the attention alone per row: 0.50×). Not 2.0's rule (`out_proj` fp32
/// misses on 1.0 at 1.78×), and 2.0 keeps its own. On the base size this holds every matmul weight in int8
/// (docs/precision.md, "What int8 keeps").
pub const INT8_DEFAULT: Int8Plan = Int8Plan {
    qkv: Some(Int8Kernel::Rows),
    out_proj: Some(Int8Kernel::Rows),
    fc1: Some(Int8Kernel::Blocks),
    fc2: Some(Int8Kernel::Blocks),
};

/// What kind of graph to build besides its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphOptions {
    pub precision: Precision,
    /// The fp32 regions of an fp16 graph (ignored for fp32).
    pub plan: Fp16Plan,
    /// The matmul roles of an int8 graph and the kernel each runs through (ignored for fp32 and fp16; export
    /// uses [`INT8_DEFAULT`] unless `--int8-roles` says otherwise).
    pub int8: Int8Plan,
    pub cache_update: CacheUpdate,
    /// Build the shape-polymorphic variant (rows and slots symbolic, the time mask an input; see
    /// [`dynamic_graph`]) instead of one bucket's static graph.
    pub symbolic: bool,
}

impl GraphOptions {
    /// The graph's input and output signature types.
    pub fn io(&self) -> crate::signature::IoTypes {
        FloatTypes::new(self.precision, &self.plan).io()
    }
}

/// Per-call values shared by all layers.
struct Ctx {
    kind: GraphKind,
    d: GraphDims,
    /// Rows N of this graph.
    n: usize,
    /// Patch slots processed by this call.
    s: usize,
    embed: usize,
    mlp: usize,
    /// Float type of each part of the model.
    ft: FloatTypes,
    /// Rotary tables as `[N, 1, S, Dh]`: cos, sin, query scale, key scale.
    rope: [String; 4],
    /// Additive time-wise mask: `[S, S]` causal at prefill, `[N, 1, 1, T]` key mask at decode.
    time_mask: String,
    /// Additive space-wise mask `[N, N]` from the row group ids.
    space_mask: String,
    cache_update: CacheUpdate,
    /// Rows and slots are symbolic: reshapes copy those dims (`0`) instead of naming them.
    symbolic: bool,
    /// The transformer matmul roles that read int8 weights ([`dense`]; none outside int8 graphs).
    int8: Int8Plan,
}

impl Ctx {
    /// `x` reshaped to `dims`; in a shape-polymorphic graph the first `keep` dims (rows/slots, equal in `x` and
    /// the result) are copied from `x` (`0`) rather than spelled out.
    fn reshape(&self, g: &mut GraphBuilder, x: &str, dims: &[usize], keep: usize) -> String {
        if !self.symbolic {
            return g.reshape(x, dims);
        }
        let v: Vec<i64> =
            dims.iter().enumerate().map(|(i, &d)| if i < keep { 0 } else { d as i64 }).collect();
        let shape = g.const_i64(&[v.len()], &v);
        g.op("Reshape", &[x, &shape], vec![])
    }
}

/// Builds the graph of one bucket (prefill or decode, `d.rows` rows, `d.slots` slots).
pub fn toto_graph(g: &mut GraphBuilder, ckpt: &Checkpoint, d: &GraphDims, opts: &GraphOptions) -> Result<()> {
    let cfg = &ckpt.config;
    let kind = d.kind;
    signature::check_kind(kind)?;
    let (n, s) = (d.rows, d.step_slots());
    let ft = FloatTypes::new(opts.precision, &opts.plan);
    let ins = signature::inputs(d, ft.io());
    let outs = signature::outputs(d, ft.io());
    let dynamic = opts.symbolic.then(|| signature::dynamic_signature(cfg, kind, ft.io(), ft.softmax));
    match &dynamic {
        Some((dyn_ins, _)) => dyn_ins.iter().for_each(|t| {
            g.input_dyn(t);
        }),
        None => ins.iter().for_each(|t| {
            g.input(t);
        }),
    }

    let patches = match (kind, opts.symbolic) {
        (GraphKind::Prefill, _) => signature::PATCHES.to_string(),
        (GraphKind::Decode, false) => g.reshape(signature::PATCHES, &[n, 1, d.patch]),
        (GraphKind::Decode, true) => g.unsqueeze(signature::PATCHES, &[1]),
        _ => unreachable!("{}", signature::ONLY_PREFILL_DECODE),
    };
    let rope = rope_tables(g, d, s, opts.symbolic)?;
    let space_mask = space_mask(g, ft.softmax);
    let time_mask = match (kind, opts.symbolic) {
        (GraphKind::Prefill, false) => causal_mask(g, s, ft.softmax),
        (GraphKind::Decode, false) => decode_key_mask(g, d, ft.softmax),
        // the host's mask: `[S, S]` broadcasts over rows and heads as the constant does; `[N, T]` → `[N, 1, 1, T]`
        (GraphKind::Prefill, true) => signature::TIME_MASK.to_string(),
        (GraphKind::Decode, true) => g.unsqueeze(signature::TIME_MASK, &[1, 2]),
        _ => unreachable!("{}", signature::ONLY_PREFILL_DECODE),
    };
    let ctx = Ctx {
        kind,
        d: *d,
        n,
        s,
        embed: cfg.embed_dim,
        mlp: cfg.mlp_hidden_dim,
        ft,
        rope,
        time_mask,
        space_mask,
        cache_update: opts.cache_update,
        symbolic: opts.symbolic,
        int8: if opts.precision == Precision::Int8 { opts.int8 } else { Int8Plan::NONE },
    };

    let x = g.scoped("patch_embed", |g| patch_embed(g, ckpt, &patches, &ctx))?;
    let mut x = g.cast(&x, ft.residual);
    let mut time_index = 0;
    for (i, layer_kind) in cfg.layer_kinds().into_iter().enumerate() {
        x = g.scoped(format!("layers.{i}"), |g| layer(g, ckpt, &x, layer_kind, time_index, &ctx))?;
        if layer_kind == LayerKind::Time {
            time_index += 1;
        }
    }
    let last = last_patch(g, &x, &ctx);
    let mixture = output_head(g, ckpt, &last, &ctx)?;
    for (value, out) in mixture.iter().zip(&outs) {
        let value = g.cast(value, out.dtype);
        g.output(&value, out);
    }
    for out in &outs[signature::MIXTURE_OUTPUTS.len()..] {
        // The cache tensors were produced under their output names by `attention_time`.
        g.output(&out.name, out);
    }
    if let Some((_, dyn_outs)) = &dynamic {
        g.set_dynamic_outputs(dyn_outs);
    }
    Ok(())
}

/// The shape-polymorphic graph of `kind` (for TensorRT): the same computation as every bucket's static graph, with
/// rows and slots symbolic (`rows`, `slots`) and the time-wise mask a host input ([`signature::TIME_MASK`]), so
/// one TensorRT engine — and one copy of the weights on the GPU — serves every bucket of that kind. It uses no
/// `Shape`, `Range`, `If` or `Loop`: reshapes copy the symbolic dims (`0`), the last context slot is a
/// `GatherND` over `last_index`, and only `TensorScatter` writes the cache (`ScatterND` would need indices of
/// the row count).
pub fn dynamic_graph(
    g: &mut GraphBuilder,
    ckpt: &Checkpoint,
    kind: GraphKind,
    opts: &GraphOptions,
) -> Result<()> {
    if opts.cache_update != CacheUpdate::TensorScatter {
        return Err(crate::error::Error::Graph {
            graph: "dynamic".into(),
            message: "shape-polymorphic graphs write the cache with TensorScatter (opset 24) only".into(),
        });
    }
    let d = signature::symbolic_dims(&ckpt.config, kind);
    toto_graph(g, ckpt, &d, &GraphOptions { symbolic: true, ..*opts })
}

/// Host rotary tables `[N, S, Dh]` (decode: `[N, Dh]`) → `[N, 1, S, Dh]`, plus the key scale `1/xpos`
/// (rotary-embedding-torch applies `scale ** -1` to keys); in the tables' own type.
fn rope_tables(g: &mut GraphBuilder, d: &GraphDims, s: usize, symbolic: bool) -> Result<[String; 4]> {
    let mut out = Vec::new();
    for name in [signature::ROPE_COS, signature::ROPE_SIN, signature::XPOS_SCALE] {
        out.push(match (symbolic, d.kind) {
            (false, _) => g.reshape(name, &[d.rows, 1, s, d.head_dim]),
            (true, GraphKind::Prefill) => g.unsqueeze(name, &[1]),
            (true, GraphKind::Decode) => g.unsqueeze(name, &[1, 2]),
            _ => unreachable!("{}", signature::ONLY_PREFILL_DECODE),
        });
    }
    let k_scale = g.op("Reciprocal", &[&out[2]], vec![]);
    Ok([out[0].clone(), out[1].clone(), out[2].clone(), k_scale])
}

/// Space-wise attention mask `[N, N]` (additive, type `ft`): rows attend to rows with the same group id
/// (`make_batched_block_mask` within one series; the host makes ids of different series and sample paths differ).
fn space_mask(g: &mut GraphBuilder, ft: DType) -> String {
    g.scoped("space_mask", |g| {
        let a = g.unsqueeze(signature::GROUP_ID, &[1]);
        let c = g.unsqueeze(signature::GROUP_ID, &[0]);
        let same = g.binary("Equal", &a, &c);
        let zero = g.scalar_of(ft, 0.0);
        let ninf = g.scalar_of(ft, f32::NEG_INFINITY);
        g.op("Where", &[&same, &zero, &ninf], vec![])
    })
}

/// Prefill: plain causal mask over the context slots (toto-ts uses `is_causal=True` at offset 0). Padded slots
/// past a row's context come after its real ones, so causality alone keeps them out of every real query.
fn causal_mask(g: &mut GraphBuilder, s: usize, ft: DType) -> String {
    let mut m = vec![0f32; s * s];
    for i in 0..s {
        for j in i + 1..s {
            m[i * s + j] = f32::NEG_INFINITY;
        }
    }
    g.const_float(ft, &[s, s], &m)
}

/// Decode: keys at slots `≤ write_pos` are visible (cached context + decoded patches + the new one); returns the
/// additive mask `[N, 1, 1, T]`.
fn decode_key_mask(g: &mut GraphBuilder, d: &GraphDims, ft: DType) -> String {
    g.scoped("key_mask", |g| {
        let t = d.slots;
        let slots = g.const_i64(&[t], &(0..t as i64).collect::<Vec<_>>());
        let pos = g.unsqueeze(signature::WRITE_POS, &[1]);
        let visible = g.binary("LessOrEqual", &slots, &pos);
        let zero = g.scalar_of(ft, 0.0);
        let ninf = g.scalar_of(ft, f32::NEG_INFINITY);
        let m = g.op("Where", &[&visible, &zero, &ninf], vec![]);
        g.reshape(&m, &[d.rows, 1, 1, t])
    })
}

/// `PatchEmbedding` (`embedding.py`): `Linear(P → D)` over each patch. `[N, S, P]` → `[N, S, D]`.
fn patch_embed(g: &mut GraphBuilder, ckpt: &Checkpoint, patches: &str, ctx: &Ctx) -> Result<String> {
    let (w, b) = linear_weights(g, ckpt, "model.patch_embed.projection", None, ctx.ft.act)?;
    Ok(g.linear(patches, &w, &b))
}

/// One pre-norm transformer layer (`transformer.py` `TransformerLayer.forward`):
/// `h = x + Attn(RMSNorm1(x)); out = h + MLP(RMSNorm2(h))`. `x` and the result are in the residual type.
fn layer(
    g: &mut GraphBuilder,
    ckpt: &Checkpoint,
    x: &str,
    kind: LayerKind,
    time_index: usize,
    ctx: &Ctx,
) -> Result<String> {
    let prefix = format!("model.transformer.{}", g.path());
    let res = ctx.ft.residual;
    let h = g.scoped("norm1", |g| rms_norm(g, ckpt, &format!("{prefix}.norm1.scale"), x, ctx))?;
    let a = g.scoped("attention", |g| match kind {
        LayerKind::Time => attention_time(g, ckpt, &format!("{prefix}.attention"), &h, time_index, ctx),
        LayerKind::Space => attention_space(g, ckpt, &format!("{prefix}.attention"), &h, ctx),
    })?;
    let a = g.cast(&a, res);
    let x = g.binary("Add", x, &a);
    let h = g.scoped("norm2", |g| rms_norm(g, ckpt, &format!("{prefix}.norm2.scale"), &x, ctx))?;
    let m = g.scoped("mlp", |g| swiglu_mlp(g, ckpt, &format!("{prefix}.mlp"), &h, ctx))?;
    let m = g.cast(&m, res);
    Ok(g.binary("Add", &x, &m))
}

/// `RMSNorm` (`util.py`): `x / sqrt(mean(x², -1) + 1e-8) · scale`, op for op as the torch fallback, computed in
/// the norm's type (its scale stored in that type) and returned in the activations' type.
fn rms_norm(g: &mut GraphBuilder, ckpt: &Checkpoint, scale_name: &str, x: &str, ctx: &Ctx) -> Result<String> {
    let nt = ctx.ft.norm;
    let d = ckpt.tensor(scale_name)?.shape.to_vec();
    let scale = g.weight(scale_name, &d, nt, || Ok(ckpt.tensor(scale_name)?.to_f32_vec()))?;
    let x = g.cast(x, nt);
    let sq = g.binary("Mul", &x, &x);
    let axes = g.const_i64(&[1], &[-1]);
    let mean = g.op("ReduceMean", &[&sq, &axes], vec![("keepdims", Attr::Int(1))]);
    let eps = g.scalar_of(nt, RMS_EPS);
    let var = g.binary("Add", &mean, &eps);
    let rms = g.op("Sqrt", &[&var], vec![]);
    let normed = g.binary("Div", &x, &rms);
    let y = g.binary("Mul", &normed, &scale);
    Ok(g.cast(&y, ctx.ft.act))
}

/// Query/key/value projections of `wQKV`, split into three `[…, D]` values. The checkpoint's output channels are
/// head-fastest (`(qkv, head_dim, heads)`, `attention.py`); the stored weight is permuted once at export to
/// head-major `(qkv, heads, head_dim)` so a plain reshape gives the heads (a permutation, no arithmetic change).
fn qkv(g: &mut GraphBuilder, ckpt: &Checkpoint, prefix: &str, x: &str, ctx: &Ctx) -> Result<Vec<String>> {
    let (dm, h) = (ctx.embed, ctx.d.heads);
    let dh = dm / h;
    let perm: Vec<usize> = (0..3 * dm)
        .map(|c| {
            let (which, rest) = (c / dm, c % dm);
            let (head, dd) = (rest / dh, rest % dh);
            which * dm + dd * h + head
        })
        .collect();
    let y = g.scoped("wQKV", |g| {
        dense(g, ckpt, &format!("{prefix}.wQKV"), Some(&perm), x, ctx.ft.act, ctx.int8.qkv)
    })?;
    Ok(g.split(&y, -1, &[dm, dm, dm]))
}

/// Rotary + xPos on `[N, H, S, Dh]` exactly as rotary-embedding-torch 0.8.6 `apply_rotary_emb`:
/// `(t·cos·scale) + (rotate_half(t)·sin·scale)` with adjacent pairs rotated; in the tables' type.
fn apply_rope(g: &mut GraphBuilder, t: &str, scale: &str, ctx: &Ctx) -> String {
    let (n, h, s, dh) = (ctx.n, ctx.d.heads, ctx.s, ctx.d.head_dim);
    let t = &g.cast(t, ctx.ft.rope);
    let pairs = ctx.reshape(g, t, &[n, h, s, dh / 2, 2], 3);
    let halves = g.split(&pairs, -1, &[1, 1]);
    let neg = g.op("Neg", &[&halves[1]], vec![]);
    let rot = g.op("Concat", &[&neg, &halves[0]], vec![("axis", Attr::Int(-1))]);
    let rot = ctx.reshape(g, &rot, &[n, h, s, dh], 3);
    let (cos, sin) = (ctx.rope[0].clone(), ctx.rope[1].clone());
    let a = g.binary("Mul", t, &cos);
    let a = g.binary("Mul", &a, scale);
    let r = g.binary("Mul", &rot, &sin);
    let r = g.binary("Mul", &r, scale);
    let y = g.binary("Add", &a, &r);
    g.cast(&y, ctx.ft.act)
}

/// Scaled dot-product attention over the last two axes with an additive mask (SDPA's default scale 1/√Dh). The
/// two matmuls run in the activations' type, scale + mask + softmax in the softmax type.
fn sdpa(g: &mut GraphBuilder, q: &str, k_t: &str, v: &str, mask: &str, ctx: &Ctx) -> String {
    let st = ctx.ft.softmax;
    let scores = g.binary("MatMul", q, k_t);
    let scores = g.cast(&scores, st);
    let scale = g.scalar_of(st, 1.0 / (ctx.d.head_dim as f32).sqrt());
    let scores = g.binary("Mul", &scores, &scale);
    let scores = g.binary("Add", &scores, mask);
    let p = g.op("Softmax", &[&scores], vec![("axis", Attr::Int(-1))]);
    let p = g.cast(&p, ctx.ft.act);
    g.binary("MatMul", &p, v)
}

/// Time-wise attention (`attention.py`, TIME axis) over each row's patch sequence with RoPE + xPos.
/// `[N, S, D]` → `[N, S, D]`. Prefill emits the keys and values of its S slots as the cache; decode writes slot
/// `write_pos` into the cache inputs and attends over every slot `≤ write_pos`.
fn attention_time(
    g: &mut GraphBuilder,
    ckpt: &Checkpoint,
    prefix: &str,
    x: &str,
    time_index: usize,
    ctx: &Ctx,
) -> Result<String> {
    let (n, s, h, dh) = (ctx.n, ctx.s, ctx.d.heads, ctx.d.head_dim);
    let qkv = qkv(g, ckpt, prefix, x, ctx)?;
    let heads = |g: &mut GraphBuilder, y: &str| {
        let y = ctx.reshape(g, y, &[n, s, h, dh], 2);
        g.transpose(&y, &[0, 2, 1, 3])
    };
    let q = heads(g, &qkv[0]);
    let k = heads(g, &qkv[1]);
    let val = heads(g, &qkv[2]);
    let q = g.scoped("rope_q", |g| apply_rope(g, &q, &ctx.rope[2].clone(), ctx));
    let k = g.scoped("rope_k", |g| apply_rope(g, &k, &ctx.rope[3].clone(), ctx));
    let (k_out, v_out) = (signature::k_cache(time_index, true), signature::v_cache(time_index, true));
    let (k_all, v_all) = match ctx.kind {
        GraphKind::Prefill => {
            // The cache is this call's keys/values of its S slots; the host copies each row's real slots into
            // whichever decode bucket continues it.
            g.op_to("Identity", &[&k], &k_out, vec![]);
            g.op_to("Identity", &[&val], &v_out, vec![]);
            (k, val)
        }
        GraphKind::Decode => {
            let k_in = signature::k_cache(time_index, false);
            let v_in = signature::v_cache(time_index, false);
            let rows = signature::WRITE_POS;
            let ka = g.scoped("k_update", |g| cache_write(g, &k_in, &k, rows, &k_out, ctx));
            let va = g.scoped("v_update", |g| cache_write(g, &v_in, &val, rows, &v_out, ctx));
            (ka, va)
        }
        _ => unreachable!("{}", signature::ONLY_PREFILL_DECODE),
    };
    let k_t = g.transpose(&k_all, &[0, 1, 3, 2]);
    let o = sdpa(g, &q, &k_t, &v_all, &ctx.time_mask.clone(), ctx);
    let o = g.transpose(&o, &[0, 2, 1, 3]);
    let o = ctx.reshape(g, &o, &[n, s, h * dh], 2);
    g.scoped("wO", |g| dense(g, ckpt, &format!("{prefix}.wO"), None, &o, ctx.ft.act, ctx.int8.out_proj))
}

/// Writes one new slot per cache row: `cache[r, :, rows[r], :] = update[r, :, 0, :]`.
fn cache_write(g: &mut GraphBuilder, cache: &str, update: &str, rows: &str, out: &str, ctx: &Ctx) -> String {
    match ctx.cache_update {
        CacheUpdate::TensorScatter => g.op_to(
            "TensorScatter",
            &[cache, update, rows],
            out,
            vec![("axis", Attr::Int(2)), ("mode", Attr::Str("linear"))],
        ),
        CacheUpdate::ScatterNd => {
            let (bv, h, dh) = (ctx.n, ctx.d.heads, ctx.d.head_dim);
            let r: Vec<i64> = (0..bv as i64).flat_map(|r| std::iter::repeat_n(r, h)).collect();
            let hh: Vec<i64> = (0..bv).flat_map(|_| 0..h as i64).collect();
            let r = g.const_i64(&[bv, h, 1], &r);
            let hh = g.const_i64(&[bv, h, 1], &hh);
            let slot = g.reshape(rows, &[bv, 1, 1]);
            let slot = g.expand(&slot, &[bv, h, 1]);
            let idx = g.op("Concat", &[&r, &hh, &slot], vec![("axis", Attr::Int(-1))]);
            let upd = g.reshape(update, &[bv, h, dh]);
            g.op_to("ScatterND", &[cache, &idx, &upd], out, vec![])
        }
    }
}

/// Space-wise attention (`attention.py`, SPACE axis): within each patch slot, rows attend to rows of the same
/// group (the variates of one series or sample path that share an id); no rotary embedding, no cache.
/// `[N, S, D]` → `[N, S, D]`.
fn attention_space(
    g: &mut GraphBuilder,
    ckpt: &Checkpoint,
    prefix: &str,
    x: &str,
    ctx: &Ctx,
) -> Result<String> {
    let (n, s, h, dh) = (ctx.n, ctx.s, ctx.d.heads, ctx.d.head_dim);
    let xt = g.transpose(x, &[1, 0, 2]);
    let qkv = qkv(g, ckpt, prefix, &xt, ctx)?;
    let heads = |g: &mut GraphBuilder, y: &str| {
        let y = ctx.reshape(g, y, &[s, n, h, dh], 2);
        g.transpose(&y, &[0, 2, 1, 3])
    };
    let q = heads(g, &qkv[0]);
    let k = heads(g, &qkv[1]);
    let val = heads(g, &qkv[2]);
    let k_t = g.transpose(&k, &[0, 1, 3, 2]);
    let o = sdpa(g, &q, &k_t, &val, &ctx.space_mask.clone(), ctx);
    let o = g.transpose(&o, &[2, 0, 1, 3]);
    let o = ctx.reshape(g, &o, &[n, s, h * dh], 2);
    g.scoped("wO", |g| dense(g, ckpt, &format!("{prefix}.wO"), None, &o, ctx.ft.act, ctx.int8.out_proj))
}

/// SwiGLU MLP (`feed_forward.py`): `Linear(D → 2M)`, gate = first half, `silu(gate)·val`, `Linear(M → D)`.
fn swiglu_mlp(g: &mut GraphBuilder, ckpt: &Checkpoint, prefix: &str, x: &str, ctx: &Ctx) -> Result<String> {
    let act = ctx.ft.act;
    let y = g.scoped("0", |g| dense(g, ckpt, &format!("{prefix}.0"), None, x, act, ctx.int8.fc1))?;
    let parts = g.split(&y, -1, &[ctx.mlp, ctx.mlp]);
    let sig = g.op("Sigmoid", &[&parts[0]], vec![]);
    let silu = g.binary("Mul", &parts[0], &sig);
    let z = g.binary("Mul", &silu, &parts[1]);
    g.scoped("2", |g| dense(g, ckpt, &format!("{prefix}.2"), None, &z, act, ctx.int8.fc2))
}

/// The hidden state that predicts the next patch: the last real context slot at prefill (`last_index`, per
/// row), the only slot at decode. `[N, S, D]` → `[N, D]`.
fn last_patch(g: &mut GraphBuilder, x: &str, ctx: &Ctx) -> String {
    let (n, s, dm) = (ctx.n, ctx.s, ctx.embed);
    match (ctx.kind, ctx.symbolic) {
        (GraphKind::Decode, _) => ctx.reshape(g, x, &[n, dm], 1),
        // one gather per row at its own last slot, whatever the row count
        (GraphKind::Prefill, true) => g.scoped("last_patch", |g| {
            let idx = g.unsqueeze(signature::LAST_INDEX, &[1]);
            g.op("GatherND", &[x, &idx], vec![("batch_dims", Attr::Int(1))])
        }),
        (GraphKind::Prefill, false) => g.scoped("last_patch", |g| {
            // A flat Gather keeps the selection exact (a one-hot MatMul would turn inf·0 into NaN).
            let flat = g.reshape(x, &[n * s, dm]);
            let base: Vec<i64> = (0..n as i64).map(|r| r * s as i64).collect();
            let base = g.const_i64(&[n], &base);
            let idx = g.binary("Add", &base, signature::LAST_INDEX);
            g.op("Gather", &[&flat, &idx], vec![("axis", Attr::Int(0))])
        }),
        _ => unreachable!("{}", signature::ONLY_PREFILL_DECODE),
    }
}

/// `unembed` + `MixtureOfStudentTsOutput` (`backbone.py`, `distribution.py`) for one patch: `[N, D]` →
/// df, loc, scale, weights `[N, P, K]` (in the head's type; the caller casts the outputs to f32). The unembedding
/// and the four component heads run as one MatMul over their folded weights ([`folded_head`]); it is f32 when
/// either the `head` or the `unembed` region is (int8 graphs: f32, it is 3% of the base model's weights).
fn output_head(g: &mut GraphBuilder, ckpt: &Checkpoint, h: &str, ctx: &Ctx) -> Result<[String; 4]> {
    let (n, p, k, dm) = (ctx.n, ctx.d.patch, ctx.d.components, ctx.embed);
    let (ut, ht) = (ctx.ft.unembed, ctx.ft.head);
    let ft = if ut == DType::F32 || ht == DType::F32 { DType::F32 } else { ht };
    let h = g.cast(h, ft);
    g.scoped("output_distribution", |g| {
        let wname = "model.output_distribution.folded.weight_t";
        let bname = "model.output_distribution.folded.bias";
        // folded once per bundle: the weight store asks for a weight only the first time a graph names it
        let mut bias = None;
        g.weight(wname, &[dm, p * 4 * k], ft, || {
            let (w, b) = folded_head(ckpt, dm, p, k)?;
            bias = Some(b);
            Ok(w)
        })?;
        g.weight(bname, &[p * 4 * k], ft, || match bias.take() {
            Some(b) => Ok(b),
            None => Ok(folded_head(ckpt, dm, p, k)?.1),
        })?;
        let y = g.linear(&h, wname, bname);
        // columns are (step, head, k): step p of the patch, then the four heads' K values each
        let y = ctx.reshape(g, &y, &[n, p, 4 * k], 1);
        let y = g.cast(&y, ht);
        Ok(mixture_params(g, &y, k, ht))
    })
}

/// The four heads' outputs `[.., 4K]` (df, loc, scale, mixture logits) to the mixture's parameters.
fn mixture_params(g: &mut GraphBuilder, y: &str, k: usize, ht: DType) -> [String; 4] {
    let parts = g.split(y, -1, &[k, k, k, k]);
    let eps = g.scalar_of(ht, F32_EPS);
    let two = g.scalar_of(ht, 2.0);
    let sp = g.op("Softplus", &[&parts[0]], vec![]);
    let sp = g.binary("Max", &sp, &eps);
    let df = g.binary("Add", &two, &sp);
    let sc = g.op("Softplus", &[&parts[2]], vec![]);
    let scale = g.binary("Max", &sc, &eps);
    let weights = g.op("Softmax", &[&parts[3]], vec![("axis", Attr::Int(-1))]);
    [df, parts[1].clone(), scale, weights]
}

/// The unembedding folded into the four mixture heads. Both are affine and nothing acts between them, so head j
/// at step s is `(W_j·U_s)·h + (W_j·b_s + c_j)` with `U_s`, `b_s` the unembedding's rows of step s: one
/// `[D, P·4K]` matrix instead of the `[D, P·D]` unembedding (base model: 4.7 M weights instead of 37.7 M, a quarter
/// of the model, which every decode step streams). Summed in f64, rounded once. Columns are `(step, head, k)`.
fn folded_head(ckpt: &Checkpoint, dm: usize, p: usize, k: usize) -> Result<(Vec<f32>, Vec<f32>)> {
    let u = ckpt.tensor("model.unembed.weight")?.to_f32_vec(); // [P·D, D]
    let ub = ckpt.tensor("model.unembed.bias")?.to_f32_vec(); // [P·D]
    let (mut hw, mut hb) = (Vec::with_capacity(4 * k * dm), Vec::with_capacity(4 * k)); // [4K, D], [4K]
    for hd in ["df", "loc_proj", "scale_proj", "mixture_weights"] {
        hw.extend(ckpt.tensor(&format!("model.output_distribution.{hd}.weight"))?.to_f32_vec());
        hb.extend(ckpt.tensor(&format!("model.output_distribution.{hd}.bias"))?.to_f32_vec());
    }
    let m = 4 * k;
    // acc[(s·4K + j)·D + e] = Σ_f hw[j, f] · u[s·D + f, e]
    let mut acc = vec![0f64; p * m * dm];
    let mut bias = vec![0f64; p * m];
    let mut row = vec![0f64; dm];
    for s in 0..p {
        for f in 0..dm {
            for (r, &x) in row.iter_mut().zip(&u[(s * dm + f) * dm..(s * dm + f + 1) * dm]) {
                *r = f64::from(x);
            }
            let b = f64::from(ub[s * dm + f]);
            for j in 0..m {
                let w = f64::from(hw[j * dm + f]);
                for (o, &x) in acc[(s * m + j) * dm..(s * m + j + 1) * dm].iter_mut().zip(&row) {
                    *o += w * x;
                }
                bias[s * m + j] += w * b;
            }
        }
        for j in 0..m {
            bias[s * m + j] += f64::from(hb[j]);
        }
    }
    let cols = p * m;
    let mut wt = vec![0f32; dm * cols];
    for c in 0..cols {
        for e in 0..dm {
            wt[e * cols + c] = acc[c * dm + e] as f32;
        }
    }
    Ok((wt, bias.into_iter().map(|b| b as f32).collect()))
}

/// A large `Linear` (`x · Wᵀ + b`, `W = {prefix}.weight` with rows permuted first if asked) in `dtype`; when
/// `int8` names a kernel (its role is in the int8 graph's [`Int8Plan`]) its weight is quantized for that kernel
/// ([`GraphBuilder::matmul_quantized`]) and its bias stays f32, else both are stored as `dtype` (f32 in an int8
/// graph).
fn dense(
    g: &mut GraphBuilder,
    ckpt: &Checkpoint,
    prefix: &str,
    row_perm: Option<&[usize]>,
    x: &str,
    dtype: DType,
    int8: Option<Int8Kernel>,
) -> Result<String> {
    let Some(kernel) = int8 else {
        let (w, b) = linear_weights(g, ckpt, prefix, row_perm, dtype)?;
        return Ok(g.linear(x, &w, &b));
    };
    let w = ckpt.tensor(&format!("{prefix}.weight"))?;
    let (out, inp) = (w.shape[0], w.shape[1]);
    let y = g.matmul_quantized(kernel, x, &format!("{prefix}.weight_t"), inp, out, || {
        Ok(transpose(&linear_rows(w.to_f32_vec(), row_perm, inp), out, inp))
    })?;
    let bname = format!("{prefix}.bias");
    g.weight(&bname, &[out], dtype, || Ok(linear_rows(ckpt.tensor(&bname)?.to_f32_vec(), row_perm, 1)))?;
    Ok(g.binary("Add", &y, &bname))
}

/// `rows` (of `width` values each) permuted when asked.
fn linear_rows(rows: Vec<f32>, row_perm: Option<&[usize]>, width: usize) -> Vec<f32> {
    match row_perm {
        Some(perm) => permute_rows(&rows, perm, width),
        None => rows,
    }
}

/// Stores `{prefix}.weight` transposed to `[in, out]` (rows permuted first if asked) and `{prefix}.bias` as
/// `dtype`, and returns their initializer names.
fn linear_weights(
    g: &mut GraphBuilder,
    ckpt: &Checkpoint,
    prefix: &str,
    row_perm: Option<&[usize]>,
    dtype: DType,
) -> Result<(String, String)> {
    let w = ckpt.tensor(&format!("{prefix}.weight"))?;
    let (out, inp) = (w.shape[0], w.shape[1]);
    let wname = format!("{prefix}.weight_t");
    let bname = format!("{prefix}.bias");
    g.weight(&wname, &[inp, out], dtype, || {
        let mut rows = w.to_f32_vec();
        if let Some(perm) = row_perm {
            rows = permute_rows(&rows, perm, inp);
        }
        Ok(transpose(&rows, out, inp))
    })?;
    g.weight(&bname, &[out], dtype, || {
        let mut bias = ckpt.tensor(&bname)?.to_f32_vec();
        if let Some(perm) = row_perm {
            bias = permute_rows(&bias, perm, 1);
        }
        Ok(bias)
    })?;
    Ok((wname, bname))
}

/// `out[r] = src[perm[r]]` for rows of `width` values.
fn permute_rows(src: &[f32], perm: &[usize], width: usize) -> Vec<f32> {
    perm.iter().flat_map(|&r| src[r * width..(r + 1) * width].iter().copied()).collect()
}

/// Row-major `[rows, cols]` → `[cols, rows]`.
fn transpose(src: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; src.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = src[r * cols + c];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_and_permute() {
        let m = [1., 2., 3., 4., 5., 6.]; // 2×3
        assert_eq!(transpose(&m, 2, 3), vec![1., 4., 2., 5., 3., 6.]);
        assert_eq!(permute_rows(&m, &[1, 0], 3), vec![4., 5., 6., 1., 2., 3.]);
    }
}
