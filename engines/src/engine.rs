//! [`Engine`]: the handle the CLI and the server forecast through.
//!
//! An engine is loaded once from an engine bundle and shared by reference between threads (`Engine: Send +
//! Sync`; wrap it in an `Arc`). Every method takes `&self`:
//! * [`Engine::forecast`] takes a group of requests and returns one result per request, in order. The group is
//!   packed onto the engine's graphs (several series share a prefill, several requests' sample paths share
//!   decode rows); a request that fits nowhere fails alone, never its whole group. Calls from several threads
//!   are served one at a time: on CPU they share one intra-op thread pool anyway, and one call at a time keeps
//!   the engine's memory within its budget.
//! * [`Engine::admit`] applies the context policy that the CLI and the server share: a context longer than the
//!   engine holds keeps its most recent points (reported in the response as `context_truncated`), or, with
//!   `strict_context`, is an error; everything else that cannot fit (variates, horizon, samples) is an error that
//!   names the engine's limit.
//! * [`Engine::info`] says what the engine holds (model generation, point forecast, limits, target), which a
//!   server reports as its model metadata.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use exporter::bucket::Bucket;
use exporter::generation::AnyConfig;
use exporter::signature::{self, GraphKind};

use crate::budget::{Budget, RequestSize};
use crate::bundle::{EngineBundle, EngineGraph, EngineManifest};
use crate::error::{Error, Result};
use crate::graph::GraphRunner;
use crate::host::rope;
use crate::host::scaler::ScalerConfig;
use crate::memory::human;
use crate::plan::{Available, Pins, Shape};
use crate::request::{ContextCut, ForecastRequest, ForecastResponse};
use crate::toto1::session::{self, Forecast, Graphs, HostConfig, RunRecord};
use crate::toto2::engine::Toto2Engine;
use crate::toto2::Trace;

/// How to load an engine.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `--ort-lib` (see [`crate::runtime`]).
    pub ort_lib: Option<PathBuf>,
    /// CPU intra-op threads of the process (default: the engine's recorded count, else physical cores).
    pub threads: Option<usize>,
    /// Bytes the engine may hold: its weights plus its loaded buckets (see [`crate::memory`]); default: 80% of
    /// the memory limit of this container (cgroup) or machine.
    pub memory_budget: Option<u64>,
}

/// The model generation an engine holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ModelFamily {
    /// Toto 1.0 (toto-ts 0.2.0): Student-T mixture head, mean and sampled forecasts.
    #[serde(rename = "toto-1.0")]
    Toto1,
    /// Toto 2.0 (toto-2 2.0.0): nine quantile knots, the median as point forecast, no sampling.
    #[serde(rename = "toto-2.0")]
    Toto2,
}

impl ModelFamily {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelFamily::Toto1 => "toto-1.0",
            ModelFamily::Toto2 => "toto-2.0",
        }
    }

    /// Name of the point forecast in responses: `mean` (1.0) or `median` (2.0).
    pub fn point_forecast(self) -> &'static str {
        match self {
            ModelFamily::Toto1 => "mean",
            ModelFamily::Toto2 => "median",
        }
    }
}

/// The largest request an engine serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct EngineLimits {
    /// Variates per series.
    pub max_variates: usize,
    /// Context points used; longer contexts keep their most recent points (or fail with `strict_context`).
    pub max_context: usize,
    /// Forecast points.
    pub max_horizon: usize,
    /// Sample paths per series (0: the engine makes no sampled forecasts).
    pub max_samples: usize,
}

/// What a loaded engine holds.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EngineInfo {
    pub model: ModelFamily,
    /// `cpu`, `cuda`, `tensorrt`.
    pub target: String,
    /// ONNX Runtime version the engine runs on.
    pub ort_version: String,
    /// `cpu (onnxruntime 1.31.1)`: the `engine` field of responses.
    pub label: String,
    pub limits: EngineLimits,
    /// Whether the bundle carries golden reference cases (`totoc verify` runs them).
    pub has_golden: bool,
}

