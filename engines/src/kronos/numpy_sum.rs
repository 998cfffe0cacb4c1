//! numpy's float32 sum over one contiguous axis, bit for bit (numpy 1.26, the reference's): upstream's
//! normalisation statistics are `np.mean` / `np.std` over axis 0 of a Fortran-ordered `[N, 6]` f32 matrix, so
//! every column is one contiguous reduction.
//!
//! What numpy does (`np.add.reduce`, `loops_utils.h.src` `FLOAT_pairwise_sum`, checked against numpy for
//! 1..300, 392, 512, 2000, 8192, 8193 and 20000 values by `tests/data/kronos/stats.json`):
//! * the output starts at the identity `0.0`, and the reduction hands the inner loop at most the ufunc buffer
//!   size ([`NUMPY_BUFSIZE`], `np.getbufsize()`, 8192 unless a program changes it) elements at a time, so a longer
//!   column is `((0 + pw(chunk₀)) + pw(chunk₁)) + …` — not one pairwise sum (20000 values differ in the last bit
//!   otherwise);
//! * `pw` of fewer than 8 values is a sequential sum from `0.0`; of up to 128, eight interleaved accumulators
//!   started from the first eight values, combined as `((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))`, then the remainder
//!   (fewer than 8 values) added in order; longer, the halves at `n/2` rounded down to a multiple of 8, each
//!   summed the same way, then added.

/// numpy's default ufunc buffer size: a reduction over more elements is added chunk by chunk.
pub const NUMPY_BUFSIZE: usize = 8192;

/// numpy's `PW_BLOCKSIZE`: the largest run summed with eight accumulators before splitting in two.
const PW_BLOCKSIZE: usize = 128;

/// `np.add.reduce` of a contiguous f32 array: `0.0`, then [`pairwise_sum`] of each [`NUMPY_BUFSIZE`] chunk
/// added in turn.
pub fn numpy_sum(x: &[f32]) -> f32 {
    x.chunks(NUMPY_BUFSIZE).fold(0.0, |acc, chunk| acc + pairwise_sum(chunk))
}

/// numpy's `FLOAT_pairwise_sum` (see the module notes). The recursion depth is log₂(n / 128); [`numpy_sum`] only
/// calls it on at most 8192 values.
pub fn pairwise_sum(a: &[f32]) -> f32 {
    let n = a.len();
    if n < 8 {
        return a.iter().fold(0.0, |res, &x| res + x);
    }
    if n <= PW_BLOCKSIZE {
        let mut r: [f32; 8] = std::array::from_fn(|k| a[k]);
        let body = n - n % 8;
        for block in a[8..body].chunks_exact(8) {
            for (acc, &x) in r.iter_mut().zip(block) {
                *acc += x;
            }
        }
        let res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        return a[body..].iter().fold(res, |res, &x| res + x);
    }
    let half = n / 2;
    let split = half - half % 8;
    pairwise_sum(&a[..split]) + pairwise_sum(&a[split..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_sums_are_sequential_from_zero() {
        // 1e8 + 1 − 1e8 + 1 in order: 1e8 + 1 rounds to 1e8 (f32), so the sum is 1, not 2
        assert_eq!(pairwise_sum(&[1.0e8, 1.0, -1.0e8, 1.0]), 1.0);
        // the identity is +0: a sum of −0 alone is +0
        assert_eq!(pairwise_sum(&[-0.0]).to_bits(), 0.0f32.to_bits());
        assert_eq!(pairwise_sum(&[]), 0.0);
    }

    #[test]
    fn eight_accumulators_then_the_remainder() {
        // 9 values: lanes hold 1e8, 3, ..., 3, combined pairwise, then the ninth value added last
        let mut x = [3.0f32; 9];
        x[0] = 1.0e8;
        x[8] = -1.0e8;
        let lanes = ((1.0e8f32 + 3.0) + (3.0 + 3.0)) + ((3.0 + 3.0) + (3.0 + 3.0));
        assert_eq!(pairwise_sum(&x), lanes + -1.0e8);
        assert_eq!(pairwise_sum(&x), 16.0);
        // a sequential sum loses the threes one by one against 1e8 (ulp 8) and gives 0
        assert_eq!(x.iter().fold(0.0, |a, &b| a + b), 0.0);
    }

    #[test]
    fn long_sums_split_at_a_multiple_of_eight_and_chunk_at_the_buffer_size() {
        let x: Vec<f32> = (0..300).map(|i| 1.0 + i as f32 * 1.0e-3).collect();
        // 300 → 144 + 156 → (72 + 72) + (72 + 84)
        let want = (pairwise_sum(&x[..72]) + pairwise_sum(&x[72..144]))
            + (pairwise_sum(&x[144..216]) + pairwise_sum(&x[216..]));
        assert_eq!(pairwise_sum(&x), want);
        let y: Vec<f32> = (0..NUMPY_BUFSIZE + 9).map(|i| (i % 13) as f32 * 0.37).collect();
        assert_eq!(
            numpy_sum(&y),
            (0.0 + pairwise_sum(&y[..NUMPY_BUFSIZE])) + pairwise_sum(&y[NUMPY_BUFSIZE..])
        );
    }
}
