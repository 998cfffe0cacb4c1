//! The Toto 1.0 forecast session: runs a [`Plan`] for a group of admitted requests, with the causal scaler (f64),
//! rotary tables and mixture sampling on the host.
//!
//! * **Prefill call** (one bucket run): every series' context is scaled once by [`CausalScaler`], written
//!   left-aligned into its rows (one per variate), and the rows of each series (each `id_mask` group) get a group
//!   id of their own, so packed series never attend to each other. The outputs give every series the mixture of
//!   its first forecast patch and its KV cache.
//! * **Decode pass**: the pass's series are prefilled first; right after each prefill call, every path of each
//!   series draws its first patch from the prefill mixture (the mixture mean on the mean path, a seeded draw on
//!   a sample path), and the series' cache is copied into each of its path rows once (sample paths share the
//!   context: no prefill per sample, unlike toto-ts). Then, per forecast patch, each row's new patch is scaled by
//!   that row's scaler (carried step by step, never recomputed), one decode step runs for all rows, and each row
//!   turns its mixture into its next patch.
//!
//! Shape-polymorphic graphs (one session per graph kind, e.g. a TensorRT engine serving every bucket) take the
//! time-wise attention mask as an input instead of building it from constants; the session fills it
//! ([`causal_mask`], [`key_mask`]) whenever the bucket's graph has it.
//!
//! A horizon of one patch or less needs no decode at all: every path draws from the prefill mixture. A request
//! whose paths run in several passes draws each path from its own seeded stream, so it gets the same paths as when
//! they all run together. A failing graph run fails the requests of that call or pass, not the whole group.

use std::collections::HashMap;
use std::time::Instant;

use exporter::bucket::Bucket;
use exporter::toto1::signature;

use crate::error::{Error, Result};
use crate::graph::{CacheMove, GraphRunner};
use crate::host::rope;
use crate::host::scaler::{CausalScaler, PatchStats, ScalerConfig};
use crate::plan::{DecodePass, Plan, PrefillCall};
use crate::request::{ForecastRequest, ForecastResponse, QuantileForecast};
use crate::toto1::mixture::{mean_patch, MixtureParams, PathSampler, SampleSet};

pub use crate::family::{Forecast, RunRecord, StepRecord};

/// Where a session gets its graphs. The engine loads buckets on demand and keeps them within its memory budget.
pub trait Graphs {
    /// The bucket's runner, taken out of the pool (loaded if needed). Buckets in `keep` (the pass's decode
    /// bucket while its prefills run) must stay loaded.
    fn take(&mut self, bucket: Bucket, keep: &[Bucket]) -> Result<GraphRunner>;
    /// Returns a runner taken with [`take`](Self::take).
    fn put(&mut self, bucket: Bucket, runner: GraphRunner);
    /// Records one run.
    fn record(&mut self, run: RunRecord);
    /// How responses name the bucket (`default.decode.n1.t13`) and its profile.
    fn label(&self, bucket: Bucket) -> (String, String);
}

/// The host settings of a session.
#[derive(Debug, Clone, Copy)]
pub struct HostConfig<'a> {
    pub scaler: &'a ScalerConfig,
    pub patch: usize,
    pub head_dim: usize,
    pub components: usize,
    /// The `engine` field of responses.
    pub engine: &'a str,
    /// Keep each request's per-step mixture parameters (first path) for equivalence checks.
    pub record_steps: bool,
    /// Asked before every graph run (see [`crate::family::RunOptions::cancel`]).
    pub cancel: Option<crate::family::Cancel<'a>>,
}

/// One request's state across the plan.
struct Series<'a> {
    req: &'a ForecastRequest,
    /// Scaler state after the context, per variate.
    scalers: Vec<CausalScaler>,
    /// Scaled context per variate, `slots × P` values.
    scaled: Vec<Vec<f32>>,
    slots: usize,
    steps: usize,
    /// `[path][variate]` forecast values so far.
    out: Vec<Vec<Vec<f32>>>,
    records: Vec<StepRecord>,
    buckets: Vec<Bucket>,
    error: Option<Error>,
}

