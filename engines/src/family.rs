//! The seam between the [`Engine`](crate::engine::Engine) handle and a model family's engine, and the types
//! both sides share.
//!
//! A family's engine ([`FamilyEngine`]) is coarse on purpose: it admits requests (its own refusals first, then the
//! shared context policy of [`crate::admission`]), plans and runs a group of them on its graphs, and reports what
//! it ran. How it packs requests onto graphs, and which graphs it holds, stay inside its folder. The handle
//! (`engine.rs`) loads the bundle, builds the family engine through [`crate::registry`], and serialises calls.

use std::any::Any;
use std::path::Path;

use exporter::bucket::Bucket;
use exporter::registry::Family;
use exporter::signature::GraphKind;

use crate::budget::RequestSize;
use crate::bundle::EngineBundle;
use crate::cost::{Estimate, GraphRate};
use crate::error::Result;
use crate::plan::Pins;
use crate::request::{ContextCut, ForecastRequest, ForecastResponse};

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
    pub model: Family,
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
    /// The limits request parsing enforces for this engine, with what its family's requests may hold
    /// ([`crate::request::RequestShape`]). An engine of a family that draws no sample paths
    /// leaves `samples` to [`FamilyEngine::admit`], whose error gives the reason (it predicts quantiles) rather
    /// than a limit of 0.
    pub fn request_limits(&self) -> crate::request::Limits {
        let shape = crate::request::RequestShape::of(self.model.capabilities());
        let max_horizon = self.limits.max_horizon;
        if self.model.capabilities().samples {
            let max_samples = self.limits.max_samples;
            crate::request::Limits { max_samples, quantiles_without_samples: false, shape, max_horizon }
        } else {
            crate::request::Limits {
                max_samples: usize::MAX,
                quantiles_without_samples: true,
                shape,
                max_horizon,
            }
        }
    }
}

/// Options of one `Engine::forecast_with` call.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions<'a> {
    /// Keep each request's per-step mixture parameters (first path), as `totoc verify` compares them.
    pub record_steps: bool,
    /// Run only on these buckets (tests and diagnostics: the same request on a small and a large bucket).
    pub pins: Pins,
    /// Asked between graph runs (each decode step, each prefill): once it says stop, the call's remaining
    /// requests fail with [`Error::Cancelled`](crate::Error::Cancelled) instead of running on.
    pub cancel: Option<Cancel<'a>>,
}

/// Whether the caller still wants the call's results (a server: whether any client of the batch is still
/// waiting within its deadline).
#[derive(Clone, Copy)]
pub struct Cancel<'a>(pub &'a (dyn Fn() -> bool + Sync));

impl Cancel<'_> {
    /// `Err(Cancelled)` once the caller asked to stop; `at` names the graph run about to start.
    pub fn check(self, at: &str) -> Result<()> {
        match (self.0)() {
            true => Err(crate::Error::Cancelled { at: at.to_string() }),
            false => Ok(()),
        }
    }
}

/// Checks an optional [`Cancel`] (see [`Cancel::check`]).
pub fn check_cancel(cancel: Option<Cancel<'_>>, at: &str) -> Result<()> {
    cancel.map_or(Ok(()), |c| c.check(at))
}

impl std::fmt::Debug for Cancel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cancel(..)")
    }
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

/// The per-step outputs of one request's first path, for equivalence checks (`[V][P][K]` each): a mixture
/// family's parameters and the scaler statistics that de-normalise the step.
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

/// A forecast plus, on request, the per-step records of its first path.
#[derive(Debug, Clone)]
pub struct Forecast {
    pub response: ForecastResponse,
    pub steps: Vec<StepRecord>,
}

/// One graph run, for statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunRecord {
    pub bucket: Bucket,
    /// Rows that held real work (the rest were padding).
    pub rows_used: usize,
    pub seconds: f64,
}

/// The runs an engine has made: per bucket (runs, rows used, seconds), and the last call's runs in order: what
/// [`FamilyEngine::bucket_stats`] and [`FamilyEngine::last_call`] report. One per engine, behind its lock.
#[derive(Debug, Default)]
pub struct RunLedger {
    totals: std::collections::HashMap<Bucket, (u64, u64, f64)>,
    last_call: Vec<RunRecord>,
}

