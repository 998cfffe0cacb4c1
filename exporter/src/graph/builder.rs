//! A small ONNX graph builder: ops return the name of their output value, as tract's `wire_node` returns outlets.
//!
//! Names are scoped like checkpoint paths (`layers.3.attention.wQKV.MatMul`) so ONNX Runtime profiles and errors
//! point at the Toto block and weight involved. Shape constants are deduplicated; weights go to a shared
//! [`WeightStore`] (external data) so every graph of a bundle references one copy per precision.
//!
//! Every value is typed as it is created ([`crate::graph::types`]): a node whose data inputs mix float types is an
//! error at [`GraphBuilder::finish`], so an fp16 graph's fp32 regions begin and end only at explicit casts.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::graph::precision::Int8Kernel;
use crate::graph::types::{output_type, same_type_inputs, ElemType};
use crate::graph::weights::WeightStore;
use crate::pb::{
    attribute_proto::AttributeType, tensor_proto::DataType, tensor_shape_proto, type_proto, AttributeProto,
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use crate::quantize;
use crate::signature::{DType, Dim, DynSig, TensorSig};

use crate::variant::OpsetVariant;

/// The ONNX Runtime contrib-op domain.
pub const MS_DOMAIN: &str = "com.microsoft";

/// The smallest row maximum [`GraphBuilder::matmul_int8`] quantizes against: keeps an all-zero row's scale
/// positive (f32 normal after the division by 127) without touching any row a model produces.
const ROW_AMAX_FLOOR: f32 = 1e-30;

/// An ONNX attribute value.
pub enum Attr {
    Int(i64),
    Ints(Vec<i64>),
    Float(f32),
    Str(&'static str),
}

/// An ONNX attribute proto.
pub fn attribute(name: &str, value: Attr) -> AttributeProto {
    let mut a = AttributeProto { name: name.to_string(), ..Default::default() };
    match value {
        Attr::Int(i) => {
            a.r#type = AttributeType::Int as i32;
            a.i = i;
        }
        Attr::Ints(v) => {
            a.r#type = AttributeType::Ints as i32;
            a.ints = v;
        }
        Attr::Float(f) => {
            a.r#type = AttributeType::Float as i32;
            a.f = f;
        }
        Attr::Str(s) => {
            a.r#type = AttributeType::String as i32;
            a.s = s.as_bytes().to_vec();
        }
    }
    a
}

fn onnx_type(dtype: DType) -> DataType {
    match dtype {
        DType::F32 => DataType::Float,
        DType::F16 => DataType::Float16,
        DType::I64 => DataType::Int64,
    }
}

/// Value info of a graph input/output with a fully static shape.
pub fn value_info(sig: &TensorSig) -> ValueInfoProto {
    let dims = sig
        .shape
        .iter()
        .map(|&d| tensor_shape_proto::Dimension {
            value: Some(tensor_shape_proto::dimension::Value::DimValue(d as i64)),
            denotation: String::new(),
        })
        .collect();
    ValueInfoProto {
        name: sig.name.clone(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: onnx_type(sig.dtype) as i32,
                shape: Some(TensorShapeProto { dim: dims }),
            })),
            denotation: String::new(),
        }),
        doc_string: String::new(),
    }
}

/// Value info of a shape-polymorphic graph's input/output (symbolic dims as `dim_param`).
pub fn value_info_dyn(sig: &DynSig) -> ValueInfoProto {
    use tensor_shape_proto::dimension::Value;
    let dims = sig
        .dims
        .iter()
        .map(|d| tensor_shape_proto::Dimension {
            value: Some(match d {
                Dim::Fixed(n) => Value::DimValue(*n as i64),
                Dim::Named(s) => Value::DimParam(s.clone()),
            }),
            denotation: String::new(),
        })
        .collect();
    let mut vi = value_info(&TensorSig { name: sig.name.clone(), dtype: sig.dtype, shape: Vec::new() });
    if let Some(type_proto::Value::TensorType(t)) = vi.r#type.as_mut().and_then(|t| t.value.as_mut()) {
        t.shape = Some(TensorShapeProto { dim: dims });
    }
    vi
}

