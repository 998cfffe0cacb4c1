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
//! * [`Engine::info`] says what the engine holds (model family, point forecast, limits, target), which a
//!   server reports as its model metadata.
//!
//! The family's own engine sits behind the [`FamilyEngine`] seam, built by `registry::load_family`:
//! this file names no family.

use std::path::{Path, PathBuf};

use exporter::bucket::Bucket;

pub use crate::admission::{admit, check_size};
use crate::budget::{Budget, RequestSize};
use crate::bundle::{EngineBundle, EngineManifest};
use crate::cost::{Estimate, Rates, SharedRates};
use crate::error::{Error, Result};
pub use crate::family::{
    check_cancel, BucketStats, Call, Cancel, EngineInfo, EngineLimits, FamilyEngine, Forecast, RunOptions,
    RunRecord, StepRecord,
};
use crate::memory::human;
use crate::request::{ContextCut, ForecastRequest, ForecastResponse};

/// Series per [`Engine::forecast`] call for callers with many series (`totoc forecast`, the Python package): large
/// enough for the engine to pack its batches, small enough that progress shows and the responses in flight stay
/// bounded. One value for all callers, so the same series in the same order are packed alike and give the same
/// numbers bit for bit.
pub const FORECAST_GROUP: usize = 256;

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

/// A loaded engine (see the module docs).
pub struct Engine {
    dir: PathBuf,
    info: EngineInfo,
    bundle: EngineBundle,
    budget: u64,
    /// The family's engine; it serves calls one at a time (each family's pool sits behind its own lock).
    family: Box<dyn FamilyEngine>,
    /// Its graphs' speed, measured at warm-up (see [`crate::cost`]).
    rates: SharedRates,
    /// sha256 (hex) of the bundle's `manifest.json`, as loaded: every response's `engine_sha256`.
    manifest_sha256: String,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("dir", &self.dir).field("info", &self.info).finish_non_exhaustive()
    }
}

