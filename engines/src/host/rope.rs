//! Host rotary tables: RoPE + xPos exactly as toto's `TimeAwareRotaryEmbedding` (toto-ts 0.2.0
//! `model/rope.py`, on rotary-embedding-torch 0.8.6) computes them for time-wise attention: theta 10000,
//! `use_xpos`, `xpos_scale_base` 512.
//!
//! For a head dimension Dh and i < Dh/2, all in f32 as torch:
//! ```text
//! inv_freq_i = 1 / 10000^((2i)/Dh)            angle(pos, j) = pos · inv_freq_{j/2}      (interleaved f0 f0 f1 f1 …)
//! cos/sin[pos][j] = cos/sin(angle(pos, j))
//! xpos_base_i = (2i + 0.4·Dh) / (1.4·Dh)      xpos[pos][j] = xpos_base_{j mod Dh/2} ^ ((pos − centre)/512)   (cat(s, s))
//! ```
//! The graph applies `q' = (q·cos + rot(q)·sin)·xpos` and `k' = (k·cos + rot(k)·sin)·(1/xpos)`. The centre is
//! `floor(max position of the call / 2)`: `(S−1)//2` at a prefill of S patches ([`prefill_centre`]) and `p//2`
//! for the one patch at position p of a decode step ([`decode_centre`]); cached keys keep their prefill centre.
//!
//! Checked against torch 2.7 CPU (`tests/data/rope.json`: Dh 64 at positions 0..=300, Dh 16 at 0..=64; prefills
//! of 1, 2, 3, 8, 13, 64 and all patches, and a decode step at every position):
//! * `inv_freq`, the angles and `xpos_base` are equal bit for bit (also checked for Dh 32 and 128).
//! * cos/sin/xpos are computed in f64 and rounded once, i.e. correctly rounded f32. torch evaluates f32
//!   cos/sin with its vectorised math library (MKL VML in the PyPI build; SLEEF `cosf8_u10` agrees with it on
//!   only 98% of inputs) and the xPos `pow` with SLEEF `powf8_u10` (glibc `powf` when Dh/2 < 16), all within
//!   1 ulp of correct rounding but not always equal to it: 4–7% of the cos/sin entries and 0.4% of the Dh-64
//!   xpos entries differ from torch by exactly 1 ulp (≤ 1.2e-7 relative), every other entry is equal. Those
//!   libraries' last bits depend on the CPU and build, so correct rounding is the portable choice.

/// RoPE base (`theta`).
pub const THETA: f64 = 10000.0;
/// xPos `scale_base`.
pub const XPOS_SCALE_BASE: f32 = 512.0;

/// `inv_freq` `[Dh/2]` as rotary-embedding-torch computes it: `1. / (theta ** (arange(0, Dh, 2).float() / Dh))`.
pub fn inv_freq(head_dim: usize) -> Vec<f32> {
    (0..head_dim / 2)
        .map(|i| {
            let e = (2 * i) as f32 / head_dim as f32;
            1.0 / THETA.powf(f64::from(e)) as f32
        })
        .collect()
}

/// xPos per-frequency base `[Dh/2]`: `(arange(0, Dh, 2) + 0.4·Dh) / (1.4·Dh)` in f32.
pub fn xpos_base(head_dim: usize) -> Vec<f32> {
    let (add, div) = ((0.4 * head_dim as f64) as f32, (1.4 * head_dim as f64) as f32);
    (0..head_dim / 2).map(|i| ((2 * i) as f32 + add) / div).collect()
}

/// xPos centre of a prefill over `patches` patches (positions `0..patches`): `(S−1)//2`.
pub fn prefill_centre(patches: usize) -> usize {
    patches.saturating_sub(1) / 2
}

/// xPos centre of a decode step at absolute patch position `p`: `p//2`.
pub fn decode_centre(position: usize) -> usize {
    position / 2
}