/// Builds one graph.
pub struct GraphBuilder<'w> {
    name: String,
    nodes: Vec<NodeProto>,
    constants: Vec<TensorProto>,
    constant_ids: HashMap<(i32, Vec<i64>, Vec<u8>), String>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    scope: Vec<String>,
    counters: HashMap<String, usize>,
    weights: &'w mut WeightStore,
    variant: OpsetVariant,
    /// The element type of every value created so far.
    types: HashMap<String, ElemType>,
    /// Typing errors, reported by `finish` (ops return names, not results, to keep block code readable).
    type_errors: Vec<String>,
    /// Per-row int8 codes and scales of each value an int8 matmul has read (`quantize_rows`).
    row_codes: HashMap<String, (String, String)>,
}

impl<'w> GraphBuilder<'w> {
    pub fn new(name: &str, weights: &'w mut WeightStore, variant: OpsetVariant) -> Self {
        Self {
            name: name.to_string(),
            nodes: Vec::new(),
            constants: Vec::new(),
            constant_ids: HashMap::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            scope: Vec::new(),
            counters: HashMap::new(),
            weights,
            variant,
            types: HashMap::new(),
            type_errors: Vec::new(),
            row_codes: HashMap::new(),
        }
    }

    /// The element type of value `name` (`None` for a name this builder did not create).
    pub fn type_of(&self, name: &str) -> Option<ElemType> {
        self.types.get(name).copied()
    }

    /// Types a new node's outputs from its inputs; records an error if the inputs mix float types or the op or
    /// an input is unknown.
    fn type_node(
        &mut self,
        node: &str,
        op_type: &str,
        inputs: &[&str],
        outputs: &[String],
        cast_to: Option<i64>,
    ) {
        let mut types = Vec::with_capacity(inputs.len());
        for i in inputs {
            match self.types.get(*i) {
                Some(t) => types.push(*t),
                None => {
                    self.type_errors.push(format!("node {node} ({op_type}) reads `{i}`, which has no type"));
                    return;
                }
            }
        }
        let same = same_type_inputs(op_type, inputs.len());
        if let Some(first) = same.first().and_then(|&i| types.get(i)) {
            if let Some(&k) = same.iter().find(|&&k| types.get(k).is_some_and(|t| t != first)) {
                self.type_errors.push(format!(
                    "node {node} ({op_type}) mixes {first:?} `{}` with {:?} `{}`: insert an explicit Cast",
                    inputs[same[0]], types[k], inputs[k]
                ));
            }
        }
        match output_type(op_type, &types, cast_to) {
            Some(t) => {
                for o in outputs {
                    self.types.insert(o.clone(), t);
                }
            }
            None => self.type_errors.push(format!("node {node}: no typing rule for op {op_type}")),
        }
    }

    /// Runs `f` with `name` appended to the naming scope (like candle's `vb.pp(name)`).
    pub fn scoped<R>(&mut self, name: impl Into<String>, f: impl FnOnce(&mut Self) -> R) -> R {
        self.scope.push(name.into());
        let r = f(self);
        self.scope.pop();
        r
    }

    /// The current scope path, e.g. `layers.3.attention`.
    pub fn path(&self) -> String {
        self.scope.join(".")
    }

    fn unique(&mut self, base: String) -> String {
        let n = self.counters.entry(base.clone()).or_insert(0);
        *n += 1;
        if *n == 1 {
            base
        } else {
            format!("{base}_{}", *n - 1)
        }
    }

    /// Declares a graph input and returns its name.
    pub fn input(&mut self, sig: &TensorSig) -> String {
        self.inputs.push(value_info(sig));
        self.types.insert(sig.name.clone(), sig.dtype.into());
        sig.name.clone()
    }

