//! The exported Toto 2.0 graphs: static and control-flow free, the in-place cache contract of the decode graph,
//! weights stored once for every graph of a bundle, byte-identical re-exports, and the official ONNX checker.
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use exporter::graph::WeightStore;
use exporter::pb::{tensor_shape_proto::dimension::Value as Dim, type_proto::Value as Ty, ModelProto};
use exporter::signature::Precision;
use exporter::toto2::export::{write_graph_set, Toto2GraphFile};
use exporter::toto2::{synth, Toto2Checkpoint, Toto2Dims, Toto2GraphKind};
use exporter::variant::OpsetVariant;
use prost::Message;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The committed `small` fixture config (4 layers: variate, time, variate, time; grouped-query attention),
/// regenerated from seed 2004.
fn small_checkpoint(dir: &Path) -> Toto2Checkpoint {
    let json = fs::read_to_string(root().join("tests/fixtures/toto2/small/config.json")).unwrap();
    synth::write_checkpoint(dir, &json, 2004, 1).unwrap();
    Toto2Checkpoint::load(dir).unwrap()
}

/// Writes a single-pass set and a block-decoding set into `out`, sharing one weight file.
fn export_sets(ck: &Toto2Checkpoint, out: &Path, update: OpsetVariant) -> Vec<Toto2GraphFile> {
    fs::create_dir_all(out).unwrap();
    let mut weights = WeightStore::create(&out.join("weights.fp32.bin"), "weights.fp32.bin").unwrap();
    let pass = Toto2Dims::new(&ck.config, 3, 512, 336, None).unwrap();
    let block = Toto2Dims::new(&ck.config, 2, 256, 200, Some(64)).unwrap();
    let mut files = write_graph_set(ck, &mut weights, out, "pass", &pass, update, Precision::Fp32).unwrap();
    files.extend(write_graph_set(ck, &mut weights, out, "block", &block, update, Precision::Fp32).unwrap());
    weights.finish().unwrap();
    files
}

#[test]
fn graphs_are_static_control_flow_free_and_share_one_weight_file() {
    let tmp = tempfile::tempdir().unwrap();
    let ck = small_checkpoint(&tmp.path().join("ck"));
    let out = tmp.path().join("bundle");
    let files = export_sets(&ck, &out, OpsetVariant::Opset24);
    let kinds: Vec<Toto2GraphKind> = files.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [Toto2GraphKind::Pass, Toto2GraphKind::Prefill, Toto2GraphKind::Decode]);
    let forbidden = ["If", "Loop", "Scan", "NonZero", "Shape", "Size", "Range", "Unique", "TopK", "Compress"];
    for f in &files {
        let path = out.join(&f.file);
        assert!(fs::metadata(&path).unwrap().len() < 300_000, "{} embeds weights", f.file);
        let g = ModelProto::decode(fs::read(&path).unwrap().as_slice()).unwrap().graph.unwrap();
        for n in &g.node {
            assert!(!forbidden.contains(&n.op_type.as_str()), "{}: {} is a {}", f.file, n.name, n.op_type);
        }
        for vi in g.input.iter().chain(&g.output) {
            let Some(Ty::TensorType(t)) = vi.r#type.as_ref().and_then(|t| t.value.clone()) else { panic!() };
            let dims: Vec<usize> = t
                .shape
                .unwrap()
                .dim
                .iter()
                .map(|d| match d.value {
                    Some(Dim::DimValue(v)) if v > 0 => v as usize,
                    _ => panic!("{}: {} is not static", f.file, vi.name),
                })
                .collect();
            // the declared I/O is the contract's
            let sig = f.inputs.iter().chain(&f.outputs).find(|s| s.name == vi.name).unwrap();
            assert_eq!(dims, sig.shape, "{}: {}", f.file, vi.name);
        }
        if f.kind == Toto2GraphKind::Decode {
            // each cache output is written by one TensorScatter from its input, the input's only consumer
            let writes: Vec<_> = g.node.iter().filter(|n| n.op_type == "TensorScatter").collect();
            assert_eq!(writes.len(), 2 * ck.config.time_layer_count());
            for w in writes {
                let input = &w.input[0];
                assert_eq!(w.output[0], input.replace("_cache.", "_cache_out."));
                let consumers = g.node.iter().filter(|n| n.input.contains(input)).count();
                assert_eq!(consumers, 1, "{input} is read besides its TensorScatter");
            }
        }
    }
    // every weight once for the three graphs: the checkpoint's parameters, with the two output biases of each
    // residual MLP stored summed (patch_proj: D, head: 9·P fewer), plus 4 KiB alignment per tensor at most
    let params: usize = ck.tensors().filter(|t| !t.name.ends_with("_tau")).map(|t| t.numel()).sum();
    let merged_biases = ck.config.d_model + 9 * ck.config.patch_size;
    let tensors = ck.tensors().count();
    let on_disk = fs::metadata(out.join("weights.fp32.bin")).unwrap().len() as usize;
    assert!(on_disk >= 4 * (params - merged_biases), "{on_disk} bytes for {params} parameters");
    assert!(on_disk < 4 * params + 4096 * tensors, "weights stored more than once: {on_disk} bytes");
}

#[test]
fn reexport_is_byte_identical() {
    let tmp = tempfile::tempdir().unwrap();
    let ck = small_checkpoint(&tmp.path().join("ck"));
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    export_sets(&ck, &a, OpsetVariant::Opset24);
    export_sets(&ck, &b, OpsetVariant::Opset24);
    for e in fs::read_dir(&a).unwrap() {
        let name = e.unwrap().file_name();
        assert_eq!(fs::read(a.join(&name)).unwrap(), fs::read(b.join(&name)).unwrap(), "{name:?} differs");
    }
}

#[path = "../../tests/support/venv.rs"]
mod venv;

#[test]
fn every_graph_passes_onnx_full_check() {
    let Some(py) = venv::python(&venv::ONNX) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ck = small_checkpoint(&tmp.path().join("ck"));
    for (name, update) in [("scatter", OpsetVariant::Opset24), ("scatter_nd", OpsetVariant::Opset18)] {
        let out = tmp.path().join(name);
        let files = export_sets(&ck, &out, update);
        let decode = ModelProto::decode(fs::read(out.join(&files[2].file)).unwrap().as_slice()).unwrap();
        let op = if update == OpsetVariant::Opset18 { "ScatterND" } else { "TensorScatter" };
        let writes = decode.graph.unwrap().node.iter().filter(|n| n.op_type == op).count();
        assert_eq!(writes, 2 * ck.config.time_layer_count(), "{name}");
        let res = Command::new(&py).arg(root().join("tests/onnx_check.py")).arg(&out).output().unwrap();
        assert!(res.status.success(), "{name}: {}", String::from_utf8_lossy(&res.stderr));
        assert_eq!(String::from_utf8_lossy(&res.stdout).matches("full_check ok").count(), 3);
    }
}
