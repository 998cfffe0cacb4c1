//! Helpers shared by the engines integration tests: tiny ONNX models written with `exporter::pb`, and a
//! synthetic export bundle (two graphs typed per `exporter::signature`, one shared external weights file).
#![allow(dead_code)]

use std::path::Path;

use exporter::bucket::Bucket;
use exporter::graph::builder::{attribute, value_info, Attr};
use exporter::manifest::{
    file_entries, CheckpointInfo, Manifest, WeightsEntry, BUNDLE_FORMAT, BUNDLE_FORMAT_VERSION,
};
use exporter::pb::{
    tensor_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
    ValueInfoProto,
};
use exporter::profile::Profile;
use exporter::registry::FamilyGraphs;
use exporter::toto1::config::ModelConfig;
use exporter::toto1::manifest::{GraphEntry, ProfileEntry};
use exporter::toto1::signature::{self, DType, GraphKind, IoTypes, Precision, TensorSig};
use exporter::toto1::ModelBuckets;
use exporter::variant::OpsetVariant;
use prost::Message;

/// The ORT library for tests: the same search as `engines::runtime`; a missing library fails the test with the
/// fetch instructions instead of silently passing.
pub fn init_ort() -> &'static engines::runtime::Runtime {
    match engines::runtime::init(None) {
        Ok(rt) => rt,
        Err(e) => panic!("{e}"),
    }
}

pub fn vi(name: &str, dtype: DType, shape: &[usize]) -> ValueInfoProto {
    value_info(&TensorSig { name: name.into(), dtype, shape: shape.to_vec() })
}

pub fn sig_vi(s: &TensorSig) -> ValueInfoProto {
    value_info(s)
}

pub enum A {
    I(i64),
    Is(Vec<i64>),
    S(&'static str),
}

pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<(&str, A)>) -> NodeProto {
    let attribute = attrs
        .into_iter()
        .map(|(n, a)| {
            let a = match a {
                A::I(i) => Attr::Int(i),
                A::Is(v) => Attr::Ints(v),
                A::S(s) => Attr::Str(s),
            };
            attribute(n, a)
        })
        .collect();
    NodeProto {
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        name: format!("{op}_{}", outputs.first().copied().unwrap_or("")),
        op_type: op.into(),
        attribute,
        ..Default::default()
    }
}

