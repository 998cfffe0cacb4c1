//! From the graph's Student-T mixture parameters to forecasts: the mean path, seeded sample paths, and
//! quantiles of sample sets, each as toto-ts 0.2.0 computes them (`inference/forecaster.py`,
//! `model/distribution.py`, torch 2.7 `MixtureSameFamily`/`StudentT`, gluonts `AffineTransformed`).
//!
//! The graph emits, per variate and step of the next patch, K components `df, loc, scale` and softmax
//! `weights` in scaled units ([`MixtureParams`], `[P, K]` row-major). A forecast value is de-normalised with
//! the [`PatchStats`] of the **last input patch**: `y = replace_extreme(loc_s + scale_s·z)`.
//!
//! * Mean path ([`mean_patch`]): `Categorical(probs=weights)` first renormalises `probs / probs.sum()`, the
//!   component mean is `loc` (NaN where `df ≤ 1`), `z = Σ_k probs_k·loc_k`, then `AffineTransformed.mean` is
//!   `z·scale_s + loc_s`, all in f32. The two sums over K are added in the order of torch's AVX2 CPU `sum`
//!   (`crate::host::sum::torch_sum`), so the result equals torch bit for bit (`tests/data/mixture.json`, and the
//!   means of the reference fixtures recomputed from their recorded mixtures).
//! * Sample paths ([`PathSampler`]): a component drawn from `weights`, then `t = N(0,1)/sqrt(χ²(df)/df)` as
//!   `StudentT.rsample`, `loc_k + scale_k·t`, de-normalised. Path p draws from ChaCha20 stream p of the request
//!   seed, so a path does not depend on how paths are batched. torch's own RNG stream is not reproduced.
//! * Quantiles ([`SampleSet::quantiles`]): `torch.quantile(samples, q, dim=-1)` (linear interpolation), exact
//!   (`crate::host::quantile`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use rand_distr::{Gamma, StandardNormal};

use crate::error::{Error, Result};
use crate::host::quantile::path_quantiles;
use crate::host::scaler::PatchStats;
use crate::host::sum::torch_sum_by;

/// `replace_extreme_values` (`data/util/dataset.py`): NaN, ±inf and |x| ≥ f32::MAX/2 become 0.
pub fn replace_extreme(x: f32) -> f32 {
    if x.is_nan() || x.abs() >= f32::MAX / 2.0 {
        0.0
    } else {
        x
    }
}

/// One variate's mixture parameters for the steps of one patch, as the graph emits them (scaled units):
/// each slice is `[steps, K]` row-major.
#[derive(Debug, Clone, Copy)]
pub struct MixtureParams<'a> {
    df: &'a [f32],
    loc: &'a [f32],
    scale: &'a [f32],
    weights: &'a [f32],
    components: usize,
}

impl<'a> MixtureParams<'a> {
    /// Checks that the four slices hold the same whole number of `components`-sized steps.
    pub fn new(
        df: &'a [f32],
        loc: &'a [f32],
        scale: &'a [f32],
        weights: &'a [f32],
        components: usize,
    ) -> Result<Self> {
        if components == 0 || !df.len().is_multiple_of(components) {
            return Err(Error::Length {
                what: format!("mixture df (a multiple of {components} components)"),
                expected: df.len().next_multiple_of(components.max(1)),
                actual: df.len(),
            });
        }
        for (what, s) in [("mixture loc", loc), ("mixture scale", scale), ("mixture weights", weights)] {
            Error::check_len(what, df.len(), s.len())?;
        }
        Ok(MixtureParams { df, loc, scale, weights, components })
    }

    pub fn steps(&self) -> usize {
        self.df.len() / self.components
    }

    pub fn components(&self) -> usize {
        self.components
    }

    fn step(&self, t: usize) -> [&'a [f32]; 4] {
        let r = t * self.components..(t + 1) * self.components;
        [&self.df[r.clone()], &self.loc[r.clone()], &self.scale[r.clone()], &self.weights[r]]
    }
}

