//! The sampler's Exp(1) noise: upstream's `torch.multinomial` on CPU picks `argmax(p / E)` with one
//! `E ~ Exp(1)` per vocabulary entry per draw (see [`crate::kronos::sampler`]), drawn from torch's global
//! generator over the whole `[rows, V]` tensor, so its draws depend on the batch. totoc's noise is a function of
//! where it is used instead:
//!
//! * [`NoiseStream`]: `E` of vocabulary entry `v` in draw ([`Draw::S1`] or [`Draw::S2`]) of step `step` of path
//!   `path` of a series with seed `seed` is `−ln U`, `U` from Philox4x64-10 with key `(seed, DOMAIN)` and counter
//!   `(v / 4, step, path, draw)`, word `v mod 4`. A path's draws never depend on the batch layout, the bucket,
//!   the other paths or series, the thread count, or which entries were asked for: every value is computed from
//!   its coordinates alone. `U = (⌊w / 2¹²⌋ + ½)·2⁻⁵² ∈ (0, 1)`, so `E ∈ [1.1e-16, 36.0]` is never 0 nor infinite
//!   (P(E > 36) = e⁻³⁶ is what the cut-off leaves out); it is rounded to f32, as torch's `E` is f32.
//! * [`ReplayNoise`]: recorded rows of `E` (upstream's own, from a fixture) behind the same interface, for the
//!   equivalence tests.

use std::collections::HashMap;

use crate::error::{Error, Result};
use crate::kronos::philox::philox4x64_10;

/// The second key word of [`NoiseStream`]: `"KRONOS"` and a stream version, so a change of the stream's layout is
/// a new version, not silently other numbers for the same seed.
pub const DOMAIN: u64 = 0x4B52_4F4E_4F53_0001;

/// Which of a step's two draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Draw {
    /// The coarse token, sampled first.
    S1 = 0,
    /// The fine token, sampled given s1.
    S2 = 1,
}

/// Where a draw is: path `path` of its series (0-based, the series' own numbering), forecast step `step`
/// (0-based), and which draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DrawKey {
    pub path: u64,
    pub step: u64,
    pub draw: Draw,
}

/// A source of the Exp(1) noise of every draw.
pub trait NoiseSource: Send + Sync {
    /// `out[j] = E` of vocabulary entry `indices[j]` of draw `key` (the sampler asks only for the entries its
    /// filter keeps; the others have probability 0 and cannot win). Every value is finite and > 0.
    fn fill(&self, key: DrawKey, indices: &[u32], out: &mut [f32]) -> Result<()>;
}

/// totoc's own noise: a counter-based stream keyed by the series' seed (see the module notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoiseStream {
    seed: u64,
}

impl NoiseStream {
    pub fn new(seed: u64) -> Self {
        NoiseStream { seed }
    }

    /// `E` of one vocabulary entry.
    pub fn value(&self, key: DrawKey, index: u32) -> f32 {
        exp1(self.block(key, index / 4)[(index % 4) as usize])
    }

    fn block(&self, key: DrawKey, block: u32) -> [u64; 4] {
        philox4x64_10([u64::from(block), key.step, key.path, key.draw as u64], [self.seed, DOMAIN])
    }
}

impl NoiseSource for NoiseStream {
    fn fill(&self, key: DrawKey, indices: &[u32], out: &mut [f32]) -> Result<()> {
        Error::check_len("noise output (one per index)", indices.len(), out.len())?;
        // the whole vocabulary (no filter): block by block, no index arithmetic
        if indices.len().is_multiple_of(4) && indices.iter().enumerate().all(|(j, &i)| i as usize == j) {
            for (block, o) in out.chunks_exact_mut(4).enumerate() {
                let words = self.block(key, block as u32);
                for (o, w) in o.iter_mut().zip(words) {
                    *o = exp1(w);
                }
            }
            return Ok(());
        }
        // consecutive indices share a Philox block: compute each block once per run of them
        let mut block = u32::MAX;
        let mut words = [0u64; 4];
        for (o, &i) in out.iter_mut().zip(indices) {
            if i / 4 != block {
                block = i / 4;
                words = self.block(key, block);
            }
            *o = exp1(words[(i % 4) as usize]);
        }
        Ok(())
    }
}

/// `−ln U` with `U = (⌊w / 2¹²⌋ + ½)·2⁻⁵²` (52 random bits, never 0 nor 1), rounded to f32.
fn exp1(word: u64) -> f32 {
    const ULP: f64 = 1.0 / (1u64 << 52) as f64;
    let u = ((word >> 12) as f64 + 0.5) * ULP;
    (-u.ln()) as f32
}

