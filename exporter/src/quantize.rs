//! Weight-only int8 quantization of a matmul weight into the layout of ONNX Runtime's `com.microsoft`
//! `MatMulNBits` (bits 8).
//!
//! `MatMulNBits` computes `Y = A · dequant(B)` for `A [M, K]` and a weight of logical shape `[K, N]` stored
//! transposed and blocked along K: `B` is `uint8 [N, ⌈K/block⌉, block]` (for 8 bits one byte per value), `scales`
//! is `[N · ⌈K/block⌉]` (row n's blocks in K order), and a value dequantizes to `(q − zp) · scale` with the
//! default zero point `2^(bits−1) = 128` when no `zero_points` input is given. totoc quantizes *symmetrically*:
//! per block, `scale = max|w| / 127` and `q = round_half_even(w / scale)` in `[−127, 127]`, stored as `q + 128`.
//! When K is not a multiple of the block, the last block of every row is padded with zeros (stored as 128, the
//! zero point: padding dequantizes to exactly 0, whatever the kernel does with the pad).
//!
//! Quantization is calibration-free and deterministic: f64 arithmetic, round half to even, the scale rounded to
//! f32 *before* the values are divided by it (so the stored scale is the one the codes were made for), and no
//! dependence on anything but the weight values. A block of zeros gets scale 0 and codes 128.
//!
//! Error bound: per value `|w − dequant(q)| ≤ scale/2 = max|w_block| / 254` (plus the f32 rounding of the scale),
//! unit-tested below.

/// Bits per weight.
pub const BITS: u32 = 8;
/// Values of K per scale (the `block_size` attribute).
pub const BLOCK: usize = 128;
/// The zero point `MatMulNBits` assumes without a `zero_points` input (`2^(bits−1)`).
pub const ZERO_POINT: u8 = 128;
/// The largest code magnitude of the symmetric range.
const QMAX: f64 = 127.0;

/// A `[K, N]` weight quantized for `MatMulNBits`.
#[derive(Debug, Clone, PartialEq)]
pub struct QuantizedMatrix {
    pub k: usize,
    pub n: usize,
    pub block: usize,
    /// `uint8 [N, blocks, block]`: codes `q + 128`, zero-padded past K.
    pub codes: Vec<u8>,
    /// `[N · blocks]`: row n's block scales in K order.
    pub scales: Vec<f32>,
}

impl QuantizedMatrix {
    /// Blocks per output column: `⌈K / block⌉`.
    pub fn blocks(&self) -> usize {
        self.k.div_ceil(self.block)
    }

    /// Shape of the `B` input: `[N, blocks, block]`.
    pub fn codes_dims(&self) -> [usize; 3] {
        [self.n, self.blocks(), self.block]
    }

    /// Shape of the `scales` input: `[N · blocks]`.
    pub fn scales_dims(&self) -> [usize; 1] {
        [self.n * self.blocks()]
    }

    /// The weight as `MatMulNBits` sees it, `[K, N]` row-major (what tests compare against).
    pub fn dequantize_kn(&self) -> Vec<f32> {
        let blocks = self.blocks();
        let mut out = vec![0f32; self.k * self.n];
        for n in 0..self.n {
            for kk in 0..self.k {
                let (b, i) = (kk / self.block, kk % self.block);
                let code = self.codes[(n * blocks + b) * self.block + i];
                out[kk * self.n + n] =
                    (f32::from(code) - f32::from(ZERO_POINT)) * self.scales[n * blocks + b];
            }
        }
        out
    }
}