impl RunLedger {
    /// A new call begins: the last call's runs are forgotten (the totals stay).
    pub fn start_call(&mut self) {
        self.last_call.clear();
    }

    pub fn record(&mut self, run: RunRecord) {
        let t = self.totals.entry(run.bucket).or_default();
        t.0 += 1;
        t.1 += run.rows_used as u64;
        t.2 += run.seconds;
        self.last_call.push(run);
    }

    /// (runs, rows used, seconds) of `bucket` so far.
    pub fn totals(&self, bucket: Bucket) -> (u64, u64, f64) {
        self.totals.get(&bucket).copied().unwrap_or_default()
    }

    pub fn last_call(&self) -> &[RunRecord] {
        &self.last_call
    }
}

/// What a family engine's call needs from the handle.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    pub bundle: &'a EngineBundle,
    pub info: &'a EngineInfo,
    pub dir: &'a Path,
}

/// A model family's engine behind [`Engine`](crate::engine::Engine): object-safe, `Send + Sync` (the handle
/// is shared between threads; each family serialises its own state).
pub trait FamilyEngine: Send + Sync + std::fmt::Debug {
    /// Loads and runs once the graphs a server warms before it reports ready (every graph, unless the family
    /// keeps start-up proportionate: the others load when a call first needs them); returns how many.
    fn warm_up(&self, call: Call<'_>) -> Result<usize>;

    /// The family's own refusals, then the shared limits and context policy ([`crate::admission::admit`]), then
    /// whether a graph of this engine holds the request. Admitting twice changes nothing.
    fn admit(&self, limits: &EngineLimits, req: &mut ForecastRequest, at: &str)
        -> Result<Option<ContextCut>>;

    /// Admits and forecasts a group of requests: one result per request, in order.
    fn forecast(&self, call: Call<'_>, reqs: Vec<ForecastRequest>, opts: RunOptions)
        -> Vec<Result<Forecast>>;

    // Cost in seconds (see `crate::cost`): the family measures its graphs and plans from counts; the shared code
    // only multiplies. A family that implements neither is bounded by `--max-request-cost` alone (the server
    // logs so at warm-up).

    /// Times every graph the engine runs on placeholder inputs ([`crate::cost::time_runs`]: one untimed run,
    /// then the median of a few), one rate per graph, named as [`Self::estimate`] names them. Graphs are loaded
    /// (and evicted) as the memory budget allows. A server calls this at warm-up.
    fn measure(&self, call: Call<'_>) -> Result<Vec<GraphRate>> {
        let _ = call;
        Ok(Vec::new())
    }

    /// The graph runs a group of series would make, planned and packed as [`Self::forecast`] would run them,
    /// from their counts alone (`sizes`, each `series` series; contexts as admitted, at most `max_context`).
    /// `None` when some series fits no graph of the engine (admission refuses those) or the family cannot say.
    /// The caller bounds the number of series (the request budget, the batch).
    fn estimate(&self, sizes: &[RequestSize]) -> Option<Estimate> {
        let _ = sizes;
        None
    }

    // The bucket reports below default to "no buckets", for a family whose graphs are not shape buckets.

    /// The shape buckets calls run on (none by default: the family names its graphs in [`Self::graph_sets`]).
    fn buckets(&self) -> Vec<Bucket> {
        Vec::new()
    }

    /// A bucket's graph name, e.g. `default.decode.n8.t69`.
    fn bucket_name(&self, bucket: Bucket) -> String {
        format!("{bucket:?}")
    }

    /// What each bucket has run so far.
    fn bucket_stats(&self) -> Vec<BucketStats> {
        Vec::new()
    }

    /// The graph runs of the last call.
    fn last_call(&self) -> Vec<RunRecord> {
        Vec::new()
    }

    /// Names of the engine's graph sets where they are not buckets (`default.n4.s64`).
    fn graph_sets(&self) -> Vec<String> {
        Vec::new()
    }

    /// The family's own type, for the calls only that family has (its folder downcasts).
    fn as_any(&self) -> &dyn Any;
}
