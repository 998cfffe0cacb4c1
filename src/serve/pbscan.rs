//! Counting a gRPC message before prost builds it. prost materialises every entry of a repeated field as it
//! decodes: an empty `inputs` entry is 2 bytes on the wire and a ~300-byte struct once built, so 16 MiB of them
//! become gigabytes before any handler runs. [`prescan`] walks the message's keys (prost's own `decode_key` and
//! varints, nothing built) and refuses, with INVALID_ARGUMENT naming the field and the limit, more entries than
//! this model can take (the same limits as REST: [`kserve::MAX_INPUTS`], [`kserve::MAX_OUTPUTS`],
//! [`kserve::MAX_DIMS`], [`kserve::MAX_PARAMETERS`], names and strings of [`kserve::MAX_NAME`] /
//! [`kserve::MAX_TEXT`] bytes; tensor contents other than `fp32_contents` and `int64_contents`, which no input
//! of this model takes, are refused too). It returns an upper bound of what decoding the message builds, which
//! the server holds from its bytes budget before prost runs (the codec, codec.rs).

use bytes::Buf;
use prost::encoding::{decode_key, decode_varint, WireType};

use super::error::ServeError;
use super::grpc::pb;
use super::kserve::{MAX_DIMS, MAX_INPUTS, MAX_NAME, MAX_OUTPUTS, MAX_PARAMETERS, MAX_TEXT};
use engines::bounded::VALUE_BYTES;

/// What a message holds, counted from its keys.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub inputs: usize,
    pub outputs: usize,
    pub raw: usize,
    pub parameters: usize,
    pub dims: usize,
    /// Elements of typed contents (`fp32_contents`, `int64_contents`).
    pub values: u64,
    /// Bytes of `raw_input_contents`.
    pub raw_bytes: u64,
}

impl Counts {
    /// An upper bound of what decoding and planning this message builds, beyond its own bytes: each typed
    /// value or 4 raw bytes (an FP32 element) becomes a value of [`VALUE_BYTES`] (typed, then one point of a
    /// series), raw bytes are copied once, every struct and map entry twice its size (vector growth).
    pub fn decoded_bytes(&self, wire: u64) -> u64 {
        let tensor = std::mem::size_of::<pb::model_infer_request::InferInputTensor>() as u64;
        let output = std::mem::size_of::<pb::model_infer_request::InferRequestedOutputTensor>() as u64;
        let entry = 256u64; // a map entry: its key, an InferParameter and the hash table's share
        wire.saturating_add(self.values.saturating_mul(VALUE_BYTES))
            .saturating_add(self.raw_bytes.saturating_add(self.raw_bytes / 4 * VALUE_BYTES))
            .saturating_add(2 * (self.inputs as u64 * tensor + self.outputs as u64 * output))
            .saturating_add(self.parameters as u64 * entry + self.dims as u64 * 16)
            .saturating_add(4096)
    }
}

fn invalid(msg: String) -> ServeError {
    ServeError::BadRequest(msg)
}

/// One protobuf message's bytes, walked field by field.
struct Fields<'a> {
    buf: &'a [u8],
    /// The message, for messages (`ModelInferRequest.inputs[0]`).
    at: &'a str,
}

/// A field's value as it appears on the wire.
enum Value<'a> {
    Varint,
    Fixed,
    Bytes(&'a [u8]),
}

impl<'a> Fields<'a> {
    fn malformed(&self) -> ServeError {
        invalid(format!("{}: the message is not valid protobuf", self.at))
    }

    /// The next field's number and value, or `None` at the end.
    fn next_field(&mut self) -> Result<Option<(u32, WireType, Value<'a>)>, ServeError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let (tag, wire) = decode_key(&mut self.buf).map_err(|_| self.malformed())?;
        let value = match wire {
            WireType::Varint => {
                decode_varint(&mut self.buf).map_err(|_| self.malformed())?;
                Value::Varint
            }
            WireType::SixtyFourBit | WireType::ThirtyTwoBit => {
                let n = if wire == WireType::SixtyFourBit { 8 } else { 4 };
                if self.buf.len() < n {
                    return Err(self.malformed());
                }
                self.buf.advance(n);
                Value::Fixed
            }
            WireType::LengthDelimited => {
                let len = decode_varint(&mut self.buf).map_err(|_| self.malformed())?;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= self.buf.len())
                    .ok_or_else(|| self.malformed())?;
                let (bytes, rest) = self.buf.split_at(len);
                self.buf = rest;
                Value::Bytes(bytes)
            }
            // Groups are not in this protocol: prost refuses them.
            WireType::StartGroup | WireType::EndGroup => return Err(self.malformed()),
        };
        Ok(Some((tag, wire, value)))
    }
}

