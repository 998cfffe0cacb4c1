//! The Toto 2.0 side of [`crate::engine::Engine`]: which graph sets an engine runs, the planner that packs a
//! call's requests onto them, and the pool of loaded sets.
//!
//! **Planning.** Each request goes to the cheapest shape that holds it on its own ([`driver::fits`]): the
//! fewest context + horizon slots (what a pass's cost scales with). Requests that share that shape are packed in
//! order into chunks of at most [`PACK_ROWS`] rows (a request with more variates runs alone), and each chunk
//! runs on the smallest rows bucket that holds it (padded rows are inert: their group ids are unique). A request
//! that fits no shape fails alone.
//!
//! **Pool.** A set's graphs (pass, or prefill + decode) are loaded on first use, over the engine's shared
//! weights, and kept while they fit the memory budget beside the weights; the least recently used set is
//! evicted to make room, as for Toto 1.0's buckets. Calls run one at a time (the pool's lock).

use std::sync::Mutex;

use exporter::toto2::manifest::Toto2SetEntry;
use exporter::toto2::signature::Toto2GraphKind;
use exporter::toto2::{Toto2Config, Toto2Dims};

use crate::admission::admit;
use crate::budget::RequestSize;
use crate::bundle::{EngineBundle, EngineManifest, GraphFile};
use crate::cost::{median, Estimate, GraphRate, MIN_TIMED_RUNS, SLOW_SECONDS, TIMED_RUNS};
use crate::error::{Error, Result};
use crate::family::{Call, EngineLimits, FamilyEngine, Forecast, RunOptions};
use crate::graph::GraphRunner;
use crate::memory::human;
use crate::pool::{LruPool, TakeError};
use crate::request::ContextCut;
use crate::request::ForecastRequest;
use crate::toto2::driver::{
    self, fits_counts, ChunkConfig, Toto2Forecast, Toto2Runners, Toto2Timings, Trace,
};
use crate::toto2::rope::RopeTables;

/// One graph set the engine may run.
#[derive(Debug, Clone)]
struct SetSlot {
    profile: String,
    /// The profile's `decode_block` (points).
    decode_block: Option<usize>,
    entry: Toto2SetEntry,
}

#[derive(Default)]
struct Pool {
    /// The loaded sets' runners.
    runners: LruPool<usize, Vec<GraphRunner>>,
    /// Runs per set since load: (chunks, seconds); one fixed-size record per set.
    totals: Vec<(u64, f64)>,
    /// Graph runs per set since load: (pass or prefill runs, decode runs); one fixed-size record per set.
    graph_runs: Vec<(u64, u64)>,
}

/// A chunk of a call: requests (indices into the call) that run together on one set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub set: usize,
    pub members: Vec<usize>,
}

/// Most rows that several requests are packed into. A pass of 16 rows × 16+ patches already keeps the matmuls
/// compute-bound: 64-row chunks give the same series/s within noise (22m, 1,000 series: 94–107 against
/// 100–117 series/s) but four times the activations (22m: +107 MB against +27 MB of ONNX Runtime buffers).
/// A single request with more variates still runs alone on a set with the rows it needs.
pub const PACK_ROWS: usize = 16;

/// What a pass costs and which requests may share it: (context + horizon slots, context slots, horizon slots,
/// decode block).
type ShapeKey = (usize, usize, usize, Option<usize>);

/// What the planner needs of one request: its counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub variates: usize,
    pub context: usize,
    pub horizon: usize,
}

impl Need {
    pub fn of(req: &ForecastRequest) -> Self {
        Need { variates: req.variates(), context: req.context_len(), horizon: req.horizon }
    }

    fn fits(&self, d: &Toto2Dims) -> bool {
        fits_counts(d, self.variates, self.context, self.horizon)
    }
}

/// Packs requests onto shapes (see the module docs). Returns the chunks, and for each request that fits no
/// shape its index.
pub fn plan(sets: &[Toto2Dims], reqs: &[&ForecastRequest]) -> (Vec<Chunk>, Vec<usize>) {
    let needs: Vec<Need> = reqs.iter().map(|r| Need::of(r)).collect();
    plan_counts(sets, &needs)
}

