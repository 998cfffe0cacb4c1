//! TensorRT engines through ONNX Runtime's TensorRT provider: what `build-engine` checks after building one, what
//! loading checks before using one, and the optimisation-profile options of a shape-polymorphic graph.
//!
//! Facts this module relies on (ONNX Runtime 1.31.1 and its TensorRT provider source):
//! * The provider links TensorRT 10 (`libnvinfer.so.10`). An engine runs only with the TensorRT version and GPU
//!   architecture it was built for; its EPContext node records both (`ep_sdk_version`, and
//!   `hardware_architecture` / `compute_capability`), which [`EngineStamp`] reads at build time and
//!   [`check_stamp`] compares with the machine at load, asking for a rebuild on a mismatch (TensorRT itself would
//!   fail with a deserialisation error, or the provider would silently rebuild without the EPContext).
//! * A node TensorRT does not take runs on another provider, in another partition: the graph is then split,
//!   CUDA graphs cannot capture it whole and the KV cache leaves TensorRT's KV-cache update layer.
//!   [`check_all_on_tensorrt`] refuses such an engine, naming the nodes.
//! * Explicit profiles (`trt_profile_min_shapes`/`_opt_`/`_max_`) are lists of `input:d0xd1x…` entries; naming an
//!   input again starts the next profile (`ParseProfileShapes`, `tensorrt_execution_provider_utils.h`:
//!   `"input_id:32x1,attention_mask:32x1,input_id:32x41,attention_mask:32x41"` is two profiles). The provider
//!   builds every profile but, in 1.31.1, runs every input shape with profile 0 (runtime profile selection is
//!   microsoft/onnxruntime#31624, open) — so one profile per bucket (`min = opt = max`, [`ProfileLayout::PerBucket`])
//!   is only usable once that lands; until then [`profile_layout`] picks one profile spanning the buckets.

use serde::{Deserialize, Serialize};

use exporter::pb::ModelProto;
use exporter::signature::{DynSig, TensorSig};

use crate::backend::Version;
// Lives with the library probes that read it; callers have always found it here.
pub use crate::machine::parse_tensorrt_version;

/// The TensorRT version and GPU architecture an engine was built for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineStamp {
    /// `ep_sdk_version` of the EPContext node (as written by the provider).
    pub tensorrt: String,
    /// The GPU's compute capability (`hardware_architecture` or `compute_capability`: `90` for sm_90).
    pub architecture: String,
}

fn attr_str(n: &exporter::pb::NodeProto, names: &[&str]) -> Option<String> {
    n.attribute
        .iter()
        .find(|a| names.contains(&a.name.as_str()))
        .map(|a| String::from_utf8_lossy(&a.s).trim().to_string())
        .filter(|s| !s.is_empty())
}

impl EngineStamp {
    /// The stamp of an EPContext model (its first EPContext node), if it has one.
    pub fn of(model: &ModelProto) -> Option<EngineStamp> {
        let n = model.graph.as_ref()?.node.iter().find(|n| n.op_type == "EPContext")?;
        Some(EngineStamp {
            tensorrt: attr_str(n, &["ep_sdk_version"]).unwrap_or_default(),
            architecture: attr_str(n, &["hardware_architecture", "compute_capability"]).unwrap_or_default(),
        })
    }
}

/// A compute capability as digits (`sm_90`, `9.0`, `90` → `90`).
pub fn normalize_architecture(s: &str) -> String {
    s.chars().filter(char::is_ascii_digit).collect()
}

/// Whether an engine stamped `stamp` runs with TensorRT `tensorrt` on a GPU of compute capability `arch` (both as
/// found on this machine); the error asks for a rebuild and says what differs. Unknown values are not refused.
pub fn check_stamp(stamp: &EngineStamp, tensorrt: Option<Version>, arch: Option<&str>) -> Result<(), String> {
    if let (Some(built), Some(here)) = (parse_tensorrt_version(&stamp.tensorrt), tensorrt) {
        if (built.0, built.1, built.2) != (here.0, here.1, here.2) {
            return Err(format!(
                "the TensorRT engines were built with TensorRT {built} and this machine has TensorRT {here}: \
                 rebuild the engine here with `totoc build-engine --target tensorrt`"
            ));
        }
    }
    if let Some(here) = arch {
        let (built, here) = (normalize_architecture(&stamp.architecture), normalize_architecture(here));
        if !built.is_empty() && !here.is_empty() && built != here {
            return Err(format!(
                "the TensorRT engines were built for GPU architecture sm_{built} and this GPU is sm_{here}: \
                 rebuild the engine here with `totoc build-engine --target tensorrt`"
            ));
        }
    }
    Ok(())
}