    /// Declares a shape-polymorphic graph input and returns its name.
    pub fn input_dyn(&mut self, sig: &DynSig) -> String {
        self.inputs.push(value_info_dyn(sig));
        self.types.insert(sig.name.clone(), sig.dtype.into());
        sig.name.clone()
    }

    /// Switches the declared outputs to `sigs`' symbolic shapes (same names, types checked as declared).
    pub fn set_dynamic_outputs(&mut self, sigs: &[DynSig]) {
        for (vi, sig) in self.outputs.iter_mut().zip(sigs) {
            if vi.name == sig.name {
                *vi = value_info_dyn(sig);
            } else {
                self.type_errors.push(format!("output {} declared where {} was expected", vi.name, sig.name));
            }
        }
    }

    /// Declares `value` as the graph output `sig.name` (renaming it through an Identity when needed).
    pub fn output(&mut self, value: &str, sig: &TensorSig) {
        let want: ElemType = sig.dtype.into();
        if let Some(t) = self.type_of(value).filter(|t| *t != want) {
            self.type_errors.push(format!("output {} is declared {want:?} but computed as {t:?}", sig.name));
        }
        if value != sig.name {
            self.nodes.push(NodeProto {
                input: vec![value.to_string()],
                output: vec![sig.name.clone()],
                name: format!("{}.Identity", sig.name),
                op_type: "Identity".into(),
                ..Default::default()
            });
        }
        self.outputs.push(value_info(sig));
    }

    /// Adds a node with one output and returns that output's name.
    pub fn op(&mut self, op_type: &str, inputs: &[&str], attrs: Vec<(&str, Attr)>) -> String {
        self.op_n(op_type, inputs, 1, attrs).pop().expect("one output")
    }

