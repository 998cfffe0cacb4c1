//! `GraphRunner` on ONNX Runtime CPU: fixed-address I/O, in-place KV caches (checked against a host model of
//! the cache over several steps), the ping-pong fallback, cache broadcast and provider reporting.
mod common;

use engines::backend::{session_config, Stage, Target};
use engines::graph::{CacheMode, CacheMove, GraphRunner, SharedWeights};
use exporter::signature::{DType, Precision};

use common::*;

fn load(path: &std::path::Path, name: &str) -> GraphRunner {
    let rt = init_ort();
    let target = Target::cpu(Some(1));
    let cfg = session_config(
        &target,
        &Stage::Load { bundle_dir: path.parent().unwrap().to_path_buf() },
        Precision::Fp32,
    );
    GraphRunner::load(rt, path, name, &target, &cfg, None).unwrap()
}

/// Steps a `[b,h,s,d]` scatter graph `steps` times and checks the cache and the read against a host copy.
fn check_cache_steps(runner: &mut GraphRunner, [b, h, s, d]: [usize; 4], steps: usize) {
    let mut expect = vec![0f32; b * h * s * d];
    runner.input_mut::<f32>("k_cache.0").unwrap().fill(0.0);
    for step in 0..steps {
        let slot = (step * 3) % s;
        let upd: Vec<f32> = (0..b * h * d).map(|i| (step * 100 + i) as f32).collect();
        runner.input_mut::<f32>("update").unwrap().copy_from_slice(&upd);
        runner.input_mut::<i64>("write_pos").unwrap().fill(slot as i64);
        runner.run().unwrap();
        for bh in 0..b * h {
            expect[(bh * s + slot) * d..(bh * s + slot + 1) * d].copy_from_slice(&upd[bh * d..(bh + 1) * d]);
        }
        assert_eq!(runner.output::<f32>("k_cache_out.0").unwrap(), &expect[..], "cache after step {step}");
        assert_eq!(
            runner.input::<f32>("k_cache.0").unwrap(),
            &expect[..],
            "the next run's input is the new cache"
        );
        let read = runner.output::<f32>("read").unwrap();
        for bh in 0..b * h {
            for k in 0..d {
                let want: f32 = (0..s).map(|j| expect[(bh * s + j) * d + k]).sum();
                assert!((read[bh * d + k] - want).abs() <= 1e-3 * want.abs().max(1.0), "read at step {step}");
            }
        }
    }
}

#[test]
fn tensor_scatter_cache_updates_in_place_without_a_copy() {
    let dir = tempdir();
    let path = dir.path().join("scatter.onnx");
    let dims = [2, 2, 8, 4];
    save(&tensor_scatter_model(dims[0], dims[1], dims[2], dims[3]), &path);
    let mut r = load(&path, "scatter");
    assert_eq!(r.cache_mode(), CacheMode::InPlace);
    assert_eq!(r.cache_inputs().collect::<Vec<_>>(), ["k_cache.0"]);
    check_cache_steps(&mut r, dims, 12);
    assert_eq!(r.cache_copies_logged(), 0, "ORT copied the cache: the in-place binding did not take");
    assert_eq!(r.main_provider(), Some("CPUExecutionProvider"));
    assert_eq!(r.providers().iter().map(|p| p.nodes).sum::<usize>(), 2, "{:?}", r.providers());
}

#[test]
fn scatter_nd_cache_updates_in_place_too() {
    // k_cache_out = ScatterND(k_cache, indices [b,h,1,3] = (b, h, pos), update [b,h,1,d]); read = ReduceSum
    let (b, h, s, d) = (2usize, 2usize, 8usize, 4usize);
    let f = DType::F32;
    let m = model(
        "scatter_nd",
        18,
        vec![
            node("ScatterND", &["k_cache.0", "indices", "update"], &["k_cache_out.0"], vec![]),
            node("ReduceSum", &["k_cache_out.0", "axes"], &["read"], vec![("keepdims", A::I(0))]),
        ],
        vec![const_i64("axes", &[1], &[2])],
        vec![
            vi("k_cache.0", f, &[b, h, s, d]),
            vi("indices", DType::I64, &[b, h, 3]),
            vi("update", f, &[b, h, d]),
        ],
        vec![vi("k_cache_out.0", f, &[b, h, s, d]), vi("read", f, &[b, h, d])],
    );
    let dir = tempdir();
    let path = dir.path().join("nd.onnx");
    save(&m, &path);
    let mut r = load(&path, "nd");
    assert_eq!(r.cache_mode(), CacheMode::InPlace);
    let mut expect = vec![0f32; b * h * s * d];
    for step in 0..6 {
        let slot = step % s;
        let idx: Vec<i64> =
            (0..b * h).flat_map(|bh| [(bh / h) as i64, (bh % h) as i64, slot as i64]).collect();
        r.input_mut::<i64>("indices").unwrap().copy_from_slice(&idx);
        let upd: Vec<f32> = (0..b * h * d).map(|i| (step * 10 + i) as f32).collect();
        r.input_mut::<f32>("update").unwrap().copy_from_slice(&upd);
        r.run().unwrap();
        for bh in 0..b * h {
            expect[(bh * s + slot) * d..(bh * s + slot + 1) * d].copy_from_slice(&upd[bh * d..(bh + 1) * d]);
        }
        assert_eq!(r.output::<f32>("k_cache_out.0").unwrap(), &expect[..]);
    }
}

