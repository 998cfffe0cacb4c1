//! Cost in seconds (`engines::cost`): a family's estimate of a group of requests is the plan its forecast runs —
//! the same graphs, the same number of runs — and every graph an estimate names has a rate measured at warm-up,
//! so the engine can always price what it plans. On the tiny Toto 1.0 engine (buckets: prefill calls and decode
//! passes, sample paths split over passes, several series packed) and a random-weight Toto 2.0 4m engine (graph
//! sets: single passes and block decoding, packed chunks). Counts only: no timing is asserted.
mod support;

use std::collections::BTreeMap;
use std::path::Path;

use engines::backend::Target;
use engines::budget::RequestSize;
use engines::bundle::BuildOptions;
use engines::engine::{Engine, LoadOptions};
use engines::registry::build_engine;
use engines::request::ForecastRequest;
use engines::toto2::engine::Toto2Engine;
use exporter::export::ExportOptions;
use exporter::graph::Fp16Plan;
use exporter::profile_file::ProfileSet;
use exporter::registry::export_bundle;
use exporter::signature::Precision;
use exporter::toto2::synth;
use exporter::variant::OpsetVariant;
use support::{cpu_engine, root};

fn request(variates: usize, context: usize, horizon: usize, samples: usize) -> ForecastRequest {
    ForecastRequest {
        id: None,
        target: (0..variates)
            .map(|v| (0..context).map(|t| Some(((t * 7 + v * 3) % 11) as f32 + 0.5 * v as f32)).collect())
            .collect(),
        id_mask: vec![0; variates],
        horizon,
        samples,
        quantiles: Vec::new(),
        seed: if samples > 0 { 3 } else { 0 },
        ..ForecastRequest::default()
    }
}

/// The counts of admitted requests, as a server estimates them.
fn sizes(engine: &Engine, reqs: &mut [ForecastRequest]) -> Vec<RequestSize> {
    reqs.iter_mut()
        .map(|r| {
            engine.admit(r, "r").unwrap();
            RequestSize::of(r)
        })
        .collect()
}

/// The estimate's runs by graph.
fn estimated(engine: &Engine, sizes: &[RequestSize]) -> BTreeMap<String, u64> {
    let e = engine.estimate(sizes).expect("an estimate");
    for g in &e.graphs {
        let rate = engine.rates().get().unwrap();
        let r = rate.get(&g.graph).unwrap_or_else(|| panic!("no rate for {}", g.graph));
        assert_eq!(g.row_steps, g.runs * r.rows as u64, "{}: row-steps are runs × rows", g.graph);
    }
    assert!(engine.estimate_seconds(sizes).is_some_and(|t| t > 0.0));
    e.graphs.into_iter().map(|g| (g.graph, g.runs)).collect()
}

#[test]
fn toto1_estimates_are_the_runs_its_forecasts_make() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = cpu_engine("tiny", tmp.path(), OpsetVariant::Opset24);
    assert!(engine.rates().get().is_none(), "no rates before warm-up");
    assert_eq!(engine.estimate_seconds(&[RequestSize::of(&request(1, 64, 16, 0))]), None);
    engine.warm_up().unwrap();
    let rates = engine.rates().get().unwrap();
    assert_eq!(rates.graphs.len(), engine.buckets().len(), "one rate per bucket");
    assert!(rates
        .graphs
        .iter()
        .all(|g| g.seconds_per_run > 0.0 && g.timed_runs >= engines::cost::MIN_TIMED_RUNS));

    let groups: Vec<Vec<ForecastRequest>> = vec![
        // one mean forecast: a prefill, then decode steps
        vec![request(1, 100, 40, 0)],
        // a horizon within one patch: prefill only
        vec![request(2, 64, 10, 0)],
        // 256 sample paths of 2 variates: many passes on the short cache
        vec![request(2, 100, 64, 256)],
        // 4 variates × 64 paths at the longest horizon, packed with mean forecasts of other lengths
        vec![request(4, 256, 160, 64), request(1, 30, 160, 0), request(3, 200, 90, 0), request(1, 256, 8, 0)],
    ];
    for mut group in groups {
        let s = sizes(&engine, &mut group);
        let want = estimated(&engine, &s);
        for r in engine.forecast(group) {
            r.unwrap();
        }
        let mut ran: BTreeMap<String, u64> = BTreeMap::new();
        for run in engine.last_call() {
            *ran.entry(engine.bucket_name(run.bucket)).or_default() += 1;
        }
        assert_eq!(want, ran, "estimated runs (left) against the call's runs (right) for {s:?}");
    }
    // A series no bucket holds: no estimate.
    assert!(engine
        .estimate(&[RequestSize { variates: 9, ..RequestSize::of(&request(1, 8, 8, 0)) }])
        .is_none());
}

