//! Golden Toto 2.0 cases (`tests/fixtures/toto2/<config>/cases/*.json`, written by
//! `tests/reference/make_toto2_fixtures.py` from toto-2's `Toto2Model.forecast`) and how `totoc verify` checks
//! an engine against them.
//!
//! A case holds the `request`, the `options` the reference ran with (`decode_block`: block decoding, or `null`
//! for the single pass) and the `reference`: the nine sorted quantiles `[9][V][H]` and the median `[V][H]`. The
//! case runs on the engine's profiles with the same `decode_block` (block decoding gives other forecasts than a
//! single pass), and the median and all nine quantiles must match within `1e-4·σ + 1e-6·|ref|` per element (σ:
//! the variate's context standard deviation), the acceptance bound. fp16 (GPU or the CPU emulation) and
//! int8 engines are held to the project's reduced-precision rule, `1e-2·σ_eff + 1e-3·|ref|` with
//! `σ_eff = max(σ, s)`, `s` the variate's scaler scale in the reference's first block (as for Toto 1.0: a nearly
//! constant context is forecast in units of the scaler's floor, not of its σ); see [`Toto2Tolerance`].

use std::path::Path;

use serde::Deserialize;

use crate::compare::{compare, context_sigma, Report, Scale, Tolerance};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::request::{parse_request, ForecastRequest, Limits, Overrides};
use exporter::signature::Precision;

#[derive(Deserialize)]
struct CaseFile {
    request: serde_json::Value,
    #[serde(default)]
    options: Options,
    reference: Reference,
}

#[derive(Deserialize, Default)]
struct Options {
    decode_block: Option<usize>,
}

#[derive(Deserialize)]
struct Reference {
    quantiles: Vec<Vec<Vec<f32>>>,
    median: Vec<Vec<f32>>,
    /// Per decoded block, the scaler statistics toto-2 used (cases written before they were recorded have none).
    #[serde(default)]
    blocks: Vec<RefBlock>,
}

#[derive(Deserialize)]
struct RefBlock {
    scale: Vec<f32>,
}

/// The tolerance a Toto 2.0 engine's median and quantiles are held to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Toto2Tolerance {
    pub tol: Tolerance,
    /// Scale the σ term with `max(σ, scaler scale)` instead of σ (reduced precisions; module docs).
    pub sigma_at_least_scale: bool,
}

impl Toto2Tolerance {
    /// fp32: `1e-4·σ + 1e-6·|ref|`; fp16 and int8: `1e-2·max(σ, scaler scale) + 1e-3·|ref|`.
    pub fn for_precision(precision: Precision) -> Self {
        match precision {
            Precision::Fp32 => Toto2Tolerance { tol: Tolerance::default(), sigma_at_least_scale: false },
            Precision::Fp16 | Precision::Int8 => Toto2Tolerance {
                tol: Tolerance { sigma_rel: 1e-2, ref_rel: 1e-3 },
                sigma_at_least_scale: true,
            },
        }
    }

    /// `1e-4·σ + 1e-6·|ref|`-style description, for reports.
    pub fn describe(&self) -> String {
        let sigma = if self.sigma_at_least_scale { "max(σ, scaler scale)" } else { "σ" };
        format!("{:e}·{sigma} + {:e}·|ref|", self.tol.sigma_rel, self.tol.ref_rel)
    }
}

/// One golden Toto 2.0 case.
pub struct Toto2Case {
    pub name: String,
    pub request: ForecastRequest,
    pub decode_block: Option<usize>,
    /// `[9][V][H]` sorted knots.
    pub quantiles: Vec<Vec<Vec<f32>>>,
    /// `[V][H]`.
    pub median: Vec<Vec<f32>>,
    /// `[V]`: the scaler scale of the reference's first block (empty when the case does not record it).
    pub scaler_scale: Vec<f32>,
}

impl Toto2Case {
    /// Reads a case file; errors name the file.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let bad = |message: String| Error::Engine { path: path.to_path_buf(), message };
        let f: CaseFile = serde_json::from_slice(&bytes).map_err(|e| {
            bad(format!("not a Toto 2.0 golden case ({e}): it needs `request` and `reference`"))
        })?;
        let at = path.display().to_string();
        let request = parse_request(
            &f.request.to_string(),
            &at,
            &Overrides::default(),
            &Limits { quantiles_without_samples: true, ..Limits::default() },
        )?;
        if f.reference.quantiles.len() != exporter::toto2::KNOTS.len() {
            return Err(bad(format!(
                "reference has {} quantiles, not the nine knots",
                f.reference.quantiles.len()
            )));
        }
        Ok(Toto2Case {
            name: path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
            request,
            decode_block: f.options.decode_block,
            scaler_scale: f.reference.blocks.first().map(|b| b.scale.clone()).unwrap_or_default(),
            quantiles: f.reference.quantiles,
            median: f.reference.median,
        })
    }
}

