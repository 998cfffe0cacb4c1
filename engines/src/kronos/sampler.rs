//! Upstream's sampling decision (`sample_from_logits`, k:371-384, and `top_k_top_p_filtering`, k:329-368), given
//! the same Exp(1) noise, twice per step (s1, then s2) on one row of f32 logits:
//!
//! 1. `logits / T` in f32 (torch divides by the temperature's f32: checked bit for bit);
//! 2. `top_k > 0`: keep the logits ≥ the k-th largest (`min(max(k, 1), V)`; ties kept) — and ignore `top_p`;
//!    else `top_p < 1`: sort descending, softmax of the sorted row, cumulative sum accumulated in f64 and stored in
//!    f32 (torch's CPU `cumsum` of f32), remove where `cumsum > f32(top_p)` (an f32 comparison), shifted right by
//!    one so the first token over the threshold stays, the top token always kept; removed logits become `−inf`;
//! 3. `p = softmax` of the filtered row, then `torch.multinomial(p, 1)`, which on CPU is `argmax(p / E)` with
//!    `E ~ Exp(1)` per entry (f32 division; the first index on ties).
//!
//! **Why the decisions are upstream's.** Given the same logits and `E`, every step above is computed with the
//! same f32 operations in the same order as torch under the reference's pinned kernels (ATen DEFAULT capability):
//! the division; the k-th largest value (a property of the multiset); the sorted *values* (unique whatever the
//! order of ties), their softmax ([`crate::kronos::softmax`], bit for bit), the f64 running sum rounded to f32 and
//! its f32 comparison — so the number of kept tokens is torch's; the final softmax; `p / E`; the first maximum.
//! `tests/data/kronos/sampler.json` checks the choice and the SHA-256 of `p` for every recorded draw. Two caveats:
//! * **Ties at the top-p cut.** When tokens with equal logits straddle the cut, which of them torch keeps depends
//!   on its sort kernel (DEFAULT: libstdc++ `std::sort`, not stable; AVX2/AVX-512: x86-simd-sort). totoc keeps the
//!   lowest vocabulary indices first, as `torch.sort(stable=True)` would. It matters only when such a tie exists
//!   at the cut *and* the draw picks one of the tied tokens.
//! * **Unpinned torch.** torch dispatching to AVX2/AVX-512 computes `exp` with Sleef and adds the softmax lanes as a
//!   tree, so its `p` can differ in the last bit; a decision then differs only where the two largest `p / E` are
//!   within that bit of each other (a near-tie).
//!
//! **Greedy** (`samples: 0`) is [`SamplingParams::greedy`]: `top_k = 1` at `T = 1`, exactly upstream's
//! `top_k=1`. When the largest logit is unique (every real case) it is the choice and no noise is drawn; an exact
//! tie of largest logits is broken by the draw's noise, as upstream breaks it — with totoc's stream that is still
//! deterministic per seed, and with replayed noise it is upstream's choice. The same shortcut holds for any filter
//! that keeps one token.
//!
//! Cost per draw (V = 1024): no filter, V `expf` and V noise values; top-k, a selection and k of each; top-p, a
//! sort of V values and V `expf`, then only the kept tokens get noise ([`NoiseSource`] is asked for those alone:
//! a removed token has `p = 0` and cannot win).

use crate::error::{Error, Result};
use crate::kronos::noise::{DrawKey, NoiseSource};
use crate::kronos::show_number;
use crate::kronos::softmax::lane_sum;

/// `predict`'s default temperature (k:517).
pub const DEFAULT_TEMPERATURE: f64 = 1.0;
/// `predict`'s default `top_p` (k:517); the loop's own default 0.99 is never used by `predict`.
pub const DEFAULT_TOP_P: f64 = 0.9;

/// Which filter runs before the final softmax.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Filter {
    /// `top_k = 0` and `top_p ≥ 1`: sample from the whole softmax.
    None,
    /// Keep the logits ≥ the k-th largest (k ≥ 1; more than V keeps all).
    TopK(usize),
    /// Nucleus filtering at `f32(top_p)`.
    TopP(f32),
}

/// Validated sampling controls of one series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingParams {
    temperature: f32,
    filter: Filter,
}

