//! The Open Inference Protocol (KServe v2) REST codec: inference requests and responses as JSON, with tensor
//! data either in JSON (`"data"`, flat or nested, row-major) or in the **binary tensor data extension** (the
//! JSON header is the first `Inference-Header-Content-Length` bytes of the body; each binary input follows it,
//! in input order, `binary_data_size` bytes of little-endian, row-major elements).
//!
//! Pure functions over bytes: [`decode_request`] turns a body into an [`InferRequest`] (tensors decoded and
//! size-checked), [`encode_response`] turns an [`InferResponse`] into a body (binary outputs after the JSON
//! header when any output asks for binary). Model semantics (which inputs, which outputs) live in
//! [`super::model`]; the gRPC front end builds the same [`InferRequest`] from protobuf. Nothing here panics on
//! input: every malformed body is a [`ServeError::BadRequest`] naming the field and the fix (property-tested).
//!
//! totoc's model takes only `FP32` and `INT64` tensors, so those are the datatypes decoded; any other valid
//! datatype is an error naming the one expected. In JSON tensor data `null` is a missing point (NaN in binary
//! data); the non-JSON tokens `NaN` (missing), `Infinity` and `-Infinity` that Python clients write are read
//! there too, and only there ([`super::jsonscan`]).
//!
//! Sizes from the client (shapes, `binary_data_size`, the header length) are checked with checked arithmetic
//! against the data actually sent before anything is allocated for them: a declared count never allocates more
//! than the body holds. The JSON is decoded [`engines::bounded`]: what it builds (tensor data first) is charged
//! to the caller's meter as it is built, and every list stops at what this model can take ([`MAX_INPUTS`]
//! inputs, [`MAX_OUTPUTS`] outputs, [`MAX_DIMS`] dimensions, [`MAX_PARAMETERS`] parameters of at most
//! [`MAX_NAME`]-byte names and [`MAX_TEXT`]-byte strings) before one entry too many is built.

use std::collections::BTreeMap;
use std::fmt;

use engines::bounded::{Meter, Tally, VALUE_BYTES};
use serde::Serialize;
use serde_json::{Map, Value};

use super::error::ServeError;
use wire::{parse_json, FlatData, WireRequest};

mod wire;

/// Every datatype the protocol defines (an unknown name is a different error from an unsupported one).
pub const DATATYPES: [&str; 14] = [
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64",
    "BYTES", "BF16",
];

/// The header naming the JSON part's length in a binary-extension body.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

/// Inputs a request may name: the most a family's model takes (five: target, lengths, timestamps,
/// future_timestamps, quantile_levels for a family that reads wall clocks; four otherwise).
pub const MAX_INPUTS: usize = 5;
/// Outputs a request may ask for: a model's four, a name given twice included (refused by name later).
pub const MAX_OUTPUTS: usize = 8;
/// Dimensions of a shape (this model's tensors have at most 3).
pub const MAX_DIMS: usize = 16;
/// Parameters of a request (a model takes at most 12), or of one tensor.
pub const MAX_PARAMETERS: usize = 16;
/// Bytes of a parameter's name.
pub const MAX_NAME: usize = 128;
/// Bytes of a string parameter.
pub const MAX_TEXT: usize = 1024;

/// A request or output parameter: the protocol allows strings, numbers and booleans.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

impl fmt::Display for Param {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Param::Bool(b) => write!(f, "{b}"),
            Param::Int(i) => write!(f, "{i}"),
            Param::Float(x) => write!(f, "{x}"),
            Param::Str(s) => write!(f, "{s:?}"),
        }
    }
}

impl Param {
    fn to_json(&self) -> Value {
        match self {
            Param::Bool(b) => Value::Bool(*b),
            Param::Int(i) => Value::from(*i),
            Param::Float(x) => Value::from(*x),
            Param::Str(s) => Value::String(s.clone()),
        }
    }
}

/// Decoded tensor elements.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    Fp32(Vec<f32>),
    Int64(Vec<i64>),
}

impl TensorData {
    pub fn datatype(&self) -> &'static str {
        match self {
            TensorData::Fp32(_) => "FP32",
            TensorData::Int64(_) => "INT64",
        }
    }

    /// Elements held.
    pub fn count(&self) -> usize {
        match self {
            TensorData::Fp32(v) => v.len(),
            TensorData::Int64(v) => v.len(),
        }
    }
}

