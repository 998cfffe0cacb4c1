//! The Kronos side of [`crate::engine::Engine`]: the graphs an engine runs ([`Ladder`]), the pool of loaded
//! graphs within the memory budget, admission (a request becomes a [`KronosJob`], checked against the engine's
//! limits and graphs), and the call ([`crate::kronos::driver`]). [`KronosEngine::forecast_jobs`] is the call with
//! the test hooks ([`Hooks`]), reached through [`FamilyEngine::as_any`].
//!
//! A Kronos engine has one window T (the caches' slots): build-engine refuses profiles of several windows.

use std::any::Any;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;

use exporter::bucket::Bucket;
use exporter::kronos::config::KronosConfig;
use exporter::kronos::manifest::KronosGraphFile;
use exporter::kronos::signature::{self as sig, ModelDims};
use exporter::registry::Family;
use exporter::signature::{DType, GraphKind};

use crate::budget::RequestSize;
use crate::bundle::{EngineBundle, EngineManifest, GraphFile};
use crate::cost::{time_runs, Estimate, GraphRate};
use crate::error::{Error, Result};
use crate::family::{
    BucketStats, Call, EngineLimits, FamilyEngine, Forecast, RunLedger, RunOptions, RunRecord,
};
use crate::graph::{state_input_name, GraphRunner};
use crate::kronos::build::keep_within;
use crate::kronos::columns::{Column, ColumnValues, COLUMNS};
use crate::kronos::driver::{run_call, CallConfig, Graphs, SeriesForecast};
use crate::kronos::hooks::Hooks;
use crate::kronos::job::{JobInput, JobLimits, KronosJob, DEFAULT_MAX_CONTEXT};
use crate::kronos::plan::{KronosPins, Ladder, SeriesCounts};
use crate::kronos::warm;
use crate::memory::human;
use crate::pool::{LruPool, TakeError};
use crate::request::{
    ContextCut, ForecastRequest, ForecastResponse, Limits, Overrides, QuantileForecast, RequestFields,
    RequestShape,
};

/// One graph the engine may run.
#[derive(Debug, Clone)]
struct Slot {
    graph: KronosGraphFile,
    profile: String,
}

/// What calls share, behind the engine's lock.
#[derive(Default)]
struct Exec {
    pool: LruPool<Bucket, GraphRunner>,
    runs: RunLedger,
}

/// A loaded Kronos engine (see the module docs).
pub struct KronosEngine {
    dims: ModelDims,
    window: usize,
    slots: HashMap<Bucket, Slot>,
    buckets: Vec<Bucket>,
    limits: JobLimits,
    weights_bytes: u64,
    budget: u64,
    exec: Mutex<Exec>,
}

