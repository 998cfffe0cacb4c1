//! The shape-polymorphic graphs (one per kind, rows and slots symbolic; what a TensorRT engine serving every
//! bucket is built from) compute exactly what each bucket's static graph computes. Checked on ONNX Runtime CPU:
//! one session of the dynamic graph serves two buckets of different sizes, and matches their static graphs on
//! the same inputs (mixtures and caches), over several decode steps with the cache updated in place.
mod support;

use engines::backend::{session_config, Stage, Target};
use engines::graph::{CacheMode, GraphRunner, SharedSession, SharedWeights};
use engines::host::rope;
use engines::toto1::session::{causal_mask, key_mask};
use exporter::bucket::Bucket;
use exporter::export::ExportOptions;
use exporter::graph::precision::FloatTypes;
use exporter::graph::Fp16Plan;
use exporter::manifest::Manifest;
use exporter::profile_file::ProfileSet;
use exporter::registry::export_bundle as export;
use exporter::toto1::signature::{self, GraphKind, Precision};
use exporter::variant::OpsetVariant;
use support::root;

fn init() -> &'static engines::runtime::Runtime {
    engines::runtime::init(None).unwrap_or_else(|e| panic!("{e}"))
}

/// Deterministic pseudo-random values in [-1, 1).
fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// Fills a prefill or decode runner's inputs for `bucket` (identically for the static and the dynamic graph).
fn fill(r: &mut GraphRunner, bucket: Bucket, dh: usize, patch: usize, step: usize) {
    let n = bucket.rows;
    let gid: Vec<i64> = (0..n as i64).map(|i| i / 2).collect();
    r.input_mut::<i64>(signature::GROUP_ID).unwrap().copy_from_slice(&gid);
    match bucket.kind {
        GraphKind::Prefill => {
            let s = bucket.slots;
            r.write_f32(signature::PATCHES, 0, &noise(n * s * patch, 7)).unwrap();
            let real: Vec<usize> = (0..n).map(|i| 1 + (i * 3) % s).collect();
            let last: Vec<i64> = real.iter().map(|&k| k as i64 - 1).collect();
            r.input_mut::<i64>(signature::LAST_INDEX).unwrap().copy_from_slice(&last);
            let mut t = [vec![0f32; n * s * dh], vec![0f32; n * s * dh], vec![0f32; n * s * dh]];
            for (row, &k) in real.iter().enumerate() {
                let span = row * s * dh..(row + 1) * s * dh;
                let [c, sn, x] = &mut t;
                rope::fill_prefill(s, k, dh, &mut c[span.clone()], &mut sn[span.clone()], &mut x[span]);
            }
            for (name, v) in [signature::ROPE_COS, signature::ROPE_SIN, signature::XPOS_SCALE].iter().zip(&t)
            {
                r.write_f32(name, 0, v).unwrap();
            }
            if r.has_input(signature::TIME_MASK) {
                r.write_f32(signature::TIME_MASK, 0, &causal_mask(s)).unwrap();
            }
        }
        GraphKind::Decode => {
            let t_slots = bucket.slots;
            r.write_f32(signature::PATCHES, 0, &noise(n * patch, 11 + step as u64)).unwrap();
            let pos: Vec<usize> = (0..n).map(|i| (3 + i + step) % t_slots).collect();
            let wp: Vec<i64> = pos.iter().map(|&p| p as i64).collect();
            r.input_mut::<i64>(signature::WRITE_POS).unwrap().copy_from_slice(&wp);
            let mut t = [vec![0f32; n * dh], vec![0f32; n * dh], vec![0f32; n * dh]];
            for (row, &p) in pos.iter().enumerate() {
                let span = row * dh..(row + 1) * dh;
                let [c, sn, x] = &mut t;
                rope::fill_decode(p, dh, &mut c[span.clone()], &mut sn[span.clone()], &mut x[span]);
            }
            for (name, v) in [signature::ROPE_COS, signature::ROPE_SIN, signature::XPOS_SCALE].iter().zip(&t)
            {
                r.write_f32(name, 0, v).unwrap();
            }
            if r.has_input(signature::TIME_MASK) {
                r.write_f32(signature::TIME_MASK, 0, &key_mask(&pos, t_slots)).unwrap();
            }
        }
        other => unreachable!("Toto 1.0 buckets are prefill or decode, not {other:?}"),
    }
}

