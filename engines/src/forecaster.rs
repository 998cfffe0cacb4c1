//! [`Forecaster`]: an engine bundle plus the forecast session — picks a profile per request, batches requests of
//! the same profile, and returns one forecast per request, in request order.

use exporter::config::ModelConfig;

use crate::engine_bundle::{EngineBundle, EngineProfile};
use crate::error::{Error, Result};
use crate::request::ForecastRequest;
use crate::scaler::ScalerConfig;
use crate::session::{cost, fits, forecast_chunk, ChunkConfig, Forecast, StepTimings};

/// Serves forecast requests from one engine bundle.
pub struct Forecaster {
    bundle: EngineBundle,
    scaler: ScalerConfig,
    /// Wall time of every graph run so far (cleared by the caller when it wants).
    pub timings: StepTimings,
}

impl Forecaster {
    pub fn new(bundle: EngineBundle) -> Self {
        let scaler = scaler_config(&bundle.manifest().model);
        Self { bundle, scaler, timings: StepTimings::default() }
    }

    pub fn bundle(&self) -> &EngineBundle {
        &self.bundle
    }

    pub fn bundle_mut(&mut self) -> &mut EngineBundle {
        &mut self.bundle
    }

    /// Engine label for responses, e.g. `cpu (onnxruntime 1.31.1)`.
    pub fn engine_label(&self) -> String {
        format!("{} (onnxruntime {})", self.bundle.target().name(), self.bundle.manifest().ort_version)
    }

    /// The cheapest profile whose static shapes fit `req`, or an error saying what does not fit where.
    pub fn choose_profile(&self, req: &ForecastRequest) -> Result<&EngineProfile> {
        self.choose_profile_for(0, req)
    }

    fn choose_profile_for(&self, index: usize, req: &ForecastRequest) -> Result<&EngineProfile> {
        let profiles = &self.bundle.manifest().profiles;
        profiles
            .iter()
            .filter(|p| fits(&p.dims, p.profile.samples, req))
            .min_by_key(|p| cost(&p.dims, req))
            .ok_or_else(|| Error::NoProfile { request: index + 1, why: no_profile_reason(profiles, req) })
    }

    /// Forecasts every request (one response each, in order). `record_steps` keeps the per-step mixture
    /// parameters of each request's first path (for `verify`).
    pub fn forecast(&mut self, reqs: &[ForecastRequest], record_steps: bool) -> Result<Vec<Forecast>> {
        let mut chosen = Vec::with_capacity(reqs.len());
        for (i, r) in reqs.iter().enumerate() {
            chosen.push(self.choose_profile_for(i, r)?.profile.name.clone());
        }
        let label = self.engine_label();
        let mut results: Vec<Option<Forecast>> = (0..reqs.len()).map(|_| None).collect();
        let mut names: Vec<String> = chosen.clone();
        names.sort();
        names.dedup();
        for name in names {
            let idx: Vec<usize> = (0..reqs.len()).filter(|&i| chosen[i] == name).collect();
            let pe = self.bundle.profile(&name)?;
            let dims = pe.profile.dims;
            // Series of one chunk share the prefill batch and the decode rows (one per mean path, `samples` per
            // sampled series).
            let mut chunks: Vec<Vec<usize>> = Vec::new();
            let (mut cur, mut rows) = (Vec::new(), 0);
            for i in idx {
                let need = reqs[i].samples.max(1);
                if !cur.is_empty() && (cur.len() == dims.batch || rows + need > dims.decode_rows) {
                    chunks.push(std::mem::take(&mut cur));
                    rows = 0;
                }
                cur.push(i);
                rows += need;
            }
            if !cur.is_empty() {
                chunks.push(cur);
            }
            let (prefill, decode) = pe.runners();
            for chunk in chunks {
                let batch: Vec<&ForecastRequest> = chunk.iter().map(|&i| &reqs[i]).collect();
                let cfg = ChunkConfig {
                    dims: &dims,
                    scaler: &self.scaler,
                    profile: &name,
                    engine: &label,
                    record_steps,
                };
                let out = forecast_chunk(prefill, decode, &cfg, &batch, &mut self.timings)?;
                for (i, f) in chunk.into_iter().zip(out) {
                    results[i] = Some(f);
                }
            }
        }
        Ok(results.into_iter().map(|f| f.expect("every request forecast")).collect())
    }
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

fn no_profile_reason(profiles: &[EngineProfile], req: &ForecastRequest) -> String {
    let max = |f: fn(&EngineProfile) -> usize| profiles.iter().map(f).max().unwrap_or(0);
    let mut why = Vec::new();
    if req.variates() > max(|p| p.profile.variates) {
        why.push(format!("{} variates (max {})", req.variates(), max(|p| p.profile.variates)));
    }
    if req.context_len() > max(|p| p.profile.context) {
        why.push(format!("context {} (max {})", req.context_len(), max(|p| p.profile.context)));
    }
    if req.horizon > max(|p| p.profile.horizon) {
        why.push(format!("horizon {} (max {})", req.horizon, max(|p| p.profile.horizon)));
    }
    if req.samples > max(|p| p.profile.samples) {
        why.push(format!("{} samples (max {})", req.samples, max(|p| p.profile.samples)));
    }
    if why.is_empty() {
        why.push(
            "no single profile covers this combination of variates, context, horizon and samples".into(),
        );
    }
    why.join(", ")
}
