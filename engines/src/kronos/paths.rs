//! One series' forecast from its sample paths: upstream's mean (k:463-465, 514, 554), and the paths and
//! quantiles totoc adds.
//!
//! * **Mean, in normalised space.** Upstream reshapes the decoded rows to `[B, S, W, 6]` (C order) and takes
//!   `np.mean(axis=1)`. The reduced axis is not the contiguous one, so numpy adds whole `[W, 6]` blocks path after
//!   path: per value a sequential f32 sum from `0.0` over the S paths, divided by `f32(S)` ([`path_mean`];
//!   pairwise summation would differ from S = 8 on). Then the last H rows, de-normalised with the series'
//!   statistics. Checked against numpy for S = 1 … 1000 by `tests/data/kronos/paths.json`.
//! * **Paths**, each de-normalised value by value (`pred · (std + 1e-5) + mean`, f32).
//! * **Quantiles** over the de-normalised paths, per step and column: `torch.quantile` (linear interpolation),
//!   [`crate::host::quantile`], as the other sampling family computes them. Upstream returns no quantiles.
//!
//! Greedy (`samples: 0`) is one path; its mean is the path itself (`(0 + x) / 1`).

use crate::error::{Error, Result};
use crate::host::quantile::path_quantiles;
use crate::kronos::normalize::Normalizer;

/// Values per row: open, high, low, close, volume, amount.
const ROW: usize = 6;

/// The forecast of one series, every array row-major with rows of the six columns in upstream's order.
#[derive(Debug, Clone, PartialEq)]
pub struct PathForecast {
    /// `[H][6]`: the mean of the paths, de-normalised (upstream's `predict` output).
    pub mean: Vec<f32>,
    /// `[S][H][6]`: every path, de-normalised.
    pub paths: Vec<f32>,
    /// `[q][H·6]`: each requested level over the de-normalised paths.
    pub quantiles: Vec<Vec<f32>>,
}

/// `np.mean` over the paths of `paths` (`[count][points]`, normalised), as numpy reduces a non-contiguous axis:
/// a sequential f32 sum from 0 per point, then `/ f32(count)`.
pub fn path_mean(paths: &[f32], count: usize, points: usize) -> Result<Vec<f32>> {
    Error::check_len("sample paths [paths][points]", count * points, paths.len())?;
    if count == 0 {
        return Err(Error::Length { what: "sample paths (at least one)".into(), expected: 1, actual: 0 });
    }
    let mut sum = vec![0.0f32; points];
    for path in paths.chunks_exact(points.max(1)).take(count) {
        for (s, &x) in sum.iter_mut().zip(path) {
            *s += x;
        }
    }
    let n = count as f32;
    Ok(sum.into_iter().map(|s| s / n).collect())
}