impl SamplingParams {
    /// The greedy forecast (`samples: 0`): `top_k = 1` at `T = 1`.
    pub fn greedy() -> Self {
        SamplingParams { temperature: 1.0, filter: Filter::TopK(1) }
    }

    /// Upstream's `(T, top_k, top_p)`: `top_k > 0` filters by k (and ignores `top_p`), else `top_p < 1` by p,
    /// else nothing. `temperature` must be finite and > 0 with a normal f32, `top_p` in (0, 1].
    pub fn new(temperature: f64, top_k: u64, top_p: f64) -> std::result::Result<Self, String> {
        let t = temperature as f32;
        if !(temperature.is_finite() && temperature > 0.0 && t.is_normal()) {
            return Err(format!(
                "`temperature` is {}; it must be a finite number > 0 (at least 1.2e-38, an f32; \
                 default {DEFAULT_TEMPERATURE})",
                show_number(temperature)
            ));
        }
        if !(top_p > 0.0 && top_p <= 1.0) {
            return Err(format!(
                "`top_p` is {}; it must be in (0, 1] (1 turns nucleus filtering off; default {DEFAULT_TOP_P})",
                show_number(top_p)
            ));
        }
        let filter = if top_k > 0 {
            Filter::TopK(usize::try_from(top_k).unwrap_or(usize::MAX))
        } else if top_p < 1.0 {
            Filter::TopP(top_p as f32)
        } else {
            Filter::None
        };
        Ok(SamplingParams { temperature: t, filter })
    }

    /// The sampling fields of a request (the Kronos request contract): `samples: 0` is greedy and takes none of
    /// `temperature`, `top_k`, `top_p`; otherwise each defaults as `predict` (1, 0, 0.9), `top_k` must be ≥ 0.
    pub fn from_request(
        at: &str,
        samples: usize,
        temperature: Option<f64>,
        top_k: Option<i64>,
        top_p: Option<f64>,
    ) -> Result<Self> {
        let refuse = |message: String| Error::NotSupported { at: at.to_string(), message };
        if samples == 0 {
            let given: Vec<&str> = [
                ("temperature", temperature.is_some()),
                ("top_k", top_k.is_some()),
                ("top_p", top_p.is_some()),
            ]
            .iter()
            .filter(|f| f.1)
            .map(|f| f.0)
            .collect();
            if !given.is_empty() {
                return Err(refuse(format!(
                    "`{}` given with `samples: 0`, the greedy forecast (top_k 1); drop {} or ask for samples ≥ 1",
                    given.join("`, `"),
                    if given.len() > 1 { "them" } else { "it" }
                )));
            }
            return Ok(SamplingParams::greedy());
        }
        let top_k = top_k.unwrap_or(0);
        if top_k < 0 {
            return Err(refuse(format!(
                "`top_k` is {top_k}; it must be ≥ 0 (0 turns it off; k > 0 samples among the k likeliest tokens and \
                 ignores top_p)"
            )));
        }
        SamplingParams::new(
            temperature.unwrap_or(DEFAULT_TEMPERATURE),
            top_k as u64,
            top_p.unwrap_or(DEFAULT_TOP_P),
        )
        .map_err(refuse)
    }

    /// The temperature as the logits are divided by it (f32).
    pub fn temperature(&self) -> f32 {
        self.temperature
    }

    pub fn filter(&self) -> Filter {
        self.filter
    }
}

/// One sampler per thread: scratch buffers reused from draw to draw (no allocation after the first draws).
#[derive(Debug, Clone, Default)]
pub struct Sampler {
    /// `logits / T`, `[V]`.
    scaled: Vec<f32>,
    /// Top-p: the scaled row sorted descending; top-k: selection scratch.
    sorted: Vec<f32>,
    /// Top-p: the sort keys ([`order_key`]).
    keys: Vec<u32>,
    /// Kept tokens, ascending.
    kept: Vec<u32>,
    /// `p` of the kept tokens (the final softmax), same order.
    probs: Vec<f32>,
    /// `E` of the kept tokens.
    noise: Vec<f32>,
}

impl Sampler {
    pub fn new() -> Self {
        Sampler::default()
    }

