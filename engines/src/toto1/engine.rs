//! The Toto 1.0 engine behind [`crate::engine::Engine`]: its shape buckets (identical shapes of several profiles
//! are one graph), the planner's view of them ([`crate::plan`]), the sessions that run a plan
//! ([`super::session`]) and the pool of loaded buckets, kept within the memory budget by evicting the least
//! recently used.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Mutex;

use exporter::bucket::Bucket;
use exporter::signature::GraphKind;
use exporter::toto1::config::ModelConfig;
use exporter::toto1::signature;

use super::manifest::{EngineGraph, EngineProfile};
use super::session::{self, Graphs, HostConfig};
use crate::admission::admit;
use crate::budget::RequestSize;
use crate::bundle::EngineManifest;
use crate::cost::{time_runs, Estimate, GraphRate};
use crate::error::{Error, Result};
use crate::family::{
    BucketStats, Call, EngineLimits, FamilyEngine, Forecast, RunLedger, RunOptions, RunRecord,
};
use crate::graph::GraphRunner;
use crate::host::rope;
use crate::host::scaler::ScalerConfig;
use crate::memory::human;
use crate::plan::{Available, Pins, Shape};
use crate::pool::{LruPool, TakeError};
use crate::request::{ContextCut, ForecastRequest};

/// One bucket the engine may run.
struct Slot {
    graph: EngineGraph,
    profile: String,
}

/// What calls share, behind the engine's lock.
#[derive(Default)]
struct Exec {
    /// The loaded buckets' runners.
    pool: LruPool<Bucket, GraphRunner>,
    runs: RunLedger,
}

/// A loaded Toto 1.0 engine (see the module docs).
pub struct Toto1Engine {
    slots: HashMap<Bucket, Slot>,
    available: Vec<Available>,
    budget: u64,
    scaler: ScalerConfig,
    patch: usize,
    exec: Mutex<Exec>,
}

impl std::fmt::Debug for Toto1Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Toto1Engine").field("buckets", &self.available.len()).finish_non_exhaustive()
    }
}