/// The forecast of one series from its `count` sample paths of `horizon` rows each, in normalised space
/// (`[count][horizon][6]`, the last `horizon` decoded rows of every path), and the quantile levels asked for.
pub fn summarize(
    normalized: &[f32],
    count: usize,
    horizon: usize,
    normalizer: &Normalizer,
    quantiles: &[f64],
) -> Result<PathForecast> {
    let points = horizon * ROW;
    let mut mean = path_mean(normalized, count, points)?;
    normalizer.denormalize_rows(&mut mean);
    let mut paths = normalized.to_vec();
    normalizer.denormalize_rows(&mut paths);
    let quantiles = path_quantiles(&paths, count, points, quantiles)?;
    Ok(PathForecast { mean, paths, quantiles })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronos::normalize::ColumnStats;
    use crate::kronos::testdata::{bits, hex_f32, vectors, SplitMix};

    fn with_stats(mean: &[f32], std: &[f32]) -> Normalizer {
        Normalizer::from_stats(std::array::from_fn(|c| ColumnStats { mean: mean[c], std: std[c] }), 5.0)
    }

    /// numpy's mean over the paths and the de-normalised last rows (paths.json).
    #[test]
    fn mean_matches_numpy_bit_for_bit() {
        let v = vectors("paths");
        for case in v["cases"].as_array().unwrap() {
            let n = |f: &str| case[f].as_u64().unwrap() as usize;
            let (series, s, w, h) = (n("series"), n("paths"), n("window"), n("horizon"));
            let mut r = SplitMix::new(case["seed"].as_u64().unwrap());
            let z: Vec<f32> = (0..series * s * w * 6).map(|_| (3.0 * r.bell()) as f32).collect();
            let want_mean = hex_f32(case["mean"].as_str().unwrap());
            let want_den = hex_f32(case["denormalized"].as_str().unwrap());
            for b in 0..series {
                // this series' paths, the last h rows of each window
                let per = w * 6;
                let paths: Vec<f32> = (0..s)
                    .flat_map(|p| {
                        let start = (b * s + p) * per + (w - h) * 6;
                        z[start..start + h * 6].to_vec()
                    })
                    .collect();
                let got = path_mean(&paths, s, h * 6).unwrap();
                let want = &want_mean[b * h * 6..(b + 1) * h * 6];
                assert_eq!(bits(&got), bits(want), "S={s} series {b}: mean");
                let ms = &case["mean_std"][b];
                let (m, sd) = (hex_f32(ms[0].as_str().unwrap()), hex_f32(ms[1].as_str().unwrap()));
                let f = summarize(&paths, s, h, &with_stats(&m, &sd), &[0.5]).unwrap();
                assert_eq!(bits(&f.mean), bits(&want_den[b * h * 6..(b + 1) * h * 6]), "S={s} series {b}");
            }
        }
    }

    #[test]
    fn paths_and_quantiles_are_denormalised() {
        // 3 paths × 1 step; column c has mean c and std 2 (volume: std 0)
        let mean: Vec<f32> = (0..6).map(|c| c as f32).collect();
        let mut std = vec![2.0f32; 6];
        std[4] = 0.0;
        let norm = with_stats(&mean, &std);
        let paths: Vec<f32> = [1.0f32, -1.0, 0.5].iter().flat_map(|&x| [x; 6]).collect();
        let f = summarize(&paths, 3, 1, &norm, &[0.0, 0.5, 1.0]).unwrap();
        let den = |c: usize, x: f32| x * (std[c] + 1e-5) + mean[c];
        assert_eq!(f.paths[..6], std::array::from_fn::<f32, 6, _>(|c| den(c, 1.0)));
        assert_eq!(f.mean[0], den(0, ((0.0 + 1.0) + -1.0 + 0.5) / 3.0));
        assert_eq!(f.mean[4], (0.5f32 / 3.0) * 1e-5 + 4.0); // a zero-std column: pred·1e-5 + mean
        assert_eq!(f.quantiles[0][..6], std::array::from_fn::<f32, 6, _>(|c| den(c, -1.0)));
        assert_eq!(f.quantiles[1][3], den(3, 0.5));
        assert_eq!(f.quantiles[2][5], den(5, 1.0));
    }

    #[test]
    fn one_path_is_its_own_mean_and_shapes_are_checked() {
        let x: Vec<f32> = (0..12).map(|i| i as f32 * 0.25 - 1.0).collect();
        assert_eq!(path_mean(&x, 1, 12).unwrap(), x);
        assert!(path_mean(&x, 2, 5).is_err());
        assert!(path_mean(&[], 0, 6).is_err());
        let norm = with_stats(&[0.0; 6], &[1.0; 6]);
        assert!(summarize(&x, 1, 3, &norm, &[]).is_err());
        // sequential, not pairwise: 9 paths of 1e8, then 3s
        let mut p = vec![3.0f32; 9];
        p[0] = 1.0e8;
        let seq = p.iter().fold(0.0f32, |a, &b| a + b) / 9.0;
        assert_eq!(path_mean(&p, 9, 1).unwrap(), vec![seq]);
        assert_ne!(seq, crate::kronos::numpy_sum::pairwise_sum(&p) / 9.0);
    }
}
