//! The Toto 2.0 forecast driver: runs a chunk of requests through one shape's graphs (see
//! `exporter::toto2::signature` for the I/O contract), with the scaler, rotary tables and quantile
//! post-processing on the host.
//!
//! Per chunk (requests that fit the shape, checked with [`check_request`] and [`fits`]):
//! 1. each request's context is prepared ([`context::prepare`]): whole patches, last patch forward-filled,
//!    scaled with its causal statistics and squashed with asinh; each variate becomes one graph row;
//! 2. **single pass** (pass graph, or the prefill graph of a block-decoding shape for horizons of at most one
//!    block): context patches then one mask token per forecast patch, all forecast patches in one run;
//! 3. **block decoding** (horizon longer than the block B): the prefill gives the first B patches and the KV
//!    caches; each decode call feeds back the medians of the previous block through the host scaler
//!    (`push_patch`, then asinh) plus B mask tokens, writes its keys/values at `write_pos`, and gives the next
//!    (up to) B patches, as `Toto2Model.forecast` with `decode_block_size` does;
//! 4. every patch's nine knots become sorted real-unit quantiles ([`quantiles::patch_quantiles`]); the response
//!    carries the median as its point forecast and the requested levels (default: the nine knots).
//!
//! toto-2 quirks the driver reproduces (docs/guide.md, Toto 2.0): the group id −1 of fully unobserved context
//! patches is shared by all variates of a request (they attend to each other in the variate layer, whatever
//! their id group), and every decode call takes its variate-layer group ids from the *first* 2B slots of the
//! request's prefill (`base_gids[..., :2B]`), not from the slots it runs.
//!
//! A response's `context_truncated` covers both cuts: the engine's (`ForecastRequest::context_cut`, its `given`)
//! and the cut to whole patches here.

use exporter::toto2::signature::{self as sig, Toto2Dims, Toto2GraphKind};

use crate::error::{Error, Result};
use crate::graph::{CacheMove, GraphRunner};
use crate::request::{ContextCut, ForecastRequest, ForecastResponse, QuantileForecast};
use crate::toto2::context::{self, PreparedContext};
use crate::toto2::quantiles::{self, Levels, QuantileCap, KNOTS, MEDIAN};
use crate::toto2::rope::{centre, RopeTables};

/// The graphs of one Toto 2.0 shape.
pub enum Toto2Runners<'a> {
    /// Single pass only (no `decode_block`).
    Pass(&'a mut GraphRunner),
    /// Block decoding: the prefill (which also serves single passes of at most one block) and the decode graph.
    Block { prefill: &'a mut GraphRunner, decode: &'a mut GraphRunner },
}

/// What a chunk runs with besides its graphs and requests.
pub struct ChunkConfig<'a> {
    pub dims: &'a Toto2Dims,
    pub rope: &'a RopeTables,
    /// Profile and engine names for the responses.
    pub profile: &'a str,
    pub engine: &'a str,
    /// toto-2's `quantile_real_cap_k` (`None`: no cap, `Toto2Model.forecast`'s default).
    pub cap_k: Option<f32>,
    /// What each forecast keeps beyond its response.
    pub trace: Trace,
    /// Asked before every graph run (see [`crate::family::RunOptions::cancel`]).
    pub cancel: Option<crate::family::Cancel<'a>>,
}

/// What a [`Toto2Forecast`] keeps beyond its response. A plain forecast keeps nothing more: a call of many
/// series would otherwise hold every series' nine knots twice (as knots and as the response's quantiles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Trace {
    /// The response only ([`Toto2Forecast::knots`] and `blocks` empty).
    Response,
    /// Also all nine sorted knots (`totoc verify` compares every knot, whatever levels were asked).
    Knots,
    /// Also each block's raw knots and scaler statistics (equivalence checks).
    Blocks,
}