/// [`plan`] on the requests' counts.
pub fn plan_counts(sets: &[Toto2Dims], reqs: &[Need]) -> (Vec<Chunk>, Vec<usize>) {
    let key = |d: &Toto2Dims| -> ShapeKey {
        (d.context_slots + d.horizon_slots, d.context_slots, d.horizon_slots, d.block)
    };
    let mut unfit = Vec::new();
    // (shape key, requests in order)
    let mut groups: Vec<(ShapeKey, Vec<usize>)> = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        match sets.iter().filter(|d| r.fits(d)).map(key).min() {
            None => unfit.push(i),
            Some(k) => match groups.iter_mut().find(|(g, _)| *g == k) {
                Some((_, members)) => members.push(i),
                None => groups.push((k, vec![i])),
            },
        }
    }
    groups.sort_by_key(|(k, _)| *k);
    let mut chunks = Vec::new();
    for (k, members) in groups {
        let shape: Vec<usize> = (0..sets.len()).filter(|&j| key(&sets[j]) == k).collect();
        let max_rows = shape.iter().map(|&j| sets[j].rows).max().unwrap_or(0);
        let pack_rows = PACK_ROWS.min(max_rows);
        let mut current: Vec<usize> = Vec::new();
        let mut rows = 0;
        let mut close = |current: &mut Vec<usize>, rows: usize| {
            if current.is_empty() {
                return;
            }
            let set = shape
                .iter()
                .copied()
                .filter(|&j| sets[j].rows >= rows)
                .min_by_key(|&j| sets[j].rows)
                .expect("every member fits a set of its shape");
            chunks.push(Chunk { set, members: std::mem::take(current) });
        };
        for i in members {
            let v = reqs[i].variates;
            if rows + v > pack_rows {
                close(&mut current, rows);
                rows = 0;
            }
            current.push(i);
            rows += v;
        }
        close(&mut current, rows);
    }
    (chunks, unfit)
}

/// The Toto 2.0 engine state (see the module docs).
pub struct Toto2Engine {
    cfg: Toto2Config,
    rope: RopeTables,
    sets: Vec<SetSlot>,
    weights_bytes: u64,
    budget: u64,
    pool: Mutex<Pool>,
}

impl std::fmt::Debug for Toto2Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toto2Engine").field("sets", &self.sets.len()).finish_non_exhaustive()
    }
}

impl Toto2Engine {
    /// The sets of `manifest` whose buffers fit `budget` beside the weights (identical shapes of several
    /// profiles are one set: the first is kept).
    pub fn new(manifest: &EngineManifest, cfg: &Toto2Config, budget: u64) -> Result<Self> {
        let weights_bytes = manifest.resident_weight_bytes();
        let mut sets: Vec<SetSlot> = Vec::new();
        for p in &manifest.family.toto2_profiles {
            for s in &p.sets {
                if weights_bytes + s.memory_bytes <= budget && !sets.iter().any(|k| k.entry.dims == s.dims) {
                    sets.push(SetSlot {
                        profile: p.profile.name.clone(),
                        decode_block: p.profile.decode_block,
                        entry: s.clone(),
                    });
                }
            }
        }
        if sets.is_empty() {
            return Err(Error::Engine {
                path: ".".into(),
                message: format!(
                    "no graph set fits the memory budget ({}) beside the weights ({}); give a larger --memory-budget",
                    human(budget),
                    human(weights_bytes)
                ),
            });
        }
        let totals = vec![(0, 0.0); sets.len()];
        let graph_runs = vec![(0, 0); sets.len()];
        Ok(Toto2Engine {
            rope: RopeTables::new(cfg.rotary_dim(), cfg.use_xpos),
            cfg: cfg.clone(),
            sets,
            weights_bytes,
            budget,
            pool: Mutex::new(Pool { totals, graph_runs, ..Pool::default() }),
        })
    }

    /// The limits of a Toto 2.0 engine: its profiles' bounds, no sample paths.
    pub fn limits(manifest: &EngineManifest) -> EngineLimits {
        let max = |f: fn(&exporter::profile::Profile) -> usize| {
            manifest.family.toto2_profiles.iter().map(|p| f(&p.profile)).max().unwrap_or(0)
        };
        EngineLimits {
            max_variates: max(|p| p.variates),
            max_context: max(|p| p.context),
            max_horizon: max(|p| p.horizon),
            max_samples: 0,
        }
    }

    pub fn patch(&self) -> usize {
        self.cfg.patch_size
    }

