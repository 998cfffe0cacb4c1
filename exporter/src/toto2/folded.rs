//! The Toto 2.0 linear layers with u-μP's scales folded into their stored weights ([`FoldedLinear`]), as the
//! graphs of [`crate::toto2::graph`] wire them (its module docs say what is folded and why).

use crate::error::Result;
use crate::graph::builder::GraphBuilder;
use crate::graph::precision::Int8Kernel;
use crate::signature::DType;
use crate::toto2::checkpoint::Toto2Checkpoint;

/// A `uu.Linear`/`uu.LinearReadout` with its forward scale and any per-output-row factor folded into the stored
/// weight (transposed to `[in, out]` for MatMul) and bias: `y = x·(W·s·f·c)ᵀ + b·s·f`, s = 1/√fan_in (1/fan_in
/// for a readout), f the row factor, c a scale of the input. Stored once per bundle as `{prefix}.weight.folded` / `{prefix}.bias.folded`.
pub struct FoldedLinear {
    prefix: String,
    inp: usize,
    out: usize,
    /// Per output row: s·f.
    factor: Vec<f64>,
    /// A scale of the layer's input, folded into the weight only.
    input_scale: f64,
    /// Stored quantized for this int8 kernel ([`GraphBuilder::matmul_quantized`]); `None`: as `dtype`.
    int8: Option<Int8Kernel>,
    /// The type its weight and bias are stored and computed in (f32 unless an fp16 graph runs it in fp16).
    dtype: DType,
    has_bias: bool,
}

impl FoldedLinear {
    /// One factor for every row.
    pub fn uniform(ckpt: &Toto2Checkpoint, prefix: &str, readout: bool, factor: f64) -> Result<Self> {
        Self::new(ckpt, prefix, readout, |_| factor)
    }

    /// Row `o`'s factor is `row_factor(o)`.
    pub fn new(
        ckpt: &Toto2Checkpoint,
        prefix: &str,
        readout: bool,
        row_factor: impl Fn(usize) -> f64,
    ) -> Result<Self> {
        let w = ckpt.tensor(&format!("{prefix}.weight"))?;
        let (out, inp) = (w.shape[0], w.shape[1]);
        let s = if readout { 1.0 / inp as f64 } else { 1.0 / (inp as f64).sqrt() };
        Ok(FoldedLinear {
            prefix: prefix.to_string(),
            inp,
            out,
            factor: (0..out).map(|o| s * row_factor(o)).collect(),
            input_scale: 1.0,
            int8: None,
            dtype: DType::F32,
            has_bias: ckpt.has(&format!("{prefix}.bias")),
        })
    }

    /// Stores the folded weight quantized for `kernel` (`None`: as `dtype`; the bias stays f32).
    pub fn quantized(mut self, kernel: Option<Int8Kernel>) -> Self {
        self.int8 = kernel;
        self
    }

    /// Stores the weight and bias as `dtype` (the type of the block that runs the layer).
    pub fn typed(mut self, dtype: DType) -> Self {
        self.dtype = dtype;
        self
    }

    /// Folds a constant that multiplies the layer's input (`Linear(c·x)`) into the weight.
    pub fn with_input_scale(mut self, c: f64) -> Self {
        self.input_scale = c;
        self
    }

    /// The folded `[in, out]` weight.
    pub fn weight(&self, ckpt: &Toto2Checkpoint) -> Result<Vec<f32>> {
        let w = ckpt.tensor(&format!("{}.weight", self.prefix))?.to_f32_vec();
        let mut t = vec![0f32; w.len()];
        for o in 0..self.out {
            for i in 0..self.inp {
                t[i * self.out + o] =
                    (f64::from(w[o * self.inp + i]) * self.factor[o] * self.input_scale) as f32;
            }
        }
        Ok(t)
    }

    /// The folded bias in f64 (zeros without one).
    pub fn bias(&self, ckpt: &Toto2Checkpoint) -> Result<Vec<f64>> {
        if !self.has_bias {
            return Ok(vec![0.0; self.out]);
        }
        let b = ckpt.tensor(&format!("{}.bias", self.prefix))?.to_f32_vec();
        Ok(b.iter().zip(&self.factor).map(|(&b, f)| f64::from(b) * f).collect())
    }

    fn store_weight(&self, g: &mut GraphBuilder, ckpt: &Toto2Checkpoint) -> Result<String> {
        g.weight(&format!("{}.weight.folded", self.prefix), &[self.inp, self.out], self.dtype, || {
            self.weight(ckpt)
        })
    }

    /// `x·Wᵀ + b`.
    pub fn wire(&self, g: &mut GraphBuilder, ckpt: &Toto2Checkpoint, x: &str) -> Result<String> {
        let y = self.wire_no_bias(g, ckpt, x)?;
        if !self.has_bias {
            return Ok(y);
        }
        let b = g.weight(&format!("{}.bias.folded", self.prefix), &[self.out], self.dtype, || {
            Ok(self.bias(ckpt)?.iter().map(|&v| v as f32).collect())
        })?;
        Ok(g.binary("Add", &y, &b))
    }

    /// `x·Wᵀ`.
    pub fn wire_no_bias(&self, g: &mut GraphBuilder, ckpt: &Toto2Checkpoint, x: &str) -> Result<String> {
        if let Some(kernel) = self.int8 {
            let name = format!("{}.weight.folded", self.prefix);
            return g.matmul_quantized(kernel, x, &name, self.inp, self.out, || self.weight(ckpt));
        }
        let w = self.store_weight(g, ckpt)?;
        Ok(g.binary("MatMul", x, &w))
    }

    /// `x·Wᵀ + b + other.b` (two branches that are summed share one bias).
    pub(crate) fn wire_with_extra_bias(
        &self,
        g: &mut GraphBuilder,
        ckpt: &Toto2Checkpoint,
        x: &str,
        other: &FoldedLinear,
    ) -> Result<String> {
        let y = self.wire_no_bias(g, ckpt, x)?;
        let name = format!("{}.bias.folded+{}.bias", self.prefix, other.prefix);
        let b = g.weight(&name, &[self.out], self.dtype, || {
            let (a, b) = (self.bias(ckpt)?, other.bias(ckpt)?);
            Ok(a.iter().zip(&b).map(|(x, y)| (x + y) as f32).collect())
        })?;
        Ok(g.binary("Add", &y, &b))
    }
}
