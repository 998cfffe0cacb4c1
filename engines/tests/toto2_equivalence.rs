//! Toto 2.0 equivalence with toto-2 2.0.0: every fixture checkpoint of `tests/fixtures/toto2/` (4m, 22m and the
//! sharded `small`) is regenerated from its seed (its weights digest must equal the reference's), exported with
//! the 2.0 graph builder into one shared external weight file, loaded with `GraphRunner` on ONNX Runtime CPU and
//! run on every golden case through the 2.0 driver (single pass and block decoding). The median and all nine
//! quantiles must match `Toto2Model.forecast` within `1e-4·σ + 1e-6·|ref|` per element; the head's raw knots
//! (asinh units) within 1e-4 and the scaler statistics of every block within 1e-6 relative are checked too, so a
//! failure points at the graph or the host. Shapes are padded (an extra row, context slot and horizon slot) so
//! the padding rules are exercised; a packed run of several cases must equal the cases run alone.
//!
//! int8 graphs (`toto2_int8_*`): the same cases within `1e-2·σ_eff + 1e-3·|ref|` on the median and quantiles,
//! `σ_eff = max(σ, scaler scale)` (the rule of the Toto 1.0 fp16 and int8 engines, `engines/tests/int8.rs`); raw
//! knots within `2e-2 + 1e-2·|ref|`, later blocks' scaler statistics (which read decoded values) in σ_eff units.
mod common;

use std::path::{Path, PathBuf};

use engines::backend::{session_config, Stage, Target};
use engines::compare::{compare, context_sigma, Report, Scale, Tolerance};
use engines::graph::{GraphRunner, SharedWeights};
use engines::request::{parse_request, ForecastRequest, Limits, Overrides};
use engines::toto2::rope::RopeTables;
use engines::toto2::{forecast_chunk, ChunkConfig, Toto2Forecast, Toto2Runners, Toto2Timings, Trace};
use exporter::export::weights_file;
use exporter::graph::WeightStore;
use exporter::signature::Precision;
use exporter::toto2::export::write_graph_set;
use exporter::toto2::{synth, Toto2Checkpoint, Toto2Config, Toto2Dims};
use exporter::variant::OpsetVariant;
use serde::Deserialize;

use common::init_ort;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("tests/fixtures/toto2")
}

#[derive(Deserialize)]
struct Provenance {
    checkpoints: std::collections::BTreeMap<String, CheckpointProv>,
}

#[derive(Deserialize)]
struct CheckpointProv {
    seed: u64,
    shards: usize,
    weights_sha256: String,
}

#[derive(Deserialize)]
struct CaseFile {
    request: serde_json::Value,
    options: Options,
    reference: Reference,
}

#[derive(Deserialize)]
struct Options {
    decode_block: Option<usize>,
}

#[derive(Deserialize)]
struct Reference {
    quantiles: Vec<Vec<Vec<f32>>>,
    median: Vec<Vec<f32>>,
    blocks: Vec<RefBlock>,
}

#[derive(Deserialize)]
struct RefBlock {
    raw: Vec<Vec<Vec<f32>>>,
    loc: Vec<f32>,
    scale: Vec<f32>,
}

struct Case {
    name: String,
    request: ForecastRequest,
    decode_block: Option<usize>,
    reference: Reference,
}

fn read_cases(config: &str) -> Vec<Case> {
    let dir = fixtures().join(config).join("cases");
    let mut paths: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let f: CaseFile = serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap();
            let text = f.request.to_string();
            let request = parse_request(&text, "case", &Overrides::default(), &Limits::default()).unwrap();
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            Case { name, request, decode_block: f.options.decode_block, reference: f.reference }
        })
        .collect()
}

/// The checkpoint of `config`, regenerated from its seed; its weights must be the reference's.
fn checkpoint(config: &str, dir: &Path) -> Toto2Checkpoint {
    let prov: Provenance =
        serde_json::from_slice(&std::fs::read(fixtures().join("provenance.json")).unwrap()).unwrap();
    let p = &prov.checkpoints[config];
    let json = std::fs::read_to_string(fixtures().join(config).join("config.json")).unwrap();
    let cfg = Toto2Config::from_json(&json).unwrap();
    assert_eq!(
        synth::weights_sha256(&cfg, p.seed),
        p.weights_sha256,
        "{config}: weights differ from the reference's"
    );
    synth::write_checkpoint(dir, &json, p.seed, p.shards).unwrap();
    let ck = Toto2Checkpoint::load(dir).unwrap();
    assert_eq!(ck.files().count(), p.shards);
    ck
}

