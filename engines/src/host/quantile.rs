//! Quantiles of sample paths as `torch.quantile(samples, q, dim=-1)` computes them (linear interpolation, in
//! f32), for every family that draws sample paths: [`quantile_sorted`] on one sorted set, [`path_quantiles`]
//! for every point of a set of paths.

use crate::error::{Error, Result};

/// `torch.quantile` of ascending `sorted` values at `q ∈ [0, 1]` (linear interpolation, f32 like torch:
/// rank `q·(n−1)`, then `lerp`, which torch's CPU kernel fuses into one FMA). NaN if any value is NaN or
/// `sorted` is empty.
pub fn quantile_sorted(sorted: &[f32], q: f32) -> f32 {
    if sorted.is_empty() || sorted.iter().any(|x| x.is_nan()) || !(0.0..=1.0).contains(&q) {
        return f32::NAN;
    }
    let rank = q * (sorted.len() - 1) as f32;
    let (below, above) = (rank as usize, rank.ceil() as usize);
    let w = rank - below as f32;
    let (start, end) = (sorted[below], sorted[above]);
    if w.abs() < 0.5 {
        w.mul_add(end - start, start)
    } else {
        (w - 1.0).mul_add(end - start, end)
    }
}

/// Quantiles `[q][point]` of `paths` sample paths stored `[paths][points]` row-major: each point's values over
/// the paths, sorted (f32 total order), then [`quantile_sorted`] at each level (`q as f32`).
pub fn path_quantiles(data: &[f32], paths: usize, points: usize, qs: &[f64]) -> Result<Vec<Vec<f32>>> {
    Error::check_len("sample paths [paths][points]", paths * points, data.len())?;
    let mut out = vec![vec![0.0; points]; qs.len()];
    let mut column = Vec::with_capacity(paths);
    for point in 0..points {
        column.clear();
        column.extend((0..paths).map(|n| data[n * points + point]));
        column.sort_unstable_by(f32::total_cmp);
        for (level, &q) in out.iter_mut().zip(qs) {
            level[point] = quantile_sorted(&column, q as f32);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_edges() {
        assert_eq!(quantile_sorted(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.5), 3.0);
        assert_eq!(quantile_sorted(&[1.0, 2.0], 0.25), 1.25);
        assert_eq!(quantile_sorted(&[7.0], 0.9), 7.0);
        assert!(quantile_sorted(&[], 0.5).is_nan());
        assert!(quantile_sorted(&[1.0, f32::NAN], 0.5).is_nan());
    }

    #[test]
    fn path_quantiles_per_point() {
        // 4 paths × 2 points: point 0 holds 4, 1, 3, 2; point 1 holds 10, 40, 20, 30
        let data = [4.0, 10.0, 1.0, 40.0, 3.0, 20.0, 2.0, 30.0];
        let q = path_quantiles(&data, 4, 2, &[0.0, 0.5, 1.0]).unwrap();
        assert_eq!(q, vec![vec![1.0, 10.0], vec![2.5, 25.0], vec![4.0, 40.0]]);
        assert!(path_quantiles(&data, 3, 2, &[0.5]).is_err());
        // no paths: NaN, as torch.quantile of an empty set
        assert!(path_quantiles(&[], 0, 2, &[0.5]).unwrap()[0].iter().all(|x| x.is_nan()));
    }
}
