//! The Toto 2.0 forward pass as static ONNX graphs, one function per model block in forward order, named after
//! the checkpoint paths they read (`patch_proj`, `transformer.layers.i.attn`, `…ffn`, `output_head`).
//!
//! Ports `toto2/model.py` of toto-2 2.0.0 (`Toto2Model.forecast` and the modules it runs) with the I/O contract
//! of [`crate::toto2::signature`]: rows flattened (one variate of one series per row), masks built in the graph
//! from per-slot group ids, rotary tables from the host, and for block decoding the KV cache and write position
//! as explicit tensors. Shapes in the docs: R rows, L tokens of this call, D = d_model, H query heads, G key/value
//! heads, Dh = qk_dim, Dv = v_dim, Dr = rotated channels, P patch, T cache slots, K output patches.
//!
//! **u-μP folded at export.** toto-2 multiplies every `uu.Linear` output (weight and bias) by 1/√fan_in and every
//! `uu.LinearReadout` by 1/fan_in, scales `U.silu` by 1.7667829, applies a learned per-dim scale
//! `softplus(p)/ln 2` to the queries, uses the attention scale 1/Dh, and combines each residual branch as
//! `(τ·f(x) + x)/√(1+τ²)`. All of it is folded into the stored weights ([`FoldedLinear`]), leaving one `Mul` per
//! residual skip; an exported graph is plain linear algebra.
//!
//! **Precisions.** Every block is written once for fp32, fp16 and int8: it computes in the float type
//! [`FloatTypes`] gives its role (fp32 everywhere in fp32 and int8 graphs; fp16 with the fp32 regions of an
//! [`Fp16Plan`] in fp16 graphs, entered and left through explicit casts, as for Toto 1.0). The 2.0 roles of the
//! regions: `rms_norm` every weightless RMSNorm (`norm1`, `norm2`, `out_norm`); `softmax` the scores after
//! `Q·Kᵀ`, the additive mask and the softmax; `residual` the residual stream (`x·skip + branch`) from the patch
//! projection to the last layer; `rope` the rotary/xPos application with the host's f32 tables; `head` the
//! output head (`output_head.param_projection`, a residual MLP, with its input); `unembed` has no 2.0 block of
//! its own (the head is its unembedding). An fp16 2.0 graph keeps the graph I/O of the fp32 one (f32 inputs,
//! outputs and KV caches; the driver binds f32 buffers): its caches hold fp16 values widened, and the casts at
//! the graph's edges are its only extra work.

use crate::error::{Error, Result};
use crate::graph::builder::{Attr, GraphBuilder};
use crate::graph::precision::{FloatTypes, Fp16Plan, Int8Kernel, Int8Plan};
use crate::signature::{k_cache, v_cache, DType, Precision};
use crate::toto2::checkpoint::Toto2Checkpoint;
use crate::toto2::config::{Toto2Config, Toto2LayerKind};
pub use crate::toto2::folded::FoldedLinear;
use crate::toto2::shared;
use crate::toto2::signature::{self as sig, Toto2Dims, Toto2GraphKind};
use crate::variant::CacheUpdate;

/// `U.silu`'s forward scale at mult 1: `exp(0.8·ln √(2/(1−1/π)) + 0.2·ln 2)` (unit_scaling `silu`).
pub fn silu_scale() -> f64 {
    let upper = (2.0 / (1.0 - 1.0 / std::f64::consts::PI)).sqrt();
    (0.8 * upper.ln() + 0.2 * 2f64.ln()).exp()
}

/// The set totoc's int8 Toto 2.0 graphs use, chosen by the ablation on the trained 4m (docs/precision.md,
/// `engines/tests/toto2_precision.rs` `toto2_int8_role_ablation`): every matmul in int8 misses the goal
/// (1.03×); keeping `out_proj` in fp32 — the smallest role, 1/12 of a layer's matmul weights — meets it
/// (0.55×), better than keeping `qkv` (0.61×, 3× the weights).
pub const INT8_DEFAULT: Int8Plan = Int8Plan {
    qkv: Some(Int8Kernel::Rows),
    out_proj: None,
    fc1: Some(Int8Kernel::Rows),
    fc2: Some(Int8Kernel::Rows),
};

/// How a graph of each precision is built beyond its precision: the fp32 regions of fp16 graphs, the int8 roles
/// of int8 graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrecisionPlans {
    pub fp16: Fp16Plan,
    pub int8: Int8Plan,
}

impl Default for PrecisionPlans {
    fn default() -> Self {
        PrecisionPlans { fp16: Fp16Plan::DEFAULT, int8: INT8_DEFAULT }
    }
}