/// Mean of one step's mixture in scaled units, as torch's `MixtureSameFamily.mean` (f32). `weights` are the
/// graph's softmax probabilities; like `Categorical(probs=…)` this divides them by their sum first (so weights
/// that were already renormalised, as the reference harness records them, can come out one ulp apart).
pub fn mixture_mean(df: &[f32], loc: &[f32], weights: &[f32]) -> f32 {
    let total = torch_sum_by::<f32, 8>(weights.len(), |k| weights[k]);
    torch_sum_by::<f32, 8>(weights.len(), |k| {
        let mean = if df[k] <= 1.0 { f32::NAN } else { loc[k] };
        (weights[k] / total) * mean
    })
}

/// `AffineTransformed` de-normalisation `z·scale + loc` (torch's op order for the mean), then
/// [`replace_extreme`].
pub fn denormalize(z: f32, stats: PatchStats) -> f32 {
    replace_extreme(z * stats.scale + stats.loc)
}

/// The mean forecast of every step of `params`, de-normalised with `stats`, into `out` (`[steps]`).
///
/// # Panics
/// If `out.len() != params.steps()`.
pub fn mean_patch(params: &MixtureParams, stats: PatchStats, out: &mut [f32]) {
    assert_eq!(out.len(), params.steps(), "mean_patch: output length");
    for (t, o) in out.iter_mut().enumerate() {
        let [df, loc, _, w] = params.step(t);
        *o = denormalize(mixture_mean(df, loc, w), stats);
    }
}

/// Seeded sampler of forecast paths: path p draws from ChaCha20 stream p of the request seed, so its values
/// depend only on (seed, p) and the parameters it is given, not on how paths are batched.
#[derive(Debug, Clone)]
pub struct PathSampler {
    /// The first path this sampler draws for (its streams are `first..first + rngs.len()`).
    first: usize,
    rngs: Vec<ChaCha20Rng>,
    /// Partial sums of one step's weights (scratch).
    prefix: Vec<f32>,
}

impl PathSampler {
    /// Samplers for paths `0..paths` of the request with `seed`.
    pub fn new(seed: u64, paths: usize) -> Self {
        Self::range(seed, 0, paths)
    }

    /// Samplers for paths `first..first + count` of the request with `seed` (a request whose paths run in several
    /// passes draws each path from the same stream as when they all run together).
    pub fn range(seed: u64, first: usize, count: usize) -> Self {
        let rngs = (first as u64..(first + count) as u64)
            .map(|p| {
                let mut rng = ChaCha20Rng::seed_from_u64(seed);
                rng.set_stream(p);
                rng
            })
            .collect();
        PathSampler { first, rngs, prefix: Vec::new() }
    }

    /// Paths `first..end` this sampler holds.
    pub fn paths(&self) -> std::ops::Range<usize> {
        self.first..self.first + self.rngs.len()
    }

    /// Draws one value per step of `params` for `path`, de-normalised with `stats`, into `out` (`[steps]`): a
    /// component from the weights, then a Student-T. Call it for a path's variates and patches in the same
    /// order to reproduce the path. About 0.1 µs per value (ChaCha20, a χ² and a normal draw).
    ///
    /// # Panics
    /// If `path` is not in [`paths`](Self::paths) or `out.len() != params.steps()`.
    pub fn sample_patch(&mut self, path: usize, params: &MixtureParams, stats: PatchStats, out: &mut [f32]) {
        assert_eq!(out.len(), params.steps(), "sample_patch: output length");
        let rng = &mut self.rngs[path - self.first];
        self.prefix.resize(params.components(), 0.0);
        for (t, o) in out.iter_mut().enumerate() {
            let [df, loc, scale, w] = params.step(t);
            let k = draw_component(rng, w, &mut self.prefix);
            let z = loc[k] + scale[k] * student_t(rng, df[k]);
            *o = replace_extreme(stats.loc + stats.scale * z);
        }
    }
}

/// A component index drawn with probability `max(w_k, 0) / Σ max(w, 0)` (uniform draws in steps of 2^-24);
/// `prefix` is scratch space of `w.len()`. The last positive component when rounding (or a NaN) leaves the draw
/// above every partial sum; 0 when no weight is positive.
fn draw_component(rng: &mut ChaCha20Rng, w: &[f32], prefix: &mut [f32]) -> usize {
    let mut acc = 0.0f32;
    for (p, &x) in prefix.iter_mut().zip(w) {
        acc += x.max(0.0);
        *p = acc;
    }
    let target = rng.random::<f32>() * acc;
    // the first k with prefix_k > target: branch-free count of the partial sums at or below it
    let k = prefix.iter().map(|&p| usize::from(p <= target)).sum::<usize>();
    if k < w.len() {
        k
    } else {
        w.iter().rposition(|&x| x > 0.0).unwrap_or(0)
    }
}

