//! The forecast session: runs requests through one profile's prefill and decode graphs, with the causal scaler
//! (f64), rotary tables and mixture sampling on the host.
//!
//! Per chunk of series (≤ the profile's batch), the session
//! 1. scales each series' context with [`CausalScaler`] and runs **one** prefill for the chunk;
//! 2. gives every series `max(samples, 1)` decode rows and copies its prefill KV cache into each of them once
//!    (sample paths share the context: no prefill per sample, unlike toto-ts);
//! 3. per forecast patch, turns each row's mixture into values (the mixture mean on the mean path, a seeded draw
//!    on a sample path), de-normalises them with that row's last patch statistics, feeds them to the row's scaler
//!    (carried step by step, never recomputed) and runs one decode step for all rows.
//!
//! A horizon of one patch or less needs no decode at all: every sample path draws from the prefill mixture.

use exporter::signature::{self, Dims};

use crate::error::{Error, Result};
use crate::graph::GraphRunner;
use crate::mixture::{mean_patch, MixtureParams, PathSampler, SampleSet};
use crate::request::{ForecastRequest, ForecastResponse, QuantileForecast};
use crate::rope;
use crate::scaler::{CausalScaler, PatchStats, ScalerConfig};

/// Wall time of each graph run, for benchmarks.
#[derive(Debug, Clone, Default)]
pub struct StepTimings {
    pub prefill: Vec<std::time::Duration>,
    pub decode: Vec<std::time::Duration>,
}

/// The mixture parameters of one step of the mean path, for equivalence checks (`[V][P][K]` each).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepRecord {
    pub df: Vec<f32>,
    pub loc: Vec<f32>,
    pub scale: Vec<f32>,
    pub weights: Vec<f32>,
    /// Scaler statistics that de-normalise this step, `[V]`.
    pub scaler_loc: Vec<f32>,
    pub scaler_scale: Vec<f32>,
}

/// A forecast plus, on request, the per-step mixture parameters of its first row.
#[derive(Debug, Clone)]
pub struct Forecast {
    pub response: ForecastResponse,
    pub steps: Vec<StepRecord>,
}

/// Whether a request fits a profile's static shapes, and at what cost (graph rows × slots it runs).
pub fn fits(d: &Dims, profile_samples: usize, req: &ForecastRequest) -> bool {
    let steps = req.horizon.div_ceil(d.patch);
    req.variates() <= d.variates
        && req.context_len().div_ceil(d.patch) <= d.context_slots
        && d.context_slots + steps <= d.max_slots
        && (req.samples == 0 || req.samples <= profile_samples || (steps == 1 && profile_samples > 0))
}

/// Relative cost of serving a request with a profile: prefill tokens plus decode tokens.
pub fn cost(d: &Dims, req: &ForecastRequest) -> usize {
    let steps = req.horizon.div_ceil(d.patch);
    d.batch * d.variates * d.context_slots + steps.saturating_sub(1) * d.decode_rows * d.variates
}

fn plan_error(message: String) -> Error {
    Error::Session { graph: "forecast session".into(), message }
}

/// Per-row decoding state.
struct Row {
    series: usize,
    /// Sample path index, or `None` on the mean path.
    path: Option<usize>,
    scalers: Vec<CausalScaler>,
    /// Next write slot.
    pos: usize,
    /// `[V][H]` values forecast so far.
    out: Vec<Vec<f32>>,
}

/// What a chunk runs with besides its graphs and requests.
pub struct ChunkConfig<'a> {
    pub dims: &'a Dims,
    pub scaler: &'a ScalerConfig,
    /// Profile and engine names for the responses.
    pub profile: &'a str,
    pub engine: &'a str,
    /// Keep each request's per-step mixture parameters (first path) for equivalence checks.
    pub record_steps: bool,
}