/// Per-call values shared by all layers.
struct Ctx {
    kind: Toto2GraphKind,
    d: Toto2Dims,
    cfg: Toto2Config,
    /// Tokens per row in this call.
    l: usize,
    /// Rotary tables `[R, 1, L, Dr]`: cos, sin, query xPos scale, key xPos scale (its reciprocal).
    rope: [String; 4],
    /// Additive time mask: `[R, 1, L, L]` (pass, prefill) or `[R, 1, 2B, T]` (decode).
    time_mask: String,
    /// Additive variate mask `[L, 1, R, R]`.
    variate_mask: String,
    cache_update: CacheUpdate,
    /// Float type of each part of the model (see the module docs).
    ft: FloatTypes,
    /// The transformer's matmul roles that read int8 weights (all off outside int8 graphs).
    int8: Int8Plan,
    /// The shared (shape-polymorphic) form: R, L and T read from the inputs' shapes ([`crate::toto2::shared`]).
    symbolic: bool,
}

/// Builds one Toto 2.0 graph of the set `d` describes; `cache_update` picks how the decode graph writes its
/// keys/values (`TensorScatter`, or the portable `ScatterND`).
pub fn toto2_graph(
    g: &mut GraphBuilder,
    ckpt: &Toto2Checkpoint,
    kind: Toto2GraphKind,
    d: &Toto2Dims,
    cache_update: CacheUpdate,
    precision: Precision,
) -> Result<()> {
    toto2_graph_with(g, ckpt, kind, d, cache_update, precision, &PrecisionPlans::default())
}

/// [`toto2_graph`] with the fp32 regions of an fp16 graph and the int8 roles of an int8 graph given (`plans`;
/// each applies to its precision only).
pub fn toto2_graph_with(
    g: &mut GraphBuilder,
    ckpt: &Toto2Checkpoint,
    kind: Toto2GraphKind,
    d: &Toto2Dims,
    cache_update: CacheUpdate,
    precision: Precision,
    plans: &PrecisionPlans,
) -> Result<()> {
    build(g, ckpt, kind, d, cache_update, precision, plans, false)
}

/// The shared (shape-polymorphic) graph of `kind` for the profile whose bucket `d` is (any bucket of it gives
/// the same graph): R, L and T symbolic as [`crate::toto2::shared`] states, the KV caches written with
/// `TensorScatter` (the per-row write TensorRT lowers to its KV-cache update layer; `ScatterND`'s index
/// constants are shaped by R).
pub fn toto2_shared_graph(
    g: &mut GraphBuilder,
    ckpt: &Toto2Checkpoint,
    kind: Toto2GraphKind,
    d: &Toto2Dims,
    precision: Precision,
    plans: &PrecisionPlans,
) -> Result<()> {
    build(g, ckpt, kind, d, CacheUpdate::TensorScatter, precision, plans, true)
}

#[allow(clippy::too_many_arguments)] // the two public entry points above are the interface
fn build(
    g: &mut GraphBuilder,
    ckpt: &Toto2Checkpoint,
    kind: Toto2GraphKind,
    d: &Toto2Dims,
    cache_update: CacheUpdate,
    precision: Precision,
    plans: &PrecisionPlans,
    symbolic: bool,
) -> Result<()> {
    if !d.graphs().contains(&kind) {
        return Err(Error::Graph {
            graph: kind.as_str().into(),
            message: format!("dims {d:?} have no {} graph", kind.as_str()),
        });
    }
    if symbolic {
        for t in shared::dynamic_inputs(d, kind) {
            g.input_dyn(&t);
        }
    } else {
        for t in d.inputs(kind) {
            g.input(&t);
        }
    }
    let ft = FloatTypes::new(precision, &plans.fp16);
    let l = d.tokens(kind);
    let rope = rope_tables(g, ft.rope);
    let time_mask = match kind {
        Toto2GraphKind::Decode => g.scoped("time_mask", |g| decode_time_mask(g, d, symbolic)),
        _ => g.scoped("time_mask", |g| time_mask(g, l, symbolic)),
    };
    let time_mask = g.cast(&time_mask, ft.softmax);
    let variate_mask = g.scoped("variate_mask", variate_mask);
    let variate_mask = g.cast(&variate_mask, ft.softmax);
    let int8 = if precision == Precision::Int8 { plans.int8 } else { Int8Plan::NONE };
    let ctx = Ctx {
        kind,
        d: *d,
        cfg: ckpt.config.clone(),
        l,
        rope,
        time_mask,
        variate_mask,
        cache_update,
        ft,
        int8,
        symbolic,
    };

    let x = g.scoped("patch_input", |g| patch_input(g, &ctx));
    let x = g.cast(&x, ft.act);
    let x = g.scoped("patch_proj", |g| residual_mlp(g, ckpt, "patch_proj", &x, false, ft.act))?;
    let mut x = g.cast(&x, ft.residual);
    let mut time_index = 0;
    for (i, layer_kind) in ctx.cfg.layer_kinds().into_iter().enumerate() {
        x = g.scoped(format!("transformer.layers.{i}"), |g| {
            layer(g, ckpt, &x, layer_kind, time_index, &ctx)
        })?;
        time_index += usize::from(layer_kind == Toto2LayerKind::Time);
    }
    let x = g.scoped("transformer.out_norm", |g| rms_norm(g, &x, ctx.cfg.norm_eps, &ctx));
    let x = g.scoped("select_outputs", |g| select_outputs(g, &x, &ctx));
    let head = "output_head.param_projection.proj";
    let x = g.cast(&x, ft.head);
    let q = g.scoped(head, |g| residual_mlp(g, ckpt, head, &x, true, ft.head))?;
    let q = g.cast(&q, DType::F32);
    let outs = d.outputs_sigs(kind);
    // `[R, K, P·9]` → `[R, K, P, 9]`, R copied (0) so that the shared form keeps it symbolic
    let q = shared::reshape(g, &q, &[0, outs[0].shape[1] as i64, d.patch as i64, d.quantiles as i64]);
    g.output(&q, &outs[0]);
    for out in &outs[1..] {
        // produced under their output names by `attention_time`
        g.output(&out.name, out);
    }
    if symbolic {
        g.set_dynamic_outputs(&shared::dynamic_outputs(d, kind));
    }
    Ok(())
}

