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

/// The version of the int8 layout (docs/formats.md, "int8 weights"): 3 adds the block kernel
/// ([`quantize_blocks`], `MatMulNBits`) and Toto 1.0's default MLP in it. Recorded in an int8 export's build
/// inputs, so a bundle of an older layout is re-exported rather than reused.
pub const INT8_WEIGHTS_VERSION: u32 = 3;

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

/// The block length along K of [`quantize_blocks`] (`MatMulNBits`'s `block_size`): the smallest MLAS supports.
/// On the trained Toto 1.0 the MLP in 16-value blocks meets the int8 goal where 32-value blocks do not alongside
/// the attention's per-row int8 (docs/precision.md).
pub const BLOCK: usize = 16;

/// A `[K, N]` weight quantized for ONNX Runtime's `MatMulNBits` (8 bits): for each output column, blocks of
/// [`BLOCK`] values along K, each with its own scale `max|w_block| / 127` and codes `round(w / scale) + 128` (the
/// op's default zero point for 8 bits, so no zero-point input); a last partial block is padded with the zero
/// code 128.
#[derive(Debug, Clone, PartialEq)]
pub struct BlockQuantizedMatrix {
    pub k: usize,
    pub n: usize,
    /// `uint8 [N, ceil(K / BLOCK), BLOCK]`: column-major blocks, the layout `MatMulNBits`'s `B` reads.
    pub codes: Vec<u8>,
    /// `[N · ceil(K / BLOCK)]`: column n's block b at `n · blocks + b`.
    pub scales: Vec<f32>,
}

impl BlockQuantizedMatrix {
    /// Blocks per column.
    pub fn blocks(&self) -> usize {
        self.k.div_ceil(BLOCK)
    }

    /// The weight as the graph sees it, `[K, N]` row-major (what tests compare against).
    pub fn dequantize_kn(&self) -> Vec<f32> {
        let nb = self.blocks();
        let mut w = vec![0f32; self.k * self.n];
        for c in 0..self.n {
            for kk in 0..self.k {
                let code = f32::from(self.codes[c * nb * BLOCK + kk]) - 128.0;
                w[kk * self.n + c] = code * self.scales[c * nb + kk / BLOCK];
            }
        }
        w
    }
}

/// Quantizes the `[K, N]` row-major weight `w_kn` in blocks of [`BLOCK`] along K per output column, with the
/// rounding rules of [`quantize_kn`] (f64, ties to even, the scale rounded to f32 first).
pub fn quantize_blocks(w_kn: &[f32], k: usize, n: usize) -> BlockQuantizedMatrix {
    assert_eq!(w_kn.len(), k * n, "weight of {} values is not [{k}, {n}]", w_kn.len());
    let nb = k.div_ceil(BLOCK);
    let mut codes = vec![ACTIVATION_ZERO_POINT; n * nb * BLOCK];
    let mut scales = vec![0f32; n * nb];
    for c in 0..n {
        for b in 0..nb {
            let rows = b * BLOCK..((b + 1) * BLOCK).min(k);
            let amax = rows.clone().map(|r| f64::from(w_kn[r * n + c]).abs()).fold(0.0, f64::max);
            let scale = (amax / QMAX) as f32;
            scales[c * nb + b] = scale;
            if scale == 0.0 {
                continue;
            }
            for r in rows {
                let q = (f64::from(w_kn[r * n + c]) / f64::from(scale)).round_ties_even().clamp(-QMAX, QMAX);
                codes[c * nb * BLOCK + r] = (q as i32 + 128) as u8;
            }
        }
    }
    BlockQuantizedMatrix { k, n, codes, scales }
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
    fn blocks_quantize_sixteen_values_each_and_pad_the_last() {
        // K = 20: one full block and one of 4 values (padded with the zero code); N = 2
        let (k, n) = (20, 2);
        let w = values(k * n, 3);
        let q = quantize_blocks(&w, k, n);
        assert_eq!((q.blocks(), q.codes.len(), q.scales.len()), (2, 2 * 2 * BLOCK, 4));
        let back = q.dequantize_kn();
        for c in 0..n {
            for b in 0..2 {
                let rows = b * BLOCK..((b + 1) * BLOCK).min(k);
                let amax = rows.clone().map(|r| w[r * n + c].abs()).fold(0f32, f32::max);
                assert!((q.scales[c * 2 + b] * 127.0 - amax).abs() <= amax * 1e-6, "column {c} block {b}");
                for r in rows {
                    let err = (w[r * n + c] - back[r * n + c]).abs();
                    assert!(err <= amax / 254.0 * (1.0 + 1e-6) + amax * 1e-6, "k {r} n {c}: {err}");
                }
            }
            // the padding of the last block is the zero code
            assert!(q.codes[c * 2 * BLOCK + k..(c + 1) * 2 * BLOCK].iter().all(|&v| v == 128));
        }
        // an outlier coarsens its own block only: block 1 of column 0 keeps a finer scale than block 0
        let mut w = vec![0.01f32; 32];
        w[3] = 5.0;
        let q = quantize_blocks(&w, 32, 1);
        assert_eq!(q.scales, vec![(5.0 / QMAX) as f32, (f64::from(0.01f32) / QMAX) as f32]);
        assert_eq!(q.codes[3], 255);
        assert_eq!(q.codes[16], 255);
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