/// Runs `reqs` (all fitting this profile, at most `dims.batch` of them) and returns one forecast each.
pub fn forecast_chunk(
    prefill: &mut GraphRunner,
    decode: &mut GraphRunner,
    cfg: &ChunkConfig,
    reqs: &[&ForecastRequest],
    timings: &mut StepTimings,
) -> Result<Vec<Forecast>> {
    let (d, scaler_cfg, record_steps) = (cfg.dims, cfg.scaler, cfg.record_steps);
    let labels = (cfg.profile, cfg.engine);
    if reqs.is_empty() {
        return Ok(Vec::new());
    }
    if reqs.len() > d.batch {
        return Err(plan_error(format!("{} series exceed the profile batch {}", reqs.len(), d.batch)));
    }
    let (v, p, k, dh) = (d.variates, d.patch, d.components, d.head_dim);
    let steps: Vec<usize> = reqs.iter().map(|r| r.horizon.div_ceil(p)).collect();
    let max_steps = steps.iter().copied().max().unwrap_or(1);
    let paths: Vec<usize> = reqs.iter().map(|r| r.samples.max(1)).collect();
    let rows_needed: usize = paths.iter().sum();
    if max_steps > 1 && rows_needed > d.decode_rows {
        return Err(plan_error(format!(
            "{rows_needed} decode rows needed (series × sample paths), the profile has {}",
            d.decode_rows
        )));
    }

    // --- prefill: scale contexts, fill inputs, run once for the chunk.
    let mut series_scalers = Vec::new();
    let mut prefill_patches = Vec::new();
    {
        let sc = d.context_slots;
        let patches = prefill.input_mut::<f32>(signature::PATCHES)?;
        patches.fill(0.0);
        for (b, req) in reqs.iter().enumerate() {
            let mut scalers = Vec::with_capacity(req.variates());
            let s_b = req.context_len().div_ceil(p);
            for (vi, series) in req.target.iter().enumerate() {
                let (st, ctx) = CausalScaler::prefill(scaler_cfg, series);
                let dst = ((b * v + vi) * sc) * p;
                patches[dst..dst + s_b * p].copy_from_slice(&ctx.scaled);
                scalers.push(st);
            }
            series_scalers.push(scalers);
            prefill_patches.push(s_b);
        }
        fill_ids(prefill.input_mut::<i64>(signature::ID_MASK)?, reqs, v, d.batch, Some);
        let last = prefill.input_mut::<i64>(signature::LAST_INDEX)?;
        for (b, l) in last.iter_mut().enumerate() {
            *l = prefill_patches.get(b).map_or(0, |s| *s as i64 - 1);
        }
        let n = sc * dh;
        let mut tables = [vec![0f32; d.batch * n], vec![0f32; d.batch * n], vec![0f32; d.batch * n]];
        for b in 0..d.batch {
            let s_b = prefill_patches.get(b).copied().unwrap_or(1);
            let r = b * n..(b + 1) * n;
            let [c, s, x] = &mut tables;
            rope::fill_prefill(sc, s_b, dh, &mut c[r.clone()], &mut s[r.clone()], &mut x[r]);
        }
        for (name, t) in [signature::ROPE_COS, signature::ROPE_SIN, signature::XPOS_SCALE].iter().zip(&tables)
        {
            prefill.input_mut::<f32>(name)?.copy_from_slice(t);
        }
    }
    let t0 = std::time::Instant::now();
    prefill.run()?;
    timings.prefill.push(t0.elapsed());

    // --- rows: one per mean-path series, `samples` per sampled series.
    let mut rows = Vec::new();
    for (b, req) in reqs.iter().enumerate() {
        for j in 0..paths[b] {
            rows.push(Row {
                series: b,
                path: (req.samples > 0).then_some(j),
                scalers: series_scalers[b].clone(),
                pos: prefill_patches[b],
                out: vec![Vec::with_capacity(req.horizon); req.variates()],
            });
        }
    }
    let mut samplers: Vec<Option<PathSampler>> =
        reqs.iter().map(|r| (r.samples > 0).then(|| PathSampler::new(r.seed, r.samples))).collect();
    let mut records: Vec<StepRecord> = Vec::new();
    let mixture_len = v * p * k;

    // Step 0 draws from the prefill output (row = series); later steps from decode output (row = row index).
    for step in 0..max_steps {
        let graph: &GraphRunner = if step == 0 { &*prefill } else { &*decode };
        let outs = [signature::DF, signature::LOC, signature::SCALE, signature::WEIGHTS]
            .map(|n| graph.output::<f32>(n))
            .into_iter()
            .collect::<Result<Vec<_>>>()?;
        if record_steps {
            let src = 0;
            let stats: Vec<PatchStats> = rows[0].scalers.iter().map(|s| s.last_stats()).collect();
            let nv = reqs[0].variates();
            let cut = |o: &[f32]| o[src * mixture_len..src * mixture_len + nv * p * k].to_vec();
            records.push(StepRecord {
                df: cut(outs[0]),
                loc: cut(outs[1]),
                scale: cut(outs[2]),
                weights: cut(outs[3]),
                scaler_loc: stats.iter().map(|s| s.loc).collect(),
                scaler_scale: stats.iter().map(|s| s.scale).collect(),
            });
        }
        let mut patch = vec![0f32; p];
        let mut new_patches: Vec<Option<Vec<Vec<f32>>>> = Vec::with_capacity(rows.len());
        for (r, row) in rows.iter_mut().enumerate() {
            let req = reqs[row.series];
            if step >= steps[row.series] {
                new_patches.push(None);
                continue;
            }
            let src = if step == 0 { row.series } else { r };
            let mut fed = Vec::with_capacity(req.variates());
            for vi in 0..req.variates() {
                let at = (src * v + vi) * p * k..(src * v + vi + 1) * p * k;
                let params = MixtureParams::new(
                    &outs[0][at.clone()],
                    &outs[1][at.clone()],
                    &outs[2][at.clone()],
                    &outs[3][at],
                    k,
                )?;
                let stats = row.scalers[vi].last_stats();
                match row.path {
                    None => mean_patch(&params, stats, &mut patch),
                    Some(j) => {
                        let sampler = samplers[row.series].as_mut().expect("sampled series has a sampler");
                        sampler.sample_patch(j, &params, stats, &mut patch)
                    }
                }
                let keep = (req.horizon - row.out[vi].len()).min(p);
                row.out[vi].extend_from_slice(&patch[..keep]);
                fed.push(patch.clone());
            }
            new_patches.push(Some(fed));
        }
        if step + 1 == max_steps {
            break;
        }
        if step == 0 {
            // Broadcast each series' prefill cache to all of its decode rows, once.
            let map: Vec<usize> = (0..d.decode_rows * v)
                .map(|cr| rows.get(cr / v).map_or(0, |row| row.series * v + cr % v))
                .collect();
            decode.copy_cache_rows(prefill, &map)?;
            // Padded variates and rows start from zeros, not from an earlier chunk's patches.
            decode.input_mut::<f32>(signature::PATCHES)?.fill(0.0);
        }
        feed_decode(decode, d, reqs, &mut rows, &new_patches)?;
        // Caches are updated in place (or ping-ponged) by the runner itself.
        let t0 = std::time::Instant::now();
        decode.run()?;
        timings.decode.push(t0.elapsed());
    }

    // --- assemble responses.
    let mut out = Vec::with_capacity(reqs.len());
    for (b, req) in reqs.iter().enumerate() {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.series == b).collect();
        let response = if req.samples == 0 {
            ForecastResponse {
                id: req.id.clone(),
                mean: Some(mine[0].out.clone()),
                median: None,
                quantiles: Vec::new(),
                samples: None,
                context_truncated: None,
                profile: labels.0.to_string(),
                engine: labels.1.to_string(),
            }
        } else {
            let (nv, h) = (req.variates(), req.horizon);
            let mut flat = Vec::with_capacity(mine.len() * nv * h);
            for r in &mine {
                for vals in &r.out {
                    flat.extend_from_slice(vals);
                }
            }
            let set = SampleSet::new(&flat, mine.len(), nv, h)?;
            let qs = set.quantiles(&req.quantiles);
            ForecastResponse {
                id: req.id.clone(),
                mean: Some(set.mean()),
                median: None,
                context_truncated: None,
                quantiles: req
                    .quantiles
                    .iter()
                    .zip(qs)
                    .map(|(&q, values)| QuantileForecast { q, values })
                    .collect(),
                samples: Some(mine.iter().map(|r| r.out.clone()).collect()),
                profile: labels.0.to_string(),
                engine: labels.1.to_string(),
            }
        };
        let steps = if b == 0 { std::mem::take(&mut records) } else { Vec::new() };
        out.push(Forecast { response, steps });
    }
    Ok(out)
}

