//! int8 graphs of `exporter::toto1::graph::INT8_DEFAULT`: the attention's `wQKV` and `wO` are ONNX
//! `MatMulInteger`s of per-row uint8 activation codes (zero point 128) and int8 weight codes in `weights.int8.bin`,
//! scaled back by the row's and the column's f32 scales; the MLP's `mlp.0` and `mlp.2` are ONNX Runtime
//! `MatMulNBits` (8 bits, 16-value blocks, accuracy level 4) over uint8 block codes and f32 block scales in the same
//! file; the patch embedding and the output head (the unembedding folded into the mixture heads) stay fp32
//! `MatMul`s over f32 weights there too; the weight file is hashed in the manifest; re-exports are byte-identical.
use std::path::{Path, PathBuf};

use exporter::export::ExportOptions;
use exporter::graph::Fp16Plan;
use exporter::pb::{tensor_proto, ModelProto};
use exporter::profile_file::ProfileSet;
use exporter::registry::export_bundle as export;
use exporter::signature::Precision;
use exporter::variant::OpsetVariant;
use prost::Message;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn export_int8(out: &Path) -> exporter::manifest::Manifest {
    let profiles = ProfileSet::from_file(&root().join("configs/tiny.yaml")).unwrap().profiles;
    let opts = ExportOptions {
        checkpoint: root().join("tests/fixtures/tiny/checkpoint"),
        tokenizer: None,
        profiles,
        out: out.to_path_buf(),
        precisions: vec![Precision::Int8],
        variant: OpsetVariant::Opset24,
        fp16_plan: Fp16Plan::DEFAULT,
        int8_plan: None,
        force: false,
        golden: None,
    };
    export(&opts, &mut |_| {}).unwrap()
}

/// The plan the graphs below are checked against (a changed default fails here first, then in the node checks).
#[test]
fn toto1_int8_default_is_the_attention_per_row_and_the_mlp_in_blocks() {
    assert_eq!(exporter::toto1::graph::INT8_DEFAULT.describe(), "qkv,out_proj,fc1:blocks,fc2:blocks");
}

