//! Generated ONNX protobuf types (from `proto/onnx.proto`); never edit by hand.
#![allow(clippy::all, missing_docs)]
include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
