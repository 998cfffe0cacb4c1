//! `build-engine` on a synthetic export bundle (two tiny graphs typed per `exporter::signature`, one shared
//! weight file): the CPU round trip, refusal of a modified file, and clear errors for missing GPU providers and a
//! missing ONNX Runtime library.
mod common;

use std::path::Path;

use engines::backend::Target;
use engines::engine_bundle::{
    build_engine, BuildEvent, BuildOptions, EngineBundle, EngineManifest, ENGINE_FORMAT, ENGINE_WEIGHTS,
};
use engines::graph::CacheMode;
use exporter::fsutil::sha256_file;

use common::*;

fn build_cpu(src: &Path, out: &Path) -> EngineManifest {
    init_ort();
    let mut events = Vec::new();
    let m = build_engine(src, &Target::cpu(Some(1)), out, &BuildOptions::default(), &mut |e| events.push(e))
        .unwrap();
    assert!(matches!(events.first(), Some(BuildEvent::Start { graphs: 2 })), "{events:?}");
    assert!(events.iter().any(|e| matches!(e, BuildEvent::Weights { .. })), "{events:?}");
    m
}

#[test]
fn cpu_build_round_trip() {
    let dir = tempdir();
    let src = dir.path().join("export");
    let source = synthetic_bundle(&src);
    let out = dir.path().join("engine");
    let m = build_cpu(&src, &out);
    for f in &m.files {
        eprintln!("{} {} B", f.path, f.bytes);
    }

    assert_eq!(m.format, ENGINE_FORMAT);
    assert_eq!(m.target, Target::cpu(Some(1)));
    assert_eq!(m.source.manifest_sha256, sha256_file(&src.join("manifest.json")).unwrap());
    assert_eq!(m.model, source.model);
    assert_eq!(m.profiles[0].dims, source.profiles[0].dims);
    let names: Vec<&str> = m.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        names,
        ["tiny.decode.opt.onnx", "tiny.prefill.opt.onnx", ENGINE_WEIGHTS],
        "one merged weight file"
    );
    // both graphs' 2 KiB `w_wide` is stored once
    let merged = m.files.iter().find(|f| f.path == ENGINE_WEIGHTS).unwrap().bytes;
    assert_eq!(merged, 4 * 4 * 128, "{merged}");
    for f in &m.files {
        assert_eq!(f.sha256, sha256_file(&out.join(&f.path)).unwrap());
    }
    for g in &m.profiles[0].graphs {
        assert_eq!(g.inputs, source.profiles[0].graph(g.kind).unwrap().inputs);
        assert!(g.providers.iter().all(|p| p.provider == "CPUExecutionProvider") && !g.providers.is_empty());
        assert!(g
            .build_session
            .config_entries
            .iter()
            .any(|(k, _)| k == "session.optimized_model_external_initializers_file_name"));
    }
    // the manifest on disk is the one returned
    assert_eq!(EngineManifest::read(&out).unwrap(), m);
    assert!(!dir.path().read_dir().unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains("partial")));

    // load and run: prefill → broadcast caches → decode, same numbers as the export bundle's graphs
    let mut engine = EngineBundle::load(&out, None).unwrap();
    let p = engine.profile("tiny").unwrap();
    assert_eq!(p.cache_mode(), CacheMode::InPlace);
    let d = p.profile.dims;
    let (prefill, decode) = p.runners();
    for (i, x) in prefill.input_mut::<f32>("patches").unwrap().iter_mut().enumerate() {
        *x = (i % 7) as f32 - 3.0;
    }
    prefill.run().unwrap();
    // loc = last context patch · w + bias + 10 (the synthetic graph), w[i,j] = 0.25·(i·P+j) − 1, bias[j] = j/2
    let pch = d.patch;
    let patches = prefill.input::<f32>("patches").unwrap().to_vec();
    let loc = prefill.output::<f32>("loc").unwrap();
    for v in 0..d.variates {
        let last = &patches[(v * d.context_slots + d.context_slots - 1) * pch..][..pch];
        for j in 0..pch {
            let want: f32 = (0..pch).map(|i| last[i] * (0.25 * (i * pch + j) as f32 - 1.0)).sum::<f32>()
                + j as f32 * 0.5
                + 10.0;
            for k in 0..d.components {
                let got = loc[((v * pch) + j) * d.components + k];
                assert!((got - want).abs() < 1e-4, "loc[{v},{j},{k}] = {got}, want {want}");
            }
        }
    }
    let rows: Vec<usize> = (0..d.decode_rows).flat_map(|_| 0..d.variates).collect();
    decode.copy_cache_rows(prefill, &rows).unwrap();
    decode.input_mut::<i64>("write_pos").unwrap().fill(d.context_slots as i64);
    decode.input_mut::<f32>("patches").unwrap().fill(1.0);
    decode.run().unwrap();
    assert_eq!(decode.cache_copies_logged(), 0);
    let k0 = decode.output::<f32>("k_cache_out.0").unwrap();
    let row = d.heads * d.max_slots * d.head_dim;
    // the written slot holds 1·w + bias (column sums of w plus j/2); other slots the prefill broadcast
    for r in 0..d.decode_rows * d.variates {
        for h in 0..d.heads {
            let at = r * row + (h * d.max_slots + d.context_slots) * d.head_dim;
            for j in 0..d.head_dim {
                let want: f32 =
                    (0..pch).map(|i| 0.25 * (i * pch + j) as f32 - 1.0).sum::<f32>() + j as f32 * 0.5;
                assert!((k0[at + j] - want).abs() < 1e-4);
            }
        }
    }
    // profiles load once; unknown profiles are named
    assert!(engine.profile("tiny").is_ok());
    let e = engine.profile("huge").unwrap_err().to_string();
    assert!(e.contains("huge") && e.contains("tiny"), "{e}");
}