    /// Adds a node whose single output gets the fixed name `out` (graph outputs such as the KV caches: naming the
    /// producing node's output directly avoids an Identity that could cost a cache copy per step).
    pub fn op_to(&mut self, op_type: &str, inputs: &[&str], out: &str, attrs: Vec<(&str, Attr)>) -> String {
        let path = self.path();
        let base = if path.is_empty() { op_type.to_string() } else { format!("{path}.{op_type}") };
        let name = self.unique(base);
        let cast_to = cast_target(&attrs);
        self.type_node(&name, op_type, inputs, &[out.to_string()], cast_to);
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.to_string()],
            name,
            op_type: op_type.into(),
            attribute: attrs.into_iter().map(|(k, v)| attribute(k, v)).collect(),
            ..Default::default()
        });
        out.to_string()
    }

    /// Adds a node with `n` outputs.
    pub fn op_n(
        &mut self,
        op_type: &str,
        inputs: &[&str],
        n: usize,
        attrs: Vec<(&str, Attr)>,
    ) -> Vec<String> {
        self.op_in("", op_type, inputs, n, attrs)
    }

    /// Adds a node of `domain` (`""` for the ONNX ops) with `n` outputs.
    fn op_in(
        &mut self,
        domain: &str,
        op_type: &str,
        inputs: &[&str],
        n: usize,
        attrs: Vec<(&str, Attr)>,
    ) -> Vec<String> {
        let path = self.path();
        let base = if path.is_empty() { op_type.to_string() } else { format!("{path}.{op_type}") };
        let name = self.unique(base);
        let outputs: Vec<String> =
            if n == 1 { vec![name.clone()] } else { (0..n).map(|i| format!("{name}:{i}")).collect() };
        let cast_to = cast_target(&attrs);
        self.type_node(&name, op_type, inputs, &outputs, cast_to);
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.clone(),
            name,
            op_type: op_type.into(),
            domain: domain.into(),
            attribute: attrs.into_iter().map(|(k, v)| attribute(k, v)).collect(),
            ..Default::default()
        });
        outputs
    }

    fn constant(&mut self, dtype: ElemType, dims: &[usize], raw: Vec<u8>) -> String {
        let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let key = (dtype.onnx(), dims.clone(), raw);
        if let Some(name) = self.constant_ids.get(&key) {
            return name.clone();
        }
        let name = format!("const.{}", self.constants.len());
        self.types.insert(name.clone(), dtype);
        self.constants.push(TensorProto {
            dims,
            data_type: dtype.onnx(),
            name: name.clone(),
            raw_data: key.2.clone(),
            ..Default::default()
        });
        self.constant_ids.insert(key, name.clone());
        name
    }

    /// An int64 constant (shapes, axes, indices).
    pub fn const_i64(&mut self, dims: &[usize], values: &[i64]) -> String {
        debug_assert_eq!(dims.iter().product::<usize>(), values.len());
        self.constant(ElemType::I64, dims, values.iter().flat_map(|v| v.to_le_bytes()).collect())
    }

    /// A 1-D int64 constant, e.g. a Reshape target.
    pub fn shape(&mut self, dims: &[usize]) -> String {
        let v: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        self.const_i64(&[v.len()], &v)
    }

    /// A float constant of type `dtype` (f16 values are rounded to nearest, ties to even).
    pub fn const_float(&mut self, dtype: DType, dims: &[usize], values: &[f32]) -> String {
        debug_assert_eq!(dims.iter().product::<usize>(), values.len());
        let raw = match dtype {
            DType::F16 => values.iter().flat_map(|v| half::f16::from_f32(*v).to_le_bytes()).collect(),
            _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        self.constant(dtype.into(), dims, raw)
    }

    /// An f32 constant.
    pub fn const_f32(&mut self, dims: &[usize], values: &[f32]) -> String {
        self.const_float(DType::F32, dims, values)
    }

    /// A scalar constant of type `dtype`.
    pub fn scalar_of(&mut self, dtype: DType, v: f32) -> String {
        self.const_float(dtype, &[], &[v])
    }

    /// A scalar f32 constant.
    pub fn scalar(&mut self, v: f32) -> String {
        self.scalar_of(DType::F32, v)
    }

    /// A weight tensor stored as `dtype` (external data, stored once per weight file). `make` computes its f32
    /// values and runs only the first time `name` is seen.
    pub fn weight(
        &mut self,
        name: &str,
        dims: &[usize],
        dtype: DType,
        make: impl FnOnce() -> Result<Vec<f32>>,
    ) -> Result<String> {
        self.weights.add(name, dims, dtype, make)?;
        self.types.insert(name.to_string(), dtype.into());
        Ok(name.to_string())
    }

    /// `x` quantized per row for [`Self::matmul_int8`]: uint8 codes `round(x / s) + 128` (zero point 128) and
    /// the f32 row scales `s = max(max|x_row|, floor) / 127` (`[.., 1]`), computed once per value `x` however many
    /// int8 matmuls read it. The floor keeps an all-zero row's scale positive (its codes are then all 128).
    fn quantize_rows(&mut self, x: &str) -> (String, String) {
        if let Some(q) = self.row_codes.get(x) {
            return q.clone();
        }
        let amax = self.op("Abs", &[x], vec![]);
        let axis = self.const_i64(&[1], &[-1]);
        let amax = self.op("ReduceMax", &[&amax, &axis], vec![("keepdims", Attr::Int(1))]);
        let floor = self.scalar(ROW_AMAX_FLOOR);
        let amax = self.binary("Max", &amax, &floor);
        let inv = self.scalar((1.0 / quantize::QMAX) as f32);
        let scale = self.binary("Mul", &amax, &inv);
        let unit = self.binary("Div", x, &scale);
        let one = self.scalar(1.0);
        let zero_point = self.constant(ElemType::U8, &[], vec![quantize::ACTIVATION_ZERO_POINT]);
        // QuantizeLinear rounds half to even and saturates to [0, 255]; |unit| ≤ 127 by construction.
        let codes = self.op("QuantizeLinear", &[&unit, &one, &zero_point], vec![]);
        let q = (codes, scale);
        self.row_codes.insert(x.to_string(), q.clone());
        q
    }

    /// `x · W` for a `[K, N]` f32 weight `name` stored as int8 codes with one scale per output column
    /// ([`crate::quantize`]), run by ONNX's `MatMulInteger` on `x` quantized per row (`quantize_rows`):
    /// `(xq − 128) · q` accumulates exactly in int32 and is scaled back by the row's and the column's scales, so a
    /// row's result does not depend on the other rows of the call. `make` computes the f32 `[K, N]` weight and
    /// runs only the first time `name` is seen; `x` must be f32.
    pub fn matmul_int8(
        &mut self,
        x: &str,
        name: &str,
        k: usize,
        n: usize,
        make: impl FnOnce() -> Result<Vec<f32>>,
    ) -> Result<String> {
        let (codes, scales) = (format!("{name}.i8"), format!("{name}.i8_scales"));
        let code_dims = [k, n];
        self.store_quantized((name, (k, n)), (&codes, &code_dims, ElemType::I8), (&scales, n), make, |w| {
            let q = quantize::quantize_kn(w, k, n);
            (q.code_bytes(), q.scales)
        })?;
        let (xq, row_scale) = self.quantize_rows(x);
        let zero_point = self.constant(ElemType::U8, &[], vec![quantize::ACTIVATION_ZERO_POINT]);
        let acc = self.op("MatMulInteger", &[&xq, &codes, &zero_point], vec![]);
        let acc = self.cast(&acc, DType::F32);
        let y = self.binary("Mul", &acc, &row_scale);
        Ok(self.binary("Mul", &y, &scales))
    }

    /// Stores the quantized form of the `[K, N]` (`kn`) f32 weight `name` once: `make` computes the weight (only
    /// the first time `name` is seen), `quantize` turns it into code bytes and f32 scales, stored as `codes` (name,
    /// dims, element type) and `scales` (name, length); both are typed in the graph.
    fn store_quantized(
        &mut self,
        (name, (k, n)): (&str, (usize, usize)),
        (codes, code_dims, code_elem): (&str, &[usize], ElemType),
        (scales, scale_len): (&str, usize),
        make: impl FnOnce() -> Result<Vec<f32>>,
        quantize: impl FnOnce(&[f32]) -> (Vec<u8>, Vec<f32>),
    ) -> Result<()> {
        let mut quantized_scales: Option<Vec<f32>> = None;
        self.weights.add_codes(codes, code_dims, code_elem, || {
            let w = make()?;
            if w.len() != k * n {
                return Err(Error::Graph {
                    graph: self.name.clone(),
                    message: format!("weight {name}: {} values for [{k}, {n}]", w.len()),
                });
            }
            let (bytes, s) = quantize(&w);
            quantized_scales = Some(s);
            Ok(bytes)
        })?;
        self.weights.add(scales, &[scale_len], DType::F32, || {
            quantized_scales.ok_or_else(|| Error::Graph {
                graph: self.name.clone(),
                message: format!("{scales} is missing from the weight file while {codes} is there"),
            })
        })?;
        self.types.insert(codes.to_string(), code_elem);
        self.types.insert(scales.to_string(), ElemType::F32);
        Ok(())
    }

    /// `x · W` for a `[K, N]` f32 weight `name` quantized as `kernel` says: [`Self::matmul_int8`] or
    /// [`Self::matmul_blocks`].
    pub fn matmul_quantized(
        &mut self,
        kernel: Int8Kernel,
        x: &str,
        name: &str,
        k: usize,
        n: usize,
        make: impl FnOnce() -> Result<Vec<f32>>,
    ) -> Result<String> {
        match kernel {
            Int8Kernel::Rows => self.matmul_int8(x, name, k, n, make),
            Int8Kernel::Blocks => self.matmul_blocks(x, name, k, n, make),
        }
    }

    /// `x · W` for a `[K, N]` f32 weight `name` stored as 8-bit codes in blocks of [`quantize::BLOCK`] along K
    /// ([`quantize::quantize_blocks`]), run by ONNX Runtime's `MatMulNBits` at accuracy level 4: the kernel
    /// quantizes `x` in blocks of the same length at run time and accumulates each block's integer dot product
    /// scaled by both blocks' scales. Each row's blocks are quantized on their own, so a row's result does not
    /// depend on the other rows of the call (`int8_packed_requests_equal_single_ones`). `make` computes the f32
    /// `[K, N]` weight and runs only the first time `name` is seen; `x` must be f32.
    pub fn matmul_blocks(
        &mut self,
        x: &str,
        name: &str,
        k: usize,
        n: usize,
        make: impl FnOnce() -> Result<Vec<f32>>,
    ) -> Result<String> {
        let (codes, scales) = (format!("{name}.b8"), format!("{name}.b8_scales"));
        let blocks = k.div_ceil(quantize::BLOCK);
        let code_dims = [n, blocks, quantize::BLOCK];
        let code_layout = (codes.as_str(), &code_dims[..], ElemType::U8);
        self.store_quantized((name, (k, n)), code_layout, (&scales, n * blocks), make, |w| {
            let q = quantize::quantize_blocks(w, k, n);
            (q.codes, q.scales)
        })?;
        let attrs = vec![
            ("K", Attr::Int(k as i64)),
            ("N", Attr::Int(n as i64)),
            ("bits", Attr::Int(8)),
            ("block_size", Attr::Int(quantize::BLOCK as i64)),
            // int8 compute: activations quantized per block at run time (level 1 would dequantize the weights
            // to f32 per call, ~10× slower than the fp32 MatMul on 8-bit weights)
            ("accuracy_level", Attr::Int(4)),
        ];
        Ok(self.op_in(MS_DOMAIN, "MatMulNBits", &[x, &codes, &scales], 1, attrs).pop().expect("one output"))
    }

    /// `x` converted to `to` (nothing when it already has that type).
    pub fn cast(&mut self, x: &str, to: DType) -> String {
        if self.type_of(x) == Some(to.into()) {
            return x.to_string();
        }
        let to: ElemType = to.into();
        self.op("Cast", &[x], vec![("to", Attr::Int(to.onnx() as i64))])
    }

    // --- shorthands for the ops the Toto graph uses

    pub fn reshape(&mut self, x: &str, dims: &[usize]) -> String {
        let s = self.shape(dims);
        self.op("Reshape", &[x, &s], vec![])
    }

    pub fn transpose(&mut self, x: &str, perm: &[i64]) -> String {
        self.op("Transpose", &[x], vec![("perm", Attr::Ints(perm.to_vec()))])
    }

    pub fn unsqueeze(&mut self, x: &str, axes: &[i64]) -> String {
        let a = self.const_i64(&[axes.len()], axes);
        self.op("Unsqueeze", &[x, &a], vec![])
    }

    pub fn expand(&mut self, x: &str, dims: &[usize]) -> String {
        let s = self.shape(dims);
        self.op("Expand", &[x, &s], vec![])
    }

    pub fn split(&mut self, x: &str, axis: i64, sizes: &[usize]) -> Vec<String> {
        let s = self.const_i64(&[sizes.len()], &sizes.iter().map(|&v| v as i64).collect::<Vec<_>>());
        self.op_n("Split", &[x, &s], sizes.len(), vec![("axis", Attr::Int(axis))])
    }

    pub fn binary(&mut self, op: &str, a: &str, b: &str) -> String {
        self.op(op, &[a, b], vec![])
    }

    /// `x · Wᵀ + b` for a torch `Linear` whose transposed weight and bias are already stored.
    pub fn linear(&mut self, x: &str, weight_t: &str, bias: &str) -> String {
        let y = self.op("MatMul", &[x, weight_t], vec![]);
        self.op("Add", &[&y, bias], vec![])
    }

    /// Finishes the graph into a model; fails on the first typing error.
    pub fn finish(self, doc: &str, metadata: &[(&str, String)]) -> Result<ModelProto> {
        if self.outputs.is_empty() {
            return Err(Error::Graph { graph: self.name, message: "graph has no outputs".into() });
        }
        if let Some(e) = self.type_errors.first() {
            let more = match self.type_errors.len() {
                1 => String::new(),
                n => format!(" (and {} more typing errors)", n - 1),
            };
            return Err(Error::Graph { graph: self.name, message: format!("{e}{more}") });
        }
        let mut initializer = self.constants;
        initializer.extend(self.weights.references(&used_inputs(&self.nodes)));
        let mut opset_import =
            vec![OperatorSetIdProto { domain: String::new(), version: self.variant.opset() }];
        if self.nodes.iter().any(|n| n.domain == MS_DOMAIN) {
            opset_import.push(OperatorSetIdProto { domain: MS_DOMAIN.into(), version: 1 });
        }
        Ok(ModelProto {
            ir_version: self.variant.ir_version(),
            opset_import,
            producer_name: "totoc".into(),
            producer_version: env!("CARGO_PKG_VERSION").into(),
            doc_string: doc.into(),
            graph: Some(GraphProto {
                node: self.nodes,
                name: self.name,
                initializer,
                input: self.inputs,
                output: self.outputs,
                ..Default::default()
            }),
            metadata_props: metadata
                .iter()
                .map(|(k, v)| StringStringEntryProto { key: k.to_string(), value: v.clone() })
                .collect(),
            ..Default::default()
        })
    }
}

