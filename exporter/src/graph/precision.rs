//! Where an fp16 graph keeps fp32: its *fp32 regions*.
//!
//! An fp16 graph stores its weights, activations and KV caches in fp16 (half the memory and bandwidth; tensor-core
//! matmuls accumulate in fp32 and round their outputs), and computes in fp32 only where fp16 breaks the result.
//! Each region is entered and left through explicit `Cast` nodes, and the weights it reads are stored as f32
//! (the builder refuses mixed-type nodes, so nothing crosses a region boundary implicitly).
//!
//! Regions ([`Fp32Region`]):
//! * `rms_norm` — the mean of squares, its `+ 1e-8` and the division. Squares overflow fp16 above |x| = 256 and
//!   `1e-8` is 0 in fp16 (its smallest subnormal is 6e-8), so an fp16 RMSNorm returns inf/NaN on large
//!   activations and divides by 0 on a zero row. The scale multiply stays inside, the result is cast back.
//! * `softmax` — attention scores after `Q·Kᵀ`: the `1/√Dh` scale, the additive mask (−inf) and the softmax.
//! * `head` — the mixture head: its one matmul (the unembedding and the four `Linear(D → K)` projections,
//!   folded), softplus (df, scale), the `max(·, eps)` floors (`f32::EPSILON` is below fp16's normal range) and the
//!   weights' softmax; the outputs are f32 anyway.
//! * `residual` — the residual stream `x + Attn(·)`, `x + MLP(·)` between layers.
//! * `rope` — rotary/xPos application, with f32 rotary tables as inputs: xPos scales reach `0.29^±(pos/512)`.
//! * `unembed` — the output head's one MatMul (the `Linear(D → P·D)` unembedding folded into the four heads at
//!   export, `graph::toto::folded_head`) in f32 even where the `head` region is off; with `head` on it already is.
//!
//! The default ([`Fp16Plan::DEFAULT`]: `rms_norm`, `softmax`, `head`, `residual`) is what the measured error
//! analysis supports (docs/gpu.md; `engines/tests/fp16.rs` `fp16_region_ablation` measures every
//! region on the fixtures): without the RMSNorm region the worst error grows 11×; the residual region thirds it
//! (it costs two casts and an fp32 add per block, no weights); the head region (with the unembedding folded into
//! it, 4.7M weights on the base model) nearly halves it; softmax guards large scores (no change on random
//! weights); rope buys nothing measurable.
//! `exporter/tests/fp16_graph.rs` asserts the plan.
//!
//! Where an int8 graph keeps fp32: the matmul roles outside its [`Int8Plan`].

use crate::signature::{DType, IoTypes, Precision};

/// One fp32 region of an fp16 graph (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fp32Region {
    RmsNorm,
    Softmax,
    Head,
    Residual,
    Rope,
    Unembed,
}

impl Fp32Region {
    pub const ALL: [Fp32Region; 6] = [
        Fp32Region::RmsNorm,
        Fp32Region::Softmax,
        Fp32Region::Head,
        Fp32Region::Residual,
        Fp32Region::Rope,
        Fp32Region::Unembed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Fp32Region::RmsNorm => "rms_norm",
            Fp32Region::Softmax => "softmax",
            Fp32Region::Head => "head",
            Fp32Region::Residual => "residual",
            Fp32Region::Rope => "rope",
            Fp32Region::Unembed => "unembed",
        }
    }
}

/// The fp32 regions an fp16 graph keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fp16Plan {
    pub rms_norm: bool,
    pub softmax: bool,
    pub head: bool,
    pub residual: bool,
    pub rope: bool,
    pub unembed: bool,
}

impl Fp16Plan {
    /// The regions totoc's fp16 graphs keep in fp32 (see the module docs and the error table of docs/gpu.md).
    pub const DEFAULT: Fp16Plan =
        Fp16Plan { rms_norm: true, softmax: true, head: true, residual: true, rope: false, unembed: false };
    /// fp16 everywhere (only the outputs cast to f32): the baseline of the error analysis.
    pub const NONE: Fp16Plan = Fp16Plan {
        rms_norm: false,
        softmax: false,
        head: false,
        residual: false,
        rope: false,
        unembed: false,
    };

    pub fn has(&self, r: Fp32Region) -> bool {
        match r {
            Fp32Region::RmsNorm => self.rms_norm,
            Fp32Region::Softmax => self.softmax,
            Fp32Region::Head => self.head,
            Fp32Region::Residual => self.residual,
            Fp32Region::Rope => self.rope,
            Fp32Region::Unembed => self.unembed,
        }
    }