/// Recorded noise: one row of `E` over the whole vocabulary per draw.
#[derive(Debug, Clone, Default)]
pub struct ReplayNoise {
    vocab: usize,
    rows: HashMap<DrawKey, Vec<f32>>,
}

impl ReplayNoise {
    /// An empty recording for a vocabulary of `vocab` entries.
    pub fn new(vocab: usize) -> Self {
        ReplayNoise { vocab, rows: HashMap::new() }
    }

    /// Records the row of draw `key`: `vocab` values, each finite and > 0 (torch's CPU `exponential_` can in
    /// principle return 0, which would make upstream pick a filtered token through `0/0 = NaN`; such a recording is
    /// refused rather than replayed wrongly).
    pub fn insert(&mut self, key: DrawKey, row: Vec<f32>) -> Result<()> {
        Error::check_len(&format!("replayed noise of {key:?}"), self.vocab, row.len())?;
        if let Some((v, x)) = row.iter().enumerate().find(|(_, x)| !(x.is_finite() && **x > 0.0)) {
            return Err(Error::Config {
                message: format!(
                    "replayed noise of {key:?}: entry {v} is {x}; Exp(1) noise must be finite and > 0"
                ),
            });
        }
        self.rows.insert(key, row);
        Ok(())
    }

    /// The noise of one series as the reference fixtures record it (`series.b.s1_noise`, `series.b.s2_noise`,
    /// tests/reference/README.md): `s1` and `s2` are each `[steps][paths][vocab]`, the `E` of every draw.
    pub fn from_draws(vocab: usize, paths: usize, steps: usize, s1: &[f32], s2: &[f32]) -> Result<Self> {
        let mut out = ReplayNoise::new(vocab);
        for (draw, data) in [(Draw::S1, s1), (Draw::S2, s2)] {
            Error::check_len("replayed noise [steps][paths][vocab]", steps * paths * vocab, data.len())?;
            for (i, row) in data.chunks_exact(vocab.max(1)).enumerate() {
                let key = DrawKey { path: (i % paths) as u64, step: (i / paths) as u64, draw };
                out.insert(key, row.to_vec())?;
            }
        }
        Ok(out)
    }
}