impl<'a> Series<'a> {
    fn new(req: &'a ForecastRequest, cfg: &HostConfig) -> Self {
        let mut scalers = Vec::with_capacity(req.variates());
        let mut scaled = Vec::with_capacity(req.variates());
        for series in &req.target {
            let (st, ctx) = CausalScaler::prefill(cfg.scaler, series);
            scalers.push(st);
            scaled.push(ctx.scaled);
        }
        let paths = req.samples.max(1);
        Series {
            req,
            scalers,
            scaled,
            slots: req.context_len().div_ceil(cfg.patch),
            steps: req.horizon.div_ceil(cfg.patch),
            out: vec![vec![Vec::with_capacity(req.horizon); req.variates()]; paths],
            records: Vec::new(),
            buckets: Vec::new(),
            error: None,
        }
    }

    fn fail(&mut self, e: &Error) {
        if self.error.is_none() {
            self.error = Some(match e.is_cancelled() {
                true => Error::Cancelled { at: "forecast".into() },
                false => Error::Session { graph: "forecast".into(), message: e.to_string() },
            });
        }
    }

    /// Appends a forecast patch of path `path`, variate `v` (cut at the horizon).
    fn push(&mut self, path: usize, v: usize, patch: &[f32]) {
        let out = &mut self.out[path][v];
        let keep = (self.req.horizon - out.len()).min(patch.len());
        out.extend_from_slice(&patch[..keep]);
    }
}

/// A decode row: one variate of one path of one series.
struct Row {
    series: usize,
    path: usize,
    variate: usize,
    scaler: CausalScaler,
    /// Next cache slot to write.
    pos: usize,
}

/// Runs `plan` for `reqs` and returns one result per request, in order.
pub fn run(
    plan: &Plan,
    reqs: &[ForecastRequest],
    cfg: &HostConfig,
    graphs: &mut dyn Graphs,
) -> Vec<Result<Forecast>> {
    let mut series: Vec<Series> = reqs.iter().map(|r| Series::new(r, cfg)).collect();
    for call in &plan.prefill_only {
        if let Err(e) = prefill_only(call, &mut series, cfg, graphs) {
            call.requests.iter().for_each(|&i| series[i].fail(&e));
        }
    }
    for pass in &plan.passes {
        if let Err(e) = decode_pass(pass, &mut series, cfg, graphs) {
            let mut members: Vec<usize> = pass.paths.iter().map(|r| r.request).collect();
            members.dedup();
            members.into_iter().for_each(|i| series[i].fail(&e));
        }
    }
    series.into_iter().map(|s| finish(s, cfg, graphs)).collect()
}

