//! Host rotary tables of Toto 2.0's time layers (toto-2 2.0.0 `ExtrapolatableRotaryProjection` on the first
//! half of each head, `partial_factor=(0, 0.5)`): RoPE with theta 10000 and xPos with scale base 256.
//!
//! For Dr rotated channels, token position `pos` (in patches) and the call's centre `c`, all in f32 as torch:
//! ```text
//! theta_i = 1 / 10000^((2i)/Dr)                    cos/sin[pos][j] = cos/sin(pos · theta_{j/2})       (interleaved)
//! zeta_i  = (2i + 0.4·Dr) / (1.4·Dr)               xpos[pos][j]    = zeta_{j/2} ^ ((pos − c)/256)     (interleaved)
//! ```
//! The graph applies `(x·cos + rotate(x)·sin)·xpos` to queries and `…/xpos` to keys. The centre is
//! `c = (max position of the call + 1) // 2`: a single pass over L tokens (positions 0…L−1) has c = L//2; a
//! block-decoding call numbers its tokens absolutely, so c moves with every call, and cached keys keep the centre
//! of the call that wrote them. `theta` and `zeta` are the Toto 1.0 formulas ([`crate::host::rope`]); cos, sin and
//! the power are computed in f64 and rounded once (correctly rounded f32, within 1 ulp of torch's vectorised
//! math, as documented there). Without xPos (`use_xpos: false`) the scale is 1.

use crate::host::rope::{inv_freq, xpos_base};

/// xPos `scale_base` of Toto 2.0.
pub const XPOS_SCALE_BASE: f32 = 256.0;

/// The xPos centre of a call whose largest token position is `max_position`: `(max + 1) // 2`.
pub fn centre(max_position: usize) -> usize {
    max_position.div_ceil(2)
}

/// Rotary tables of one model: Dr and whether xPos is on.
#[derive(Debug, Clone)]
pub struct RopeTables {
    rotary_dim: usize,
    use_xpos: bool,
    theta: Vec<f32>,
    zeta: Vec<f32>,
}

impl RopeTables {
    /// # Panics
    /// If `rotary_dim` is odd or zero (the exporter's config validation rules that out).
    pub fn new(rotary_dim: usize, use_xpos: bool) -> Self {
        assert!(rotary_dim > 0 && rotary_dim.is_multiple_of(2), "rope: rotary_dim {rotary_dim} must be even");
        RopeTables { rotary_dim, use_xpos, theta: inv_freq(rotary_dim), zeta: xpos_base(rotary_dim) }
    }

    pub fn rotary_dim(&self) -> usize {
        self.rotary_dim
    }

    /// Writes one `[Dr]` row of cos, sin and xpos per position (row-major `[n, Dr]` slices of equal length).
    pub fn fill(
        &self,
        positions: impl IntoIterator<Item = usize>,
        centre: usize,
        cos: &mut [f32],
        sin: &mut [f32],
        xpos: &mut [f32],
    ) {
        let dr = self.rotary_dim;
        for (n, pos) in positions.into_iter().enumerate() {
            let r = n * dr..(n + 1) * dr;
            let (c, s, x) = (&mut cos[r.clone()], &mut sin[r.clone()], &mut xpos[r]);
            let p = pos as f32;
            let power = (p - centre as f32) / XPOS_SCALE_BASE;
            for i in 0..dr / 2 {
                let angle = f64::from(p * self.theta[i]);
                let (sa, ca) = (angle.sin() as f32, angle.cos() as f32);
                let z =
                    if self.use_xpos { f64::from(self.zeta[i]).powf(f64::from(power)) as f32 } else { 1.0 };
                (c[2 * i], c[2 * i + 1], s[2 * i], s[2 * i + 1], x[2 * i], x[2 * i + 1]) =
                    (ca, ca, sa, sa, z, z);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centre_is_max_plus_one_halved() {
        assert_eq!((centre(0), centre(1), centre(26), centre(27)), (0, 1, 13, 14));
    }

    #[test]
    fn tables_are_interleaved_with_toto2_constants() {
        let t = RopeTables::new(32, true);
        let (mut c, mut s, mut x) = (vec![0.0; 64], vec![0.0; 64], vec![0.0; 64]);
        t.fill([3, 20], 10, &mut c, &mut s, &mut x);
        // pairs share one angle and one scale
        for v in [&c, &s, &x] {
            assert!(v.chunks(2).all(|p| p[0] == p[1]));
        }
        // channel pair 0: theta 1, zeta 12.8/44.8; power (3 − 10)/256
        assert_eq!(c[0], 3f64.cos() as f32);
        let zeta0 = (0.4f64 * 32.0) as f32 / (1.4f64 * 32.0) as f32;
        assert_eq!(x[0], f64::from(zeta0).powf(f64::from(-7.0f32 / 256.0)) as f32);
        // ζ < 1: a position before the centre scales up, after it down
        assert!(x[0] > 1.0 && x[32] < 1.0);
        // the last pair of the second row: theta_15 = 1/10000^(30/32)
        let theta15 = 1.0 / 10000f64.powf(f64::from(30.0f32 / 32.0)) as f32;
        assert_eq!(s[62], f64::from(20.0 * theta15).sin() as f32);
        let flat = RopeTables::new(32, false);
        flat.fill([3, 20], 10, &mut c, &mut s, &mut x);
        assert!(x.iter().all(|&v| v == 1.0));
    }
}