/// Exports the graphs of `dims` into `dir` (one weight file) and loads them on ORT CPU, sharing the weights.
fn load_graphs(
    ck: &Toto2Checkpoint,
    dims: &Toto2Dims,
    dir: &Path,
    set: &str,
    update: OpsetVariant,
    precision: Precision,
) -> Vec<GraphRunner> {
    std::fs::create_dir_all(dir).unwrap();
    let wfile = format!("{set}.{}", weights_file(precision));
    let mut weights = WeightStore::create(&dir.join(&wfile), &wfile).unwrap();
    let files = write_graph_set(ck, &mut weights, dir, set, dims, update, precision).unwrap();
    weights.finish().unwrap();
    let rt = init_ort();
    let target = Target::cpu(Some(1));
    let cfg = session_config(&target, &Stage::Load { bundle_dir: dir.to_path_buf() }, precision);
    let shared = SharedWeights::new(rt);
    files
        .iter()
        .map(|f| GraphRunner::load(rt, &dir.join(&f.file), &f.file, &target, &cfg, Some(&shared)).unwrap())
        .collect()
}

fn run(
    graphs: &mut [GraphRunner],
    ck: &Toto2Checkpoint,
    dims: &Toto2Dims,
    reqs: &[&ForecastRequest],
) -> Vec<Toto2Forecast> {
    let rope = RopeTables::new(ck.config.rotary_dim(), ck.config.use_xpos);
    let cfg = ChunkConfig {
        dims,
        rope: &rope,
        profile: "test",
        engine: "cpu",
        cap_k: None,
        trace: Trace::Blocks,
        cancel: None,
    };
    let runners = match graphs {
        [pass] => Toto2Runners::Pass(pass),
        [prefill, decode] => Toto2Runners::Block { prefill, decode },
        _ => panic!("{} graphs", graphs.len()),
    };
    forecast_chunk(runners, &cfg, reqs, &mut Toto2Timings::default()).unwrap()
}

/// A shape that holds `reqs` with one spare row, context slot and horizon slot (padding everywhere).
fn padded_dims(cfg: &Toto2Config, reqs: &[&ForecastRequest], decode_block: Option<usize>) -> Toto2Dims {
    let p = cfg.patch_size;
    let rows = reqs.iter().map(|r| r.variates()).sum::<usize>() + 1;
    let context = reqs.iter().map(|r| r.context_len() / p * p).max().unwrap() + p;
    let horizon = reqs.iter().map(|r| r.horizon.div_ceil(p) * p).max().unwrap() + p;
    // keep the block decoding of the reference: the shape's horizon must stay above the block
    Toto2Dims::new(cfg, rows, context, horizon, decode_block).unwrap()
}

/// Compares one forecast with its reference; returns the reports.
fn check(case: &Case, f: &Toto2Forecast, precision: Precision) -> Vec<Report> {
    let int8 = precision == Precision::Int8;
    let tol = if int8 { Tolerance { sigma_rel: 1e-2, ref_rel: 1e-3 } } else { Tolerance::default() };
    let mut sigmas: Vec<f64> = case.request.target.iter().map(|v| context_sigma(v)).collect();
    if int8 {
        for (s, c) in sigmas.iter_mut().zip(&case.reference.blocks[0].scale) {
            *s = s.max(f64::from(*c));
        }
    }
    let knot_tol = if int8 { Tolerance { sigma_rel: 2e-2, ref_rel: 1e-2 } } else { tol };
    let v = case.request.variates();
    let flat = |x: &[Vec<f32>]| x.concat();
    let mut reports = Vec::new();
    for (q, (got, want)) in f.knots.iter().zip(&case.reference.quantiles).enumerate() {
        let name = format!("q{:.1}", exporter::toto2::KNOTS[q]);
        reports
            .push(compare(&name, 0, &flat(got), &flat(want), v, Scale::PerVariate(&sigmas), &tol).unwrap());
    }
    let median = f.response.median.as_ref().unwrap();
    reports.push(
        compare(
            "median",
            0,
            &flat(median),
            &flat(&case.reference.median),
            v,
            Scale::PerVariate(&sigmas),
            &tol,
        )
        .unwrap(),
    );
    assert_eq!(f.blocks.len(), case.reference.blocks.len(), "{}: blocks", case.name);
    for (i, (got, want)) in f.blocks.iter().zip(&case.reference.blocks).enumerate() {
        for q in 0..9 {
            let r = compare(
                "raw knots (asinh)",
                i,
                &flat(&got.raw[q]),
                &flat(&want.raw[q]),
                v,
                Scale::Absolute(1.0),
                &knot_tol,
            );
            reports.push(r.unwrap());
        }
        let (rel, scale) = match int8 {
            false => (Tolerance { sigma_rel: 0.0, ref_rel: 1e-6 }, Scale::Absolute(0.0)),
            true => (tol, Scale::PerVariate(&sigmas)),
        };
        reports.push(compare("scaler loc", i, &got.loc, &want.loc, v, scale, &rel).unwrap());
        reports.push(compare("scaler scale", i, &got.scale, &want.scale, v, scale, &rel).unwrap());
    }
    reports
}