/// Fills a prefill bucket's inputs with the call's series and runs it; returns each series' first row.
fn run_prefill(
    runner: &mut GraphRunner,
    call: &PrefillCall,
    series: &[Series],
    cfg: &HostConfig,
    graphs: &mut dyn Graphs,
) -> Result<HashMap<usize, usize>> {
    let (n, sc, p, dh) = (call.bucket.rows, call.bucket.slots, cfg.patch, cfg.head_dim);
    let mut first_row = HashMap::new();
    let mut row_slots = Vec::with_capacity(n);
    {
        let mut patches = vec![0f32; n * sc * p];
        for &i in &call.requests {
            first_row.insert(i, row_slots.len());
            for scaled in &series[i].scaled {
                let dst = row_slots.len() * sc * p;
                patches[dst..dst + scaled.len()].copy_from_slice(scaled);
                row_slots.push(series[i].slots);
            }
        }
        runner.write_f32(signature::PATCHES, 0, &patches)?;
    }
    let used = row_slots.len();
    {
        let mut ids = GroupIds::new();
        let gid = runner.input_mut::<i64>(signature::GROUP_ID)?;
        let mut r = 0;
        for (k, &i) in call.requests.iter().enumerate() {
            for &id in &series[i].req.id_mask {
                gid[r] = ids.get(k, id);
                r += 1;
            }
        }
        GroupIds::pad(&mut gid[r..], r);
    }
    {
        let last = runner.input_mut::<i64>(signature::LAST_INDEX)?;
        for (r, l) in last.iter_mut().enumerate() {
            *l = row_slots.get(r).map_or(0, |s| *s as i64 - 1);
        }
    }
    let table = sc * dh;
    let mut tables = [vec![0f32; n * table], vec![0f32; n * table], vec![0f32; n * table]];
    for r in 0..n {
        // Padding rows get the tables of a one-slot row: finite values, so nothing NaN meets the space-wise mask.
        let s_r = row_slots.get(r).copied().unwrap_or(1);
        let span = r * table..(r + 1) * table;
        let [c, s, x] = &mut tables;
        rope::fill_prefill(sc, s_r, dh, &mut c[span.clone()], &mut s[span.clone()], &mut x[span]);
    }
    for (name, t) in [signature::ROPE_COS, signature::ROPE_SIN, signature::XPOS_SCALE].iter().zip(&tables) {
        runner.write_f32(name, 0, t)?;
    }
    if runner.has_input(signature::TIME_MASK) {
        runner.write_f32(signature::TIME_MASK, 0, &causal_mask(sc))?;
    }
    let t0 = Instant::now();
    runner.run()?;
    graphs.record(RunRecord { bucket: call.bucket, rows_used: used, seconds: t0.elapsed().as_secs_f64() });
    Ok(first_row)
}

/// The prefill's additive causal mask `[S, S]` (what the static graphs hold as a constant; shape-polymorphic
/// graphs take it as the `time_mask` input).
pub fn causal_mask(slots: usize) -> Vec<f32> {
    let mut m = vec![0f32; slots * slots];
    for i in 0..slots {
        m[i * slots + i + 1..(i + 1) * slots].fill(f32::NEG_INFINITY);
    }
    m
}

/// The decode's additive key mask `[N, T]`: row `r` sees slots `≤ pos[r]` (the static graphs compute it from
/// `write_pos`).
pub fn key_mask(pos: &[usize], slots: usize) -> Vec<f32> {
    let mut m = vec![f32::NEG_INFINITY; pos.len() * slots];
    for (r, &p) in pos.iter().enumerate() {
        m[r * slots..r * slots + (p + 1).min(slots)].fill(0.0);
    }
    m
}

/// Fresh group ids for the rows of one graph run: rows of the same series (or path) `key` and `id_mask` group
/// share an id, everything else differs; padding rows get unique negative ids.
struct GroupIds<K> {
    ids: HashMap<(K, i64), i64>,
}

impl<K: std::hash::Hash + Eq> GroupIds<K> {
    fn new() -> Self {
        GroupIds { ids: HashMap::new() }
    }

    fn get(&mut self, key: K, id: i64) -> i64 {
        let next = self.ids.len() as i64;
        *self.ids.entry((key, id)).or_insert(next)
    }
}

impl GroupIds<()> {
    fn pad(rest: &mut [i64], first_row: usize) {
        for (k, g) in rest.iter_mut().enumerate() {
            *g = -1 - (first_row + k) as i64;
        }
    }
}

/// The mixture outputs `df, loc, scale, weights` of a graph's last run.
fn mixture_outputs(runner: &GraphRunner) -> Result<[&[f32]; 4]> {
    Ok([
        runner.output::<f32>(signature::DF)?,
        runner.output::<f32>(signature::LOC)?,
        runner.output::<f32>(signature::SCALE)?,
        runner.output::<f32>(signature::WEIGHTS)?,
    ])
}

