//! Kronos reference cases (`tests/fixtures/kronos/<config>/cases/<case>.json` + `<case>.safetensors`, the format
//! of tests/reference/README.md, "Kronos"; a bundle's `golden/`) and their check ([`check_case`]): the engine runs
//! a case's series in one call, with upstream's recorded noise replayed for sampled series, and every quantity is
//! compared:
//!
//! * **tokens**, exactly: the encode tokens of every context row, and every token of every path (free-running:
//!   greedy, or sampled with the replayed noise; a forced run takes upstream's tokens);
//! * **logits**, every draw's s1 and s2 logits within `|a − b| ≤ τ·(1 + |b|)` ([`LOGITS_TAU`], from the drift
//!   measured against upstream; the logits are comparable only where the tokens before them are the same);
//! * **z**, the quantizer's input, within `τ_z·(z_unit + |b|)` ([`Z_TAU`]);
//! * **rows**, the decoded paths and the mean, de-normalised, within `1e-4·(σ + 1e-5) + 1e-6·|ref|` per column
//!   (σ the column's standard deviation, `σ + 1e-5` the scale the model's outputs are multiplied by).

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::family::Call;
use crate::kronos::columns::COLUMNS;
use crate::kronos::driver::SeriesForecast;
use crate::kronos::engine::KronosEngine;
use crate::kronos::hooks::{ForcedTokens, Hooks, Trace};
use crate::kronos::noise::{NoiseSource, ReplayNoise};
use crate::kronos::plan::KronosPins;
use crate::request::RequestFields;

/// τ of the logits, `|a − b| ≤ τ·(1 + |b|)`: 4× the worst drift measured between the engine (ONNX Runtime 1.31
/// CPU) and upstream on every fixture, 5.8e-7 (k10/topp_t07's s2 logits), rounded up (docs/guide.md, "Kronos").
pub const LOGITS_TAU: f64 = 3e-6;
/// τ of the quantizer input z, `|a − b| ≤ τ·(z_unit + |b|)` (z_unit: the RMS of the series' z): 4× the worst
/// drift measured, 1.3e-6 (k4/topk5), rounded up.
pub const Z_TAU: f64 = 5e-6;
/// The rows' tolerance: `ROWS_SIGMA·(σ + 1e-5) + ROWS_REL·|ref|` per column.
pub const ROWS_SIGMA: f64 = 1e-4;
pub const ROWS_REL: f64 = 1e-6;

/// A case as written.
#[derive(Debug, Clone, Deserialize)]
struct CaseFile {
    call: String,
    requests: Vec<RequestFields>,
    reference: ReferenceFile,
}

#[derive(Debug, Clone, Deserialize)]
struct ReferenceFile {
    series: Vec<SeriesFile>,
}

#[derive(Debug, Clone, Deserialize)]
struct SeriesFile {
    stats: Stats,
    encode: Tokens,
    tokens: Tokens,
    paths_norm: Vec<Vec<Vec<f32>>>,
    paths: Vec<Vec<Vec<f32>>>,
    output: Vec<Vec<f32>>,
    meta: Meta,
}