impl std::fmt::Debug for KronosEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KronosEngine")
            .field("window", &self.window)
            .field("buckets", &self.buckets.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
impl KronosEngine {
    /// Test hook: `f` on the loaded graph of `bucket` as the last call left it (`None`: not loaded).
    pub(crate) fn inspect_loaded<T>(&self, bucket: Bucket, f: impl FnOnce(&GraphRunner) -> T) -> Option<T> {
        let mut exec = self.lock();
        if !exec.pool.is_loaded(bucket) {
            return None;
        }
        let runner = exec.pool.take(bucket, 0, 0, u64::MAX, &[], || Err::<GraphRunner, ()>(())).ok()?;
        let out = f(&runner);
        exec.pool.put(bucket, runner);
        Some(out)
    }
}

impl KronosEngine {
    /// The engine of `manifest` (model `cfg`) within `budget` bytes, and its limits.
    pub fn load(
        manifest: &EngineManifest,
        cfg: &KronosConfig,
        dir: &Path,
        budget: u64,
    ) -> Result<(EngineLimits, Self)> {
        let refuse = |message: String| Error::Engine { path: dir.to_path_buf(), message };
        let profiles = &manifest.family.kronos_profiles;
        let window =
            profiles.iter().map(|p| p.window).max().ok_or_else(|| refuse("no Kronos profile".into()))?;
        if let Some(p) = profiles.iter().find(|p| p.window != window) {
            return Err(refuse(format!(
                "profile {:?} has window {} but another has {window}: a Kronos engine runs one window; build one \
                 engine per window (`totoc build-engine --profile NAME`)",
                p.profile.name, p.window
            )));
        }
        let weights_bytes = manifest.resident_weight_bytes();
        let mut slots: HashMap<Bucket, Slot> = HashMap::new();
        for p in profiles {
            let (kept, _) = keep_within(p, weights_bytes, budget);
            super::build::check_complete(&kept).map_err(refuse)?;
            for g in kept.graphs {
                slots.entry(g.bucket).or_insert_with(|| Slot { graph: g, profile: p.profile.name.clone() });
            }
        }
        let mut buckets: Vec<Bucket> = slots.keys().copied().collect();
        buckets.sort();
        let max = |f: fn(&exporter::profile::Profile) -> usize| {
            profiles.iter().map(|p| f(&p.profile)).max().unwrap_or(0)
        };
        let context =
            buckets.iter().filter(|b| b.kind == GraphKind::Encode).map(|b| b.slots).max().unwrap_or(0);
        let limits = JobLimits {
            window,
            context,
            horizon: max(|p| p.horizon).min(window),
            samples: max(|p| p.samples),
        };
        let engine = KronosEngine {
            dims: ModelDims::of(cfg),
            window,
            slots,
            buckets,
            limits,
            weights_bytes,
            budget,
            exec: Mutex::new(Exec::default()),
        };
        let engine_limits = EngineLimits {
            // a series' columns are not variates: a request's `target` holds up to six of them
            max_variates: COLUMNS.len(),
            max_context: limits.context,
            max_horizon: limits.horizon,
            max_samples: limits.samples,
        };
        Ok((engine_limits, engine))
    }

    /// The bounds jobs are checked against.
    pub fn job_limits(&self) -> JobLimits {
        self.limits
    }

    /// The model's sizes the graphs take.
    pub fn dims(&self) -> ModelDims {
        self.dims
    }

    /// The ladder of this engine's graphs, with `pins`; a run of a once-per-call graph holds at most one window
    /// of positions (the memory goal: see [`Ladder::with_run_positions`]).
    pub fn ladder(&self, pins: KronosPins) -> Ladder {
        Ladder::new(self.buckets.clone(), pins).with_run_positions(self.window)
    }

    /// Whether this engine's graphs hold `job` (`Err`: what it needs).
    pub fn check_fits(&self, job: &KronosJob, at: &str) -> Result<()> {
        let ladder = self.ladder(KronosPins::default());
        let (n, h, m) = (job.rows(), job.horizon, job.max_context);
        let mut needs = vec![
            (GraphKind::Encode, n),
            (GraphKind::Prefill, n.min(m)),
            (GraphKind::Detokenize, (n + h).min(m)),
        ];
        if n + h - 1 > m {
            needs.push((GraphKind::Recompute, m));
        }
        for (kind, slots) in needs {
            if !ladder.holds(kind, slots) {
                return Err(Error::Unservable {
                    at: at.to_string(),
                    why: format!(
                        "no {} graph within the memory budget holds {slots} positions",
                        kind.as_str()
                    ),
                });
            }
        }
        if !ladder.has_lanes() {
            return Err(Error::Unservable {
                at: at.to_string(),
                why: "no decode and refine graphs of equal rows fit the memory budget".into(),
            });
        }
        Ok(())
    }

    /// Forecasts `jobs` with `hooks` (the equivalence tests' and `totoc verify`'s call): one result per job.
    pub fn forecast_jobs(
        &self,
        call: Call<'_>,
        jobs: &[&KronosJob],
        hooks: Hooks<'_>,
        cancel: Option<crate::family::Cancel<'_>>,
    ) -> Vec<Result<SeriesForecast>> {
        let ladder = self.ladder(hooks.pins);
        let cfg = CallConfig { ladder: &ladder, dims: self.dims, window: self.window, cancel, hooks };
        let mut exec = self.lock();
        exec.runs.start_call();
        let mut pool = Pool { engine: self, call, exec: &mut exec };
        run_call(&mut pool, &cfg, jobs)
    }

    /// The job of request `req`: the adapter from the shared request (its Kronos fields parsed by the request
    /// seam: `columns` resolved to upstream's names, `target_f64` kept when a derived column is absent, wall
    /// clocks, sampling controls, `params`) to the engine's input. `KronosJob::new` checks what only Kronos
    /// knows (the prices present, values finite, stamps in order, the window, the parameters' ranges).
    pub fn job_of(&self, req: &ForecastRequest, at: &str) -> Result<KronosJob> {
        let input = JobInput {
            id: req.id.clone(),
            columns: request_columns(req, at)?,
            timestamps: (!req.timestamps.is_empty()).then_some(&req.timestamps[..]),
            future_timestamps: (!req.future_timestamps.is_empty()).then_some(&req.future_timestamps[..]),
            horizon: req.horizon,
            samples: req.samples,
            seed: req.seed,
            quantiles: Some(req.quantiles.clone()),
            temperature: req.sampling.temperature,
            top_k: req.sampling.top_k.map(|k| i64::try_from(k).unwrap_or(i64::MAX)),
            top_p: req.sampling.top_p,
            max_context: whole_param(req, "max_context", at)?,
            clip: req.params.get("clip").copied(),
            strict_context: req.strict_context,
        };
        let job = KronosJob::new(at, input, &self.limits)?;
        self.check_fits(&job, at)?;
        Ok(job)
    }

    /// The job of a request's fields as written (a golden case's): parsed and checked as every request is
    /// (`RequestFields::validate` with this engine's limits and the Kronos request shape), then [`job_of`](Self::job_of).
    pub fn job_of_fields(&self, fields: RequestFields, at: &str) -> Result<KronosJob> {
        let limits = Limits {
            max_samples: self.limits.samples,
            quantiles_without_samples: false,
            shape: RequestShape::of(Family::Kronos.capabilities()),
            max_horizon: self.limits.horizon,
        };
        self.job_of(&fields.validate(at, &Overrides::default(), &limits)?, at)
    }

    /// The graph runs of a call of `series`, by graph name and rows (see [`Ladder::call_runs`]).
    pub fn estimate_counts(&self, series: &[SeriesCounts]) -> Option<Estimate> {
        let runs = self.ladder(KronosPins::default()).call_runs(series)?;
        let mut e = Estimate::default();
        for (bucket, n) in runs {
            e.add(&self.label(bucket), bucket.rows, n);
        }
        Some(e)
    }

    fn label(&self, bucket: Bucket) -> String {
        match self.slots.get(&bucket) {
            Some(s) => bucket.stem(&s.profile),
            None => format!("{bucket:?}"),
        }
    }

    fn profile_name(&self) -> String {
        let mut names: Vec<&str> = self.slots.values().map(|s| s.profile.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.join("+")
    }

    /// The engine's state for one call (or a report): calls hold this lock throughout, so runners still out of
    /// the pool now were lost to a panic and are evicted (see [`crate::pool`]).
    fn lock(&self) -> std::sync::MutexGuard<'_, Exec> {
        let mut exec = self.exec.lock().unwrap_or_else(|p| {
            self.exec.clear_poison();
            p.into_inner()
        });
        exec.pool.evict_lost();
        exec
    }
}

/// A request's `target` rows as named columns: `columns` as the request seam resolved them (or upstream's order
/// when a request built elsewhere names none), each row's values in f64 as parsed when the seam kept them (a
/// derived amount is computed from those, as pandas does), else as f32.
fn request_columns<'r>(req: &'r ForecastRequest, at: &str) -> Result<Vec<Column<'r>>> {
    let names = column_names(req);
    if req.columns.is_empty() && req.target.len() > COLUMNS.len() {
        return Err(Error::NotSupported {
            at: at.to_string(),
            message: format!(
                "`target` has {} rows but a Kronos series has at most {} columns ({})",
                req.target.len(),
                COLUMNS.len(),
                COLUMNS.join(", ")
            ),
        });
    }
    if names.len() != req.target.len() {
        return Err(Error::NotSupported {
            at: at.to_string(),
            message: format!(
                "`columns` names {} columns but `target` has {} rows; give one name per row of `target`",
                names.len(),
                req.target.len()
            ),
        });
    }
    Ok(names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let values = match &req.target_f64 {
                Some(rows) => ColumnValues::F64(&rows[i]),
                None => ColumnValues::NullableF32(&req.target[i]),
            };
            Column { name, values }
        })
        .collect())
}