/// Every node of a built EPContext model must be an `EPContext` node (the whole graph on TensorRT); otherwise the
/// error names the nodes that fell back to another provider.
pub fn check_all_on_tensorrt(model: &ModelProto) -> Result<(), String> {
    let nodes = model.graph.as_ref().map(|g| g.node.as_slice()).unwrap_or_default();
    if !nodes.iter().any(|n| n.op_type == "EPContext") {
        return Err("the built model has no EPContext node: TensorRT took no part of the graph".into());
    }
    let fallback: Vec<String> = nodes
        .iter()
        .filter(|n| n.op_type != "EPContext")
        .map(|n| format!("{} ({})", n.name, n.op_type))
        .collect();
    if fallback.is_empty() {
        return Ok(());
    }
    let shown = fallback.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
    let more = if fallback.len() > 8 { format!(" and {} more", fallback.len() - 8) } else { String::new() };
    Err(format!(
        "{} node(s) did not land on TensorRT: {shown}{more}. A split graph defeats CUDA graphs and the KV-cache \
         update layer; use a TensorRT that supports these ops (`totoc doctor` shows the version found), or \
         re-export with `--opset 18`",
        fallback.len()
    ))
}

/// How a shape-polymorphic graph's buckets map to TensorRT optimisation profiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileLayout {
    /// One profile per bucket with `min = opt = max` (each bucket gets kernels tuned for its exact shape). Needs
    /// the provider to select the profile that matches each run's shapes.
    PerBucket,
    /// One profile from the smallest to the largest bucket, tuned for the largest (the bucket whose time dominates).
    Spanning,
}

/// The first ONNX Runtime whose TensorRT provider selects among several profiles at run time. None released yet
/// (microsoft/onnxruntime#31624 is open); kept as the one place to change when it ships.
pub const ORT_TRT_PROFILE_SWITCHING: Option<Version> = None;

/// The provider options that give a shape-polymorphic graph its profiles.
pub fn profile_options(
    graph: &[DynSig],
    buckets: &[Vec<TensorSig>],
    layout: ProfileLayout,
) -> Vec<(String, String)> {
    match profile_shapes(graph, buckets, layout) {
        Some([min, opt, max]) if !min.is_empty() => vec![
            ("trt_profile_min_shapes".into(), min),
            ("trt_profile_opt_shapes".into(), opt),
            ("trt_profile_max_shapes".into(), max),
        ],
        _ => Vec::new(),
    }
}

/// The layout ONNX Runtime `ort` can run.
pub fn profile_layout(ort: Option<Version>) -> ProfileLayout {
    match (ORT_TRT_PROFILE_SWITCHING, ort) {
        (Some(first), Some(v)) if v >= first => ProfileLayout::PerBucket,
        _ => ProfileLayout::Spanning,
    }
}

