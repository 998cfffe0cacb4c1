//! One call of the Kronos engine: upstream's `auto_regressive_inference` in eval mode, over the graphs the
//! planner ([`crate::kronos::plan`]) picks, with an exact KV cache.
//!
//! For every series (a [`KronosJob`]): its N rows normalised over all N ([`Normalizer`]), encoded at positions
//! 0…N−1 (all N, even N > max_context: the encoder is causal, so cutting first would change tokens). Then, step
//! i = 0…H−1 with L = N + i, the window is the tokens `[max(0, L − max_context), L)` at positions 0…W−1, each row
//! with its own stamp:
//! * step 0: one prefill per series over its window; its caches, last s1 logits and final-normed state are
//!   copied to each of its paths' rows;
//! * while L ≤ max_context: one cached decode step per path (the token sampled at step i−1, at position L−1);
//! * once L > max_context: a full recompute of the window per path (dropping the first token changes every
//!   state, so nothing cached is reused), its dependency keys/values copied into the path's row;
//! * each step: s1 sampled from the s1 logits, then the refine graph gives the s2 logits for that s1 (the
//!   dependency layer's query over the window's final-normed states, read from the decode graph's cache where the
//!   step wrote it), s2 sampled. Greedy is `top_k = 1`; sampled paths draw totoc's noise, keyed by (seed, path,
//!   step, draw) so nothing about the call's layout changes a path.
//!
//! At the end each path's last `min(N + H, max_context)` tokens are decoded from position 0 and the last H rows
//! kept; the series' mean is taken over its paths in normalised space, then de-normalised ([`summarize`]).
//!
//! A series that cannot be normalised fails alone; a graph that fails fails the call's series.

use std::collections::BTreeSet;
use std::ops::Range;
use std::time::Instant;

use exporter::bucket::Bucket;
use exporter::kronos::signature::{self as sig, dep_k_cache, dep_v_cache, ModelDims};
use exporter::signature::GraphKind;

use crate::error::{Error, Result};
use crate::family::{check_cancel, Cancel, RunRecord};
use crate::graph::{CacheMove, GraphRunner};
use crate::kronos::columns::COLUMNS;
use crate::kronos::defects::planted;
use crate::kronos::hooks::{Hooks, Trace};
use crate::kronos::job::KronosJob;
use crate::kronos::noise::{Draw, DrawKey, NoiseSource, NoiseStream};
use crate::kronos::normalize::Normalizer;
use crate::kronos::paths::{summarize, PathForecast};
use crate::kronos::plan::{Ladder, Lane};
use crate::kronos::sampler::Sampler;
use crate::kronos::staging::{spread_moves, staging_row};
use crate::memory::release_free_heap;

/// Values per candle row.
const ROW: usize = COLUMNS.len();
/// Time features per stamp.
const STAMP: usize = 5;

/// The engine's graphs as a call sees them: loaded on demand, put back after use, every run recorded.
pub(crate) trait Graphs {
    fn take(&mut self, bucket: Bucket) -> Result<GraphRunner>;
    fn put(&mut self, bucket: Bucket, runner: GraphRunner);
    fn record(&mut self, run: RunRecord);
}

/// What a call runs with.
#[derive(Clone, Copy)]
pub(crate) struct CallConfig<'a> {
    pub ladder: &'a Ladder,
    pub dims: ModelDims,
    /// T: the decode graphs' cache slots.
    pub window: usize,
    pub cancel: Option<Cancel<'a>>,
    pub hooks: Hooks<'a>,
}

/// One series' forecast.
#[derive(Debug, Clone)]
pub struct SeriesForecast {
    pub forecast: PathForecast,
    pub trace: Option<Trace>,
    /// The graphs that ran it.
    pub buckets: Vec<Bucket>,
}