/// Quantizes the `[K, N]` row-major weight `w_kn` (the layout a plain `MatMul` reads) with `block` values per
/// scale along K.
pub fn quantize_kn(w_kn: &[f32], k: usize, n: usize, block: usize) -> QuantizedMatrix {
    assert_eq!(w_kn.len(), k * n, "weight of {} values is not [{k}, {n}]", w_kn.len());
    assert!(block > 0, "block size 0");
    let blocks = k.div_ceil(block);
    let mut codes = vec![ZERO_POINT; n * blocks * block];
    let mut scales = vec![0f32; n * blocks];
    let mut col = vec![0f64; block];
    for c in 0..n {
        for b in 0..blocks {
            let len = block.min(k - b * block);
            let mut amax = 0f64;
            for (i, v) in col.iter_mut().enumerate().take(len) {
                *v = f64::from(w_kn[(b * block + i) * n + c]);
                amax = amax.max(v.abs());
            }
            let scale = (amax / QMAX) as f32;
            scales[c * blocks + b] = scale;
            if scale == 0.0 {
                continue;
            }
            let s = f64::from(scale);
            let dst = &mut codes[(c * blocks + b) * block..][..len];
            for (d, v) in dst.iter_mut().zip(&col[..len]) {
                // `round_ties_even`: deterministic and unbiased; the clamp only matters when the f32 rounding
                // of the scale made it slightly smaller than amax/127.
                let q = (v / s).round_ties_even().clamp(-QMAX, QMAX) as i32;
                *d = (q + i32::from(ZERO_POINT)) as u8;
            }
        }
    }
    QuantizedMatrix { k, n, block, codes, scales }
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
    fn round_trip_error_is_at_most_half_a_step_per_block() {
        let (k, n) = (300, 7); // K not a multiple of the block: a padded last block
        let w = values(k * n, 1);
        let q = quantize_kn(&w, k, n, BLOCK);
        let back = q.dequantize_kn();
        let blocks = q.blocks();
        assert_eq!(blocks, 3);
        for kk in 0..k {
            for c in 0..n {
                let b = kk / BLOCK;
                let amax =
                    (b * BLOCK..((b + 1) * BLOCK).min(k)).map(|r| w[r * n + c].abs()).fold(0f32, f32::max);
                let err = (w[kk * n + c] - back[kk * n + c]).abs();
                // half a step, plus the f32 rounding of the scale times the largest code
                let bound = amax / 254.0 * (1.0 + 1e-6) + amax * 1e-6;
                assert!(err <= bound, "k {kk} n {c}: error {err} > {bound}");
            }
        }
        // the largest value of each block is exact up to the scale's f32 rounding
        let amax0 = (0..BLOCK).map(|r| w[r * n].abs()).fold(0f32, f32::max);
        assert!((q.scales[0] * 127.0 - amax0).abs() <= amax0 * 1e-6);
    }

    #[test]
    fn layout_is_n_major_blocks_along_k_with_zero_point_padding() {
        // K = 3, N = 2, block 2: two blocks per column, the second padded.
        // w[k][n]: column 0 = [0.5, -2, 4], column 1 = [0, 0, -8]
        let w = [0.5, 0.0, -2.0, 0.0, 4.0, -8.0];
        let q = quantize_kn(&w, 3, 2, 2);
        assert_eq!(q.codes_dims(), [2, 2, 2]);
        assert_eq!(q.scales_dims(), [4]);
        let s = |v: f32| v / 127.0;
        assert_eq!(q.scales, vec![s(2.0), s(4.0), 0.0, s(8.0)]);
        // column 0, block 0: 0.5/(2/127) = 31.75 → 32, -2 → -127; block 1: 4 → 127, pad 128
        // column 1, block 0: all zero (scale 0, codes at the zero point); block 1: -8 → -127, pad 128
        assert_eq!(q.codes, vec![128 + 32, 128 - 127, 128 + 127, 128, 128, 128, 1, 128]);
        let back = q.dequantize_kn();
        assert_eq!(back[5], -8.0);
        assert_eq!(back[1], 0.0);
    }

    #[test]
    fn ties_round_to_even_and_quantization_is_deterministic() {
        // scale = 127/127 = 1: 2.5 → 2, 3.5 → 4, -0.5 → 0
        let w = [127.0, 2.5, 3.5, -0.5];
        let q = quantize_kn(&w, 4, 1, 4);
        assert_eq!(q.scales, vec![1.0]);
        assert_eq!(q.codes, vec![255, 130, 132, 128]);
        let w = values(256 * 5, 9);
        assert_eq!(quantize_kn(&w, 256, 5, BLOCK), quantize_kn(&w, 256, 5, BLOCK));
    }
}