/// Wall time of each graph run, for benchmarks.
#[derive(Debug, Clone, Default)]
pub struct Toto2Timings {
    /// The pass or prefill run of each chunk.
    pub first: Vec<std::time::Duration>,
    /// Each decode call.
    pub decode: Vec<std::time::Duration>,
}

/// One forecast block of a request as the graph produced it, for equivalence checks.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BlockRecord {
    /// The head's knots in asinh space, knot order: `[9][V][b·P]`.
    pub raw: Vec<Vec<Vec<f32>>>,
    /// Scaler statistics that de-normalise the block, `[V]`.
    pub loc: Vec<f32>,
    pub scale: Vec<f32>,
}

/// A Toto 2.0 forecast.
#[derive(Debug, Clone)]
pub struct Toto2Forecast {
    pub response: ForecastResponse,
    /// All nine sorted knots `[9][V][H]` (the response holds the requested levels); empty unless the call
    /// asked for them ([`Trace::Knots`]).
    pub knots: Vec<Vec<Vec<f32>>>,
    /// Per forecast block (when recorded).
    pub blocks: Vec<BlockRecord>,
    /// Whether some requested level was interpolated between knots (callers print
    /// [`quantiles::INTERPOLATION_NOTE`] once).
    pub interpolated: bool,
}

/// The error for a sampling field (`samples`, `seed`) sent to a Toto 2.0 engine.
fn no_sampling(at: &str, field: &str) -> Error {
    Error::NotSupported {
        at: at.to_string(),
        message: format!(
            "`{field}` is not supported by a Toto 2.0 engine: it predicts nine quantiles per step directly and draws \
             no sample paths; drop `samples` and `seed` and ask for `quantiles` (default: the nine knots 0.1 … 0.9)"
        ),
    }
}

/// Checks what a Toto 2.0 engine refuses in a request, whatever its shape: sampling fields, quantile levels
/// outside [0.1, 0.9], a context shorter than one patch. `at` names the request.
pub fn check_request(req: &ForecastRequest, patch: usize, at: &str) -> Result<()> {
    if req.samples > 0 {
        return Err(no_sampling(at, "samples"));
    }
    if req.seed != 0 {
        return Err(no_sampling(at, "seed"));
    }
    Levels::resolve(&req.quantiles, at)?;
    if req.context_len() < patch {
        return Err(Error::ContextTooShort { at: at.to_string(), given: req.context_len(), minimum: patch });
    }
    Ok(())
}

/// Whether a request fits a shape on its own: its variates in the rows, its whole context patches in the
/// context slots, its forecast patches in the horizon slots.
pub fn fits(d: &Toto2Dims, req: &ForecastRequest) -> bool {
    fits_counts(d, req.variates(), req.context_len(), req.horizon)
}

/// [`fits`] on a request's counts.
pub fn fits_counts(d: &Toto2Dims, variates: usize, context: usize, horizon: usize) -> bool {
    let p = d.patch;
    variates <= d.rows
        && context / p <= d.context_slots
        && context >= p
        && horizon.div_ceil(p) <= d.horizon_slots
}

fn plan_error(message: String) -> Error {
    Error::Session { graph: "toto2 forecast driver".into(), message }
}

/// One request of the chunk, as the driver tracks it.
struct Job<'r> {
    req: &'r ForecastRequest,
    ctx: PreparedContext,
    levels: Levels,
    /// First graph row.
    row: usize,
    /// Context patches S_r and forecast patches N_r.
    s: usize,
    n: usize,
    /// Per variate: its group id, and the request's id for fully unobserved context patches.
    groups: Vec<i64>,
    missing_group: i64,
    /// `[9][V][patches·P]` sorted knots so far.
    knots: Vec<Vec<Vec<f32>>>,
    blocks: Vec<BlockRecord>,
    /// Forecast patches done.
    done: usize,
}

