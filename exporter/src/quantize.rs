//! int8 quantization for ONNX's `MatMulInteger`: weights per output channel at export, activations per row at run
//! time (the graph side is [`crate::graph::GraphBuilder::matmul_int8`]).
//!
//! A `[K, N]` weight is stored as `int8 [K, N]` codes (the layout `MatMulInteger`'s `B` reads) and one f32 scale
//! per output column `n`: `scale_n = max_k |w[k, n]| / 127`, `q = round_half_even(w / scale_n)` in `[−127, 127]`
//! (symmetric, no zero point). At run time every row of the activations gets its own scale the same way
//! (`s_row = max|x_row| / 127`, codes `round(x / s_row) + 128` as uint8 with zero point 128), and
//! `y[m, n] = s_row[m] · scale_n · Σ_k (xq[m, k] − 128) · q[k, n]`, accumulated exactly in int32 — so a row's
//! result depends on nothing but that row, whatever else is packed into the call.
//!
//! Why this scheme (measured with ONNX Runtime 1.31.1 CPU, the base model's 48 transformer matmuls, 2 threads):
//! MLAS's uint8 × int8 GEMM prepacks `B` once and is 3.1× the fp32 SGEMM at 64 rows, where `MatMulNBits`
//! (block-quantized weights, activations quantized per block inside the kernel, with results that change with
//! the number of rows in the call) is 1.8×; int8 × int8 has no prepacked x86 kernel (0.3×). The per-channel
//! scales cost little accuracy against 128-value blocks (chain error 8.8% against 7.1%, same random weights with
//! outlier channels;
//! `scripts/int8-kernels.py`). Measured on a CPU with AVX-512 VNNI; without VNNI, ONNX Runtime converts the int8
//! weights to uint8 at load (`vpmaddubsw` could saturate) and runs its exact u8 × u8 kernel.
//!
//! Quantization is calibration-free and deterministic: f64 arithmetic, round half to even, the scale rounded to
//! f32 *before* the values are divided by it (so the stored scale is the one the codes were made for), and no
//! dependence on anything but the weight values. An all-zero column gets scale 0 and codes 0.
//!
//! Error bound: per value `|w − dequant(q)| ≤ scale/2 = max|w_column| / 254` (plus the f32 rounding of the
//! scale), unit-tested below.

/// The largest code magnitude of the symmetric range (weights and activations).
pub const QMAX: f64 = 127.0;
/// The zero point of the uint8 activation codes (`MatMulInteger`'s `a_zero_point`).
pub const ACTIVATION_ZERO_POINT: u8 = 128;

/// A `[K, N]` weight quantized per output column for `MatMulInteger`.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedMatrix {
    pub k: usize,
    pub n: usize,
    /// `int8 [K, N]` row-major.
    pub codes: Vec<i8>,
    /// `[N]`: column n's scale.
    pub scales: Vec<f32>,
}

impl QuantizedMatrix {
    /// The weight as the graph sees it, `[K, N]` row-major (what tests compare against).
    pub fn dequantize_kn(&self) -> Vec<f32> {
        self.codes.iter().enumerate().map(|(i, &q)| f32::from(q) * self.scales[i % self.n]).collect()
    }

    /// The codes as stored bytes (two's complement).
    pub fn code_bytes(&self) -> Vec<u8> {
        self.codes.iter().map(|&q| q as u8).collect()
    }
}

/// Quantizes the `[K, N]` row-major weight `w_kn` (the layout a plain `MatMul` reads) with one scale per column.
pub fn quantize_kn(w_kn: &[f32], k: usize, n: usize) -> QuantizedMatrix {
    assert_eq!(w_kn.len(), k * n, "weight of {} values is not [{k}, {n}]", w_kn.len());
    let mut amax = vec![0f64; n];
    for row in w_kn.chunks_exact(n) {
        for (a, &v) in amax.iter_mut().zip(row) {
            *a = a.max(f64::from(v).abs());
        }
    }
    let scales: Vec<f32> = amax.iter().map(|&a| (a / QMAX) as f32).collect();
    let codes = w_kn
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let s = f64::from(scales[i % n]);
            if s == 0.0 {
                return 0;
            }
            // `round_ties_even`: deterministic and unbiased; the clamp only matters when the f32 rounding of the
            // scale made it slightly smaller than amax/127.
            (f64::from(v) / s).round_ties_even().clamp(-QMAX, QMAX) as i8
        })
        .collect();
    QuantizedMatrix { k, n, codes, scales }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random values in [-1, 1) with a few large outliers.
    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..len)
            .map(|i| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let u = ((s >> 40) as f32) / (1u64 << 24) as f32 * 2.0 - 1.0;
                if i % 97 == 13 {
                    u * 30.0
                } else {
                    u
                }
            })
            .collect()
    }

    #[test]
    fn round_trip_error_is_at_most_half_a_step_per_column() {
        let (k, n) = (300, 7);
        let w = values(k * n, 1);
        let q = quantize_kn(&w, k, n);
        let back = q.dequantize_kn();
        for c in 0..n {
            let amax = (0..k).map(|r| w[r * n + c].abs()).fold(0f32, f32::max);
            for kk in 0..k {
                let err = (w[kk * n + c] - back[kk * n + c]).abs();
                // half a step, plus the f32 rounding of the scale times the largest code
                let bound = amax / 254.0 * (1.0 + 1e-6) + amax * 1e-6;
                assert!(err <= bound, "k {kk} n {c}: error {err} > {bound}");
            }
            // the largest value of each column is exact up to the scale's f32 rounding
            assert!((q.scales[c] * 127.0 - amax).abs() <= amax * 1e-6);
        }
    }

    #[test]
    fn layout_is_k_major_with_one_scale_per_column() {
        // w[k][n]: column 0 = [0.5, -2, 4], column 1 = [0, 0, 0]
        let w = [0.5, 0.0, -2.0, 0.0, 4.0, 0.0];
        let q = quantize_kn(&w, 3, 2);
        assert_eq!(q.scales, vec![4.0 / 127.0, 0.0]);
        // column 0: 0.5/(4/127) = 15.875 → 16, -2 → -63.5 → -64 (ties to even), 4 → 127; column 1 all zero
        assert_eq!(q.codes, vec![16, 0, -64, 0, 127, 0]);
        assert_eq!(q.code_bytes(), vec![16, 0, 192, 0, 127, 0]);
        let back = q.dequantize_kn();
        assert_eq!(back[4], 4.0);
        assert_eq!(back[1], 0.0);
    }

    #[test]
    fn ties_round_to_even_and_quantization_is_deterministic() {
        // scale = 127/127 = 1: 2.5 → 2, 3.5 → 4, -0.5 → 0
        let w = [127.0, 2.5, 3.5, -0.5];
        let q = quantize_kn(&w, 4, 1);
        assert_eq!(q.scales, vec![1.0]);
        assert_eq!(q.codes, vec![127, 2, 4, 0]);
        let w = values(256 * 5, 9);
        assert_eq!(quantize_kn(&w, 256, 5), quantize_kn(&w, 256, 5));
    }
}