/// [`Engine::forecast`](crate::engine::Engine::forecast) with each request's full nine sorted knots and (with
/// `record`) its per-block raw knots and scaler statistics, as `totoc verify` compares them; `decode_block`
/// `Some(b)` runs only on the profiles with that `decode_block`. On an engine of another family every request
/// fails with an error saying so.
pub fn forecast_traced(
    engine: &crate::engine::Engine,
    reqs: Vec<ForecastRequest>,
    record: bool,
    decode_block: Option<Option<usize>>,
) -> Vec<Result<super::Toto2Forecast>> {
    match engine.family_engine().as_any().downcast_ref::<super::engine::Toto2Engine>() {
        Some(t2) => {
            let trace = if record { super::Trace::Blocks } else { super::Trace::Knots };
            super::engine::admit_and_run(t2, engine.call(), reqs, trace, decode_block, None)
        }
        None => reqs
            .iter()
            .map(|_| {
                Err(Error::Engine {
                    path: engine.dir().to_path_buf(),
                    message: format!(
                        "a {} engine has no quantile knots; use forecast_traced",
                        engine.info().model.capabilities().title
                    ),
                })
            })
            .collect(),
    }
}

/// Runs `case` on `engine` (on its profiles with the case's `decode_block`) and compares the median and the
/// nine quantiles with the reference within the tolerance of the engine's precision ([`Toto2Tolerance`]): one
/// report per output (`median`, `q0.1` … `q0.9`).
pub fn check_case(engine: &Engine, case: &Toto2Case) -> Result<Vec<Report>> {
    check_case_with(engine, case, &Toto2Tolerance::for_precision(engine.manifest().precision))
}

/// [`check_case`] within `tol`.
pub fn check_case_with(engine: &Engine, case: &Toto2Case, tol: &Toto2Tolerance) -> Result<Vec<Report>> {
    let f = forecast_traced(engine, vec![case.request.clone()], false, Some(case.decode_block))
        .pop()
        .expect("one result per request")
        .map_err(|e| match e {
            Error::Unservable { at, why } => Error::Unservable {
                at,
                why: format!(
                    "{why}; the case ran with decode_block {:?}: export a profile with that decode_block",
                    case.decode_block
                ),
            },
            e => e,
        })?;
    let v = case.request.variates();
    let mut sigmas: Vec<f64> = case.request.target.iter().map(|x| context_sigma(x)).collect();
    if tol.sigma_at_least_scale {
        if case.scaler_scale.len() != sigmas.len() {
            return Err(Error::Engine {
                path: engine.dir().to_path_buf(),
                message: format!(
                    "case {} records no scaler scale per variate (`reference.blocks[0].scale`), which the {} \
                     tolerance needs: regenerate it with tests/reference/make_toto2_fixtures.py",
                    case.name,
                    tol.describe()
                ),
            });
        }
        for (s, c) in sigmas.iter_mut().zip(&case.scaler_scale) {
            *s = s.max(f64::from(*c));
        }
    }
    let tol = tol.tol;
    let flat = |x: &[Vec<f32>]| x.concat();
    let mut out = Vec::new();
    let median = f.response.median.as_deref().unwrap_or(&[]);
    out.push(compare("median", 0, &flat(median), &flat(&case.median), v, Scale::PerVariate(&sigmas), &tol)?);
    for (q, (got, want)) in f.knots.iter().zip(&case.quantiles).enumerate() {
        let name = format!("q{:.1}", exporter::toto2::KNOTS[q]);
        out.push(compare(&name, 0, &flat(got), &flat(want), v, Scale::PerVariate(&sigmas), &tol)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduced_precisions_get_the_reduced_rule_with_sigma_at_least_the_scale() {
        let f32 = Toto2Tolerance::for_precision(Precision::Fp32);
        assert_eq!((f32.tol.sigma_rel, f32.tol.ref_rel, f32.sigma_at_least_scale), (1e-4, 1e-6, false));
        for p in [Precision::Fp16, Precision::Int8] {
            let t = Toto2Tolerance::for_precision(p);
            assert_eq!((t.tol.sigma_rel, t.tol.ref_rel, t.sigma_at_least_scale), (1e-2, 1e-3, true));
            assert_eq!(t.describe(), "1e-2·max(σ, scaler scale) + 1e-3·|ref|");
        }
        assert_eq!(f32.describe(), "1e-4·σ + 1e-6·|ref|");
    }

    #[test]
    fn a_case_reads_its_first_blocks_scaler_scale() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        let q: Vec<Vec<Vec<f32>>> = (0..9).map(|_| vec![vec![1.0; 32]]).collect();
        let (target, median) = (vec![vec![1.0f32; 64]], vec![vec![1.0f32; 32]]);
        let case = serde_json::json!({
            "request": {"target": target, "horizon": 32},
            "reference": {"quantiles": q, "median": median, "blocks": [{"scale": [2.5]}, {"scale": [9.0]}]}
        });
        std::fs::write(&path, case.to_string()).unwrap();
        assert_eq!(Toto2Case::read(&path).unwrap().scaler_scale, [2.5]);
    }
}