    /// Names of the sets the engine runs (`default.n4.s64`).
    pub fn set_names(&self) -> Vec<String> {
        self.sets.iter().map(|s| s.entry.name.clone()).collect()
    }

    /// Per set: (name, chunks run, seconds) since the engine was loaded.
    pub fn set_stats(&self) -> Vec<(String, u64, f64)> {
        let pool = self.lock();
        self.sets.iter().zip(&pool.totals).map(|(s, &(n, t))| (s.entry.name.clone(), n, t)).collect()
    }

    /// Graph runs since the engine was loaded, by graph as [`Self::estimate`] names them (graphs that ran).
    pub fn graph_runs(&self) -> Vec<(String, u64)> {
        let pool = self.lock();
        let mut out = Vec::new();
        for (set, &(first, decode)) in pool.graph_runs.iter().enumerate() {
            let kinds = set_runs(&self.sets[set].entry.dims, 0);
            for (kind, runs) in [(kinds[0].0, first), (Toto2GraphKind::Decode, decode)] {
                if runs > 0 {
                    out.push((self.graph_name(set, kind), runs));
                }
            }
        }
        out
    }

    /// Whether some set holds `req` on its own; the error says why not.
    pub fn check_fits(&self, req: &ForecastRequest, at: &str) -> Result<()> {
        if self.sets.iter().any(|s| Need::of(req).fits(&s.entry.dims)) {
            return Ok(());
        }
        Err(self.unfit(req, at))
    }

    fn unfit(&self, req: &ForecastRequest, at: &str) -> Error {
        Error::Unservable {
            at: at.to_string(),
            why: format!(
                "no graph set of this engine holds {} variates, {} context points and horizon {} within its memory \
                 budget (sets: {})",
                req.variates(),
                req.context_len(),
                req.horizon,
                self.set_names().join(", ")
            ),
        }
    }

    /// Loads every set (within the budget, least recently used evicted as needed); returns how many.
    pub fn warm_up(&self, bundle: &EngineBundle) -> Result<usize> {
        let mut pool = self.lock();
        for i in 0..self.sets.len() {
            let runners = self.take(&mut pool, bundle, i)?;
            self.put(&mut pool, i, runners);
        }
        Ok(self.sets.len())
    }

    /// Forecasts admitted requests (see the module docs): one result per request, in order. `decode_block`
    /// `Some(b)` runs them only on the sets of profiles with that `decode_block` (golden cases made with one).
    pub fn forecast(
        &self,
        bundle: &EngineBundle,
        engine_label: &str,
        reqs: &[ForecastRequest],
        trace: Trace,
        decode_block: Option<Option<usize>>,
        cancel: Option<crate::family::Cancel<'_>>,
    ) -> Vec<Result<Toto2Forecast>> {
        let refs: Vec<&ForecastRequest> = reqs.iter().collect();
        let usable: Vec<usize> = (0..self.sets.len())
            .filter(|&i| decode_block.is_none_or(|b| self.sets[i].decode_block == b))
            .collect();
        let dims: Vec<Toto2Dims> = usable.iter().map(|&i| self.sets[i].entry.dims).collect();
        let (mut chunks, unfit) = plan(&dims, &refs);
        for c in &mut chunks {
            c.set = usable[c.set];
        }
        let mut out: Vec<Option<Result<Toto2Forecast>>> = (0..reqs.len()).map(|_| None).collect();
        for i in unfit {
            out[i] = Some(Err(self.unfit(&reqs[i], &format!("request {}", i + 1))));
        }
        let mut pool = self.lock();
        for chunk in chunks {
            let members: Vec<&ForecastRequest> = chunk.members.iter().map(|&i| refs[i]).collect();
            let mode = RunMode { trace, cancel };
            let result = crate::family::check_cancel(cancel, "graph set")
                .and_then(|_| self.run_chunk(&mut pool, bundle, engine_label, chunk.set, &members, mode));
            match result {
                Ok(forecasts) => {
                    for (&i, f) in chunk.members.iter().zip(forecasts) {
                        out[i] = Some(Ok(f));
                    }
                }
                Err(e) if e.is_cancelled() => {
                    for &i in &chunk.members {
                        out[i] = Some(Err(Error::Cancelled { at: format!("request {}", i + 1) }));
                    }
                }
                Err(e) => {
                    let message = e.to_string();
                    for &i in &chunk.members {
                        out[i] = Some(Err(Error::Session {
                            graph: self.sets[chunk.set].entry.name.clone(),
                            message: message.clone(),
                        }));
                    }
                }
            }
        }
        out.into_iter().map(|r| r.expect("every request answered")).collect()
    }

