//! torch's reduction order: `torch_sum` adds floats in the order of torch's CPU `sum`, so host numerics that
//! reproduce toto's (the scaler's statistics, the mixture's mean) equal torch bit for bit.

use std::array;

/// Float types [`torch_sum`] adds (and lane arrays of them, ATen's `Vectorized`).
pub(crate) trait Acc: Copy {
    const ZERO: Self;
    fn add(self, rhs: Self) -> Self;
}

impl Acc for f32 {
    const ZERO: Self = 0.0;
    fn add(self, rhs: Self) -> Self {
        self + rhs
    }
}

impl Acc for f64 {
    const ZERO: Self = 0.0;
    fn add(self, rhs: Self) -> Self {
        self + rhs
    }
}

impl<T: Acc, const L: usize> Acc for [T; L] {
    const ZERO: Self = [T::ZERO; L];
    fn add(self, rhs: Self) -> Self {
        array::from_fn(|i| self[i].add(rhs[i]))
    }
}

/// Sum of `x` in the order of torch's CPU `sum` over a contiguous dimension (ATen `SumKernel.cpp`
/// `cascade_sum`: `vectorized_inner_sum` over `LANES`-wide vectors, else `scalar_inner_sum`). `LANES` is the
/// vector width of the build torch dispatches to: 8 for f32 and 4 for f64 on AVX2 (torch 2.7 reports `AVX2`
/// on the reference machine; an AVX-512 torch would use 16/8 and add in another order).
pub(crate) fn torch_sum<T: Acc, const LANES: usize>(x: &[T]) -> T {
    torch_sum_by::<T, LANES>(x.len(), |i| x[i])
}

/// [`torch_sum`] of `n` values given by `x(i)`.
pub(crate) fn torch_sum_by<T: Acc, const LANES: usize>(n: usize, x: impl Fn(usize) -> T) -> T {
    if n < LANES {
        return row_sum(n, &x);
    }
    let vectors = n / LANES;
    let lanes: [T; LANES] = row_sum(vectors, |i| array::from_fn(|l| x(i * LANES + l)));
    let tail = (vectors * LANES..n).fold(T::ZERO, |acc, i| acc.add(x(i)));
    lanes.iter().fold(tail, |acc, &l| acc.add(l))
}

/// ATen `row_sum`: four interleaved accumulators (`ilp_factor`), the remainder into the first, then combined.
fn row_sum<A: Acc>(size: usize, x: impl Fn(usize) -> A) -> A {
    const ILP: usize = 4;
    let rows = size / ILP;
    let mut p: [A; ILP] = multi_row_sum(rows, |i| array::from_fn(|k| x(i * ILP + k)));
    for i in rows * ILP..size {
        p[0] = p[0].add(x(i));
    }
    for k in 1..ILP {
        p[0] = p[0].add(p[k]);
    }
    p[0]
}

/// ATen `multi_row_sum`: `N` column sums over `size` rows with a 4-level cascade of partial sums.
fn multi_row_sum<A: Acc, const N: usize>(size: usize, row: impl Fn(usize) -> [A; N]) -> [A; N] {
    const LEVELS: usize = 4;
    let ceil_log2 = if size <= 2 { 1 } else { usize::BITS - (size - 1).leading_zeros() } as usize;
    let power = 4.max(ceil_log2 / LEVELS);
    let step = 1usize << power;
    let mut acc = [[A::ZERO; N]; LEVELS];
    let mut i = 0;
    while i + step <= size {
        for _ in 0..step {
            acc[0] = acc[0].add(row(i));
            i += 1;
        }
        for j in 1..LEVELS {
            acc[j] = acc[j].add(acc[j - 1]);
            acc[j - 1] = [A::ZERO; N];
            if i & ((step - 1) << (j * power)) != 0 {
                break;
            }
        }
    }
    while i < size {
        acc[0] = acc[0].add(row(i));
        i += 1;
    }
    for j in 1..LEVELS {
        acc[0] = acc[0].add(acc[j]);
    }
    acc[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torch_sum_order() {
        // cross-checked against torch 2.7 `Tensor.sum(-1)` on AVX2 for K = 2..200 during development;
        // these cases pin the structure: < 8 values use 4 interleaved partials, >= 8 use 8 lanes plus a tail.
        let x = [1.0e8f32, 1.0, -1.0e8, 1.0, 3.0];
        // partials [1e8 + 3, 1, -1e8, 1], combined in order: 1 (a sequential sum gives 4)
        let want = (((1.0e8f32 + 3.0) + 1.0) + -1.0e8) + 1.0;
        assert_eq!(torch_sum::<f32, 8>(&x), want);
        let mut y = [1.0f32; 9];
        y[8] = 1.0e8;
        // eight lanes of 1, then the tail 1e8 first: 1e8 + 1 + ... rounds back to 1e8 each time
        // (a sequential sum gives 8 + 1e8 = 100000008)
        let want = 1.0e8f32;
        assert_eq!(torch_sum::<f32, 8>(&y), want);
    }
}