#[derive(Debug, Clone, Deserialize)]
struct Stats {
    std: Vec<f32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum TokenList {
    Flat(Vec<i64>),
    Paths(Vec<Vec<i64>>),
}

#[derive(Debug, Clone, Deserialize)]
struct Tokens {
    s1: TokenList,
    s2: TokenList,
}

#[derive(Debug, Clone, Deserialize)]
struct Meta {
    rows: usize,
    horizon: usize,
    sample_count: usize,
    vocab: usize,
    z_unit: f64,
}

/// One series' reference.
#[derive(Debug, Clone, Default)]
pub struct SeriesReference {
    pub std: Vec<f32>,
    pub encode_s1: Vec<i64>,
    pub encode_s2: Vec<i64>,
    /// `[paths][H]`.
    pub s1: Vec<Vec<i64>>,
    pub s2: Vec<Vec<i64>>,
    /// `[paths][H][6]`, normalised and de-normalised.
    pub paths_norm: Vec<f32>,
    pub paths: Vec<f32>,
    /// `[H][6]`: the forecast (the mean of the paths, de-normalised).
    pub output: Vec<f32>,
    pub rows: usize,
    pub horizon: usize,
    pub paths_count: usize,
    pub vocab: usize,
    pub z_unit: f64,
    /// `[N][2·bits]`.
    pub z: Vec<f32>,
    /// `[H][paths][V]`.
    pub s1_logits: Vec<f32>,
    pub s2_logits: Vec<f32>,
    /// Sampled series: the Exp(1) noise of every draw, `[H][paths][V]`.
    pub noise: Option<(Vec<f32>, Vec<f32>)>,
}

/// A Kronos reference case.
#[derive(Debug, Clone)]
pub struct KronosCase {
    /// `<config>/<case>` or the file stem.
    pub name: String,
    /// `predict`, `predict_batch` or `ragged` (how upstream was called; the engine runs every series in one call).
    pub call: String,
    /// The requests as written, parsed as every request is ([`KronosEngine::job_of_fields`]).
    pub requests: Vec<RequestFields>,
    pub series: Vec<SeriesReference>,
}

fn bad(path: &Path, message: String) -> Error {
    Error::Config { message: format!("{}: {message}", path.display()) }
}

fn f32s(a: &exporter::safetensors::StoredArray) -> Vec<f32> {
    a.bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

impl KronosCase {
    /// Reads `path` (`<case>.json`) and its arrays (`<case>.safetensors` beside it).
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let file: CaseFile = serde_json::from_str(&text)
            .map_err(|e| bad(path, format!("not a Kronos reference case: {e}")))?;
        let arrays_path = path.with_extension("safetensors");
        let arrays: HashMap<String, exporter::safetensors::StoredArray> =
            exporter::safetensors::read_tensors(&arrays_path)?
                .into_iter()
                .map(|a| (a.name.clone(), a))
                .collect();
        if file.requests.len() != file.reference.series.len() {
            return Err(bad(path, "one reference series per request is required".into()));
        }
        let mut series = Vec::new();
        for (b, s) in file.reference.series.into_iter().enumerate() {
            let get = |t: &str| {
                arrays
                    .get(&format!("series.{b}.{t}"))
                    .filter(|a| a.dtype == "F32")
                    .map(f32s)
                    .ok_or_else(|| bad(&arrays_path, format!("no F32 tensor series.{b}.{t}")))
            };
            let paths = |l: TokenList| match l {
                TokenList::Paths(v) => v,
                TokenList::Flat(v) => vec![v],
            };
            let flat = |l: TokenList| match l {
                TokenList::Flat(v) => v,
                TokenList::Paths(v) => v.concat(),
            };
            let (s1_noise, s2_noise) = (get("s1_noise"), get("s2_noise"));
            let m = &s.meta;
            let r = SeriesReference {
                std: s.stats.std,
                encode_s1: flat(s.encode.s1),
                encode_s2: flat(s.encode.s2),
                s1: paths(s.tokens.s1),
                s2: paths(s.tokens.s2),
                paths_norm: s.paths_norm.into_iter().flatten().flatten().collect(),
                paths: s.paths.into_iter().flatten().flatten().collect(),
                output: s.output.into_iter().flatten().collect(),
                rows: m.rows,
                horizon: m.horizon,
                paths_count: m.sample_count,
                vocab: m.vocab,
                z_unit: m.z_unit,
                z: get("z")?,
                s1_logits: get("s1_logits")?,
                s2_logits: get("s2_logits")?,
                noise: s1_noise.ok().zip(s2_noise.ok()),
            };
            let want = r.horizon * r.paths_count * r.vocab;
            if r.s1_logits.len() != want || r.s2_logits.len() != want || r.encode_s1.len() != r.rows {
                return Err(bad(path, format!("series {b}: arrays of the wrong size for its meta")));
            }
            series.push(r);
        }
        let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        Ok(KronosCase { name, call: file.call, requests: file.requests, series })
    }
}

/// How one quantity of a case compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantity {
    /// `encode tokens`, `tokens`, `s1 logits`, `s2 logits`, `z`, `paths`, `forecast`.
    pub what: &'static str,
    pub series: usize,
    /// Values compared.
    pub count: usize,
    /// Values outside their tolerance (tokens: that differ).
    pub failures: usize,
    /// The worst |diff| / tolerance (tokens: `inf` if any differs, else 0).
    pub worst: f64,
    /// The largest |diff| (tokens: 0).
    pub max_abs: f64,
    /// Where the worst one is.
    pub at: String,
}

impl Quantity {
    pub fn ok(&self) -> bool {
        self.failures == 0
    }
}

/// What a check runs with.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    /// Force upstream's tokens (teacher forcing) instead of sampling.
    pub forced: bool,
    pub pins: KronosPins,
}

