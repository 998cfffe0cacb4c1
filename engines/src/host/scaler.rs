//! Toto's `CausalPatchStdMeanScaler` (toto-ts 0.2.0 `toto/model/scaler.py`) as running state carried across
//! decode steps, in f64 like the original.
//!
//! How toto runs it (`inference/forecaster.py`, `data/util/dataset.py pad_array`):
//! * the context of length T is **left-padded** with zeros to `ceil(T/P)·P`; pad and missing points are fed as
//!   0.0 with `padding_mask = false`, so they carry weight 0 in every sum but the model still sees them scaled;
//! * `prefix_length` is the **padded** context length, which covers exactly the observed context points: the
//!   global statistics that clamp the causal scale never see appended forecasts;
//! * at decode step n the whole grown series (context + n appended patches, all observed) is re-scaled. The
//!   causal statistics at time t depend only on x[..=t], so carrying the cumulative sums
//!   (`Σw, Σw·x, m2, mean`) one step at a time gives the same numbers: [`CausalScaler::push_patch`].
//!
//! Per step, with w the observation weight (0 or 1) and every sum a running sum in f64:
//! ```text
//! den = max(Σw, 1); mean = Σw·x / den; m2 += (x − mean_prev)·(x − mean)·w
//! scale = clamp(sqrt(m2 / max(den − 1, 1) + min_scale), lo, hi)         (Bessel; min_scale added to the variance)
//! lo = max(f32(min_scale), gscale·10^−e); hi = gscale·10^e;  gscale = sqrt(population var of the context + min_scale)
//! ```
//! Every step of patch j uses loc/scale of the patch's **last** step, cast to f32; the model input is
//! `(x − loc)/scale` in f32. The global sums are added in the order of torch's AVX2 CPU `sum`, so the clamp
//! bounds match bit for bit as well (`engines/tests/data/scaler.json`: all loc/scale/scaled values equal).
//!
//! Toto 2.0's scaler is the same running state without the minimum scale and the clamp, floored at 1e-6
//! ([`CausalScaler::with_floor`]); Toto 2.0's context handling lives in its folder (`context.rs`).

use crate::host::sum::torch_sum;

/// Parameters of the causal patch scaler (Toto's `scaler_cls` kwargs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalerConfig {
    /// Patch size P (the statistics are constant within a patch).
    pub patch: usize,
    /// Added to the variance before the square root (`minimum_scale`), and the lowest clamp bound.
    pub min_scale: f64,
    /// Clamp the causal scale to `gscale·10^±scale_factor_exponent` of the context's global scale.
    pub stabilize_with_global: bool,
    pub scale_factor_exponent: f64,
}

impl ScalerConfig {
    /// Toto-Open-Base-1.0's scaler: `minimum_scale` 0.1, `stabilize_with_global` with exponent 10.
    pub fn toto(patch: usize) -> Self {
        ScalerConfig { patch, min_scale: 0.1, stabilize_with_global: true, scale_factor_exponent: 10.0 }
    }
}

/// The location and scale that normalise one patch (and de-normalise the forecast made from it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PatchStats {
    pub loc: f32,
    pub scale: f32,
}

/// One variate's scaled, left-padded context.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaledContext {
    /// `(x − loc)/scale` for the `S·P` padded points, `S = ceil(T/P)` (pad and missing points are x = 0).
    pub scaled: Vec<f32>,
    /// Statistics of each of the S patches.
    pub stats: Vec<PatchStats>,
}

/// The causal scaler's state after the last scaled point of one variate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CausalScaler {
    min_scale: f64,
    /// Σw, Σw·x and Welford's m2 up to the last point.
    weight: f64,
    sum: f64,
    m2: f64,
    /// Causal mean at the last point (the "previous mean" of the next one).
    mean: f64,
    /// Clamp bounds of the scale, fixed by the context (±∞ without `stabilize_with_global`).
    lo: f64,
    hi: f64,
    last: PatchStats,
}

