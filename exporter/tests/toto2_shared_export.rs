//! Toto 2.0 export bundles carry each profile's shape-polymorphic graphs (what a TensorRT engine is built from)
//! at opset 24 only, in fp32 and fp16 (never int8), after the static graphs: the static graphs and the weight
//! file are byte-for-byte what the static graphs alone write.
use std::fs;
use std::path::{Path, PathBuf};

use exporter::export::ExportOptions;
use exporter::graph::{Fp16Plan, WeightStore};
use exporter::pb::{tensor_shape_proto::dimension::Value as Dim, type_proto::Value as Ty, ModelProto};
use exporter::profile_file::ProfileSet;
use exporter::registry::export_bundle as export;
use exporter::signature::Precision;
use exporter::toto2::export::write_graph_set;
use exporter::toto2::{ladder, synth, Toto2Checkpoint};
use exporter::variant::OpsetVariant;
use prost::Message;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// The committed `small` fixture config, regenerated from seed 2004.
fn small_checkpoint(dir: &Path) -> PathBuf {
    let json = fs::read_to_string(root().join("tests/fixtures/toto2/small/config.json")).unwrap();
    let ck = dir.join("checkpoint");
    synth::write_checkpoint(&ck, &json, 2004, 1).unwrap();
    ck
}

fn options(ck: &Path, out: PathBuf, precisions: &[Precision], variant: OpsetVariant) -> ExportOptions {
    ExportOptions {
        checkpoint: ck.to_path_buf(),
        tokenizer: None,
        profiles: ProfileSet::from_file(&root().join("tests/fixtures/toto2/profiles.yaml")).unwrap().profiles,
        out,
        precisions: precisions.to_vec(),
        variant,
        fp16_plan: Fp16Plan::DEFAULT,
        int8_plan: None,
        force: false,
        golden: None,
    }
}

fn first_dim(m: &ModelProto) -> Option<Dim> {
    let t = m.graph.as_ref()?.input.first()?.r#type.as_ref()?.value.clone()?;
    let Ty::TensorType(t) = t;
    t.shape?.dim.first()?.value.clone()
}

#[test]
fn opset_24_bundles_carry_each_profiles_shared_graphs_in_fp32_and_fp16() {
    let dir = tempfile::tempdir().unwrap();
    let ck = small_checkpoint(dir.path());
    let out = dir.path().join("all");
    let all = [Precision::Fp32, Precision::Fp16, Precision::Int8];
    let m = export(&options(&ck, out.clone(), &all, OpsetVariant::Opset24), &mut |_| {}).unwrap();
    assert_eq!(m.family.toto2_profiles.len(), 3);
    for p in &m.family.toto2_profiles {
        let kinds = p.sets[0].dims.graphs();
        assert_eq!(p.shared.len(), kinds.len() * 2, "{}: {:?}", p.profile.name, p.shared);
        for g in &p.shared {
            assert!(kinds.contains(&g.kind) && g.precision != Precision::Int8, "{g:?}");
            let stem = format!("{}.dynamic.{}", p.profile.name, g.kind.as_str());
            assert_eq!(g.file, exporter::export::graph_file(&stem, g.precision));
            assert!(m.files.iter().any(|f| f.path == g.file), "{} not in the manifest's files", g.file);
            let model = ModelProto::decode(fs::read(out.join(&g.file)).unwrap().as_slice()).unwrap();
            assert_eq!(model.graph.as_ref().unwrap().node.len(), g.nodes);
            // rows symbolic, where each set's static graph has its own number
            assert_eq!(first_dim(&model), Some(Dim::DimParam("rows".into())), "{}", g.file);
            assert!(g.inputs.iter().all(|s| s.is_dynamic()), "{}", g.file);
        }
    }
    // opset 18 (ScatterND caches): no shared graphs, and no `shared` key in its manifest
    let out18 = dir.path().join("opset18");
    let m =
        export(&options(&ck, out18.clone(), &[Precision::Fp32], OpsetVariant::Opset18), &mut |_| {}).unwrap();
    assert!(m.family.toto2_profiles.iter().all(|p| p.shared.is_empty()));
    let text = fs::read_to_string(out18.join("manifest.json")).unwrap();
    assert!(
        !text.contains("\"shared\"") && !text.contains(".dynamic."),
        "opset 18 manifest names shared graphs"
    );
}

/// The shared graphs are written after every static graph and read the static graphs' weights: a bundle's static
/// graphs and weight files (fp32 and fp16) are byte-identical to the static graphs written alone, in the export's
/// order.
#[test]
fn shared_graphs_leave_the_static_graphs_and_weights_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt_dir = small_checkpoint(dir.path());
    let out = dir.path().join("bundle");
    let precisions = [Precision::Fp32, Precision::Fp16];
    let opts = options(&ckpt_dir, out.clone(), &precisions, OpsetVariant::Opset24);
    let m = export(&opts, &mut |_| {}).unwrap();
    assert!(m.family.toto2_profiles.iter().all(|p| !p.shared.is_empty()));

    let alone = dir.path().join("alone");
    fs::create_dir_all(&alone).unwrap();
    let ck = Toto2Checkpoint::load(&ckpt_dir).unwrap();
    let mut statics = Vec::new();
    for precision in precisions {
        let wfile = exporter::export::weights_file(precision);
        let mut store = WeightStore::create(&alone.join(&wfile), &wfile).unwrap();
        for profile in &opts.profiles {
            for dims in ladder::ladder(profile, &ck.config).unwrap() {
                let name = ladder::set_name(&profile.name, &dims);
                let v = OpsetVariant::Opset24;
                let written = write_graph_set(&ck, &mut store, &alone, &name, &dims, v, precision).unwrap();
                statics.extend(written.into_iter().map(|g| g.file));
            }
        }
        store.finish().unwrap();
        statics.push(wfile);
    }
    assert!(statics.len() > 2);
    for f in &statics {
        assert_eq!(fs::read(out.join(f)).unwrap(), fs::read(alone.join(f)).unwrap(), "{f} differs");
    }
}
