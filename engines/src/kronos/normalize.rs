//! Upstream's normalisation of one series (k:542-545, 554, 655), bit for bit with numpy 1.26:
//!
//! * per column over **all N rows** (even N > max_context): `mean = np.mean(x, axis=0)`,
//!   `std = np.std(x, axis=0)` (ddof 0) in f32. numpy's `_mean` is the column's f32 sum ([`numpy_sum`]) divided by
//!   `f32(N)`; `_var` subtracts that mean from every value, squares in place, sums the same way (the difference
//!   array keeps the Fortran order of `x`, so again one contiguous pairwise sum per column), divides by `f32(N)`;
//!   `_std` takes the IEEE square root;
//! * model input `clip((x − mean) / (std + 1e-5), −clip, clip)` in f32 (numpy casts the Python floats `1e-5` and
//!   `clip` to f32 for an f32 array; torch's second `clip` at k:389 changes nothing);
//! * output `pred · (std + 1e-5) + mean` in f32, two roundings, not clipped: a constant column (std 0, e.g. a
//!   missing volume) comes back as `pred · 1e-5 + mean`.
//!
//! `tests/data/kronos/stats.json` holds numpy's results for columns of 1..300, 392, 512, 2000, 8192, 8193 and
//! 20000 values (offsets of 3e6 with a spread of 1e3, tiny values, constants, zeros, 16 orders of magnitude). An
//! f64-then-round host is 1 ulp off in 2 of 6 means on GOOG's 392 rows (the model notes), so nothing here is f64.

use crate::error::{Error, Result};
use crate::kronos::columns::{Candles, COLUMNS};
use crate::kronos::numpy_sum::numpy_sum;
use crate::kronos::show_number;

/// numpy's f32 of upstream's `1e-5` (added to the std before dividing and multiplying).
pub const STD_EPS: f32 = 1e-5;

/// `KronosPredictor`'s default `clip` (k:482).
pub const DEFAULT_CLIP: f64 = 5.0;

/// One column's statistics, as numpy computes them for upstream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ColumnStats {
    pub mean: f32,
    pub std: f32,
}

impl ColumnStats {
    /// `np.mean(column)` and `np.std(column)` (ddof 0) of a contiguous f32 column; `scratch` holds the squared
    /// deviations. An empty column gives NaN (as numpy, with its warning); [`Normalizer::fit`] refuses it.
    pub fn of(column: &[f32], scratch: &mut Vec<f32>) -> ColumnStats {
        let n = column.len() as f32;
        let mean = numpy_sum(column) / n;
        scratch.clear();
        scratch.extend(column.iter().map(|&x| {
            let d = x - mean;
            d * d
        }));
        // a planted defect of the equivalence tests divides by N − 1 (numpy's ddof=1)
        let divisor = if crate::kronos::defects::planted().std_ddof1 { n - 1.0 } else { n };
        let var = numpy_sum(scratch) / divisor;
        ColumnStats { mean, std: var.sqrt() }
    }

    /// `std + 1e-5` in f32: the divisor of the input and the factor of the output.
    pub fn scale(&self) -> f32 {
        self.std + STD_EPS
    }

    /// `np.clip((x − mean) / (std + 1e-5), −clip, clip)` of one value.
    pub fn normalize(&self, x: f32, clip: f32) -> f32 {
        ((x - self.mean) / self.scale()).max(-clip).min(clip)
    }

    /// `pred · (std + 1e-5) + mean` of one value (not clipped).
    pub fn denormalize(&self, pred: f32) -> f32 {
        pred * self.scale() + self.mean
    }
}

/// The `clip` parameter of a request (upstream's `KronosPredictor(clip=…)`): default 5, finite and > 0, used as
/// its f32 (as numpy and torch use it on f32 arrays).
pub fn clip_param(at: &str, clip: Option<f64>) -> Result<f32> {
    let c = clip.unwrap_or(DEFAULT_CLIP);
    if c.is_finite() && c > 0.0 && (c as f32) > 0.0 && (c as f32).is_finite() {
        Ok(c as f32)
    } else {
        Err(Error::NotSupported {
            at: at.to_string(),
            message: format!(
                "`params.clip` is {}; it must be a finite number > 0 (the normalised inputs are clipped to \
                 ±clip; upstream's default is {DEFAULT_CLIP})",
                show_number(c)
            ),
        })
    }
}

/// One series' normalisation: the statistics of its six columns and its clip.
#[derive(Debug, Clone, PartialEq)]
pub struct Normalizer {
    stats: [ColumnStats; 6],
    clip: f32,
}

impl Normalizer {
    /// The statistics of every column of `candles` (all N rows). Refuses a column whose statistics are not finite
    /// (values so large that their squares overflow f32: upstream would forecast NaN), naming it.
    pub fn fit(at: &str, candles: &Candles, clip: f32) -> Result<Self> {
        let mut scratch = Vec::with_capacity(candles.rows());
        let mut stats = [ColumnStats { mean: 0.0, std: 0.0 }; 6];
        for (c, s) in stats.iter_mut().enumerate() {
            *s = ColumnStats::of(candles.column(c), &mut scratch);
            if !(s.mean.is_finite() && s.std.is_finite()) {
                return Err(Error::NotSupported {
                    at: at.to_string(),
                    message: format!(
                        "column `{}` has mean {} and standard deviation {} in f32 over its {} rows: its values are \
                         too large for the model's f32 normalisation; rescale the column",
                        COLUMNS[c],
                        s.mean,
                        s.std,
                        candles.rows()
                    ),
                });
            }
        }
        Ok(Normalizer { stats, clip })
    }

    /// A normalizer from known statistics (e.g. a reference fixture's).
    pub fn from_stats(stats: [ColumnStats; 6], clip: f32) -> Self {
        Normalizer { stats, clip }
    }