fn max_diff(a: &GraphRunner, b: &GraphRunner, name: &str, f16: bool) -> f32 {
    let (x, y): (Vec<f32>, Vec<f32>) = if f16 && name.contains("cache") {
        let conv =
            |r: &GraphRunner| r.output::<half::f16>(name).unwrap().iter().map(|v| v.to_f32()).collect();
        (conv(a), conv(b))
    } else {
        (a.output::<f32>(name).unwrap().to_vec(), b.output::<f32>(name).unwrap().to_vec())
    };
    assert_eq!(x.len(), y.len(), "{name}");
    x.iter().zip(&y).map(|(p, q)| (p - q).abs()).fold(0.0, f32::max)
}

fn check(precision: Precision) {
    let rt = init();
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    let profiles = ProfileSet::from_file(&root().join("configs/tiny.yaml")).unwrap().profiles;
    let opts = ExportOptions {
        checkpoint: root().join("tests/fixtures/tiny/checkpoint"),
        tokenizer: None,
        profiles,
        out: bundle.clone(),
        precisions: vec![precision],
        variant: OpsetVariant::Opset24,
        fp16_plan: Fp16Plan::DEFAULT,
        int8_plan: None,
        force: false,
        golden: None,
    };
    export(&opts, &mut |_| {}).unwrap();
    let m = Manifest::read(&bundle).unwrap();
    let target = Target::cpu(Some(1));
    let cfg = session_config(&target, &Stage::Load { bundle_dir: bundle.clone() }, precision);
    let weights = SharedWeights::new(rt);
    let ft = FloatTypes::new(precision, &Fp16Plan::DEFAULT);
    let f16 = precision == Precision::Fp16;
    for kind in GraphKind::PREFILL_DECODE {
        let dynamic =
            m.family.dynamic_graphs.iter().find(|g| g.kind == kind && g.precision == precision).unwrap();
        let shared = SharedSession::open(
            rt,
            &bundle.join(&dynamic.file),
            &dynamic.file,
            &target,
            &cfg,
            Some(&weights),
        )
        .unwrap();
        let graphs: Vec<_> = m.family.profiles[0].graphs.iter().filter(|g| g.bucket.kind == kind).collect();
        // the smallest and the largest bucket of the kind, on the one shared session
        for g in [graphs.first().unwrap(), graphs.last().unwrap()] {
            let d = g.dims;
            let name = g.file.as_str();
            let mut stat =
                GraphRunner::load(rt, &bundle.join(name), name, &target, &cfg, Some(&weights)).unwrap();
            let ins = signature::dynamic_bucket_inputs(&d, ft.io(), ft.softmax);
            let outs = signature::outputs(&d, ft.io());
            let mut dynr = GraphRunner::load_bucket(&shared, &dynamic.file, &target, ins, outs, 0).unwrap();
            let steps = if kind == GraphKind::Decode { 3 } else { 1 };
            if kind == GraphKind::Decode {
                assert_eq!((stat.cache_mode(), dynr.cache_mode()), (CacheMode::InPlace, CacheMode::InPlace));
                // the same starting caches in both
                for c in stat.cache_inputs().map(String::from).collect::<Vec<_>>() {
                    let v = noise(
                        stat.input::<f32>(&c)
                            .map(|x| x.len())
                            .unwrap_or_else(|_| stat.input::<half::f16>(&c).unwrap().len()),
                        3,
                    );
                    stat.write_f32(&c, 0, &v).unwrap();
                    dynr.write_f32(&c, 0, &v).unwrap();
                }
            }
            for step in 0..steps {
                fill(&mut stat, g.bucket, d.head_dim, d.patch, step);
                fill(&mut dynr, g.bucket, d.head_dim, d.patch, step);
                stat.run().unwrap();
                dynr.run().unwrap();
                // fp32: the same arithmetic. fp16: ONNX Runtime's CPU provider wraps fp16 ops in casts and may fuse
                // the static graph (constant masks) differently, so results can differ by a few fp16 ulps.
                let tol = if f16 { 2e-3 } else { 1e-5 };
                for o in signature::outputs(&d, ft.io()) {
                    let diff = max_diff(&stat, &dynr, &o.name, f16);
                    assert!(diff <= tol, "{name} step {step}: {} differs by {diff}", o.name);
                }
            }
            eprintln!("{precision} {name}: dynamic graph = static graph over {steps} run(s)");
        }
    }
}

#[test]
fn dynamic_graphs_compute_what_the_static_buckets_compute() {
    check(Precision::Fp32);
}

#[test]
fn dynamic_fp16_graphs_compute_what_the_static_fp16_buckets_compute() {
    check(Precision::Fp16);
}