/// An input tensor whose element count matches its shape.
#[derive(Debug, Clone, PartialEq)]
pub struct InputTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: TensorData,
}

/// An output the client asked for; `binary` is its `binary_data` parameter when given.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestedOutput {
    pub name: String,
    pub binary: Option<bool>,
}

/// A decoded inference request (from REST or gRPC).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InferRequest {
    pub id: Option<String>,
    /// Request parameters other than the protocol's own `binary_data_output`.
    pub parameters: BTreeMap<String, Param>,
    pub inputs: Vec<InputTensor>,
    /// `None`: the client named no outputs (every output the request produces comes back).
    pub outputs: Option<Vec<RequestedOutput>>,
    /// `binary_data_output`: outputs not named otherwise come back as binary data.
    pub binary_data_output: bool,
}

/// An FP32 output tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
    /// Send it in the binary extension (REST) rather than as JSON `data`.
    pub binary: bool,
}

/// An inference response.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InferResponse {
    pub model_name: String,
    pub model_version: String,
    pub id: Option<String>,
    pub parameters: BTreeMap<String, Param>,
    pub outputs: Vec<OutputTensor>,
}

fn bad(msg: impl Into<String>) -> ServeError {
    ServeError::BadRequest(msg.into())
}

/// Checks a declared datatype against the ones totoc reads.
pub fn check_datatype(input: &str, datatype: &str) -> Result<(), ServeError> {
    match datatype {
        "FP32" | "INT64" => Ok(()),
        d if DATATYPES.contains(&d) => Err(bad(format!(
            "input `{input}`: datatype {d} is not taken; totoc's inputs are FP32 (target, quantile_levels) \
             and INT64 (id_mask, lengths)"
        ))),
        d => Err(bad(format!(
            "input `{input}`: `{d}` is not an Open Inference Protocol datatype (FP32, INT64, FP64, ...)"
        ))),
    }
}

/// The element count of `shape` (each dimension ≥ 0), or an error naming the input.
pub fn element_count(input: &str, shape: &[i64]) -> Result<(Vec<usize>, usize), ServeError> {
    let mut dims = Vec::with_capacity(shape.len());
    let mut count: usize = 1;
    for &d in shape {
        let d = usize::try_from(d)
            .map_err(|_| bad(format!("input `{input}`: shape {shape:?} has a negative dimension")))?;
        count = count.checked_mul(d).ok_or_else(|| {
            bad(format!("input `{input}`: shape {shape:?} has more elements than fit in memory"))
        })?;
        dims.push(d);
    }
    Ok((dims, count))
}

/// JSON numbers (f64, NaN = null) as the declared datatype.
fn typed_from_json(input: &str, datatype: &str, values: Vec<f64>) -> Result<TensorData, ServeError> {
    if datatype == "FP32" {
        // The same f64 → f32 rounding as the CLI's JSON reader (serde's f32 from a JSON number).
        return Ok(TensorData::Fp32(values.into_iter().map(|x| x as f32).collect()));
    }
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    let mut out = Vec::with_capacity(values.len());
    for (i, x) in values.into_iter().enumerate() {
        if x.is_nan() {
            return Err(bad(format!(
                "input `{input}`: element {i} is null; INT64 data has no missing values"
            )));
        }
        if x.fract() != 0.0 || x.abs() > EXACT {
            return Err(bad(format!("input `{input}`: element {i} ({x}) is not an integer within ±2^53")));
        }
        out.push(x as i64);
    }
    Ok(TensorData::Int64(out))
}

/// Little-endian elements of the declared datatype.
pub fn typed_from_bytes(datatype: &str, bytes: &[u8]) -> TensorData {
    match datatype {
        "INT64" => TensorData::Int64(
            bytes.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes"))).collect(),
        ),
        _ => TensorData::Fp32(
            bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))).collect(),
        ),
    }
}

/// Bytes per element of a datatype totoc reads.
pub fn element_size(datatype: &str) -> usize {
    if datatype == "INT64" {
        8
    } else {
        4
    }
}

/// The bytes `count` elements of `datatype` take, or an error naming the input when that overflows.
pub fn byte_size(input: &str, shape: &[usize], count: usize, datatype: &str) -> Result<usize, ServeError> {
    count.checked_mul(element_size(datatype)).ok_or_else(|| {
        bad(format!("input `{input}`: shape {shape:?} of {datatype} has more bytes than fit in memory"))
    })
}

