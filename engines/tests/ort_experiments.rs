//! Measurements behind the design of `engines::graph` and `engines::bundle` (run by hand; they print
//! numbers, RSS needs one process per variant):
//!
//! ```sh
//! B=$(cargo test --release -p engines --test ort_experiments --no-run 2>&1 | grep -o 'target/[^)]*')
//! $B --ignored --nocapture kv_cache_update_schemes
//! for v in one default prepacked noprepack shared_init shared_init_prepacked membuf_noprepack; do
//!   EXP_VARIANT=$v $B --ignored --nocapture rss_two_sessions_one_weight; done
//! for v in runner_plain runner_shared; do EXP_VARIANT=$v $B --ignored --nocapture rss_graph_runner; done
//! EXP_BUNDLE=<export bundle> $B --ignored --nocapture optimized_model_files   # default: the synthetic bundle
//! EXP_BUNDLE=<export bundle> $B --ignored --nocapture real_bundle_engine
//! ```
//! * `kv_cache_update_schemes`: in place (output bound to the input's buffer) vs ping-pong vs a separate output
//!   copied back, for a `TensorScatter` KV-cache update: correctness over several steps, time per step, and how
//!   often ORT logs that it copied the cache.
//! * `rss_*`: resident memory of sessions sharing one large external initializer (`$EXP_SESSIONS` of them).
//! * `optimized_model_files`: what `with_optimized_model_path` + external initializers write per graph.
//! * `real_bundle_engine`: `build_engine` (CPU) + load + prefill/decode of every profile of a real export.
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ort::memory::Allocator;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;

use common::*;

static COPY_WARNINGS: AtomicUsize = AtomicUsize::new(0);