/// Writes one `[Dh]` row of `cos`, `sin` and `xpos` per position (row-major `[n, Dh]`) for xPos `centre`.
///
/// # Panics
/// If `head_dim` is odd or zero, or a table is not `positions × head_dim` long.
pub fn fill_tables(
    positions: impl IntoIterator<Item = usize>,
    centre: usize,
    head_dim: usize,
    cos: &mut [f32],
    sin: &mut [f32],
    xpos: &mut [f32],
) {
    assert!(head_dim > 0 && head_dim.is_multiple_of(2), "rope: head_dim {head_dim} must be even and > 0");
    assert!(cos.len() == sin.len() && cos.len() == xpos.len(), "rope: tables differ in length");
    let half = head_dim / 2;
    let (inv, base) = (inv_freq(head_dim), xpos_base(head_dim));
    let mut rows = 0;
    for (n, pos) in positions.into_iter().enumerate() {
        let r = n * head_dim..(n + 1) * head_dim;
        assert!(r.end <= cos.len(), "rope: more positions than table rows ({} values)", cos.len());
        let (c, s, x) = (&mut cos[r.clone()], &mut sin[r.clone()], &mut xpos[r]);
        let p = pos as f32;
        let power = (p - centre as f32) / XPOS_SCALE_BASE;
        for i in 0..half {
            let angle = f64::from(p * inv[i]);
            let (sa, ca) = (angle.sin() as f32, angle.cos() as f32);
            (c[2 * i], c[2 * i + 1], s[2 * i], s[2 * i + 1]) = (ca, ca, sa, sa);
            let scale = f64::from(base[i]).powf(f64::from(power)) as f32;
            (x[i], x[half + i]) = (scale, scale);
        }
        rows = n + 1;
    }
    assert_eq!(
        rows * head_dim,
        cos.len(),
        "rope: tables hold {} rows, got {rows} positions",
        cos.len() / head_dim
    );
}

/// Prefill tables `[slots, Dh]` for positions `0..slots` with the centre of `patches` real patches
/// (`(S−1)//2`); slots past S only ever meet causal-masked queries.
pub fn fill_prefill(
    slots: usize,
    patches: usize,
    head_dim: usize,
    cos: &mut [f32],
    sin: &mut [f32],
    xpos: &mut [f32],
) {
    fill_tables(0..slots, prefill_centre(patches), head_dim, cos, sin, xpos);
}