impl Toto1Engine {
    /// The engine of `manifest` (model `model`) within `budget` bytes, and its limits.
    pub fn load(
        manifest: &EngineManifest,
        model: &ModelConfig,
        dir: &std::path::Path,
        budget: u64,
    ) -> Result<(EngineLimits, Self)> {
        let weights_bytes = manifest.resident_weight_bytes();
        // Identical shapes in several profiles are one graph: keep the first.
        let mut slots: HashMap<Bucket, Slot> = HashMap::new();
        for (p, g) in super::manifest::graphs(&manifest.family.profiles) {
            // a bucket of another family's kind is no graph this engine can run
            exporter::toto1::signature::check_kind(g.bucket.kind)
                .map_err(|e| Error::Engine { path: dir.to_path_buf(), message: e.to_string() })?;
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
        let max = |f: fn(&EngineProfile) -> usize| manifest.family.profiles.iter().map(f).max().unwrap_or(0);
        let limits = EngineLimits {
            max_variates: max(|p| p.profile.variates),
            max_context: max(|p| p.profile.context),
            max_horizon: max(|p| p.profile.horizon),
            max_samples: max(|p| p.profile.samples),
        };
        let engine = Toto1Engine {
            slots,
            available,
            budget,
            scaler: scaler_config(model),
            patch: model.patch_size,
            exec: Mutex::new(Exec::default()),
        };
        Ok((limits, engine))
    }

    fn shape(&self, req: &ForecastRequest) -> Shape {
        self.shape_of(&RequestSize::of(req))
    }

    /// The planner's view of one series of `size`.
    fn shape_of(&self, size: &RequestSize) -> Shape {
        let p = self.patch;
        Shape {
            variates: size.variates,
            slots: size.context.div_ceil(p).max(1),
            steps: size.horizon.div_ceil(p).max(1),
            paths: size.samples.max(1),
        }
    }

    fn label(&self, bucket: Bucket) -> (String, String) {
        match self.slots.get(&bucket) {
            // the bucket's stem, whatever the precision's file is called (`default.decode.n1.t13`)
            Some(s) => (bucket.stem(&s.profile), s.profile.clone()),
            None => (format!("{bucket:?}"), String::new()),
        }
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

impl FamilyEngine for Toto1Engine {
    fn warm_up(&self, call: Call<'_>) -> Result<usize> {
        let mut exec = self.lock();
        let mut buckets = self.buckets();
        buckets.sort();
        for &b in &buckets {
            let mut pool = Pool { engine: self, call, exec: &mut exec };
            let mut runner = pool.take(b, &[])?;
            let result = warm(&mut runner, b);
            pool.put(b, runner);
            result?;
        }
        Ok(buckets.len())
    }

    fn admit(
        &self,
        limits: &EngineLimits,
        req: &mut ForecastRequest,
        at: &str,
    ) -> Result<Option<ContextCut>> {
        admit(limits, req, at)?;
        crate::plan::fits(&self.shape(req), &self.available, Pins::default())
            .map_err(|why| Error::Unservable { at: at.to_string(), why })?;
        Ok(req.context_cut)
    }

    fn forecast(
        &self,
        call: Call<'_>,
        reqs: Vec<ForecastRequest>,
        opts: RunOptions,
    ) -> Vec<Result<Forecast>> {
        let mut out: Vec<Option<Result<Forecast>>> = (0..reqs.len()).map(|_| None).collect();
        let mut admitted = Vec::new();
        let mut index = Vec::new();
        for (i, mut req) in reqs.into_iter().enumerate() {
            let at = format!("request {}", i + 1);
            let checked = admit(&call.info.limits, &mut req, &at).and_then(|_| {
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
                    let d = call
                        .bundle
                        .manifest()
                        .family
                        .profiles
                        .first()
                        .and_then(|p| p.graphs.first())
                        .map(|g| g.dims);
                    let cfg = HostConfig {
                        scaler: &self.scaler,
                        patch: self.patch,
                        head_dim: d.map_or(0, |d| d.head_dim),
                        components: d.map_or(0, |d| d.components),
                        engine: &call.info.label,
                        record_steps: opts.record_steps,
                        cancel: opts.cancel,
                    };
                    let mut exec = self.lock();
                    exec.runs.start_call();
                    let mut pool = Pool { engine: self, call, exec: &mut exec };
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

    /// Each bucket timed on the placeholder inputs of [`warm`] (inputs written and run, as a call does).
    fn measure(&self, call: Call<'_>) -> Result<Vec<GraphRate>> {
        let mut exec = self.lock();
        let mut buckets = self.buckets();
        buckets.sort();
        let mut rates = Vec::with_capacity(buckets.len());
        for &b in &buckets {
            // loaded: the warm-up ran it (a bucket it evicted again runs once untimed)
            let loaded = exec.pool.is_loaded(b);
            let mut pool = Pool { engine: self, call, exec: &mut exec };
            let mut runner = pool.take(b, &[])?;
            let timed = time_runs(loaded, || warm(&mut runner, b));
            pool.put(b, runner);
            let (seconds, runs) = timed?;
            rates.push(GraphRate::new(self.label(b).0, b.kind.as_str(), b.rows, seconds, runs));
        }
        Ok(rates)
    }

    /// The plan [`crate::plan::plan`] makes of the series: one run per prefill call, `steps` runs of each decode
    /// pass's bucket.
    fn estimate(&self, sizes: &[RequestSize]) -> Option<Estimate> {
        let shapes: Vec<Shape> =
            sizes.iter().flat_map(|s| std::iter::repeat_n(self.shape_of(s), s.series)).collect();
        let plan = crate::plan::plan(&shapes, &self.available, Pins::default()).ok()?;
        let mut e = Estimate::default();
        let mut add = |b: Bucket, runs: usize| e.add(&self.label(b).0, b.rows, runs as u64);
        for c in &plan.prefill_only {
            add(c.bucket, 1);
        }
        for pass in &plan.passes {
            for c in &pass.prefills {
                add(c.bucket, 1);
            }
            add(pass.bucket, pass.steps);
        }
        Some(e)
    }

    fn buckets(&self) -> Vec<Bucket> {
        self.available.iter().map(|a| a.bucket).collect()
    }

    fn last_call(&self) -> Vec<RunRecord> {
        self.lock().runs.last_call().to_vec()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    /// What each bucket has run so far (one fixed-size record per bucket).
    fn bucket_stats(&self) -> Vec<BucketStats> {
        let exec = self.lock();
        let mut v: Vec<BucketStats> = self
            .available
            .iter()
            .map(|a| {
                let (runs, rows_used, seconds) = exec.runs.totals(a.bucket);
                BucketStats {
                    name: self.label(a.bucket).0,
                    kind: a.bucket.kind,
                    rows: a.bucket.rows,
                    slots: a.bucket.slots,
                    runs,
                    rows_used,
                    seconds,
                    loaded: exec.pool.is_loaded(a.bucket),
                }
            })
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// A bucket's graph name, e.g. `default.decode.n8.t69` (what responses list in `buckets`).
    fn bucket_name(&self, bucket: Bucket) -> String {
        self.label(bucket).0
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
    engine: &'e Toto1Engine,
    call: Call<'e>,
    exec: &'e mut Exec,
}

impl Graphs for Pool<'_> {
    fn take(&mut self, bucket: Bucket, keep: &[Bucket]) -> Result<GraphRunner> {
        let slot = self.engine.slots.get(&bucket).ok_or_else(|| Error::Session {
            graph: format!("{bucket:?}"),
            message: "not a bucket of this engine".into(),
        })?;
        let need = slot.graph.memory_bytes;
        let weights = self.call.bundle.manifest().resident_weight_bytes();
        let bundle = self.call.bundle;
        let taken = self
            .exec
            .pool
            .take(bucket, need, weights, self.engine.budget, keep, || bundle.load_graph(&slot.graph.file()));
        taken.map_err(|e| match e {
            TakeError::InUse => {
                Error::Session { graph: self.engine.label(bucket).0, message: "already in use by this call".into() }
            }
            TakeError::OverBudget { used } => Error::Engine {
                path: self.call.dir.to_path_buf(),
                message: format!(
                    "bucket {} needs {} beside the weights ({}) and the buckets in use ({}): over the memory budget \
                     ({}); give a larger --memory-budget",
                    self.engine.label(bucket).0,
                    human(need),
                    human(weights),
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
        _ => unreachable!("{}", signature::ONLY_PREFILL_DECODE),
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
            _ => unreachable!("{}", signature::ONLY_PREFILL_DECODE),
        }
    }
    for (name, t) in [signature::ROPE_COS, signature::ROPE_SIN, signature::XPOS_SCALE].iter().zip(&tables) {
        runner.write_f32(name, 0, t)?;
    }
    if runner.has_input(signature::TIME_MASK) {
        let mask = match bucket.kind {
            GraphKind::Prefill => super::session::causal_mask(bucket.slots),
            GraphKind::Decode => super::session::key_mask(&vec![0; n], bucket.slots),
            _ => unreachable!("{}", signature::ONLY_PREFILL_DECODE),
        };
        runner.write_f32(signature::TIME_MASK, 0, &mask)?;
    }
    runner.run()
}

/// The host scaler's settings from the model config.
pub fn scaler_config(model: &ModelConfig) -> ScalerConfig {
    ScalerConfig {
        patch: model.patch_size,
        min_scale: 0.1,
        stabilize_with_global: model.stabilize_with_global,
        scale_factor_exponent: model.scale_factor_exponent,
    }
}
