//! A Toto 2.0 request's context as the graphs take it: truncated to whole patches, the last patch imputed, each
//! patch scaled with its causal statistics and squashed with `asinh`.
//!
//! What toto-2 2.0.0's `Toto2Model.forecast` does (`toto2/model.py`) and where totoc departs from it:
//! * **Whole patches.** forecast() needs a context that is a multiple of the patch (32 points; otherwise einops
//!   raises). totoc keeps the most recent `⌊T/P⌋·P` points, as toto-2's GluonTS wrapper does
//!   (`Toto2GluonTSModel.instance_splitter`); a context shorter than one patch is an error naming the minimum.
//! * **Last patch imputed (departure).** forecast() forces every point of the last context patch to "observed"
//!   (`_prepare_forecast_inputs`), so a missing point there enters as its placeholder value (0, or NaN). totoc
//!   forward-fills those points from the last observed point before them in the given context (0 when there is
//!   none), which is what the GluonTS wrapper's default `imputation_internal="ffill"` feeds forecast().
//! * **Scaling.** `PatchedCausalStdScaler` in f64 ([`CausalScaler::with_floor`]`(0, 1e-6)`): each patch uses the
//!   statistics of its last point; the model sees `asinh((x − loc)/scale)` for observed points and 0 for missing
//!   ones, next to a missing indicator (`1 − mask`).
//! * **Fully unobserved patches.** A context patch without any observed point gets group id −1 in toto-2
//!   (`base_gids`), which isolates it in the time layers; [`PreparedSeries::observed`] records which.

use crate::error::{Error, Result};
use crate::host::scaler::{CausalScaler, PatchStats};
use crate::request::ForecastRequest;

/// Toto 2.0's scale floor (`PatchedCausalStdScaler(minimum_scale=1e-6)`).
pub const SCALE_FLOOR: f64 = 1e-6;

/// One variate's context, ready for the graph.
#[derive(Debug, Clone)]
pub struct PreparedSeries {
    /// `asinh((x − loc)/scale)` per point of the kept context (`patches·P`), 0 where missing.
    pub scaled: Vec<f32>,
    /// 1.0 where a point is missing, else 0.0.
    pub missing: Vec<f32>,
    /// Per patch: whether it has an observed point (else toto-2's group id −1).
    pub observed: Vec<bool>,
    /// The scaler after the context: its last statistics de-normalise the first forecast block, and
    /// [`CausalScaler::push_patch`] continues it with fed-back medians.
    pub scaler: CausalScaler,
    /// Points of the last patch that were forward-filled.
    pub filled: usize,
    /// Smallest and largest value the model sees as observed (for the optional quantile cap).
    pub extremes: Option<(f32, f32)>,
}

/// A request's prepared context.
#[derive(Debug, Clone)]
pub struct PreparedContext {
    pub series: Vec<PreparedSeries>,
    /// Context points given and used (the most recent `used`).
    pub given: usize,
    pub used: usize,
}

impl PreparedContext {
    /// Context patches (S_r).
    pub fn patches(&self, patch: usize) -> usize {
        self.used / patch
    }
}

/// Prepares `req`'s context for patch size `patch` (see the module docs); `at` names the request in errors.
pub fn prepare(req: &ForecastRequest, patch: usize, at: &str) -> Result<PreparedContext> {
    let given = req.context_len();
    let used = given / patch * patch;
    if used == 0 {
        return Err(Error::ContextTooShort { at: at.to_string(), given, minimum: patch });
    }
    let series = req.target.iter().map(|x| prepare_series(x, used, patch)).collect();
    Ok(PreparedContext { series, given, used })
}