impl EngineInfo {
    /// The limits request parsing enforces for this engine. A Toto 2.0 engine leaves `samples` to
    /// [`Engine::admit`], whose error gives the reason (it predicts quantiles and draws no paths) rather than a
    /// limit of 0.
    pub fn request_limits(&self) -> crate::request::Limits {
        match self.model {
            ModelFamily::Toto1 => crate::request::Limits {
                max_samples: self.limits.max_samples,
                quantiles_without_samples: false,
            },
            ModelFamily::Toto2 => {
                crate::request::Limits { max_samples: usize::MAX, quantiles_without_samples: true }
            }
        }
    }
}

/// Options of one [`Engine::forecast_with`] call.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Keep each request's per-step mixture parameters (first path), as `totoc verify` compares them.
    pub record_steps: bool,
    /// Run only on these buckets (tests and diagnostics: the same request on a small and a large bucket).
    pub pins: Pins,
}

/// What one bucket has run since the engine was loaded (a fixed-size record per bucket: nothing grows).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BucketStats {
    /// The bucket's graph, e.g. `default.decode.n64.t13`.
    pub name: String,
    pub kind: GraphKind,
    pub rows: usize,
    pub slots: usize,
    pub runs: u64,
    /// Rows that held real work, summed over runs (occupancy = `rows_used / (runs × rows)`).
    pub rows_used: u64,
    pub seconds: f64,
    /// Whether its buffers are allocated now.
    pub loaded: bool,
}

/// One bucket the engine may run.
struct Slot {
    graph: EngineGraph,
    profile: String,
}

/// A loaded bucket: its runner (`None` while a session holds it) and when it was last used.
struct Loaded {
    bucket: Bucket,
    runner: Option<GraphRunner>,
    memory: u64,
    last_used: u64,
}

/// What calls share, behind the engine's lock.
#[derive(Default)]
struct Exec {
    loaded: Vec<Loaded>,
    tick: u64,
    totals: HashMap<Bucket, (u64, u64, f64)>,
    last_call: Vec<RunRecord>,
}

/// A loaded engine (see the module docs).
pub struct Engine {
    dir: PathBuf,
    info: EngineInfo,
    bundle: EngineBundle,
    slots: HashMap<Bucket, Slot>,
    available: Vec<Available>,
    budget: u64,
    /// Toto 1.0's host scaler (unused by a Toto 2.0 engine, whose scaler is `toto2::context`'s).
    scaler: ScalerConfig,
    patch: usize,
    exec: Mutex<Exec>,
    /// A Toto 2.0 engine's sets, planner and pool (`None`: Toto 1.0, run by the code above).
    toto2: Option<Toto2Engine>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("dir", &self.dir).field("info", &self.info).finish_non_exhaustive()
    }
}