/// Row `r`'s mixture of one step.
fn mixture_row<'o>(outs: &[&'o [f32]; 4], r: usize, cfg: &HostConfig) -> Result<MixtureParams<'o>> {
    let len = cfg.patch * cfg.components;
    let at = r * len..(r + 1) * len;
    MixtureParams::new(
        &outs[0][at.clone()],
        &outs[1][at.clone()],
        &outs[2][at.clone()],
        &outs[3][at],
        cfg.components,
    )
}

/// The step record of a series' path 0 from its rows `first..first + V` of a run, with `stats` per variate.
fn record(
    outs: &[&[f32]; 4],
    first: usize,
    variates: usize,
    stats: &[PatchStats],
    cfg: &HostConfig,
) -> StepRecord {
    let len = cfg.patch * cfg.components;
    let cut = |o: &[f32]| o[first * len..(first + variates) * len].to_vec();
    StepRecord {
        df: cut(outs[0]),
        loc: cut(outs[1]),
        scale: cut(outs[2]),
        weights: cut(outs[3]),
        scaler_loc: stats.iter().map(|s| s.loc).collect(),
        scaler_scale: stats.iter().map(|s| s.scale).collect(),
    }
}

/// Draws (or takes the mean of) one patch of `path`, variate `v` from `params`, de-normalised with `stats`.
fn draw(
    params: &MixtureParams,
    stats: PatchStats,
    path: usize,
    sampler: Option<&mut PathSampler>,
    patch: &mut [f32],
) {
    match sampler {
        None => mean_patch(params, stats, patch),
        Some(s) => s.sample_patch(path, params, stats, patch),
    }
}

/// Series whose horizon fits one patch: a prefill call, then every path draws from its mixture.
fn prefill_only(
    call: &PrefillCall,
    series: &mut [Series],
    cfg: &HostConfig,
    graphs: &mut dyn Graphs,
) -> Result<()> {
    crate::family::check_cancel(cfg.cancel, "prefill")?;
    let mut runner = graphs.take(call.bucket, &[])?;
    let result = (|| {
        let first = run_prefill(&mut runner, call, series, cfg, graphs)?;
        let outs = mixture_outputs(&runner)?;
        let mut patch = vec![0f32; cfg.patch];
        for &i in &call.requests {
            let s = &mut series[i];
            let base = first[&i];
            let stats: Vec<PatchStats> = s.scalers.iter().map(CausalScaler::last_stats).collect();
            if cfg.record_steps {
                s.records.push(record(&outs, base, s.req.variates(), &stats, cfg));
            }
            let paths = s.req.samples.max(1);
            let mut sampler = (s.req.samples > 0).then(|| PathSampler::new(s.req.seed, paths));
            for path in 0..paths {
                for (v, &st) in stats.iter().enumerate() {
                    let params = mixture_row(&outs, base + v, cfg)?;
                    draw(&params, st, path, sampler.as_mut(), &mut patch);
                    s.push(path, v, &patch);
                }
            }
            s.buckets.push(call.bucket);
        }
        Ok(())
    })();
    graphs.put(call.bucket, runner);
    result
}

/// One decode pass: its prefills, each followed by the first patch of every path and the cache copy, then the
/// decode steps.
fn decode_pass(
    pass: &DecodePass,
    series: &mut [Series],
    cfg: &HostConfig,
    graphs: &mut dyn Graphs,
) -> Result<()> {
    let mut decode = graphs.take(pass.bucket, &[])?;
    let result = decode_pass_on(&mut decode, pass, series, cfg, graphs);
    graphs.put(pass.bucket, decode);
    result
}