/// The traces of a case's series on `engine` (replayed noise for its sampled series; upstream's tokens forced
/// with `opts.forced`).
pub fn run_case(
    engine: &KronosEngine,
    call: Call<'_>,
    case: &KronosCase,
    opts: CheckOptions,
) -> Result<Vec<SeriesForecast>> {
    let jobs = case
        .requests
        .iter()
        .enumerate()
        .map(|(b, r)| engine.job_of_fields(r.clone(), &format!("{} series {b}", case.name)))
        .collect::<Result<Vec<_>>>()?;
    let replay: Vec<Option<ReplayNoise>> = case
        .series
        .iter()
        .zip(&jobs)
        .map(|(s, j)| match (&s.noise, j.samples) {
            (Some((s1, s2)), n) if n > 0 => {
                ReplayNoise::from_draws(s.vocab, s.paths_count, s.horizon, s1, s2).map(Some)
            }
            _ => Ok(None),
        })
        .collect::<Result<_>>()?;
    let noise: Vec<Option<&dyn NoiseSource>> =
        replay.iter().map(|r| r.as_ref().map(|n| n as &dyn NoiseSource)).collect();
    let forced: Vec<Option<ForcedTokens>> = case
        .series
        .iter()
        .map(|s| opts.forced.then(|| ForcedTokens { s1: s.s1.clone(), s2: s.s2.clone() }))
        .collect();
    let hooks = Hooks { forced: &forced, noise: &noise, trace: true, pins: opts.pins };
    let refs: Vec<&crate::kronos::job::KronosJob> = jobs.iter().collect();
    engine.forecast_jobs(call, &refs, hooks, None).into_iter().collect()
}

/// [`run_case`] then [`compare`].
pub fn check_case(
    engine: &KronosEngine,
    call: Call<'_>,
    case: &KronosCase,
    opts: CheckOptions,
) -> Result<Vec<Quantity>> {
    Ok(compare(case, &run_case(engine, call, case, opts)?))
}

/// Compares `case` with the engine's forecasts of it, traced (see the module docs).
pub fn compare(case: &KronosCase, forecasts: &[SeriesForecast]) -> Vec<Quantity> {
    let mut out = Vec::new();
    let empty = Trace::default();
    for (b, (r, f)) in case.series.iter().zip(forecasts).enumerate() {
        let t = f.trace.as_ref().unwrap_or(&empty);
        out.push(tokens("encode tokens", b, &[&r.encode_s1, &r.encode_s2], &[&t.encode_s1, &t.encode_s2]));
        let want: Vec<&Vec<i64>> = r.s1.iter().chain(&r.s2).collect();
        let got: Vec<&Vec<i64>> = t.s1.iter().chain(&t.s2).collect();
        out.push(tokens("tokens", b, &want, &got));
        let z_tol = |_: usize, w: f32| Z_TAU * (r.z_unit + f64::from(w).abs());
        out.push(close("z", b, &r.z, &t.z, z_tol));
        let logit_tol = |_: usize, w: f32| LOGITS_TAU * (1.0 + f64::from(w).abs());
        out.push(close("s1 logits", b, &r.s1_logits, &t.s1_logits, logit_tol));
        out.push(close("s2 logits", b, &r.s2_logits, &t.s2_logits, logit_tol));
        let row_tol = |i: usize, w: f32| {
            let sigma = f64::from(r.std[i % COLUMNS.len()]) + 1e-5;
            ROWS_SIGMA * sigma + ROWS_REL * f64::from(w).abs()
        };
        out.push(close("paths", b, &r.paths, &f.forecast.paths, row_tol));
        out.push(close("forecast", b, &r.output, &f.forecast.mean, row_tol));
    }
    out
}

fn tokens(what: &'static str, series: usize, want: &[&Vec<i64>], got: &[&Vec<i64>]) -> Quantity {
    let (mut count, mut failures, mut at) = (0, 0, String::new());
    for (k, w) in want.iter().enumerate() {
        let g = got.get(k).map(|v| v.as_slice()).unwrap_or(&[]);
        count += w.len();
        for (i, x) in w.iter().enumerate() {
            if g.get(i) != Some(x) {
                if failures == 0 {
                    at = format!("list {k} position {i}: {:?} instead of {x}", g.get(i));
                }
                failures += 1;
            }
        }
    }
    let worst = if failures > 0 { f64::INFINITY } else { 0.0 };
    Quantity { what, series, count, failures, worst, max_abs: 0.0, at }
}

fn close(
    what: &'static str,
    series: usize,
    want: &[f32],
    got: &[f32],
    tol: impl Fn(usize, f32) -> f64,
) -> Quantity {
    let mut q = Quantity {
        what,
        series,
        count: want.len(),
        failures: 0,
        worst: 0.0,
        max_abs: 0.0,
        at: String::new(),
    };
    if got.len() != want.len() {
        q.failures = want.len().max(1);
        q.worst = f64::INFINITY;
        q.at = format!("{} values instead of {}", got.len(), want.len());
        return q;
    }
    for (i, (&w, &g)) in want.iter().zip(got).enumerate() {
        // a NaN difference counts as infinitely far
        let diff = (f64::from(g) - f64::from(w)).abs();
        q.max_abs = q.max_abs.max(if diff.is_nan() { f64::INFINITY } else { diff });
        let ratio = match diff / tol(i, w) {
            r if r.is_nan() => f64::INFINITY,
            r => r,
        };
        if ratio > 1.0 {
            q.failures += 1;
        }
        if ratio > q.worst || q.at.is_empty() {
            q.worst = ratio;
            q.at = format!("index {i}: {g} instead of {w}");
        }
    }
    q
}