impl Job<'_> {
    fn variates(&self) -> usize {
        self.req.variates()
    }

    /// The group id of variate `v` at context-or-later slot `slot` (toto-2's `base_gids`).
    fn base_gid(&self, v: usize, slot: usize) -> i64 {
        let series = &self.ctx.series[v];
        if slot < self.s && !series.observed[slot] {
            self.missing_group
        } else {
            self.groups[v]
        }
    }
}

/// A unique negative id for padded row `row`, slot `slot` (never equal to a real id or another pad).
fn pad_id(row: usize, slot: usize, slots: usize) -> i64 {
    -1 - (row * slots + slot) as i64
}

/// Runs `reqs` (each fitting the shape, together at most `dims.rows` variates) and returns one forecast each.
pub fn forecast_chunk(
    runners: Toto2Runners,
    cfg: &ChunkConfig,
    reqs: &[&ForecastRequest],
    timings: &mut Toto2Timings,
) -> Result<Vec<Toto2Forecast>> {
    let d = cfg.dims;
    let mut jobs = plan(d, reqs)?;
    match runners {
        Toto2Runners::Pass(pass) => {
            if d.block.is_some() {
                return Err(plan_error("a block-decoding shape needs its prefill and decode graphs".into()));
            }
            first_call(pass, Toto2GraphKind::Pass, cfg, &mut jobs, timings)?;
        }
        Toto2Runners::Block { prefill, decode } => {
            let Some(b) = d.block else {
                return Err(plan_error("a single-pass shape has no decode graph".into()));
            };
            first_call(prefill, Toto2GraphKind::Prefill, cfg, &mut jobs, timings)?;
            if jobs.iter().any(|j| j.done < j.n) {
                let identity: Vec<CacheMove> =
                    (0..d.rows).map(|r| CacheMove { dst: r, src: r, slots: d.cache_slots() }).collect();
                decode.copy_cache(prefill, &identity)?;
                while jobs.iter().any(|j| j.done < j.n) {
                    // A long horizon stops between decode blocks once nobody waits for it.
                    crate::family::check_cancel(cfg.cancel, "decode block")?;
                    decode_call(decode, b, cfg, &mut jobs, timings)?;
                }
            }
        }
    }
    Ok(jobs.into_iter().map(|j| finish(j, cfg)).collect())
}

/// Prepares every request and assigns rows and group ids.
fn plan<'r>(d: &Toto2Dims, reqs: &[&'r ForecastRequest]) -> Result<Vec<Job<'r>>> {
    let mut jobs = Vec::with_capacity(reqs.len());
    let (mut row, mut next_id) = (0usize, 0i64);
    for (i, req) in reqs.iter().enumerate() {
        let at = format!("request {}", i + 1);
        check_request(req, d.patch, &at)?;
        if !fits(d, req) {
            return Err(plan_error(format!("{at} does not fit the shape {d:?}")));
        }
        let ctx = context::prepare(req, d.patch, &at)?;
        let levels = Levels::resolve(&req.quantiles, &at)?;
        // a fresh id per series group of this request, and one for its fully unobserved patches
        let mut seen: Vec<(i64, i64)> = Vec::new();
        let groups = req
            .id_mask
            .iter()
            .map(|&g| match seen.iter().find(|(k, _)| *k == g) {
                Some(&(_, id)) => id,
                None => {
                    seen.push((g, next_id));
                    next_id += 1;
                    next_id - 1
                }
            })
            .collect();
        let n = req.horizon.div_ceil(d.patch);
        let v = req.variates();
        jobs.push(Job {
            req,
            s: ctx.patches(d.patch),
            ctx,
            levels,
            row,
            n,
            groups,
            missing_group: next_id,
            knots: vec![vec![Vec::with_capacity(n * d.patch); v]; KNOTS.len()],
            blocks: Vec::new(),
            done: 0,
        });
        next_id += 1;
        row += v;
    }
    if row > d.rows {
        return Err(plan_error(format!("{row} variates exceed the shape's {} rows", d.rows)));
    }
    Ok(jobs)
}