/// A series in flight.
struct Series<'j> {
    job: &'j KronosJob,
    norm: Normalizer,
    /// `[N][6]`: the normalised, clipped rows.
    x: Vec<f32>,
    /// `[N + H]`: each row's time features as the graphs take them.
    stamps: Vec<[i64; STAMP]>,
    enc_s1: Vec<i64>,
    enc_s2: Vec<i64>,
    /// Per path: the tokens taken, `[H]` each.
    gen_s1: Vec<Vec<i64>>,
    gen_s2: Vec<Vec<i64>>,
    /// `[paths][H][6]`: decoded, normalised.
    paths_norm: Vec<f32>,
    trace: Option<Trace>,
    buckets: BTreeSet<Bucket>,
}

impl Series<'_> {
    fn n(&self) -> usize {
        self.job.rows()
    }

    /// Token `j` of the sequence `[context ‖ generated]` of path `p`.
    fn token(&self, p: usize, j: usize) -> (i64, i64) {
        let n = self.n();
        if j < n {
            (self.enc_s1[j], self.enc_s2[j])
        } else {
            (self.gen_s1[p][j - n], self.gen_s2[p][j - n])
        }
    }

    /// The time features of input row `j` (its own stamp).
    fn stamp(&self, j: usize) -> [i64; STAMP] {
        let next = usize::from(planted().next_stamp);
        self.stamps[(j + next).min(self.stamps.len() - 1)]
    }

    /// The window of step `i`: `(start, len)` of `[max(0, L − max_context), L)`, L = N + i.
    fn window(&self, i: usize) -> (usize, usize) {
        let (l, m) = (self.n() + i, self.job.max_context);
        if l > m && planted().slide_off_by_one {
            return (l - m + 1, m - 1);
        }
        let w = l.min(m);
        (l - w, w)
    }

    /// Whether step `i ≥ 1` is a cached decode step (the window has not slid).
    fn cached(&self, i: usize) -> bool {
        i >= 1 && self.n() + i <= self.job.max_context
    }
}

/// Runs `jobs` (see the module docs): one result per job, in order.
pub(crate) fn run_call(
    g: &mut dyn Graphs,
    cfg: &CallConfig<'_>,
    jobs: &[&KronosJob],
) -> Vec<Result<SeriesForecast>> {
    let mut out: Vec<Option<Result<SeriesForecast>>> = (0..jobs.len()).map(|_| None).collect();
    let mut series = Vec::new();
    let mut index = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        match prepare(job, cfg, &format!("request {}", i + 1)) {
            Ok(s) => {
                series.push(s);
                index.push(i);
            }
            Err(e) => out[i] = Some(Err(e)),
        }
    }
    match run_series(g, cfg, &mut series) {
        Ok(()) => {
            for (s, i) in series.into_iter().zip(index) {
                out[i] = Some(finish(s));
            }
        }
        Err(e) => {
            // the first series gets the error itself, the others its message
            let cancelled = matches!(e, Error::Cancelled { .. });
            let message = e.to_string();
            let mut first = Some(e);
            for i in index {
                out[i] = Some(Err(match (cancelled, first.take()) {
                    (true, _) => Error::Cancelled { at: format!("request {}", i + 1) },
                    (false, Some(e)) => e,
                    (false, None) => Error::Session { graph: "kronos".into(), message: message.clone() },
                }));
            }
        }
    }
    out.into_iter().map(|r| r.expect("every job answered")).collect()
}

/// The host side before the graphs: statistics over all N rows, the normalised rows, the stamps.
fn prepare<'j>(job: &'j KronosJob, cfg: &CallConfig<'_>, at: &str) -> Result<Series<'j>> {
    let norm = Normalizer::fit(at, &job.candles, job.clip)?;
    let x = norm.normalized_rows(&job.candles);
    let stamps =
        job.stamps.iter().map(|f| [f.minute, f.hour, f.weekday, f.day, f.month].map(i64::from)).collect();
    let paths = job.paths();
    Ok(Series {
        job,
        norm,
        x,
        stamps,
        enc_s1: Vec::new(),
        enc_s2: Vec::new(),
        gen_s1: vec![Vec::with_capacity(job.horizon); paths],
        gen_s2: vec![Vec::with_capacity(job.horizon); paths],
        paths_norm: vec![0.0; paths * job.horizon * ROW],
        trace: cfg.hooks.trace.then(|| Trace {
            s1_logits: vec![0.0; job.horizon * paths * cfg.dims.vocab()],
            s2_logits: vec![0.0; job.horizon * paths * cfg.dims.vocab()],
            ..Trace::default()
        }),
        buckets: BTreeSet::new(),
    })
}

