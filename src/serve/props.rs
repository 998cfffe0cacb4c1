//! Property tests of every request parser the server runs on client bytes: the v2 REST codec (JSON tensors
//! and the binary extension), the v2 model mapping (tensors → forecast requests), the gRPC message decoder,
//! and the CLI's JSON / JSON Lines reader behind `/v1/forecast`. Each gets thousands of generated inputs —
//! random bytes, and valid requests with random edits (byte flips, deletions, insertions, truncation, wrong
//! header lengths) — and must answer every one with a value or an error, never a panic. Valid requests must
//! decode. Declared dimensions go up to 2^63 (and negative): whatever a client declares, a decoded tensor holds
//! exactly the elements it sent, and what reaches the model mapping passes the request budget before anything
//! per series is built (a wrapping size would abort the test process here, as it aborted the release server).

use proptest::prelude::*;
use prost::Message;

use engines::budget::Budget;
use engines::engine::{admit, check_size, EngineInfo, EngineLimits};
use engines::request::{Limits, Overrides};
use exporter::registry::Family;

use tables::{self as data, Dataset, Format, ReadOptions};

use super::error::ServeError;
use super::grpc::{decode_infer, pb};
use super::kserve::decode_request;
use super::kserve::InferRequest;
use super::model::{plan, plan_checked, ModelSpec};

const CASES: u32 = 3000;

fn spec() -> ModelSpec {
    ModelSpec {
        name: "toto".into(),
        info: EngineInfo {
            // a family that samples (its sample limit is checked)
            model: Family::ALL.into_iter().find(|f| f.capabilities().samples).expect("a sampling family"),
            target: "cpu".into(),
            ort_version: "1.31.1".into(),
            label: "cpu".into(),
            limits: LIMITS,
            has_golden: false,
        },
        rates: Default::default(),
    }
}

const LIMITS: EngineLimits =
    EngineLimits { max_variates: 4, max_context: 32, max_horizon: 16, max_samples: 8 };

/// A float as a client might send it: ordinary values, extremes, and NaN/±inf.
fn value() -> impl Strategy<Value = f32> {
    prop_oneof![
        8 => -1e4f32..1e4,
        1 => Just(f32::NAN),
        1 => prop_oneof![Just(f32::INFINITY), Just(f32::NEG_INFINITY), Just(f32::MAX), Just(0.0)],
    ]
}

/// One input tensor as (name, datatype, shape, f32 values) with a mostly consistent shape.
fn tensor() -> impl Strategy<Value = (String, String, Vec<i64>, Vec<f32>)> {
    let name = prop_oneof![
        4 => Just("target".to_string()),
        1 => Just("id_mask".to_string()),
        1 => Just("lengths".to_string()),
        1 => Just("quantile_levels".to_string()),
        1 => "[a-z_]{1,8}",
    ];
    let datatype = prop_oneof![4 => Just("FP32".to_string()), 2 => Just("INT64".to_string()), 1 => Just("FP64".to_string()), 1 => Just("X".to_string())];
    let shape = prop::collection::vec(0i64..6, 1..4);
    (name, datatype, shape).prop_flat_map(|(n, d, s)| {
        let count = s.iter().product::<i64>() as usize;
        let len = prop_oneof![8 => Just(count), 1 => 0..count + 3];
        (Just(n), Just(d), Just(s), len.prop_flat_map(|l| prop::collection::vec(value(), l)))
    })
}