    /// This plan with region `r` turned on or off.
    pub fn with(mut self, r: Fp32Region, on: bool) -> Self {
        match r {
            Fp32Region::RmsNorm => self.rms_norm = on,
            Fp32Region::Softmax => self.softmax = on,
            Fp32Region::Head => self.head = on,
            Fp32Region::Residual => self.residual = on,
            Fp32Region::Rope => self.rope = on,
            Fp32Region::Unembed => self.unembed = on,
        }
        self
    }

    /// The regions it keeps, in [`Fp32Region::ALL`] order.
    pub fn regions(&self) -> Vec<Fp32Region> {
        Fp32Region::ALL.into_iter().filter(|r| self.has(*r)).collect()
    }
}

impl Default for Fp16Plan {
    fn default() -> Self {
        Fp16Plan::DEFAULT
    }
}

/// How an int8 role's matmul runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Int8Kernel {
    /// ONNX `MatMulInteger` on per-row activation codes and int8 weights with one scale per output column
    /// ([`crate::graph::GraphBuilder::matmul_int8`]): the fastest with many rows per call.
    Rows,
    /// ONNX Runtime's `MatMulNBits` (8 bits, accuracy level 4): weights and activations both quantized in blocks
    /// of [`crate::quantize::BLOCK`] values along K ([`crate::graph::GraphBuilder::matmul_blocks`]). An outlier
    /// activation channel coarsens only its own block, not the whole row: the int8 kernel that keeps Toto 1.0's
    /// MLP within the goal (docs/precision.md).
    Blocks,
}

impl Int8Kernel {
    /// The name `export --int8-roles` and the manifest use (`role:blocks`); `Rows` is the unsuffixed default.
    pub fn as_str(&self) -> &'static str {
        match self {
            Int8Kernel::Rows => "rows",
            Int8Kernel::Blocks => "blocks",
        }
    }
}

/// The transformer matmul roles an int8 graph quantizes, each with its [`Int8Kernel`]; the other roles are fp32
/// `MatMul`s over f32 weights stored in the same `weights.int8.bin`, and the input projection and output head are
/// fp32 always. Defined by role, so one set applies to every size of a family. The roles, in both families:
///
/// | role | Toto 1.0 checkpoint name | Toto 2.0 checkpoint name |
/// |---|---|---|
/// | `qkv` | `attention.wQKV` | `attn.in_proj` |
/// | `out_proj` | `attention.wO` | `attn.out_proj` |
/// | `fc1` | `mlp.0` | `ffn.fc1` (the gated unit's two halves) |
/// | `fc2` | `mlp.2` | `ffn.fc2` |
///
/// (time-wise and space-wise layers alike). Each family's default is chosen by its own role ablation on its
/// trained model (docs/precision.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Int8Plan {
    pub qkv: Option<Int8Kernel>,
    pub out_proj: Option<Int8Kernel>,
    pub fc1: Option<Int8Kernel>,
    pub fc2: Option<Int8Kernel>,
}

impl Int8Plan {
    /// Every transformer matmul in int8, per row (`MatMulInteger`).
    pub const ALL: Int8Plan = Int8Plan {
        qkv: Some(Int8Kernel::Rows),
        out_proj: Some(Int8Kernel::Rows),
        fc1: Some(Int8Kernel::Rows),
        fc2: Some(Int8Kernel::Rows),
    };
    /// No matmul in int8 (what fp32 and fp16 graphs are built with).
    pub const NONE: Int8Plan = Int8Plan { qkv: None, out_proj: None, fc1: None, fc2: None };
    pub const ROLES: [&'static str; 4] = ["qkv", "out_proj", "fc1", "fc2"];

    /// Role `name`'s kernel (`None`: fp32, or not a role of [`Int8Plan::ROLES`]).
    pub fn kernel(&self, name: &str) -> Option<Int8Kernel> {
        match name {
            "qkv" => self.qkv,
            "out_proj" => self.out_proj,
            "fc1" => self.fc1,
            "fc2" => self.fc2,
            _ => None,
        }
    }

    /// Whether role `name` (one of [`Int8Plan::ROLES`]) is int8.
    pub fn has(&self, name: &str) -> bool {
        self.kernel(name).is_some()
    }

    /// This plan with role `name` int8 per row (`on`) or fp32 (unknown names change nothing).
    pub fn with(self, name: &str, on: bool) -> Self {
        self.with_kernel(name, on.then_some(Int8Kernel::Rows))
    }

    /// This plan with role `name` run by `kernel` (`None`: fp32; unknown names change nothing).
    pub fn with_kernel(mut self, name: &str, kernel: Option<Int8Kernel>) -> Self {
        match name {
            "qkv" => self.qkv = kernel,
            "out_proj" => self.out_proj = kernel,
            "fc1" => self.fc1 = kernel,
            "fc2" => self.fc2 = kernel,
            _ => {}
        }
        self
    }

    /// The int8 roles, in [`Int8Plan::ROLES`] order.
    pub fn roles(&self) -> Vec<&'static str> {
        Self::ROLES.into_iter().filter(|r| self.has(r)).collect()
    }