#[test]
fn int8_graphs_quantize_the_plans_transformer_matmuls_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let m = export_int8(&out);
    assert_eq!(m.precisions, [Precision::Int8]);
    assert_eq!(m.weights_file(Precision::Int8), Some("weights.int8.bin"));
    assert!(m.files.iter().any(|f| f.path == "weights.int8.bin" && f.sha256.len() == 64));
    let cfg = m.model.toto1().expect("a Toto 1.0 bundle");
    let layers = cfg.num_layers;
    for g in m.family.profiles.iter().flat_map(|p| &p.graphs) {
        assert!(g.file.ends_with(".int8.onnx"), "{}", g.file);
        let model = ModelProto::decode(std::fs::read(out.join(&g.file)).unwrap().as_slice()).unwrap();
        // standard ONNX ops and ONNX Runtime's contrib domain (MatMulNBits)
        let domains: Vec<_> = model.opset_import.iter().map(|o| (o.domain.as_str(), o.version)).collect();
        assert_eq!(domains[1..], [("com.microsoft", 1)], "{domains:?}");
        let graph = model.graph.unwrap();
        let init = |name: &str| graph.initializer.iter().find(|t| t.name == name);
        let consumer = |value: &str| {
            let users: Vec<_> = graph.node.iter().filter(|n| n.input.iter().any(|i| i == value)).collect();
            assert_eq!(users.len(), 1, "{value} has {} readers", users.len());
            users[0]
        };
        let int8: Vec<_> = graph.node.iter().filter(|n| n.op_type == "MatMulInteger").collect();
        // wQKV and wO per layer
        assert_eq!(int8.len(), 2 * layers, "{}", g.file);
        for n in &int8 {
            assert!(
                ["wQKV", "wO"].iter().any(|r| n.input[1].ends_with(&format!(".{r}.weight_t.i8"))),
                "{}",
                n.input[1]
            );
            let producer = graph.node.iter().find(|p| p.output[0] == n.input[0]).unwrap();
            assert_eq!(producer.op_type, "QuantizeLinear", "{}", n.name);
            let zero_point = init(&n.input[2]).unwrap();
            assert_eq!(
                (zero_point.data_type, zero_point.raw_data.as_slice()),
                (tensor_proto::DataType::Uint8 as i32, &[128u8][..])
            );
            let codes = init(&n.input[1]).unwrap();
            assert_eq!(codes.data_type, tensor_proto::DataType::Int8 as i32);
            assert_eq!(codes.dims.len(), 2);
            assert!(codes.external_data.iter().any(|e| e.key == "location" && e.value == "weights.int8.bin"));
            // int32 → f32, × row scale, × column scale
            let cast = consumer(&n.output[0]);
            assert_eq!(cast.op_type, "Cast");
            let row = consumer(&cast.output[0]);
            assert_eq!(row.op_type, "Mul");
            let col = consumer(&row.output[0]);
            assert_eq!(col.op_type, "Mul");
            let scales = init(&col.input[1]).expect("column scales are a weight");
            assert_eq!(scales.data_type, tensor_proto::DataType::Float as i32);
            assert_eq!(scales.dims, [codes.dims[1]]);
            assert_eq!(scales.name, codes.name.replace(".i8", ".i8_scales"));
        }
        // one quantization per activation, however many matmuls read it
        let quantized: Vec<_> =
            graph.node.iter().filter(|n| n.op_type == "QuantizeLinear").map(|n| &n.input[0]).collect();
        let distinct: std::collections::HashSet<_> = quantized.iter().collect();
        assert_eq!(quantized.len(), distinct.len());
        // the MLP's matmuls: MatMulNBits over uint8 [N, ceil(K/16), 16] codes and N·ceil(K/16) f32 scales
        let blocks: Vec<_> = graph.node.iter().filter(|n| n.op_type == "MatMulNBits").collect();
        assert_eq!(blocks.len(), 2 * layers, "{}", g.file);
        for n in &blocks {
            assert_eq!(n.domain, "com.microsoft");
            assert!(["mlp.0", "mlp.2"].iter().any(|r| n.input[1].ends_with(&format!(".{r}.weight_t.b8"))));
            let attr = |a: &str| n.attribute.iter().find(|x| x.name == a).map(|x| x.i);
            let (k, nn) = (attr("K").unwrap() as usize, attr("N").unwrap() as usize);
            assert_eq!(
                (attr("bits"), attr("block_size"), attr("accuracy_level")),
                (Some(8), Some(16), Some(4))
            );
            let codes = init(&n.input[1]).unwrap();
            assert_eq!(codes.data_type, tensor_proto::DataType::Uint8 as i32);
            assert_eq!(codes.dims, [nn as i64, k.div_ceil(16) as i64, 16]);
            assert!(codes.external_data.iter().any(|e| e.key == "location" && e.value == "weights.int8.bin"));
            let scales = init(&n.input[2]).unwrap();
            assert_eq!(scales.data_type, tensor_proto::DataType::Float as i32);
            assert_eq!(scales.dims, [(nn * k.div_ceil(16)) as i64]);
            // f32 activations straight in: no quantization node of totoc's in front
            let producer = graph.node.iter().find(|p| p.output[0] == n.input[0]);
            assert!(producer.is_none_or(|p| p.op_type != "QuantizeLinear"), "{}", n.name);
        }
        // the fp32 matmuls over weights: patch embedding and the folded output head (f32 weights, stored in
        // weights.int8.bin; attention's Q·Kᵀ and P·V read no weight)
        let plain: Vec<_> = graph
            .node
            .iter()
            .filter(|n| n.op_type == "MatMul")
            .filter_map(|n| graph.initializer.iter().find(|t| t.name == n.input[1]))
            .collect();
        for t in &plain {
            assert_eq!(t.data_type, tensor_proto::DataType::Float as i32, "{}", t.name);
            assert!(t.external_data.iter().any(|e| e.key == "location" && e.value == "weights.int8.bin"));
        }
        let want = ["model.patch_embed.projection.weight_t", "model.output_distribution.folded.weight_t"]
            .map(String::from);
        let plain: Vec<_> = plain.iter().map(|t| t.name.clone()).collect();
        assert_eq!(plain, want);
    }
}

#[test]
fn int8_reexport_is_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let (ma, mb) = (export_int8(&a), export_int8(&b));
    assert_eq!(ma.files, mb.files);
    for f in &ma.files {
        assert_eq!(
            std::fs::read(a.join(&f.path)).unwrap(),
            std::fs::read(b.join(&f.path)).unwrap(),
            "{}",
            f.path
        );
    }
}