/// A standard Student-T draw as torch's `StudentT.rsample`: `N(0,1) · rsqrt(χ²(df)/df)`, with
/// `χ²(df) = Gamma(df/2, scale 2)`. An invalid `df` gives NaN (which [`replace_extreme`] turns into 0).
fn student_t(rng: &mut ChaCha20Rng, df: f32) -> f32 {
    let df = f64::from(df);
    let Ok(chi2) = Gamma::new(0.5 * df, 2.0) else { return f32::NAN };
    let x: f64 = rng.sample(StandardNormal);
    let z: f64 = rng.sample(chi2);
    (x / (z / df).sqrt()) as f32
}

/// Forecast sample paths `[paths][variates][horizon]` (row-major) and their statistics.
#[derive(Debug, Clone, Copy)]
pub struct SampleSet<'a> {
    data: &'a [f32],
    paths: usize,
    variates: usize,
    horizon: usize,
}

impl<'a> SampleSet<'a> {
    pub fn new(data: &'a [f32], paths: usize, variates: usize, horizon: usize) -> Result<Self> {
        Error::check_len("samples [paths][variates][horizon]", paths * variates * horizon, data.len())?;
        Ok(SampleSet { data, paths, variates, horizon })
    }

    fn value(&self, n: usize, v: usize, h: usize) -> f32 {
        self.data[(n * self.variates + v) * self.horizon + h]
    }

    /// Mean over paths `[variates][horizon]` (toto's `Forecast.mean` of a sampled forecast), accumulated in f64.
    pub fn mean(&self) -> Vec<Vec<f32>> {
        (0..self.variates)
            .map(|v| {
                (0..self.horizon)
                    .map(|h| {
                        let s: f64 = (0..self.paths).map(|n| f64::from(self.value(n, v, h))).sum();
                        (s / self.paths as f64) as f32
                    })
                    .collect()
            })
            .collect()
    }