/// The pass graph, or the prefill of block decoding: context patches, then `min(N_r, K)` mask tokens per row.
fn first_call(
    g: &mut GraphRunner,
    kind: Toto2GraphKind,
    cfg: &ChunkConfig,
    jobs: &mut [Job],
    timings: &mut Toto2Timings,
) -> Result<()> {
    let d = cfg.dims;
    let (l, k, p, dr) = (d.tokens(kind), d.outputs(kind), d.patch, d.rotary_dim);
    let mut ids: Vec<i64> = (0..d.rows * l).map(|i| pad_id(i / l, i % l, l)).collect();
    let mut out_index: Vec<i64> = (0..d.rows * k).map(|i| (i % k) as i64).collect();
    let mut tables = [vec![0f32; d.rows * l * dr], vec![0f32; d.rows * l * dr], vec![1f32; d.rows * l * dr]];
    {
        let patches = g.input_mut::<f32>(sig::PATCHES)?;
        patches.fill(0.0);
        for j in jobs.iter() {
            for (v, series) in j.ctx.series.iter().enumerate() {
                let at = (j.row + v) * l * p;
                patches[at..at + j.s * p].copy_from_slice(&series.scaled);
            }
        }
    }
    {
        let missing = g.input_mut::<f32>(sig::MISSING)?;
        missing.fill(1.0);
        for j in jobs.iter() {
            for (v, series) in j.ctx.series.iter().enumerate() {
                let at = (j.row + v) * l * p;
                missing[at..at + j.s * p].copy_from_slice(&series.missing);
            }
        }
    }
    for j in jobs.iter() {
        let m = j.n.min(k);
        for v in 0..j.variates() {
            let r = j.row + v;
            for slot in 0..j.s + m {
                ids[r * l + slot] = j.base_gid(v, slot);
            }
            for (kk, o) in out_index[r * k..(r + 1) * k].iter_mut().enumerate() {
                *o = (j.s - 1 + kk) as i64;
            }
            let at = r * l * dr..(r + 1) * l * dr;
            let [c, s, x] = &mut tables;
            cfg.rope.fill(0..l, centre(j.s + m - 1), &mut c[at.clone()], &mut s[at.clone()], &mut x[at]);
        }
    }
    g.input_mut::<i64>(sig::GROUP_IDS)?.copy_from_slice(&ids);
    g.input_mut::<i64>(sig::OUT_INDEX)?.copy_from_slice(&out_index);
    for (name, t) in [sig::ROPE_COS, sig::ROPE_SIN, sig::XPOS_SCALE].iter().zip(&tables) {
        g.input_mut::<f32>(name)?.copy_from_slice(t);
    }
    let t0 = std::time::Instant::now();
    g.run()?;
    timings.first.push(t0.elapsed());
    let out = g.output::<f32>(sig::QUANTILES)?;
    for j in jobs.iter_mut() {
        let m = j.n.min(k);
        take_block(j, out, k, m, cfg)?;
    }
    Ok(())
}