    /// The token upstream's `sample_from_logits` picks from `logits` (one row) given the noise of draw `key`:
    /// [`prepare`](Self::prepare) then [`draw`](Self::draw).
    pub fn sample(
        &mut self,
        logits: &[f32],
        params: &SamplingParams,
        noise: &dyn NoiseSource,
        key: DrawKey,
    ) -> Result<u32> {
        self.prepare(logits, params)?;
        self.draw(noise, key)
    }

    /// Steps 1–3 for one row of logits: the kept tokens ([`kept`](Self::kept)) and the probabilities the draw
    /// uses. Refuses rows torch's multinomial refuses (NaN, +inf, all −inf) and rows the temperature overflows.
    pub fn prepare(&mut self, logits: &[f32], params: &SamplingParams) -> Result<()> {
        self.filter_and_softmax(logits, params)
    }

    /// Step 4 on the row last prepared: `argmax(p / E)` over the kept tokens with the noise of draw `key` (the
    /// first on ties); a single kept token is the choice without noise. Several draws from one prepared row are
    /// several independent samples of it (as many keys).
    pub fn draw(&mut self, noise: &dyn NoiseSource, key: DrawKey) -> Result<u32> {
        match self.kept[..] {
            [] => return Err(Error::Config { message: "Sampler::draw before Sampler::prepare".into() }),
            [only] => return Ok(only),
            _ => {}
        }
        self.noise.resize(self.kept.len(), 0.0);
        noise.fill(key, &self.kept, &mut self.noise)?;
        let mut best = (self.kept[0], f32::NEG_INFINITY);
        for ((&token, &p), &e) in self.kept.iter().zip(&self.probs).zip(&self.noise) {
            let q = p / e;
            if q > best.1 {
                best = (token, q);
            }
        }
        Ok(best.0)
    }

    /// The probabilities `torch.multinomial` samples from (`[V]`: 0 for removed tokens), for tests and the
    /// engine's per-step hooks.
    pub fn probabilities(&mut self, logits: &[f32], params: &SamplingParams) -> Result<Vec<f32>> {
        self.filter_and_softmax(logits, params)?;
        let mut p = vec![0.0; logits.len()];
        for (&t, &q) in self.kept.iter().zip(&self.probs) {
            p[t as usize] = q;
        }
        Ok(p)
    }

    /// Steps 1-3 up to `p`: fills `kept` (ascending) and `probs`.
    fn filter_and_softmax(&mut self, logits: &[f32], params: &SamplingParams) -> Result<()> {
        // a refused row leaves nothing to draw from (draw then fails rather than reuse the previous row)
        self.kept.clear();
        // a planted defect of the equivalence tests filters before dividing by the temperature
        let late = crate::kronos::defects::planted().temperature_after_filter;
        self.scale(logits, if late { 1.0 } else { params.temperature })?;
        let v = self.scaled.len();
        match params.filter {
            Filter::None => self.keep_all(),
            Filter::TopK(k) if k.clamp(1, v) == v => self.keep_all(),
            Filter::TopK(k) => self.keep_top_k(k.max(1)),
            Filter::TopP(p) => self.keep_top_p(p),
        }
        if late {
            self.scaled.iter_mut().for_each(|x| *x /= params.temperature);
        }
        // the top token is always kept, so the filtered row's max is the row's max
        let max = self.scaled.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        self.probs.clear();
        self.probs.extend(self.kept.iter().map(|&t| (self.scaled[t as usize] - max).exp()));
        let sum = lane_sum(self.kept.iter().map(|&t| t as usize).zip(self.probs.iter().copied()));
        let r = 1.0 / sum;
        for p in &mut self.probs {
            *p *= r;
        }
        Ok(())
    }