/// Parameter `name` of `req` as a whole number (`None`: not given); a fraction, a negative or a non-finite value
/// is refused naming it.
fn whole_param(req: &ForecastRequest, name: &str, at: &str) -> Result<Option<u64>> {
    match req.params.get(name) {
        None => Ok(None),
        Some(&v) if v.is_finite() && v >= 0.0 && v.fract() == 0.0 && v < u64::MAX as f64 => {
            Ok(Some(v as u64))
        }
        Some(&v) => Err(Error::NotSupported {
            at: at.to_string(),
            message: format!("`params.{name}` is {v}; it must be a whole number"),
        }),
    }
}

/// The response of a job's forecast, with the request's `columns` as its variates, in the request's order (the
/// request seam's contract; a derived column the request left out is not returned): `mean` `[column][H]`,
/// `samples` `[path][column][H]` when it sampled, quantiles `[column][H]` per level.
pub fn response(
    job: &KronosJob,
    f: &SeriesForecast,
    columns: &[&str],
    profile: &str,
    engine: &str,
    buckets: Vec<String>,
) -> ForecastResponse {
    let h = job.horizon;
    let index: Vec<usize> =
        columns.iter().filter_map(|name| COLUMNS.iter().position(|c| c == name)).collect();
    let pick = |rows: &[f32]| -> Vec<Vec<f32>> {
        index.iter().map(|&c| (0..h).map(|t| rows[t * COLUMNS.len() + c]).collect()).collect()
    };
    let per_path = h * COLUMNS.len();
    ForecastResponse {
        id: job.id.clone(),
        mean: Some(pick(&f.forecast.mean)),
        median: None,
        quantiles: job
            .quantiles
            .iter()
            .zip(&f.forecast.quantiles)
            .map(|(&q, v)| QuantileForecast { q, values: pick(v) })
            .collect(),
        samples: (job.samples > 0).then(|| f.forecast.paths.chunks(per_path).map(pick).collect()),
        context_truncated: job.context_cut,
        buckets,
        profile: profile.to_string(),
        engine: engine.to_string(),
        sampler: Some(job.sampler.clone()),
        engine_sha256: None,
    }
}