/// The model's own inputs with plausible shapes: `target` [N?, V, T] (values with some NaN), and sometimes
/// `lengths`, `id_mask` and `quantile_levels` (occasionally off by one, or out of range).
fn model_inputs() -> impl Strategy<Value = Vec<(String, String, Vec<i64>, Vec<f32>)>> {
    (1i64..4, 1i64..5, 1i64..40, any::<bool>(), 0u8..8).prop_flat_map(|(n, v, t, rank3, extras)| {
        let shape = if rank3 { vec![n, v, t] } else { vec![v, t] };
        let count = shape.iter().product::<i64>() as usize;
        let n = if rank3 { n } else { 1 };
        // Mostly finite data with missing points; sometimes with ±inf and extremes too.
        let clean = prop_oneof![9 => -1e4f32..1e4, 1 => Just(f32::NAN)];
        let data = prop_oneof![
            3 => prop::collection::vec(clean, count),
            1 => prop::collection::vec(value(), count),
        ];
        (
            data,
            prop::collection::vec(0i64..t + 2, n as usize),
            prop::collection::vec(-1i64..3, v as usize),
            prop::collection::vec(-0.2f32..1.2, 0..4),
        )
            .prop_map(move |(target, lengths, ids, levels)| {
                let mut out = vec![("target".to_string(), "FP32".to_string(), shape.clone(), target)];
                if extras & 1 != 0 {
                    let l = lengths.iter().map(|&x| x as f32).collect();
                    out.push(("lengths".into(), "INT64".into(), vec![n], l));
                }
                if extras & 2 != 0 {
                    out.push((
                        "id_mask".into(),
                        "INT64".into(),
                        vec![v],
                        ids.iter().map(|&x| x as f32).collect(),
                    ));
                }
                if extras & 4 != 0 {
                    out.push((
                        "quantile_levels".into(),
                        "FP32".into(),
                        vec![levels.len() as i64],
                        levels.clone(),
                    ));
                }
                out
            })
    })
}

/// A REST body: JSON header (+ binary part), the header-length header, and whether every tensor is
/// well-formed on the wire (a taken datatype, as many elements as its shape holds, INT64 JSON data integral).
fn rest_body() -> impl Strategy<Value = (Vec<u8>, Option<String>, bool)> {
    // Extra parameters are often wrong (unknown names, wrong types), so most requests carry none.
    let params = prop::collection::btree_map(
        prop_oneof![
            Just("horizon"),
            Just("samples"),
            Just("seed"),
            Just("strict_context"),
            Just("timeout"),
            Just("zz")
        ],
        prop_oneof![
            (0i64..40).prop_map(serde_json::Value::from),
            any::<bool>().prop_map(serde_json::Value::from),
            "[0-9a-z]{0,3}".prop_map(serde_json::Value::from),
            (-1e3f64..1e3).prop_map(serde_json::Value::from),
        ],
        0..5,
    );
    let params = prop_oneof![3 => Just(Default::default()), 1 => params];
    let outputs = prop::option::weighted(
        0.3,
        prop::collection::vec(
            (
                prop_oneof![
                    Just("mean"),
                    Just("quantiles"),
                    Just("quantile_levels"),
                    Just("samples"),
                    Just("x")
                ],
                prop::option::of(any::<bool>()),
            ),
            0..4,
        ),
    );
    // Mostly the model's own inputs (so the model mapping runs), sometimes arbitrary tensors.
    let inputs = prop_oneof![
        3 => (model_inputs(), prop::collection::vec(any::<bool>(), 4))
            .prop_map(|(ts, bin)| ts.into_iter().zip(bin).collect::<Vec<_>>()),
        1 => prop::collection::vec((tensor(), any::<bool>()), 0..4),
    ];
    let horizon = prop_oneof![3 => (1i64..17).prop_map(Some), 1 => Just(None)];
    (inputs, params, outputs, any::<bool>(), horizon).prop_map(
        |(inputs, params, outputs, binary_output, horizon)| {
            let mut binary = Vec::new();
            let mut json_inputs = Vec::new();
            let mut well_formed = true;
            let mut any_binary = false;
            for ((name, datatype, shape, values), as_binary) in inputs {
                let count = shape.iter().product::<i64>() as usize;
                let int_json_ok = as_binary || values.iter().all(|v| v.is_finite() && v.abs() < 9e15);
                well_formed &= matches!(datatype.as_str(), "FP32" | "INT64")
                    && values.len() == count
                    && (datatype != "INT64" || int_json_ok);
                let mut t = serde_json::json!({"name": name, "datatype": datatype, "shape": shape});
                if as_binary {
                    any_binary = true;
                    let start = binary.len();
                    for v in &values {
                        if datatype == "INT64" {
                            binary.extend_from_slice(&(*v as i64).to_le_bytes());
                        } else {
                            binary.extend_from_slice(&v.to_le_bytes());
                        }
                    }
                    t["parameters"] = serde_json::json!({"binary_data_size": binary.len() - start});
                } else {
                    let data: Vec<serde_json::Value> = values
                        .iter()
                        .map(|v| {
                            if v.is_finite() {
                                serde_json::json!(if datatype == "INT64" { v.round() } else { *v })
                            } else {
                                serde_json::Value::Null
                            }
                        })
                        .collect();
                    t["data"] = serde_json::Value::Array(data);
                }
                json_inputs.push(t);
            }
            let mut params: serde_json::Map<String, serde_json::Value> =
                params.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            if let Some(h) = horizon {
                params.insert("horizon".into(), h.into());
            }
            params.insert("binary_data_output".into(), binary_output.into());
            let mut req = serde_json::json!({"inputs": json_inputs, "parameters": params});
            if let Some(outs) = outputs {
                req["outputs"] = outs
                    .into_iter()
                    .map(|(n, b)| match b {
                        Some(b) => serde_json::json!({"name": n, "parameters": {"binary_data": b}}),
                        None => serde_json::json!({"name": n}),
                    })
                    .collect();
            }
            let mut body = req.to_string().into_bytes();
            let header = any_binary.then(|| body.len().to_string());
            body.extend(binary);
            (body, header, well_formed)
        },
    )
}

