//! From the graph's quantile knots to forecasts: Toto 2.0's post-processing, the median, and levels between
//! the knots.
//!
//! For one forecast patch of one variate the graph gives `raw[p][q]`, nine knots (levels 0.1 … 0.9) per point in
//! asinh space. `Toto2Model.forecast` (toto-2 2.0.0) then, in f32: `v = sinh(raw)·scale + loc` with the scaler
//! statistics of the block; replaces `+inf` by the largest finite value of that knot over the patch's points and
//! `−inf` by the smallest (`_clamp_nonfinite`); optionally clips to `[ctx_min − K·s, ctx_max + K·s]` (its
//! `quantile_real_cap_k`, off by default: [`QuantileCap`]); and **sorts** the nine values of each point — the
//! knots are monotone only because of this sort. The median (point forecast, and the value fed back when
//! block decoding) is the fifth sorted value.
//!
//! Other levels in [0.1, 0.9] are interpolated linearly, in real units, between the two sorted knots around
//! them ([`Levels`]); levels outside that range are errors, since the model says nothing about them.

use crate::error::{Error, Result};
use crate::host::scaler::PatchStats;

/// The knot levels.
pub use exporter::toto2::KNOTS;

/// Index of the median among the sorted knots.
pub const MEDIAN: usize = 4;

/// toto-2's optional clip of every real-space quantile to `[ctx_min − k·s, ctx_max + k·s]`, with the observed
/// context's extremes and the scale s of the last context point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantileCap {
    pub min: f32,
    pub max: f32,
}

impl QuantileCap {
    /// The cap for one variate (`quantile_real_cap_k = k`): `extremes` are the smallest and largest value of
    /// its observed context (`None`: no observed point, both 0 as `nan_to_num` makes them), `last_scale` the
    /// scale of its last context point.
    pub fn new(k: f32, extremes: Option<(f32, f32)>, last_scale: f32) -> Self {
        let (lo, hi) = extremes.unwrap_or((0.0, 0.0));
        let anchor = k * last_scale;
        QuantileCap { min: lo - anchor, max: hi + anchor }
    }
}

/// Turns one patch's raw knots `raw[p·9 + q]` (`P` points) into sorted real-unit quantiles `out[q][p]`.
///
/// # Panics
/// If `raw` is not `P·9` long or `out` is not nine rows of `P`.
pub fn patch_quantiles(raw: &[f32], stats: PatchStats, cap: Option<QuantileCap>, out: &mut [Vec<f32>]) {
    let nq = KNOTS.len();
    let p = raw.len() / nq;
    assert_eq!(raw.len(), p * nq, "patch_quantiles: {} raw values for {nq} knots", raw.len());
    assert!(out.len() == nq && out.iter().all(|r| r.len() == p), "patch_quantiles: out must be [9][P]");
    for (q, row) in out.iter_mut().enumerate() {
        for (i, v) in row.iter_mut().enumerate() {
            let s = f64::from(raw[i * nq + q]).sinh() as f32;
            *v = s * stats.scale + stats.loc;
        }
        clamp_nonfinite(row);
        if let Some(c) = cap {
            for v in row.iter_mut() {
                *v = v.clamp(c.min, c.max);
            }
        }
    }
    let mut cols: Vec<[f32; 9]> = (0..p).map(|i| std::array::from_fn(|q| out[q][i])).collect();
    for col in &mut cols {
        // torch.sort puts NaN last; NaN cannot arise from finite raw values, but sort it the same way
        col.sort_by(|a, b| a.partial_cmp(b).unwrap_or_else(|| a.is_nan().cmp(&b.is_nan())));
    }
    for (q, row) in out.iter_mut().enumerate() {
        for (v, col) in row.iter_mut().zip(&cols) {
            *v = col[q];
        }
    }
}