    /// The statistics of the six columns, in [`COLUMNS`] order.
    pub fn stats(&self) -> &[ColumnStats; 6] {
        &self.stats
    }

    pub fn clip(&self) -> f32 {
        self.clip
    }

    /// The model's input: every candle normalised and clipped, `[N][6]` row-major (upstream's `x[np.newaxis]`).
    pub fn normalized_rows(&self, candles: &Candles) -> Vec<f32> {
        let mut out = Vec::with_capacity(candles.rows() * 6);
        for i in 0..candles.rows() {
            out.extend((0..6).map(|c| self.stats[c].normalize(candles.column(c)[i], self.clip)));
        }
        out
    }

    /// De-normalises rows `[…][6]` in place (the forecast, or one sample path).
    pub fn denormalize_rows(&self, rows: &mut [f32]) {
        for row in rows.chunks_exact_mut(6) {
            for (x, s) in row.iter_mut().zip(&self.stats) {
                *x = s.denormalize(*x);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronos::columns::{prepare_columns, Column, ColumnValues};
    use crate::kronos::testdata::{bits, column, hex_f32, vectors, SplitMix};

    fn candles_of(cols: &[Vec<f32>]) -> Candles {
        let columns: Vec<Column> = COLUMNS
            .iter()
            .zip(cols)
            .map(|(&name, v)| Column { name, values: ColumnValues::F32(v) })
            .collect();
        prepare_columns("t", &columns).unwrap()
    }

    /// numpy's mean, std, normalised input and de-normalised output (`gen_kronos_host_vectors.py`, stats.json).
    #[test]
    fn statistics_match_numpy_bit_for_bit() {
        let v = vectors("stats");
        let cases = v["cases"].as_array().unwrap();
        assert!(cases.len() > 300);
        let mut checked_rows = 0;
        for case in cases {
            let n = case["n"].as_u64().unwrap() as usize;
            let seed = case["seed"].as_u64().unwrap();
            let kinds: Vec<u32> =
                case["kinds"].as_array().unwrap().iter().map(|k| k.as_u64().unwrap() as u32).collect();
            let cols: Vec<Vec<f32>> = (0..6).map(|c| column(seed * 16 + c as u64, kinds[c], n)).collect();
            let candles = candles_of(&cols);
            let clip = clip_param("t", Some(case["clip"].as_f64().unwrap())).unwrap();
            let norm = Normalizer::fit("t", &candles, clip).unwrap();
            let means: Vec<f32> = norm.stats().iter().map(|s| s.mean).collect();
            let stds: Vec<f32> = norm.stats().iter().map(|s| s.std).collect();
            assert_eq!(
                bits(&means),
                bits(&hex_f32(case["mean"].as_str().unwrap())),
                "n={n} kinds {kinds:?}: mean"
            );
            assert_eq!(
                bits(&stds),
                bits(&hex_f32(case["std"].as_str().unwrap())),
                "n={n} kinds {kinds:?}: std"
            );
            if let Some(want) = case.get("normalized") {
                let got = norm.normalized_rows(&candles);
                assert_eq!(bits(&got), bits(&hex_f32(want.as_str().unwrap())), "n={n}: normalised rows");
                let mut r = SplitMix::new(case["preds_seed"].as_u64().unwrap());
                let mut preds: Vec<f32> = (0..7 * 6).map(|_| (3.0 * r.bell()) as f32).collect();
                norm.denormalize_rows(&mut preds);
                let want = hex_f32(case["denormalized"].as_str().unwrap());
                assert_eq!(bits(&preds), bits(&want), "n={n}: de-normalised output");
                checked_rows += n;
            }
        }
        assert!(checked_rows > 1000);
    }

    #[test]
    fn constant_columns_and_zero_std() {
        let zeros = vec![0.0f32; 50];
        let s = ColumnStats::of(&zeros, &mut Vec::new());
        assert_eq!((s.mean, s.std, s.scale()), (0.0, 0.0, STD_EPS));
        // a zero-std column comes back as pred·1e-5 + mean
        assert_eq!(s.denormalize(2.0), 2.0 * STD_EPS);
        // 0.1 is not exact in f32, and neither is its sum: the mean is off by an ulp, the std is tiny but not 0
        let tenths = vec![0.1f32; 3];
        let s = ColumnStats::of(&tenths, &mut Vec::new());
        assert_eq!(s.mean, ((0.0 + 0.1f32) + 0.1 + 0.1) / 3.0);
        assert_eq!(s.std == 0.0, s.mean == 0.1);
    }

    #[test]
    fn clipping_and_its_parameter() {
        let s = ColumnStats { mean: 0.0, std: 1.0 };
        assert_eq!(s.normalize(100.0, 5.0), 5.0);
        assert_eq!(s.normalize(-100.0, 2.5), -2.5);
        assert_eq!(s.normalize(1.0, 5.0), 1.0 / (1.0 + STD_EPS));
        assert_eq!(clip_param("r", None).unwrap(), 5.0);
        assert_eq!(clip_param("r", Some(0.1)).unwrap(), 0.1f32);
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-60, 1e60] {
            let e = clip_param("request 1", Some(bad)).unwrap_err();
            assert!(e.is_request_error() && e.to_string().contains("`params.clip` is"), "{bad}: {e}");
        }
    }

    #[test]
    fn overflowing_statistics_are_refused() {
        let mut cols = vec![vec![1.0f32, 2.0, 3.0]; 6];
        cols[4] = vec![3.0e19, 1.0, 2.0]; // squared deviations overflow f32
        let e = Normalizer::fit("series X", &candles_of(&cols), 5.0).unwrap_err();
        assert!(e.to_string().contains("series X: column `volume` has mean"), "{e}");
    }
}