/// The last `used` points of `x`, with its last patch forward-filled.
fn prepare_series(x: &[Option<f32>], used: usize, patch: usize) -> PreparedSeries {
    let start = x.len() - used;
    let last_patch = used - patch;
    // the last observed value at or before each point of the last patch, over the whole given context
    let mut fill = x[..start + last_patch].iter().rev().find_map(|v| *v).unwrap_or(0.0);
    let mut filled = 0;
    let points: Vec<Option<f32>> = (0..used)
        .map(|j| {
            let v = x[start + j];
            if j < last_patch {
                return v;
            }
            match v {
                Some(v) => {
                    fill = v;
                    Some(v)
                }
                None => {
                    filled += 1;
                    Some(fill)
                }
            }
        })
        .collect();
    let mut scaler = CausalScaler::with_floor(0.0, SCALE_FLOOR);
    let mut out = PreparedSeries {
        scaled: Vec::with_capacity(used),
        missing: Vec::with_capacity(used),
        observed: Vec::with_capacity(used / patch),
        scaler,
        filled,
        extremes: None,
    };
    for v in points.iter().flatten() {
        let (lo, hi) = out.extremes.unwrap_or((*v, *v));
        out.extremes = Some((lo.min(*v), hi.max(*v)));
    }
    for chunk in points.chunks(patch) {
        for &v in chunk {
            scaler.push_point(v);
        }
        let stats = scaler.end_patch();
        out.observed.push(chunk.iter().any(Option::is_some));
        for &v in chunk {
            out.scaled.push(v.map_or(0.0, |v| scaled_value(v, stats)));
            out.missing.push(if v.is_some() { 0.0 } else { 1.0 });
        }
    }
    out.scaler = scaler;
    out
}

/// `asinh((x − loc)/scale)`: the division in f32 as torch does it, asinh correctly rounded.
pub fn scaled_value(x: f32, s: PatchStats) -> f32 {
    f64::from((x - s.loc) / s.scale).asinh() as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(target: Vec<Vec<Option<f32>>>) -> ForecastRequest {
        let v = target.len();
        ForecastRequest {
            id: None,
            target,
            id_mask: vec![0; v],
            horizon: 4,
            samples: 0,
            quantiles: Vec::new(),
            seed: 0,
            strict_context: false,
            context_cut: None,
            ..ForecastRequest::default()
        }
    }

    #[test]
    fn truncates_to_whole_patches_and_fills_the_last_one() {
        // P = 2, 7 points → the last 6 (3 patches); points 4 and 6 of the kept window are missing
        let x = vec![Some(9.0), Some(1.0), Some(2.0), None, None, Some(5.0), None];
        let c = prepare(&req(vec![x]), 2, "r").unwrap();
        assert_eq!((c.given, c.used, c.patches(2)), (7, 6, 3));
        let s = &c.series[0];
        // patch 1 = [None, None] stays missing (and unobserved); last patch [5, None] → [5, 5]
        assert_eq!(s.observed, [true, false, true]);
        assert_eq!(s.missing, [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
        assert_eq!(s.filled, 1);
        assert_eq!(s.scaled[2..4], [0.0, 0.0]);
        // the scaler saw 1, 2, 5, 5: mean 3.25
        assert_eq!(s.scaler.last_stats().loc, 3.25);
    }

    #[test]
    fn fill_reaches_back_before_the_kept_window_and_defaults_to_zero() {
        // P = 2, 5 points: window is points 1..5; last patch [None, None] filled from point 2 (= 7)
        let x = vec![Some(3.0), Some(4.0), Some(7.0), None, None];
        let s = &prepare(&req(vec![x]), 2, "r").unwrap().series[0];
        assert_eq!(s.missing, [0.0, 0.0, 0.0, 0.0]);
        assert_eq!(s.filled, 2);
        assert_eq!(s.scaler.last_stats().loc, (4.0 + 7.0 + 7.0 + 7.0) / 4.0);
        // nothing observed before the last patch: leading gaps become 0 (GluonTS ffill), later ones fill forward
        let x = vec![None, None, None, Some(6.0)];
        let s = &prepare(&req(vec![x]), 2, "r").unwrap().series[0];
        assert_eq!(s.observed, [false, true]);
        assert_eq!(s.scaler.last_stats().loc, 3.0);
    }

    #[test]
    fn too_short_context_names_the_minimum() {
        let e = prepare(&req(vec![vec![Some(1.0); 31]]), 32, "request 2").unwrap_err().to_string();
        assert!(e.contains("request 2") && e.contains("31 points") && e.contains("at least 32"), "{e}");
    }

    #[test]
    fn scaled_values_are_asinh_of_the_standardised_point() {
        let s = PatchStats { loc: 1.0, scale: 2.0 };
        assert_eq!(scaled_value(1.0, s), 0.0);
        assert_eq!(scaled_value(5.0, s), 2f64.asinh() as f32);
    }
}