/// Host rotary tables `[R, L, Dr]` → `[R, 1, L, Dr]` (broadcast over heads), plus the key scale `ζ^−power`
/// (toto-2 raises the xPos scale to the power −1 for keys, which torch computes as a reciprocal).
/// In `rt`, the rope region's type: the key scale is computed in f32 before any cast.
fn rope_tables(g: &mut GraphBuilder, rt: DType) -> [String; 4] {
    let [c, s, x] = [sig::ROPE_COS, sig::ROPE_SIN, sig::XPOS_SCALE].map(|n| g.unsqueeze(n, &[1]));
    let k_scale = g.op("Reciprocal", &[&x], vec![]);
    [c, s, x, k_scale].map(|t| g.cast(&t, rt))
}

/// Pass/prefill time mask (`_sdpa_kwargs` with `has_missing_values=True`): causal, and only keys whose group id
/// equals the query's (fully unobserved context patches form their own group). `[R, 1, L, L]`.
fn time_mask(g: &mut GraphBuilder, l: usize, symbolic: bool) -> String {
    let q = g.unsqueeze(sig::GROUP_IDS, &[2]);
    let k = g.unsqueeze(sig::GROUP_IDS, &[1]);
    let same = g.binary("Equal", &q, &k);
    let m = additive(g, &same);
    let causal = if symbolic {
        // key slot ≤ query slot over the call's L tokens
        let pos = shared::positions(g, sig::GROUP_IDS, 1);
        let key = g.unsqueeze(&pos, &[0]);
        let query = g.unsqueeze(&pos, &[1]);
        let keep = g.binary("LessOrEqual", &key, &query);
        additive(g, &keep)
    } else {
        let causal: Vec<f32> =
            (0..l * l).map(|i| if i % l <= i / l { 0.0 } else { f32::NEG_INFINITY }).collect();
        g.const_f32(&[l, l], &causal)
    };
    let m = g.binary("Add", &m, &causal);
    g.unsqueeze(&m, &[1])
}

/// Decode time mask (`VariateTimeTransformerDecoder.forward`, decode branch): query i of the call (slot
/// `write_pos + i`) sees cache slots `≤ write_pos + i` that are valid (`_cache_valid`). `[R, 1, 2B, T]`.
fn decode_time_mask(g: &mut GraphBuilder, d: &Toto2Dims, symbolic: bool) -> String {
    let (t, n) = (d.cache_slots(), d.tokens(Toto2GraphKind::Decode));
    let slots = if symbolic {
        shared::positions(g, sig::KEY_VALID, 1)
    } else {
        g.const_i64(&[t], &(0..t as i64).collect::<Vec<_>>())
    };
    let offsets = g.const_i64(&[n], &(0..n as i64).collect::<Vec<_>>());
    let pos = g.unsqueeze(sig::WRITE_POS, &[1]);
    let qpos = g.binary("Add", &pos, &offsets);
    let qpos = g.unsqueeze(&qpos, &[2]);
    let visible = g.binary("LessOrEqual", &slots, &qpos);
    let one = g.const_i64(&[], &[1]);
    let valid = g.binary("Equal", sig::KEY_VALID, &one);
    let valid = g.unsqueeze(&valid, &[1]);
    let keep = g.binary("And", &visible, &valid);
    let m = additive(g, &keep);
    g.unsqueeze(&m, &[1])
}

