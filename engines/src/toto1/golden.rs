//! Golden cases: toto-ts reference outputs (written by `tests/reference/regen_fixtures.py`) and the checks that
//! compare an engine against them — the mixture parameters of every step and the mean forecast, on the
//! deterministic mean path.
//!
//! A case file is `{"request": <request>, "reference": {"mean": [V][H], "steps": [{"df", "loc", "scale",
//! "weights": [V][P][K], "scaler_loc", "scaler_scale": [V], ...}], ...}}` (see tests/reference/README.md).

use std::path::Path;

use serde::Deserialize;

use crate::compare::{compare, context_sigma, Report, Scale, Tolerance};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::request::{parse_request, ForecastRequest, Limits, Overrides};
use crate::toto1::session::Forecast;

/// Reference outputs of one step.
#[derive(Debug, Clone, Deserialize)]
pub struct RefStep {
    pub df: Vec<Vec<Vec<f32>>>,
    pub loc: Vec<Vec<Vec<f32>>>,
    pub scale: Vec<Vec<Vec<f32>>>,
    pub weights: Vec<Vec<Vec<f32>>>,
    pub scaler_loc: Vec<f32>,
    pub scaler_scale: Vec<f32>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Reference {
    pub mean: Vec<Vec<f32>>,
    pub steps: Vec<RefStep>,
    #[serde(default)]
    pub samples: Option<Vec<Vec<Vec<f32>>>>,
}

/// One golden case.
#[derive(Debug, Clone)]
pub struct GoldenCase {
    pub name: String,
    pub request: ForecastRequest,
    pub reference: Reference,
}

#[derive(Deserialize)]
struct RawCase {
    request: serde_json::Value,
    reference: Reference,
}

impl GoldenCase {
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let raw: RawCase = serde_json::from_str(&text).map_err(|e| Error::RequestSyntax {
            at: path.display().to_string(),
            message: format!("not a golden case file ({e})"),
        })?;
        let at = path.display().to_string();
        let request =
            parse_request(&raw.request.to_string(), &at, &Overrides::default(), &Limits::default())?;
        let name = path.file_stem().map_or_else(|| at.clone(), |s| s.to_string_lossy().to_string());
        Ok(GoldenCase { name, request, reference: raw.reference })
    }

    /// The case as a mean-path request (the steps are recorded on the mean path for sampled cases too).
    pub fn mean_request(&self) -> ForecastRequest {
        ForecastRequest { samples: 0, quantiles: Vec::new(), ..self.request.clone() }
    }
}

/// Tolerances: the forecast mean in original units against each variate's context σ; the mixture parameters,
/// which are in scaled units (σ ≈ 1 by construction), against an absolute 1e-4.
#[derive(Default)]
pub struct Tolerances {
    pub mean: Tolerance,
    pub params: Tolerance,
    /// Scale the mean's tolerance with `max(σ, s)`, `s` the scaler scale that de-normalises the forecast, instead
    /// of σ alone (fp16; see [`Tolerances::fp16`]).
    pub sigma_at_least_scale: bool,
}

impl Tolerances {
    /// fp16 engines (GPU, or the CPU emulation): the mean within `1e-2·σ + 1e-3·|ref|`, with σ at least the
    /// scaler's scale — a nearly constant variate (σ ≪ √0.1, toto's `minimum_scale` floor) is forecast in units
    /// of that floor, where fp16's rounding alone exceeds 1e-2·σ (measured: `engines/tests/fp16.rs`); the
    /// mixture parameters (scaled units) within `2e-2 + 1e-2·|ref|` (measured worst on the fixtures: 5.8e-3).
    pub fn fp16() -> Self {
        Tolerances {
            mean: Tolerance { sigma_rel: 1e-2, ref_rel: 1e-3 },
            params: Tolerance { sigma_rel: 2e-2, ref_rel: 1e-2 },
            sigma_at_least_scale: true,
        }
    }

