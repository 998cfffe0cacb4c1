//! Toto 2.0 fp16 and int8 graphs, on the trained 4m (`tests/fixtures/trained/toto2-4m`): fp16 graphs are strongly
//! typed (fp16 weights and activations, fp32 exactly in the plan's regions, every boundary an explicit Cast) with
//! the fp32 graphs' I/O; int8 graphs run exactly the plan's matmul roles through `MatMulInteger`.
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use exporter::export::ExportOptions;
use exporter::graph::types::{output_type, ElemType};
use exporter::graph::{Fp16Plan, Fp32Region, Int8Plan};
use exporter::pb::{tensor_proto, type_proto, ModelProto};
use exporter::profile_file::ProfileSet;
use exporter::registry::export_bundle as export;
use exporter::signature::Precision;
use exporter::variant::OpsetVariant;
use prost::Message;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Exports the trained 4m with graphs of `precisions` (fp16: `plan`'s regions); returns the bundle and manifest.
fn export_all(
    dir: &Path,
    plan: Fp16Plan,
    precisions: &[Precision],
) -> (PathBuf, exporter::manifest::Manifest) {
    export_with(dir, plan, None, precisions)
}

/// [`export_all`] with int8 graphs of `int8` (`None`: the family's default).
fn export_with(
    dir: &Path,
    plan: Fp16Plan,
    int8: Option<Int8Plan>,
    precisions: &[Precision],
) -> (PathBuf, exporter::manifest::Manifest) {
    let profiles = ProfileSet::from_file(&root().join("configs/trained-toto2-4m.yaml")).unwrap().profiles;
    let out = dir.join("bundle");
    let opts = ExportOptions {
        checkpoint: root().join("tests/fixtures/trained/toto2-4m"),
        tokenizer: None,
        profiles,
        out: out.clone(),
        precisions: precisions.to_vec(),
        variant: OpsetVariant::Opset24,
        fp16_plan: plan,
        int8_plan: int8,
        force: false,
        golden: None,
    };
    let m = export(&opts, &mut |_| {}).unwrap();
    (out, m)
}

fn read(path: &Path) -> ModelProto {
    ModelProto::decode(std::fs::read(path).unwrap().as_slice()).unwrap()
}

/// Every value's element type, propagated with the builder's rules; panics on a node that mixes float types.
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

/// (and the int8 graphs of the same export: `int8_graph_quantizes_exactly_the_plans_roles`)
#[test]
fn fp16_2_0_graphs_are_strongly_typed_with_fp32_in_the_default_regions_and_fp32_io() {
    let tmp = tempfile::tempdir().unwrap();
    let (out, m) =
        export_all(tmp.path(), Fp16Plan::DEFAULT, &[Precision::Int8, Precision::Fp16, Precision::Fp32]);
    assert_eq!(m.precisions, [Precision::Fp32, Precision::Fp16, Precision::Int8]);
    assert_eq!(m.fp32_regions, ["rms_norm", "softmax", "head", "residual"]);
    let set = &m.family.toto2_profiles[0].sets[0];
    let by = |p: Precision| set.graphs.iter().find(|g| g.precision == p).unwrap();
    let (g32, g16) = (by(Precision::Fp32), by(Precision::Fp16));
    assert!(g16.file.ends_with(".pass.fp16.onnx"), "{}", g16.file);
    // the same (f32) I/O as the fp32 graph: the driver binds the same buffers
    assert_eq!((&g16.inputs, &g16.outputs), (&g32.inputs, &g32.outputs));
    let model = read(&out.join(&g16.file));
    let g = model.graph.as_ref().unwrap();
    let ty = value_types(&model);
    let externals: Vec<_> = g
        .initializer
        .iter()
        .filter(|t| t.data_location == tensor_proto::DataLocation::External as i32)
        .collect();
    assert!(externals.len() > 20);
    for t in &externals {
        // the output head is the head region; everything else is fp16
        let want = if t.name.starts_with("output_head.") { ElemType::F32 } else { ElemType::F16 };
        assert_eq!(ElemType::from_onnx(t.data_type), Some(want), "weight {}", t.name);
    }
    let weights: Vec<&str> = externals.iter().map(|t| t.name.as_str()).collect();
    for n in g.node.iter().filter(|n| n.op_type == "Cast") {
        assert!(!weights.contains(&n.input[0].as_str()), "{} casts weight {}", n.name, n.input[0]);
    }
    let mut seen = HashMap::new();
    for n in &g.node {
        let t = ty[&n.output[0]];
        let name = n.name.as_str();
        let expect = match n.op_type.as_str() {
            "ReduceMean" | "Sqrt" | "Softmax" => Some(ElemType::F32),
            "MatMul" if name.starts_with("output_head") => Some(ElemType::F32),
            "MatMul" | "Sigmoid" if name.starts_with("transformer.layers.") => Some(ElemType::F16),
            // the residual stream: `transformer.layers.<i>.Add`, `….Add_1`
            "Add" if name.starts_with("transformer.layers.") && name.split('.').count() == 4 => {
                Some(ElemType::F32)
            }
            _ => None,
        };
        if let Some(want) = expect {
            *seen.entry(n.op_type.clone()).or_insert(0) += 1;
            assert_eq!(t, want, "{name} ({}) computes in {t:?}", n.op_type);
        }
    }
    for op in ["ReduceMean", "Softmax", "MatMul", "Add"] {
        assert!(seen.get(op).copied().unwrap_or(0) > 0, "no {op} checked");
    }
    int8_graph_quantizes_exactly_the_plans_roles(&out, &m);
}

#[test]
fn fp16_2_0_regions_move_computation() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = Fp16Plan::NONE.with(Fp32Region::Rope, true);
    let (out, m) = export_all(tmp.path(), plan, &[Precision::Fp16]);
    let set = &m.family.toto2_profiles[0].sets[0];
    let g16 = set.graphs.iter().find(|g| g.precision == Precision::Fp16).unwrap();
    let model = read(&out.join(&g16.file));
    let ty = value_types(&model);
    let g = model.graph.as_ref().unwrap();
    // fp16 everywhere else: norms, softmax, the head
    for n in g.node.iter().filter(|n| ["ReduceMean", "Softmax"].contains(&n.op_type.as_str())) {
        assert_eq!(ty[&n.output[0]], ElemType::F16, "{}", n.name);
    }
    assert!(g
        .node
        .iter()
        .filter(|n| n.name.starts_with("output_head") && n.op_type == "MatMul")
        .all(|n| ty[&n.output[0]] == ElemType::F16));
    // the rope region: the rotation's multiplies in f32
    let rope: Vec<_> = g.node.iter().filter(|n| n.name.contains("rope_q") && n.op_type == "Mul").collect();
    assert!(!rope.is_empty());
    assert!(rope.iter().all(|n| ty[&n.output[0]] == ElemType::F32));
}