/// Variate mask: at each slot, rows attend to rows with the same group id. `[L, 1, R, R]`.
fn variate_mask(g: &mut GraphBuilder) -> String {
    let ids = g.transpose(sig::GROUP_IDS, &[1, 0]);
    let a = g.unsqueeze(&ids, &[2]);
    let b = g.unsqueeze(&ids, &[1]);
    let same = g.binary("Equal", &a, &b);
    let m = additive(g, &same);
    g.unsqueeze(&m, &[1])
}

/// `where(keep, 0, −inf)`.
fn additive(g: &mut GraphBuilder, keep: &str) -> String {
    let zero = g.scalar(0.0);
    let ninf = g.scalar(f32::NEG_INFINITY);
    g.op("Where", &[keep, &zero, &ninf], vec![])
}

/// The patch embedding's input `[R, L, 2P]`: `[asinh-scaled patch ‖ missing indicator]` (`_embed_patches`).
/// Decode: the fed-back medians (all observed) followed by B mask tokens (zeros, all missing).
fn patch_input(g: &mut GraphBuilder, ctx: &Ctx) -> String {
    let (r, p) = (ctx.d.rows, ctx.d.patch);
    if ctx.kind != Toto2GraphKind::Decode {
        return g.op("Concat", &[sig::PATCHES, sig::MISSING], vec![("axis", Attr::Int(-1))]);
    }
    let b = ctx.d.outputs(ctx.kind);
    let zeros = g.const_f32(&[1, 1, p], &vec![0.0; p]);
    let token: Vec<f32> = (0..2 * p).map(|i| if i < p { 0.0 } else { 1.0 }).collect();
    let token = g.const_f32(&[1, 1, 2 * p], &token);
    let (zeros, tokens) = if ctx.symbolic {
        // `patches [R, B, P]`: its shape is the zeros' target, and R × B × 1 broadcasts the token
        let shape = g.op("Shape", &[sig::PATCHES], vec![]);
        let zeros = g.op("Expand", &[&zeros, &shape], vec![]);
        let ones = g.const_i64(&[3], &[1, 1, 0]);
        let rb1 = g.binary("Mul", &shape, &ones);
        let one = g.const_i64(&[3], &[0, 0, 1]);
        let rb1 = g.binary("Add", &rb1, &one);
        (zeros, g.op("Expand", &[&token, &rb1], vec![]))
    } else {
        (g.expand(&zeros, &[r, b, p]), g.expand(&token, &[r, b, 2 * p]))
    };
    let fed = g.op("Concat", &[sig::PATCHES, &zeros], vec![("axis", Attr::Int(-1))]);
    g.op("Concat", &[&fed, &tokens], vec![("axis", Attr::Int(1))])
}

/// `InputResidualMLP` / `OutputResidualMLP` (`ResidualMLP.forward`, τ = 1):
/// `(silu_u(x·W1ᵀ+b1)·W2ᵀ + b2 + x·Wsᵀ + bs)/√2` with the u-μP scales folded (readout layers 1/fan_in).
/// `[…, in]` → `[…, out]`.
fn residual_mlp(
    g: &mut GraphBuilder,
    ckpt: &Toto2Checkpoint,
    prefix: &str,
    x: &str,
    readout: bool,
    dtype: DType,
) -> Result<String> {
    let half = std::f64::consts::FRAC_1_SQRT_2;
    let l1 = FoldedLinear::uniform(ckpt, &format!("{prefix}.linear1"), false, 1.0)?.typed(dtype);
    // `U.silu`'s scale multiplies linear2's input, so it goes into its weight only
    let l2 = FoldedLinear::uniform(ckpt, &format!("{prefix}.linear2"), readout, half)?
        .with_input_scale(silu_scale())
        .typed(dtype);
    let skip = FoldedLinear::uniform(ckpt, &format!("{prefix}.skip_proj"), readout, half)?.typed(dtype);
    let h = g.scoped("linear1", |g| l1.wire(g, ckpt, x))?;
    let sig = g.op("Sigmoid", &[&h], vec![]);
    let h = g.binary("Mul", &h, &sig);
    // the two output biases are stored summed, as one bias of the skip projection
    let y = g.scoped("linear2", |g| l2.wire_no_bias(g, ckpt, &h))?;
    let s = g.scoped("skip_proj", |g| skip.wire_with_extra_bias(g, ckpt, x, &l2))?;
    Ok(g.binary("Add", &y, &s))
}