/// Runs every case of `config` alone (padded shape) and checks it; returns the worst |Δ|/tolerance of the
/// median and quantiles.
fn check_config(config: &str, update: OpsetVariant, precision: Precision) -> f64 {
    let tmp = tempfile::tempdir().unwrap();
    let ck = checkpoint(config, &tmp.path().join("checkpoint"));
    let (worst, failures) = measure_config(config, &ck, tmp.path(), update, precision, precision);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!(
        "{config}: {precision}: every case matches toto-2; worst |Δ|/tolerance on the median and quantiles \
         {worst:.3}"
    );
    worst
}

/// Runs every golden case of `config` on `ck` through `graphs`-precision graphs and checks it with the
/// tolerances of `tolerances`: the worst `|Δ|/tolerance` on the median and quantiles, and the failed checks.
fn measure_config(
    config: &str,
    ck: &Toto2Checkpoint,
    dir: &Path,
    update: OpsetVariant,
    graphs: Precision,
    tolerances: Precision,
) -> (f64, Vec<String>) {
    let cases = read_cases(config);
    assert!(!cases.is_empty());
    let mut failures = Vec::new();
    let mut worst: f64 = 0.0;
    for (i, case) in cases.iter().enumerate() {
        let dims = padded_dims(&ck.config, &[&case.request], case.decode_block);
        assert_eq!(dims.block.is_some(), case.reference.blocks.len() > 1, "{}: block decoding", case.name);
        let gdir = dir.join(format!("g{i}"));
        let mut runners = load_graphs(ck, &dims, &gdir, &case.name, update, graphs);
        let f = run(&mut runners, ck, &dims, &[&case.request]).remove(0);
        let mut case_worst: f64 = 0.0;
        for r in check(case, &f, tolerances) {
            if !r.passed() {
                failures.push(format!("{config}/{}: {r}", case.name));
            }
            if r.output.starts_with('q') || r.output == "median" {
                if let Some(w) = r.worst {
                    case_worst = case_worst.max(w.error / w.tol);
                }
            }
        }
        eprintln!(
            "{config}/{}: {graphs}: worst |Δ|/tolerance ({tolerances} goal) {case_worst:.3}",
            case.name
        );
        worst = worst.max(case_worst);
    }
    (worst, failures)
}

#[test]
fn toto2_4m_matches_toto2() {
    check_config("4m", OpsetVariant::Opset24, Precision::Fp32);
}

#[test]
fn toto2_22m_matches_toto2() {
    check_config("22m", OpsetVariant::Opset24, Precision::Fp32);
}

#[test]
fn toto2_small_sharded_gqa_matches_toto2() {
    check_config("small", OpsetVariant::Opset24, Precision::Fp32);
}

/// int8 graphs (`exporter::toto2::graph::INT8_DEFAULT`'s matmuls through `MatMulInteger`: per-column int8 weights, per-row int8
/// activations) on every random-weight fixture. Not met, and not expected to be: random weights are the bound,
/// the trained 4m the instrument (`engines/tests/toto2_precision.rs`, docs/precision.md: 13–69× here, 0.55× on
/// the trained model); run it to see the raw knots and scaler statistics too.
/// Measured with the earlier `MatMulNBits` layout (block-128 weights): 28–66×; with weights dequantized in fp32
/// arithmetic (no activation quantization) still 10–21×; attention or FFN matmuls left in fp32, 12–46× — the
/// random-weight 2.0 models amplify the weights' ≈0.4% rounding itself.
#[test]
#[ignore = "random weights miss the int8 goal (13-69x; docs/precision.md): the bound, not the instrument"]
fn toto2_int8_matches_toto2_within_the_int8_goal() {
    for config in ["4m", "22m", "small"] {
        check_config(config, OpsetVariant::Opset24, Precision::Int8);
    }
}