fn session(path: &std::path::Path) -> Session {
    let rt = init_ort();
    Session::builder(rt.environment())
        .unwrap()
        .with_intra_threads(1)
        .unwrap()
        .with_logger(Arc::new(|_l, _c, _i, _loc, msg: &str| {
            if msg.contains("in-place optimization not activated") {
                COPY_WARNINGS.fetch_add(1, Ordering::Relaxed);
            }
        }))
        .unwrap()
        .commit_from_file(path)
        .unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Scheme {
    /// `k_cache_out.0` bound to the same tensor as `k_cache.0`.
    InPlace,
    /// Separate output tensor, copied back by the host each step (what a naive binding does).
    CopyBack,
    /// Two tensors, input/output bindings swapped after each run.
    PingPong,
}

/// Runs `steps` decode steps; returns (seconds per step, final cache) and checks `read` every step.
fn run_scheme(scheme: Scheme, dims: [usize; 4], steps: usize, check: bool) -> (f64, Vec<f32>) {
    let [b, h, s, d] = dims;
    let dir = tempdir();
    let path = dir.path().join("scatter.onnx");
    save(&tensor_scatter_model(b, h, s, d), &path);
    let mut sess = session(&path);
    let alloc = Allocator::default();
    let mut caches = [Tensor::<f32>::new(&alloc, dims).unwrap(), Tensor::<f32>::new(&alloc, dims).unwrap()];
    let mut update = Tensor::<f32>::new(&alloc, [b, h, 1, d]).unwrap();
    let mut pos = Tensor::<i64>::new(&alloc, [b]).unwrap();
    let mut read = Tensor::<f32>::new(&alloc, [b, h, d]).unwrap();
    let mut binding = sess.create_binding().unwrap();
    binding.bind_input("update", &update).unwrap();
    binding.bind_input("write_pos", &pos).unwrap();
    binding.bind_output("read", &mut read).unwrap();
    let bind_cache =
        |binding: &mut ort::session::IoBinding, caches: &mut [Tensor<f32>; 2], cur: usize| match scheme {
            Scheme::InPlace => {
                binding.bind_input("k_cache.0", &caches[0]).unwrap();
                binding.bind_output("k_cache_out.0", &mut caches[0]).unwrap();
            }
            Scheme::CopyBack | Scheme::PingPong => {
                binding.bind_input("k_cache.0", &caches[cur]).unwrap();
                binding.bind_output("k_cache_out.0", &mut caches[1 - cur]).unwrap();
            }
        };
    let mut cur = 0;
    bind_cache(&mut binding, &mut caches, cur);
    let mut expect = vec![0f32; b * h * s * d];
    let mut elapsed = 0.0;
    for step in 0..steps {
        let slot = step % s;
        {
            let (_, u) = update.extract_tensor_mut();
            for (i, x) in u.iter_mut().enumerate() {
                *x = (step * 1000 + i) as f32;
            }
            let (_, p) = pos.extract_tensor_mut();
            p.iter_mut().for_each(|x| *x = slot as i64);
        }
        // `bind_input` of a Tensor::new tensor binds that very OrtValue (no copy), so host writes above are seen.
        let t = Instant::now();
        let outputs = sess.run_binding(&binding).unwrap();
        drop(outputs);
        match scheme {
            Scheme::InPlace => {}
            Scheme::CopyBack => {
                let (a, b2) = caches.split_at_mut(1);
                a[0].extract_tensor_mut().1.copy_from_slice(b2[0].extract_tensor().1);
            }
            Scheme::PingPong => {
                cur = 1 - cur;
                bind_cache(&mut binding, &mut caches, cur);
            }
        }
        elapsed += t.elapsed().as_secs_f64();
        if check {
            let (_, u) = update.extract_tensor();
            for bh in 0..b * h {
                for k in 0..d {
                    expect[((bh * s) + slot) * d + k] = u[bh * d + k];
                }
            }
            let state = match scheme {
                Scheme::PingPong => &caches[cur],
                _ => &caches[0],
            };
            assert_eq!(state.extract_tensor().1, &expect[..], "{scheme:?} cache after step {step}");
            let got = read.extract_tensor().1;
            for bh in 0..b * h {
                for k in 0..d {
                    let want: f32 = (0..s).map(|j| expect[((bh * s) + j) * d + k]).sum();
                    assert!((got[bh * d + k] - want).abs() <= 1e-3 * want.abs().max(1.0), "{scheme:?} read");
                }
            }
        }
    }
    let state = match scheme {
        Scheme::PingPong => &caches[cur],
        _ => &caches[0],
    };
    (elapsed / steps as f64, state.extract_tensor().1.to_vec())
}

#[test]
#[ignore]
fn kv_cache_update_schemes() {
    init_ort();
    // correctness (small cache, several wraps of the slot index)
    for scheme in [Scheme::InPlace, Scheme::CopyBack, Scheme::PingPong] {
        COPY_WARNINGS.store(0, Ordering::Relaxed);
        let (_, fin) = run_scheme(scheme, [2, 2, 8, 4], 20, true);
        let (_, fin2) = run_scheme(scheme, [2, 2, 8, 4], 20, false);
        assert_eq!(fin, fin2);
        println!(
            "{scheme:?}: small cache ok, copy warnings logged: {}",
            COPY_WARNINGS.load(Ordering::Relaxed)
        );
    }
    // timing: a Toto-base-sized decode cache, [B·V=64, H=12, S=64, Dh=64] f32 = 12 MiB; and a larger one
    for dims in [[64, 12, 64, 64], [256, 12, 128, 64]] {
        let mb = dims.iter().product::<usize>() as f64 * 4.0 / 1048576.0;
        for scheme in [Scheme::InPlace, Scheme::CopyBack, Scheme::PingPong] {
            COPY_WARNINGS.store(0, Ordering::Relaxed);
            run_scheme(scheme, dims, 3, false);
            let (t, _) = run_scheme(scheme, dims, 30, false);
            println!(
                "{scheme:?} cache {dims:?} ({mb:.0} MiB): {:.3} ms/step, copy warnings {}",
                t * 1e3,
                COPY_WARNINGS.load(Ordering::Relaxed)
            );
        }
    }
}

/// (VmRSS, RssAnon, RssFile, Pss) in MiB.
fn mem() -> (f64, f64, f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let field = |t: &str, k: &str| -> f64 {
        t.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    (field(&status, "VmRSS:"), field(&status, "RssAnon:"), field(&status, "RssFile:"), field(&rollup, "Pss:"))
}

/// The RSS experiments' models: one 64 MiB weight (`weights.bin`, 4096×4096 f32) used by a `prefill` (8 rows)
/// and a `decode` (1 row) MatMul graph, as a profile's two graphs share the model's weights.
fn shared_weight_models(dir: &std::path::Path, n: usize) {
    let w: Vec<f32> = (0..n * n).map(|i| ((i % 97) as f32 - 48.0) * 1e-3).collect();
    write_weights(&dir.join("weights.bin"), &[&w]);
    drop(w);
    for (name, rows) in [("prefill", 8usize), ("decode", 1)] {
        let m = model(
            name,
            17,
            vec![node("MatMul", &["x", "w"], &["y"], vec![])],
            vec![external_f32("w", &[n as i64, n as i64], "weights.bin", 0)],
            vec![vi("x", exporter::signature::DType::F32, &[rows, n])],
            vec![vi("y", exporter::signature::DType::F32, &[rows, n])],
        );
        save(&m, &dir.join(format!("{name}.onnx")));
    }
}

/// Two graphs (rows 1 and 8) computing `x · W` with one shared external `W` [N, N] f32; variant from
/// `$EXP_VARIANT`: `one` (a single session), `default`, `prepacked` (shared PrepackedWeights),
/// `noprepack` (`session.disable_prepacking`), `shared_init` (W added once as an initializer OrtValue to both),
/// `prepacked_opt` (shared PrepackedWeights over ORT-optimised models with their own weight files),
/// `shared_init_prepacked` (both), `membuf_noprepack` / `membuf_prepacked` (the weight file read once into memory
/// and handed to every session with `AddExternalInitializersFromMemory`); `$EXP_SESSIONS` sessions (default 2).
#[test]
#[ignore]
fn rss_two_sessions_one_weight() {
    let variant = std::env::var("EXP_VARIANT").unwrap_or_else(|_| "default".into());
    let n = 4096usize;
    let rt = init_ort();
    let dir = tempdir();
    shared_weight_models(dir.path(), n);
    let base = mem();
    println!("[{variant}] W = {} MiB; baseline rss {:.0} MiB", n * n * 4 / 1048576, base.0);
    let prepacked = ort::session::builder::PrepackedWeights::new();
    let shared_w = if variant.starts_with("shared_init") {
        let bytes = std::fs::read(dir.path().join("weights.bin")).unwrap();
        let v: Vec<f32> = bytes.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        Some(std::sync::Arc::new(Tensor::from_array(([n, n], v)).unwrap().into_dyn()))
    } else {
        None
    };
    let mut paths = vec![dir.path().join("prefill.onnx"), dir.path().join("decode.onnx")];
    if variant == "prepacked_opt" {
        for (i, p) in paths.clone().iter().enumerate() {
            let out = dir.path().join(format!("g{i}.opt.onnx"));
            let _s = Session::builder(rt.environment())
                .unwrap()
                .with_optimization_level(GraphOptimizationLevel::Level2)
                .unwrap()
                .with_optimized_model_path(&out)
                .unwrap()
                .with_config_entry(
                    "session.optimized_model_external_initializers_file_name",
                    format!("g{i}.opt.weights.bin"),
                )
                .unwrap()
                .with_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
                .unwrap()
                .commit_from_file(p)
                .unwrap();
            paths[i] = out;
        }
        println!("[{variant}] optimised models written; rss now {:.0} MiB", mem().0);
    }
    let mut sessions = Vec::new();
    let count =
        if variant == "one" { 1 } else { std::env::var("EXP_SESSIONS").map_or(2, |v| v.parse().unwrap()) };
    let membuf: std::sync::Arc<[u8]> = if variant.starts_with("membuf") {
        std::fs::read(dir.path().join("weights.bin")).unwrap().into()
    } else {
        std::sync::Arc::from(Vec::new())
    };
    for p in paths.iter().cycle().take(count) {
        let t = Instant::now();
        let mut b = Session::builder(rt.environment()).unwrap().with_intra_threads(1).unwrap();
        match variant.as_str() {
            "prepacked" | "prepacked_opt" => b = b.with_prepacked_weights(&prepacked).unwrap(),
            "noprepack" => b = b.with_prepacking(false).unwrap(),
            "shared_init" => b = b.with_initializer("w", shared_w.clone().unwrap()).unwrap(),
            "shared_init_prepacked" => {
                b = b
                    .with_initializer("w", shared_w.clone().unwrap())
                    .unwrap()
                    .with_prepacked_weights(&prepacked)
                    .unwrap()
            }
            "membuf_noprepack" | "membuf_prepacked" => {
                b = b
                    .with_external_initializer_file_in_memory("weights.bin", membuf.clone())
                    .unwrap()
                    .with_config_entry("session.use_external_initializer_file_buffers_directly", "1")
                    .unwrap();
                b = if variant == "membuf_noprepack" {
                    b.with_prepacking(false).unwrap()
                } else {
                    b.with_prepacked_weights(&prepacked).unwrap()
                };
            }
            _ => {}
        }
        let mut s = b.commit_from_file(p).unwrap();
        let load = t.elapsed().as_secs_f64();
        let m = mem();
        let rows = s.inputs()[0].dtype().tensor_shape().unwrap()[0] as usize;
        let x = Tensor::from_array(([rows, n], vec![1f32; rows * n])).unwrap();
        let t = Instant::now();
        let iters = 20;
        for _ in 0..iters {
            let out = s.run(ort::inputs!["x" => x.clone()]).unwrap();
            drop(out);
        }
        let run = t.elapsed().as_secs_f64() / iters as f64;
        let m2 = mem();
        println!(
            "[{variant}] {}: load {:.0} ms, rss {:.0} (anon {:.0}, file {:.0}, pss {:.0}) MiB; after runs rss {:.0} \
             (anon {:.0}, file {:.0}, pss {:.0}) MiB; {:.2} ms/run",
            p.file_name().unwrap().to_string_lossy(),
            load * 1e3,
            m.0 - base.0,
            m.1 - base.1,
            m.2 - base.2,
            m.3 - base.3,
            m2.0 - base.0,
            m2.1 - base.1,
            m2.2 - base.2,
            m2.3 - base.3,
            run * 1e3
        );
        sessions.push(s);
    }
}

/// Optimises every graph of the export bundle at `$EXP_BUNDLE` (default: the synthetic bundle) at level
/// Extended with external initializers and prints what ORT writes.
#[test]
#[ignore]
fn optimized_model_files() {
    use prost::Message;
    let rt = init_ort();
    let tmp = tempdir();
    let bundle = match std::env::var("EXP_BUNDLE") {
        Ok(p) => std::path::PathBuf::from(p),
        Err(_) => {
            synthetic_bundle(&tmp.path().join("bundle"));
            tmp.path().join("bundle")
        }
    };
    let out =
        std::env::var("EXP_OUT").map(std::path::PathBuf::from).unwrap_or_else(|_| tmp.path().join("opt"));
    std::fs::create_dir_all(&out).unwrap();
    let manifest = exporter::manifest::Manifest::read(&bundle).unwrap();
    for p in &manifest.family.profiles {
        for g in &p.graphs {
            let stem = g.file.trim_end_matches(".onnx");
            let t = Instant::now();
            let _s = Session::builder(rt.environment())
                .unwrap()
                .with_optimization_level(GraphOptimizationLevel::Level2)
                .unwrap()
                .with_optimized_model_path(out.join(format!("{stem}.opt.onnx")))
                .unwrap()
                .with_config_entry(
                    "session.optimized_model_external_initializers_file_name",
                    format!("{stem}.opt.weights.bin"),
                )
                .unwrap()
                .with_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
                .unwrap()
                .commit_from_file(bundle.join(&g.file))
                .unwrap();
            let src = std::fs::metadata(bundle.join(&g.file)).unwrap().len();
            let opt = std::fs::metadata(out.join(format!("{stem}.opt.onnx"))).unwrap().len();
            let w =
                std::fs::metadata(out.join(format!("{stem}.opt.weights.bin"))).map(|m| m.len()).unwrap_or(0);
            let m = exporter::pb::ModelProto::decode(
                &*std::fs::read(out.join(format!("{stem}.opt.onnx"))).unwrap(),
            )
            .unwrap();
            let gr = m.graph.unwrap();
            let ext = gr.initializer.iter().filter(|t| !t.external_data.is_empty()).count();
            let offsets: Vec<String> = gr
                .initializer
                .iter()
                .filter(|t| !t.external_data.is_empty())
                .take(4)
                .map(|t| {
                    format!(
                        "{}@{}",
                        t.name,
                        t.external_data.iter().find(|e| e.key == "offset").map_or("?", |e| &e.value)
                    )
                })
                .collect();
            let mut ops: Vec<String> =
                gr.node.iter().map(|n| format!("{}:{}", n.domain, n.op_type)).collect();
            ops.sort();
            ops.dedup();
            println!(
                "{}: source {} B -> optimised {} B + weights {} B in {:.0} ms; {} nodes (source {}), {} initializers ({} external, e.g. {:?}); ops {:?}",
                g.file,
                src,
                opt,
                w,
                t.elapsed().as_secs_f64() * 1e3,
                gr.node.len(),
                exporter::pb::ModelProto::decode(&*std::fs::read(bundle.join(&g.file)).unwrap()).unwrap().graph.unwrap().node.len(),
                gr.initializer.len(),
                ext,
                offsets,
                ops
            );
        }
    }
    let src_w = std::fs::metadata(bundle.join("weights.fp32.bin")).map(|m| m.len()).unwrap_or(0);
    println!("source weights.fp32.bin: {src_w} B");
}

/// The same two graphs through `GraphRunner`: `$EXP_VARIANT` = `runner_plain` (no sharing) or `runner_shared`
/// (`SharedWeights`: shared initializers over one mmap + one prepacked container, pages released after load);
/// `$EXP_SESSIONS` runners (default 4 = two profiles' worth).
#[test]
#[ignore]
fn rss_graph_runner_weight_sharing() {
    use engines::backend::{session_config, Stage, Target};
    use engines::graph::{GraphRunner, SharedWeights};
    let variant = std::env::var("EXP_VARIANT").unwrap_or_else(|_| "runner_shared".into());
    let count: usize = std::env::var("EXP_SESSIONS").map_or(4, |v| v.parse().unwrap());
    let n = 4096usize;
    let rt = init_ort();
    let dir = tempdir();
    shared_weight_models(dir.path(), n);
    let target = Target::cpu(Some(1));
    let cfg = session_config(
        &target,
        &Stage::Load { bundle_dir: dir.path().to_path_buf() },
        exporter::signature::Precision::Fp32,
    );
    let shared = SharedWeights::new(rt);
    let base = mem();
    println!("[{variant}] W = {} MiB; baseline rss {:.0} MiB", n * n * 4 / 1048576, base.0);
    let mut runners = Vec::new();
    for (i, name) in ["prefill", "decode"].iter().cycle().take(count).enumerate() {
        let t = Instant::now();
        let weights = (variant == "runner_shared").then_some(&shared);
        let mut r =
            GraphRunner::load(rt, &dir.path().join(format!("{name}.onnx")), name, &target, &cfg, weights)
                .unwrap();
        let load = t.elapsed().as_secs_f64();
        if i % 2 == 1 {
            shared.release_pages();
        }
        r.input_mut::<f32>("x").unwrap().fill(1.0);
        let t = Instant::now();
        for _ in 0..20 {
            r.run().unwrap();
        }
        let run = t.elapsed().as_secs_f64() / 20.0;
        let want: f32 = (0..n).map(|k| ((k * n % 97) as f32 - 48.0) * 1e-3).sum();
        assert!((r.output::<f32>("y").unwrap()[0] - want).abs() < 1e-2);
        let m = mem();
        println!(
            "[{variant}] runner {} ({name}): load {:.0} ms, {:.2} ms/run; rss {:.0} (anon {:.0}, file {:.0}, pss {:.0}) MiB",
            i + 1,
            load * 1e3,
            run * 1e3,
            m.0 - base.0,
            m.1 - base.1,
            m.2 - base.2,
            m.3 - base.3
        );
        runners.push(r);
    }
}

/// `build-engine` (CPU) on the export bundle at `$EXP_BUNDLE` (e.g. a `totoc export` of
/// `tests/fixtures/tiny/checkpoint`), then every bucket loaded and run once (`Engine::warm_up`), with the time
/// each took.
#[test]
#[ignore]
fn real_bundle_engine() {
    use engines::backend::Target;
    use engines::bundle::BuildOptions;
    use engines::engine::{Engine, LoadOptions};
    use engines::registry::build_engine;
    init_ort();
    let src = std::path::PathBuf::from(std::env::var("EXP_BUNDLE").expect("set EXP_BUNDLE"));
    let out = std::env::var("EXP_OUT")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| std::env::temp_dir().join("totoc-engine-exp"));
    let t = Instant::now();
    let m = build_engine(
        &src,
        &Target::cpu(None),
        &out,
        &BuildOptions { force: true, ..Default::default() },
        &mut |e| println!("  {e:?}"),
    )
    .unwrap();
    println!("built in {:.2} s", t.elapsed().as_secs_f64());
    for f in &m.files {
        println!("  {} {} B", f.path, f.bytes);
    }
    let engine = Engine::load(&out, &LoadOptions::default()).unwrap();
    let t = Instant::now();
    let n = engine.warm_up().unwrap();
    println!("{n} buckets loaded and run in {:.2} s", t.elapsed().as_secs_f64());
    for b in engine.bucket_stats() {
        println!("  {}: {} run(s), {:.2} ms, loaded {}", b.name, b.runs, b.seconds * 1e3, b.loaded);
    }
}