/// Random edits: (position, byte, op) with op 0 = overwrite, 1 = delete, 2 = insert.
fn edits() -> impl Strategy<Value = Vec<(usize, u8, u8)>> {
    prop::collection::vec((any::<usize>(), any::<u8>(), 0u8..3), 0..6)
}

fn apply(mut body: Vec<u8>, edits: &[(usize, u8, u8)]) -> Vec<u8> {
    for &(pos, byte, op) in edits {
        let i = if body.is_empty() { 0 } else { pos % body.len() };
        match op {
            0 if !body.is_empty() => body[i] = byte,
            1 if !body.is_empty() => {
                body.remove(i);
            }
            _ => body.insert(i.min(body.len()), byte),
        }
    }
    body
}

/// The REST path as the handler runs it: decode, map to requests, admit each.
fn rest_pipeline(body: &[u8], header: Option<&str>) {
    if let Ok(req) = decode_request(body, header, &engines::bounded::Unmetered) {
        if let Ok(mut p) = plan(&spec(), req) {
            for r in &mut p.requests {
                let _ = admit(&LIMITS, r, "r");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn rest_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..512), header in prop::option::of("[0-9]{0,4}|x")) {
        rest_pipeline(&body, header.as_deref());
    }

    #[test]
    fn valid_rest_requests_decode_and_edited_ones_never_panic((body, header, well_formed) in rest_body(), e in edits(), cut in any::<prop::sample::Index>(), shift in -3i64..3) {
        // Unedited and well-formed, the generated body decodes (the model may still refuse its contents).
        let decoded = decode_request(&body, header.as_deref(), &engines::bounded::Unmetered);
        prop_assert!(!well_formed || decoded.is_ok(), "{:?}", decoded.err());
        rest_pipeline(&body, header.as_deref());
        let edited = apply(body.clone(), &e);
        rest_pipeline(&edited, header.as_deref());
        let truncated = &body[..cut.index(body.len() + 1)];
        rest_pipeline(truncated, header.as_deref());
        let moved = header.as_deref().and_then(|h| h.parse::<i64>().ok()).map(|h| (h + shift).max(0).to_string());
        rest_pipeline(&body, moved.as_deref());
    }

    #[test]
    fn grpc_messages_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512), e in edits()) {
        for b in [bytes.clone(), apply(bytes, &e)] {
            if let Ok(msg) = pb::ModelInferRequest::decode(b.as_slice()) {
                if let Ok(req) = decode_infer(msg) {
                    let _ = plan(&spec(), req);
                }
            }
        }
    }

    #[test]
    fn generated_grpc_requests_never_panic(
        tensors in prop::collection::vec((tensor(), any::<bool>()), 0..4),
        horizon in prop::option::of(-2i64..40),
        raw in any::<bool>(),
    ) {
        let mut msg = pb::ModelInferRequest::default();
        if let Some(h) = horizon {
            msg.parameters.insert("horizon".into(), pb::InferParameter { parameter_choice: Some(pb::infer_parameter::ParameterChoice::Int64Param(h)) });
        }
        for ((name, datatype, shape, values), typed) in tensors {
            let mut contents = None;
            if raw {
                msg.raw_input_contents.push(values.iter().flat_map(|v| v.to_le_bytes()).collect());
            } else if typed {
                contents = Some(pb::InferTensorContents {
                    fp32_contents: values.clone(),
                    int64_contents: values.iter().map(|&v| v as i64).collect(),
                    ..Default::default()
                });
            }
            msg.inputs.push(pb::model_infer_request::InferInputTensor { name, datatype, shape, parameters: Default::default(), contents });
        }
        // The encoded message round-trips through prost as a client would send it.
        let msg = pb::ModelInferRequest::decode(msg.encode_to_vec().as_slice()).expect("prost round trip");
        if let Ok(req) = decode_infer(msg) {
            if let Ok(mut p) = plan(&spec(), req) {
                for r in &mut p.requests {
                    let _ = admit(&LIMITS, r, "r");
                }
            }
        }
    }

    #[test]
    fn cli_json_and_json_lines_never_panic(text in "\\PC{0,300}", lines in prop::collection::vec(cli_request(), 1..4), e in edits()) {
        // `/v1/forecast` reads bodies with the CLI's reader (`data::parse`, timestamps included).
        let limits = Limits { max_samples: 8, ..Limits::default() };
        let parse = |bytes: &[u8], fmt| -> Option<Dataset> {
            data::parse(bytes.to_vec(), fmt, "body", &ReadOptions::default(), &Overrides::default(), &limits).ok()
        };
        for fmt in [Format::Json, Format::JsonLines] {
            let _ = parse(text.as_bytes(), fmt);
        }
        let valid = lines.join("\n");
        if let Some(mut dataset) = parse(valid.as_bytes(), Format::JsonLines) {
            for s in &mut dataset.series {
                let _ = admit(&LIMITS, &mut s.request, "r");
            }
        }
        let edited = apply(valid.into_bytes(), &e);
        for fmt in [Format::Json, Format::JsonLines] {
            let _ = parse(&edited, fmt);
        }
    }
}