    /// How the plan is written (the export manifest's `inputs.int8_plan`): its roles comma-separated in
    /// [`Int8Plan::ROLES`] order, a block-quantized one as `role:blocks`, or `none`; [`Int8Plan::parse`] reads it
    /// back.
    pub fn describe(&self) -> String {
        let roles: Vec<String> = Self::ROLES
            .into_iter()
            .filter_map(|r| {
                self.kernel(r).map(|k| match k {
                    Int8Kernel::Rows => r.to_string(),
                    Int8Kernel::Blocks => format!("{r}:{}", k.as_str()),
                })
            })
            .collect();
        if roles.is_empty() {
            "none".into()
        } else {
            roles.join(",")
        }
    }

    /// The plan a user names (`export --int8-roles`): `all` (every role per row), `none`, or a comma list of
    /// [`Int8Plan::ROLES`], each optionally `:rows` (the default) or `:blocks`. Unknown or repeated names are an
    /// error naming the valid ones.
    pub fn parse(text: &str) -> Result<Int8Plan, String> {
        let text = text.trim();
        match text {
            "all" => return Ok(Int8Plan::ALL),
            "none" => return Ok(Int8Plan::NONE),
            _ => {}
        }
        let mut plan = Int8Plan::NONE;
        for item in text.split(',').map(str::trim) {
            let (name, kernel) = match item.split_once(':').map(|(n, k)| (n.trim(), k.trim())) {
                None => (item, Int8Kernel::Rows),
                Some((name, "rows")) => (name, Int8Kernel::Rows),
                Some((name, "blocks")) => (name, Int8Kernel::Blocks),
                Some((_, other)) => {
                    return Err(format!(
                    "{item:?}: {other:?} is not an int8 kernel: give `rows` (MatMulInteger, the default) or \
                         `blocks` (MatMulNBits), e.g. `fc1:blocks`"
                ))
                }
            };
            if !Self::ROLES.contains(&name) {
                return Err(format!(
                    "{name:?} is not an int8 role: give `all`, `none` or a comma list of {} (each optionally \
                     `:blocks`)",
                    Self::ROLES.join(", ")
                ));
            }
            if plan.has(name) {
                return Err(format!("int8 role {name:?} is named twice"));
            }
            plan = plan.with_kernel(name, Some(kernel));
        }
        Ok(plan)
    }
}

/// The float types a graph of `precision` computes each part in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloatTypes {
    /// Weights and activations outside the fp32 regions; the KV caches.
    pub act: DType,
    pub norm: DType,
    pub softmax: DType,
    pub head: DType,
    pub residual: DType,
    pub rope: DType,
    pub unembed: DType,
}

impl FloatTypes {
    pub fn new(precision: Precision, plan: &Fp16Plan) -> Self {
        let act = precision.dtype();
        let pick = |r: Fp32Region| if precision == Precision::Fp16 && plan.has(r) { DType::F32 } else { act };
        FloatTypes {
            act,
            norm: pick(Fp32Region::RmsNorm),
            softmax: pick(Fp32Region::Softmax),
            head: pick(Fp32Region::Head),
            residual: pick(Fp32Region::Residual),
            rope: pick(Fp32Region::Rope),
            unembed: pick(Fp32Region::Unembed),
        }
    }