fn decode_pass_on(
    decode: &mut GraphRunner,
    pass: &DecodePass,
    series: &mut [Series],
    cfg: &HostConfig,
    graphs: &mut dyn Graphs,
) -> Result<()> {
    let (n, p, dh) = (pass.bucket.rows, cfg.patch, cfg.head_dim);
    let mut rows: Vec<Row> = Vec::new();
    let mut samplers: HashMap<usize, PathSampler> = HashMap::new();
    for range in &pass.paths {
        let s = &series[range.request];
        if s.req.samples > 0 {
            samplers.insert(range.request, PathSampler::range(s.req.seed, range.first, range.count));
        }
        for path in range.first..range.first + range.count {
            for (v, scaler) in s.scalers.iter().enumerate() {
                rows.push(Row { series: range.request, path, variate: v, scaler: *scaler, pos: s.slots });
            }
        }
    }
    // Inputs that stay for the whole pass: zeros for padding patches, group ids per (series, path, id group).
    decode.fill_f32(signature::PATCHES, 0.0)?;
    {
        let mut ids = GroupIds::new();
        let gid = decode.input_mut::<i64>(signature::GROUP_ID)?;
        for (r, row) in rows.iter().enumerate() {
            let id = series[row.series].req.id_mask[row.variate];
            gid[r] = ids.get((row.series, row.path), id);
        }
        GroupIds::pad(&mut gid[rows.len()..], rows.len());
    }

    // Prefills; each series' first patch and cache go straight into its rows.
    let mut patch = vec![0f32; p];
    for call in &pass.prefills {
        crate::family::check_cancel(cfg.cancel, "prefill")?;
        let mut pre = graphs.take(call.bucket, &[pass.bucket])?;
        let step0 = (|| -> Result<()> {
            let first = run_prefill(&mut pre, call, series, cfg, graphs)?;
            let outs = mixture_outputs(&pre)?;
            let mut moves = Vec::new();
            for &i in &call.requests {
                let base = first[&i];
                let stats: Vec<PatchStats> = series[i].scalers.iter().map(CausalScaler::last_stats).collect();
                if cfg.record_steps && rows.iter().any(|r| r.series == i && r.path == 0) {
                    series[i].records.push(record(&outs, base, series[i].req.variates(), &stats, cfg));
                }
                series[i].buckets.push(call.bucket);
            }
            let mut scaled = vec![0f32; p];
            for (r, row) in rows.iter_mut().enumerate().filter(|(_, row)| call.requests.contains(&row.series))
            {
                let s = &mut series[row.series];
                let src = first[&row.series] + row.variate;
                let params = mixture_row(&outs, src, cfg)?;
                draw(
                    &params,
                    s.scalers[row.variate].last_stats(),
                    row.path,
                    samplers.get_mut(&row.series),
                    &mut patch,
                );
                s.push(row.path, row.variate, &patch);
                row.scaler.push_patch(&patch, &mut scaled);
                decode.write_f32(signature::PATCHES, r * p, &scaled)?;
                moves.push(CacheMove { dst: r, src, slots: s.slots });
            }
            decode.copy_cache(&pre, &moves)
        })();
        graphs.put(call.bucket, pre);
        step0?;
    }

    for step in 1..=pass.steps {
        // A long pass stops between decode steps once nobody waits for it.
        crate::family::check_cancel(cfg.cancel, &format!("decode step {step}"))?;
        {
            let wp = decode.input_mut::<i64>(signature::WRITE_POS)?;
            for (r, w) in wp.iter_mut().enumerate() {
                *w = rows.get(r).map_or(0, |row| row.pos as i64);
            }
        }
        let mut tables = [vec![0f32; n * dh], vec![0f32; n * dh], vec![0f32; n * dh]];
        for r in 0..n {
            let pos = rows.get(r).map_or(0, |row| row.pos);
            let span = r * dh..(r + 1) * dh;
            let [c, s, x] = &mut tables;
            rope::fill_decode(pos, dh, &mut c[span.clone()], &mut s[span.clone()], &mut x[span]);
        }
        for (name, t) in [signature::ROPE_COS, signature::ROPE_SIN, signature::XPOS_SCALE].iter().zip(&tables)
        {
            decode.write_f32(name, 0, t)?;
        }
        if decode.has_input(signature::TIME_MASK) {
            let pos: Vec<usize> = (0..n).map(|r| rows.get(r).map_or(0, |row| row.pos)).collect();
            decode.write_f32(signature::TIME_MASK, 0, &key_mask(&pos, pass.bucket.slots))?;
        }
        let t0 = Instant::now();
        decode.run()?;
        let active = rows.iter().filter(|r| step < series[r.series].steps).count();
        graphs.record(RunRecord {
            bucket: pass.bucket,
            rows_used: active,
            seconds: t0.elapsed().as_secs_f64(),
        });

        let outs = mixture_outputs(decode)?;
        let mut fed: Vec<(usize, Vec<f32>)> = Vec::new();
        let mut r = 0;
        while r < rows.len() {
            let (i, path) = (rows[r].series, rows[r].path);
            let s = &mut series[i];
            let v_count = s.req.variates();
            if step >= s.steps {
                r += v_count;
                continue;
            }
            if cfg.record_steps && path == 0 {
                let stats: Vec<PatchStats> =
                    rows[r..r + v_count].iter().map(|row| row.scaler.last_stats()).collect();
                s.records.push(record(&outs, r, v_count, &stats, cfg));
            }
            for row in &rows[r..r + v_count] {
                let params = mixture_row(&outs, r + row.variate, cfg)?;
                draw(&params, row.scaler.last_stats(), path, samplers.get_mut(&i), &mut patch);
                s.push(path, row.variate, &patch);
                if step + 1 < s.steps {
                    fed.push((r + row.variate, patch.clone()));
                }
            }
            r += v_count;
        }
        let mut scaled = vec![0f32; p];
        for (r, values) in fed {
            rows[r].scaler.push_patch(&values, &mut scaled);
            decode.write_f32(signature::PATCHES, r * p, &scaled)?;
            rows[r].pos += 1;
        }
    }
    let mut members: Vec<usize> = pass.paths.iter().map(|r| r.request).collect();
    members.dedup();
    for i in members {
        series[i].buckets.push(pass.bucket);
    }
    Ok(())
}