/// A dimension as a hostile client declares it: small, powers of two up to 2^62, up to 2^63 - 1, or negative.
fn dim() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => 0i64..6,
        3 => (20u32..63).prop_map(|k| 1i64 << k),
        1 => Just(i64::MAX),
        1 => 1i64..=i64::MAX,
        1 => prop_oneof![Just(-1i64), Just(i64::MIN), i64::MIN..0],
    ]
}

/// A shape whose element count is 2^61..2^63 (split over its dimensions): count × element size wraps to a small
/// number in unchecked u64 arithmetic, as it did in the release binary.
fn wrapping_shape() -> impl Strategy<Value = Vec<i64>> {
    (61u32..=63, 0u32..=63, 0usize..3).prop_map(|(e, split, at)| {
        let a = split.min(e);
        let (x, y) = (1i64 << a.min(62), 1i64 << (e - a).min(62));
        let mut v = vec![x, y];
        v.insert(at.min(2), 1);
        v
    })
}

/// Every decoded tensor holds the elements its shape declares, and no more than were sent.
fn holds_what_was_sent(req: &InferRequest, sent: usize) -> Result<(), TestCaseError> {
    for t in &req.inputs {
        let count = t.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        prop_assert_eq!(count, Some(t.data.count()), "input {} shape {:?}", t.name, t.shape);
        prop_assert!(
            t.data.count() <= sent,
            "input {}: {} elements from {} sent",
            t.name,
            t.data.count(),
            sent
        );
    }
    Ok(())
}