/// A random-weight Toto 2.0 fixture, regenerated from its seed, exported with the Toto 2.0 test profiles (single
/// pass and block decoding) and built for the CPU.
fn toto2_engine(config: &str, dir: &Path) -> Engine {
    #[derive(serde::Deserialize)]
    struct Prov {
        checkpoints: BTreeMap<String, Ck>,
    }
    #[derive(serde::Deserialize)]
    struct Ck {
        seed: u64,
        shards: usize,
    }
    let fx = root().join("tests/fixtures/toto2");
    let prov: Prov = serde_json::from_slice(&std::fs::read(fx.join("provenance.json")).unwrap()).unwrap();
    let json = std::fs::read_to_string(fx.join(config).join("config.json")).unwrap();
    let checkpoint = dir.join("checkpoint");
    let p = &prov.checkpoints[config];
    synth::write_checkpoint(&checkpoint, &json, p.seed, p.shards).unwrap();
    let bundle = dir.join("bundle");
    let opts = ExportOptions {
        checkpoint,
        tokenizer: None,
        profiles: ProfileSet::from_file(&fx.join("profiles.yaml")).unwrap().profiles,
        out: bundle.clone(),
        precisions: vec![Precision::Fp32],
        variant: OpsetVariant::Opset24,
        fp16_plan: Fp16Plan::DEFAULT,
        int8_plan: None,
        force: true,
        golden: None,
    };
    export_bundle(&opts, &mut |_| {}).unwrap();
    let out = dir.join("engine");
    let build = BuildOptions { precision: Some(Precision::Fp32), force: true, ..BuildOptions::default() };
    build_engine(&bundle, &Target::cpu(None), &out, &build, &mut |_| {}).unwrap();
    Engine::load(&out, &LoadOptions::default()).unwrap()
}

#[test]
fn toto2_estimates_are_the_runs_its_forecasts_make() {
    let tmp = tempfile::tempdir().unwrap();
    let engine = toto2_engine("4m", tmp.path());
    engine.warm_up().unwrap();
    let t2 = engine.family_engine().as_any().downcast_ref::<Toto2Engine>().expect("a Toto 2.0 engine");
    let rates = engine.rates().get().unwrap();
    // every set's first graph, and the decode graph of each block-decoding set
    assert!(rates.graphs.len() > t2.set_names().len(), "{:?}", rates.graphs);
    assert!(rates.graphs.iter().any(|g| g.kind == "decode") && rates.graphs.iter().any(|g| g.kind == "pass"));

    let groups: Vec<Vec<ForecastRequest>> = vec![
        // a single pass
        vec![request(2, 300, 96, 0)],
        // block decoding over several blocks (the block profiles' horizons exceed a block)
        vec![request(2, 500, 336, 0)],
        vec![request(3, 256, 200, 0)],
        // several requests packed, on different shapes
        vec![request(1, 512, 336, 0), request(2, 100, 20, 0), request(1, 64, 200, 0), request(4, 512, 48, 0)],
    ];
    for mut group in groups {
        let s = sizes(&engine, &mut group);
        let want = estimated(&engine, &s);
        let before: BTreeMap<String, u64> = t2.graph_runs().into_iter().collect();
        for r in engine.forecast(group) {
            r.unwrap();
        }
        let ran: BTreeMap<String, u64> = t2
            .graph_runs()
            .into_iter()
            .map(|(g, n)| {
                let was = before.get(&g).copied().unwrap_or(0);
                (g, n - was)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        assert_eq!(want, ran, "estimated runs (left) against the call's runs (right) for {s:?}");
    }
}
