//! The types every exported graph's I/O contract is written in (element types, precisions, static and
//! shape-polymorphic signatures, graph kinds, KV-cache names), shared by the families. Each family defines its
//! own contract from these (`signature.rs` in each family folder).

use serde::{Deserialize, Serialize};

/// Element type of a graph input or output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    F32,
    F16,
    I64,
}

/// Float precision of a graph: the type of its weights, activations and KV caches (with the fp32 islands an fp16
/// graph keeps where precision needs them, see `crate::graph::precision`). `int8`: its large matmuls read int8
/// weights with per-column scales and quantize their input per row (ONNX `MatMulInteger`, see
/// [`crate::quantize`]); everything else — activations between matmuls, KV caches, small weights — is fp32. A bundle may hold graphs of several
/// precisions, each over its own weight file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp32,
    Fp16,
    Int8,
}

impl Precision {
    pub const ALL: [Precision; 3] = [Precision::Fp32, Precision::Fp16, Precision::Int8];

    /// `fp32`, `fp16`, `int8`: as in file names (`weights.fp16.bin`) and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Int8 => "int8",
        }
    }

    /// The element type of the graph's float activations (f32 in an int8 graph: its weights only are int8).
    pub fn dtype(self) -> DType {
        match self {
            Precision::Fp32 | Precision::Int8 => DType::F32,
            Precision::Fp16 => DType::F16,
        }
    }

    /// Bytes of one float activation or cache element.
    pub fn bytes(self) -> u64 {
        match self {
            Precision::Fp32 | Precision::Int8 => 4,
            Precision::Fp16 => 2,
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fp32" => Ok(Precision::Fp32),
            "fp16" => Ok(Precision::Fp16),
            "int8" => Ok(Precision::Int8),
            other => Err(format!("unknown precision {other:?} (fp32, fp16 or int8)")),
        }
    }
}

/// The float element types of a graph's inputs and outputs: the activations' type for patches and caches, and
/// the rotary tables' own (an fp16 graph may keep its rotary math, and so its tables, in fp32). The mixture
/// outputs are always f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoTypes {
    /// Patches and KV caches.
    pub float: DType,
    /// `rope_cos`, `rope_sin`, `xpos_scale`.
    pub rope: DType,
}

impl IoTypes {
    /// Every float input and output f32.
    pub const F32: IoTypes = IoTypes { float: DType::F32, rope: DType::F32 };
}

/// Name, element type and static shape of one graph input or output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSig {
    pub name: String,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl TensorSig {
    pub fn new(name: impl Into<String>, dtype: DType, shape: &[usize]) -> Self {
        Self { name: name.into(), dtype, shape: shape.to_vec() }
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Which kind of graph. Toto's buckets are prefill and decode graphs; a family whose inference has more parts
/// (a tokenizer before and after its transformer, a second token head) names them here too, by what they do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GraphKind {
    /// The context at once, emitting the KV caches.
    Prefill,
    /// One step against the KV caches, updating them.
    Decode,
    /// A tokenizer's encoder: values → tokens.
    Encode,
    /// A full pass over a sliding window whose caches are not kept (every step once the window slides).
    Recompute,
    /// A second token head that conditions on the first token just sampled (one row per path).
    Refine,
    /// A tokenizer's decoder: tokens → values.
    Detokenize,
}

impl GraphKind {
    /// Every kind, in declaration order.
    pub const ALL: [GraphKind; 6] = [
        GraphKind::Prefill,
        GraphKind::Decode,
        GraphKind::Encode,
        GraphKind::Recompute,
        GraphKind::Refine,
        GraphKind::Detokenize,
    ];
    /// The kinds of a patch-transformer family's buckets (Toto): prefill and decode.
    pub const PREFILL_DECODE: [GraphKind; 2] = [GraphKind::Prefill, GraphKind::Decode];

    pub fn as_str(self) -> &'static str {
        match self {
            GraphKind::Prefill => "prefill",
            GraphKind::Decode => "decode",
            GraphKind::Encode => "encode",
            GraphKind::Recompute => "recompute",
            GraphKind::Refine => "refine",
            GraphKind::Detokenize => "detokenize",
        }
    }

    /// Whether a bucket of this kind runs one token per row against `slots` cache slots (its slots are cache
    /// slots `t<T>`), rather than `slots` tokens per row (`s<S>`).
    pub fn per_row(self) -> bool {
        matches!(self, GraphKind::Decode | GraphKind::Refine)
    }
}

/// Name of time-wise layer `i`'s key cache input (`out = true`: the updated output).
pub fn k_cache(i: usize, out: bool) -> String {
    if out {
        format!("k_cache_out.{i}")
    } else {
        format!("k_cache.{i}")
    }
}

/// Name of time-wise layer `i`'s value cache input (`out = true`: the updated output).
pub fn v_cache(i: usize, out: bool) -> String {
    if out {
        format!("v_cache_out.{i}")
    } else {
        format!("v_cache.{i}")
    }
}

/// Symbolic dimension names of the shape-polymorphic graphs.
pub const ROWS: &str = "rows";
pub const SLOTS: &str = "slots";

/// One dimension of a shape-polymorphic graph's input or output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Dim {
    Fixed(usize),
    /// A symbolic dimension ([`ROWS`], [`SLOTS`]).
    Named(String),
}

/// Name, element type and shape (some dimensions symbolic) of a shape-polymorphic graph's input or output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynSig {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<Dim>,
}

impl DynSig {
    /// Whether any dimension is symbolic.
    pub fn is_dynamic(&self) -> bool {
        self.dims.iter().any(|d| matches!(d, Dim::Named(_)))
    }

    /// The static signature at `rows` and `slots`.
    pub fn at(&self, rows: usize, slots: usize) -> TensorSig {
        let shape = self
            .dims
            .iter()
            .map(|d| match d {
                Dim::Fixed(n) => *n,
                Dim::Named(s) if s == ROWS => rows,
                Dim::Named(_) => slots,
            })
            .collect();
        TensorSig { name: self.name.clone(), dtype: self.dtype, shape }
    }
}