impl NoiseSource for ReplayNoise {
    fn fill(&self, key: DrawKey, indices: &[u32], out: &mut [f32]) -> Result<()> {
        Error::check_len("noise output (one per index)", indices.len(), out.len())?;
        let row = self.rows.get(&key).ok_or_else(|| Error::Config {
            message: format!("no replayed noise for {key:?}: the recording does not cover this draw"),
        })?;
        for (o, &i) in out.iter_mut().zip(indices) {
            *o = *row.get(i as usize).ok_or_else(|| Error::Length {
                what: format!("replayed noise of {key:?} (index {i})"),
                expected: self.vocab,
                actual: i as usize + 1,
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronos::testdata::{hex_f32, vectors};

    fn key(path: u64, step: u64, draw: Draw) -> DrawKey {
        DrawKey { path, step, draw }
    }

    /// The stream's definition, computed independently with numpy's Philox and Python's log (philox.json).
    #[test]
    fn stream_known_answers() {
        let v = vectors("philox");
        assert_eq!(v["domain"].as_str().unwrap().parse::<u64>().unwrap(), DOMAIN);
        for case in v["stream"].as_array().unwrap() {
            let n = |f: &str| case[f].as_str().unwrap().parse::<u64>().unwrap();
            let draw = if case["draw"].as_u64().unwrap() == 0 { Draw::S1 } else { Draw::S2 };
            let index = case["index"].as_u64().unwrap() as u32;
            let got = NoiseStream::new(n("seed")).value(key(n("path"), n("step"), draw), index);
            let want = hex_f32(case["e"].as_str().unwrap())[0];
            assert_eq!(got.to_bits(), want.to_bits(), "{case}");
        }
    }

    #[test]
    fn a_draw_depends_on_its_key_alone() {
        let s = NoiseStream::new(7);
        let all: Vec<u32> = (0..1024).collect();
        let k = key(3, 17, Draw::S2);
        let mut dense = vec![0.0; 1024];
        s.fill(k, &all, &mut dense).unwrap();
        // any subset, any order, one at a time: the same values
        let picked: Vec<u32> = vec![1023, 5, 4, 6, 700, 0, 3, 2, 1];
        let mut sparse = vec![0.0; picked.len()];
        s.fill(k, &picked, &mut sparse).unwrap();
        for (j, &i) in picked.iter().enumerate() {
            assert_eq!(sparse[j].to_bits(), dense[i as usize].to_bits());
            assert_eq!(s.value(k, i).to_bits(), dense[i as usize].to_bits());
        }
        // interleaving other keys' draws (other paths, steps, draws, another stream) changes nothing
        let mut again = vec![0.0; 1024];
        for (j, &i) in all.iter().enumerate().rev() {
            let mut scratch = [0.0; 1];
            NoiseStream::new(8).fill(k, &[i], &mut scratch).unwrap();
            s.fill(key(4, 17, Draw::S2), &[i], &mut scratch).unwrap();
            again[j] = s.value(k, i);
        }
        assert_eq!(again, dense);
        // every coordinate of the key matters
        let others = [key(2, 17, Draw::S2), key(3, 16, Draw::S2), key(3, 17, Draw::S1)];
        for o in others {
            let mut x = vec![0.0; 1024];
            s.fill(o, &all, &mut x).unwrap();
            assert!(x.iter().zip(&dense).filter(|(a, b)| a == b).count() < 4, "{o:?} repeats {k:?}");
        }
        let mut x = vec![0.0; 1024];
        NoiseStream::new(8).fill(k, &all, &mut x).unwrap();
        assert!(x.iter().zip(&dense).filter(|(a, b)| a == b).count() < 4);
        assert!(dense.iter().all(|e| e.is_finite() && *e > 0.0));
    }

    #[test]
    fn stream_is_exp1() {
        // mean 1, variance 1, P(E > 3) = e^-3 over 200k values
        let s = NoiseStream::new(11);
        let idx: Vec<u32> = (0..1000).collect();
        let mut row = vec![0.0f32; 1000];
        let (mut sum, mut sq, mut tail, mut n) = (0.0f64, 0.0f64, 0usize, 0usize);
        for step in 0..200 {
            s.fill(key(0, step, Draw::S1), &idx, &mut row).unwrap();
            for &e in &row {
                let e = f64::from(e);
                (sum, sq, n) = (sum + e, sq + e * e, n + 1);
                tail += usize::from(e > 3.0);
            }
        }
        let mean = sum / n as f64;
        let var = sq / n as f64 - mean * mean;
        let p3 = tail as f64 / n as f64;
        // standard errors: mean 1/√n ≈ 0.0022, variance ≈ √8/√n ≈ 0.0063, tail ≈ 0.00049
        assert!((mean - 1.0).abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.03, "variance {var}");
        assert!((p3 - (-3.0f64).exp()).abs() < 0.0025, "P(E > 3) = {p3}");
        assert_eq!(exp1(u64::MAX), (-((((1u64 << 52) - 1) as f64 + 0.5) / (1u64 << 52) as f64).ln()) as f32);
        assert!(exp1(u64::MAX) > 0.0 && exp1(0).is_finite());
    }

    #[test]
    fn replay_returns_the_recorded_rows() {
        // two steps, two paths, vocabulary 3: s1 holds 1..=12, s2 holds 101..=112, each [step][path][vocab]
        let s1: Vec<f32> = (1..=12).map(|x| x as f32).collect();
        let s2: Vec<f32> = (101..=112).map(|x| x as f32).collect();
        let r = ReplayNoise::from_draws(3, 2, 2, &s1, &s2).unwrap();
        let mut out = [0.0; 2];
        r.fill(key(1, 1, Draw::S1), &[2, 0], &mut out).unwrap();
        // step 1, path 1: offset (1·2 + 1)·3 = 9 → values 10, 11, 12
        assert_eq!(out, [12.0, 10.0]);
        r.fill(key(0, 1, Draw::S2), &[1, 2], &mut out).unwrap();
        assert_eq!(out, [108.0, 109.0]);
        assert!(r.fill(key(2, 0, Draw::S1), &[0, 1], &mut out).is_err());
        assert!(r.fill(key(0, 0, Draw::S1), &[3, 1], &mut out).is_err());
        assert!(ReplayNoise::from_draws(3, 2, 2, &s1[1..], &s2).is_err());
        let mut bad = ReplayNoise::new(2);
        assert!(bad.insert(key(0, 0, Draw::S1), vec![1.0, 0.0]).is_err());
        assert!(bad.insert(key(0, 0, Draw::S1), vec![1.0, f32::NAN]).is_err());
        assert!(bad.insert(key(0, 0, Draw::S1), vec![1.0]).is_err());
    }
}