/// One pre-norm layer (`SelfAttentionTransformerLayer.forward`): `x ← f(RMSNorm(x))·τ/√(1+τ²) + x/√(1+τ²)`
/// for the attention and the FFN branch; the branch factor is folded into `out_proj`/`fc2`.
fn layer(
    g: &mut GraphBuilder,
    ckpt: &Toto2Checkpoint,
    x: &str,
    kind: Toto2LayerKind,
    time_index: usize,
    ctx: &Ctx,
) -> Result<String> {
    let prefix = g.path();
    let (_, attn_skip) = tau_factors(ckpt, &format!("{prefix}.attn_tau"))?;
    let (_, mlp_skip) = tau_factors(ckpt, &format!("{prefix}.mlp_tau"))?;
    let res = ctx.ft.residual;
    let h = g.scoped("norm1", |g| rms_norm(g, x, ctx.cfg.norm_eps, ctx));
    let a = g.scoped("attn", |g| match kind {
        Toto2LayerKind::Time => attention_time(g, ckpt, &prefix, &h, time_index, ctx),
        Toto2LayerKind::Variate => attention_variate(g, ckpt, &prefix, &h, ctx),
    })?;
    let a = g.cast(&a, res);
    let skip = g.scalar_of(res, attn_skip);
    let x = g.binary("Mul", x, &skip);
    let x = g.binary("Add", &a, &x);
    let h = g.scoped("norm2", |g| rms_norm(g, &x, ctx.cfg.norm_eps, ctx));
    let m = g.scoped("ffn", |g| ffn(g, ckpt, &prefix, &h, ctx))?;
    let m = g.cast(&m, res);
    let skip = g.scalar_of(res, mlp_skip);
    let x = g.binary("Mul", &x, &skip);
    Ok(g.binary("Add", &m, &x))
}

/// `(τ/√(1+τ²), 1/√(1+τ²))` in f32, as torch computes them from the f32 τ buffer (`U.residual_add`).
fn tau_factors(ckpt: &Toto2Checkpoint, name: &str) -> Result<(f32, f32)> {
    let tau = ckpt.tensor(name)?.to_f32_vec()[0];
    let denom = (1.0f32 + tau * tau).sqrt();
    Ok((tau / denom, 1.0 / denom))
}

/// Weightless `uu.RMSNorm`: `x / sqrt(mean(x², −1) + eps)` (unit_scaling `rms`, eps inside the root), computed
/// in the norm region's type and returned in the activations' type.
fn rms_norm(g: &mut GraphBuilder, x: &str, eps: f64, ctx: &Ctx) -> String {
    let nt = ctx.ft.norm;
    let x = g.cast(x, nt);
    let sq = g.binary("Mul", &x, &x);
    let axes = g.const_i64(&[1], &[-1]);
    let mean = g.op("ReduceMean", &[&sq, &axes], vec![("keepdims", Attr::Int(1))]);
    let eps = g.scalar_of(nt, eps as f32);
    let var = g.binary("Add", &mean, &eps);
    let rms = g.op("Sqrt", &[&var], vec![]);
    let y = g.binary("Div", &x, &rms);
    g.cast(&y, ctx.ft.act)
}

/// `in_proj` split into queries `[…, H·Dh]`, keys `[…, G·Dh]`, values `[…, G·Dv]` (head-major), with the query
/// per-dim scale and the attention scale 1/Dh folded into the query rows.
fn qkv(
    g: &mut GraphBuilder,
    ckpt: &Toto2Checkpoint,
    prefix: &str,
    x: &str,
    ctx: &Ctx,
) -> Result<Vec<String>> {
    let c = &ctx.cfg;
    let (hq, hk, hv) = (c.num_heads * c.qk_dim, c.num_groups * c.qk_dim, c.num_groups * c.v_dim);
    let q_scale = query_scale(ckpt, prefix, c)?;
    let lin = FoldedLinear::new(ckpt, &format!("{prefix}.attn.in_proj"), false, |row| {
        if row < hq {
            q_scale[row % c.qk_dim]
        } else {
            1.0
        }
    })?
    .quantized(ctx.int8.qkv)
    .typed(ctx.ft.act);
    let y = g.scoped("in_proj", |g| lin.wire(g, ckpt, x))?;
    Ok(g.split(&y, -1, &[hq, hk, hv]))
}

/// Per query channel: `softplus(p)/ln 2` (`uu.PerDimScale`, 1 without one) times the attention scale 1/Dh.
fn query_scale(ckpt: &Toto2Checkpoint, prefix: &str, c: &Toto2Config) -> Result<Vec<f64>> {
    let name = format!("{prefix}.attn._pds.per_dim_scale");
    let pds = if ckpt.has(&name) { ckpt.tensor(&name)?.to_f32_vec() } else { Vec::new() };
    let mult = 1.0 / c.qk_dim as f64;
    Ok((0..c.qk_dim)
        .map(|j| pds.get(j).map_or(1.0, |&p| softplus(f64::from(p)) / std::f64::consts::LN_2) * mult)
        .collect())
}