/// Decode tables `[Dh]` for the patch at absolute position `p` (centre `p//2`).
pub fn fill_decode(position: usize, head_dim: usize, cos: &mut [f32], sin: &mut [f32], xpos: &mut [f32]) {
    fill_tables([position], decode_centre(position), head_dim, cos, sin, xpos);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::scaler::tests::hex_f32;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct File {
        cases: Vec<Case>,
    }
    /// Torch's tables by distinct value: cos/sin `[pos][Dh/2]`, xpos `[pos − centre − xpos_offset_min][Dh/2]`.
    #[derive(Deserialize)]
    struct Case {
        head_dim: usize,
        max_pos: usize,
        inv_freq: String,
        xpos_base: String,
        cos: Vec<String>,
        sin: Vec<String>,
        xpos_offset_min: i64,
        xpos: Vec<String>,
    }

    /// Counts entries one ulp away from torch; fails on anything further.
    #[derive(Debug, Default, Clone, Copy)]
    struct Ulps {
        off: usize,
        total: usize,
    }

    impl Ulps {
        fn add(&mut self, what: &str, got: &[f32], want: &[f32]) {
            assert_eq!(got.len(), want.len());
            for (i, (a, b)) in got.iter().zip(want).enumerate() {
                let d = (i64::from(a.to_bits()) - i64::from(b.to_bits())).abs();
                assert!(d <= 1, "{what}[{i}]: {a} vs torch {b} ({d} ulp)");
                self.off += usize::from(d == 1);
            }
            self.total += got.len();
        }

        fn rate(&self) -> f64 {
            self.off as f64 / self.total as f64
        }
    }

    #[test]
    fn matches_torch() {
        let file: File = serde_json::from_str(include_str!("../../tests/data/rope.json")).unwrap();
        for c in &file.cases {
            let (dh, half) = (c.head_dim, c.head_dim / 2);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&inv_freq(dh)), bits(&hex_f32(&c.inv_freq)), "inv_freq Dh {dh}");
            assert_eq!(bits(&xpos_base(dh)), bits(&hex_f32(&c.xpos_base)), "xpos_base Dh {dh}");
            let decode = |rows: &[String]| rows.iter().map(|r| hex_f32(r)).collect::<Vec<_>>();
            let (cos, sin, xpos) = (decode(&c.cos), decode(&c.sin), decode(&c.xpos));
            // torch's [n, Dh] tables: interleaved cos/sin (column j/2), cat(s, s) xpos (column j mod Dh/2)
            let full = |positions: &[usize], centre: usize| {
                let xrow = |p: usize| (p as i64 - centre as i64 - c.xpos_offset_min) as usize;
                let mut t = (Vec::new(), Vec::new(), Vec::new());
                for &p in positions {
                    for j in 0..dh {
                        t.0.push(cos[p][j / 2]);
                        t.1.push(sin[p][j / 2]);
                        t.2.push(xpos[xrow(p)][j % half]);
                    }
                }
                t
            };
            let mut ulps = [Ulps::default(); 3];
            let mut check =
                |what: &str, positions: &[usize], centre: usize, got: (&[f32], &[f32], &[f32])| {
                    let want = full(positions, centre);
                    ulps[0].add(&format!("{what} cos"), got.0, &want.0);
                    ulps[1].add(&format!("{what} sin"), got.1, &want.1);
                    ulps[2].add(&format!("{what} xpos"), got.2, &want.2);
                };
            // prefills of several lengths (every position and offset of the longest one)
            for s in [1, 2, 3, 8, 13, 64, c.max_pos + 1] {
                let n = s * dh;
                let (mut cs, mut sn, mut xp) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
                fill_prefill(s, s, dh, &mut cs, &mut sn, &mut xp);
                let positions: Vec<usize> = (0..s).collect();
                check(&format!("prefill S={s}"), &positions, prefill_centre(s), (&cs, &sn, &xp));
            }
            // decode steps at every position
            for p in 1..=c.max_pos {
                let (mut cs, mut sn, mut xp) = (vec![0.0; dh], vec![0.0; dh], vec![0.0; dh]);
                fill_decode(p, dh, &mut cs, &mut sn, &mut xp);
                check(&format!("decode p={p}"), &[p], decode_centre(p), (&cs, &sn, &xp));
            }
            // the agreement documented in the module docs
            assert!(ulps[0].rate() < 0.08 && ulps[1].rate() < 0.08, "Dh {dh}: cos/sin 1-ulp rates {ulps:?}");
            assert!(ulps[2].rate() < 0.01, "Dh {dh}: xpos 1-ulp rate {ulps:?}");
            eprintln!("Dh {dh}: entries 1 ulp from torch (cos, sin, xpos): {ulps:?}");
        }
    }

    #[test]
    fn centres_and_layout() {
        assert_eq!(
            (prefill_centre(1), prefill_centre(2), prefill_centre(5), prefill_centre(0)),
            (0, 0, 2, 0)
        );
        assert_eq!((decode_centre(7), decode_centre(8)), (3, 4));
        let (mut c, mut s, mut x) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
        fill_decode(3, 8, &mut c, &mut s, &mut x);
        // interleaved angles: pairs are equal; xpos halves are equal
        assert!(c.chunks(2).all(|p| p[0] == p[1]) && s.chunks(2).all(|p| p[0] == p[1]));
        assert_eq!(x[..4], x[4..]);
        assert_eq!(c[0], (3.0f64).cos() as f32);
        // power (3 − 1)/512 > 0 and the bases are < 1: the scale is just below 1
        assert!(x[0] < 1.0 && x[0] > 0.99);
        // position 0 at centre 0: no rotation, unit scale
        fill_tables([0], 0, 8, &mut c, &mut s, &mut x);
        assert!(c.iter().all(|&v| v == 1.0) && s.iter().all(|&v| v == 0.0) && x.iter().all(|&v| v == 1.0));
    }

    #[test]
    #[should_panic(expected = "tables hold")]
    fn wrong_table_size_panics() {
        let (mut c, mut s, mut x) = ([0.0f32; 16], [0.0f32; 16], [0.0f32; 16]);
        fill_tables([1], 0, 8, &mut c, &mut s, &mut x);
    }
}