impl Engine {
    /// Opens the engine bundle at `dir` (every file hash-checked; see [`EngineBundle::load`]). No graph is
    /// loaded yet: each is loaded when a call first needs it (or by [`warm_up`](Self::warm_up)).
    pub fn load(dir: &Path, opts: &LoadOptions) -> Result<Self> {
        crate::runtime::set_intra_threads(opts.threads);
        let bundle = EngineBundle::load(dir, opts.ort_lib.as_deref())?;
        // the manifest hashes every other file, so its hash names the engine (checked just now by the load)
        let manifest_sha256 = exporter::fsutil::sha256_file(&dir.join(exporter::manifest::MANIFEST_FILE))?;
        let manifest = bundle.manifest().clone();
        let budget = opts.memory_budget.unwrap_or_else(crate::memory::default_budget);
        let weights_bytes = manifest.resident_weight_bytes();
        if weights_bytes >= budget {
            // the caller's setting, not the bundle, is at fault: a Config error (a caller's mistake by kind)
            return Err(Error::Config {
                message: format!(
                    "engine bundle {}: the weights alone ({}) exceed the memory budget ({}); give a larger \
                     --memory-budget",
                    dir.display(),
                    human(weights_bytes),
                    human(budget)
                ),
            });
        }
        let (limits, family) = crate::registry::load_family(&manifest, dir, budget).map_err(|e| match e {
            Error::Engine { message, .. } => Error::Engine { path: dir.to_path_buf(), message },
            e => e,
        })?;
        let info = EngineInfo {
            model: manifest.model.family(),
            target: manifest.target.name().to_string(),
            ort_version: manifest.ort_version.clone(),
            label: manifest.label(),
            limits,
            has_golden: dir.join(exporter::export::GOLDEN_DIR).is_dir(),
        };
        Ok(Engine {
            dir: dir.to_path_buf(),
            info,
            bundle,
            budget,
            family,
            rates: SharedRates::default(),
            manifest_sha256,
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

    /// The sha256 (hex) of the engine's `manifest.json`: what every response carries as `engine_sha256`.
    pub fn manifest_sha256(&self) -> &str {
        &self.manifest_sha256
    }

    /// The memory budget this engine keeps to (bytes: weights + loaded buckets).
    pub fn memory_budget(&self) -> u64 {
        self.budget
    }

    /// The family's engine, for the calls only that family has (its folder downcasts
    /// [`FamilyEngine::as_any`]).
    pub fn family_engine(&self) -> &dyn FamilyEngine {
        self.family.as_ref()
    }

    /// What a family call needs from this handle.
    pub fn call(&self) -> Call<'_> {
        Call { bundle: &self.bundle, info: &self.info, dir: &self.dir }
    }

    /// The buckets this engine runs calls on (those whose buffers fit its budget beside the weights).
    pub fn buckets(&self) -> Vec<Bucket> {
        self.family.buckets()
    }

    /// Loads every graph and runs each once on placeholder inputs (a server calls this before it reports
    /// ready, so no request pays for a first load), then measures each graph's speed ([`measure_rates`](
    /// Self::measure_rates)). Graphs are evicted again as the budget requires. Returns how many graphs ran.
    pub fn warm_up(&self) -> Result<usize> {
        let graphs = self.family.warm_up(self.call())?;
        self.measure_rates()?;
        Ok(graphs)
    }

    /// Times every graph on placeholder inputs (the family's [`FamilyEngine::measure`]) and keeps the rates
    /// for [`estimate_seconds`](Self::estimate_seconds); returns them (no graphs: the family gives no rates).
    pub fn measure_rates(&self) -> Result<Rates> {
        let rates = Rates::new(self.family.measure(self.call())?);
        self.rates.set((!rates.graphs.is_empty()).then(|| rates.clone()));
        Ok(rates)
    }

    /// The rates measured at warm-up, shared (what a server's model metadata reports).
    pub fn rates(&self) -> &SharedRates {
        &self.rates
    }

    /// The graph runs a group of series (their counts, contexts as admitted) would make, from the family's own
    /// planner ([`FamilyEngine::estimate`]); `None` when the family cannot say.
    pub fn estimate(&self, sizes: &[RequestSize]) -> Option<Estimate> {
        self.family.estimate(sizes)
    }

    /// The seconds those series would hold the engine: [`estimate`](Self::estimate) at the measured rates;
    /// `None` before the rates are measured or when the family cannot say.
    pub fn estimate_seconds(&self, sizes: &[RequestSize]) -> Option<f64> {
        self.rates.seconds(&self.estimate(sizes)?)
    }

    /// Checks `req` against the engine's limits and applies the context policy: a context longer than
    /// `max_context` keeps its last `max_context` points (recorded in `req.context_cut` and returned), unless
    /// `req.strict_context`. Admitting a request twice changes nothing. `at` names the request in errors.
    pub fn admit(&self, req: &mut ForecastRequest, at: &str) -> Result<Option<ContextCut>> {
        self.family.admit(&self.info.limits, req, at)
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

    /// [`forecast`](Self::forecast), keeping each request's per-step records (first path) for equivalence
    /// checks (`totoc verify`).
    pub fn forecast_traced(&self, reqs: Vec<ForecastRequest>, record_steps: bool) -> Vec<Result<Forecast>> {
        self.forecast_with(reqs, RunOptions { record_steps, ..RunOptions::default() })
    }

    /// [`forecast`](Self::forecast) with [`RunOptions`]. A call that succeeds calibrates the cost model's host
    /// factor (what it took against its graph estimate, [`SharedRates::observe`]). Every response names the
    /// engine that made it (`engine_sha256`).
    pub fn forecast_with(&self, reqs: Vec<ForecastRequest>, opts: RunOptions) -> Vec<Result<Forecast>> {
        let graph_seconds =
            if opts.pins == crate::plan::Pins::default() { self.graph_seconds(&reqs) } else { None };
        let start = std::time::Instant::now();
        let mut out = self.family.forecast(self.call(), reqs, opts);
        for f in out.iter_mut().flatten() {
            f.response.engine_sha256 = Some(self.manifest_sha256.clone());
        }
        if let Some(g) = graph_seconds.filter(|_| out.iter().all(Result::is_ok)) {
            self.rates.observe(g, start.elapsed().as_secs_f64());
        }
        out
    }

    /// The graphs' own seconds of a call of `reqs` (their contexts as the engine keeps them), once rates are
    /// measured.
    fn graph_seconds(&self, reqs: &[ForecastRequest]) -> Option<f64> {
        if !self.rates.is_measured() {
            return None;
        }
        let max = self.info.limits.max_context;
        let sizes: Vec<RequestSize> = reqs
            .iter()
            .map(|r| RequestSize { context: r.context_len().min(max), ..RequestSize::of(r) })
            .collect();
        self.rates.graph_seconds(&self.family.estimate(&sizes)?)
    }

    /// The engine's graph sets where they are not shape buckets (`default.n4.s64`); empty otherwise.
    pub fn graph_sets(&self) -> Vec<String> {
        self.family.graph_sets()
    }

    /// The graph runs of the last call (bounded by that call's size).
    pub fn last_call(&self) -> Vec<RunRecord> {
        self.family.last_call()
    }

    /// What each bucket has run so far (one fixed-size record per bucket).
    pub fn bucket_stats(&self) -> Vec<BucketStats> {
        self.family.bucket_stats()
    }

    /// A bucket's graph name, e.g. `default.decode.n8.t69` (what responses list in `buckets`).
    pub fn bucket_name(&self, bucket: Bucket) -> String {
        self.family.bucket_name(bucket)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_are_shareable_between_threads() {
        fn send<T: Send>() {}
        send::<crate::graph::GraphRunner>();
        fn sync<T: Send + Sync>() {}
        sync::<Engine>();
    }
}