/// The names of a request's `target` rows: `columns` as resolved, or upstream's order for a request that names
/// none (as [`request_columns`] reads them).
fn column_names(req: &ForecastRequest) -> Vec<&'static str> {
    match req.columns.is_empty() {
        false => req.columns.clone(),
        true => COLUMNS[..req.target.len().min(COLUMNS.len())].to_vec(),
    }
}

/// The engine's graphs as a call sees them (see [`Graphs`]).
struct Pool<'e> {
    engine: &'e KronosEngine,
    call: Call<'e>,
    exec: &'e mut Exec,
}

impl Graphs for Pool<'_> {
    fn take(&mut self, bucket: Bucket) -> Result<GraphRunner> {
        let slot = self.engine.slots.get(&bucket).ok_or_else(|| Error::Session {
            graph: format!("{bucket:?}"),
            message: "not a graph of this engine".into(),
        })?;
        let need = slot.graph.memory_bytes;
        let bundle = self.call.bundle;
        let load = || load_graph(bundle, &slot.graph);
        let taken =
            self.exec.pool.take(bucket, need, self.engine.weights_bytes, self.engine.budget, &[], load);
        taken.map_err(|e| match e {
            TakeError::InUse => Error::Session { graph: self.engine.label(bucket), message: "already in use by this call".into() },
            TakeError::OverBudget { used } => Error::Engine {
                path: self.call.dir.to_path_buf(),
                message: format!(
                    "graph {} needs {} beside the weights ({}) and the graphs in use ({}): over the memory budget ({}); \
                     give a larger --memory-budget",
                    self.engine.label(bucket),
                    human(need),
                    human(self.engine.weights_bytes),
                    human(used),
                    human(self.engine.budget)
                ),
            },
            TakeError::Load(e) => e,
        })
    }

    fn put(&mut self, bucket: Bucket, runner: GraphRunner) {
        self.exec.pool.put(bucket, runner);
    }

    fn record(&mut self, run: RunRecord) {
        self.exec.runs.record(run);
    }
}