/// Variate ids of each graph row: the request's ids (≥ 0), and a unique negative id for padded variates and
/// rows so the space-wise mask keeps them apart from everything real.
fn fill_ids(
    ids: &mut [i64],
    reqs: &[&ForecastRequest],
    v: usize,
    rows: usize,
    series_of: impl Fn(usize) -> Option<usize>,
) {
    for r in 0..rows {
        for vi in 0..v {
            let real = series_of(r).and_then(|b| reqs.get(b)).and_then(|q| q.id_mask.get(vi).copied());
            ids[r * v + vi] = real.unwrap_or(-1 - (r * v + vi) as i64);
        }
    }
}

/// Scales each row's new patch with its own scaler and fills the decode inputs for the next step.
fn feed_decode(
    decode: &mut GraphRunner,
    d: &Dims,
    reqs: &[&ForecastRequest],
    rows: &mut [Row],
    new_patches: &[Option<Vec<Vec<f32>>>],
) -> Result<()> {
    let (v, p, dh) = (d.variates, d.patch, d.head_dim);
    {
        let patches = decode.input_mut::<f32>(signature::PATCHES)?;
        for (r, row) in rows.iter_mut().enumerate() {
            if let Some(fed) = &new_patches[r] {
                for (vi, vals) in fed.iter().enumerate() {
                    let dst = (r * v + vi) * p;
                    row.scalers[vi].push_patch(vals, &mut patches[dst..dst + p]);
                }
            }
        }
    }
    let series: Vec<Option<usize>> = (0..d.decode_rows).map(|r| rows.get(r).map(|row| row.series)).collect();
    fill_ids(decode.input_mut::<i64>(signature::ID_MASK)?, reqs, v, d.decode_rows, |r| series[r]);
    {
        let wp = decode.input_mut::<i64>(signature::WRITE_POS)?;
        for (r, w) in wp.iter_mut().enumerate() {
            *w = rows.get(r).map_or(0, |row| row.pos as i64);
        }
    }
    let mut tables =
        [vec![0f32; d.decode_rows * dh], vec![0f32; d.decode_rows * dh], vec![0f32; d.decode_rows * dh]];
    for r in 0..d.decode_rows {
        let pos = rows.get(r).map_or(0, |row| row.pos);
        let rr = r * dh..(r + 1) * dh;
        let [c, s, x] = &mut tables;
        rope::fill_decode(pos, dh, &mut c[rr.clone()], &mut s[rr.clone()], &mut x[rr]);
    }
    for (name, t) in [signature::ROPE_COS, signature::ROPE_SIN, signature::XPOS_SCALE].iter().zip(&tables) {
        decode.input_mut::<f32>(name)?.copy_from_slice(t);
    }
    for (r, row) in rows.iter_mut().enumerate() {
        if new_patches[r].is_some() {
            row.pos += 1;
        }
    }
    Ok(())
}
