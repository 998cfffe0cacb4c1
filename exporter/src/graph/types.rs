//! Element types of graph values, and the typing rules of the ops totoc graphs use.
//!
//! The builder types every value it creates ([`crate::graph::GraphBuilder`]) and refuses a node whose inputs mix
//! float types: an fp16 graph is *strongly typed* — every fp32 region starts and ends at an explicit `Cast`, so no
//! fp16 weight or activation can feed fp32 math (or the reverse) by accident. The same rules let
//! [`crate::graph::emulate`] rewrite an fp16 graph into its fp32 emulation.

use crate::pb::tensor_proto::DataType;
use crate::signature::DType;

/// Element type of a graph value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElemType {
    F32,
    F16,
    I64,
    Bool,
    /// Row-quantized activation codes (`MatMulInteger`'s `A`, zero point 128); never a graph input or output.
    U8,
    /// Quantized weight codes (`MatMulInteger`'s `B`); never a graph input or output.
    I8,
    /// `MatMulInteger`'s exact int32 accumulators.
    I32,
}

impl ElemType {
    pub fn is_float(self) -> bool {
        matches!(self, ElemType::F32 | ElemType::F16)
    }

    /// The ONNX `TensorProto.DataType` number.
    pub fn onnx(self) -> i32 {
        (match self {
            ElemType::F32 => DataType::Float,
            ElemType::F16 => DataType::Float16,
            ElemType::I64 => DataType::Int64,
            ElemType::Bool => DataType::Bool,
            ElemType::U8 => DataType::Uint8,
            ElemType::I8 => DataType::Int8,
            ElemType::I32 => DataType::Int32,
        }) as i32
    }

    /// From an ONNX data type number (`None` for types totoc graphs never use).
    pub fn from_onnx(t: i32) -> Option<Self> {
        match DataType::try_from(t).ok()? {
            DataType::Float => Some(ElemType::F32),
            DataType::Float16 => Some(ElemType::F16),
            DataType::Int64 => Some(ElemType::I64),
            DataType::Bool => Some(ElemType::Bool),
            DataType::Uint8 => Some(ElemType::U8),
            DataType::Int8 => Some(ElemType::I8),
            DataType::Int32 => Some(ElemType::I32),
            _ => None,
        }
    }
}

impl From<DType> for ElemType {
    fn from(d: DType) -> Self {
        match d {
            DType::F32 => ElemType::F32,
            DType::F16 => ElemType::F16,
            DType::I64 => ElemType::I64,
        }
    }
}

/// The type of `op`'s outputs given its input types (`cast_to`: a `Cast`'s `to` attribute). `None` for an op
/// these rules do not know (the caller reports it).
pub fn output_type(op: &str, inputs: &[ElemType], cast_to: Option<i64>) -> Option<ElemType> {
    match op {
        "Cast" => ElemType::from_onnx(cast_to? as i32),
        "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "Not" | "And" | "Or" => {
            Some(ElemType::Bool)
        }
        "Where" => inputs.get(1).copied(),
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "MatMul" | "Max" | "Min" | "Neg" | "Reciprocal" | "Sqrt"
        | "Sigmoid" | "Softplus" | "Softmax" | "ReduceMean" | "ReduceSum" | "Reshape" | "Transpose"
        | "Unsqueeze" | "Expand" | "Split" | "Concat" | "Identity" | "Gather" | "GatherND"
        | "TensorScatter" | "ScatterND" | "Slice" | "Pad" | "Abs" | "ReduceMax" => inputs.first().copied(),
        // codes of the zero point's type
        "QuantizeLinear" => inputs.get(2).copied(),
        "MatMulInteger" => Some(ElemType::I32),
        // ONNX Runtime's contrib op: f32 activations times block-quantized uint8 weights
        "MatMulNBits" => inputs.first().copied(),
        // shape arithmetic of shape-polymorphic graphs
        "Shape" => Some(ElemType::I64),
        "Range" => inputs.first().copied(),
        _ => None,
    }
}

/// The inputs of `op` that must share one element type (the data operands; not shapes, axes or indices).
pub fn same_type_inputs(op: &str, n_inputs: usize) -> Vec<usize> {
    match op {
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "MatMul" | "Max" | "Min" | "Equal" | "Less"
        | "LessOrEqual" | "Greater" | "GreaterOrEqual" => vec![0, 1],
        "Where" => vec![1, 2],
        "Concat" => (0..n_inputs).collect(),
        "TensorScatter" => vec![0, 1],
        "ScatterND" => vec![0, 2],
        // the value and its scale; the codes and their zero point
        "QuantizeLinear" => vec![0, 1],
        "MatMulInteger" => vec![0, 2],
        _ => Vec::new(),
    }
}

/// Whether `op` computes nothing new from fp16 inputs: its outputs are fp16 values whenever its inputs are
/// (data movement, sign, selection, max/min). An fp16 emulation rounds after every *other* op.
pub fn exact_in_input_type(op: &str) -> bool {
    matches!(
        op,
        "Reshape"
            | "Transpose"
            | "Unsqueeze"
            | "Expand"
            | "Split"
            | "Concat"
            | "Identity"
            | "Gather"
            | "GatherND"
            | "TensorScatter"
            | "ScatterND"
            | "Slice"
            | "Pad"
            | "Neg"
            | "Max"
            | "Min"
            | "Where"
            | "Abs"
            | "ReduceMax"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ElemType::*;

    #[test]
    fn typing_rules() {
        assert_eq!(output_type("MatMul", &[F16, F16], None), Some(F16));
        assert_eq!(output_type("Cast", &[F16], Some(1)), Some(F32));
        assert_eq!(output_type("Cast", &[F32], Some(10)), Some(F16));
        assert_eq!(output_type("Equal", &[I64, I64], None), Some(Bool));
        assert_eq!(output_type("Where", &[Bool, F32, F32], None), Some(F32));
        assert_eq!(output_type("Conv", &[F32], None), None);
        assert_eq!(same_type_inputs("ScatterND", 3), vec![0, 2]);
        assert_eq!(same_type_inputs("Concat", 3), vec![0, 1, 2]);
        assert!(same_type_inputs("Reshape", 2).is_empty());
        assert!(exact_in_input_type("TensorScatter") && !exact_in_input_type("Add"));
        assert_eq!(ElemType::from_onnx(F16.onnx()), Some(F16));
        assert_eq!(ElemType::from_onnx(U8.onnx()), Some(U8));
        assert_eq!(output_type("QuantizeLinear", &[F32, F32, U8], None), Some(U8));
        assert_eq!(output_type("MatMulInteger", &[U8, I8, U8], None), Some(I32));
        assert_eq!(same_type_inputs("MatMulInteger", 3), vec![0, 2]);
        assert_eq!(ElemType::from_onnx(I8.onnx()), Some(I8));
        assert_eq!(output_type("Cast", &[I32], Some(1)), Some(F32));
    }
}