/// Loads one graph; a decode graph's caches start as zeros, as every buffer a runner allocates does (the slots a
/// step has not written are masked, and masked values must be finite: −inf + a NaN would not vanish). They are
/// not written here: a zeroed buffer is resident only where written, and most of a many-row graph's caches are
/// never written at all.
///
/// Memory: the graphs that run once per call (encode, prefill, the full-window recompute, detokenize) run without
/// ONNX Runtime's CPU arena, so their activations go back to the system after each run instead of staying held
/// by each loaded graph; the per-step graphs (decode, refine) keep it (thousands of runs a call). On a CPU target
/// a prefill graph's caches are detached: they are written straight into the decode graph's caches
/// ([`GraphRunner::run_into`]), so no second copy of them is held.
fn load_graph(bundle: &EngineBundle, g: &KronosGraphFile) -> Result<GraphRunner> {
    let per_step = matches!(g.bucket.kind, GraphKind::Decode | GraphKind::Refine);
    let mut r = bundle.load_graph(&GraphFile {
        file: &g.file,
        label: &g.file,
        inputs: &g.inputs,
        outputs: &g.outputs,
        shared: false,
        gpu_graph_id: None,
        memory_pattern: true,
        cpu_arena: per_step,
    })?;
    if g.bucket.kind == GraphKind::Prefill && !r.target().is_gpu() {
        let states: Vec<String> =
            r.outputs().map(|o| o.name.clone()).filter(|n| state_input_name(n).is_some()).collect();
        r.detach_outputs(&states)?;
    }
    Ok(r)
}

/// Runs a graph once on placeholder inputs (zeros, every length 1); caches, its own or bound to another graph's
/// buffer (a refine graph reading the decode graph's), are read as they stand (finite: caches start at zeros and
/// hold only what graphs wrote), so that warming a graph of 64 rows does not make all its caches resident.
fn warm(runner: &mut GraphRunner) -> Result<()> {
    let caches: Vec<&str> = runner.cache_inputs().collect();
    let inputs: Vec<(String, DType)> = runner
        .inputs()
        .filter(|s| !runner.is_shared(&s.name) && !caches.contains(&s.name.as_str()))
        .map(|s| (s.name.clone(), s.dtype))
        .collect();
    for (name, dtype) in inputs {
        match dtype {
            DType::I64 => runner.input_mut::<i64>(&name)?.fill(i64::from(name == sig::LENGTH)),
            _ => runner.fill_f32(&name, 0.0)?,
        }
    }
    runner.run()
}

impl FamilyEngine for KronosEngine {
    /// Loads and runs once the graphs timed at start ([`warm::timed_at_start`]: every per-step graph, and the
    /// fewest-rows graph of each full-pass kind and slots); the others load when a call first needs them.
    fn warm_up(&self, call: Call<'_>) -> Result<usize> {
        let mut exec = self.lock();
        let timed = warm::timed_at_start(&self.buckets);
        for &b in &timed {
            let mut pool = Pool { engine: self, call, exec: &mut exec };
            let mut runner = pool.take(b)?;
            let result = warm(&mut runner);
            pool.put(b, runner);
            result?;
        }
        Ok(timed.len())
    }

    /// A request becomes a job (every Kronos check, the context policy), which some graphs must hold.
    fn admit(
        &self,
        _limits: &EngineLimits,
        req: &mut ForecastRequest,
        at: &str,
    ) -> Result<Option<ContextCut>> {
        let job = self.job_of(req, at)?;
        // The window the engine resolved (upstream's default 512, or the engine's window when smaller) is written
        // into the request, so whoever reads the admitted request sees the window that ran: a backtest's
        // reference runs upstream, whose own default is always 512. The job built from it again is the same.
        req.params.entry("max_context".to_string()).or_insert(job.max_context as f64);
        Ok(job.context_cut)
    }