#[test]
fn a_cache_read_before_its_update_falls_back_to_ping_pong() {
    // `k_cache.0` is also read directly (old cache), so writing in place would change what that read sees.
    let (b, h, s, d) = (1usize, 2usize, 4usize, 4usize);
    let m = tensor_scatter_model_reading("k_cache.0", b, h, s, d);
    let dir = tempdir();
    let path = dir.path().join("old.onnx");
    save(&m, &path);
    let mut r = load(&path, "old_read");
    assert_eq!(r.cache_mode(), CacheMode::PingPong);
    let mut expect = vec![0f32; b * h * s * d];
    for step in 0..5 {
        let before: Vec<f32> = expect.clone();
        let upd: Vec<f32> = (0..b * h * d).map(|i| (step * 10 + i + 1) as f32).collect();
        r.input_mut::<f32>("update").unwrap().copy_from_slice(&upd);
        r.input_mut::<i64>("write_pos").unwrap().fill((step % s) as i64);
        r.run().unwrap();
        for bh in 0..b * h {
            let o = (bh * s + step % s) * d;
            expect[o..o + d].copy_from_slice(&upd[bh * d..(bh + 1) * d]);
        }
        assert_eq!(r.output::<f32>("k_cache_out.0").unwrap(), &expect[..], "step {step}");
        assert_eq!(r.input::<f32>("k_cache.0").unwrap(), &expect[..]);
        let read = r.output::<f32>("read").unwrap();
        let want: f32 = (0..s).map(|j| before[j * d]).sum();
        assert_eq!(read[0], want, "the read sees the cache before this step's write");
    }
}

#[test]
fn unknown_names_and_wrong_types_are_clear_errors() {
    let dir = tempdir();
    let path = dir.path().join("scatter.onnx");
    save(&tensor_scatter_model(1, 1, 2, 2), &path);
    let mut r = load(&path, "scatter");
    let e = r.input_mut::<f32>("nope").unwrap_err().to_string();
    assert!(e.contains("nope") && e.contains("k_cache.0") && e.contains("scatter"), "{e}");
    let e = r.input_mut::<i64>("update").unwrap_err().to_string();
    assert!(e.contains("update") && e.contains("i64"), "{e}");
    assert!(r.output::<f32>("k_cache.0").is_err());
}

#[test]
fn copy_cache_moves_prefill_slots_into_longer_decode_caches() {
    let dir = tempdir();
    let manifest = synthetic_bundle(dir.path());
    let graphs = &manifest.family.profiles[0].graphs;
    let rt = init_ort();
    let target = Target::cpu(Some(1));
    let cfg = session_config(&target, &Stage::Load { bundle_dir: dir.path().to_path_buf() }, Precision::Fp32);
    let weights = SharedWeights::new(rt);
    let load =
        |f: &str| GraphRunner::load(rt, &dir.path().join(f), f, &target, &cfg, Some(&weights)).unwrap();
    let mut prefill = load(&graphs[0].file);
    let mut decode = load(&graphs[1].file);
    assert_eq!(prefill.cache_mode(), CacheMode::None);
    assert_eq!(decode.cache_mode(), CacheMode::InPlace);
    let (pd, dd) = (graphs[0].dims, graphs[1].dims);
    for (i, x) in prefill.input_mut::<f32>("patches").unwrap().iter_mut().enumerate() {
        *x = i as f32 * 0.1;
    }
    prefill.run().unwrap();
    // decode rows: paths × variates, each from its variate's prefill row; fewer slots than the cache holds
    let moves: Vec<CacheMove> =
        (0..dd.rows).map(|r| CacheMove { dst: r, src: r % pd.rows, slots: pd.slots - (r % 2) }).collect();
    decode.input_mut::<f32>("k_cache.0").unwrap().fill(7.0);
    decode.copy_cache(&prefill, &moves).unwrap();
    for name in ["k_cache", "v_cache"] {
        for i in 0..dd.time_layers {
            let src = prefill.output::<f32>(&format!("{name}_out.{i}")).unwrap().to_vec();
            let dst = decode.input::<f32>(&format!("{name}.{i}")).unwrap();
            for m in &moves {
                for h in 0..dd.heads {
                    let d0 = (m.dst * dd.heads + h) * dd.slots * dd.head_dim;
                    let s0 = (m.src * pd.heads + h) * pd.slots * pd.head_dim;
                    let n = m.slots * dd.head_dim;
                    assert_eq!(&dst[d0..d0 + n], &src[s0..s0 + n]);
                    if name == "k_cache" && i == 0 {
                        // slots past the move are untouched
                        assert!(dst[d0 + n..d0 + dd.slots * dd.head_dim].iter().all(|&x| x == 7.0));
                    }
                }
            }
        }
    }
    // a decode step then writes slot `write_pos` in place
    decode.input_mut::<i64>("write_pos").unwrap().fill(pd.slots as i64);
    decode.run().unwrap();
    assert_eq!(decode.cache_copies_logged(), 0);
    let bad = [CacheMove { dst: dd.rows, src: 0, slots: 1 }];
    let e = decode.copy_cache(&prefill, &bad).unwrap_err().to_string();
    assert!(e.contains("outside"), "{e}");
    let bad = [CacheMove { dst: 0, src: 0, slots: pd.slots + 1 }];
    assert!(decode.copy_cache(&prefill, &bad).is_err());
}