    /// int8 weight-only engines: the same mean rule as fp16 (`1e-2·max(σ, scaler scale) + 1e-3·|ref|`; the
    /// scaled-unit forecast carries the weights' ~0.5% quantization error, as fp16's carries its rounding); the
    /// mixture parameters within `2e-2 + 1e-2·|ref|` (measured worst on the fixtures: 9.5e-3,
    /// `engines/tests/int8.rs`).
    pub fn int8() -> Self {
        Tolerances {
            mean: Tolerance { sigma_rel: 1e-2, ref_rel: 1e-3 },
            params: Tolerance { sigma_rel: 2e-2, ref_rel: 1e-2 },
            sigma_at_least_scale: true,
        }
    }

    /// The tolerances an engine of `precision` is verified with.
    pub fn for_precision(precision: exporter::signature::Precision) -> Self {
        match precision {
            exporter::signature::Precision::Fp32 => Tolerances::default(),
            exporter::signature::Precision::Fp16 => Tolerances::fp16(),
            exporter::signature::Precision::Int8 => Tolerances::int8(),
        }
    }

    /// `1e-4·σ + 1e-6·|ref|`-style description of the mean's tolerance, for reports.
    pub fn describe(&self) -> String {
        let sigma = if self.sigma_at_least_scale { "max(σ, scaler scale)" } else { "σ" };
        format!("{:e}·{sigma} + {:e}·|ref|", self.mean.sigma_rel, self.mean.ref_rel)
    }
}

/// Runs a case's mean path through the engine and compares every step's mixture parameters and the mean
/// forecast with the reference. Returns one report per output and step (`mean` last).
pub fn check_case(engine: &Engine, case: &GoldenCase, tol: &Tolerances) -> Result<Vec<Report>> {
    let req = case.mean_request();
    let out = engine.forecast_traced(vec![req], true).remove(0)?;
    compare_forecast(&out, case, tol)
}

/// Compares a mean-path forecast made with `record_steps` against the case's reference.
pub fn compare_forecast(out: &Forecast, case: &GoldenCase, tol: &Tolerances) -> Result<Vec<Report>> {
    let req = case.mean_request();
    let v = req.variates();
    let mut reports = Vec::new();
    let mut sigma: Vec<f64> = req.target.iter().map(|s| context_sigma(s)).collect();
    if let (true, Some(step0)) = (tol.sigma_at_least_scale, case.reference.steps.first()) {
        for (s, scale) in sigma.iter_mut().zip(&step0.scaler_scale) {
            *s = s.max(f64::from(*scale));
        }
    }
    if out.steps.len() != case.reference.steps.len() {
        return Err(Error::Length {
            what: format!("{}: decode steps", case.name),
            expected: case.reference.steps.len(),
            actual: out.steps.len(),
        });
    }
    for (i, (got, want)) in out.steps.iter().zip(&case.reference.steps).enumerate() {
        for (name, a, r) in [
            ("df", &got.df, &want.df),
            ("loc", &got.loc, &want.loc),
            ("scale", &got.scale, &want.scale),
            ("weights", &got.weights, &want.weights),
        ] {
            let r: Vec<f32> = r.iter().flatten().flatten().copied().collect();
            reports.push(compare(name, i, a, &r, v, Scale::Absolute(1.0), &tol.params)?);
        }
        // From step 1 on the causal scaler also reads the decoded patches, so its statistics carry the forecast's
        // error: they are held to the mean's tolerance in the mean's units (σ per variate).
        for (name, a, r) in [
            ("scaler_loc", &got.scaler_loc, &want.scaler_loc),
            ("scaler_scale", &got.scaler_scale, &want.scaler_scale),
        ] {
            reports.push(compare(name, i, a, r, v, Scale::PerVariate(&sigma), &tol.mean)?);
        }
    }
    let a: Vec<f32> = out.response.point().iter().flatten().copied().collect();
    let r: Vec<f32> = case.reference.mean.iter().flatten().copied().collect();
    reports.push(compare(
        "mean",
        out.steps.len().saturating_sub(1),
        &a,
        &r,
        v,
        Scale::PerVariate(&sigma),
        &tol.mean,
    )?);
    Ok(reports)
}
