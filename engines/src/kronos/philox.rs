//! Philox4x64-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011; Random123): a
//! counter-based generator, a keyed bijection of a 256-bit counter, so any draw is computed from its coordinates
//! alone, in any order, on any thread. The same function as numpy's `np.random.Philox` (checked against its raw
//! output in `tests/data/kronos/philox.json`).

/// Philox4x64's round multipliers and Weyl key increments (Random123 `PHILOX_M4x64_*`, `PHILOX_W64_*`).
const M0: u64 = 0xD2E7_470E_E14C_6C93;
const M1: u64 = 0xCA5A_8263_9512_1157;
const W0: u64 = 0x9E37_79B9_7F4A_7C15;
const W1: u64 = 0xBB67_AE85_84CA_A73B;

/// High and low words of the 128-bit product.
fn mulhilo(a: u64, b: u64) -> (u64, u64) {
    let p = u128::from(a).wrapping_mul(u128::from(b)); // never wraps: spares debug builds the overflow check
    ((p >> 64) as u64, p as u64)
}

/// Philox4x64 with 10 rounds: four pseudo-random words of `counter` under `key`.
pub fn philox4x64_10(counter: [u64; 4], key: [u64; 2]) -> [u64; 4] {
    let (mut c, mut k) = (counter, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let (hi0, lo0) = mulhilo(M0, c[0]);
        let (hi1, lo1) = mulhilo(M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronos::testdata::vectors;

    fn words(v: &serde_json::Value) -> Vec<u64> {
        v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().parse().unwrap()).collect()
    }

    /// numpy's Philox increments its counter before each block, so its first output is philox(counter + 1).
    #[test]
    fn matches_numpy_philox() {
        let v = vectors("philox");
        for case in v["raw"].as_array().unwrap() {
            let (key, mut counter, want) =
                (words(&case["key"]), words(&case["counter"]), words(&case["output"]));
            for w in counter.iter_mut() {
                *w = w.wrapping_add(1);
                if *w != 0 {
                    break;
                }
            }
            let got = philox4x64_10([counter[0], counter[1], counter[2], counter[3]], [key[0], key[1]]);
            assert_eq!(got.to_vec(), want, "key {key:?} counter {counter:?}");
        }
    }
}