/// One decode call for every request that still has patches to forecast.
fn decode_call(
    g: &mut GraphRunner,
    b: usize,
    cfg: &ChunkConfig,
    jobs: &mut [Job],
    timings: &mut Toto2Timings,
) -> Result<()> {
    let d = cfg.dims;
    let (l, p, dr, t) = (2 * b, d.patch, d.rotary_dim, d.cache_slots());
    let mut ids: Vec<i64> = (0..d.rows * l).map(|i| pad_id(i / l, i % l, l)).collect();
    let mut write_pos = vec![0i64; d.rows];
    let mut key_valid = vec![1i64; d.rows * t];
    let mut fed = vec![0f32; d.rows * b * p];
    let mut tables = [vec![0f32; d.rows * l * dr], vec![0f32; d.rows * l * dr], vec![1f32; d.rows * l * dr]];
    let mut scaled = vec![0f32; p];
    for j in jobs.iter_mut().filter(|j| j.done < j.n) {
        let block = b.min(j.n - j.done);
        let first = j.s + j.done - b; // slot (= position) of the first fed-back patch
        for v in 0..j.variates() {
            let r = j.row + v;
            // the previous block's medians, scaled patch by patch with the statistics they produce
            for (patch, pi) in (j.done - b..j.done).enumerate() {
                let median = &j.knots[MEDIAN][v][pi * p..(pi + 1) * p];
                j.ctx.series[v].scaler.push_patch(median, &mut scaled);
                let at = (r * b + patch) * p;
                for (dst, &z) in fed[at..at + p].iter_mut().zip(&scaled) {
                    *dst = f64::from(z).asinh() as f32;
                }
            }
            for slot in 0..b + block {
                ids[r * l + slot] = j.base_gid(v, slot);
            }
            write_pos[r] = first as i64;
            for (slot, kv) in key_valid[r * t..r * t + j.s].iter_mut().enumerate() {
                *kv = i64::from(j.ctx.series[v].observed[slot]);
            }
            let at = r * l * dr..(r + 1) * l * dr;
            let [c, s, x] = &mut tables;
            let c_pos = centre(first + b + block - 1);
            cfg.rope.fill(first..first + l, c_pos, &mut c[at.clone()], &mut s[at.clone()], &mut x[at]);
        }
    }
    g.input_mut::<f32>(sig::PATCHES)?.copy_from_slice(&fed);
    g.input_mut::<i64>(sig::GROUP_IDS)?.copy_from_slice(&ids);
    g.input_mut::<i64>(sig::WRITE_POS)?.copy_from_slice(&write_pos);
    g.input_mut::<i64>(sig::KEY_VALID)?.copy_from_slice(&key_valid);
    for (name, tb) in [sig::ROPE_COS, sig::ROPE_SIN, sig::XPOS_SCALE].iter().zip(&tables) {
        g.input_mut::<f32>(name)?.copy_from_slice(tb);
    }
    let t0 = std::time::Instant::now();
    g.run()?;
    timings.decode.push(t0.elapsed());
    let out = g.output::<f32>(sig::QUANTILES)?;
    for j in jobs.iter_mut().filter(|j| j.done < j.n) {
        let block = b.min(j.n - j.done);
        take_block(j, out, b, block, cfg)?;
    }
    Ok(())
}

/// Post-processes the first `m` of the `k` output patches of each of the job's rows and appends them.
fn take_block(j: &mut Job, out: &[f32], k: usize, m: usize, cfg: &ChunkConfig) -> Result<()> {
    let (p, nq) = (cfg.dims.patch, KNOTS.len());
    let mut record = BlockRecord::default();
    if cfg.trace == Trace::Blocks {
        record.raw = vec![vec![Vec::with_capacity(m * p); j.variates()]; nq];
    }
    let mut patch = vec![vec![0f32; p]; nq];
    for v in 0..j.variates() {
        let r = j.row + v;
        let series = &j.ctx.series[v];
        let stats = series.scaler.last_stats();
        let cap = cfg.cap_k.map(|kk| QuantileCap::new(kk, series.extremes, stats.scale));
        for pi in 0..m {
            let at = (r * k + pi) * p * nq;
            let raw = out.get(at..at + p * nq).ok_or_else(|| {
                plan_error(format!(
                    "quantiles output has {} values, row {r} patch {pi} is past it",
                    out.len()
                ))
            })?;
            quantiles::patch_quantiles(raw, stats, cap, &mut patch);
            for q in 0..nq {
                j.knots[q][v].extend_from_slice(&patch[q]);
                if cfg.trace == Trace::Blocks {
                    record.raw[q][v].extend((0..p).map(|i| raw[i * nq + q]));
                }
            }
        }
        record.loc.push(stats.loc);
        record.scale.push(stats.scale);
    }
    if cfg.trace == Trace::Blocks {
        j.blocks.push(record);
    }
    j.done += m;
    Ok(())
}