/// The model mapping with the server's size check (engine limits and the default budget).
fn plan_within_budget(req: InferRequest) -> Result<(), TestCaseError> {
    let info = spec().info;
    let check = |size| check_size(&info, &Budget::DEFAULT, &[size], "r").map_err(ServeError::from);
    if let Ok(p) = plan_checked(&spec(), req, &check) {
        prop_assert!(p.requests.len() <= Budget::DEFAULT.max_series);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn huge_declared_dimensions_never_allocate_or_panic(
        shape in prop_oneof![3 => prop::collection::vec(dim(), 1..4), 1 => wrapping_shape()],
        int64 in any::<bool>(),
        name in prop_oneof![Just("target"), Just("lengths"), Just("quantile_levels"), Just("id_mask")],
        sent in 0usize..48,
        size_choice in 0u8..4,
        any_size in any::<u64>(),
        horizon in prop_oneof![1i64..8, Just(i64::MAX)],
    ) {
        let datatype = if int64 { "INT64" } else { "FP32" };
        let esize = if int64 { 8u64 } else { 4 };
        // The element count × size as a release build computed it (wrapping), among the sizes declared.
        let wrapped = shape.iter().fold(1u64, |a, &d| a.wrapping_mul(d as u64)).wrapping_mul(esize);
        let size = [wrapped, 0, any_size, sent as u64 * esize][size_choice as usize];
        let bytes = vec![0x3fu8; sent * esize as usize];
        let params = serde_json::json!({"horizon": horizon});

        // REST, binary extension.
        let header = serde_json::json!({"parameters": params, "inputs": [
            {"name": name, "datatype": datatype, "shape": shape, "parameters": {"binary_data_size": size}}]}).to_string();
        let mut body = header.clone().into_bytes();
        body.extend_from_slice(&bytes);
        if let Ok(req) = decode_request(&body, Some(&header.len().to_string()), &engines::bounded::Unmetered) {
            holds_what_was_sent(&req, sent)?;
            plan_within_budget(req)?;
        }
        // REST, JSON data.
        let body = serde_json::json!({"parameters": params, "inputs": [
            {"name": name, "datatype": datatype, "shape": shape, "data": vec![1; sent]}]}).to_string();
        if let Ok(req) = decode_request(body.as_bytes(), None, &engines::bounded::Unmetered) {
            holds_what_was_sent(&req, sent)?;
            plan_within_budget(req)?;
        }
        // gRPC, raw and typed contents.
        for raw in [true, false] {
            let contents = (!raw).then(|| pb::InferTensorContents {
                fp32_contents: vec![1.0; sent],
                int64_contents: vec![1; sent],
                ..Default::default()
            });
            let msg = pb::ModelInferRequest {
                parameters: [("horizon".to_string(), pb::InferParameter {
                    parameter_choice: Some(pb::infer_parameter::ParameterChoice::Int64Param(horizon)),
                })].into(),
                inputs: vec![pb::model_infer_request::InferInputTensor {
                    name: name.into(), datatype: datatype.into(), shape: shape.clone(), parameters: Default::default(), contents,
                }],
                raw_input_contents: if raw { vec![bytes.clone()] } else { vec![] },
                ..Default::default()
            };
            if let Ok(req) = decode_infer(msg) {
                holds_what_was_sent(&req, sent)?;
                plan_within_budget(req)?;
            }
        }
    }
}

/// A CLI request line with random (often valid) fields.
fn cli_request() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::collection::vec(prop::option::of(-1e3f32..1e3), 1..40), 1..5),
        0usize..20,
        prop::option::of(0usize..10),
        prop::option::of(prop::collection::vec(0.0f64..1.0, 0..4)),
        any::<bool>(),
    )
        .prop_map(|(target, horizon, samples, quantiles, strict)| {
            let mut v = serde_json::json!({"target": target, "horizon": horizon, "strict_context": strict});
            if let Some(s) = samples {
                v["samples"] = s.into();
            }
            if let Some(q) = quantiles {
                v["quantiles"] = q.into();
            }
            v.to_string()
        })
}

#[test]
fn a_generated_valid_body_decodes() {
    // The generator's happy path really is a valid request (so the mutations start from something real).
    let body = serde_json::json!({
        "parameters": {"horizon": 4, "binary_data_output": true},
        "inputs": [{"name": "target", "datatype": "FP32", "shape": [1, 3], "parameters": {"binary_data_size": 12}}],
    })
    .to_string();
    let mut bytes = body.clone().into_bytes();
    bytes.extend([1.0f32, 2.0, 3.0].iter().flat_map(|v| v.to_le_bytes()));
    let req = decode_request(&bytes, Some(&body.len().to_string()), &engines::bounded::Unmetered).unwrap();
    assert_eq!(plan(&spec(), req).unwrap().requests.len(), 1);
}
#[test]
fn the_rest_generator_reaches_the_model_mapping() {
    // The property tests only mean something if generated requests get past the codec into the model mapping
    // and admission; count how many do (deterministic seed).
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut decoded, mut planned) = (0, 0);
    for _ in 0..1000 {
        let (body, header, _) = rest_body().new_tree(&mut runner).unwrap().current();
        if let Ok(r) = decode_request(&body, header.as_deref(), &engines::bounded::Unmetered) {
            decoded += 1;
            planned += usize::from(plan(&spec(), r).is_ok());
        }
    }
    assert!(decoded > 700 && planned > 100, "decoded {decoded}, planned {planned} of 1000");
}