    /// `scaled = logits / T`, refusing rows torch's multinomial would refuse (NaN, +inf, all −inf) and rows the
    /// division overflows.
    fn scale(&mut self, logits: &[f32], temperature: f32) -> Result<()> {
        let bad =
            |message: String| Error::Tensor { graph: "host sampler".into(), name: "logits".into(), message };
        if logits.is_empty() || u32::try_from(logits.len()).is_err() {
            return Err(bad(format!("{} logits: a vocabulary needs 1 to 2^32 − 1 entries", logits.len())));
        }
        self.scaled.clear();
        if temperature == 1.0 {
            self.scaled.extend_from_slice(logits); // x / 1 is x
        } else {
            self.scaled.extend(logits.iter().map(|&x| x / temperature));
        }
        if let Some(i) = self.scaled.iter().position(|x| x.is_nan() || *x == f32::INFINITY) {
            return Err(bad(format!(
                "token {i} has logit {} ({} after dividing by the temperature {temperature}): the model produced a \
                 value torch.multinomial refuses too{}",
                logits[i],
                self.scaled[i],
                if logits[i].is_finite() { "; use a larger temperature" } else { "" }
            )));
        }
        if self.scaled.iter().all(|&x| x == f32::NEG_INFINITY) {
            return Err(bad("every logit is −inf: no token can be sampled".into()));
        }
        Ok(())
    }

    fn keep_all(&mut self) {
        self.kept.clear();
        self.kept.extend(0..self.scaled.len() as u32);
    }

    /// `logits < topk(logits, k)[..., -1]` removed: the k-th largest value (counting repeats), ties kept.
    fn keep_top_k(&mut self, k: usize) {
        let kth = if k == 1 {
            self.scaled.iter().copied().fold(f32::NEG_INFINITY, f32::max)
        } else {
            self.sorted.clear();
            self.sorted.extend_from_slice(&self.scaled);
            *self.sorted.select_nth_unstable_by(k - 1, |a, b| b.total_cmp(a)).1
        };
        self.kept.clear();
        self.kept.extend((0..self.scaled.len() as u32).filter(|&t| self.scaled[t as usize] >= kth));
    }

    /// Nucleus filtering (see the module notes): the number kept is torch's; ties at the cut keep the lowest
    /// indices.
    fn keep_top_p(&mut self, top_p: f32) {
        let v = self.scaled.len();
        // sorted descending through order-preserving integer keys (a third faster than comparing floats)
        self.keys.clear();
        self.keys.extend(self.scaled.iter().map(|&x| !order_key(x)));
        self.keys.sort_unstable();
        self.sorted.clear();
        self.sorted.extend(self.keys.iter().map(|&k| from_order_key(!k)));
        // softmax of the sorted row (torch's kernel on `sorted_logits`), its exponentials in `probs` (scratch here)
        let max = self.sorted[0];
        self.probs.clear();
        self.probs.extend(self.sorted.iter().map(|&x| (x - max).exp()));
        let r = 1.0 / lane_sum(self.probs.iter().copied().enumerate());
        // position j is removed when cumsum[j − 1] > top_p: keep up to the first position over the threshold
        let mut keep = v;
        let mut acc = 0.0f64;
        for (j, &e) in self.probs.iter().enumerate() {
            acc += f64::from(e * r);
            if (acc as f32) > top_p {
                // a planted defect of the equivalence tests drops the right shift (the first token over stays)
                keep = if crate::kronos::defects::planted().top_p_no_shift { j.max(1) } else { j + 1 };
                break;
            }
        }
        // the value at the cut, and how many of its ties fall before the cut
        let cut = self.sorted[keep - 1];
        let mut ties = keep - self.sorted.partition_point(|&x| x > cut);
        self.kept.clear();
        for (t, &x) in self.scaled.iter().enumerate() {
            if x > cut {
                self.kept.push(t as u32);
            } else if x == cut && ties > 0 {
                ties -= 1;
                self.kept.push(t as u32);
            }
        }
    }

    /// The tokens the last filter kept, ascending.
    pub fn kept(&self) -> &[u32] {
        &self.kept
    }
}

/// An f32's place in the total order (−0 below +0) as a u32: sorting keys sorts the values.
fn order_key(x: f32) -> u32 {
    let b = x.to_bits();
    if b >> 31 == 1 {
        !b
    } else {
        b | 0x8000_0000
    }
}