/// Decodes a REST inference request body. `header_length` is the `Inference-Header-Content-Length` header
/// (present when the body carries binary tensor data). What the decode builds is charged to `meter` (see the
/// module docs); a refusal of the meter is a 400 here, its caller knows the real reason.
pub fn decode_request(
    body: &[u8],
    header_length: Option<&str>,
    meter: &dyn Meter,
) -> Result<InferRequest, ServeError> {
    let json_len = match header_length {
        None => body.len(),
        Some(h) => {
            let n: usize = h
                .trim()
                .parse()
                .map_err(|_| bad(format!("Inference-Header-Content-Length `{h}` is not a byte count")))?;
            if n > body.len() {
                return Err(bad(format!(
                    "Inference-Header-Content-Length is {n} but the body has only {} bytes",
                    body.len()
                )));
            }
            n
        }
    };
    let (json, mut binary) = body.split_at(json_len);
    let rewritten = super::jsonscan::rewrite(json).map_err(|e| bad(format!("request JSON: {e}")))?;
    let tally = Tally::new(meter, &[]);
    let wire: WireRequest = parse_json(rewritten.as_deref().unwrap_or(json), &tally)?;
    drop(rewritten);
    let mut parameters = wire.parameters.map_or_else(BTreeMap::new, |p| p.0);
    let binary_data_output = match parameters.remove("binary_data_output") {
        None => false,
        Some(Param::Bool(b)) => b,
        Some(p) => return Err(bad(format!("parameter `binary_data_output` is {p}; it is a boolean"))),
    };
    let mut inputs = Vec::with_capacity(wire.inputs.0.len());
    for input in wire.inputs.0 {
        let name = input.name;
        check_datatype(&name, &input.datatype)?;
        let (shape, count) = element_count(&name, &input.shape.0)?;
        let mut binary_size = None;
        for (k, v) in input.parameters.map_or_else(BTreeMap::new, |p| p.0) {
            match (k.as_str(), v) {
                ("binary_data_size", Param::Int(n)) if n >= 0 => binary_size = Some(n as u64),
                ("binary_data_size", p) => {
                    return Err(bad(format!("input `{name}`: binary_data_size is {p}; it is a byte count")))
                }
                (k, _) if k.starts_with("shared_memory") => {
                    return Err(bad(format!(
                        "input `{name}`: shared-memory inputs are not supported; send the tensor in the body"
                    )))
                }
                (k, _) => {
                    return Err(bad(format!(
                        "input `{name}`: unknown parameter `{k}`; inputs take only binary_data_size"
                    )))
                }
            }
        }
        let data = match (input.data, binary_size) {
            (Some(_), Some(_)) => {
                return Err(bad(format!(
                    "input `{name}` has both JSON `data` and `binary_data_size`; send one"
                )))
            }
            (None, None) => {
                return Err(bad(format!(
                    "input `{name}` has no data: give `data` or binary data with `binary_data_size`"
                )))
            }
            (Some(FlatData(values)), None) => {
                if values.len() != count {
                    return Err(bad(format!(
                        "input `{name}`: shape {shape:?} holds {count} elements but `data` has {}",
                        values.len()
                    )));
                }
                typed_from_json(&name, &input.datatype, values)?
            }
            (None, Some(size)) => {
                if header_length.is_none() {
                    return Err(bad(format!(
                        "input `{name}` has binary_data_size but the request has no Inference-Header-Content-Length \
                         header saying where its JSON ends"
                    )));
                }
                let want = byte_size(&name, &shape, count, &input.datatype)? as u64;
                if size != want {
                    return Err(bad(format!(
                        "input `{name}`: binary_data_size is {size} bytes but shape {shape:?} of {} takes {want}",
                        input.datatype
                    )));
                }
                if size > binary.len() as u64 {
                    return Err(bad(format!(
                        "input `{name}`: binary_data_size is {size} bytes but only {} bytes of binary data are left",
                        binary.len()
                    )));
                }
                let (mine, rest) = binary.split_at(size as usize);
                binary = rest;
                // What these values become (typed here, then one series' points each), before they are built.
                tally.charge((count as u64).saturating_mul(VALUE_BYTES)).map_err(bad)?;
                typed_from_bytes(&input.datatype, mine)
            }
        };
        inputs.push(InputTensor { name, shape, data });
    }
    if !binary.is_empty() {
        return Err(bad(format!(
            "{} bytes of binary data follow the JSON header that no input's binary_data_size accounts for",
            binary.len()
        )));
    }
    let outputs = match wire.outputs {
        None => None,
        Some(outs) => {
            let mut v = Vec::with_capacity(outs.0.len());
            for o in outs.0 {
                let mut binary = None;
                for (k, val) in o.parameters.map_or_else(BTreeMap::new, |p| p.0) {
                    match (k.as_str(), val) {
                        ("binary_data", Param::Bool(b)) => binary = Some(b),
                        ("class_count", Param::Int(0)) => {}
                        ("class_count", _) => {
                            return Err(bad(format!(
                                "output `{}`: the classification extension (class_count) does not apply to forecasts",
                                o.name
                            )))
                        }
                        (k, p) => {
                            return Err(bad(format!(
                                "output `{}`: parameter `{k}` = {p} is not taken; outputs take binary_data (boolean)",
                                o.name
                            )))
                        }
                    }
                }
                v.push(RequestedOutput { name: o.name, binary });
            }
            Some(v)
        }
    };
    tally.flush().map_err(bad)?;
    Ok(InferRequest { id: wire.id, parameters, inputs, outputs, binary_data_output })
}

