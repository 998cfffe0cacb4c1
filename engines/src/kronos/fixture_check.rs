//! The host numerics against the reference fixtures (`tests/fixtures/kronos/`, upstream's own `predict` with
//! recording hooks; format: tests/reference/README.md, "Kronos"): for every case and series, bit for bit,
//! * the request's columns (f64 as parsed from the JSON) → the f32 rows upstream normalised (`series.b.x`),
//!   derived volume / amount included;
//! * the statistics (`stats`) and the normalised, clipped rows (`series.b.x_norm`);
//! * the time features of every context and future stamp (`series.b.stamps`);
//! * every draw's decision from the recorded logits (`series.b.s{1,2}_logits`) and, for sampled cases, the
//!   recorded noise (`series.b.s{1,2}_noise`): the tokens upstream sampled (`tokens`); greedy draws no noise;
//! * the mean over the paths in normalised space (`mean_norm`), the output frame (`output`) and the de-normalised
//!   paths (`paths`).
//!
//! The graphs are not involved: the engine's equivalence tests run those.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::Result;
use crate::kronos::columns::{prepare_columns, Column, ColumnValues, COLUMNS};
use crate::kronos::noise::{Draw, DrawKey, NoiseSource, NoiseStream, ReplayNoise};
use crate::kronos::normalize::{clip_param, Normalizer};
use crate::kronos::paths::{path_mean, summarize};
use crate::kronos::sampler::{Sampler, SamplingParams};
use crate::kronos::sampler_statistics::{chi_square, ALPHA, DRAWS};
use crate::kronos::stamps::WallClock;
use crate::kronos::testdata::bits;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/kronos")
}

/// The tensors of a safetensors file: name → (dtype, shape, little-endian bytes).
fn read_safetensors(path: &Path) -> HashMap<String, (String, Vec<usize>, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Map<String, Value> = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let data = &bytes[8 + n..];
    header
        .into_iter()
        .filter(|(k, _)| k != "__metadata__")
        .map(|(name, v)| {
            let shape = v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
            let r = &v["data_offsets"];
            let (a, b) = (r[0].as_u64().unwrap() as usize, r[1].as_u64().unwrap() as usize);
            (name, (v["dtype"].as_str().unwrap().to_string(), shape, data[a..b].to_vec()))
        })
        .collect()
}

fn f32s(t: &(String, Vec<usize>, Vec<u8>)) -> Vec<f32> {
    assert_eq!(t.0, "F32");
    t.2.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn i32s(t: &(String, Vec<usize>, Vec<u8>)) -> Vec<i32> {
    assert_eq!(t.0, "I32");
    t.2.chunks_exact(4).map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// JSON numbers (nested arrays) flattened, as f32 (the fixtures write f32 values as their shortest repr).
fn flat_f32(v: &Value) -> Vec<f32> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat_f32).collect(),
        x => vec![x.as_f64().unwrap() as f32],
    }
}

fn flat_u32(v: &Value) -> Vec<u32> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat_u32).collect(),
        x => vec![x.as_u64().unwrap() as u32],
    }
}

/// A noise source for greedy cases: a unique largest logit needs none.
struct NoNoise;

impl NoiseSource for NoNoise {
    fn fill(&self, key: DrawKey, _: &[u32], _: &mut [f32]) -> Result<()> {
        panic!("greedy draw {key:?} asked for noise: its largest logit is tied")
    }
}