/// A series' response: the mean path, or the sample paths with their mean and quantiles.
fn finish(s: Series, cfg: &HostConfig, graphs: &dyn Graphs) -> Result<Forecast> {
    if let Some(e) = s.error {
        return Err(e);
    }
    let req = s.req;
    let mut buckets = s.buckets.clone();
    buckets.sort();
    buckets.dedup();
    let labels: Vec<(String, String)> = buckets.iter().map(|b| graphs.label(*b)).collect();
    let profile = labels.last().map(|(_, p)| p.clone()).unwrap_or_default();
    let mut response = ForecastResponse {
        id: req.id.clone(),
        mean: None,
        median: None,
        quantiles: Vec::new(),
        samples: None,
        context_truncated: req.context_cut,
        buckets: labels.into_iter().map(|(b, _)| b).collect(),
        profile,
        engine: cfg.engine.to_string(),
        sampler: None,
        engine_sha256: None,
    };
    if req.samples == 0 {
        response.mean = s.out.into_iter().next();
    } else {
        let (v, h) = (req.variates(), req.horizon);
        let flat: Vec<f32> = s.out.iter().flatten().flatten().copied().collect();
        let set = SampleSet::new(&flat, s.out.len(), v, h)?;
        let qs = set.quantiles(&req.quantiles);
        response.mean = Some(set.mean());
        response.quantiles =
            req.quantiles.iter().zip(qs).map(|(&q, values)| QuantileForecast { q, values }).collect();
        response.samples = Some(s.out);
    }
    Ok(Forecast { response, steps: s.records })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_masks_match_the_static_graphs() {
        let ninf = f32::NEG_INFINITY;
        assert_eq!(causal_mask(3), [0.0, ninf, ninf, 0.0, 0.0, ninf, 0.0, 0.0, 0.0]);
        assert_eq!(key_mask(&[0, 2], 3), [0.0, ninf, ninf, 0.0, 0.0, 0.0]);
    }
}