    /// A set's graph as rates and estimates name it: `<set>.<kind>` (`default.n4.s64.decode`; one TensorRT file
    /// may serve several sets, so the file does not name it).
    fn graph_name(&self, set: usize, kind: Toto2GraphKind) -> String {
        format!("{}.{}", self.sets[set].entry.name, kind.as_str())
    }

    /// Times every set on a placeholder request that fills its context and horizon: one untimed chunk (the
    /// warm-up only loads the sets), then [`TIMED_RUNS`] timed (or [`MIN_TIMED_RUNS`] when those took
    /// [`SLOW_SECONDS`], as [`crate::cost::time_runs`]); per graph, the median of its runs (each decode block is
    /// one run).
    pub fn measure(&self, bundle: &EngineBundle, engine_label: &str) -> Result<Vec<GraphRate>> {
        let mut pool = self.lock();
        let mut rates = Vec::new();
        for set in 0..self.sets.len() {
            let mut runners = self.take(&mut pool, bundle, set)?;
            let timed = self.time_set(&mut runners, set, engine_label);
            self.put(&mut pool, set, runners);
            rates.extend(timed?);
        }
        Ok(rates)
    }

    fn time_set(
        &self,
        runners: &mut [GraphRunner],
        set: usize,
        engine_label: &str,
    ) -> Result<Vec<GraphRate>> {
        let slot = &self.sets[set];
        let d = &slot.entry.dims;
        let req = placeholder(d);
        let cfg = ChunkConfig {
            dims: d,
            rope: &self.rope,
            profile: &slot.profile,
            engine: engine_label,
            cap_k: None,
            trace: Trace::Response,
            cancel: None,
        };
        run_set(runners, &slot.entry.name, &cfg, &[&req], &mut Toto2Timings::default())?;
        let (mut first, mut decode) = (Vec::new(), Vec::new());
        let (mut chunks, mut total) = (0, 0.0);
        while chunks < TIMED_RUNS && (chunks < MIN_TIMED_RUNS || total < SLOW_SECONDS) {
            let mut t = Toto2Timings::default();
            let t0 = std::time::Instant::now();
            run_set(runners, &slot.entry.name, &cfg, &[&req], &mut t)?;
            total += t0.elapsed().as_secs_f64();
            chunks += 1;
            first.extend(t.first.iter().map(|d| d.as_secs_f64()));
            decode.extend(t.decode.iter().map(|d| d.as_secs_f64()));
        }
        let kind = set_runs(d, 0)[0].0;
        let mut rates = vec![GraphRate::new(
            self.graph_name(set, kind),
            kind.as_str(),
            d.rows,
            median(&mut first),
            first.len(),
        )];
        if !decode.is_empty() {
            let kind = Toto2GraphKind::Decode;
            let (name, n) = (self.graph_name(set, kind), decode.len());
            rates.push(GraphRate::new(name, kind.as_str(), d.rows, median(&mut decode), n));
        }
        Ok(rates)
    }

    /// The chunks [`plan_counts`] makes of the series, and each chunk's graph runs ([`set_runs`]).
    pub fn estimate(&self, sizes: &[RequestSize]) -> Option<Estimate> {
        let needs: Vec<Need> = sizes
            .iter()
            .flat_map(|s| {
                std::iter::repeat_n(
                    Need { variates: s.variates, context: s.context, horizon: s.horizon },
                    s.series,
                )
            })
            .collect();
        let dims: Vec<Toto2Dims> = self.sets.iter().map(|s| s.entry.dims).collect();
        let (chunks, unfit) = plan_counts(&dims, &needs);
        if !unfit.is_empty() {
            return None;
        }
        let mut e = Estimate::default();
        for c in &chunks {
            let d = &dims[c.set];
            let patches = c.members.iter().map(|&i| needs[i].horizon.div_ceil(d.patch)).max().unwrap_or(0);
            for (kind, runs) in set_runs(d, patches) {
                e.add(&self.graph_name(c.set, kind), d.rows, runs);
            }
        }
        Some(e)
    }