impl CausalScaler {
    /// Scales one variate's context (`None` = missing) the way toto's forecaster does and returns the state to
    /// continue from with [`push_patch`](Self::push_patch). An empty context gives no patches.
    pub fn prefill(cfg: &ScalerConfig, context: &[Option<f32>]) -> (Self, ScaledContext) {
        let p = cfg.patch.max(1);
        let padded = context.len().div_ceil(p) * p;
        let pad = padded - context.len();
        let point = |i: usize| if i < pad { None } else { context[i - pad] };
        let (lo, hi) = clamp_bounds(cfg, padded, &point);

        let mut st = CausalScaler {
            min_scale: cfg.min_scale,
            weight: 0.0,
            sum: 0.0,
            m2: 0.0,
            mean: 0.0,
            lo,
            hi,
            last: PatchStats { loc: 0.0, scale: 0.0 },
        };
        st.last = st.stats();
        let mut out =
            ScaledContext { scaled: Vec::with_capacity(padded), stats: Vec::with_capacity(padded / p) };
        for start in (0..padded).step_by(p) {
            for i in start..start + p {
                match point(i) {
                    Some(x) => st.step(f64::from(x), 1.0),
                    None => st.step(0.0, 0.0),
                }
            }
            st.last = st.stats();
            out.stats.push(st.last);
            out.scaled.extend((start..start + p).map(|i| scale_value(point(i).unwrap_or(0.0), st.last)));
        }
        (st, out)
    }

    /// A scaler with no points yet whose scale is `max(sqrt(var + min_scale), floor)` with no global clamp,
    /// fed point by point with [`push_point`](Self::push_point) and [`end_patch`](Self::end_patch) (and
    /// [`push_patch`](Self::push_patch) for fed-back forecasts). Toto 2.0's `PatchedCausalStdScaler`
    /// (toto-2 2.0.0 `toto2/model.py`) is `with_floor(0.0, 1e-6)`: the same f64 Welford sums as Toto 1.0's,
    /// without the added minimum scale and the global clamp.
    pub fn with_floor(min_scale: f64, floor: f64) -> Self {
        let mut st = CausalScaler {
            min_scale,
            weight: 0.0,
            sum: 0.0,
            m2: 0.0,
            mean: 0.0,
            lo: floor,
            hi: f64::INFINITY,
            last: PatchStats { loc: 0.0, scale: 0.0 },
        };
        st.last = st.stats();
        st
    }

    /// Adds one point: `Some(x)` observed (weight 1), `None` missing (weight 0, the sums do not move).
    pub fn push_point(&mut self, x: Option<f32>) {
        match x {
            Some(x) => self.step(f64::from(x), 1.0),
            None => self.step(0.0, 0.0),
        }
    }

    /// Closes the current patch: its statistics are those of the point just pushed (returned, and what
    /// [`last_stats`](Self::last_stats) reports until the next patch).
    pub fn end_patch(&mut self) -> PatchStats {
        self.last = self.stats();
        self.last
    }

    /// Appends one patch of observed values (original units, e.g. a forecast fed back), writes their scaled
    /// values to `scaled` and returns the patch statistics (those of its last value).
    ///
    /// # Panics
    /// If `scaled` and `values` differ in length.
    pub fn push_patch(&mut self, values: &[f32], scaled: &mut [f32]) -> PatchStats {
        assert_eq!(values.len(), scaled.len(), "push_patch: values and scaled differ in length");
        for &x in values {
            self.step(f64::from(x), 1.0);
        }
        if !values.is_empty() {
            self.last = self.stats();
        }
        for (s, &x) in scaled.iter_mut().zip(values) {
            *s = scale_value(x, self.last);
        }
        self.last
    }

    /// Statistics of the last scaled patch: they de-normalise the forecast of the next patch.
    pub fn last_stats(&self) -> PatchStats {
        self.last
    }

    /// The scale clamp bounds `(lo, hi)` fixed by the context.
    pub fn clamp_bounds(&self) -> (f64, f64) {
        (self.lo, self.hi)
    }

    /// One point of torch's cumulative sums (`cumsum` runs sequentially in f64 on the CPU).
    fn step(&mut self, x: f64, w: f64) {
        let prev = self.mean;
        self.weight += w;
        self.sum += w * x;
        self.mean = self.sum / self.weight.max(1.0);
        self.m2 += (x - prev) * (x - self.mean) * w;
    }

    /// loc/scale at the current point, cast to f32.
    fn stats(&self) -> PatchStats {
        let den = self.weight.max(1.0);
        let var = self.m2 / (den - 1.0).max(1.0);
        let scale = (var + self.min_scale).sqrt().max(self.lo).min(self.hi);
        PatchStats { loc: self.mean as f32, scale: scale as f32 }
    }
}

/// `(x − loc)/scale` in f32, as torch computes the scaled input.
fn scale_value(x: f32, s: PatchStats) -> f32 {
    (x - s.loc) / s.scale
}