// --- response

#[derive(Serialize)]
struct WireResponse<'a> {
    model_name: &'a str,
    model_version: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    parameters: Map<String, Value>,
    outputs: Vec<WireOutputTensor<'a>>,
}

#[derive(Serialize)]
struct WireOutputTensor<'a> {
    name: &'a str,
    datatype: &'static str,
    shape: &'a [usize],
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<Map<String, Value>>,
    /// Flat, row-major; serde writes each f32 in its shortest round-trip form (and a non-finite one as null).
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a [f32]>,
}

/// Encodes a response body: `(body, Some(json_len))` when binary outputs follow the JSON header (send
/// `Inference-Header-Content-Length: json_len`), `(body, None)` for a plain JSON body.
pub fn encode_response(resp: &InferResponse) -> (Vec<u8>, Option<usize>) {
    let outputs = resp
        .outputs
        .iter()
        .map(|o| WireOutputTensor {
            name: &o.name,
            datatype: "FP32",
            shape: &o.shape,
            parameters: o.binary.then(|| {
                let mut m = Map::new();
                m.insert("binary_data_size".into(), Value::from(o.data.len() * 4));
                m
            }),
            data: (!o.binary).then_some(o.data.as_slice()),
        })
        .collect();
    let wire = WireResponse {
        model_name: &resp.model_name,
        model_version: &resp.model_version,
        id: resp.id.as_deref(),
        parameters: resp.parameters.iter().map(|(k, v)| (k.clone(), v.to_json())).collect(),
        outputs,
    };
    let mut body = serde_json::to_vec(&wire).expect("a response serialises");
    let json_len = body.len();
    let binary: usize = resp.outputs.iter().filter(|o| o.binary).map(|o| o.data.len() * 4).sum();
    if binary == 0 && !resp.outputs.iter().any(|o| o.binary) {
        return (body, None);
    }
    body.reserve(binary);
    for o in resp.outputs.iter().filter(|o| o.binary) {
        for x in &o.data {
            body.extend_from_slice(&x.to_le_bytes());
        }
    }
    (body, Some(json_len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32_bytes(xs: &[f32]) -> Vec<u8> {
        xs.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn i64_bytes(xs: &[i64]) -> Vec<u8> {
        xs.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn json_tensors_flat_or_nested_with_null_as_missing() {
        let body = br#"{"id": "r1", "parameters": {"horizon": 4, "seed": 7, "strict_context": true, "x": 0.5, "s": "a"},
            "inputs": [{"name": "target", "datatype": "FP32", "shape": [2, 3], "data": [[1, null, 3.5], [4, 5, 6]]},
                       {"name": "id_mask", "datatype": "INT64", "shape": [2], "data": [0, 1]}],
            "outputs": [{"name": "mean", "parameters": {"binary_data": true}}]}"#;
        let r = decode_request(body, None, &engines::bounded::Unmetered).unwrap();
        assert_eq!(r.id.as_deref(), Some("r1"));
        assert_eq!(r.parameters["horizon"], Param::Int(4));
        assert_eq!(r.parameters["strict_context"], Param::Bool(true));
        assert_eq!(r.parameters["x"], Param::Float(0.5));
        assert_eq!(r.parameters["s"], Param::Str("a".into()));
        assert_eq!(r.inputs[0].shape, vec![2, 3]);
        let TensorData::Fp32(t) = &r.inputs[0].data else { panic!() };
        assert_eq!(t[0], 1.0);
        assert!(t[1].is_nan());
        assert_eq!(&t[2..], &[3.5, 4.0, 5.0, 6.0]);
        assert_eq!(r.inputs[1].data, TensorData::Int64(vec![0, 1]));
        assert_eq!(r.outputs.unwrap(), vec![RequestedOutput { name: "mean".into(), binary: Some(true) }]);
        assert!(!r.binary_data_output);
    }

    #[test]
    fn binary_tensors_follow_the_json_header_in_input_order() {
        let header = br#"{"inputs": [{"name": "target", "datatype": "FP32", "shape": [1, 3], "parameters": {"binary_data_size": 12}},
            {"name": "lengths", "datatype": "INT64", "shape": [1], "parameters": {"binary_data_size": 8}}],
            "parameters": {"binary_data_output": true}}"#;
        let mut body = header.to_vec();
        body.extend(f32_bytes(&[1.0, f32::NAN, 3.0]));
        body.extend(i64_bytes(&[2]));
        let r = decode_request(&body, Some(&header.len().to_string()), &engines::bounded::Unmetered).unwrap();
        assert!(r.binary_data_output);
        let TensorData::Fp32(t) = &r.inputs[0].data else { panic!() };
        assert!(t[0] == 1.0 && t[1].is_nan() && t[2] == 3.0);
        assert_eq!(r.inputs[1].data, TensorData::Int64(vec![2]));
        assert!(r.outputs.is_none());
    }

    #[test]
    fn malformed_requests_say_what_is_wrong() {
        let h = |json: &str| {
            decode_request(json.as_bytes(), None, &engines::bounded::Unmetered).unwrap_err().to_string()
        };
        let input = |rest: &str| format!(r#"{{"inputs": [{{"name": "target", {rest}}}]}}"#);
        let cases = [
            ("{", "request JSON: EOF".to_string()),
            (r#"{"inputs": [], "extra": 1}"#, "unknown field `extra`".into()),
            (&input(r#""datatype": "FP64", "shape": [1], "data": [1]"#), "datatype FP64 is not taken".into()),
            (
                &input(r#""datatype": "FLOAT", "shape": [1], "data": [1]"#),
                "not an Open Inference Protocol".into(),
            ),
            (
                &input(r#""datatype": "FP32", "shape": [2], "data": [1]"#),
                "holds 2 elements but `data` has 1".into(),
            ),
            (&input(r#""datatype": "FP32", "shape": [-1], "data": [1]"#), "negative dimension".into()),
            (&input(r#""datatype": "FP32", "shape": [1]"#), "has no data".into()),
            (&input(r#""datatype": "FP32", "shape": [1], "data": ["a"]"#), "holds a string".into()),
            (
                r#"{"inputs": [], "parameters": {"x": NaN}}"#,
                "read only as elements of an input's `data`".into(),
            ),
            (
                &input(
                    r#""datatype": "FP32", "shape": [4611686018427387904, 1], "parameters": {"binary_data_size": 0}"#,
                ),
                "no Inference-Header-Content-Length".into(),
            ),
            (&input(r#""datatype": "INT64", "shape": [1], "data": [1.5]"#), "not an integer".into()),
            (&input(r#""datatype": "INT64", "shape": [1], "data": [null]"#), "no missing values".into()),
            (
                &input(r#""datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": 4}"#),
                "no Inference-Header-Content-Length".into(),
            ),
            (
                &input(r#""datatype": "FP32", "shape": [4611686018427387904, 4]"#),
                "more elements than fit".into(),
            ),
            (
                r#"{"inputs": [], "parameters": {"h": [1]}}"#,
                "parameters are strings, numbers or booleans".into(),
            ),
            (
                r#"{"inputs": [], "outputs": [{"name": "mean", "parameters": {"class_count": 3}}]}"#,
                "classification".into(),
            ),
        ];
        for (json, want) in cases {
            let msg = h(json);
            assert!(msg.contains(&want), "{json}\n  gave: {msg}\n  want: {want}");
        }
    }

    #[test]
    fn nan_and_infinity_tokens_are_read_in_tensor_data_only() {
        let body = br#"{"inputs": [{"name": "target", "datatype": "FP32", "shape": [1, 4], "data": [[1, NaN, Infinity, -Infinity]]}]}"#;
        let r = decode_request(body, None, &engines::bounded::Unmetered).unwrap();
        let TensorData::Fp32(t) = &r.inputs[0].data else { panic!() };
        assert!(t[0] == 1.0 && t[1].is_nan() && t[2] == f32::INFINITY && t[3] == f32::NEG_INFINITY, "{t:?}");
        let e = decode_request(br#"{"id": NaN, "inputs": []}"#, None, &engines::bounded::Unmetered)
            .unwrap_err()
            .to_string();
        assert!(e.contains("NaN/Infinity are not JSON"), "{e}");
    }

    #[test]
    fn wrapping_binary_sizes_are_refused() {
        // 2^62 elements × 4 bytes wraps to 0 in u64: the request that aborted the release binary.
        for (shape, dt) in [("[4611686018427387904, 1, 1]", "FP32"), ("[2305843009213693952]", "INT64")] {
            let header = format!(
                r#"{{"inputs": [{{"name": "target", "datatype": "{dt}", "shape": {shape}, "parameters": {{"binary_data_size": 0}}}}]}}"#
            );
            let e = decode_request(
                header.as_bytes(),
                Some(&header.len().to_string()),
                &engines::bounded::Unmetered,
            )
            .unwrap_err()
            .to_string();
            assert!(e.contains("more bytes than fit in memory"), "{e}");
        }
    }

    #[test]
    fn binary_sizes_must_add_up() {
        let header = br#"{"inputs": [{"name": "target", "datatype": "FP32", "shape": [1, 2], "parameters": {"binary_data_size": 8}}]}"#;
        let n = header.len().to_string();
        let with = |extra: &[u8]| {
            let mut b = header.to_vec();
            b.extend_from_slice(extra);
            decode_request(&b, Some(&n), &engines::bounded::Unmetered).map(|_| ()).map_err(|e| e.to_string())
        };
        assert!(with(&[0; 8]).is_ok());
        assert!(with(&[0; 4]).unwrap_err().contains("only 4 bytes of binary data are left"));
        assert!(with(&[0; 12]).unwrap_err().contains("4 bytes of binary data follow"));
        let e = decode_request(header, Some("999"), &engines::bounded::Unmetered).unwrap_err().to_string();
        assert!(e.contains("the body has only"), "{e}");
        let e = decode_request(header, Some("x1"), &engines::bounded::Unmetered).unwrap_err().to_string();
        assert!(e.contains("not a byte count"), "{e}");
    }

    #[test]
    fn responses_encode_json_and_binary_outputs() {
        let mut resp = InferResponse {
            model_name: "toto".into(),
            model_version: "1".into(),
            id: Some("r1".into()),
            parameters: BTreeMap::from([("context_used".to_string(), Param::Int(8))]),
            outputs: vec![
                OutputTensor { name: "mean".into(), shape: vec![1, 2], data: vec![1.5, 2.25], binary: false },
                OutputTensor {
                    name: "samples".into(),
                    shape: vec![1, 1, 2],
                    data: vec![3.0, 4.0],
                    binary: true,
                },
            ],
        };
        let (body, json_len) = encode_response(&resp);
        let json_len = json_len.unwrap();
        let head: Value = serde_json::from_slice(&body[..json_len]).unwrap();
        assert_eq!(head["id"], "r1");
        assert_eq!(head["parameters"]["context_used"], 8);
        assert_eq!(head["outputs"][0]["data"], serde_json::json!([1.5, 2.25]));
        assert_eq!(head["outputs"][1]["parameters"]["binary_data_size"], 8);
        assert!(head["outputs"][1].get("data").is_none());
        assert_eq!(&body[json_len..], f32_bytes(&[3.0, 4.0]).as_slice());
        resp.outputs.truncate(1);
        let (body, json_len) = encode_response(&resp);
        assert!(json_len.is_none());
        let head: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(head["outputs"][0]["datatype"], "FP32");
        assert_eq!(head["outputs"][0]["shape"], serde_json::json!([1, 2]));
    }
}
