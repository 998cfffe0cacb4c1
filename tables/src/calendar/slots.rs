//! The weekly slot table of a session: which slots of the week are open, and from each slot how many slots
//! forward and back the nearest open one is (what lets a walk skip a closed weekend in one step).
//!
//! Built in linear time: one pass packs the open flags (the cache key) and finds an open slot, then one pass
//! backwards round the week from it fills the forward distances and one pass forwards fills the backward ones:
//! `3 × slots` steps whatever the pattern (scanning from every slot to the next open one was
//! `O(slots × gap)`: ~8e6 steps for one-minute weekday bars, ~1e8 for a single open minute a week).
//!
//! Tables are shared: [`Slots::shared`] keeps the last [`CACHE_ENTRIES`] tables by (step, phase, open slots), so
//! thousands of series on one session hold one table, and a long-running server's cache never grows past that.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

/// Tables kept for reuse at most (each at most ~50 KB: one-minute slots).
pub const CACHE_ENTRIES: usize = 64;

/// One week of slots of one step, Monday 00:00 (+ phase) first.
#[derive(Debug)]
pub struct Slots {
    /// One slot, in nanoseconds.
    pub step: i128,
    /// Where slots start after local midnight: `0 ≤ phase < step`.
    pub phase: i128,
    pub open: Vec<bool>,
    /// Per slot: slots forward to the next open one (≥ 1), and back to the previous one. A week has at most
    /// `u16::MAX` slots (the step is at least one minute: 10,080).
    ahead: Vec<u16>,
    behind: Vec<u16>,
    open_count: usize,
    /// Runs of open slots (start, length), made on first use by [`Slots::runs`] (descriptions only).
    runs: OnceLock<Vec<(usize, usize)>>,
}

/// The cache's key: the step, the phase and the open flags packed 64 to a word.
type Key = (i128, i128, Vec<u64>);

#[derive(Default)]
struct Cache {
    tables: HashMap<Key, Arc<Slots>>,
    /// Keys in insertion order: the oldest is dropped first.
    order: VecDeque<Key>,
}

static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();