/// Every graph of the call: encode, the lanes' steps, detokenize.
fn run_series(g: &mut dyn Graphs, cfg: &CallConfig<'_>, series: &mut [Series<'_>]) -> Result<()> {
    if series.is_empty() {
        return Ok(());
    }
    encode(g, cfg, series)?;
    release_free_heap();
    let paths: Vec<usize> = series.iter().map(|s| s.job.paths()).collect();
    let lanes = cfg.ladder.lanes(&paths);
    if lanes.is_empty() {
        return Err(Error::Session {
            graph: "kronos".into(),
            message: "no decode and refine graphs of equal rows".into(),
        });
    }
    let mut sampler = Sampler::new();
    for lane in &lanes {
        run_lane(g, cfg, series, lane, &mut sampler)?;
    }
    detokenize(g, cfg, series)?;
    release_free_heap();
    Ok(())
}

/// Runs `runner` once, recording it (and asking the caller whether to go on first).
fn run_graph(
    g: &mut dyn Graphs,
    cfg: &CallConfig<'_>,
    runner: &mut GraphRunner,
    bucket: Bucket,
    rows_used: usize,
) -> Result<()> {
    timed_run(g, cfg, bucket, rows_used, || runner.run())
}

/// Runs `run` (one run of a graph of `bucket`), recording it (and asking the caller whether to go on first).
fn timed_run(
    g: &mut dyn Graphs,
    cfg: &CallConfig<'_>,
    bucket: Bucket,
    rows_used: usize,
    run: impl FnOnce() -> Result<()>,
) -> Result<()> {
    check_cancel(cfg.cancel, bucket.kind.as_str())?;
    let t = Instant::now();
    run()?;
    g.record(RunRecord { bucket, rows_used, seconds: t.elapsed().as_secs_f64() });
    Ok(())
}

/// Takes `bucket`, runs `f` on it and puts it back whatever `f` returns.
fn with_graph<T>(
    g: &mut dyn Graphs,
    bucket: Bucket,
    f: impl FnOnce(&mut dyn Graphs, &mut GraphRunner) -> Result<T>,
) -> Result<T> {
    let mut runner = g.take(bucket)?;
    let result = f(g, &mut runner);
    g.put(bucket, runner);
    result
}