/// Counts one more entry of `field`, refusing past `max`.
fn one_more(count: &mut usize, max: usize, field: &str, what: &str) -> Result<(), ServeError> {
    *count += 1;
    if *count > max {
        return Err(invalid(format!("{field}: more than {max} entries; {what}")));
    }
    Ok(())
}

fn text(value: &Value<'_>, max: usize, field: &str) -> Result<(), ServeError> {
    match value {
        Value::Bytes(b) if b.len() > max => {
            Err(invalid(format!("{field} is {} bytes long; at most {max} are taken", b.len())))
        }
        _ => Ok(()),
    }
}

/// Counts a `ModelInferRequest` (see the module docs).
pub fn infer_request(buf: &[u8]) -> Result<Counts, ServeError> {
    let mut c = Counts::default();
    let mut f = Fields { buf, at: "ModelInferRequest" };
    let mut params = 0;
    while let Some((tag, _, value)) = f.next_field()? {
        match (tag, &value) {
            (1 | 2, v) => text(v, MAX_NAME, "ModelInferRequest.model_name/model_version")?,
            (3, v) => text(v, MAX_TEXT, "ModelInferRequest.id")?,
            (4, Value::Bytes(entry)) => {
                one_more(&mut params, MAX_PARAMETERS, "ModelInferRequest.parameters", PARAMS)?;
                c.parameters += 1;
                parameter(entry, "ModelInferRequest.parameters")?;
            }
            (5, Value::Bytes(input)) => {
                one_more(&mut c.inputs, MAX_INPUTS, "ModelInferRequest.inputs", INPUTS)?;
                infer_input(input, &mut c)?;
            }
            (6, Value::Bytes(output)) => {
                one_more(&mut c.outputs, MAX_OUTPUTS, "ModelInferRequest.outputs", OUTPUTS)?;
                requested_output(output, &mut c)?;
            }
            (7, Value::Bytes(raw)) => {
                one_more(&mut c.raw, MAX_INPUTS, "ModelInferRequest.raw_input_contents", "one per input")?;
                c.raw_bytes += raw.len() as u64;
            }
            // Unknown fields, and known ones of the wrong wire type (prost refuses those), build nothing.
            _ => {}
        }
    }
    Ok(c)
}

const PARAMS: &str = "this model takes horizon, samples, seed, strict_context and timeout";
const INPUTS: &str = "a model takes target, lengths, quantile_levels and id_mask (or timestamps and \
                      future_timestamps, for a model that reads wall clocks), each once";
const OUTPUTS: &str = "this model has four outputs (the point forecast, quantiles, quantile_levels, samples)";
const TENSOR_PARAMS: &str = "inputs take none, outputs binary_data";

