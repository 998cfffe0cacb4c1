//! ONNX Runtime's element types against ONNX's and totoc's dtypes, and its errors as [`Error::Ort`]: the leaf
//! every other graph module uses, so the session glue, the weights and the cache copies need not import each
//! other for them.

use exporter::pb::tensor_proto;
use exporter::signature::DType;
use ort::value::TensorElementType;

use crate::error::Error;

pub(super) fn element_type(onnx: i32) -> Option<TensorElementType> {
    use tensor_proto::DataType as D;
    Some(match D::try_from(onnx).ok()? {
        D::Float => TensorElementType::Float32,
        D::Float16 => TensorElementType::Float16,
        D::Bfloat16 => TensorElementType::Bfloat16,
        D::Double => TensorElementType::Float64,
        D::Int64 => TensorElementType::Int64,
        D::Int32 => TensorElementType::Int32,
        D::Int8 => TensorElementType::Int8,
        D::Uint8 => TensorElementType::Uint8,
        D::Bool => TensorElementType::Bool,
        _ => return None,
    })
}

pub(super) fn ort_error<R>(context: impl Into<String>, e: ort::Error<R>) -> Error {
    Error::Ort { context: context.into(), message: e.message().to_string() }
}

pub(super) fn dtype_of(t: TensorElementType) -> Option<DType> {
    match t {
        TensorElementType::Float32 => Some(DType::F32),
        TensorElementType::Float16 => Some(DType::F16),
        TensorElementType::Int64 => Some(DType::I64),
        _ => None,
    }
}

pub(super) fn element_of(d: DType) -> TensorElementType {
    match d {
        DType::F32 => TensorElementType::Float32,
        DType::F16 => TensorElementType::Float16,
        DType::I64 => TensorElementType::Int64,
    }
}
