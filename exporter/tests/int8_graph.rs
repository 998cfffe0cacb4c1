//! int8 graphs: every transformer matmul is a `com.microsoft` `MatMulNBits` (bits 8, block 128, accuracy level 4)
//! over uint8 codes and f32 scales in `weights.int8.bin`; the patch embedding and the output head (the
//! unembedding folded into the mixture heads) stay fp32 `MatMul`s; the weight file is hashed in the manifest; re-exports are byte-identical.
use std::path::{Path, PathBuf};

use exporter::export::{export, ExportOptions};
use exporter::graph::Fp16Plan;
use exporter::pb::{tensor_proto, ModelProto};
use exporter::profile::ProfileSet;
use exporter::quantize;
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
        profiles,
        out: out.to_path_buf(),
        precisions: vec![Precision::Int8],
        variant: OpsetVariant::Opset24,
        fp16_plan: Fp16Plan::DEFAULT,
        force: false,
        golden: None,
    };
    export(&opts, &mut |_| {}).unwrap()
}

fn attr(n: &exporter::pb::NodeProto, name: &str) -> i64 {
    n.attribute.iter().find(|a| a.name == name).unwrap_or_else(|| panic!("{}: no {name}", n.name)).i
}

#[test]
fn int8_graphs_quantize_the_transformer_matmuls_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bundle");
    let m = export_int8(&out);
    assert_eq!(m.precisions, [Precision::Int8]);
    assert_eq!(m.weights_file(Precision::Int8), Some("weights.int8.bin"));
    assert!(m.files.iter().any(|f| f.path == "weights.int8.bin" && f.sha256.len() == 64));
    let cfg = m.model.toto1().expect("a Toto 1.0 bundle");
    let layers = cfg.num_layers;
    for g in m.profiles.iter().flat_map(|p| &p.graphs) {
        assert!(g.file.ends_with(".int8.onnx"), "{}", g.file);
        let model = ModelProto::decode(std::fs::read(out.join(&g.file)).unwrap().as_slice()).unwrap();
        assert!(model.opset_import.iter().any(|o| o.domain == "com.microsoft" && o.version == 1));
        let graph = model.graph.unwrap();
        let nbits: Vec<_> = graph.node.iter().filter(|n| n.op_type == "MatMulNBits").collect();
        // wQKV, wO, mlp.0, mlp.2 per layer
        assert_eq!(nbits.len(), 4 * layers, "{}", g.file);
        for n in &nbits {
            assert_eq!(n.domain, "com.microsoft");
            assert_eq!((attr(n, "bits"), attr(n, "block_size"), attr(n, "accuracy_level")), (8, 128, 4));
            let (k, nn) = (attr(n, "K") as usize, attr(n, "N") as usize);
            let blocks = k.div_ceil(quantize::BLOCK);
            let init = |name: &str| graph.initializer.iter().find(|t| t.name == name).unwrap();
            let codes = init(&n.input[1]);
            assert_eq!(codes.data_type, tensor_proto::DataType::Uint8 as i32);
            assert_eq!(codes.dims, [nn as i64, blocks as i64, quantize::BLOCK as i64]);
            let scales = init(&n.input[2]);
            assert_eq!(scales.data_type, tensor_proto::DataType::Float as i32);
            assert_eq!(scales.dims, [(nn * blocks) as i64]);
            assert!(codes.external_data.iter().any(|e| e.key == "location" && e.value == "weights.int8.bin"));
        }
        // the fp32 matmuls left: patch embedding, the folded output head, and attention's Q·Kᵀ and P·V
        let plain_weights: Vec<_> = graph
            .node
            .iter()
            .filter(|n| n.op_type == "MatMul")
            .filter_map(|n| graph.initializer.iter().find(|t| t.name == n.input[1]))
            .map(|t| t.name.clone())
            .collect();
        assert_eq!(
            plain_weights,
            ["model.patch_embed.projection.weight_t", "model.output_distribution.folded.weight_t"]
        );
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