    fn forecast(
        &self,
        call: Call<'_>,
        reqs: Vec<ForecastRequest>,
        opts: RunOptions,
    ) -> Vec<Result<Forecast>> {
        let mut out: Vec<Option<Result<Forecast>>> = (0..reqs.len()).map(|_| None).collect();
        let (mut jobs, mut index) = (Vec::new(), Vec::new());
        for (i, req) in reqs.iter().enumerate() {
            match self.job_of(req, &format!("request {}", i + 1)) {
                Ok(j) => {
                    jobs.push(j);
                    index.push(i);
                }
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        let refs: Vec<&KronosJob> = jobs.iter().collect();
        let results = self.forecast_jobs(call, &refs, Hooks::default(), opts.cancel);
        let profile = self.profile_name();
        for ((i, job), r) in index.into_iter().zip(&jobs).zip(results) {
            out[i] = Some(r.map(|f| {
                let names = f.buckets.iter().map(|&b| self.label(b)).collect();
                let columns = column_names(&reqs[i]);
                let response = response(job, &f, &columns, &profile, &call.info.label, names);
                Forecast { response, steps: Vec::new() }
            }));
        }
        out.into_iter().map(|r| r.expect("every request answered")).collect()
    }

    /// Each graph timed on the placeholder inputs of [`warm`] (a graph's cost does not depend on its values:
    /// static shapes, padded slots computed and masked).
    /// Times the graphs of [`warm::timed_at_start`]; every other graph's rate is derived from its kind and slots'
    /// fewest-rows graph ([`warm::derived_rate`]). One rate per graph.
    fn measure(&self, call: Call<'_>) -> Result<Vec<GraphRate>> {
        let mut exec = self.lock();
        let mut timed = Vec::new();
        for b in warm::timed_at_start(&self.buckets) {
            // loaded: the warm-up just ran it (one it evicted again runs once untimed)
            let loaded = exec.pool.is_loaded(b);
            let mut pool = Pool { engine: self, call, exec: &mut exec };
            let mut runner = pool.take(b)?;
            let result = time_runs(loaded, || warm(&mut runner));
            pool.put(b, runner);
            let (seconds, runs) = result?;
            timed.push((b, GraphRate::new(self.label(b), b.kind.as_str(), b.rows, seconds, runs)));
        }
        let mut rates = Vec::with_capacity(self.buckets.len());
        for b in &self.buckets {
            match timed.iter().find(|(t, _)| t == b) {
                Some((_, r)) => rates.push(r.clone()),
                None => rates.extend(warm::derived_rate(&self.buckets, b, self.label(*b), &timed)),
            }
        }
        Ok(rates)
    }

    /// The runs [`Ladder::call_runs`] plans for the series: each `samples` paths (one greedy path for 0), its
    /// context as admitted (at most the rows the engine encodes), its `params.max_context` (default upstream's
    /// 512, or the window when smaller; a smaller one slides earlier: more full-window recomputes).
    fn estimate(&self, sizes: &[RequestSize]) -> Option<Estimate> {
        let series: Vec<SeriesCounts> = sizes
            .iter()
            .flat_map(|s| {
                // a longer context keeps its most recent rows (the job's context policy); admission refuses a
                // `max_context` of 0 or past the window
                let max_context = s.max_context.unwrap_or(DEFAULT_MAX_CONTEXT).clamp(1, self.window);
                let counts = SeriesCounts {
                    rows: s.context.min(self.limits.context),
                    horizon: s.horizon,
                    paths: s.samples.max(1),
                    max_context,
                };
                std::iter::repeat_n(counts, s.series)
            })
            .collect();
        self.estimate_counts(&series)
    }

    fn buckets(&self) -> Vec<Bucket> {
        self.buckets.clone()
    }

    fn bucket_name(&self, bucket: Bucket) -> String {
        self.label(bucket)
    }

    fn bucket_stats(&self) -> Vec<BucketStats> {
        let exec = self.lock();
        let mut v: Vec<BucketStats> = self
            .buckets
            .iter()
            .map(|&b| {
                let (runs, rows_used, seconds) = exec.runs.totals(b);
                BucketStats {
                    name: self.label(b),
                    kind: b.kind,
                    rows: b.rows,
                    slots: b.slots,
                    runs,
                    rows_used,
                    seconds,
                    loaded: exec.pool.is_loaded(b),
                }
            })
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    fn last_call(&self) -> Vec<RunRecord> {
        self.lock().runs.last_call().to_vec()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