/// torch's `F.softplus` (beta 1, threshold 20).
fn softplus(x: f64) -> f64 {
    if x > 20.0 {
        x
    } else {
        x.exp().ln_1p()
    }
}

/// `[A, L, heads·dh]` → `[A, heads, L, dh]`.
fn split_heads(g: &mut GraphBuilder, y: &str, heads: usize, dh: usize) -> String {
    let y = shared::reshape(g, y, &[0, 0, heads as i64, dh as i64]);
    g.transpose(&y, &[0, 2, 1, 3])
}

/// RoPE on the first Dr channels of each head, then the xPos scale (`QueryKeyProjection` with
/// `partial_factor=(0, 0.5)`, `ExtrapolatableRotaryProjection`): `(cos·x + sin·rotate(x))·scale`, where
/// `rotate` maps each interleaved pair `(a, b)` to `(−b, a)`. `t`: `[R, heads, L, Dh]`, in the rope region's type.
fn apply_rope(g: &mut GraphBuilder, t: &str, heads: usize, scale: &str, ctx: &Ctx) -> String {
    let (dh, dr) = (ctx.d.qk_dim, ctx.d.rotary_dim);
    let t = g.cast(t, ctx.ft.rope);
    let parts = g.split(&t, -1, &[dr, dh - dr]);
    let pairs = shared::reshape(g, &parts[0], &[0, heads as i64, 0, dr as i64 / 2, 2]);
    let halves = g.split(&pairs, -1, &[1, 1]);
    let neg = g.op("Neg", &[&halves[1]], vec![]);
    let rot = g.op("Concat", &[&neg, &halves[0]], vec![("axis", Attr::Int(-1))]);
    let rot = shared::reshape(g, &rot, &[0, heads as i64, 0, dr as i64]);
    let a = g.binary("Mul", &parts[0], &ctx.rope[0].clone());
    let b = g.binary("Mul", &rot, &ctx.rope[1].clone());
    let y = g.binary("Add", &a, &b);
    let y = g.binary("Mul", &y, scale);
    let y = g.op("Concat", &[&y, &parts[1]], vec![("axis", Attr::Int(-1))]);
    g.cast(&y, ctx.ft.act)
}

/// Grouped-query attention: key/value head j serves query heads `j·rep … j·rep+rep−1` (SDPA `enable_gqa`).
/// `[A, G, S, d]` → `[A, H, S, d]`.
fn expand_kv(g: &mut GraphBuilder, t: &str, dh: usize, ctx: &Ctx) -> String {
    let (heads, groups) = (ctx.d.heads, ctx.d.kv_heads);
    if heads == groups {
        return t.to_string();
    }
    // `[A, G, 1, S, d]` broadcast against `[1, 1, rep, 1, 1]`: A and S stay the input's
    let u = g.unsqueeze(t, &[2]);
    let e = g.expand(&u, &[1, 1, heads / groups, 1, 1]);
    shared::reshape(g, &e, &[0, heads as i64, -1, dh as i64])
}

/// Softmax attention with an additive mask; the 1/Dh scale is already in the queries. The two matmuls run in
/// the activations' type, mask + softmax in the softmax region's (the mask is already in it).
fn sdpa(g: &mut GraphBuilder, q: &str, k: &str, v: &str, mask: &str, ctx: &Ctx) -> String {
    let k_t = g.transpose(k, &[0, 1, 3, 2]);
    let scores = g.binary("MatMul", q, &k_t);
    let scores = g.cast(&scores, ctx.ft.softmax);
    let scores = g.binary("Add", &scores, mask);
    let p = g.op("Softmax", &[&scores], vec![("axis", Attr::Int(-1))]);
    let p = g.cast(&p, ctx.ft.act);
    g.binary("MatMul", &p, v)
}