/// The `trt_profile_min_shapes`, `_opt_` and `_max_` option values of the shape-polymorphic graph with inputs
/// `graph` whose buckets bind the static input signatures `buckets` (each bucket's inputs in `graph`'s order).
/// Every input with a symbolic dimension is listed — the provider needs all of them, or it defers building the
/// engine to the first run (and nothing would be saved as an EPContext).
pub fn profile_shapes(
    graph: &[DynSig],
    buckets: &[Vec<TensorSig>],
    layout: ProfileLayout,
) -> Option<[String; 3]> {
    let first = buckets.first()?;
    let dynamic: Vec<usize> =
        (0..first.len()).filter(|&i| graph.get(i).is_some_and(DynSig::is_dynamic)).collect();
    let entry = |sig: &TensorSig, shape: &[usize]| {
        format!("{}:{}", sig.name, shape.iter().map(usize::to_string).collect::<Vec<_>>().join("x"))
    };
    let join = |v: Vec<String>| v.join(",");
    match layout {
        ProfileLayout::PerBucket => {
            let all: Vec<String> = buckets
                .iter()
                .flat_map(|b| dynamic.iter().map(move |&i| entry(&b[i], &b[i].shape)))
                .collect();
            let s = join(all);
            Some([s.clone(), s.clone(), s])
        }
        ProfileLayout::Spanning => {
            let pick = |f: fn(usize, usize) -> usize| {
                join(
                    dynamic
                        .iter()
                        .map(|&i| {
                            let mut shape = first[i].shape.clone();
                            for b in buckets {
                                for (d, v) in shape.iter_mut().zip(&b[i].shape) {
                                    *d = f(*d, *v);
                                }
                            }
                            entry(&first[i], &shape)
                        })
                        .collect(),
                )
            };
            let max = pick(usize::max);
            Some([pick(usize::min), max.clone(), max])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exporter::pb::{AttributeProto, GraphProto, NodeProto};
    use exporter::signature::DType;

    fn node(op: &str, name: &str, attrs: &[(&str, &str)]) -> NodeProto {
        NodeProto {
            op_type: op.into(),
            name: name.into(),
            attribute: attrs
                .iter()
                .map(|(k, v)| AttributeProto {
                    name: k.to_string(),
                    s: v.as_bytes().to_vec(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn model(nodes: Vec<NodeProto>) -> ModelProto {
        ModelProto { graph: Some(GraphProto { node: nodes, ..Default::default() }), ..Default::default() }
    }

    #[test]
    fn engines_must_be_wholly_on_tensorrt() {
        let whole = model(vec![node("EPContext", "trt_0", &[])]);
        assert!(check_all_on_tensorrt(&whole).is_ok());
        let split = model(vec![
            node("EPContext", "trt_0", &[]),
            node("ScatterND", "layers.0.attention.k_update.ScatterND", &[]),
            node("EPContext", "trt_1", &[]),
        ]);
        let e = check_all_on_tensorrt(&split).unwrap_err();
        assert!(e.starts_with("1 node(s)") && e.contains("k_update.ScatterND (ScatterND)"), "{e}");
        assert!(check_all_on_tensorrt(&model(vec![node("MatMul", "m", &[])]))
            .unwrap_err()
            .contains("no EPContext"));
    }

    #[test]
    fn stamps_ask_for_a_rebuild_on_another_tensorrt_or_gpu() {
        let m = model(vec![node(
            "EPContext",
            "trt",
            &[("ep_sdk_version", "10.15.1"), ("hardware_architecture", "90")],
        )]);
        let s = EngineStamp::of(&m).unwrap();
        assert_eq!(s, EngineStamp { tensorrt: "10.15.1".into(), architecture: "90".into() });
        assert!(check_stamp(&s, Some(Version(10, 15, 1)), Some("sm_90")).is_ok());
        let e = check_stamp(&s, Some(Version(10, 16, 0)), Some("90")).unwrap_err();
        assert!(e.contains("TensorRT 10.15.1") && e.contains("10.16.0") && e.contains("build-engine"), "{e}");
        let e = check_stamp(&s, Some(Version(10, 15, 1)), Some("8.9")).unwrap_err();
        assert!(e.contains("sm_90") && e.contains("sm_89"), "{e}");
        // what the provider may write instead: the integer version and `compute_capability`
        let old = model(vec![node(
            "EPContext",
            "trt",
            &[("ep_sdk_version", "101501"), ("compute_capability", "86")],
        )]);
        let s = EngineStamp::of(&old).unwrap();
        assert!(check_stamp(&s, Some(Version(10, 15, 1)), Some("86")).is_ok());
        assert!(check_stamp(&s, None, None).is_ok());
        assert_eq!(parse_tensorrt_version("101501"), Some(Version(10, 15, 1)));
    }

    fn sig(name: &str, shape: &[usize]) -> TensorSig {
        TensorSig { name: name.into(), dtype: DType::F16, shape: shape.to_vec() }
    }

    #[test]
    fn profiles_list_dynamic_inputs_per_bucket_or_spanning() {
        use exporter::signature::Dim::{Fixed, Named};
        let dynsig = |name: &str, dims: Vec<exporter::signature::Dim>| DynSig {
            name: name.into(),
            dtype: DType::F16,
            dims,
        };
        let graph = vec![
            dynsig("patches", vec![Named("rows".into()), Fixed(64)]),
            dynsig("k_cache.0", vec![Named("rows".into()), Fixed(12), Named("slots".into()), Fixed(64)]),
            dynsig("static", vec![Fixed(4)]),
        ];
        // two decode buckets: 1 row × 13 slots and 64 rows × 69 slots
        let small: Vec<TensorSig> = graph.iter().map(|g| g.at(1, 13)).collect();
        let large: Vec<TensorSig> = graph.iter().map(|g| g.at(64, 69)).collect();
        assert_eq!(small[1], sig("k_cache.0", &[1, 12, 13, 64]));
        let both = [small.clone(), large.clone()];
        let [min, opt, max] = profile_shapes(&graph, &both, ProfileLayout::PerBucket).unwrap();
        assert_eq!(min, "patches:1x64,k_cache.0:1x12x13x64,patches:64x64,k_cache.0:64x12x69x64");
        assert_eq!((opt.as_str(), max.as_str()), (min.as_str(), min.as_str()));
        let [min, opt, max] = profile_shapes(&graph, &both, ProfileLayout::Spanning).unwrap();
        assert_eq!(min, "patches:1x64,k_cache.0:1x12x13x64");
        assert_eq!(max, "patches:64x64,k_cache.0:64x12x69x64");
        assert_eq!(opt, max);
        // one bucket: still every dynamic input, min = opt = max (or the engine would be built at the first run)
        let o = profile_options(&graph, &[small], ProfileLayout::Spanning);
        let get = |k: &str| o.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
        assert_eq!(get("trt_profile_min_shapes"), Some("patches:1x64,k_cache.0:1x12x13x64"));
        assert_eq!(get("trt_profile_max_shapes"), get("trt_profile_min_shapes"));
        assert!(profile_shapes(&graph, &[], ProfileLayout::Spanning).is_none());
        // ONNX Runtime 1.31.1 runs profile 0 only
        assert_eq!(profile_layout(Version::parse("1.31.1")), ProfileLayout::Spanning);
    }
}