/// A `Cast` node's `to` attribute.
fn cast_target(attrs: &[(&str, Attr)]) -> Option<i64> {
    attrs.iter().find_map(|(k, v)| match (k, v) {
        (&"to", Attr::Int(t)) => Some(*t),
        _ => None,
    })
}

fn used_inputs(nodes: &[NodeProto]) -> std::collections::BTreeSet<String> {
    nodes.iter().flat_map(|n| n.input.iter().cloned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signature::DType;

    fn sig(name: &str, dtype: DType) -> TensorSig {
        TensorSig { name: name.into(), dtype, shape: vec![2] }
    }

    #[test]
    fn mixed_float_types_are_refused_and_casts_type_their_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = WeightStore::create(&dir.path().join("w.bin"), "w.bin").unwrap();
        let mut g = GraphBuilder::new("t", &mut w, OpsetVariant::Opset24);
        let a = g.input(&sig("a", DType::F16));
        let b = g.weight("b", &[2], DType::F32, || Ok(vec![1.0, 2.0])).unwrap();
        let bad = g.binary("Add", &a, &b);
        g.output(&bad, &sig("y", DType::F16));
        let e = g.finish("", &[]).unwrap_err().to_string();
        assert!(e.contains("mixes F16 `a` with F32 `b`") && e.contains("explicit Cast"), "{e}");

        let mut g = GraphBuilder::new("t", &mut w, OpsetVariant::Opset24);
        let a = g.input(&sig("a", DType::F16));
        let a32 = g.cast(&a, DType::F32);
        assert_eq!(g.type_of(&a32), Some(ElemType::F32));
        assert_eq!(g.cast(&a32, DType::F32), a32, "a cast to the same type is no node");
        let b = g.weight("b", &[2], DType::F32, || unreachable!("stored once")).unwrap();
        let y = g.binary("Add", &a32, &b);
        g.output(&y, &sig("y", DType::F16));
        let e = g.finish("", &[]).unwrap_err().to_string();
        assert!(e.contains("output y is declared F16 but computed as F32"), "{e}");
    }
}