#[test]
fn a_modified_file_is_refused_by_name() {
    let dir = tempdir();
    let src = dir.path().join("export");
    synthetic_bundle(&src);
    let out = dir.path().join("engine");
    build_cpu(&src, &out);
    let victim = out.join("tiny.decode.opt.onnx");
    let mut bytes = std::fs::read(&victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&victim, bytes).unwrap();
    let e = EngineBundle::load(&out, None).unwrap_err().to_string();
    assert!(e.contains("tiny.decode.opt.onnx") && e.contains("sha256"), "{e}");

    // and a modified export bundle is refused before anything is built
    let w = src.join("weights.fp32.bin");
    let mut bytes = std::fs::read(&w).unwrap();
    bytes[0] ^= 0x80;
    std::fs::write(&w, bytes).unwrap();
    let e =
        build_engine(&src, &Target::cpu(None), &dir.path().join("e2"), &BuildOptions::default(), &mut |_| {})
            .unwrap_err()
            .to_string();
    assert!(e.contains("weights.fp32.bin"), "{e}");
    assert!(!dir.path().join("e2").exists());
}

#[test]
fn gpu_targets_without_their_provider_fail_clearly() {
    let dir = tempdir();
    let src = dir.path().join("export");
    synthetic_bundle(&src);
    let rt = init_ort();
    let has = |p: &str| rt.available_providers().iter().any(|a| a == p);
    if has("CUDAExecutionProvider") {
        eprintln!("skipping: this ONNX Runtime has the CUDA provider");
        return;
    }
    for (target, provider) in
        [(Target::cuda(0, true), "CUDA"), (Target::tensorrt(0, false, true), "TensorRT")]
    {
        let out = dir.path().join(target.name());
        let e =
            build_engine(&src, &target, &out, &BuildOptions::default(), &mut |_| {}).unwrap_err().to_string();
        eprintln!("{e}");
        assert!(e.contains(&format!("execution provider {provider}: not available")), "{e}");
        assert!(e.contains("libonnxruntime_providers_"), "{e}");
        assert!(e.contains("onnxruntime-gpu 1.31.1 (CUDA 13)"), "{e}");
        assert!(!out.exists(), "nothing is left behind");
    }
    // TensorRT fp16 needs an fp16 export: said before any provider is touched
    let e = build_engine(
        &src,
        &Target::tensorrt(0, true, false),
        &dir.path().join("x"),
        &BuildOptions::default(),
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("fp16_graph") && e.contains("F32"), "{e}");
}

#[test]
fn unknown_profile_and_not_an_engine_are_clear_errors() {
    let dir = tempdir();
    let src = dir.path().join("export");
    synthetic_bundle(&src);
    init_ort();
    let opts = BuildOptions { profiles: vec!["nope".into()], ..Default::default() };
    let e = build_engine(&src, &Target::cpu(None), &dir.path().join("e"), &opts, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("nope") && e.contains("tiny"), "{e}");
    let e = EngineBundle::load(&src, None).unwrap_err().to_string();
    assert!(e.contains("not a totoc engine manifest"), "{e}");
}
