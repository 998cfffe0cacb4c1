//! Test inputs shared with `tests/data/kronos/gen_kronos_host_vectors.py`: the same SplitMix64 stream and the
//! same f64 expressions, each rounded once to f32, so a test regenerates the inputs of a vector and the JSON
//! holds only the reference's results.

/// SplitMix64, as `SplitMix` in the generator.
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> Self {
        SplitMix(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// f64 in [0, 1) with 53 random bits.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * pow2(-53)
    }

    /// The sum of four units minus 2, added as the generator adds them.
    pub(crate) fn bell(&mut self) -> f64 {
        let (a, b, c, d) = (self.unit(), self.unit(), self.unit(), self.unit());
        ((a + b) + (c + d)) - 2.0
    }
}

/// 2^e, exactly.
pub(crate) fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// The generator's `column(seed, kind, n)`.
pub(crate) fn column(seed: u64, kind: u32, n: usize) -> Vec<f32> {
    let mut r = SplitMix::new(seed);
    (0..n)
        .map(|i| {
            let v = match kind {
                0 => 100.0 + 10.0 * (r.unit() - 0.5),
                1 => 3.0e6 + 1000.0 * r.bell(),
                2 => 1.0e-3 * r.bell(),
                3 => 0.1,
                4 => 0.0,
                5 if i % 7 == 0 => 0.0,
                5 => 1.0e6 * r.unit(),
                6 => -2.5e4 + 0.01 * r.bell(),
                7 => {
                    let m = r.unit() - 0.5;
                    m * pow2((r.next_u64() % 64) as i32 - 24)
                }
                _ => panic!("no column kind {kind}"),
            };
            v as f32
        })
        .collect()
}

/// The generator's `logits(seed, vocab, scale, hot, ties)`.
pub(crate) fn logits(seed: u64, vocab: usize, scale: f64, hot: usize, ties: usize) -> Vec<f32> {
    let mut r = SplitMix::new(seed);
    let mut v: Vec<f64> = (0..vocab).map(|_| scale * r.bell()).collect();
    for _ in 0..hot {
        let i = (r.next_u64() % vocab as u64) as usize;
        v[i] += 6.0 * r.unit();
    }
    let mut x: Vec<f32> = v.iter().map(|&v| v as f32).collect();
    let top = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    for _ in 0..ties {
        x[(r.next_u64() % vocab as u64) as usize] = top;
    }
    x
}

/// f32 values from 8 hex digits each (their IEEE bits).
pub(crate) fn hex_f32(s: &str) -> Vec<f32> {
    (0..s.len()).step_by(8).map(|i| f32::from_bits(u32::from_str_radix(&s[i..i + 8], 16).unwrap())).collect()
}

/// f64 values from 16 hex digits each.
pub(crate) fn hex_f64(s: &str) -> Vec<f64> {
    (0..s.len())
        .step_by(16)
        .map(|i| f64::from_bits(u64::from_str_radix(&s[i..i + 16], 16).unwrap()))
        .collect()
}

/// One of the generator's JSON files.
pub(crate) fn vectors(name: &str) -> serde_json::Value {
    let text = match name {
        "stats" => include_str!("../../tests/data/kronos/stats.json"),
        "amount" => include_str!("../../tests/data/kronos/amount.json"),
        "paths" => include_str!("../../tests/data/kronos/paths.json"),
        "stamps" => include_str!("../../tests/data/kronos/stamps.json"),
        "sampler" => include_str!("../../tests/data/kronos/sampler.json"),
        "philox" => include_str!("../../tests/data/kronos/philox.json"),
        _ => panic!("no vector file {name}"),
    };
    serde_json::from_str(text).unwrap()
}

/// Bits of f32 values, for bitwise comparisons that print readable diffs.
pub(crate) fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}