/// `_clamp_nonfinite` over one knot's points: `+inf` → the largest finite value (−inf if none), `−inf` → the
/// smallest (+inf if none); NaN stays.
fn clamp_nonfinite(row: &mut [f32]) {
    let finite = || row.iter().copied().filter(|v| v.is_finite());
    let max = finite().fold(f32::NEG_INFINITY, f32::max);
    let min = finite().fold(f32::INFINITY, f32::min);
    for v in row.iter_mut() {
        if *v == f32::INFINITY {
            *v = max;
        } else if *v == f32::NEG_INFINITY {
            *v = min;
        }
    }
}

/// Where a requested level sits among the knots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Level {
    /// Exactly knot i.
    Knot(usize),
    /// `(1 − w)·knot[i] + w·knot[i+1]`, 0 < w < 1.
    Between(usize, f64),
}

/// The quantile levels of one request, resolved against the knots.
#[derive(Debug, Clone, PartialEq)]
pub struct Levels {
    pub levels: Vec<f64>,
    at: Vec<Level>,
}

/// Two levels closer than this are the same level (so 0.3 is the knot 0.3, whatever its last bit).
const LEVEL_EPS: f64 = 1e-9;

impl Levels {
    /// `requested` levels (empty: the nine knots). A level outside [0.1, 0.9] is an error naming the range.
    pub fn resolve(requested: &[f64], at: &str) -> Result<Self> {
        let levels = if requested.is_empty() { KNOTS.to_vec() } else { requested.to_vec() };
        let mut out = Vec::with_capacity(levels.len());
        for &q in &levels {
            if !(KNOTS[0] - LEVEL_EPS..=KNOTS[8] + LEVEL_EPS).contains(&q) {
                return Err(Error::QuantileOutsideKnots { at: at.to_string(), q });
            }
            let level = match KNOTS.iter().position(|k| (k - q).abs() <= LEVEL_EPS) {
                Some(i) => Level::Knot(i),
                None => {
                    let i = KNOTS.iter().rposition(|&k| k < q).unwrap_or(0).min(KNOTS.len() - 2);
                    Level::Between(i, (q - KNOTS[i]) / (KNOTS[i + 1] - KNOTS[i]))
                }
            };
            out.push(level);
        }
        Ok(Levels { levels, at: out })
    }

    /// Whether any level is interpolated (callers say so once).
    pub fn interpolates(&self) -> bool {
        self.at.iter().any(|l| matches!(l, Level::Between(..)))
    }

    /// How each level is obtained.
    pub fn positions(&self) -> &[Level] {
        &self.at
    }

    /// The requested levels' values `[level][V][H]` from the sorted knots `[9][V][H]`.
    pub fn select(&self, knots: &[Vec<Vec<f32>>]) -> Vec<Vec<Vec<f32>>> {
        self.at
            .iter()
            .map(|l| match *l {
                Level::Knot(i) => knots[i].clone(),
                Level::Between(i, w) => knots[i]
                    .iter()
                    .zip(&knots[i + 1])
                    .map(|(a, b)| {
                        a.iter()
                            .zip(b)
                            .map(|(&a, &b)| (f64::from(a) + w * (f64::from(b) - f64::from(a))) as f32)
                            .collect()
                    })
                    .collect(),
            })
            .collect()
    }
}