/// The clamp bounds from the global statistics of the padded context `[0, padded)` (population variance).
fn clamp_bounds(cfg: &ScalerConfig, padded: usize, point: &dyn Fn(usize) -> Option<f32>) -> (f64, f64) {
    if !cfg.stabilize_with_global {
        return (f64::NEG_INFINITY, f64::INFINITY);
    }
    let x = |i: usize| point(i).map_or(0.0, f64::from);
    let w = |i: usize| if point(i).is_some() { 1.0 } else { 0.0 };
    // counts are exact in torch's f32 sum (below 2^24)
    let den = (0..padded).filter(|&i| point(i).is_some()).count().max(1) as f64;
    let weighted: Vec<f64> = (0..padded).map(|i| w(i) * x(i)).collect();
    let mean = torch_sum::<f64, 4>(&weighted) / den;
    let sq: Vec<f64> = (0..padded)
        .map(|i| {
            let d = (x(i) - mean) * w(i) * w(i);
            d * d
        })
        .collect();
    let gscale = (torch_sum::<f64, 4>(&sq) / den + cfg.min_scale).sqrt();
    // `torch.tensor(minimum_scale)` is an f32 tensor: the floor is f32(0.1) = 0.10000000149…
    let floor = f64::from(cfg.min_scale as f32);
    let lo = floor.max(gscale * 10f64.powf(-cfg.scale_factor_exponent));
    (lo, gscale * 10f64.powf(cfg.scale_factor_exponent))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct File {
        cases: Vec<Case>,
    }
    #[derive(Deserialize)]
    struct Case {
        name: String,
        patch: usize,
        context: Vec<Option<String>>,
        appended: Vec<String>,
        steps: Vec<Step>,
    }
    #[derive(Deserialize)]
    struct Step {
        scaled: String,
        loc: String,
        scale: String,
    }

    /// f32 values stored as concatenated 8-hex-digit bit patterns (the generator's format).
    pub(crate) fn hex_f32(s: &str) -> Vec<f32> {
        (0..s.len())
            .step_by(8)
            .map(|i| f32::from_bits(u32::from_str_radix(&s[i..i + 8], 16).unwrap()))
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// toto's scaler run as the forecaster runs it (torch 2.7 CPU), see `tests/data/gen_host_vectors.py`.
    #[test]
    fn matches_torch_bit_for_bit() {
        let file: File = serde_json::from_str(include_str!("../../tests/data/scaler.json")).unwrap();
        assert_eq!(file.cases.len(), 10);
        for case in &file.cases {
            let cfg = ScalerConfig::toto(case.patch);
            let context: Vec<Option<f32>> =
                case.context.iter().map(|v| v.as_ref().map(|h| hex_f32(h)[0])).collect();
            let (mut st, ctx) = CausalScaler::prefill(&cfg, &context);
            let s0 = &case.steps[0];
            let name = &case.name;
            assert_eq!(bits(&ctx.scaled), bits(&hex_f32(&s0.scaled)), "{name}: scaled context");
            let locs: Vec<f32> = ctx.stats.iter().map(|s| s.loc).collect();
            let scales: Vec<f32> = ctx.stats.iter().map(|s| s.scale).collect();
            assert_eq!(bits(&locs), bits(&hex_f32(&s0.loc)), "{name}: context loc");
            assert_eq!(bits(&scales), bits(&hex_f32(&s0.scale)), "{name}: context scale");
            assert_eq!(st.last_stats(), *ctx.stats.last().unwrap());
            for (n, (patch, step)) in case.appended.iter().zip(&case.steps[1..]).enumerate() {
                let values = hex_f32(patch);
                let mut scaled = vec![0.0; values.len()];
                let stats = st.push_patch(&values, &mut scaled);
                assert_eq!(bits(&scaled), bits(&hex_f32(&step.scaled)), "{name}: patch {n} scaled");
                assert_eq!(stats.loc.to_bits(), hex_f32(&step.loc)[0].to_bits(), "{name}: patch {n} loc");
                assert_eq!(
                    stats.scale.to_bits(),
                    hex_f32(&step.scale)[0].to_bits(),
                    "{name}: patch {n} scale"
                );
            }
        }
    }

    #[test]
    fn clamp_cases_really_clamp() {
        let file: File = serde_json::from_str(include_str!("../../tests/data/scaler.json")).unwrap();
        let find = |n: &str| file.cases.iter().find(|c| c.name == n).unwrap();
        // lower clamp: gscale·1e-10 > sqrt(0.1), and the first real patch sits on it
        let c = find("lower_clamp_P16");
        let context: Vec<Option<f32>> = c.context.iter().map(|v| v.as_ref().map(|h| hex_f32(h)[0])).collect();
        let (st, ctx) = CausalScaler::prefill(&ScalerConfig::toto(c.patch), &context);
        let (lo, hi) = st.clamp_bounds();
        assert!(lo > 1.0 && hi > lo);
        assert_eq!(ctx.stats[0].scale, lo as f32);
        // upper clamp: appended values far outside the context
        let c = find("upper_clamp_P16");
        let context: Vec<Option<f32>> = c.context.iter().map(|v| v.as_ref().map(|h| hex_f32(h)[0])).collect();
        let (mut st, _) = CausalScaler::prefill(&ScalerConfig::toto(c.patch), &context);
        let values = hex_f32(&c.appended[1]);
        let mut scaled = vec![0.0; values.len()];
        let _ = st.push_patch(&hex_f32(&c.appended[0]), &mut scaled);
        let stats = st.push_patch(&values, &mut scaled);
        assert_eq!(stats.scale, st.clamp_bounds().1 as f32);
    }

    #[test]
    fn hand_computed_small_series() {
        // P = 2, context [1, 3 | 5, _]: patch 0 ends at t=1, patch 1 at t=3 (t=3 missing)
        let cfg = ScalerConfig {
            patch: 2,
            min_scale: 0.1,
            stabilize_with_global: false,
            scale_factor_exponent: 10.0,
        };
        let (st, ctx) = CausalScaler::prefill(&cfg, &[Some(1.0), Some(3.0), Some(5.0), None]);
        // t=1: mean 2, m2 = 2, var = 2/1
        assert_eq!(ctx.stats[0], PatchStats { loc: 2.0, scale: (2.1f64).sqrt() as f32 });
        // t=3: mean 3, m2 = 8, var = 8/2
        assert_eq!(ctx.stats[1], PatchStats { loc: 3.0, scale: (4.1f64).sqrt() as f32 });
        assert_eq!(ctx.scaled[3], (0.0 - 3.0) / (4.1f64).sqrt() as f32);
        assert_eq!(st.last_stats(), ctx.stats[1]);
    }

    #[test]
    fn short_and_empty_contexts() {
        let cfg = ScalerConfig::toto(4);
        let (_, ctx) = CausalScaler::prefill(&cfg, &[Some(2.0)]);
        assert_eq!(ctx.scaled.len(), 4);
        assert_eq!(ctx.stats.len(), 1);
        // left pad: three zeros fed as (0 - 2)/scale, the point itself as 0
        assert_eq!(ctx.scaled[3], 0.0);
        assert!(ctx.scaled[0] < 0.0);
        let (st, ctx) = CausalScaler::prefill(&cfg, &[]);
        assert!(ctx.scaled.is_empty() && ctx.stats.is_empty());
        assert_eq!(st.last_stats().loc, 0.0);
    }

    #[test]
    fn floor_scaler_has_no_minimum_scale_and_a_1e6_floor() {
        // Toto 2.0: scale = max(sqrt(m2 / max(n - 1, 1)), 1e-6), no added minimum, no global clamp
        let mut st = CausalScaler::with_floor(0.0, 1e-6);
        for x in [Some(1.0), None, Some(3.0)] {
            st.push_point(x);
        }
        let s = st.end_patch();
        assert_eq!(s, PatchStats { loc: 2.0, scale: 2f64.sqrt() as f32 });
        assert_eq!(st.last_stats(), s);
        // a constant series sits on the floor; a single point has variance 0 too
        let mut st = CausalScaler::with_floor(0.0, 1e-6);
        st.push_point(Some(5.0));
        assert_eq!(st.end_patch(), PatchStats { loc: 5.0, scale: 1e-6 });
        // fed-back patches continue the same sums
        let mut scaled = [0.0; 2];
        let s = st.push_patch(&[5.0, 8.0], &mut scaled);
        assert_eq!(s.loc, 6.0);
        assert_eq!(s.scale, 3f64.sqrt() as f32);
    }

    #[test]
    fn clamp_factors_are_the_python_literals() {
        assert_eq!(10f64.powf(-10.0), 1e-10);
        assert_eq!(10f64.powf(10.0), 1e10);
    }
}