    fn run_chunk(
        &self,
        pool: &mut Pool,
        bundle: &EngineBundle,
        engine_label: &str,
        set: usize,
        members: &[&ForecastRequest],
        RunMode { trace, cancel }: RunMode<'_>,
    ) -> Result<Vec<Toto2Forecast>> {
        let slot = &self.sets[set];
        let mut runners = self.take(pool, bundle, set)?;
        let cfg = ChunkConfig {
            dims: &slot.entry.dims,
            rope: &self.rope,
            profile: &slot.profile,
            engine: engine_label,
            cap_k: None,
            trace,
            cancel,
        };
        let mut timings = Toto2Timings::default();
        let result = run_set(&mut runners, &slot.entry.name, &cfg, members, &mut timings);
        self.put(pool, set, runners);
        let seconds: f64 = timings.first.iter().chain(&timings.decode).map(|d| d.as_secs_f64()).sum();
        pool.totals[set].0 += 1;
        pool.totals[set].1 += seconds;
        pool.graph_runs[set].0 += timings.first.len() as u64;
        pool.graph_runs[set].1 += timings.decode.len() as u64;
        let names: Vec<String> = slot
            .entry
            .graphs
            .iter()
            .map(|g| g.file.strip_suffix(".onnx").unwrap_or(&g.file).to_string())
            .collect();
        result.map(|mut v| {
            for f in &mut v {
                f.response.buckets = names.clone();
            }
            v
        })
    }

    /// The set's runners, loaded if needed (evicting the least recently used sets to stay within the budget).
    fn take(&self, pool: &mut Pool, bundle: &EngineBundle, set: usize) -> Result<Vec<GraphRunner>> {
        let need = self.sets[set].entry.memory_bytes;
        let load = || {
            self.sets[set]
                .entry
                .graphs
                .iter()
                .map(|g| {
                    // No memory pattern: a Toto 2.0 pass allocates a few large activations, and ONNX Runtime's
                    // second run allocates the pattern's one block beside the first run's separate buffers still
                    // held in the arena (22m, 64 rows: 261 MB after one run, 375 MB after two; without the
                    // pattern 261 and 286 MB).
                    bundle.load_graph(&GraphFile {
                        file: &g.file,
                        label: &g.file,
                        inputs: &g.inputs,
                        outputs: &g.outputs,
                        // a shared TensorRT engine: one session for every set that names it
                        shared: shared_engine(bundle, &g.file),
                        gpu_graph_id: None,
                        memory_pattern: false,
                        cpu_arena: true,
                    })
                })
                .collect::<Result<Vec<_>>>()
        };
        pool.runners.take(set, need, self.weights_bytes, self.budget, &[], load).map_err(|e| match e {
            TakeError::InUse => Error::Session {
                graph: self.sets[set].entry.name.clone(),
                message: "already in use by this call".into(),
            },
            TakeError::OverBudget { used } => Error::Session {
                graph: self.sets[set].entry.name.clone(),
                message: format!(
                    "needs {} beside the weights ({}) and the sets in use ({}): over the memory budget ({}); give a \
                     larger --memory-budget",
                    human(need),
                    human(self.weights_bytes),
                    human(used),
                    human(self.budget)
                ),
            },
            TakeError::Load(e) => e,
        })
    }

    fn put(&self, pool: &mut Pool, set: usize, runners: Vec<GraphRunner>) {
        pool.runners.put(set, runners);
    }

    /// The pool for one call (or a report): calls hold this lock throughout, so runners still out of the pool
    /// now were lost to a panic and are evicted (see [`crate::pool`]).
    fn lock(&self) -> std::sync::MutexGuard<'_, Pool> {
        let mut pool = self.pool.lock().unwrap_or_else(|p| {
            self.pool.clear_poison();
            p.into_inner()
        });
        pool.runners.evict_lost();
        pool
    }
}

/// Runs a chunk on a set's graphs: its pass, or its prefill and decode graphs.
fn run_set(
    runners: &mut [GraphRunner],
    set_name: &str,
    cfg: &ChunkConfig,
    members: &[&ForecastRequest],
    timings: &mut Toto2Timings,
) -> Result<Vec<Toto2Forecast>> {
    match runners {
        [pass] => driver::forecast_chunk(Toto2Runners::Pass(pass), cfg, members, timings),
        [prefill, decode] => {
            driver::forecast_chunk(Toto2Runners::Block { prefill, decode }, cfg, members, timings)
        }
        other => Err(Error::Session {
            graph: set_name.to_string(),
            message: format!("a graph set has 1 or 2 graphs, this one {}", other.len()),
        }),
    }
}