    /// The graph's input/output float types.
    pub fn io(&self) -> IoTypes {
        IoTypes { float: self.act, rope: self.rope }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fp32_graphs_have_no_regions_and_fp16_graphs_the_plans() {
        let t = FloatTypes::new(Precision::Fp32, &Fp16Plan::DEFAULT);
        assert!([t.act, t.norm, t.softmax, t.head, t.residual, t.rope, t.unembed]
            .iter()
            .all(|d| *d == DType::F32));
        let t = FloatTypes::new(Precision::Fp16, &Fp16Plan::DEFAULT);
        assert_eq!((t.act, t.norm, t.softmax, t.head), (DType::F16, DType::F32, DType::F32, DType::F32));
        assert_eq!(t.io(), IoTypes { float: DType::F16, rope: t.rope });
        let none = FloatTypes::new(Precision::Fp16, &Fp16Plan::NONE);
        assert_eq!(none.norm, DType::F16);
        let with_rope = Fp16Plan::NONE.with(Fp32Region::Rope, true);
        assert_eq!(FloatTypes::new(Precision::Fp16, &with_rope).io().rope, DType::F32);
        assert_eq!(with_rope.regions(), vec![Fp32Region::Rope]);
    }

    #[test]
    fn int8_plans_name_their_roles() {
        assert_eq!(Int8Plan::ALL.roles(), Int8Plan::ROLES);
        assert!(Int8Plan::NONE.roles().is_empty());
        let rows = Some(Int8Kernel::Rows);
        assert_eq!(
            Int8Plan::ALL.with("out_proj", false),
            Int8Plan { qkv: rows, out_proj: None, fc1: rows, fc2: rows }
        );
        let attention = Int8Plan { qkv: rows, out_proj: rows, fc1: None, fc2: None };
        assert_eq!(Int8Plan::NONE.with("qkv", true).with("out_proj", true), attention);
        // an unknown role is no role and changes nothing
        assert!(!Int8Plan::ALL.has("wQKV"));
        assert_eq!(Int8Plan::NONE.with("mlp", true), Int8Plan::NONE);
        let blocks = Int8Plan::NONE.with_kernel("fc1", Some(Int8Kernel::Blocks));
        assert!(blocks.has("fc1") && blocks.kernel("fc1") == Some(Int8Kernel::Blocks));
        assert_eq!(blocks.roles(), vec!["fc1"]);
    }

    #[test]
    fn int8_plans_parse_from_role_lists() {
        assert_eq!(Int8Plan::parse("all"), Ok(Int8Plan::ALL));
        assert_eq!(Int8Plan::parse("none"), Ok(Int8Plan::NONE));
        let rows = Some(Int8Kernel::Rows);
        let attention = Int8Plan { qkv: rows, out_proj: rows, fc1: None, fc2: None };
        assert_eq!(Int8Plan::parse("qkv, out_proj"), Ok(attention));
        assert_eq!(Int8Plan::parse("qkv:rows,out_proj"), Ok(attention));
        let mixed = attention
            .with_kernel("fc1", Some(Int8Kernel::Blocks))
            .with_kernel("fc2", Some(Int8Kernel::Blocks));
        assert_eq!(Int8Plan::parse("fc2:blocks, qkv, fc1 : blocks,out_proj"), Ok(mixed));
        assert_eq!(mixed.describe(), "qkv,out_proj,fc1:blocks,fc2:blocks");
        let e = Int8Plan::parse("fc1:nbits").unwrap_err();
        assert!(e.contains("\"nbits\" is not an int8 kernel") && e.contains("`blocks`"), "{e}");
        assert!(Int8Plan::parse("mlp:blocks").unwrap_err().contains("\"mlp\" is not an int8 role"));
        assert!(Int8Plan::parse("fc1,fc1:blocks").unwrap_err().contains("named twice"));
        assert_eq!(Int8Plan::parse("fc2,fc1,qkv"), Ok(Int8Plan::ALL.with("out_proj", false)));
        let e = Int8Plan::parse("qkv,mlp").unwrap_err();
        assert!(e.contains("\"mlp\" is not an int8 role") && e.contains("qkv, out_proj, fc1, fc2"), "{e}");
        assert!(Int8Plan::parse("").unwrap_err().contains("is not an int8 role"));
        assert!(Int8Plan::parse("fc1,fc1").unwrap_err().contains("named twice"));
        for plan in [Int8Plan::ALL, Int8Plan::NONE, attention, Int8Plan::ALL.with("out_proj", false), mixed] {
            assert_eq!(Int8Plan::parse(&plan.describe()), Ok(plan));
        }
        assert_eq!(Int8Plan::NONE.describe(), "none");
        assert_eq!(attention.describe(), "qkv,out_proj");
    }
}
