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

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::engine_bundle::{EngineBundle, EngineManifest};
use crate::error::{Error, Result};
use crate::forecaster::Forecaster;
use crate::request::{ContextCut, ForecastRequest, ForecastResponse};
use crate::session::Forecast;

/// How to load an engine.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// `--ort-lib` (see [`crate::runtime`]).
    pub ort_lib: Option<PathBuf>,
    /// CPU intra-op threads of the process (default: the engine's recorded count, else physical cores).
    pub threads: Option<usize>,
    /// Bytes the engine may use for its graphs' buffers (KV caches, inputs, outputs); default: the memory
    /// limit of this container (cgroup) or machine.
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

/// A loaded engine (see the module docs).
pub struct Engine {
    dir: PathBuf,
    info: EngineInfo,
    manifest: EngineManifest,
    forecaster: Mutex<Forecaster>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("dir", &self.dir).field("info", &self.info).finish_non_exhaustive()
    }
}

impl Engine {
    /// Opens the engine bundle at `dir` (every file hash-checked; see [`EngineBundle::load`]).
    pub fn load(dir: &Path, opts: &LoadOptions) -> Result<Self> {
        crate::runtime::set_intra_threads(opts.threads);
        let bundle = EngineBundle::load(dir, opts.ort_lib.as_deref())?;
        let manifest = bundle.manifest().clone();
        let max = |f: fn(&crate::engine_bundle::EngineProfile) -> usize| {
            manifest.profiles.iter().map(f).max().unwrap_or(0)
        };
        let limits = EngineLimits {
            max_variates: max(|p| p.profile.variates),
            max_context: max(|p| p.profile.context),
            max_horizon: max(|p| p.profile.horizon),
            max_samples: max(|p| p.profile.samples),
        };
        let forecaster = Forecaster::new(bundle);
        let info = EngineInfo {
            model: ModelFamily::Toto1,
            target: manifest.target.name().to_string(),
            ort_version: manifest.ort_version.clone(),
            label: forecaster.engine_label(),
            limits,
            has_golden: dir.join(exporter::export::GOLDEN_DIR).is_dir(),
        };
        Ok(Engine { dir: dir.to_path_buf(), info, manifest, forecaster: Mutex::new(forecaster) })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn info(&self) -> &EngineInfo {
        &self.info
    }

    pub fn manifest(&self) -> &EngineManifest {
        &self.manifest
    }

    /// Loads every graph of the engine and runs each once (a server calls this before it reports ready, so no
    /// request pays for a first load). Returns how many graphs ran.
    pub fn warm_up(&self) -> Result<usize> {
        let mut forecaster = self.forecaster.lock().unwrap_or_else(|p| p.into_inner());
        let profiles = self.manifest.profiles.clone();
        for p in &profiles {
            let req = ForecastRequest {
                id: None,
                target: vec![vec![Some(1.0); p.profile.context]; p.profile.variates],
                id_mask: vec![0; p.profile.variates],
                horizon: p.profile.horizon,
                samples: p.profile.samples,
                quantiles: Vec::new(),
                seed: 0,
                strict_context: false,
                context_cut: None,
            };
            forecaster.forecast(std::slice::from_ref(&req), false)?;
        }
        Ok(2 * profiles.len())
    }

    /// Checks `req` against the engine's limits and applies the context policy: a context longer than
    /// `max_context` keeps its last `max_context` points (recorded in `req.context_cut` and returned), unless
    /// `req.strict_context`. Admitting a request twice changes nothing. `at` names the request in errors.
    pub fn admit(&self, req: &mut ForecastRequest, at: &str) -> Result<Option<ContextCut>> {
        admit(&self.info.limits, req, at)
    }

    /// Forecasts a group of requests: one result per request, in order (see the module docs). Each request is
    /// admitted first ([`admit`](Self::admit)), so a context cut is reported in its response.
    pub fn forecast(&self, reqs: Vec<ForecastRequest>) -> Vec<Result<ForecastResponse>> {
        self.forecast_traced(reqs, false).into_iter().map(|r| r.map(|f| f.response)).collect()
    }

    /// [`forecast`](Self::forecast), keeping each request's per-step mixture parameters (first path) for
    /// equivalence checks (`totoc verify`).
    pub fn forecast_traced(&self, reqs: Vec<ForecastRequest>, record_steps: bool) -> Vec<Result<Forecast>> {
        let mut out: Vec<Option<Result<Forecast>>> = (0..reqs.len()).map(|_| None).collect();
        let mut admitted = Vec::new();
        let mut index = Vec::new();
        let mut forecaster = self.forecaster.lock().unwrap_or_else(|p| p.into_inner());
        for (i, mut req) in reqs.into_iter().enumerate() {
            let at = format!("request {}", i + 1);
            let admitted_req =
                self.admit(&mut req, &at).and_then(|_| forecaster.choose_profile(&req).map(|_| ()));
            match admitted_req {
                Ok(()) => {
                    admitted.push(req);
                    index.push(i);
                }
                Err(e) => out[i] = Some(Err(e)),
            }
        }
        match forecaster.forecast(&admitted, record_steps) {
            Ok(results) => {
                for ((i, mut f), req) in index.into_iter().zip(results).zip(&admitted) {
                    f.response.context_truncated = req.context_cut;
                    out[i] = Some(Ok(f));
                }
            }
            Err(e) => {
                let message = e.to_string();
                for i in index {
                    out[i] = Some(Err(Error::Session { graph: "forecast".into(), message: message.clone() }));
                }
            }
        }
        out.into_iter().map(|r| r.expect("every request answered")).collect()
    }
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
        fn sync<T: Send + Sync>() {}
        sync::<Engine>();
    }
}