/// The graph runs of one chunk on a set of `dims` whose longest horizon is `patches` patches: one pass, or one
/// prefill (the first block) and a decode run per further block.
fn set_runs(dims: &Toto2Dims, patches: usize) -> [(Toto2GraphKind, u64); 2] {
    match dims.block {
        None => [(Toto2GraphKind::Pass, 1), (Toto2GraphKind::Decode, 0)],
        Some(b) => {
            let b = b.max(1);
            [
                (Toto2GraphKind::Prefill, 1),
                (Toto2GraphKind::Decode, patches.saturating_sub(b).div_ceil(b) as u64),
            ]
        }
    }
}

/// A request that fills a set's context and horizon (one variate: the other rows are padding, which costs the
/// same in a static shape), with finite, varying values.
fn placeholder(d: &Toto2Dims) -> ForecastRequest {
    ForecastRequest {
        id: None,
        target: vec![(0..d.context_slots * d.patch).map(|i| Some((i % 13) as f32)).collect()],
        id_mask: vec![0],
        horizon: d.horizon_slots * d.patch,
        samples: 0,
        quantiles: Vec::new(),
        ..ForecastRequest::default()
    }
}

/// How a call runs its chunks: what each forecast keeps, and when to stop.
#[derive(Clone, Copy)]
struct RunMode<'a> {
    trace: Trace,
    cancel: Option<crate::family::Cancel<'a>>,
}

/// Admits every request (see [`FamilyEngine::admit`]) and runs the admitted ones on the sets.
pub(crate) fn admit_and_run(
    t2: &Toto2Engine,
    call: Call<'_>,
    reqs: Vec<ForecastRequest>,
    trace: Trace,
    decode_block: Option<Option<usize>>,
    cancel: Option<crate::family::Cancel<'_>>,
) -> Vec<Result<Toto2Forecast>> {
    let mut out: Vec<Option<Result<Toto2Forecast>>> = (0..reqs.len()).map(|_| None).collect();
    let (mut admitted, mut index) = (Vec::new(), Vec::new());
    for (i, mut req) in reqs.into_iter().enumerate() {
        match t2.admit(&call.info.limits, &mut req, &format!("request {}", i + 1)) {
            Ok(_) => {
                admitted.push(req);
                index.push(i);
            }
            Err(e) => out[i] = Some(Err(e)),
        }
    }
    let results = t2.forecast(call.bundle, &call.info.label, &admitted, trace, decode_block, cancel);
    for (i, r) in index.into_iter().zip(results) {
        out[i] = Some(r);
    }
    out.into_iter().map(|r| r.expect("every request answered")).collect()
}

impl FamilyEngine for Toto2Engine {
    fn warm_up(&self, call: Call<'_>) -> Result<usize> {
        Toto2Engine::warm_up(self, call.bundle)
    }

    /// What 2.0 refuses first (sampling fields, levels outside [0.1, 0.9], a context shorter than one patch),
    /// then the shared limits and context policy, then whether a set holds it.
    fn admit(
        &self,
        limits: &EngineLimits,
        req: &mut ForecastRequest,
        at: &str,
    ) -> Result<Option<ContextCut>> {
        crate::toto2::check_request(req, self.patch(), at)?;
        admit(limits, req, at)?;
        self.check_fits(req, at)?;
        Ok(req.context_cut)
    }

    fn forecast(
        &self,
        call: Call<'_>,
        reqs: Vec<ForecastRequest>,
        opts: RunOptions,
    ) -> Vec<Result<Forecast>> {
        let trace = if opts.record_steps { Trace::Blocks } else { Trace::Response };
        admit_and_run(self, call, reqs, trace, None, opts.cancel)
            .into_iter()
            .map(|r| r.map(|f| Forecast { response: f.response, steps: Vec::new() }))
            .collect()
    }

    fn measure(&self, call: Call<'_>) -> Result<Vec<GraphRate>> {
        Toto2Engine::measure(self, call.bundle, &call.info.label)
    }