    /// Quantiles `[q][variates][horizon]` over paths, as `Forecast.quantile(q)` (`torch.quantile`, linear).
    pub fn quantiles(&self, qs: &[f64]) -> Vec<Vec<Vec<f32>>> {
        let points = self.variates * self.horizon;
        let flat =
            path_quantiles(self.data, self.paths, points, qs).expect("SampleSet::new checked the length");
        let h = self.horizon;
        flat.into_iter()
            .map(|level| (0..self.variates).map(|v| level[v * h..(v + 1) * h].to_vec()).collect())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::scaler::tests::hex_f32;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct File {
        means: Vec<MeanCase>,
        quantiles: Vec<QuantileCase>,
    }
    #[derive(Deserialize)]
    struct MeanCase {
        name: String,
        components: usize,
        df: String,
        loc: String,
        scale: String,
        weights: String,
        scaler_loc: String,
        scaler_scale: String,
        mean: String,
    }
    #[derive(Deserialize)]
    struct QuantileCase {
        samples: usize,
        rows: usize,
        values: String,
        quantiles: Vec<QLevel>,
    }
    #[derive(Deserialize)]
    struct QLevel {
        q: f64,
        values: String,
    }

    fn file() -> File {
        serde_json::from_str(include_str!("../../tests/data/mixture.json")).unwrap()
    }

    /// `replace_extreme_values(AffineTransformed(MixtureSameFamily(...)).mean)` from torch 2.7.
    #[test]
    fn mean_matches_torch_bit_for_bit() {
        for c in file().means {
            let (df, loc, scale, w) =
                (hex_f32(&c.df), hex_f32(&c.loc), hex_f32(&c.scale), hex_f32(&c.weights));
            let p = MixtureParams::new(&df, &loc, &scale, &w, c.components).unwrap();
            let stats = PatchStats { loc: hex_f32(&c.scaler_loc)[0], scale: hex_f32(&c.scaler_scale)[0] };
            let mut out = vec![0.0; p.steps()];
            mean_patch(&p, stats, &mut out);
            let want = hex_f32(&c.mean);
            for (t, (a, b)) in out.iter().zip(&want).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "{} step {t}: {a} vs torch {b}", c.name);
            }
        }
    }

    #[test]
    fn mean_by_hand() {
        let df = [3.0, 5.0];
        let loc = [1.0, -2.0];
        let w = [0.25, 0.75];
        assert_eq!(mixture_mean(&df, &loc, &w), 0.25 - 1.5);
        let stats = PatchStats { loc: 10.0, scale: 2.0 };
        assert_eq!(denormalize(mixture_mean(&df, &loc, &w), stats), 10.0 + 2.0 * -1.25);
        // df <= 1 has no mean: NaN, replaced by 0
        assert_eq!(denormalize(mixture_mean(&[1.0, 5.0], &loc, &w), stats), 0.0);
        assert_eq!(replace_extreme(f32::MAX / 2.0), 0.0);
        assert_eq!(replace_extreme(-f32::INFINITY), 0.0);
        assert_eq!(replace_extreme(1.0e37), 1.0e37);
    }

    #[test]
    fn params_shape_errors() {
        let a = [0.0f32; 6];
        assert!(MixtureParams::new(&a, &a, &a, &a, 3).is_ok());
        assert!(MixtureParams::new(&a, &a, &a, &a, 4).is_err());
        assert!(MixtureParams::new(&a, &a[..3], &a, &a, 3).is_err());
        assert!(MixtureParams::new(&a, &a, &a, &a, 0).is_err());
    }

    #[test]
    fn quantiles_match_torch_bit_for_bit() {
        for c in file().quantiles {
            let x = hex_f32(&c.values);
            // torch's layout [rows][n] transposed into SampleSet's [paths][variates = 1][horizon = rows]
            let (x, n) = (&x, c.samples);
            let t: Vec<f32> = (0..n).flat_map(|i| (0..c.rows).map(move |r| x[r * n + i])).collect();
            let set = SampleSet::new(&t, c.samples, 1, c.rows).unwrap();
            let qs: Vec<f64> = c.quantiles.iter().map(|q| q.q).collect();
            let got = set.quantiles(&qs);
            for (i, level) in c.quantiles.iter().enumerate() {
                let want = hex_f32(&level.values);
                for (r, (a, b)) in got[i][0].iter().zip(&want).enumerate() {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "n={} q={} row {r}: {a} vs torch {b}",
                        c.samples,
                        level.q
                    );
                }
            }
        }
    }

    #[test]
    fn student_t_statistics() {
        // one component, df = 30: mean loc, std scale·sqrt(df/(df-2)); de-normalised by (loc_s, scale_s)
        let (paths, steps) = (4000, 16);
        let df = vec![30.0; steps];
        let loc = vec![0.5; steps];
        let scale = vec![2.0; steps];
        let w = vec![1.0; steps];
        let p = MixtureParams::new(&df, &loc, &scale, &w, 1).unwrap();
        let stats = PatchStats { loc: 100.0, scale: 3.0 };
        let mut sampler = PathSampler::new(7, paths);
        let mut all = Vec::with_capacity(paths * steps);
        let mut out = vec![0.0; steps];
        for n in 0..paths {
            sampler.sample_patch(n, &p, stats, &mut out);
            all.extend_from_slice(&out);
        }
        let n = all.len() as f64;
        let mean = all.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
        let var = all.iter().map(|&x| (f64::from(x) - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let want_mean = 100.0 + 3.0 * 0.5;
        let want_std = 3.0 * 2.0 * (30.0f64 / 28.0).sqrt();
        // standard error of the mean ≈ 6.2/sqrt(64000) ≈ 0.025
        assert!((mean - want_mean).abs() < 0.1, "mean {mean} vs {want_mean}");
        assert!((var.sqrt() / want_std - 1.0).abs() < 0.02, "std {} vs {want_std}", var.sqrt());
    }

    #[test]
    fn component_choice_follows_weights() {
        // two far-apart narrow components with weights 0.2 / 0.8
        let steps = 64;
        let df: Vec<f32> = vec![50.0; steps * 2];
        let loc: Vec<f32> = (0..steps).flat_map(|_| [-10.0, 10.0]).collect();
        let scale = vec![0.01; steps * 2];
        let w: Vec<f32> = (0..steps).flat_map(|_| [0.2, 0.8]).collect();
        let p = MixtureParams::new(&df, &loc, &scale, &w, 2).unwrap();
        let mut sampler = PathSampler::new(1, 256);
        let mut out = vec![0.0; steps];
        let mut low = 0usize;
        for n in 0..256 {
            sampler.sample_patch(n, &p, PatchStats { loc: 0.0, scale: 1.0 }, &mut out);
            low += out.iter().filter(|&&x| x < 0.0).count();
        }
        let frac = low as f64 / (256 * steps) as f64;
        assert!((frac - 0.2).abs() < 0.015, "fraction of component 0: {frac}");
    }

    #[test]
    fn sampling_is_deterministic_per_seed_and_path() {
        let df = [4.0f32, 9.0];
        let loc = [0.0f32, 1.0];
        let scale = [1.0f32, 0.5];
        let w = [0.4f32, 0.6];
        let p = MixtureParams::new(&df, &loc, &scale, &w, 2).unwrap();
        let stats = PatchStats { loc: 1.0, scale: 1.0 };
        let run = |seed: u64, order: &[usize]| {
            let mut s = PathSampler::new(seed, 4);
            let mut res = vec![0.0f32; 4];
            for &n in order {
                let mut o = [0.0];
                s.sample_patch(n, &p, stats, &mut o);
                res[n] = o[0];
            }
            res
        };
        let a = run(42, &[0, 1, 2, 3]);
        assert_eq!(a, run(42, &[3, 1, 0, 2]), "a path must not depend on the other paths");
        assert_ne!(a, run(43, &[0, 1, 2, 3]));
        assert!(a.windows(2).all(|w| w[0] != w[1]), "paths must differ: {a:?}");
    }

    #[test]
    fn invalid_df_gives_zero() {
        let p = MixtureParams::new(&[-1.0], &[0.0], &[1.0], &[1.0], 1).unwrap();
        let mut o = [1.0];
        PathSampler::new(0, 1).sample_patch(0, &p, PatchStats { loc: 0.0, scale: 1.0 }, &mut o);
        assert_eq!(o[0], 0.0);
    }

    #[test]
    fn sample_mean_and_layout() {
        // [paths=2][variates=2][horizon=3]
        let d: Vec<f32> = (0..12).map(|x| x as f32).collect();
        let s = SampleSet::new(&d, 2, 2, 3).unwrap();
        assert_eq!(s.mean(), vec![vec![3.0, 4.0, 5.0], vec![6.0, 7.0, 8.0]]);
        assert!(SampleSet::new(&d, 2, 2, 2).is_err());
    }

    /// Rough timing of the sampler (release: `cargo test -p engines --release -- --ignored sampler_speed`).
    #[test]
    #[ignore]
    fn sampler_speed() {
        let (paths, steps, k, variates) = (256, 64, 24, 4);
        let df: Vec<f32> = (0..steps * k).map(|i| 2.5 + (i % 7) as f32).collect();
        let loc: Vec<f32> = (0..steps * k).map(|i| (i % 5) as f32 - 2.0).collect();
        let scale = vec![0.7f32; steps * k];
        let w: Vec<f32> = (0..steps * k).map(|i| 1.0 / k as f32 + (i % 3) as f32 * 1e-3).collect();
        let p = MixtureParams::new(&df, &loc, &scale, &w, k).unwrap();
        let mut s = PathSampler::new(3, paths);
        let mut out = vec![0.0; steps];
        let reps = 20;
        let t0 = std::time::Instant::now();
        for _ in 0..reps {
            for n in 0..paths {
                for _ in 0..variates {
                    s.sample_patch(n, &p, PatchStats { loc: 0.0, scale: 1.0 }, &mut out);
                }
            }
        }
        let dt = t0.elapsed() / reps;
        let per = dt / (paths * steps * variates) as u32;
        eprintln!("{paths} paths × {steps} steps × {variates} variates (K={k}): {dt:?}, {per:?} per value");
    }
}