/// Only the roles of `exporter::toto2::graph::INT8_DEFAULT` run through `MatMulInteger`; `out_proj` is an fp32 MatMul.
fn int8_graph_quantizes_exactly_the_plans_roles(out: &Path, m: &exporter::manifest::Manifest) {
    let set = &m.family.toto2_profiles[0].sets[0];
    let g8 = set.graphs.iter().find(|g| g.precision == Precision::Int8).unwrap();
    let model = read(&out.join(&g8.file));
    let g = model.graph.as_ref().unwrap();
    let layers = 4;
    let roles = exporter::toto2::graph::INT8_DEFAULT.roles();
    assert!(!roles.contains(&"out_proj") && roles.len() == 3, "{roles:?}");
    let mmi = g.node.iter().filter(|n| n.op_type == "MatMulInteger").count();
    assert_eq!(mmi, layers * roles.len());
    // out_proj stays an fp32 MatMul over an f32 weight
    let names: Vec<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    for i in 0..layers {
        assert!(names.contains(&format!("transformer.layers.{i}.attn.out_proj.weight.folded").as_str()));
        assert!(names.contains(&format!("transformer.layers.{i}.ffn.fc2.weight.folded.i8").as_str()));
    }
}

/// A 2.0 role takes the block kernel too: `fc1:blocks,fc2:blocks` runs the feed-forward through `MatMulNBits`
/// (16-value blocks, the contrib domain imported) and `qkv` per row through `MatMulInteger`.
#[test]
fn int8_2_0_roles_take_the_block_kernel() {
    let tmp = tempfile::tempdir().unwrap();
    let plan = Int8Plan::parse("qkv,fc1:blocks,fc2:blocks").unwrap();
    let (out, m) = export_with(tmp.path(), Fp16Plan::DEFAULT, Some(plan), &[Precision::Int8]);
    let set = &m.family.toto2_profiles[0].sets[0];
    let g8 = set.graphs.iter().find(|g| g.precision == Precision::Int8).unwrap();
    let model = read(&out.join(&g8.file));
    assert!(model.opset_import.iter().any(|o| o.domain == "com.microsoft" && o.version == 1));
    let g = model.graph.as_ref().unwrap();
    let layers = 4;
    let count = |op: &str| g.node.iter().filter(|n| n.op_type == op).count();
    assert_eq!((count("MatMulInteger"), count("MatMulNBits")), (layers, 2 * layers));
    let names: Vec<&str> = g.initializer.iter().map(|t| t.name.as_str()).collect();
    for i in 0..layers {
        for r in ["fc1", "fc2"] {
            assert!(
                names.contains(&format!("transformer.layers.{i}.ffn.{r}.weight.folded.b8").as_str()),
                "{r}"
            );
        }
        assert!(names.contains(&format!("transformer.layers.{i}.attn.in_proj.weight.folded.i8").as_str()));
    }
}
