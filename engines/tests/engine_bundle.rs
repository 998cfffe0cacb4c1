//! `build-engine` on a synthetic export bundle (two tiny graphs typed per `exporter::signature`, one shared
//! weight file): the CPU round trip, refusal of a modified file, and clear errors for missing GPU providers and a
//! missing ONNX Runtime library.
mod common;

use std::path::Path;

use engines::backend::Target;
use engines::bundle::{BuildEvent, BuildOptions, EngineBundle, EngineManifest, GraphForm, ENGINE_FORMAT};
use engines::graph::{CacheMode, CacheMove};
use engines::registry::build_engine;
use exporter::fsutil::sha256_file;
use exporter::signature::Precision;

use common::*;

fn build_cpu(src: &Path, out: &Path) -> EngineManifest {
    init_ort();
    let mut events = Vec::new();
    let m = build_engine(src, &Target::cpu(Some(1)), out, &BuildOptions::default(), &mut |e| events.push(e))
        .unwrap();
    assert!(
        matches!(
            events.first(),
            Some(BuildEvent::Start { graphs: 2, precision: Precision::Fp32, emulation: false })
        ),
        "{events:?}"
    );
    assert_eq!(
        events.iter().filter(|e| matches!(e, BuildEvent::Graph { total: 2, .. })).count(),
        2,
        "{events:?}"
    );
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
    assert!(m.family.dropped.is_empty());
    let names: Vec<&str> = m.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        names,
        ["tiny.decode.n6.t3.onnx", "tiny.prefill.n2.s2.onnx", "weights.fp32.bin"],
        "weights once"
    );
    assert_eq!(m.weights_bytes, source.files.iter().find(|f| f.path == "weights.fp32.bin").unwrap().bytes);
    for f in &m.files {
        assert_eq!(f.sha256, sha256_file(&out.join(&f.path)).unwrap());
    }
    for (g, s) in m.family.profiles[0].graphs.iter().zip(&source.family.profiles[0].graphs) {
        assert_eq!(
            (g.bucket, g.dims, &g.inputs, g.memory_bytes),
            (s.bucket, s.dims, &s.inputs, s.memory_bytes)
        );
        assert!(g.providers.iter().all(|p| p.provider == "CPUExecutionProvider") && !g.providers.is_empty());
    }
    // the manifest on disk is the one returned
    assert_eq!(EngineManifest::read(&out).unwrap(), m);
    assert!(!dir.path().read_dir().unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains("partial")));

    // load and run: prefill → copy caches → decode, same numbers as the export bundle's graphs
    let engine = EngineBundle::load(&out, None).unwrap();
    let (pg, dg) = (&m.family.profiles[0].graphs[0], &m.family.profiles[0].graphs[1]);
    let mut prefill = engine.load_graph(&pg.file()).unwrap();
    let mut decode = engine.load_graph(&dg.file()).unwrap();
    assert_eq!(decode.cache_mode(), CacheMode::InPlace);
    let (pd, dd) = (pg.dims, dg.dims);
    for (i, x) in prefill.input_mut::<f32>("patches").unwrap().iter_mut().enumerate() {
        *x = (i % 7) as f32 - 3.0;
    }
    prefill.run().unwrap();
    // loc = last context patch · w + bias + 10 (the synthetic graph), w[i,j] = 0.25·(i·P+j) − 1, bias[j] = j/2
    let pch = pd.patch;
    let patches = prefill.input::<f32>("patches").unwrap().to_vec();
    let loc = prefill.output::<f32>("loc").unwrap();
    for r in 0..pd.rows {
        let last = &patches[(r * pd.slots + pd.slots - 1) * pch..][..pch];
        for j in 0..pch {
            let want: f32 = (0..pch).map(|i| last[i] * (0.25 * (i * pch + j) as f32 - 1.0)).sum::<f32>()
                + j as f32 * 0.5
                + 10.0;
            for k in 0..pd.components {
                let got = loc[(r * pch + j) * pd.components + k];
                assert!((got - want).abs() < 1e-4, "loc[{r},{j},{k}] = {got}, want {want}");
            }
        }
    }
    // every decode row (3 paths × 2 variates) takes its variate's 2 prefill slots
    let moves: Vec<CacheMove> =
        (0..dd.rows).map(|r| CacheMove { dst: r, src: r % 2, slots: pd.slots }).collect();
    decode.copy_cache(&prefill, &moves).unwrap();
    decode.input_mut::<i64>("write_pos").unwrap().fill(pd.slots as i64);
    decode.input_mut::<f32>("patches").unwrap().fill(1.0);
    decode.run().unwrap();
    assert_eq!(decode.cache_copies_logged(), 0);
    let k0 = decode.output::<f32>("k_cache_out.0").unwrap();
    let src_k0 = prefill.output::<f32>("k_cache_out.0").unwrap();
    let col_sum =
        |j: usize| (0..pch).map(|i| 0.25 * (i * pch + j) as f32 - 1.0).sum::<f32>() + j as f32 * 0.5;
    for r in 0..dd.rows {
        for h in 0..dd.heads {
            let row = (r * dd.heads + h) * dd.slots * dd.head_dim;
            let src = ((r % 2) * pd.heads + h) * pd.slots * pd.head_dim;
            // copied slots, then the written one: 1·w + bias
            assert_eq!(&k0[row..row + pd.slots * dd.head_dim], &src_k0[src..src + pd.slots * pd.head_dim]);
            let at = row + pd.slots * dd.head_dim;
            for j in 0..dd.head_dim {
                assert!((k0[at + j] - col_sum(j)).abs() < 1e-4);
            }
        }
    }
}

