//! Weights past 4 GiB (Toto 2.0 1B is 3.9 GiB in fp32, 2.5B 9.8 GiB): an initializer whose external-data offset
//! exceeds `u32::MAX` is found by `model_facts`, mapped and wrapped by `SharedWeights` (one mapped copy shared by
//! every session), and also read by ONNX Runtime itself (the GPU path), with the right values. The weight file
//! is sparse, so the test needs neither 4 GiB of disk nor of memory.
mod common;

use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;

use engines::backend::{session_config, Stage, Target};
use engines::graph::{model_facts, GraphRunner, SharedWeights};
use exporter::signature::DType;

use common::*;

const HIGH: u64 = (9 << 29) + 4096; // 4.5 GiB + 4 KiB

#[test]
fn initializers_past_4_gib_load_shared_and_through_onnx_runtime() {
    let dir = tempdir();
    let (low, high): (Vec<f32>, Vec<f32>) =
        ((0..12).map(|i| i as f32).collect(), (0..12).map(|i| -0.5 * i as f32).collect());
    let wpath = dir.path().join("weights.bin");
    {
        let mut f = std::fs::File::create(&wpath).unwrap();
        f.write_all(&low.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()).unwrap();
        f.seek(SeekFrom::Start(HIGH)).unwrap();
        f.write_all(&high.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()).unwrap();
    }
    let meta = std::fs::metadata(&wpath).unwrap();
    assert_eq!(meta.len(), HIGH + 48);
    assert!(meta.blocks() * 512 < 1 << 26, "the weight file is not sparse on this filesystem");

    // y = x · W_high, z = x · W_low; x [2, 4], W [4, 3]
    let f = DType::F32;
    let m = model(
        "large",
        24,
        vec![
            node("MatMul", &["x", "w_high"], &["y"], vec![]),
            node("MatMul", &["x", "w_low"], &["z"], vec![]),
        ],
        vec![
            external_f32("w_low", &[4, 3], "weights.bin", 0),
            external_f32("w_high", &[4, 3], "weights.bin", HIGH),
        ],
        vec![vi("x", f, &[2, 4])],
        vec![vi("y", f, &[2, 3]), vi("z", f, &[2, 3])],
    );
    let path = dir.path().join("large.onnx");
    save(&m, &path);
    let facts = model_facts(&path).unwrap();
    let offsets: Vec<u64> = facts.external.iter().map(|e| e.offset).collect();
    assert_eq!(offsets, [0, HIGH]);
    assert!(HIGH > u64::from(u32::MAX));

    let x: Vec<f32> = (0..8).map(|i| 1.0 + i as f32).collect();
    let matmul = |w: &[f32]| -> Vec<f32> {
        let mut out = vec![0f32; 6];
        for (i, o) in out.iter_mut().enumerate() {
            let (r, c) = (i / 3, i % 3);
            *o = (0..4).map(|k| x[r * 4 + k] * w[k * 3 + c]).sum();
        }
        out
    };
    let rt = init_ort();
    let target = Target::cpu(Some(1));
    let cfg = session_config(
        &target,
        &Stage::Load { bundle_dir: dir.path().to_path_buf() },
        exporter::signature::Precision::Fp32,
    );
    let shared = SharedWeights::new(rt);
    for weights in [Some(&shared), None] {
        let mut g = GraphRunner::load(rt, &path, "large", &target, &cfg, weights).unwrap();
        g.input_mut::<f32>("x").unwrap().copy_from_slice(&x);
        g.run().unwrap();
        assert_eq!(g.output::<f32>("y").unwrap(), matmul(&high).as_slice(), "shared: {}", weights.is_some());
        assert_eq!(g.output::<f32>("z").unwrap(), matmul(&low).as_slice(), "shared: {}", weights.is_some());
    }
}