/// Encodes every series' N rows (right-padded, rows of one slot count packed).
fn encode(g: &mut dyn Graphs, cfg: &CallConfig<'_>, series: &mut [Series<'_>]) -> Result<()> {
    let items: Vec<(usize, usize)> = series.iter().enumerate().map(|(b, s)| (b, s.n())).collect();
    let (runs, unfit) = cfg.ladder.pack(GraphKind::Encode, &items);
    if let Some(&b) = unfit.first() {
        return Err(unservable("encode", series[b].n()));
    }
    let bits = cfg.dims.bits;
    for run in runs {
        let (r, s) = (run.bucket.rows, run.bucket.slots);
        with_graph(g, run.bucket, |g, runner| {
            let values = runner.input_mut::<f32>(sig::VALUES)?;
            values.fill(0.0);
            for (k, &b) in run.items.iter().enumerate() {
                let x = &series[b].x;
                values[k * s * ROW..k * s * ROW + x.len()].copy_from_slice(x);
            }
            run_graph(g, cfg, runner, run.bucket, run.items.len())?;
            let (s1, s2) = (runner.output::<i64>(sig::S1)?, runner.output::<i64>(sig::S2)?);
            let z = runner.output::<f32>(sig::Z)?;
            debug_assert_eq!(s1.len(), r * s);
            for (k, &b) in run.items.iter().enumerate() {
                let ser = &mut series[b];
                let n = ser.n();
                ser.enc_s1 = s1[k * s..k * s + n].to_vec();
                ser.enc_s2 = s2[k * s..k * s + n].to_vec();
                if planted().bits_msb_first {
                    for t in ser.enc_s1.iter_mut().chain(ser.enc_s2.iter_mut()) {
                        *t = reverse_bits(*t, bits);
                    }
                }
                ser.buckets.insert(run.bucket);
                if let Some(trace) = &mut ser.trace {
                    trace.encode_s1 = ser.enc_s1.clone();
                    trace.encode_s2 = ser.enc_s2.clone();
                    trace.z = z[k * s * 2 * bits..(k * s + n) * 2 * bits].to_vec();
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// `t`'s low `bits` bits in reverse order (the planted defect "bits read most significant first").
fn reverse_bits(t: i64, bits: usize) -> i64 {
    (0..bits).filter(|j| t >> j & 1 == 1).map(|j| 1 << (bits - 1 - j)).sum()
}

fn unservable(kind: &str, slots: usize) -> Error {
    Error::Session {
        graph: "kronos".into(),
        message: format!(
            "no {kind} graph of this engine holds {slots} positions (admission should have refused it)"
        ),
    }
}

/// A lane's host buffers: each row's series and path, and what its last graph gave it.
struct LaneState {
    /// Per lane row: (series, path); rows past the lane's paths are padding.
    rows: Vec<Option<(usize, usize)>>,
    /// `[R][V]`: the s1 logits of each row's last step.
    logits: Vec<f32>,
    /// `[R][D]`: the final-normed state at each row's last token.
    h_last: Vec<f32>,
}

/// Runs a lane's steps (see the module docs) on its decode and refine graphs, held for the whole lane.
fn run_lane(
    g: &mut dyn Graphs,
    cfg: &CallConfig<'_>,
    series: &mut [Series<'_>],
    lane: &Lane,
    sampler: &mut Sampler,
) -> Result<()> {
    let (t, r) = (cfg.window, lane.rows);
    let (decode_b, refine_b) = (Bucket::of(GraphKind::Decode, r, t), Bucket::of(GraphKind::Refine, r, t));
    with_graph(g, decode_b, |g, decode| {
        with_graph(g, refine_b, |g, refine| {
            for name in [dep_k_cache(false), dep_v_cache(false)] {
                refine.share_input(&name, decode)?;
            }
            let mut rows: Vec<Option<(usize, usize)>> = lane.paths.iter().copied().map(Some).collect();
            rows.resize(r, None);
            let mut st = LaneState {
                rows,
                logits: vec![0.0; r * cfg.dims.vocab()],
                h_last: vec![0.0; r * cfg.dims.d_model],
            };
            for &(b, _) in &lane.paths {
                series[b].buckets.extend([decode_b, refine_b]);
            }
            let steps = lane.paths.iter().map(|&(b, _)| series[b].job.horizon).max().unwrap_or(0);
            for i in 0..steps {
                if i == 0 {
                    // (each of its runs gives its freed heap back itself)
                    prefill(g, cfg, series, &mut st, decode)?;
                } else {
                    decode_step(g, cfg, series, &mut st, decode, decode_b, i)?;
                    recompute(g, cfg, series, &mut st, decode, i)?;
                }
                sample(cfg, series, &st, sampler, i, Draw::S1, None)?;
                let s2_logits = refine_step(g, cfg, series, &st, refine, refine_b, i)?;
                sample(cfg, series, &st, sampler, i, Draw::S2, Some(&s2_logits))?;
            }
            Ok(())
        })
    })
}

/// The lane rows active at step `i`: (row, series, path).
fn active(series: &[Series<'_>], st: &LaneState, i: usize) -> Vec<(usize, usize, usize)> {
    st.rows
        .iter()
        .enumerate()
        .filter_map(|(row, x)| x.map(|(b, p)| (row, b, p)))
        .filter(|&(_, b, _)| i < series[b].job.horizon)
        .collect()
}

/// Writes the window `(start, len)` of path `p` of `s` into row `k` of a prefill or recompute graph of `slots`
/// slots (right-padded; `last` = its last real slot).
fn write_window(
    runner: &mut GraphRunner,
    s: &Series<'_>,
    p: usize,
    (start, len): (usize, usize),
    k: usize,
    slots: usize,
) -> Result<()> {
    let row = k * slots;
    {
        let (s1, s2): (Vec<i64>, Vec<i64>) = (start..start + len).map(|j| s.token(p, j)).unzip();
        runner.input_mut::<i64>(sig::S1)?[row..row + len].copy_from_slice(&s1);
        runner.input_mut::<i64>(sig::S2)?[row..row + len].copy_from_slice(&s2);
    }
    let stamps = runner.input_mut::<i64>(sig::STAMPS)?;
    for (t, j) in (start..start + len).enumerate() {
        stamps[(row + t) * STAMP..(row + t + 1) * STAMP].copy_from_slice(&s.stamp(j));
    }
    runner.input_mut::<i64>(sig::LAST)?[k] = len as i64 - 1;
    Ok(())
}

/// Clears a prefill or recompute graph's inputs (padding rows and slots are zeros).
fn clear_window_inputs(runner: &mut GraphRunner) -> Result<()> {
    for name in [sig::S1, sig::S2, sig::STAMPS, sig::LAST] {
        runner.input_mut::<i64>(name)?.fill(0);
    }
    Ok(())
}

/// Copies row `k` of a graph's `s1_logits` and `h_last` into lane row `row`.
fn take_head(runner: &GraphRunner, st: &mut LaneState, dims: &ModelDims, k: usize, row: usize) -> Result<()> {
    let (v, d) = (dims.vocab(), dims.d_model);
    st.logits[row * v..(row + 1) * v]
        .copy_from_slice(&runner.output::<f32>(sig::S1_LOGITS)?[k * v..(k + 1) * v]);
    st.h_last[row * d..(row + 1) * d]
        .copy_from_slice(&runner.output::<f32>(sig::H_LAST)?[k * d..(k + 1) * d]);
    Ok(())
}

/// Step 0: one prefill per series of the lane over its window; caches and heads given to its paths' rows.
///
/// The prefill writes its caches straight into the decode graph's (see [`staging_row`]); each series' cache is
/// then copied within the decode graph's buffers to its other paths' rows. A prefill graph with caches of its own
/// (a GPU target), or a run no block of decode rows can take, has its caches copied over instead.
fn prefill(
    g: &mut dyn Graphs,
    cfg: &CallConfig<'_>,
    series: &mut [Series<'_>],
    st: &mut LaneState,
    decode: &mut GraphRunner,
) -> Result<()> {
    let mut members: Vec<usize> = st.rows.iter().flatten().map(|&(b, _)| b).collect();
    members.dedup();
    let items: Vec<(usize, usize)> = members.iter().map(|&b| (b, series[b].window(0).1)).collect();
    let (runs, unfit) = cfg.ladder.pack(GraphKind::Prefill, &items);
    if let Some(&b) = unfit.first() {
        return Err(unservable("prefill", series[b].window(0).1));
    }
    // lane rows holding a series' final caches (a later run must not write over them)
    let mut done = vec![false; st.rows.len()];
    for run in runs {
        with_graph(g, run.bucket, |g, runner| {
            clear_window_inputs(runner)?;
            for (k, &b) in run.items.iter().enumerate() {
                write_window(runner, &series[b], 0, series[b].window(0), k, run.bucket.slots)?;
            }
            let dests: Vec<Range<usize>> = run.items.iter().map(|&b| lane_rows_of(st, b)).collect();
            let rows_used = run.items.len();
            let staged = match runner.has_detached_outputs() {
                true => staging_row(run.bucket.rows, &dests, &done),
                false => None,
            };
            let slots = |b: usize| series[b].window(0).1;
            match staged {
                Some(r0) => {
                    timed_run(g, cfg, run.bucket, rows_used, || runner.run_into(decode, r0))?;
                    decode.copy_cache_rows(&spread_moves(&run.items, &dests, |k| r0 + k, slots))?;
                }
                None => {
                    let attached = runner.attach_outputs()?;
                    let ran = run_graph(g, cfg, runner, run.bucket, rows_used).and_then(|()| {
                        decode.copy_cache(runner, &spread_moves(&run.items, &dests, |k| k, slots))
                    });
                    runner.detach_outputs(&attached)?;
                    ran?;
                }
            }
            for (k, &b) in run.items.iter().enumerate() {
                series[b].buckets.insert(run.bucket);
                for row in dests[k].clone() {
                    take_head(runner, st, &cfg.dims, k, row)?;
                    done[row] = true;
                }
            }
            Ok(())
        })?;
        // each run's freed activations go back before the next run's (8 series of 392 + 120 prefill in 1-row
        // runs: peak RSS above ONNX Runtime 388 -> 343 MB)
        release_free_heap();
    }
    Ok(())
}

/// The lane rows of series `b` (a lane holds a series' paths in consecutive rows).
fn lane_rows_of(st: &LaneState, b: usize) -> Range<usize> {
    let first = st.rows.iter().position(|x| x.is_some_and(|(sb, _)| sb == b)).unwrap_or(0);
    let len = st.rows[first..].iter().take_while(|x| x.is_some_and(|(sb, _)| sb == b)).count();
    first..first + len
}

/// Step `i ≥ 1`: one decode run over the lane's rows whose window has not slid.
fn decode_step(
    g: &mut dyn Graphs,
    cfg: &CallConfig<'_>,
    series: &[Series<'_>],
    st: &mut LaneState,
    decode: &mut GraphRunner,
    bucket: Bucket,
    i: usize,
) -> Result<()> {
    let cached: Vec<(usize, usize, usize)> =
        active(series, st, i).into_iter().filter(|&(_, b, _)| series[b].cached(i)).collect();
    if cached.is_empty() {
        return Ok(());
    }
    // other rows (slid, finished, padding) run on token 0 at slot 0: their results are not read, and a slid
    // row's dependency cache is rewritten by its recompute after this
    for name in [sig::S1, sig::S2, sig::STAMPS, sig::WRITE_POS] {
        decode.input_mut::<i64>(name)?.fill(0);
    }
    for &(row, b, p) in &cached {
        let s = &series[b];
        let pos = s.n() + i - 1;
        let (t1, t2) = s.token(p, pos);
        decode.input_mut::<i64>(sig::S1)?[row] = t1;
        decode.input_mut::<i64>(sig::S2)?[row] = t2;
        decode.input_mut::<i64>(sig::STAMPS)?[row * STAMP..(row + 1) * STAMP].copy_from_slice(&s.stamp(pos));
        decode.input_mut::<i64>(sig::WRITE_POS)?[row] = pos as i64;
    }
    run_graph(g, cfg, decode, bucket, cached.len())?;
    for &(row, _, _) in &cached {
        take_head(decode, st, &cfg.dims, row, row)?;
    }
    Ok(())
}

/// Step `i ≥ 1`: the full-window recompute of every lane row whose window has slid; each row's dependency cache
/// is then the recompute's.
fn recompute(
    g: &mut dyn Graphs,
    cfg: &CallConfig<'_>,
    series: &mut [Series<'_>],
    st: &mut LaneState,
    decode: &mut GraphRunner,
    i: usize,
) -> Result<()> {
    let slid: Vec<(usize, usize, usize)> =
        active(series, st, i).into_iter().filter(|&(_, b, _)| !series[b].cached(i)).collect();
    // a row recomputes every step once its window has slid and never reads its layers' caches again: give their
    // pages back at its first recompute (400 + 120: 16 MiB of the peak during the recomputes)
    let first: Vec<usize> =
        slid.iter().filter(|&&(_, b, _)| i == 1 || series[b].cached(i - 1)).map(|&(row, _, _)| row).collect();
    if !first.is_empty() {
        let layer_caches: Vec<String> = decode
            .cache_inputs()
            .filter(|n| *n != dep_k_cache(false) && *n != dep_v_cache(false))
            .map(str::to_string)
            .collect();
        for name in layer_caches {
            decode.release_input_rows(&name, &first)?;
        }
    }
    let items: Vec<((usize, usize, usize), usize)> =
        slid.iter().map(|&(row, b, p)| ((row, b, p), series[b].window(i).1)).collect();
    let (runs, unfit) = cfg.ladder.pack(GraphKind::Recompute, &items);
    if let Some(&(_, b, _)) = unfit.first() {
        return Err(unservable("recompute", series[b].window(i).1));
    }
    for run in runs {
        with_graph(g, run.bucket, |g, runner| {
            clear_window_inputs(runner)?;
            for (k, &(_, b, p)) in run.items.iter().enumerate() {
                write_window(runner, &series[b], p, series[b].window(i), k, run.bucket.slots)?;
            }
            run_graph(g, cfg, runner, run.bucket, run.items.len())?;
            let mut moves = Vec::new();
            for (k, &(row, b, _)) in run.items.iter().enumerate() {
                series[b].buckets.insert(run.bucket);
                take_head(runner, st, &cfg.dims, k, row)?;
                moves.push(CacheMove { dst: row, src: k, slots: series[b].window(i).1 });
            }
            decode.copy_cache(runner, &moves)
        })?;
        // a recompute runs every step once the window slides: without this, each run's freed activations stay
        // in the heap and the heap grows run by run (400 + 120: peak 267 -> 209 MB above ONNX Runtime)
        release_free_heap();
    }
    Ok(())
}

/// The refine run over the lane: each active row's s1 (just taken), final-normed state and window length.
/// Returns its `s2_logits` `[R][V]`.
fn refine_step(
    g: &mut dyn Graphs,
    cfg: &CallConfig<'_>,
    series: &[Series<'_>],
    st: &LaneState,
    refine: &mut GraphRunner,
    bucket: Bucket,
    i: usize,
) -> Result<Vec<f32>> {
    let rows = active(series, st, i);
    refine.input_mut::<i64>(sig::S1)?.fill(0);
    refine.input_mut::<i64>(sig::LENGTH)?.fill(1);
    refine.input_mut::<f32>(sig::H_LAST)?.copy_from_slice(&st.h_last);
    let causal = planted().dep_causal;
    for &(row, b, p) in &rows {
        let s = &series[b];
        refine.input_mut::<i64>(sig::S1)?[row] = s.gen_s1[p][i];
        // training mode's causal mask lets the one query see window position 0 only (a planted defect)
        let length = if causal { 1 } else { s.window(i).1 };
        refine.input_mut::<i64>(sig::LENGTH)?[row] = length as i64;
    }
    run_graph(g, cfg, refine, bucket, rows.len())?;
    Ok(refine.output::<f32>(sig::S2_LOGITS)?.to_vec())
}

/// Draws `draw` for every active row of the lane at step `i` from `logits` (`None`: the lane's s1 logits) and
/// appends the token (or the forced one) to its path; records the trace.
fn sample(
    cfg: &CallConfig<'_>,
    series: &mut [Series<'_>],
    st: &LaneState,
    sampler: &mut Sampler,
    i: usize,
    draw: Draw,
    logits: Option<&[f32]>,
) -> Result<()> {
    let v = cfg.dims.vocab();
    let logits = logits.unwrap_or(&st.logits);
    for (row, b, p) in active(series, st, i) {
        let s = &mut series[b];
        let row_logits = &logits[row * v..(row + 1) * v];
        let own;
        let noise: &dyn NoiseSource = match cfg.hooks.noise(b) {
            Some(n) => n,
            None => {
                own = NoiseStream::new(s.job.seed);
                &own
            }
        };
        let key = DrawKey { path: p as u64, step: i as u64, draw };
        let sampled = i64::from(sampler.sample(row_logits, &s.job.sampling, noise, key)?);
        let forced = cfg.hooks.forced(b).map(|f| match draw {
            Draw::S1 => f.s1[p][i],
            Draw::S2 => f.s2[p][i],
        });
        let token = forced.unwrap_or(sampled);
        if !(0..v as i64).contains(&token) {
            return Err(Error::Config {
                message: format!("forced token {token} is outside the vocabulary of {v}"),
            });
        }
        match draw {
            Draw::S1 => s.gen_s1[p].push(token),
            Draw::S2 => s.gen_s2[p].push(token),
        }
        let paths = s.job.paths();
        let window = s.window(i).1;
        if let Some(trace) = &mut s.trace {
            let at = (i * paths + p) * v;
            let dst = match draw {
                Draw::S1 => &mut trace.s1_logits,
                Draw::S2 => &mut trace.s2_logits,
            };
            dst[at..at + v].copy_from_slice(row_logits);
            if draw == Draw::S1 && p == 0 {
                trace.windows.push(window);
            }
        }
    }
    Ok(())
}

/// The final decode: each path's last `min(N + H, max_context)` tokens from position 0, the last H rows kept.
fn detokenize(g: &mut dyn Graphs, cfg: &CallConfig<'_>, series: &mut [Series<'_>]) -> Result<()> {
    let span = |s: &Series<'_>| {
        let total = s.n() + s.job.horizon;
        // a planted defect decodes the generated tokens alone
        let len = if planted().final_window_wrong { s.job.horizon } else { total.min(s.job.max_context) };
        (total - len, len)
    };
    let items: Vec<((usize, usize), usize)> = series
        .iter()
        .enumerate()
        .flat_map(|(b, s)| (0..s.job.paths()).map(move |p| ((b, p), span(s).1)))
        .collect();
    let (runs, unfit) = cfg.ladder.pack(GraphKind::Detokenize, &items);
    if let Some(&(b, _)) = unfit.first() {
        return Err(unservable("detokenize", span(&series[b]).1));
    }
    for run in runs {
        let slots = run.bucket.slots;
        with_graph(g, run.bucket, |g, runner| {
            runner.input_mut::<i64>(sig::S1)?.fill(0);
            runner.input_mut::<i64>(sig::S2)?.fill(0);
            for (k, &(b, p)) in run.items.iter().enumerate() {
                let (start, len) = span(&series[b]);
                let (s1, s2): (Vec<i64>, Vec<i64>) =
                    (start..start + len).map(|j| series[b].token(p, j)).unzip();
                runner.input_mut::<i64>(sig::S1)?[k * slots..k * slots + len].copy_from_slice(&s1);
                runner.input_mut::<i64>(sig::S2)?[k * slots..k * slots + len].copy_from_slice(&s2);
            }
            run_graph(g, cfg, runner, run.bucket, run.items.len())?;
            let values = runner.output::<f32>(sig::VALUES)?;
            for (k, &(b, p)) in run.items.iter().enumerate() {
                let s = &mut series[b];
                let (h, len) = (s.job.horizon, span(s).1);
                let from = (k * slots + len - h) * ROW;
                s.paths_norm[p * h * ROW..(p + 1) * h * ROW].copy_from_slice(&values[from..from + h * ROW]);
                s.buckets.insert(run.bucket);
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// A series' forecast from its decoded paths.
fn finish(s: Series<'_>) -> Result<SeriesForecast> {
    let job = s.job;
    let forecast = summarize(&s.paths_norm, job.paths(), job.horizon, &s.norm, &job.quantiles)?;
    let trace = s.trace.map(|mut t| {
        t.s1 = s.gen_s1.clone();
        t.s2 = s.gen_s2.clone();
        t.paths_norm = s.paths_norm.clone();
        t
    });
    Ok(SeriesForecast { forecast, trace, buckets: s.buckets.into_iter().collect() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_reverse_within_the_token() {
        assert_eq!(reverse_bits(0b0000000001, 10), 0b1000000000);
        assert_eq!(reverse_bits(0b1101, 4), 0b1011);
        assert_eq!(reverse_bits(0, 10), 0);
    }
}