#[test]
fn buckets_beyond_the_memory_budget_are_left_out_with_a_note() {
    let dir = tempdir();
    let src = dir.path().join("export");
    let source = synthetic_bundle(&src);
    init_ort();
    let graphs = &source.family.profiles[0].graphs;
    let weights = source.files.iter().find(|f| f.path == "weights.fp32.bin").unwrap().bytes;
    // room for the prefill's buffers but not the decode's
    let budget = weights + graphs[0].memory_bytes.max(graphs[1].memory_bytes) - 1;
    assert!(graphs[1].memory_bytes > graphs[0].memory_bytes);
    let opts = BuildOptions { memory_budget: Some(budget), ..BuildOptions::default() };
    let mut events = Vec::new();
    let m = build_engine(&src, &Target::cpu(Some(1)), &dir.path().join("e"), &opts, &mut |e| events.push(e))
        .unwrap();
    assert!(events
        .iter()
        .any(|e| matches!(e, BuildEvent::Dropped { file, .. } if file == "tiny.decode.n6.t3.onnx")));
    assert_eq!(m.family.profiles[0].graphs.len(), 1);
    assert_eq!(m.family.dropped.len(), 1);
    assert!(m.family.dropped[0].reason.contains("memory budget"), "{}", m.family.dropped[0].reason);
    assert!(!dir.path().join("e/tiny.decode.n6.t3.onnx").exists());
    // without even a prefill, nothing is built
    let opts = BuildOptions { memory_budget: Some(weights + 1), ..BuildOptions::default() };
    let e =
        build_engine(&src, &Target::cpu(Some(1)), &dir.path().join("e2"), &opts, &mut |_| {}).unwrap_err();
    assert!(e.to_string().contains("no prefill bucket"), "{e}");
    assert!(!dir.path().join("e2").exists());
}

#[test]
fn a_modified_file_is_refused_by_name() {
    let dir = tempdir();
    let src = dir.path().join("export");
    synthetic_bundle(&src);
    let out = dir.path().join("engine");
    build_cpu(&src, &out);
    let victim = out.join("tiny.decode.n6.t3.onnx");
    let mut bytes = std::fs::read(&victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&victim, bytes).unwrap();
    let e = EngineBundle::load(&out, None).unwrap_err().to_string();
    assert!(e.contains("tiny.decode.n6.t3.onnx") && e.contains("sha256"), "{e}");

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
    for (target, provider) in [(Target::cuda(0, true), "CUDA"), (Target::tensorrt(0, true), "TensorRT")] {
        let out = dir.path().join(target.name());
        let e =
            build_engine(&src, &target, &out, &BuildOptions::default(), &mut |_| {}).unwrap_err().to_string();
        eprintln!("{e}");
        assert!(e.contains(&format!("execution provider {provider}: not available")), "{e}");
        assert!(e.contains("libonnxruntime_providers_"), "{e}");
        assert!(e.contains("onnxruntime-gpu 1.31.1 (CUDA 13)"), "{e}");
        assert!(!out.exists(), "nothing is left behind");
    }
    // an fp16 engine needs fp16 graphs in the bundle: said before any provider is touched
    let opts = BuildOptions { precision: Some(Precision::Fp16), ..BuildOptions::default() };
    let e = build_engine(&src, &Target::tensorrt(0, false), &dir.path().join("x"), &opts, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds fp32 graphs, not fp16") && e.contains("--precision fp16"), "{e}");
    assert!(!dir.path().join("x").exists());
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
    // shared (shape-polymorphic) sessions need the bundle's dynamic graphs, which this synthetic bundle lacks
    let opts = BuildOptions { graphs: Some(GraphForm::Shared), ..Default::default() };
    let e = build_engine(&src, &Target::cpu(None), &dir.path().join("s"), &opts, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no shape-polymorphic fp32 prefill graph") && e.contains("--graphs per-bucket"),
        "{e}"
    );
    assert!(!dir.path().join("s").exists());
    let e = EngineBundle::load(&src, None).unwrap_err().to_string();
    assert!(e.contains("is an export bundle, not an engine") && e.contains("totoc build-engine"), "{e}");
    std::fs::write(dir.path().join("manifest.json"), "{\"format\": 1}").unwrap();
    let e = EngineBundle::load(dir.path(), None).unwrap_err().to_string();
    assert!(e.contains("not a totoc engine manifest"), "{e}");
}