/// The f32 of an [`order_key`].
fn from_order_key(k: u32) -> f32 {
    f32::from_bits(if k >> 31 == 1 { k & 0x7FFF_FFFF } else { !k })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronos::noise::{Draw, NoiseStream, ReplayNoise};
    use crate::kronos::testdata::{bits, hex_f32, logits, vectors};
    use sha2::{Digest, Sha256};

    fn key() -> DrawKey {
        DrawKey { path: 0, step: 0, draw: Draw::S1 }
    }

    fn params_of(case: &serde_json::Value) -> SamplingParams {
        let top_k = case["top_k"].as_u64().unwrap();
        SamplingParams::new(case["temperature"].as_f64().unwrap(), top_k, case["top_p"].as_f64().unwrap())
            .unwrap()
    }

    fn logits_of(case: &serde_json::Value) -> Vec<f32> {
        let n = |f: &str| case[f].as_u64().unwrap() as usize;
        logits(
            case["seed"].as_u64().unwrap(),
            n("vocab"),
            case["scale"].as_f64().unwrap(),
            n("hot"),
            n("ties"),
        )
    }

    /// torch's own `sample_from_logits` with its recorded noise: the same choice, the same kept tokens, the same
    /// probabilities bit for bit (sampler.json; T 0.7 + top_p 0.9, top_k 5, T 1 unfiltered, greedy with ties,
    /// T 1.3 + top_p 0.99, T 0.5 + top_k 40; vocabularies 2 to 1024).
    #[test]
    fn decisions_match_torch_with_its_noise() {
        let v = vectors("sampler");
        let mut sampler = Sampler::new();
        let mut settings = std::collections::BTreeMap::<String, usize>::new();
        for (n, case) in v["cases"].as_array().unwrap().iter().enumerate() {
            let (params, x) = (params_of(case), logits_of(case));
            let p = sampler.probabilities(&x, &params).unwrap();
            let digest: String = Sha256::digest(p.iter().flat_map(|q| q.to_le_bytes()).collect::<Vec<u8>>())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(
                digest,
                case["probs_sha256"].as_str().unwrap(),
                "draw {n} {}: probabilities",
                case["setting"]
            );
            let kept = sampler.kept().to_vec();
            assert_eq!(kept.len(), case["kept"].as_u64().unwrap() as usize, "draw {n}: kept tokens");
            // the recorded noise of the tokens torch kept, in index order (the others cannot win: p = 0)
            let e = hex_f32(case["noise"].as_str().unwrap());
            assert_eq!(e.len(), kept.len());
            let mut row = vec![f32::MAX; x.len()];
            for (&t, &e) in kept.iter().zip(&e) {
                row[t as usize] = e;
            }
            let mut replay = ReplayNoise::new(x.len());
            replay.insert(key(), row).unwrap();
            let choice = sampler.sample(&x, &params, &replay, key()).unwrap();
            assert_eq!(u64::from(choice), case["choice"].as_u64().unwrap(), "draw {n} {}", case["setting"]);
            *settings.entry(case["setting"].as_str().unwrap().to_string()).or_default() += 1;
        }
        assert_eq!(settings.len(), 6, "{settings:?}");
    }

    /// Rows at the edges of the rules, logits bit for bit (sampler.json "edges"): a cumulative sum equal to
    /// f32(0.99) — above 0.99 in f64, so an f64 comparison would drop the third token that torch keeps —, a top token
    /// alone over top_p, −inf logits in an unfiltered row.
    #[test]
    fn edge_rows_match_torch() {
        let v = vectors("sampler");
        let mut sampler = Sampler::new();
        for case in v["edges"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let x = hex_f32(case["logits"].as_str().unwrap());
            let params = params_of(case);
            let p = sampler.probabilities(&x, &params).unwrap();
            assert_eq!(bits(&p), bits(&hex_f32(case["probs"].as_str().unwrap())), "{name}: probabilities");
            let kept: Vec<u64> = sampler
                .kept()
                .iter()
                .filter(|&&t| x[t as usize] > f32::NEG_INFINITY)
                .map(|&t| u64::from(t))
                .collect();
            let want: Vec<u64> =
                case["kept"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect();
            assert_eq!(kept, want, "{name}: kept tokens");
            let mut replay = ReplayNoise::new(x.len());
            replay.insert(key(), hex_f32(case["noise"].as_str().unwrap())).unwrap();
            let choice = sampler.sample(&x, &params, &replay, key()).unwrap();
            assert_eq!(u64::from(choice), case["choice"].as_u64().unwrap(), "{name}: choice");
        }
    }

    #[test]
    fn order_keys_sort_as_the_floats() {
        let x = [3.5f32, -0.0, 0.0, f32::NEG_INFINITY, -2.0, 1e-40, -1e-40, f32::MAX, -7.25, 0.5];
        let mut by_float = x.to_vec();
        by_float.sort_by(f32::total_cmp);
        let mut keys: Vec<u32> = x.iter().map(|&v| order_key(v)).collect();
        keys.sort_unstable();
        let by_key: Vec<f32> = keys.iter().map(|&k| from_order_key(k)).collect();
        assert_eq!(bits(&by_key), bits(&by_float));
    }

    #[test]
    fn greedy_is_the_unique_max_without_noise() {
        struct NoNoise;
        impl NoiseSource for NoNoise {
            fn fill(&self, _: DrawKey, _: &[u32], _: &mut [f32]) -> Result<()> {
                panic!("greedy with a unique max must not draw noise")
            }
        }
        let x = [0.5f32, 3.0, -1.0, 2.999_999_8];
        let mut s = Sampler::new();
        assert_eq!(s.sample(&x, &SamplingParams::greedy(), &NoNoise, key()).unwrap(), 1);
        // an exact tie is broken by the noise: the larger 1/E wins
        let tie = [3.0f32, 1.0, 3.0];
        let mut replay = ReplayNoise::new(3);
        replay.insert(key(), vec![2.0, 1.0, 1.5]).unwrap();
        assert_eq!(s.sample(&tie, &SamplingParams::greedy(), &replay, key()).unwrap(), 2);
        let stream = NoiseStream::new(3);
        let a = s.sample(&tie, &SamplingParams::greedy(), &stream, key()).unwrap();
        assert!(a == 0 || a == 2);
        assert_eq!(a, s.sample(&tie, &SamplingParams::greedy(), &stream, key()).unwrap());
    }

    #[test]
    fn top_k_keeps_ties_and_ignores_top_p() {
        let x = [1.0f32, 5.0, 3.0, 3.0, 2.0, 3.0];
        let mut s = Sampler::new();
        let p = s.probabilities(&x, &SamplingParams::new(1.0, 2, 0.1).unwrap()).unwrap();
        // the 2nd largest is 3.0: the three 3.0s stay
        assert_eq!(p.iter().map(|&q| q > 0.0).collect::<Vec<_>>(), [false, true, true, true, false, true]);
        let p = s.probabilities(&x, &SamplingParams::new(1.0, 100, 0.1).unwrap()).unwrap();
        assert!(p.iter().all(|&q| q > 0.0));
    }

    #[test]
    fn top_p_keeps_the_first_token_over_the_threshold() {
        // probabilities ∝ 8, 4, 2, 1, 1 (sum 16): cumsum 0.5, 0.75, 0.875, 0.9375, 1
        let x: Vec<f32> = [8.0f32, 4.0, 2.0, 1.0, 1.0].iter().map(|v| v.ln()).collect();
        let mut s = Sampler::new();
        let kept = |s: &mut Sampler, top_p: f64| {
            let p = s.probabilities(&x, &SamplingParams::new(1.0, 0, top_p).unwrap()).unwrap();
            p.iter().filter(|&&q| q > 0.0).count()
        };
        assert_eq!(kept(&mut s, 0.1), 1);
        assert_eq!(kept(&mut s, 0.5), 2); // 0.5 is not > 0.5: the second token stays, then the third is over
        assert_eq!(kept(&mut s, 0.6), 2);
        assert_eq!(kept(&mut s, 0.8), 3);
        assert_eq!(kept(&mut s, 0.9), 4);
        // the two tied last tokens straddle the cut at 0.9: the lower index is kept
        let p = s.probabilities(&x, &SamplingParams::new(1.0, 0, 0.9).unwrap()).unwrap();
        assert!(p[3] > 0.0 && p[4] == 0.0);
        let mut swapped = x.clone();
        swapped.swap(3, 4);
        swapped.swap(0, 4);
        let p = s.probabilities(&swapped, &SamplingParams::new(1.0, 0, 0.9).unwrap()).unwrap();
        assert_eq!(p.iter().map(|&q| q > 0.0).collect::<Vec<_>>(), [true, true, true, false, true]);
        assert_eq!(kept(&mut s, 1.0), 5);
    }

    #[test]
    fn temperature_divides_before_filtering() {
        // at T = 0.5 the gaps double: top_p 0.9 keeps fewer tokens than at T = 1
        let x: Vec<f32> = [8.0f32, 4.0, 2.0, 1.0, 1.0].iter().map(|v| v.ln()).collect();
        let mut s = Sampler::new();
        let hot = s.probabilities(&x, &SamplingParams::new(0.5, 0, 0.9).unwrap()).unwrap();
        assert_eq!(hot.iter().filter(|&&q| q > 0.0).count(), 2); // ∝ 64, 16, 4, 1, 1 → 0.744, 0.93
        let t: Vec<f32> = x.iter().map(|&v| v / 0.5f32).collect();
        let mut want = vec![0.0; 5];
        crate::kronos::softmax::torch_softmax(
            &[t[0], t[1], f32::NEG_INFINITY, f32::NEG_INFINITY, f32::NEG_INFINITY],
            &mut want,
        );
        assert_eq!(hot, want);
    }

    #[test]
    fn bad_rows_are_refused() {
        let mut s = Sampler::new();
        let g = SamplingParams::greedy();
        for (x, want) in [
            (vec![], "0 logits"),
            (vec![1.0, f32::NAN], "token 1 has logit NaN"),
            (vec![f32::INFINITY, 1.0], "token 0 has logit inf"),
            (vec![f32::NEG_INFINITY; 3], "every logit is −inf"),
        ] {
            let e = s.sample(&x, &g, &NoiseStream::new(0), key()).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        assert!(s.draw(&NoiseStream::new(0), key()).is_err(), "a refused row is not drawn from");
        let tiny = SamplingParams::new(1.5e-38, 0, 1.0).unwrap();
        let e = s.sample(&[1.0e10, 2.0], &tiny, &NoiseStream::new(0), key()).unwrap_err().to_string();
        assert!(e.contains("use a larger temperature"), "{e}");
        // −inf entries are fine: they get p = 0
        let p =
            s.probabilities(&[f32::NEG_INFINITY, 0.0], &SamplingParams::new(1.0, 0, 1.0).unwrap()).unwrap();
        assert_eq!(p, [0.0, 1.0]);
    }

    #[test]
    fn request_fields() {
        let r = |samples, t, k, p| SamplingParams::from_request("request 4", samples, t, k, p);
        assert_eq!(r(0, None, None, None).unwrap(), SamplingParams::greedy());
        assert_eq!(
            r(8, None, None, None).unwrap(),
            SamplingParams { temperature: 1.0, filter: Filter::TopP(0.9) }
        );
        assert_eq!(r(1, Some(0.7), Some(5), Some(0.5)).unwrap().filter(), Filter::TopK(5));
        assert_eq!(r(1, None, Some(0), Some(1.0)).unwrap().filter(), Filter::None);
        assert_eq!(r(1, Some(0.7), None, None).unwrap().temperature(), 0.7f32);
        for (e, want) in [
            (
                r(0, Some(1.0), None, None),
                "`temperature` given with `samples: 0`, the greedy forecast (top_k 1); drop it",
            ),
            (r(0, None, Some(3), Some(0.5)), "`top_k`, `top_p` given with `samples: 0`"),
            (r(2, Some(0.0), None, None), "`temperature` is 0; it must be a finite number > 0"),
            (r(2, Some(-1.0), None, None), "`temperature` is -1"),
            (r(2, Some(f64::NAN), None, None), "`temperature` is NaN"),
            (r(2, Some(1e-50), None, None), "`temperature` is 1e-50"),
            (r(2, None, Some(-1), None), "`top_k` is -1; it must be ≥ 0"),
            (r(2, None, None, Some(0.0)), "`top_p` is 0; it must be in (0, 1]"),
            (r(2, None, None, Some(1.5)), "`top_p` is 1.5"),
            (r(2, None, None, Some(f64::NAN)), "`top_p` is NaN"),
        ] {
            let e = e.unwrap_err();
            assert!(e.is_request_error(), "{e}");
            assert!(e.to_string().starts_with("request 4: ") && e.to_string().contains(want), "{e}");
        }
    }
}
