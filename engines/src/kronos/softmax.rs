//! torch's f32 softmax over the last dimension on CPU, bit for bit: ATen's `_vec_softmax_lastdim`
//! (`aten/src/ATen/native/cpu/SoftMaxKernel.cpp`, torch 2.7) built for the DEFAULT CPU capability, the one the
//! reference harness pins (`ATEN_CPU_CAPABILITY=default`, `tests/reference/kernels.py`):
//!
//! 1. `max` of the row (`vec::reduce_all` with `maximum`; the order does not matter for a maximum);
//! 2. `e_i = exp(x_i − max)`, the DEFAULT `Vectorized<float>::exp()` being `std::exp` lane by lane, i.e. libm's
//!    `expf` — the function Rust's `f32::exp` calls;
//! 3. `sum` by `vec::reduce_all`: eight lanes (`Vectorized<float>` is 32 bytes), lane `l` adding
//!    `e_l, e_{l+8}, e_{l+16}, …` in order, then the DEFAULT horizontal reduction adds lanes 1…7 to lane 0 one at a
//!    time ([`lane_sum`]; fewer than 8 values are added in order);
//! 4. `r = 1 / sum`, then `p_i = e_i · r` (a multiplication, not a division).
//!
//! Checked against torch by the SHA-256 of every probability row in `tests/data/kronos/sampler.json`. torch built
//! for AVX2 or AVX-512 (what an unpinned CPU dispatches to) computes `exp` with Sleef and adds the lanes as a tree:
//! its probabilities can differ in the last bit, which changes a sampling decision only where two candidates of
//! `p / E` tie to within that bit (see [`crate::kronos::sampler`]).

/// Lanes of ATen's DEFAULT `Vectorized<float>`.
pub const LANES: usize = 8;

/// `torch.softmax(x, -1)` of one row into `out` (same length). `−inf` entries get 0. A row of NaN or `+inf`, or of
/// only `−inf`, gives NaN, as torch; the sampler refuses such rows before.
pub fn torch_softmax(x: &[f32], out: &mut [f32]) {
    assert_eq!(x.len(), out.len(), "torch_softmax: output length");
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v - max).exp();
    }
    let r = 1.0 / lane_sum(out.iter().copied().enumerate());
    for o in out.iter_mut() {
        *o *= r;
    }
}

/// ATen's DEFAULT `vec::reduce_all(+)` of a row given as `(index, value)` pairs in increasing index order. Entries
/// left out count as `+0`: adding `+0` to a lane changes nothing (every value here is ≥ 0), so a softmax whose
/// removed tokens are `exp(−inf) = 0` can be summed over its kept tokens alone.
pub fn lane_sum(values: impl Iterator<Item = (usize, f32)>) -> f32 {
    let mut lanes = [0.0f32; LANES];
    for (i, v) in values {
        lanes[i % LANES] += v;
    }
    lanes.iter().fold(0.0, |acc, &l| acc + l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_then_lanes_in_order() {
        // 10 values: lane 0 = x0 + x8, lane 1 = x1 + x9, lanes 2..7 = x2..x7; then ((l0 + l1) + l2) + …
        let x: Vec<f32> = vec![1.0e8, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0];
        let lanes = [1.0e8f32 + 3.0, 3.0 + 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0];
        let want = lanes.iter().fold(0.0f32, |a, &b| a + b);
        assert_eq!(lane_sum(x.iter().copied().enumerate()), want);
        // leaving zeros out is the same sum
        let sparse = [(0, 1.0e8f32), (9, 3.0), (3, 3.0)];
        let mut dense = [0.0f32; 10];
        for (i, v) in sparse {
            dense[i] = v;
        }
        let mut sorted = sparse;
        sorted.sort_by_key(|p| p.0);
        assert_eq!(lane_sum(sorted.into_iter()), lane_sum(dense.iter().copied().enumerate()));
    }

    #[test]
    fn softmax_by_hand() {
        let x = [0.0f32, f32::NEG_INFINITY, 2.0_f32.ln()];
        let mut p = [0.0; 3];
        torch_softmax(&x, &mut p);
        let e = [(0.0f32 - 2.0_f32.ln()).exp(), 0.0, 1.0];
        let r = 1.0 / ((e[0] + e[1]) + e[2]);
        assert_eq!(p, [e[0] * r, 0.0, r]);
        let mut q = [0.0; 1];
        torch_softmax(&[f32::NEG_INFINITY], &mut q);
        assert!(q[0].is_nan());
    }
}