/// A reader of a cache another graph updates in place (`read = ReduceSum(k_cache.0, axes=[2])`, no output cache).
fn cache_reader_model(b: usize, h: usize, s: usize, d: usize) -> exporter::pb::ModelProto {
    let f = DType::F32;
    model(
        "reader",
        24,
        vec![node("ReduceSum", &["k_cache.0", "axes"], &["read"], vec![("keepdims", A::I(0))])],
        vec![const_i64("axes", &[1], &[2])],
        vec![vi("k_cache.0", f, &[b, h, s, d])],
        vec![vi("read", f, &[b, h, d])],
    )
}

#[test]
fn a_shared_input_reads_the_cache_where_another_graph_updates_it() {
    let dir = tempdir();
    let dims = [2, 2, 8, 4];
    let [b, h, s, d] = dims;
    save(&tensor_scatter_model(b, h, s, d), &dir.path().join("scatter.onnx"));
    save(&cache_reader_model(b, h, s, d), &dir.path().join("reader.onnx"));
    let mut writer = load(&dir.path().join("scatter.onnx"), "scatter");
    let mut reader = load(&dir.path().join("reader.onnx"), "reader");
    reader.share_input("k_cache.0", &writer).unwrap();
    let e = reader.input::<f32>("k_cache.0").unwrap_err().to_string();
    assert!(e.contains("is graph scatter's buffer"), "{e}");
    writer.input_mut::<f32>("k_cache.0").unwrap().fill(0.0);
    for step in 0..5 {
        let upd: Vec<f32> = (0..b * h * d).map(|i| (step * 10 + i) as f32).collect();
        writer.input_mut::<f32>("update").unwrap().copy_from_slice(&upd);
        writer.input_mut::<i64>("write_pos").unwrap().fill(step as i64);
        writer.run().unwrap();
        reader.run().unwrap();
        // the reader sums what the writer's cache holds now, without a copy between them
        assert_eq!(
            reader.output::<f32>("read").unwrap(),
            writer.output::<f32>("read").unwrap(),
            "step {step}"
        );
    }
    assert_eq!(writer.cache_copies_logged(), 0);
    // the writer dropped: the reader's binding keeps the buffer alive
    drop(writer);
    reader.run().unwrap();
    // a buffer of another shape cannot be shared
    save(&tensor_scatter_model(1, h, s, d), &dir.path().join("small.onnx"));
    let other = load(&dir.path().join("small.onnx"), "small");
    let e = reader.share_input("k_cache.0", &other).unwrap_err().to_string();
    assert!(e.contains("only equal buffers can be shared"), "{e}");
}

#[test]
fn a_single_cache_named_with_an_out_suffix_updates_in_place() {
    // `dep_k_cache_out` updates `dep_k_cache` (a graph's one cache of its kind, no layer index)
    let (b, h, s, d) = (1, 2, 6, 3);
    let f = DType::F32;
    let m = model(
        "dep",
        24,
        vec![node(
            "TensorScatter",
            &["dep_k_cache", "update", "write_pos"],
            &["dep_k_cache_out"],
            vec![("mode", A::S("linear"))],
        )],
        vec![],
        vec![
            vi("dep_k_cache", f, &[b, h, s, d]),
            vi("update", f, &[b, h, 1, d]),
            vi("write_pos", DType::I64, &[b]),
        ],
        vec![vi("dep_k_cache_out", f, &[b, h, s, d])],
    );
    let dir = tempdir();
    save(&m, &dir.path().join("dep.onnx"));
    let mut r = load(&dir.path().join("dep.onnx"), "dep");
    assert_eq!(r.cache_mode(), CacheMode::InPlace);
    assert_eq!(r.cache_inputs().collect::<Vec<_>>(), ["dep_k_cache"]);
    r.input_mut::<f32>("dep_k_cache").unwrap().fill(0.0);
    r.input_mut::<f32>("update").unwrap().fill(7.0);
    r.input_mut::<i64>("write_pos").unwrap().fill(2);
    r.run().unwrap();
    let c = r.input::<f32>("dep_k_cache").unwrap();
    assert_eq!(c[2 * d..3 * d], [7.0; 3]);
    assert_eq!(r.cache_copies_logged(), 0);
}