/// The note a caller prints once when a request's levels are interpolated.
pub const INTERPOLATION_NOTE: &str =
    "note: Toto 2.0 predicts the nine quantiles 0.1, 0.2, …, 0.9; other levels \
     are interpolated linearly between the two knots around them";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sinh_scale_loc_then_sort() {
        // P = 2 points; knot q of point i holds raw = (4 − q)·0.1·(i+1): descending, so the sort reverses it
        let raw: Vec<f32> =
            (0..2).flat_map(|i| (0..9).map(move |q| (4.0 - q as f32) * 0.1 * (i + 1) as f32)).collect();
        let mut out = vec![vec![0.0; 2]; 9];
        patch_quantiles(&raw, PatchStats { loc: 10.0, scale: 2.0 }, None, &mut out);
        for i in 0..2 {
            let col: Vec<f32> = out.iter().map(|r| r[i]).collect();
            assert!(col.windows(2).all(|w| w[0] <= w[1]), "{col:?}");
            // the median is the value of raw 0: sinh(0)·2 + 10
            assert_eq!(col[MEDIAN], 10.0);
            assert_eq!(col[8], (f64::from(0.4f32 * (i + 1) as f32).sinh() as f32) * 2.0 + 10.0);
        }
    }

    #[test]
    fn infinities_are_clamped_to_the_patch_extremes_then_capped() {
        let mut row = vec![f32::INFINITY, 1.0, -3.0, f32::NEG_INFINITY, f32::NAN];
        clamp_nonfinite(&mut row);
        assert_eq!(row[..4], [1.0, 1.0, -3.0, -3.0]);
        assert!(row[4].is_nan());
        let mut all = vec![f32::INFINITY, f32::NEG_INFINITY];
        clamp_nonfinite(&mut all);
        assert_eq!(all, [f32::NEG_INFINITY, f32::INFINITY]);
        // P = 2: knot 8 of point 0 overflows sinh (raw 100 → +inf) and takes knot 8's finite value at point 1
        let mut raw = vec![0.0f32; 18];
        (raw[8], raw[9 + 8]) = (100.0, 1.0);
        let mut out = vec![vec![0.0; 2]; 9];
        let stats = PatchStats { loc: 3.0, scale: 1.0 };
        patch_quantiles(&raw, stats, None, &mut out);
        let top = (1f64.sinh() as f32) + 3.0;
        assert_eq!((out[8][0], out[8][1], out[0][0]), (top, top, 3.0));
        // the cap clips every knot to [ctx_min − k·s, ctx_max + k·s] before the sort
        let cap = QuantileCap::new(0.5, Some((1.0, 3.5)), 1.0);
        assert_eq!(cap, QuantileCap { min: 0.5, max: 4.0 });
        // point 1, knot 8: sinh(−3)+3 ≈ −7.0, so point 0's +inf becomes −7.0 too; both are capped to 0.5 and
        // sorted first, every other knot is 3
        raw[9 + 8] = -3.0;
        patch_quantiles(&raw, stats, Some(cap), &mut out);
        assert_eq!((out[0][0], out[0][1], out[1][0], out[8][0], out[8][1]), (0.5, 0.5, 3.0, 3.0, 3.0));
    }

    #[test]
    fn levels_resolve_and_interpolate() {
        let l = Levels::resolve(&[], "r").unwrap();
        assert_eq!(l.levels, KNOTS);
        assert!(!l.interpolates());
        let l = Levels::resolve(&[0.5, 0.25, 0.3, 0.1 + 0.2, 0.9], "r").unwrap();
        assert_eq!(l.positions()[0], Level::Knot(4));
        assert!(matches!(l.positions()[1], Level::Between(1, w) if (w - 0.5).abs() < 1e-12));
        assert_eq!(l.positions()[2], Level::Knot(2));
        assert_eq!(l.positions()[3], Level::Knot(2));
        assert_eq!(l.positions()[4], Level::Knot(8));
        assert!(l.interpolates());
        // knots [9][1][1] = 0, 10, 20, … → 0.25 is 15
        let knots: Vec<Vec<Vec<f32>>> = (0..9).map(|q| vec![vec![10.0 * q as f32]]).collect();
        let got = l.select(&knots);
        assert_eq!(got[1][0][0], 15.0);
        assert_eq!(got[0][0][0], 40.0);
        for bad in [0.05, 0.95, 0.0999] {
            let e = Levels::resolve(&[0.5, bad], "request 1").unwrap_err().to_string();
            assert!(
                e.contains("request 1") && e.contains(&bad.to_string()) && e.contains("[0.1, 0.9]"),
                "{e}"
            );
        }
    }
}