#[test]
fn host_numerics_reproduce_the_reference_fixtures() {
    let mut case_files: Vec<PathBuf> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path().join("cases"))
        .filter(|p| p.is_dir())
        .flat_map(|dir| std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    case_files.sort();
    let (mut series_checked, mut draws, mut sampled_draws) = (0, 0, 0);
    let mut sampler = Sampler::new();
    for path in &case_files {
        let name = path.strip_prefix(fixtures()).unwrap().display().to_string();
        let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let tensors = read_safetensors(&path.with_extension("safetensors"));
        for (b, req) in case["requests"].as_array().unwrap().iter().enumerate() {
            let at = format!("{name} series {b}");
            let reference = &case["reference"]["series"][b];
            let tensor = |t: &str| &tensors[&format!("series.{b}.{t}")];

            // columns: f64 as parsed from the JSON, upstream's rules, f32
            let names: Vec<&str> =
                req["columns"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
            let target: Vec<Vec<f64>> = req["target"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect())
                .collect();
            let columns: Vec<Column> = names
                .iter()
                .zip(&target)
                .map(|(&name, v)| Column { name, values: ColumnValues::F64(v) })
                .collect();
            let candles = prepare_columns(&at, &columns).unwrap();
            let n = candles.rows();
            let rows: Vec<f32> = (0..n).flat_map(|i| candles.row(i)).collect();
            assert_eq!(bits(&rows), bits(&f32s(tensor("x"))), "{at}: the f32 rows (x)");

            // normalisation
            let clip = clip_param(&at, req["params"]["clip"].as_f64()).unwrap();
            let norm = Normalizer::fit(&at, &candles, clip).unwrap();
            let means: Vec<f32> = norm.stats().iter().map(|s| s.mean).collect();
            let stds: Vec<f32> = norm.stats().iter().map(|s| s.std).collect();
            assert_eq!(bits(&means), bits(&flat_f32(&reference["stats"]["mean"])), "{at}: means");
            assert_eq!(bits(&stds), bits(&flat_f32(&reference["stats"]["std"])), "{at}: stds");
            assert_eq!(bits(&norm.normalized_rows(&candles)), bits(&f32s(tensor("x_norm"))), "{at}: x_norm");

            // time features of the context and future stamps
            let stamps = i32s(tensor("stamps"));
            let written = req["timestamps"]
                .as_array()
                .unwrap()
                .iter()
                .chain(req["future_timestamps"].as_array().unwrap());
            let features: Vec<i32> = written
                .flat_map(|s| {
                    WallClock::parse(s.as_str().unwrap()).unwrap().features().as_row().map(|f| f as i32)
                })
                .collect();
            assert_eq!(features, stamps, "{at}: time features");

            // every draw: the recorded logits (and noise) give upstream's tokens
            let samples = req["samples"].as_u64().unwrap() as usize;
            let params = SamplingParams::from_request(
                &at,
                samples,
                req["temperature"].as_f64(),
                req["top_k"].as_i64(),
                req["top_p"].as_f64(),
            )
            .unwrap();
            let (h, s) = (req["horizon"].as_u64().unwrap() as usize, samples.max(1));
            let vocab = reference["meta"]["vocab"].as_u64().unwrap() as usize;
            let replay;
            let noise: &dyn NoiseSource = if samples == 0 {
                &NoNoise
            } else {
                let (s1, s2) = (f32s(tensor("s1_noise")), f32s(tensor("s2_noise")));
                replay = ReplayNoise::from_draws(vocab, s, h, &s1, &s2).unwrap();
                &replay
            };
            for (draw, logits, tokens) in [
                (Draw::S1, f32s(tensor("s1_logits")), flat_u32(&reference["tokens"]["s1"])),
                (Draw::S2, f32s(tensor("s2_logits")), flat_u32(&reference["tokens"]["s2"])),
            ] {
                for step in 0..h {
                    for p in 0..s {
                        let row = &logits[(step * s + p) * vocab..(step * s + p + 1) * vocab];
                        let key = DrawKey { path: p as u64, step: step as u64, draw };
                        let got = sampler.sample(row, &params, noise, key).unwrap();
                        assert_eq!(got, tokens[p * h + step], "{at}: {key:?}");
                        draws += 1;
                        sampled_draws += usize::from(samples > 0);
                    }
                }
            }

            // the paths: mean in normalised space, the output frame, each path de-normalised
            let paths_norm = flat_f32(&reference["paths_norm"]);
            let mean = path_mean(&paths_norm, s, h * COLUMNS.len()).unwrap();
            assert_eq!(bits(&mean), bits(&flat_f32(&reference["mean_norm"])), "{at}: mean_norm");
            let f = summarize(&paths_norm, s, h, &norm, &[0.5]).unwrap();
            assert_eq!(bits(&f.mean), bits(&flat_f32(&reference["output"])), "{at}: output");
            assert_eq!(bits(&f.paths), bits(&flat_f32(&reference["paths"])), "{at}: paths");
            series_checked += 1;
        }
    }
    eprintln!(
        "{} cases, {series_checked} series, {draws} draws ({sampled_draws} with replayed noise)",
        case_files.len()
    );
    assert!(
        case_files.len() >= 13 && series_checked >= 17 && sampled_draws > 0,
        "the fixtures were not all found"
    );
}

/// totoc's own noise on the fixtures' first-step logits of the three sampled settings (T 0.7 + top_p 0.9 at
/// V = 1,024; top_k 5 and T 1 unfiltered at V = 16): 20,000 draws of s1, and of s2 given the s1 upstream took
/// (the recorded s2 logits of that step), follow the filtered softmax (chi-square, bins pooled to ≥ 5 expected,
/// α = 0.001).
#[test]
fn own_noise_follows_the_fixture_logits() {
    for (case, temperature, top_k, top_p) in [
        ("k10/cases/topp_t07", 0.7, 0, 0.9),
        ("k4/cases/topk5", 1.0, 5, 0.9),
        ("k4/cases/unfiltered", 1.0, 0, 1.0),
    ] {
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(fixtures().join(format!("{case}.json"))).unwrap())
                .unwrap();
        let vocab = json["reference"]["series"][0]["meta"]["vocab"].as_u64().unwrap() as usize;
        let tensors = read_safetensors(&fixtures().join(format!("{case}.safetensors")));
        for (draw, name) in [(Draw::S1, "series.0.s1_logits"), (Draw::S2, "series.0.s2_logits")] {
            let logits = f32s(&tensors[name])[..vocab].to_vec(); // step 0, path 0
            let params = SamplingParams::new(temperature, top_k, top_p).unwrap();
            let mut sampler = Sampler::new();
            let p = sampler.probabilities(&logits, &params).unwrap();
            let total: f64 = p.iter().map(|&q| f64::from(q)).sum();
            let expected: Vec<f64> = p.iter().map(|&q| f64::from(q) / total * DRAWS as f64).collect();
            sampler.prepare(&logits, &params).unwrap();
            let noise = NoiseStream::new(20_000);
            let mut counts = vec![0.0; vocab];
            for path in 0..DRAWS as u64 {
                counts[sampler.draw(&noise, DrawKey { path, step: 0, draw }).unwrap() as usize] += 1.0;
            }
            let (stat, df, pv) = chi_square(&counts, &expected);
            eprintln!("{case} {draw:?}: kept {}, χ² = {stat:.1}, df {df}, p = {pv:.3}", sampler.kept().len());
            assert!(pv > ALPHA, "{case} {draw:?}: χ² {stat:.1}, df {df}, p {pv:.2e}");
        }
    }
}