/// A map entry `string → InferParameter`.
fn parameter(entry: &[u8], at: &str) -> Result<(), ServeError> {
    let mut f = Fields { buf: entry, at };
    while let Some((tag, _, value)) = f.next_field()? {
        match (tag, &value) {
            (1, v) => text(v, MAX_NAME, &format!("{at}: a parameter name"))?,
            (2, Value::Bytes(p)) => {
                let mut inner = Fields { buf: p, at };
                while let Some((tag, _, v)) = inner.next_field()? {
                    if tag == 3 {
                        text(&v, MAX_TEXT, &format!("{at}: a string parameter"))?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn infer_input(input: &[u8], c: &mut Counts) -> Result<(), ServeError> {
    let at = "ModelInferRequest.inputs";
    let mut f = Fields { buf: input, at };
    let mut params = 0;
    while let Some((tag, wire, value)) = f.next_field()? {
        match (tag, &value) {
            (1 | 2, v) => text(v, MAX_NAME, "an input's name/datatype")?,
            (3, v) => {
                let dims = match (wire, v) {
                    (WireType::LengthDelimited, Value::Bytes(b)) => varints(b),
                    (WireType::Varint, _) => 1,
                    _ => 0,
                };
                c.dims += dims;
                if c.dims > MAX_DIMS {
                    return Err(invalid(format!(
                        "{at}.shape: more than {MAX_DIMS} dimensions; `target` must be [V, T] or [N, V, T]"
                    )));
                }
            }
            (4, Value::Bytes(entry)) => {
                one_more(&mut params, MAX_PARAMETERS, "an input's parameters", TENSOR_PARAMS)?;
                c.parameters += 1;
                parameter(entry, "an input's parameters")?;
            }
            (5, Value::Bytes(contents)) => tensor_contents(contents, c)?,
            _ => {}
        }
    }
    Ok(())
}

fn requested_output(output: &[u8], c: &mut Counts) -> Result<(), ServeError> {
    let mut f = Fields { buf: output, at: "ModelInferRequest.outputs" };
    let mut params = 0;
    while let Some((tag, _, value)) = f.next_field()? {
        match (tag, &value) {
            (1, v) => text(v, MAX_NAME, "an output's name")?,
            (2, Value::Bytes(entry)) => {
                one_more(&mut params, MAX_PARAMETERS, "an output's parameters", TENSOR_PARAMS)?;
                c.parameters += 1;
                parameter(entry, "an output's parameters")?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// `InferTensorContents`: only FP32 and INT64 elements are taken (this model's datatypes).
fn tensor_contents(contents: &[u8], c: &mut Counts) -> Result<(), ServeError> {
    let mut f = Fields { buf: contents, at: "an input's contents" };
    while let Some((tag, wire, value)) = f.next_field()? {
        let n = match (tag, wire, &value) {
            (6, WireType::LengthDelimited, Value::Bytes(b)) => b.len() as u64 / 4,
            (3, WireType::LengthDelimited, Value::Bytes(b)) => varints(b) as u64,
            (3 | 6, _, _) => 1,
            (1 | 2 | 4 | 5 | 7 | 8, _, _) => {
                let name =
                    ["", "bool", "int", "int64", "uint", "uint64", "fp32", "fp64", "bytes"][tag as usize];
                return Err(invalid(format!(
                    "an input's contents hold {name}_contents; this model's inputs are FP32 (fp32_contents) or \
                     INT64 (int64_contents)"
                )));
            }
            _ => 0,
        };
        c.values = c.values.saturating_add(n);
    }
    Ok(())
}

/// The varints in packed bytes: one per byte without the continuation bit.
fn varints(b: &[u8]) -> usize {
    b.iter().filter(|&&x| x & 0x80 == 0).count()
}

/// What a request message's decode builds at most (an upper bound in bytes), refusing what this model cannot
/// take before anything is built.
pub trait Prescan {
    fn prescan(buf: &[u8]) -> Result<u64, ServeError>;
}

impl Prescan for pb::ModelInferRequest {
    fn prescan(buf: &[u8]) -> Result<u64, ServeError> {
        Ok(infer_request(buf)?.decoded_bytes(buf.len() as u64))
    }
}

/// The other requests hold strings and nothing repeated: at most their bytes again, and their struct.
macro_rules! plain {
    ($($t:ty),*) => {
        $(impl Prescan for $t {
            fn prescan(buf: &[u8]) -> Result<u64, ServeError> {
                Ok(2 * buf.len() as u64 + 1024)
            }
        })*
    };
}

plain!(
    pb::ServerLiveRequest,
    pb::ServerReadyRequest,
    pb::ModelReadyRequest,
    pb::ServerMetadataRequest,
    pb::ModelMetadataRequest
);

#[cfg(test)]
mod tests {
    use super::*;
    use pb::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
    use prost::Message;
    use std::collections::HashMap;

    fn input(shape: Vec<i64>, contents: Option<pb::InferTensorContents>) -> InferInputTensor {
        InferInputTensor {
            name: "target".into(),
            datatype: "FP32".into(),
            shape,
            parameters: HashMap::new(),
            contents,
        }
    }

    #[test]
    fn counts_match_what_prost_builds_and_bound_it() {
        let req = pb::ModelInferRequest {
            model_name: "toto".into(),
            parameters: HashMap::from([(
                "horizon".to_string(),
                pb::InferParameter {
                    parameter_choice: Some(pb::infer_parameter::ParameterChoice::Int64Param(4)),
                },
            )]),
            inputs: vec![
                input(
                    vec![2, 3],
                    Some(pb::InferTensorContents { fp32_contents: vec![1.0; 6], ..Default::default() }),
                ),
                InferInputTensor {
                    name: "lengths".into(),
                    datatype: "INT64".into(),
                    shape: vec![2],
                    parameters: HashMap::new(),
                    contents: Some(pb::InferTensorContents {
                        int64_contents: vec![3, 300],
                        ..Default::default()
                    }),
                },
            ],
            outputs: vec![InferRequestedOutputTensor { name: "mean".into(), parameters: HashMap::new() }],
            raw_input_contents: vec![vec![0; 40]],
            ..Default::default()
        };
        let bytes = req.encode_to_vec();
        let c = infer_request(&bytes).unwrap();
        assert_eq!(
            c,
            Counts { inputs: 2, outputs: 1, raw: 1, parameters: 1, dims: 3, values: 8, raw_bytes: 40 }
        );
    }

    #[test]
    fn amplifying_messages_are_refused_before_prost_builds_them() {
        // 2 wire bytes per empty `inputs` entry: the class-1 trigger of issue 36.
        let mut empty_inputs = Vec::new();
        for _ in 0..100_000 {
            empty_inputs.extend_from_slice(&[0x2a, 0x00]);
        }
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (empty_inputs, "ModelInferRequest.inputs: more than 5 entries"),
            ([0x32, 0x00].repeat(1000), "ModelInferRequest.outputs: more than 8 entries"),
            ([0x3a, 0x00].repeat(1000), "raw_input_contents: more than 5 entries"),
            ([0x22, 0x00].repeat(1000), "ModelInferRequest.parameters: more than 16 entries"),
            (
                pb::ModelInferRequest { inputs: vec![input(vec![1; 17], None)], ..Default::default() }
                    .encode_to_vec(),
                "more than 16 dimensions",
            ),
            (
                pb::ModelInferRequest {
                    inputs: vec![input(
                        vec![1],
                        Some(pb::InferTensorContents {
                            bytes_contents: vec![vec![]; 10],
                            ..Default::default()
                        }),
                    )],
                    ..Default::default()
                }
                .encode_to_vec(),
                "bytes_contents",
            ),
            (
                pb::ModelInferRequest { id: "x".repeat(2000), ..Default::default() }.encode_to_vec(),
                "ModelInferRequest.id is 2000 bytes long",
            ),
            (vec![0x2a, 0x05, 0x00], "not valid protobuf"),
        ];
        for (bytes, want) in cases {
            let e = pb::ModelInferRequest::prescan(&bytes).unwrap_err();
            assert_eq!(e.grpc_code(), tonic::Code::InvalidArgument, "{e}");
            assert!(e.to_string().contains(want), "{e} does not say {want}");
        }
    }

    #[test]
    fn the_estimate_bounds_packed_and_unpacked_values() {
        // Packed int64 zeros: 1 wire byte each, 8 bytes once built.
        let req = pb::ModelInferRequest {
            inputs: vec![InferInputTensor {
                contents: Some(pb::InferTensorContents {
                    int64_contents: vec![0; 100_000],
                    ..Default::default()
                }),
                ..input(vec![100_000], None)
            }],
            ..Default::default()
        };
        let bytes = req.encode_to_vec();
        let estimate = pb::ModelInferRequest::prescan(&bytes).unwrap();
        let decoded = pb::ModelInferRequest::decode(bytes.as_slice()).unwrap();
        let built = decoded.inputs[0].contents.as_ref().unwrap().int64_contents.capacity() as u64 * 8;
        assert!(estimate >= built + bytes.len() as u64, "{estimate} < {built}");
    }
}
