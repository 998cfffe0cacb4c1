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
//! than the body holds.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::ServeError;
use super::jsonscan::{NEG_INF_MARK, POS_INF_MARK};

/// Every datatype the protocol defines (an unknown name is a different error from an unsupported one).
pub const DATATYPES: [&str; 14] = [
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64",
    "BYTES", "BF16",
];

/// The header naming the JSON part's length in a binary-extension body.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

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

// --- request JSON as written

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireRequest {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
    inputs: Vec<WireInput>,
    #[serde(default)]
    outputs: Option<Vec<WireOutput>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireInput {
    name: String,
    datatype: String,
    shape: Vec<i64>,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
    #[serde(default)]
    data: Option<FlatData>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireOutput {
    name: String,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
}

/// JSON tensor data, flat or nested, flattened row-major into f64 with NaN for `null` (and the `NaN` token) and
/// ±inf for the `±Infinity` tokens ([`super::jsonscan`]'s markers). f64 holds every FP32 value and every INT64 up to 2^53 exactly.
struct FlatData(Vec<f64>);

impl<'de> Deserialize<'de> for FlatData {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = Vec::new();
        FlatSeed(&mut out).deserialize(d)?;
        Ok(FlatData(out))
    }
}

/// Appends the elements of one (possibly nested) array. serde_json's recursion limit bounds the nesting.
struct FlatSeed<'a>(&'a mut Vec<f64>);

impl<'de> DeserializeSeed<'de> for FlatSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FlatSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("numbers or null, in a flat or nested array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if let Some(n) = seq.size_hint() {
            self.0.reserve(n);
        }
        while seq.next_element_seed(FlatSeed(self.0))?.is_some() {}
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.0.push(v);
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.0.push(v as f64);
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.0.push(v as f64);
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.push(f64::NAN);
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(E::custom("tensor data holds a boolean; totoc's tensors are FP32 or INT64 numbers"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        match v {
            POS_INF_MARK => {
                self.0.push(f64::INFINITY);
                return Ok(());
            }
            NEG_INF_MARK => {
                self.0.push(f64::NEG_INFINITY);
                return Ok(());
            }
            _ => {}
        }
        Err(E::custom(
            "tensor data holds a string; totoc's tensors are FP32 or INT64 numbers (null = missing)",
        ))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom("tensor data holds an object; send numbers in a flat or nested array"))
    }
}

/// Reads the JSON object of a request, with the NaN hint the CLI gives too (Python's `json.dumps` writes NaN).
fn parse_json<T: for<'de> Deserialize<'de>>(json: &[u8]) -> Result<T, ServeError> {
    serde_json::from_slice(json).map_err(|e| {
        let text = String::from_utf8_lossy(json);
        let line = text.lines().nth(e.line().saturating_sub(1)).unwrap_or("");
        let rest = line.get(e.column().saturating_sub(1)..).unwrap_or("");
        let rest = rest.trim_start_matches(['-', '+']);
        if rest.starts_with("NaN") || rest.starts_with("Infinity") {
            bad(format!(
                "request JSON: {e}: NaN/Infinity are not JSON; they are read only as elements of an input's \
                 `data` (NaN = a missing point, like null)"
            ))
        } else {
            bad(format!("request JSON: {e}"))
        }
    })
}

fn param_from_json(key: &str, v: &Value) -> Result<Param, ServeError> {
    match v {
        Value::Bool(b) => Ok(Param::Bool(*b)),
        Value::String(s) => Ok(Param::Str(s.clone())),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(Param::Int(i)),
            None => Ok(Param::Float(n.as_f64().unwrap_or(f64::NAN))),
        },
        _ => Err(bad(format!("parameter `{key}` is {v}; parameters are strings, numbers or booleans"))),
    }
}

fn params_from_json(map: Option<Map<String, Value>>) -> Result<BTreeMap<String, Param>, ServeError> {
    map.unwrap_or_default().iter().map(|(k, v)| Ok((k.clone(), param_from_json(k, v)?))).collect()
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
/// (present when the body carries binary tensor data).
pub fn decode_request(body: &[u8], header_length: Option<&str>) -> Result<InferRequest, ServeError> {
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
    let wire: WireRequest = parse_json(rewritten.as_deref().unwrap_or(json))?;
    let mut parameters = params_from_json(wire.parameters)?;
    let binary_data_output = match parameters.remove("binary_data_output") {
        None => false,
        Some(Param::Bool(b)) => b,
        Some(p) => return Err(bad(format!("parameter `binary_data_output` is {p}; it is a boolean"))),
    };
    let mut inputs = Vec::with_capacity(wire.inputs.len());
    for input in wire.inputs {
        let name = input.name;
        check_datatype(&name, &input.datatype)?;
        let (shape, count) = element_count(&name, &input.shape)?;
        let mut binary_size = None;
        for (k, v) in input.parameters.unwrap_or_default() {
            match (k.as_str(), param_from_json(&k, &v)?) {
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
            let mut v = Vec::with_capacity(outs.len());
            for o in outs {
                let mut binary = None;
                for (k, val) in o.parameters.unwrap_or_default() {
                    match (k.as_str(), param_from_json(&k, &val)?) {
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
        let r = decode_request(body, None).unwrap();
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
        let r = decode_request(&body, Some(&header.len().to_string())).unwrap();
        assert!(r.binary_data_output);
        let TensorData::Fp32(t) = &r.inputs[0].data else { panic!() };
        assert!(t[0] == 1.0 && t[1].is_nan() && t[2] == 3.0);
        assert_eq!(r.inputs[1].data, TensorData::Int64(vec![2]));
        assert!(r.outputs.is_none());
    }

    #[test]
    fn malformed_requests_say_what_is_wrong() {
        let h = |json: &str| decode_request(json.as_bytes(), None).unwrap_err().to_string();
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
        let r = decode_request(body, None).unwrap();
        let TensorData::Fp32(t) = &r.inputs[0].data else { panic!() };
        assert!(t[0] == 1.0 && t[1].is_nan() && t[2] == f32::INFINITY && t[3] == f32::NEG_INFINITY, "{t:?}");
        let e = decode_request(br#"{"id": NaN, "inputs": []}"#, None).unwrap_err().to_string();
        assert!(e.contains("NaN/Infinity are not JSON"), "{e}");
    }

    #[test]
    fn wrapping_binary_sizes_are_refused() {
        // 2^62 elements × 4 bytes wraps to 0 in u64: the request that aborted the release binary.
        for (shape, dt) in [("[4611686018427387904, 1, 1]", "FP32"), ("[2305843009213693952]", "INT64")] {
            let header = format!(
                r#"{{"inputs": [{{"name": "target", "datatype": "{dt}", "shape": {shape}, "parameters": {{"binary_data_size": 0}}}}]}}"#
            );
            let e =
                decode_request(header.as_bytes(), Some(&header.len().to_string())).unwrap_err().to_string();
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
            decode_request(&b, Some(&n)).map(|_| ()).map_err(|e| e.to_string())
        };
        assert!(with(&[0; 8]).is_ok());
        assert!(with(&[0; 4]).unwrap_err().contains("only 4 bytes of binary data are left"));
        assert!(with(&[0; 12]).unwrap_err().contains("4 bytes of binary data follow"));
        let e = decode_request(header, Some("999")).unwrap_err().to_string();
        assert!(e.contains("the body has only"), "{e}");
        let e = decode_request(header, Some("x1")).unwrap_err().to_string();
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