#[cfg(test)]
thread_local! {
    /// Slot visits of this thread's table builds (the linearity test reads it).
    pub static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Counts one slot visit (tests only).
#[inline]
fn visit() {
    #[cfg(test)]
    STEPS.with(|s| s.set(s.get() + 1));
}

impl Slots {
    /// The table of `open` slots (a week of `step`, shifted by `phase`), from the cache or built; `None` when no
    /// slot is open.
    pub fn shared(step: i128, phase: i128, open: Vec<bool>) -> Option<Arc<Slots>> {
        assert!(open.len() <= u16::MAX as usize, "a week of at most u16::MAX slots");
        let (bits, first_open) = pack(&open);
        let first_open = first_open?;
        let key = (step, phase, bits);
        let cache = CACHE.get_or_init(Mutex::default);
        // A panic while the lock was held leaves the map consistent (entries are inserted whole).
        if let Some(found) = cache.lock().unwrap_or_else(|e| e.into_inner()).tables.get(&key) {
            return Some(found.clone());
        }
        let table = Arc::new(Slots::build(step, phase, open, first_open));
        let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
        if !c.tables.contains_key(&key) {
            while c.order.len() >= CACHE_ENTRIES {
                let oldest = c.order.pop_front().expect("non-empty");
                c.tables.remove(&oldest);
            }
            c.order.push_back(key.clone());
            c.tables.insert(key, table.clone());
        }
        Some(table)
    }

    /// The distance tables in two passes round the week from an open slot.
    fn build(step: i128, phase: i128, open: Vec<bool>, first_open: usize) -> Slots {
        let n = open.len();
        let (mut ahead, mut behind) = (vec![0u16; n], vec![0u16; n]);
        let mut open_count = 0;
        // Backwards from the open slot `o`, unrolled: `next` is the nearest open slot after `w` (o at first).
        let mut next = first_open + n;
        for w in (first_open..first_open + n).rev() {
            visit();
            ahead[w % n] = (next - w) as u16;
            if open[w % n] {
                next = w;
                open_count += 1;
            }
        }
        // Forwards from `o`: `prev` is the nearest open slot before `w`.
        let mut prev = first_open;
        for w in first_open + 1..=first_open + n {
            visit();
            behind[w % n] = (w - prev) as u16;
            if open[w % n] {
                prev = w;
            }
        }
        Slots { step, phase, open, ahead, behind, open_count, runs: OnceLock::new() }
    }

    pub fn per_week(&self) -> usize {
        self.open.len()
    }

    pub fn open_count(&self) -> usize {
        self.open_count
    }

    /// Slots forward from `w` to the next open one (≥ 1).
    pub fn ahead(&self, w: usize) -> i128 {
        self.ahead[w] as i128
    }

    /// Slots back from `w` to the previous open one (≥ 1).
    pub fn behind(&self, w: usize) -> i128 {
        self.behind[w] as i128
    }

    /// Runs of open slots (start, length), going round the week, the first starting after a closed slot; one run
    /// `(0, len)` when every slot is open.
    pub fn runs(&self) -> &[(usize, usize)] {
        self.runs.get_or_init(|| {
            let n = self.open.len();
            let Some(start) = (0..n).find(|&w| self.open[w] && !self.open[(w + n - 1) % n]) else {
                return vec![(0, n)];
            };
            let mut runs = Vec::new();
            let mut w = start;
            while w < start + n {
                let len = (w..start + n).take_while(|&v| self.open[v % n]).count();
                runs.push((w % n, len));
                w += len;
                w += (w..start + n).take_while(|&v| !self.open[v % n]).count();
            }
            runs
        })
    }
}

/// The open flags packed 64 to a word, and the first open slot (`None`: none is open). One visit per slot.
fn pack(open: &[bool]) -> (Vec<u64>, Option<usize>) {
    let mut bits = vec![0u64; open.len().div_ceil(64)];
    let mut first = None;
    for (w, &o) in open.iter().enumerate() {
        visit();
        if o {
            bits[w / 64] |= 1 << (w % 64);
            first.get_or_insert(w);
        }
    }
    (bits, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_distance(open: &[bool], w: usize, dir: isize) -> u16 {
        let n = open.len() as isize;
        (1..=n).find(|&d| open[(w as isize + dir * d).rem_euclid(n) as usize]).unwrap() as u16
    }

    #[test]
    fn distances_equal_a_scan_from_each_slot() {
        let patterns: [&[usize]; 4] = [&[0], &[6], &[2, 3], &[0, 1, 5]];
        for (k, open_at) in patterns.iter().enumerate() {
            let open: Vec<bool> = (0..7).map(|w| open_at.contains(&w)).collect();
            let s = Slots::shared(86_400, k as i128 + 1_000, open.clone()).unwrap();
            for w in 0..7 {
                assert_eq!(s.ahead[w], naive_distance(&open, w, 1), "{open_at:?} ahead {w}");
                assert_eq!(s.behind[w], naive_distance(&open, w, -1), "{open_at:?} behind {w}");
            }
            assert_eq!(s.open_count(), open_at.len());
        }
        assert!(Slots::shared(86_400, 0, vec![false; 7]).is_none());
    }

    #[test]
    fn the_cache_shares_tables_and_stays_bounded() {
        let open = |k: usize| (0..24 * 7).map(|w| w % 24 == k % 24 || w == 100 + k).collect::<Vec<bool>>();
        let a = Slots::shared(3_600, 7, open(0)).unwrap();
        let b = Slots::shared(3_600, 7, open(0)).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "one table for one session");
        for k in 0..3 * CACHE_ENTRIES {
            Slots::shared(3_600, 11, open(k)).unwrap();
        }
        let c = CACHE.get().unwrap().lock().unwrap();
        assert!(c.tables.len() <= CACHE_ENTRIES && c.order.len() == c.tables.len());
    }
}