pub fn const_i64(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: tensor_proto::DataType::Int64 as i32,
        name: name.into(),
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

pub fn const_f32(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: tensor_proto::DataType::Float as i32,
        name: name.into(),
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// An f32 initializer stored in an external file.
pub fn external_f32(name: &str, dims: &[i64], location: &str, offset: u64) -> TensorProto {
    let len = dims.iter().product::<i64>() as u64 * 4;
    let kv = |k: &str, v: String| StringStringEntryProto { key: k.into(), value: v };
    TensorProto {
        dims: dims.to_vec(),
        data_type: tensor_proto::DataType::Float as i32,
        name: name.into(),
        data_location: tensor_proto::DataLocation::External as i32,
        external_data: vec![
            kv("location", location.into()),
            kv("offset", offset.to_string()),
            kv("length", len.to_string()),
        ],
        ..Default::default()
    }
}

pub fn model(
    name: &str,
    opset: i64,
    nodes: Vec<NodeProto>,
    initializer: Vec<TensorProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
) -> ModelProto {
    ModelProto {
        ir_version: 11,
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: opset }],
        producer_name: "totoc-tests".into(),
        graph: Some(GraphProto {
            node: nodes,
            name: name.into(),
            initializer,
            input: inputs,
            output: outputs,
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn save(m: &ModelProto, path: &Path) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::write(path, m.encode_to_vec()).unwrap();
}

/// Writes little-endian f32 values, padded to 4 KiB like the exporter's weight store; returns the offsets.
pub fn write_weights(path: &Path, tensors: &[&[f32]]) -> Vec<u64> {
    let mut bytes = Vec::new();
    let mut offsets = Vec::new();
    for t in tensors {
        while bytes.len() % 4096 != 0 {
            bytes.push(0);
        }
        offsets.push(bytes.len() as u64);
        for v in *t {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
    }
    std::fs::write(path, bytes).unwrap();
    offsets
}

/// A decode-style KV-cache model: `k_cache_out.0 = TensorScatter(k_cache.0, update, write_pos)` (opset 24,
/// `mode=linear`, axis -2) and `read = ReduceSum(k_cache_out.0, axes=[2])` (a read of the whole cache).
/// Shapes: cache `[b, h, s, d]`, update `[b, h, 1, d]`, write_pos `[b]`, read `[b, h, d]`.
pub fn tensor_scatter_model(b: usize, h: usize, s: usize, d: usize) -> ModelProto {
    tensor_scatter_model_reading("k_cache_out.0", b, h, s, d)
}

/// [`tensor_scatter_model`] whose `read` sums `read_from` (`k_cache.0` reads the *old* cache, which forbids an
/// in-place update).
pub fn tensor_scatter_model_reading(read_from: &str, b: usize, h: usize, s: usize, d: usize) -> ModelProto {
    let f = DType::F32;
    model(
        "scatter",
        24,
        vec![
            node(
                "TensorScatter",
                &["k_cache.0", "update", "write_pos"],
                &["k_cache_out.0"],
                vec![("mode", A::S("linear"))],
            ),
            node("ReduceSum", &[read_from, "axes"], &["read"], vec![("keepdims", A::I(0))]),
        ],
        vec![const_i64("axes", &[1], &[2])],
        vec![
            vi("k_cache.0", f, &[b, h, s, d]),
            vi("update", f, &[b, h, 1, d]),
            vi("write_pos", DType::I64, &[b]),
        ],
        vec![vi("k_cache_out.0", f, &[b, h, s, d]), vi("read", f, &[b, h, d])],
    )
}

/// The tiny model config and profile behind [`synthetic_bundle`]: embed 8, 2 heads (Dh 4), 2 time-wise layers (3 layers, the last space-wise),
/// patch 4, 2 mixture components.
pub fn tiny_config() -> ModelConfig {
    ModelConfig::from_json(
        r#"{
        "patch_size": 4, "stride": 4, "embed_dim": 8, "num_layers": 3, "num_heads": 2, "mlp_hidden_dim": 16,
        "dropout": 0.0, "spacewise_every_n_layers": 3,
        "scaler_cls": "<class 'model.scaler.CausalPatchStdMeanScaler'>",
        "output_distribution_classes": ["<class 'model.distribution.MixtureOfStudentTsOutput'>"],
        "output_distribution_kwargs": {"k_components": 2},
        "spacewise_first": false
    }"#,
    )
    .expect("tiny config")
}

pub fn tiny_profile() -> Profile {
    Profile {
        name: "tiny".into(),
        batch: 1,
        variates: 2,
        context: 8,
        horizon: 8,
        samples: 3,
        buckets: None,
        decode_block: None,
        family: None,
    }
}

/// The buckets of [`synthetic_bundle`]: one prefill of the profile's 2 rows × 2 context slots, one decode of its
/// 6 rows (2 variates × 3 paths) × 3 cache slots.
pub fn synthetic_buckets() -> [Bucket; 2] {
    [Bucket::prefill(2, 2), Bucket::decode(6, 3)]
}

/// Writes a synthetic export bundle under `dir` that follows the real layout: `manifest.json`,
/// `weights.fp32.bin` shared by both graphs, and one graph per bucket ([`synthetic_buckets`]) typed per
/// `exporter::signature` (rows flat: `[N, …]`).
///
/// The graphs are stand-ins with real data flow: every mixture output is `patches`-derived through a MatMul with
/// the shared weight `w` (`[P, P]`, stored inside `w_wide`), so results can be checked on the host; the prefill's
/// caches hold `y = last patch · w + bias` in every slot (K) and its negation (V), and the decode graph writes
/// `y = patches · w + bias` broadcast over heads into slot `write_pos` of each cache with `TensorScatter`.
pub fn synthetic_bundle(dir: &Path) -> Manifest {
    let cfg = tiny_config();
    let profile = tiny_profile();
    let p = cfg.patch_size;
    const WIDE: usize = 128;
    let w: Vec<f32> = (0..p * p).map(|i| (i as f32 * 0.25) - 1.0).collect();
    let w_wide: Vec<f32> = (0..p * WIDE)
        .map(|i| if i % WIDE < p { w[(i / WIDE) * p + i % WIDE] } else { (i % 13) as f32 })
        .collect();
    let b: Vec<f32> = (0..p).map(|i| i as f32 * 0.5).collect();
    std::fs::create_dir_all(dir).unwrap();
    let offsets = write_weights(&dir.join("weights.fp32.bin"), &[&w_wide, &b]);
    let loc = "weights.fp32.bin";
    let weights = || {
        vec![
            external_f32("w_wide", &[p as i64, WIDE as i64], loc, offsets[0]),
            external_f32("bias", &[p as i64], loc, offsets[1]),
            const_i64("w_cols_start", &[1], &[0]),
            const_i64("w_cols_end", &[1], &[p as i64]),
            const_i64("w_cols_axis", &[1], &[1]),
        ]
    };

    let mut graphs = Vec::new();
    let mut paths = vec!["weights.fp32.bin".to_string()];
    for bucket in synthetic_buckets() {
        let dims = bucket.dims(&cfg);
        let ins = signature::inputs(&dims, IoTypes::F32);
        let outs = signature::outputs(&dims, IoTypes::F32);
        let (n, k, h, s, dh) = (dims.rows, dims.components, dims.heads, dims.slots, dims.head_dim);
        let mut nodes = Vec::new();
        let mut inits = weights();
        // y = x · w + bias with x the last context slot (prefill) or the one patch (decode): [N, P]
        match bucket.kind {
            GraphKind::Prefill => {
                inits.push(const_i64("last_start", &[1], &[s as i64 - 1]));
                inits.push(const_i64("last_end", &[1], &[s as i64]));
                inits.push(const_i64("slot_axis", &[1], &[1]));
                inits.push(const_i64("shape_np", &[2], &[n as i64, p as i64]));
                nodes.push(node(
                    "Slice",
                    &["patches", "last_start", "last_end", "slot_axis"],
                    &["last"],
                    vec![],
                ));
                nodes.push(node("Reshape", &["last", "shape_np"], &["x"], vec![]));
            }
            GraphKind::Decode => nodes.push(node("Identity", &["patches"], &["x"], vec![])),
            other => unreachable!("synthetic Toto 1.0 buckets are prefill or decode, not {other:?}"),
        }
        nodes.push(node("MatMul", &["x", "w_wide"], &["xw_wide"], vec![]));
        nodes.push(node("Slice", &["xw_wide", "w_cols_start", "w_cols_end", "w_cols_axis"], &["xw"], vec![]));
        nodes.push(node("Add", &["xw", "bias"], &["y"], vec![]));
        // mixture outputs [N, P, K]: y broadcast over components, plus distinct offsets
        inits.push(const_i64("unsq_k", &[1], &[2]));
        inits.push(const_i64("mix_shape", &[3], &[n as i64, p as i64, k as i64]));
        nodes.push(node("Unsqueeze", &["y", "unsq_k"], &["y3"], vec![]));
        nodes.push(node("Expand", &["y3", "mix_shape"], &["y_mix"], vec![]));
        for (i, name) in signature::MIXTURE_OUTPUTS.iter().enumerate() {
            let c = format!("off_{name}");
            inits.push(const_f32(&c, &[1], &[i as f32 * 10.0]));
            nodes.push(node("Add", &["y_mix", &c], &[name], vec![]));
        }
        inits.push(const_i64("y_cols", &[4], &[n as i64, 1, 1, p as i64]));
        nodes.push(node("Reshape", &["y", "y_cols"], &["y4"], vec![]));
        // caches [N, H, slots, Dh]
        match bucket.kind {
            GraphKind::Prefill => {
                inits.push(const_i64("cache_shape", &[4], &[n as i64, h as i64, s as i64, dh as i64]));
                nodes.push(node("Expand", &["y4", "cache_shape"], &["cache_full"], vec![]));
                for i in 0..dims.time_layers {
                    let (ko, vo) = (signature::k_cache(i, true), signature::v_cache(i, true));
                    nodes.push(node("Identity", &["cache_full"], &[&ko], vec![]));
                    nodes.push(node("Neg", &["cache_full"], &[&vo], vec![]));
                }
            }
            GraphKind::Decode => {
                inits.push(const_i64("upd_full", &[4], &[n as i64, h as i64, 1, dh as i64]));
                nodes.push(node("Expand", &["y4", "upd_full"], &["upd"], vec![]));
                nodes.push(node("Neg", &["upd"], &["upd_neg"], vec![]));
                for i in 0..dims.time_layers {
                    let (ki, vi_) = (signature::k_cache(i, false), signature::v_cache(i, false));
                    let (ko, vo) = (signature::k_cache(i, true), signature::v_cache(i, true));
                    nodes.push(node(
                        "TensorScatter",
                        &[&ki, "upd", "write_pos"],
                        &[&ko],
                        vec![("mode", A::S("linear"))],
                    ));
                    nodes.push(node(
                        "TensorScatter",
                        &[&vi_, "upd_neg", "write_pos"],
                        &[&vo],
                        vec![("mode", A::S("linear"))],
                    ));
                }
            }
            other => unreachable!("synthetic Toto 1.0 buckets are prefill or decode, not {other:?}"),
        }
        // every declared input must exist; unused ones (group_id, rope tables, ...) are fine for ORT
        let m = model(
            bucket.kind.as_str(),
            24,
            nodes,
            inits,
            ins.iter().map(sig_vi).collect(),
            outs.iter().map(sig_vi).collect(),
        );
        let file = format!("{}.onnx", bucket.stem(&profile.name));
        save(&m, &dir.join(&file));
        paths.push(file.clone());
        graphs.push(GraphEntry {
            bucket,
            dims,
            precision: Precision::Fp32,
            file,
            memory_bytes: bucket.memory_bytes(&cfg, Precision::Fp32),
            inputs: ins,
            outputs: outs,
        });
    }

    let manifest = Manifest {
        format: BUNDLE_FORMAT.into(),
        format_version: BUNDLE_FORMAT_VERSION,
        totoc_version: "0.0.0-test".into(),
        checkpoint: CheckpointInfo {
            safetensors_sha256: "0".repeat(64),
            config_sha256: "0".repeat(64),
            tokenizer: None,
        },
        model: exporter::registry::AnyConfig::Toto1(cfg),
        variant: OpsetVariant::Opset24,
        opset: 24,
        cache_update: "tensor_scatter".into(),
        precisions: vec![Precision::Fp32],
        fp32_regions: Vec::new(),
        weights: vec![WeightsEntry { precision: Precision::Fp32, file: "weights.fp32.bin".into() }],
        family: FamilyGraphs { profiles: vec![ProfileEntry { profile, graphs }], ..FamilyGraphs::default() },
        files: file_entries(dir, &paths).unwrap(),
        inputs: Default::default(),
    };
    exporter::integrity::write_manifest(dir, serde_json::to_string_pretty(&manifest).unwrap().as_bytes())
        .unwrap();
    manifest
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
