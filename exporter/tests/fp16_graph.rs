//! fp16 graphs are strongly typed: fp16 weights, activations and caches, fp32 exactly where the plan puts it, and
//! every boundary an explicit Cast (no fp16 weight ever feeds fp32 math, nor the reverse).
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use exporter::export::ExportOptions;
use exporter::graph::types::{output_type, ElemType};
use exporter::graph::{Fp16Plan, Fp32Region};
use exporter::pb::{tensor_proto, type_proto, ModelProto};
use exporter::profile_file::ProfileSet;
use exporter::registry::export_bundle as export;
use exporter::signature::Precision;
use exporter::variant::OpsetVariant;
use prost::Message;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn export_fp16(dir: &Path, plan: Fp16Plan) -> PathBuf {
    let profiles = ProfileSet::from_file(&root().join("configs/tiny.yaml")).unwrap().profiles;
    let out = dir.join("bundle");
    let opts = ExportOptions {
        checkpoint: root().join("tests/fixtures/tiny/checkpoint"),
        tokenizer: None,
        profiles,
        out: out.clone(),
        precisions: vec![Precision::Fp16],
        variant: OpsetVariant::Opset24,
        fp16_plan: plan,
        int8_plan: None,
        force: false,
        golden: None,
    };
    let m = export(&opts, &mut |_| {}).unwrap();
    assert_eq!(m.precisions, [Precision::Fp16]);
    assert_eq!(m.weights_file(Precision::Fp16), Some("weights.fp16.bin"));
    assert!(m.family.profiles.iter().flat_map(|p| &p.graphs).all(|g| g.file.ends_with(".fp16.onnx")));
    out
}

fn read(path: &Path) -> ModelProto {
    ModelProto::decode(std::fs::read(path).unwrap().as_slice()).unwrap()
}

/// Every value's element type, propagated from the declared inputs and initializers with the builder's rules;
/// panics on a node that mixes float types.
fn value_types(m: &ModelProto) -> HashMap<String, ElemType> {
    let g = m.graph.as_ref().unwrap();
    let mut ty = HashMap::new();
    for vi in &g.input {
        let Some(type_proto::Value::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.clone()) else {
            panic!()
        };
        ty.insert(vi.name.clone(), ElemType::from_onnx(t.elem_type).unwrap());
    }
    for t in &g.initializer {
        ty.insert(t.name.clone(), ElemType::from_onnx(t.data_type).unwrap());
    }
    for n in &g.node {
        let ins: Vec<ElemType> = n.input.iter().map(|i| ty[i]).collect();
        let floats: Vec<ElemType> = ins.iter().copied().filter(|t| t.is_float()).collect();
        let mixes = floats.windows(2).any(|w| w[0] != w[1]) && n.op_type != "Where";
        assert!(!mixes || n.op_type == "Cast", "{} mixes float types {ins:?}", n.name);
        let to = n.attribute.iter().find(|a| a.name == "to").map(|a| a.i);
        let out = output_type(&n.op_type, &ins, to).unwrap_or_else(|| panic!("{}: untyped op", n.name));
        for o in &n.output {
            ty.insert(o.clone(), out);
        }
    }
    ty
}