impl Engine {
    /// Opens the engine bundle at `dir` (every file hash-checked; see [`EngineBundle::load`]). No graph is
    /// loaded yet: each bucket is loaded when a call first needs it (or by [`warm_up`](Self::warm_up)).
    pub fn load(dir: &Path, opts: &LoadOptions) -> Result<Self> {
        crate::runtime::set_intra_threads(opts.threads);
        let bundle = EngineBundle::load(dir, opts.ort_lib.as_deref())?;
        let manifest = bundle.manifest().clone();
        let budget = opts.memory_budget.unwrap_or_else(crate::memory::default_budget);
        let weights_bytes = manifest.resident_weight_bytes();
        if weights_bytes >= budget {
            return Err(Error::Engine {
                path: dir.to_path_buf(),
                message: format!(
                    "the weights alone ({}) exceed the memory budget ({}); give a larger --memory-budget",
                    human(weights_bytes),
                    human(budget)
                ),
            });
        }
        if let AnyConfig::Toto2(cfg) = &manifest.model {
            let t2 = Toto2Engine::new(&manifest, cfg, budget).map_err(|e| match e {
                Error::Engine { message, .. } => Error::Engine { path: dir.to_path_buf(), message },
                e => e,
            })?;
            let info = EngineInfo {
                model: ModelFamily::Toto2,
                target: manifest.target.name().to_string(),
                ort_version: manifest.ort_version.clone(),
                label: manifest.label(),
                limits: Toto2Engine::limits(&manifest),
                has_golden: dir.join(exporter::export::GOLDEN_DIR).is_dir(),
            };
            let patch = cfg.patch_size;
            return Ok(Engine {
                dir: dir.to_path_buf(),
                info,
                scaler: ScalerConfig {
                    patch,
                    min_scale: 0.0,
                    stabilize_with_global: false,
                    scale_factor_exponent: 0.0,
                },
                patch,
                bundle,
                slots: HashMap::new(),
                available: Vec::new(),
                budget,
                exec: Mutex::new(Exec::default()),
                toto2: Some(t2),
            });
        }
        let AnyConfig::Toto1(model) = &manifest.model else { unreachable!("Toto 2.0 returned above") };
        // Identical shapes in several profiles are one graph: keep the first.
        let mut slots: HashMap<Bucket, Slot> = HashMap::new();
        for (p, g) in manifest.graphs() {
            slots
                .entry(g.bucket)
                .or_insert_with(|| Slot { graph: g.clone(), profile: p.profile.name.clone() });
        }
        let available = usable_buckets(&slots, weights_bytes, budget);
        if !available.iter().any(|a| a.bucket.kind == GraphKind::Prefill) {
            return Err(Error::Engine {
                path: dir.to_path_buf(),
                message: format!(
                    "no bucket fits the memory budget ({}) beside the weights ({}); give a larger --memory-budget",
                    human(budget),
                    human(weights_bytes)
                ),
            });
        }
        let max = |f: fn(&crate::bundle::EngineProfile) -> usize| {
            manifest.profiles.iter().map(f).max().unwrap_or(0)
        };
        let limits = EngineLimits {
            max_variates: max(|p| p.profile.variates),
            max_context: max(|p| p.profile.context),
            max_horizon: max(|p| p.profile.horizon),
            max_samples: max(|p| p.profile.samples),
        };
        let info = EngineInfo {
            model: ModelFamily::Toto1,
            target: manifest.target.name().to_string(),
            ort_version: manifest.ort_version.clone(),
            label: manifest.label(),
            limits,
            has_golden: dir.join(exporter::export::GOLDEN_DIR).is_dir(),
        };
        Ok(Engine {
            dir: dir.to_path_buf(),
            info,
            scaler: scaler_config(model),
            patch: model.patch_size,
            bundle,
            slots,
            available,
            budget,
            exec: Mutex::new(Exec::default()),
            toto2: None,
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn info(&self) -> &EngineInfo {
        &self.info
    }

    pub fn manifest(&self) -> &EngineManifest {
        self.bundle.manifest()
    }

    /// The memory budget this engine keeps to (bytes: weights + loaded buckets).
    pub fn memory_budget(&self) -> u64 {
        self.budget
    }

    /// The buckets this engine runs calls on (those whose buffers fit its budget beside the weights).
    pub fn buckets(&self) -> Vec<Bucket> {
        self.available.iter().map(|a| a.bucket).collect()
    }

    /// Loads every bucket and runs each once on placeholder inputs (a server calls this before it reports
    /// ready, so no request pays for a first load). Buckets are evicted again as the budget requires. Returns
    /// how many buckets ran.
    pub fn warm_up(&self) -> Result<usize> {
        if let Some(t2) = &self.toto2 {
            return t2.warm_up(&self.bundle);
        }
        let mut exec = self.lock();
        let mut buckets = self.buckets();
        buckets.sort();
        for &b in &buckets {
            let mut pool = Pool { engine: self, exec: &mut exec };
            let mut runner = pool.take(b, &[])?;
            let result = warm(&mut runner, b);
            pool.put(b, runner);
            result?;
        }
        Ok(buckets.len())
    }

    /// Checks `req` against the engine's limits and applies the context policy: a context longer than
    /// `max_context` keeps its last `max_context` points (recorded in `req.context_cut` and returned), unless
    /// `req.strict_context`. Admitting a request twice changes nothing. `at` names the request in errors.
    pub fn admit(&self, req: &mut ForecastRequest, at: &str) -> Result<Option<ContextCut>> {
        if let Some(t2) = &self.toto2 {
            return admit_toto2(t2, &self.info.limits, req, at);
        }
        admit(&self.info.limits, req, at)?;
        crate::plan::fits(&self.shape(req), &self.available, Pins::default())
            .map_err(|why| Error::Unservable { at: at.to_string(), why })?;
        Ok(req.context_cut)
    }

    /// Checks the counts of one request (its `sizes`, before any series is built) against the engine's limits
    /// (variates, horizon, samples) and `budget` (series, quantile levels, response size, engine work; the
    /// context counted up to what the engine keeps). `at` names the request in errors.
    pub fn check_size(&self, budget: &Budget, sizes: &[RequestSize], at: &str) -> Result<()> {
        check_size(&self.info, budget, sizes, at)
    }

    /// Forecasts a group of requests: one result per request, in order (see the module docs). Each request is
    /// admitted first ([`admit`](Self::admit)), so a context cut is reported in its response.
    pub fn forecast(&self, reqs: Vec<ForecastRequest>) -> Vec<Result<ForecastResponse>> {
        self.forecast_with(reqs, RunOptions::default()).into_iter().map(|r| r.map(|f| f.response)).collect()
    }

    /// [`forecast`](Self::forecast), keeping each request's per-step mixture parameters (first path) for
    /// equivalence checks (`totoc verify`).
    pub fn forecast_traced(&self, reqs: Vec<ForecastRequest>, record_steps: bool) -> Vec<Result<Forecast>> {
        self.forecast_with(reqs, RunOptions { record_steps, ..RunOptions::default() })
    }

    /// [`forecast`](Self::forecast) with [`RunOptions`].
    pub fn forecast_with(&self, reqs: Vec<ForecastRequest>, opts: RunOptions) -> Vec<Result<Forecast>> {
        if let Some(t2) = &self.toto2 {
            let trace = if opts.record_steps { Trace::Blocks } else { Trace::Response };
            let results = self.forecast_toto2(t2, reqs, trace, None);
            return results
                .into_iter()
                .map(|r| r.map(|f| Forecast { response: f.response, steps: Vec::new() }))
                .collect();
        }
        let mut out: Vec<Option<Result<Forecast>>> = (0..reqs.len()).map(|_| None).collect();
        let mut admitted = Vec::new();
        let mut index = Vec::new();
        for (i, mut req) in reqs.into_iter().enumerate() {
            let at = format!("request {}", i + 1);
            let checked = admit(&self.info.limits, &mut req, &at).and_then(|_| {
                crate::plan::fits(&self.shape(&req), &self.available, opts.pins)
                    .map_err(|why| Error::Unservable { at: at.clone(), why })
            });
            match checked {
                Ok(_) => {
                    admitted.push(req);
                    index.push(i);
                }
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        if !admitted.is_empty() {
            let shapes: Vec<Shape> = admitted.iter().map(|r| self.shape(r)).collect();
            let results = match crate::plan::plan(&shapes, &self.available, opts.pins) {
                Ok(plan) => {
                    let d = self.manifest().profiles.first().and_then(|p| p.graphs.first()).map(|g| g.dims);
                    let cfg = HostConfig {
                        scaler: &self.scaler,
                        patch: self.patch,
                        head_dim: d.map_or(0, |d| d.head_dim),
                        components: d.map_or(0, |d| d.components),
                        engine: &self.info.label,
                        record_steps: opts.record_steps,
                    };
                    let mut exec = self.lock();
                    exec.last_call.clear();
                    let mut pool = Pool { engine: self, exec: &mut exec };
                    session::run(&plan, &admitted, &cfg, &mut pool)
                }
                Err(e) => {
                    let message = e.to_string();
                    admitted
                        .iter()
                        .map(|_| Err(Error::Session { graph: "plan".into(), message: message.clone() }))
                        .collect()
                }
            };
            for (i, r) in index.into_iter().zip(results) {
                out[i] = Some(r);
            }
        }
        out.into_iter().map(|r| r.expect("every request answered")).collect()
    }

    /// Toto 2.0 engines: [`forecast`](Self::forecast) with each request's full nine sorted knots and (with
    /// `record`) its per-block raw knots and scaler statistics, as `totoc verify` compares them; `decode_block`
    /// `Some(b)` runs only on the profiles with that `decode_block`. On a Toto 1.0 engine every request fails with
    /// an error saying so.
    pub fn forecast_toto2_traced(
        &self,
        reqs: Vec<ForecastRequest>,
        record: bool,
        decode_block: Option<Option<usize>>,
    ) -> Vec<Result<crate::toto2::Toto2Forecast>> {
        match &self.toto2 {
            Some(t2) => {
                let trace = if record { Trace::Blocks } else { Trace::Knots };
                self.forecast_toto2(t2, reqs, trace, decode_block)
            }
            None => reqs
                .iter()
                .map(|_| {
                    Err(Error::Engine {
                        path: self.dir.clone(),
                        message: "a Toto 1.0 engine has no quantile knots; use forecast_traced".into(),
                    })
                })
                .collect(),
        }
    }

    /// Admits every request and runs the admitted ones on the Toto 2.0 sets.
    fn forecast_toto2(
        &self,
        t2: &Toto2Engine,
        reqs: Vec<ForecastRequest>,
        trace: Trace,
        decode_block: Option<Option<usize>>,
    ) -> Vec<Result<crate::toto2::Toto2Forecast>> {
        let mut out: Vec<Option<Result<crate::toto2::Toto2Forecast>>> =
            (0..reqs.len()).map(|_| None).collect();
        let (mut admitted, mut index) = (Vec::new(), Vec::new());
        for (i, mut req) in reqs.into_iter().enumerate() {
            match admit_toto2(t2, &self.info.limits, &mut req, &format!("request {}", i + 1)) {
                Ok(_) => {
                    admitted.push(req);
                    index.push(i);
                }
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        let results = t2.forecast(&self.bundle, &self.info.label, &admitted, trace, decode_block);
        for (i, r) in index.into_iter().zip(results) {
            out[i] = Some(r);
        }
        out.into_iter().map(|r| r.expect("every request answered")).collect()
    }

    /// A Toto 2.0 engine's graph sets (`default.n4.s64`); empty for Toto 1.0.
    pub fn toto2_sets(&self) -> Vec<String> {
        self.toto2.as_ref().map(Toto2Engine::set_names).unwrap_or_default()
    }

    /// The graph runs of the last call (bounded by that call's size).
    pub fn last_call(&self) -> Vec<RunRecord> {
        self.lock().last_call.clone()
    }

    /// What each bucket has run so far (one fixed-size record per bucket).
    pub fn bucket_stats(&self) -> Vec<BucketStats> {
        let exec = self.lock();
        let mut v: Vec<BucketStats> = self
            .available
            .iter()
            .map(|a| {
                let (runs, rows_used, seconds) = exec.totals.get(&a.bucket).copied().unwrap_or_default();
                BucketStats {
                    name: self.label(a.bucket).0,
                    kind: a.bucket.kind,
                    rows: a.bucket.rows,
                    slots: a.bucket.slots,
                    runs,
                    rows_used,
                    seconds,
                    loaded: exec.loaded.iter().any(|l| l.bucket == a.bucket),
                }
            })
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// A bucket's graph name, e.g. `default.decode.n8.t69` (what responses list in `buckets`).
    pub fn bucket_name(&self, bucket: Bucket) -> String {
        self.label(bucket).0
    }

    fn shape(&self, req: &ForecastRequest) -> Shape {
        let p = self.patch;
        Shape {
            variates: req.variates(),
            slots: req.context_len().div_ceil(p).max(1),
            steps: req.horizon.div_ceil(p).max(1),
            paths: req.samples.max(1),
        }
    }

    fn label(&self, bucket: Bucket) -> (String, String) {
        match self.slots.get(&bucket) {
            // the bucket's stem, whatever the precision's file is called (`default.decode.n1.t13`)
            Some(s) => (bucket.stem(&s.profile), s.profile.clone()),
            None => (format!("{bucket:?}"), String::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Exec> {
        self.exec.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The buckets whose buffers fit the budget beside the weights: prefill buckets on their own, decode buckets
/// together with the largest usable prefill (a pass holds both while it prefills).
fn usable_buckets(slots: &HashMap<Bucket, Slot>, weights: u64, budget: u64) -> Vec<Available> {
    let room = budget.saturating_sub(weights);
    let prefill: Vec<Available> = slots
        .values()
        .filter(|s| s.graph.bucket.kind == GraphKind::Prefill && s.graph.memory_bytes <= room)
        .map(|s| Available { bucket: s.graph.bucket, memory_bytes: s.graph.memory_bytes })
        .collect();
    let largest_prefill = prefill.iter().map(|a| a.memory_bytes).max().unwrap_or(0);
    let mut out: Vec<Available> = slots
        .values()
        .filter(|s| {
            s.graph.bucket.kind == GraphKind::Decode && s.graph.memory_bytes + largest_prefill <= room
        })
        .map(|s| Available { bucket: s.graph.bucket, memory_bytes: s.graph.memory_bytes })
        .chain(prefill)
        .collect();
    out.sort_by_key(|a| a.bucket);
    out
}

/// The engine's buckets as a session sees them: loaded on demand, least recently used evicted to stay within
/// the budget.
struct Pool<'e> {
    engine: &'e Engine,
    exec: &'e mut Exec,
}

impl Graphs for Pool<'_> {
    fn take(&mut self, bucket: Bucket, keep: &[Bucket]) -> Result<GraphRunner> {
        self.exec.tick += 1;
        let tick = self.exec.tick;
        if let Some(l) = self.exec.loaded.iter_mut().find(|l| l.bucket == bucket) {
            l.last_used = tick;
            return l.runner.take().ok_or_else(|| Error::Session {
                graph: self.engine.label(bucket).0,
                message: "already in use by this call".into(),
            });
        }
        let slot = self.engine.slots.get(&bucket).ok_or_else(|| Error::Session {
            graph: format!("{bucket:?}"),
            message: "not a bucket of this engine".into(),
        })?;
        let need = slot.graph.memory_bytes;
        let weights = self.engine.manifest().resident_weight_bytes();
        loop {
            let used: u64 = self.exec.loaded.iter().map(|l| l.memory).sum();
            if weights + used + need <= self.engine.budget {
                break;
            }
            let victim = self
                .exec
                .loaded
                .iter()
                .enumerate()
                .filter(|(_, l)| l.runner.is_some() && !keep.contains(&l.bucket))
                .min_by_key(|(_, l)| l.last_used)
                .map(|(i, _)| i);
            match victim {
                Some(i) => drop(self.exec.loaded.swap_remove(i)),
                None => {
                    return Err(Error::Engine {
                        path: self.engine.dir.clone(),
                        message: format!(
                        "bucket {} needs {} beside the weights ({}) and the buckets in use ({}): over the \
                             memory budget ({}); give a larger --memory-budget",
                        self.engine.label(bucket).0,
                        human(need),
                        human(weights),
                        human(used),
                        human(self.engine.budget)
                    ),
                    })
                }
            }
        }
        let runner = self.engine.bundle.load_graph(&slot.graph)?;
        self.exec.loaded.push(Loaded { bucket, runner: None, memory: need, last_used: tick });
        Ok(runner)
    }

    fn put(&mut self, bucket: Bucket, runner: GraphRunner) {
        if let Some(l) = self.exec.loaded.iter_mut().find(|l| l.bucket == bucket) {
            l.runner = Some(runner);
        }
    }

    fn record(&mut self, run: RunRecord) {
        let t = self.exec.totals.entry(run.bucket).or_default();
        t.0 += 1;
        t.1 += run.rows_used as u64;
        t.2 += run.seconds;
        self.exec.last_call.push(run);
    }

    fn label(&self, bucket: Bucket) -> (String, String) {
        self.engine.label(bucket)
    }
}

/// Runs a bucket once on placeholder inputs: zero patches, one group per row, every row at slot 0 with valid
/// rotary tables (so the run computes finite values end to end).
fn warm(runner: &mut GraphRunner, bucket: Bucket) -> Result<()> {
    let dh = runner
        .inputs()
        .find(|s| s.name == signature::ROPE_COS)
        .and_then(|s| s.shape.last().copied())
        .unwrap_or(0);
    runner.fill_f32(signature::PATCHES, 0.0)?;
    for (r, g) in runner.input_mut::<i64>(signature::GROUP_ID)?.iter_mut().enumerate() {
        *g = r as i64;
    }
    let n = bucket.rows;
    let (width, index) = match bucket.kind {
        GraphKind::Prefill => (bucket.slots * dh, signature::LAST_INDEX),
        GraphKind::Decode => (dh, signature::WRITE_POS),
    };
    runner.input_mut::<i64>(index)?.fill(0);
    let mut tables = [vec![0f32; n * width], vec![0f32; n * width], vec![0f32; n * width]];
    for r in 0..n {
        let span = r * width..(r + 1) * width;
        let [c, s, x] = &mut tables;
        match bucket.kind {
            GraphKind::Prefill => rope::fill_prefill(
                bucket.slots,
                1,
                dh,
                &mut c[span.clone()],
                &mut s[span.clone()],
                &mut x[span],
            ),
            GraphKind::Decode => {
                rope::fill_decode(0, dh, &mut c[span.clone()], &mut s[span.clone()], &mut x[span])
            }
        }
    }
    for (name, t) in [signature::ROPE_COS, signature::ROPE_SIN, signature::XPOS_SCALE].iter().zip(&tables) {
        runner.write_f32(name, 0, t)?;
    }
    if runner.has_input(signature::TIME_MASK) {
        let mask = match bucket.kind {
            GraphKind::Prefill => crate::toto1::session::causal_mask(bucket.slots),
            GraphKind::Decode => crate::toto1::session::key_mask(&vec![0; n], bucket.slots),
        };
        runner.write_f32(signature::TIME_MASK, 0, &mask)?;
    }
    runner.run()
}

/// The host scaler's settings from the model config.
pub fn scaler_config(model: &exporter::config::ModelConfig) -> ScalerConfig {
    ScalerConfig {
        patch: model.patch_size,
        min_scale: 0.1,
        stabilize_with_global: model.stabilize_with_global,
        scale_factor_exponent: model.scale_factor_exponent,
    }
}

/// [`Engine::admit`] on a Toto 2.0 engine: what 2.0 refuses first (sampling fields, levels outside [0.1, 0.9],
/// a context shorter than one patch), then the shared limits and context policy, then whether a set holds it.
fn admit_toto2(
    t2: &Toto2Engine,
    limits: &EngineLimits,
    req: &mut ForecastRequest,
    at: &str,
) -> Result<Option<ContextCut>> {
    crate::toto2::check_request(req, t2.patch(), at)?;
    admit(limits, req, at)?;
    t2.check_fits(req, at)?;
    Ok(req.context_cut)
}

/// [`Engine::check_size`] on an engine's info.
pub fn check_size(info: &EngineInfo, budget: &Budget, sizes: &[RequestSize], at: &str) -> Result<()> {
    let limits = &info.limits;
    let err = |what: String, limit: usize| Err(Error::Limit { at: at.to_string(), what, limit });
    for s in sizes {
        if s.variates > limits.max_variates {
            return err(format!("{} variates", s.variates), limits.max_variates);
        }
        if s.horizon > limits.max_horizon {
            return err(format!("horizon {}", s.horizon), limits.max_horizon);
        }
        // A Toto 2.0 engine refuses samples with its own reason (admit).
        if info.model == ModelFamily::Toto1 && s.samples > limits.max_samples {
            return err(format!("{} samples", s.samples), limits.max_samples);
        }
    }
    let kept: Vec<RequestSize> =
        sizes.iter().map(|s| RequestSize { context: s.context.min(limits.max_context), ..*s }).collect();
    budget.check(&kept, at)
}

/// The context policy and limit checks of [`Engine::admit`], on plain limits.
pub fn admit(limits: &EngineLimits, req: &mut ForecastRequest, at: &str) -> Result<Option<ContextCut>> {
    let err = |what: String, limit: usize| Error::Limit { at: at.to_string(), what, limit };
    if req.variates() > limits.max_variates {
        return Err(err(format!("{} variates", req.variates()), limits.max_variates));
    }
    if req.horizon > limits.max_horizon {
        return Err(err(format!("horizon {}", req.horizon), limits.max_horizon));
    }
    if req.samples > limits.max_samples {
        return Err(err(format!("{} samples", req.samples), limits.max_samples));
    }
    let given = req.context_len();
    if given <= limits.max_context {
        return Ok(req.context_cut);
    }
    if req.strict_context {
        return Err(Error::ContextTooLong { at: at.to_string(), given, limit: limits.max_context });
    }
    let used = limits.max_context;
    for series in &mut req.target {
        series.drain(..given - used);
    }
    if let Some(v) = req.target.iter().position(|s| s.iter().all(Option::is_none)) {
        return Err(Error::AllMissingAfterCut { at: at.to_string(), variate: v, used });
    }
    req.context_cut = Some(ContextCut { given, used });
    Ok(req.context_cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(len: usize) -> ForecastRequest {
        ForecastRequest {
            id: None,
            target: vec![(0..len).map(|i| Some(i as f32)).collect()],
            id_mask: vec![0],
            horizon: 4,
            samples: 0,
            quantiles: vec![],
            seed: 0,
            strict_context: false,
            context_cut: None,
        }
    }

    const LIMITS: EngineLimits =
        EngineLimits { max_variates: 2, max_context: 8, max_horizon: 16, max_samples: 4 };

    #[test]
    fn sizes_are_checked_against_the_engine_and_the_budget_before_anything_is_built() {
        let info = EngineInfo {
            model: ModelFamily::Toto1,
            target: "cpu".into(),
            ort_version: "x".into(),
            label: "cpu".into(),
            limits: LIMITS,
            has_golden: false,
        };
        let size = |series, variates, context, horizon, samples| RequestSize {
            series,
            variates,
            context,
            horizon,
            samples,
            quantiles: 3,
        };
        let b = Budget::DEFAULT;
        assert!(
            check_size(&info, &b, &[size(256, 2, 1 << 40, 16, 4)], "r").is_ok(),
            "context counts up to 8"
        );
        let e = |s| check_size(&info, &b, &[s], "r").unwrap_err().to_string();
        assert!(e(size(1, 3, 1, 1, 0)).contains("3 variates exceed this engine's limit of 2"));
        assert!(e(size(1, 1, 1, usize::MAX, 0)).contains("this engine's limit of 16"));
        assert!(e(size(1, 1, 1, 1, 1 << 40)).contains("samples exceed this engine's limit of 4"));
        assert!(e(size(usize::MAX, 1, 1, 1, 0)).contains("--max-series"));
        let tight = Budget { max_cost: 50, ..b };
        let e = check_size(&info, &tight, &[size(1, 1, 1 << 40, 16, 4)], "r").unwrap_err().to_string();
        assert!(e.contains("cost of 96") && e.contains("--max-request-cost"), "{e}");
    }

    #[test]
    fn long_contexts_keep_their_most_recent_points() {
        let mut r = req(20);
        let cut = admit(&LIMITS, &mut r, "r").unwrap();
        assert_eq!(cut, Some(ContextCut { given: 20, used: 8 }));
        assert_eq!(r.target[0].first(), Some(&Some(12.0)));
        assert_eq!(r.context_len(), 8);
        // admitting again keeps the record of the cut
        assert_eq!(admit(&LIMITS, &mut r, "r").unwrap(), Some(ContextCut { given: 20, used: 8 }));
        let mut r = req(8);
        assert_eq!(admit(&LIMITS, &mut r, "r").unwrap(), None);
    }

    #[test]
    fn strict_context_and_limits_are_errors_naming_the_limit() {
        let mut r = ForecastRequest { strict_context: true, ..req(20) };
        let e = admit(&LIMITS, &mut r, "r").unwrap_err().to_string();
        assert!(e.contains("20 points") && e.contains("8"), "{e}");
        let mut r = ForecastRequest { horizon: 17, ..req(4) };
        let e = admit(&LIMITS, &mut r, "r").unwrap_err().to_string();
        assert!(e.contains("horizon 17") && e.contains("16"), "{e}");
        let mut r = ForecastRequest { samples: 5, ..req(4) };
        assert!(admit(&LIMITS, &mut r, "r").unwrap_err().to_string().contains("5 samples"));
    }

    #[test]
    fn a_cut_that_leaves_a_variate_unobserved_is_an_error() {
        let mut r = req(20);
        for x in &mut r.target[0][12..] {
            *x = None;
        }
        let e = admit(&LIMITS, &mut r, "r").unwrap_err().to_string();
        assert!(e.contains("variate 0") && e.contains("last 8"), "{e}");
    }

    #[test]
    fn engines_are_shareable_between_threads() {
        fn send<T: Send>() {}
        send::<GraphRunner>();
        fn sync<T: Send + Sync>() {}
        sync::<Engine>();
    }
}