    fn estimate(&self, sizes: &[RequestSize]) -> Option<Estimate> {
        Toto2Engine::estimate(self, sizes)
    }

    fn graph_sets(&self) -> Vec<String> {
        self.set_names()
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// Whether `file` is a TensorRT engine built from a profile's shape-polymorphic graph (its sets bind their own
/// I/O on one session of it, as Toto 1.0's shared buckets do).
fn shared_engine(bundle: &EngineBundle, file: &str) -> bool {
    bundle.manifest().family.toto2_tensorrt.iter().any(|t| t.shared && t.file == file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use exporter::toto2::Toto2Config;

    fn cfg() -> Toto2Config {
        let json = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/toto2/4m/config.json"),
        )
        .unwrap();
        Toto2Config::from_json(&json).unwrap()
    }

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
    fn requests_go_to_the_cheapest_shape_and_pack_onto_the_smallest_rows() {
        let c = cfg();
        let mut sets = Vec::new();
        for rows in [1, 4, 16] {
            for ctx in [512, 1024, 2048] {
                sets.push(Toto2Dims::new(&c, rows, ctx, 336, None).unwrap());
            }
        }
        let rs = [req(512, 1, 336), req(2000, 2, 10), req(300, 2, 96), req(4096, 1, 10), req(512, 20, 10)];
        let refs: Vec<&ForecastRequest> = rs.iter().collect();
        let (chunks, unfit) = plan(&sets, &refs);
        assert_eq!(unfit, [3, 4], "context 4096 > 2048; 20 variates > 16 rows");
        // requests 0 and 2 share the 512-point shape: 3 rows → the 4-row bucket
        assert_eq!(chunks[0], Chunk { set: 3, members: vec![0, 2] });
        assert_eq!((sets[3].rows, sets[3].context_slots), (4, 16));
        // request 1: 2000 points = 62 whole patches → the 2048-point shape, 4 rows
        assert_eq!(chunks[1], Chunk { set: 5, members: vec![1] });
        assert_eq!(chunks.len(), 2);
    }

    #[test]
    fn a_shape_full_of_rows_splits_into_several_chunks() {
        let c = cfg();
        let sets =
            [Toto2Dims::new(&c, 1, 512, 64, None).unwrap(), Toto2Dims::new(&c, 4, 512, 64, None).unwrap()];
        let rs: Vec<ForecastRequest> = (0..5).map(|_| req(512, 2, 64)).collect();
        let refs: Vec<&ForecastRequest> = rs.iter().collect();
        let (chunks, unfit) = plan(&sets, &refs);
        assert!(unfit.is_empty());
        let members: Vec<Vec<usize>> = chunks.iter().map(|c| c.members.clone()).collect();
        assert_eq!(members, [vec![0, 1], vec![2, 3], vec![4]]);
        assert_eq!(chunks.iter().map(|c| c.set).collect::<Vec<_>>(), [1, 1, 1]);
        // a lone one-variate request runs on the 1-row set
        let one = req(512, 1, 64);
        assert_eq!(plan(&sets, &[&one]).0, [Chunk { set: 0, members: vec![0] }]);
    }

    #[test]
    fn packing_stops_at_pack_rows_and_a_wide_request_runs_alone() {
        let c = cfg();
        let sets: Vec<Toto2Dims> =
            [1, 4, 16, 64].iter().map(|&r| Toto2Dims::new(&c, r, 512, 64, None).unwrap()).collect();
        let mut rs: Vec<ForecastRequest> = (0..10).map(|_| req(512, 2, 64)).collect();
        rs.insert(3, req(512, 40, 64));
        let refs: Vec<&ForecastRequest> = rs.iter().collect();
        let (chunks, unfit) = plan(&sets, &refs);
        assert!(unfit.is_empty());
        let got: Vec<(usize, Vec<usize>)> =
            chunks.iter().map(|c| (sets[c.set].rows, c.members.clone())).collect();
        assert_eq!(
            got,
            [
                (16, vec![0, 1, 2]),              // closed by the wide request
                (64, vec![3]),                    // 40 variates: alone on the 64-row set
                (16, vec![4, 5, 6, 7, 8, 9, 10]), // 7 × 2 = 14 rows
            ]
        );
        assert_eq!(PACK_ROWS, 16, "the chunks above assume it");
    }
}