/// Time attention (`SelfAttention` of a time layer) over each row's tokens: `[R, L, D]` → `[R, L, D]`. Prefill
/// emits the cache (keys after RoPE/xPos, padded to T slots); decode writes its 2B keys/values at `write_pos`
/// and attends over the whole cache under the decode mask.
fn attention_time(
    g: &mut GraphBuilder,
    ckpt: &Toto2Checkpoint,
    prefix: &str,
    x: &str,
    time_index: usize,
    ctx: &Ctx,
) -> Result<String> {
    let (l, c) = (ctx.l, &ctx.cfg);
    let parts = qkv(g, ckpt, prefix, x, ctx)?;
    let q = split_heads(g, &parts[0], c.num_heads, c.qk_dim);
    let k = split_heads(g, &parts[1], c.num_groups, c.qk_dim);
    let v = split_heads(g, &parts[2], c.num_groups, c.v_dim);
    let q = g.scoped("rope_q", |g| apply_rope(g, &q, c.num_heads, &ctx.rope[2].clone(), ctx));
    let k = g.scoped("rope_k", |g| apply_rope(g, &k, c.num_groups, &ctx.rope[3].clone(), ctx));
    let (k_out, v_out) = (k_cache(time_index, true), v_cache(time_index, true));
    let t = ctx.d.cache_slots();
    let (k_all, v_all) = match ctx.kind {
        Toto2GraphKind::Pass => (k, v),
        Toto2GraphKind::Prefill => {
            // the caches are f32 graph outputs in every precision (module docs)
            let pads = g.const_i64(&[8], &[0, 0, 0, 0, 0, 0, (t - l) as i64, 0]);
            let (k32, v32) = (g.cast(&k, DType::F32), g.cast(&v, DType::F32));
            g.op_to("Pad", &[&k32, &pads], &k_out, vec![]);
            g.op_to("Pad", &[&v32, &pads], &v_out, vec![]);
            (k, v)
        }
        Toto2GraphKind::Decode => {
            let (k_in, v_in) = (k_cache(time_index, false), v_cache(time_index, false));
            let (k32, v32) = (g.cast(&k, DType::F32), g.cast(&v, DType::F32));
            let ka = g.scoped("k_update", |g| cache_write(g, &k_in, &k32, &k_out, ctx));
            let va = g.scoped("v_update", |g| cache_write(g, &v_in, &v32, &v_out, ctx));
            (g.cast(&ka, ctx.ft.act), g.cast(&va, ctx.ft.act))
        }
    };
    let k_all = expand_kv(g, &k_all, c.qk_dim, ctx);
    let v_all = expand_kv(g, &v_all, c.v_dim, ctx);
    let o = sdpa(g, &q, &k_all, &v_all, &ctx.time_mask.clone(), ctx);
    let o = g.transpose(&o, &[0, 2, 1, 3]);
    let o = shared::reshape(g, &o, &[0, 0, (c.num_heads * c.v_dim) as i64]);
    out_proj(g, ckpt, prefix, &o, ctx)
}

/// Writes the call's 2B keys (or values) `update [R, G, 2B, d]` into `cache [R, G, T, d]` at slots
/// `write_pos[r] …`, producing the output `out` (which may alias the cache input: the write is the input's only
/// reader). `TensorScatter` (opset 24) writes each row's run at its index; `ScatterND` gets `(r, g, slot)`
/// indices computed from `write_pos`.
fn cache_write(g: &mut GraphBuilder, cache: &str, update: &str, out: &str, ctx: &Ctx) -> String {
    let (r, heads, n) = (ctx.d.rows, ctx.d.kv_heads, ctx.l);
    match ctx.cache_update {
        CacheUpdate::TensorScatter => g.op_to(
            "TensorScatter",
            &[cache, update, sig::WRITE_POS],
            out,
            vec![("axis", Attr::Int(2)), ("mode", Attr::Str("linear"))],
        ),
        CacheUpdate::ScatterNd => {
            let count = r * heads * n;
            let at = |f: &dyn Fn(usize) -> usize| (0..count).map(|i| f(i) as i64).collect::<Vec<_>>();
            let rows = g.const_i64(&[r, heads, n, 1], &at(&|i| i / (heads * n)));
            let groups = g.const_i64(&[r, heads, n, 1], &at(&|i| (i / n) % heads));
            let offsets = g.const_i64(&[r, heads, n, 1], &at(&|i| i % n));
            let pos = g.reshape(sig::WRITE_POS, &[r, 1, 1, 1]);
            let slots = g.binary("Add", &pos, &offsets);
            let idx = g.op("Concat", &[&rows, &groups, &slots], vec![("axis", Attr::Int(-1))]);
            g.op_to("ScatterND", &[cache, &idx, update], out, vec![])
        }
    }
}

/// Variate attention (`SelfAttention` of the variate layer): at each slot, rows attend to the rows of their
/// group (no RoPE, no cache). `[R, L, D]` → `[R, L, D]`.
fn attention_variate(
    g: &mut GraphBuilder,
    ckpt: &Toto2Checkpoint,
    prefix: &str,
    x: &str,
    ctx: &Ctx,
) -> Result<String> {
    let c = &ctx.cfg;
    let xt = g.transpose(x, &[1, 0, 2]);
    let parts = qkv(g, ckpt, prefix, &xt, ctx)?;
    let q = split_heads(g, &parts[0], c.num_heads, c.qk_dim);
    let k = split_heads(g, &parts[1], c.num_groups, c.qk_dim);
    let v = split_heads(g, &parts[2], c.num_groups, c.v_dim);
    let k = expand_kv(g, &k, c.qk_dim, ctx);
    let v = expand_kv(g, &v, c.v_dim, ctx);
    let o = sdpa(g, &q, &k, &v, &ctx.variate_mask.clone(), ctx);
    let o = g.transpose(&o, &[2, 0, 1, 3]);
    let o = shared::reshape(g, &o, &[0, 0, (c.num_heads * c.v_dim) as i64]);
    out_proj(g, ckpt, prefix, &o, ctx)
}