/// The response of a finished job.
fn finish(mut j: Job, cfg: &ChunkConfig) -> Toto2Forecast {
    for knot in j.knots.iter_mut() {
        for row in knot.iter_mut() {
            row.truncate(j.req.horizon);
        }
    }
    let given = j.req.context_cut.map_or(j.ctx.given, |c| c.given);
    let values = j.levels.select(&j.knots);
    let median = if cfg.trace >= Trace::Knots {
        j.knots[MEDIAN].clone()
    } else {
        std::mem::take(&mut j.knots[MEDIAN])
    };
    if cfg.trace < Trace::Knots {
        j.knots = Vec::new();
    }
    let response = ForecastResponse {
        id: j.req.id.clone(),
        mean: None,
        median: Some(median),
        quantiles: j
            .levels
            .levels
            .iter()
            .zip(values)
            .map(|(&q, values)| QuantileForecast { q, values })
            .collect(),
        samples: None,
        context_truncated: (j.ctx.used < given).then_some(ContextCut { given, used: j.ctx.used }),
        buckets: Vec::new(),
        profile: cfg.profile.to_string(),
        engine: cfg.engine.to_string(),
        sampler: None,
        engine_sha256: None,
    };
    Toto2Forecast { response, knots: j.knots, blocks: j.blocks, interpolated: j.levels.interpolates() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exporter::toto2::Toto2Config;

    fn req(len: usize, variates: usize, horizon: usize) -> ForecastRequest {
        ForecastRequest {
            id: None,
            target: vec![vec![Some(1.0); len]; variates],
            id_mask: vec![0; variates],
            horizon,
            samples: 0,
            quantiles: Vec::new(),
            seed: 0,
            strict_context: false,
            context_cut: None,
            ..ForecastRequest::default()
        }
    }

    #[test]
    fn sampling_fields_levels_and_short_contexts_are_refused_with_the_reason() {
        assert!(check_request(&req(64, 1, 10), 32, "r").is_ok());
        let e = |r: ForecastRequest| check_request(&r, 32, "request 3").unwrap_err().to_string();
        let s = e(ForecastRequest { samples: 8, ..req(64, 1, 10) });
        assert!(
            s.contains("request 3") && s.contains("`samples` is not supported") && s.contains("quantiles"),
            "{s}"
        );
        let s = e(ForecastRequest { seed: 3, ..req(64, 1, 10) });
        assert!(s.contains("`seed` is not supported"), "{s}");
        let s = e(ForecastRequest { quantiles: vec![0.5, 0.95], ..req(64, 1, 10) });
        assert!(s.contains("0.95") && s.contains("[0.1, 0.9]"), "{s}");
        assert!(e(req(20, 1, 10)).contains("needs at least 32"));
    }

    #[test]
    fn fits_counts_rows_whole_patches_and_horizon_patches() {
        let json = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/toto2/4m/config.json"),
        )
        .unwrap();
        let cfg = Toto2Config::from_json(&json).unwrap();
        let d = Toto2Dims::new(&cfg, 3, 512, 336, None).unwrap();
        assert!(fits(&d, &req(512, 3, 336)));
        assert!(fits(&d, &req(543, 3, 330)), "543 points use 16 whole patches");
        assert!(!fits(&d, &req(544, 3, 336)), "17 patches");
        assert!(!fits(&d, &req(512, 4, 336)), "4 rows");
        assert!(
            fits(&d, &req(512, 1, 352)) && !fits(&d, &req(512, 1, 353)),
            "11 horizon patches hold 352 points"
        );
        assert!(!fits(&d, &req(31, 1, 10)), "no whole patch");
    }
}