/// Why int8 misses on Toto 2.0: how far the random-weight 4m fixture model moves when only the weights that
/// int8 quantizes (`in_proj`, `out_proj`, `fc1`, `fc2`) are perturbed, computed in fp32 graphs and held to the int8
/// goal. The checkpoint itself is perturbed (folding multiplies each weight row by a factor, so a relative
/// perturbation of the checkpoint is one of the folded weights): fp16 rounding (≤ 2⁻¹¹ relative), int8
/// per-column rounding in fp32 arithmetic (no activation quantization), and uniform relative noise of ±1e-4 and
/// ±1e-3. Measured: 1.6×, 24×, 0.54× and 5.4× the int8 goal — the goal allows about ±2e-4 of weight noise, well
/// under the ±0.4% (half a step of 127) that 8-bit weights carry, and fp16 weights miss it too.
#[test]
#[ignore = "diagnostic (≈1 min): the 4m fixture model's weight sensitivity against the int8 goal"]
fn toto2_weight_sensitivity_against_the_int8_goal() {
    let prov: Provenance =
        serde_json::from_slice(&std::fs::read(fixtures().join("provenance.json")).unwrap()).unwrap();
    let p = &prov.checkpoints["4m"];
    let json = std::fs::read_to_string(fixtures().join("4m").join("config.json")).unwrap();
    let cfg = Toto2Config::from_json(&json).unwrap();
    let quantized = |name: &str| {
        [".attn.in_proj.weight", ".attn.out_proj.weight", ".ffn.fc1.weight", ".ffn.fc2.weight"]
            .iter()
            .any(|s| name.ends_with(s))
    };
    let noise = |rel: f64| {
        move |w: &[f32], _: &[usize]| -> Vec<f32> {
            let mut st = 0x9e37_79b9_7f4a_7c15u64;
            w.iter()
                .map(|&v| {
                    st = st.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let u = (st >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
                    (f64::from(v) * (1.0 + rel * u)) as f32
                })
                .collect()
        }
    };
    type Perturb = Box<dyn Fn(&[f32], &[usize]) -> Vec<f32>>;
    let perturbations: Vec<(&str, Perturb)> = vec![
        (
            "fp16 rounding",
            Box::new(|w: &[f32], _: &[usize]| w.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect()),
        ),
        (
            "int8 per-column rounding",
            Box::new(|w: &[f32], shape: &[usize]| {
                // a torch Linear weight is [out, in]; its columns in totoc's [in, out] layout are its rows
                let (out, inp) = (shape[0], shape[1]);
                let kn: Vec<f32> = (0..inp * out).map(|i| w[(i % out) * inp + i / out]).collect();
                let back = exporter::quantize::quantize_kn(&kn, inp, out).dequantize_kn();
                (0..out * inp).map(|i| back[(i % inp) * out + i / inp]).collect()
            }),
        ),
        ("noise ±1e-4", Box::new(noise(1e-4))),
        ("noise ±1e-3", Box::new(noise(1e-3))),
    ];
    println!("| 4m weights (fp32 graphs) | worst \\|Δ\\| / int8 goal, median and quantiles |");
    println!("|---|---|");
    for (label, perturb) in perturbations {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("checkpoint");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.json"), &json).unwrap();
        let mut touched = 0;
        let items: Vec<_> = synth::tensors(&cfg, p.seed)
            .map(|(name, shape, v)| {
                if quantized(&name) {
                    touched += 1;
                    let v = perturb(&v, &shape);
                    (name, shape, v)
                } else {
                    (name, shape, v)
                }
            })
            .collect();
        assert_eq!(touched, 4 * cfg.num_layers, "the quantized weights of every layer");
        synth::write_safetensors(&dir.join("model.safetensors"), &items).unwrap();
        let ck = Toto2Checkpoint::load(&dir).unwrap();
        let (worst, _) =
            measure_config("4m", &ck, tmp.path(), OpsetVariant::Opset24, Precision::Fp32, Precision::Int8);
        println!("| {label} | {worst:.2} |");
    }
}

/// The portable `ScatterND` cache write gives the same forecasts (the block-decoding cases exercise it).
#[test]
fn scatter_nd_variant_matches_toto2() {
    check_config("small", OpsetVariant::Opset18, Precision::Fp32);
}

/// Several requests packed into one chunk (different contexts, variate counts, horizons, a padded row) give the
/// same forecasts as each request alone, for the single pass and for block decoding.
#[test]
fn packed_requests_equal_single_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let ck = checkpoint("small", &tmp.path().join("checkpoint"));
    let cases = read_cases("small");
    for block in [None, Some(64)] {
        let reqs: Vec<&ForecastRequest> = cases.iter().map(|c| &c.request).collect();
        let dims = padded_dims(&ck.config, &reqs, block);
        assert_eq!(dims.graphs().len(), if block.is_some() { 2 } else { 1 });
        let dir = tmp.path().join(format!("packed{}", block.unwrap_or(0)));
        let mut graphs = load_graphs(&ck, &dims, &dir, "packed", OpsetVariant::Opset24, Precision::Fp32);
        let together = run(&mut graphs, &ck, &dims, &reqs);
        for (i, r) in reqs.iter().enumerate() {
            let alone = run(&mut graphs, &ck, &dims, &[r]).remove(0);
            for (a, b) in
                together[i].knots.iter().flatten().flatten().zip(alone.knots.iter().flatten().flatten())
            {
                assert!(
                    (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                    "{}: {a} packed vs {b} alone",
                    cases[i].name
                );
            }
        }
    }
}