/// `attn.out_proj` with 1/√fan_in and the residual factor τ/√(1+τ²) folded in.
fn out_proj(
    g: &mut GraphBuilder,
    ckpt: &Toto2Checkpoint,
    prefix: &str,
    o: &str,
    ctx: &Ctx,
) -> Result<String> {
    let (branch, _) = tau_factors(ckpt, &format!("{prefix}.attn_tau"))?;
    let lin = FoldedLinear::uniform(ckpt, &format!("{prefix}.attn.out_proj"), false, f64::from(branch))?
        .quantized(ctx.int8.out_proj)
        .typed(ctx.ft.act);
    g.scoped("out_proj", |g| lin.wire(g, ckpt, o))
}

/// `GatedLinearUnitFeedForwardNetwork`: `fc1 → [a | b]`, `a·silu(b)` (the gate is the *second* half), `fc2`
/// (with τ/√(1+τ²) folded in). `[…, D]` → `[…, D]`.
fn ffn(g: &mut GraphBuilder, ckpt: &Toto2Checkpoint, prefix: &str, x: &str, ctx: &Ctx) -> Result<String> {
    let (branch, _) = tau_factors(ckpt, &format!("{prefix}.mlp_tau"))?;
    let fc1 = FoldedLinear::uniform(ckpt, &format!("{prefix}.ffn.fc1"), false, 1.0)?
        .quantized(ctx.int8.fc1)
        .typed(ctx.ft.act);
    let fc2 = FoldedLinear::uniform(ckpt, &format!("{prefix}.ffn.fc2"), false, f64::from(branch))?
        .quantized(ctx.int8.fc2)
        .typed(ctx.ft.act);
    let y = g.scoped("fc1", |g| fc1.wire(g, ckpt, x))?;
    let halves = g.split(&y, -1, &[ctx.cfg.d_ff, ctx.cfg.d_ff]);
    let sig = g.op("Sigmoid", &[&halves[1]], vec![]);
    let silu = g.binary("Mul", &halves[1], &sig);
    let z = g.binary("Mul", &halves[0], &silu);
    g.scoped("fc2", |g| fc2.wire(g, ckpt, &z))
}

/// The hidden states that predict the output patches: `out_index` per row (pass, prefill) or the static tokens
/// `B−1 … 2B−2` (decode, `x[..., -(block+1):-1]`). `[R, L, D]` → `[R, K, D]`.
fn select_outputs(g: &mut GraphBuilder, x: &str, ctx: &Ctx) -> String {
    let (r, l, dm, k) = (ctx.d.rows, ctx.l, ctx.cfg.d_model, ctx.d.outputs(ctx.kind));
    if ctx.symbolic && ctx.kind != Toto2GraphKind::Decode {
        return shared::select_rows(g, x, sig::OUT_INDEX, dm);
    }
    if ctx.kind == Toto2GraphKind::Decode {
        let starts = g.const_i64(&[1], &[k as i64 - 1]);
        let ends = g.const_i64(&[1], &[2 * k as i64 - 1]);
        let axes = g.const_i64(&[1], &[1]);
        return g.op("Slice", &[x, &starts, &ends, &axes], vec![]);
    }
    // A flat Gather keeps the selection exact.
    let flat = g.reshape(x, &[r * l, dm]);
    let base: Vec<i64> = (0..r).flat_map(|i| std::iter::repeat_n((i * l) as i64, k)).collect();
    let base = g.const_i64(&[r, k], &base);
    let idx = g.binary("Add", &base, sig::OUT_INDEX);
    g.op("Gather", &[&flat, &idx], vec![("axis", Attr::Int(0))])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silu_scale_is_unit_scalings_constant() {
        // unit_scaling.functional.silu(mult=1): logarithmic_interpolation(0.8, 2, sqrt(2/(1-1/pi)))
        assert!((silu_scale() - 1.766_782_9).abs() < 1e-7, "{}", silu_scale());
    }

    #[test]
    fn softplus_matches_torch_branches() {
        assert_eq!(softplus(25.0), 25.0);
        assert!((softplus(0.0) - std::f64::consts::LN_2).abs() < 1e-15);
        assert!((softplus(-30.0) - (-30f64).exp()).abs() < 1e-25);
    }
}