#[test]
fn fp16_graphs_are_strongly_typed_with_fp32_exactly_in_the_default_regions() {
    let tmp = tempfile::tempdir().unwrap();
    let out = export_fp16(tmp.path(), Fp16Plan::DEFAULT);
    for file in ["small.prefill.n8.s16.fp16.onnx", "small.decode.n8.t25.fp16.onnx"] {
        let m = read(&out.join(file));
        let g = m.graph.as_ref().unwrap();
        let ty = value_types(&m);
        // I/O: fp16 patches, rotary tables and caches; f32 mixture outputs
        for vi in &g.input {
            let want = match vi.name.as_str() {
                "group_id" | "last_index" | "write_pos" => ElemType::I64,
                _ => ElemType::F16,
            };
            assert_eq!(ty[&vi.name], want, "{file}: input {}", vi.name);
        }
        for vi in &g.output {
            let want = if vi.name.contains("cache") { ElemType::F16 } else { ElemType::F32 };
            assert_eq!(ty[&vi.name], want, "{file}: output {}", vi.name);
        }
        // weights: f16, except the RMSNorm scales and the folded output head (the fp32 regions' weights)
        let externals: Vec<_> = g
            .initializer
            .iter()
            .filter(|t| t.data_location == tensor_proto::DataLocation::External as i32)
            .collect();
        assert!(externals.len() > 20);
        for t in &externals {
            let fp32 = t.name.ends_with("norm1.scale")
                || t.name.ends_with("norm2.scale")
                || t.name.starts_with("model.output_distribution.folded.");
            let want = if fp32 { ElemType::F32 } else { ElemType::F16 };
            assert_eq!(ElemType::from_onnx(t.data_type), Some(want), "{file}: weight {}", t.name);
        }
        // no weight is ever cast: each weight is consumed in its own region's type
        let weights: Vec<&str> = externals.iter().map(|t| t.name.as_str()).collect();
        for n in g.node.iter().filter(|n| n.op_type == "Cast") {
            assert!(
                !weights.contains(&n.input[0].as_str()),
                "{file}: {} casts weight {}",
                n.name,
                n.input[0]
            );
        }
        // where each computation runs: RMSNorm statistics, softmax, the head and the residual stream in f32,
        // everything else in f16
        for n in &g.node {
            let t = ty[&n.output[0]];
            let name = n.name.as_str();
            let expect = match n.op_type.as_str() {
                "ReduceMean" | "Sqrt" | "Softmax" | "Softplus" => Some(ElemType::F32),
                "Div" if name.contains(".norm") => Some(ElemType::F32),
                "MatMul" if name.starts_with("output_distribution") => Some(ElemType::F32),
                "MatMul" | "Sigmoid" => Some(ElemType::F16),
                // the residual stream: `layers.<i>.Add`, `layers.<i>.Add_1` (bias adds are deeper in the scope)
                "Add" if name.starts_with("layers.") && name.split('.').count() == 3 => Some(ElemType::F32),
                "Add" if name.ends_with("wQKV.Add") || name.contains(".mlp.") => Some(ElemType::F16),
                _ => None,
            };
            if let Some(want) = expect {
                assert_eq!(t, want, "{file}: {name} ({}) computes in {t:?}", n.op_type);
            }
        }
        let casts_to_f32 = g
            .node
            .iter()
            .filter(|n| {
                n.op_type == "Cast"
                    && n.attribute.iter().any(|a| a.name == "to" && a.i == ElemType::F32.onnx() as i64)
            })
            .count();
        // the patch embedding into the residual stream; per layer (4) the attention and MLP outputs into it and
        // the softmax entry (RMSNorm and the folded f32 output head read the f32 residual stream directly)
        assert_eq!(casts_to_f32, 1 + 4 * 3, "{file}");
    }
}

#[test]
fn regions_move_computation_and_inputs_to_fp32() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = Fp16Plan::DEFAULT.with(Fp32Region::Rope, true).with(Fp32Region::Residual, false);
    let out = export_fp16(tmp.path(), plan);
    let m = read(&out.join("small.decode.n8.t25.fp16.onnx"));
    let ty = value_types(&m);
    for name in ["rope_cos", "rope_sin", "xpos_scale"] {
        assert_eq!(ty[name], ElemType::F32, "{name}: the rope region takes f32 tables");
    }
    assert_eq!(ty["patches"], ElemType::F16);
    let g = m.graph.as_ref().unwrap();
    let residual = g.node.iter().find(|n| n.name == "layers.0.Add").unwrap();
    assert_eq!(ty[&residual.output[0]], ElemType::F16, "without the residual region the stream is fp16");
    // and fp16 everywhere: even the norms compute in fp16 (their eps 1e-8 rounds to 0)
    let tmp = tempfile::tempdir().unwrap();
    let out = export_fp16(tmp.path(), Fp16Plan::NONE);
    let m = read(&out.join("small.decode.n8.t25.fp16.onnx"));
    let ty = value_types(&m);
    let g = m.graph.as_ref().unwrap();
    assert!(g.node.iter().filter(|n| n.op_type == "ReduceMean").all(|n| ty[&n.output[0]] == ElemType::F16));
}
