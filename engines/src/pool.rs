//! The loaded graphs of an engine, kept within its memory budget: every family's engine holds its runners here
//! (Toto 1.0 one per bucket, Toto 2.0 one group per graph set). A runner is loaded when a call first needs it,
//! taken out while the call runs it and put back afterwards; when loading one more would pass the budget, the
//! least recently used runners not in use (and not among those the call must keep) are dropped first.
//!
//! Runners come back on every path: a family holds its pool behind the lock it keeps for a whole call, so
//! whenever that lock is taken no call is running and a runner still out of the pool was lost to a panic in the
//! call that held it (its value dropped while unwinding). [`LruPool::evict_lost`], called on every lock, drops
//! such entries so the next take loads the graph afresh: a bucket whose call panicked is rebuilt instead of
//! answering "already in use" for good.

/// Runners `V` by key `K` (a bucket, a set), least recently used evicted to stay within a byte budget.
#[derive(Debug)]
pub struct LruPool<K, V> {
    loaded: Vec<Entry<K, V>>,
    /// Bumped by every take: the recency clock.
    tick: u64,
}

/// A loaded key: its value (`None` while a call holds it), its bytes and when it was last taken.
#[derive(Debug)]
struct Entry<K, V> {
    key: K,
    value: Option<V>,
    memory: u64,
    last_used: u64,
}

impl<K, V> Default for LruPool<K, V> {
    fn default() -> Self {
        LruPool { loaded: Vec::new(), tick: 0 }
    }
}

/// Why [`LruPool::take`] gave nothing back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeError<E> {
    /// The key is loaded but a call holds its value already.
    InUse,
    /// Loading it would pass the budget even with every evictable value dropped: `used` bytes stay loaded.
    OverBudget { used: u64 },
    /// Loading failed.
    Load(E),
}

impl<K: Copy + PartialEq, V> LruPool<K, V> {
    /// Takes `key`'s value out of the pool, loading it with `load` if it is not loaded. Before loading, least
    /// recently used values not in use and not in `keep` are dropped until `resident + loaded + need ≤ budget`
    /// (`resident`: bytes outside the pool, e.g. the weights).
    pub fn take<E>(
        &mut self,
        key: K,
        need: u64,
        resident: u64,
        budget: u64,
        keep: &[K],
        load: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, TakeError<E>> {
        self.tick += 1;
        let tick = self.tick;
        if let Some(e) = self.loaded.iter_mut().find(|e| e.key == key) {
            e.last_used = tick;
            let value = e.value.take().ok_or(TakeError::InUse)?;
            test_fault::panic_if_armed();
            return Ok(value);
        }
        loop {
            let used = self.loaded_bytes();
            if resident + used + need <= budget {
                break;
            }
            let victim = self
                .loaded
                .iter()
                .enumerate()
                .filter(|(_, e)| e.value.is_some() && !keep.contains(&e.key))
                .min_by_key(|(_, e)| e.last_used)
                .map(|(i, _)| i);
            match victim {
                Some(i) => drop(self.loaded.swap_remove(i)),
                None => return Err(TakeError::OverBudget { used }),
            }
        }
        let value = load().map_err(TakeError::Load)?;
        self.loaded.push(Entry { key, value: None, memory: need, last_used: tick });
        test_fault::panic_if_armed();
        Ok(value)
    }

    /// Drops the entries whose value is out of the pool (see the module docs: called when no call holds any, so
    /// those values were lost to a panic); returns how many. Their keys load afresh on the next take.
    pub fn evict_lost(&mut self) -> usize {
        let before = self.loaded.len();
        self.loaded.retain(|e| e.value.is_some());
        before - self.loaded.len()
    }

    /// Returns a value taken with [`take`](Self::take) (a key evicted meanwhile is not re-added).
    pub fn put(&mut self, key: K, value: V) {
        if let Some(e) = self.loaded.iter_mut().find(|e| e.key == key) {
            e.value = Some(value);
        }
    }

    /// Whether `key` is loaded (in use or not).
    pub fn is_loaded(&self, key: K) -> bool {
        self.loaded.iter().any(|e| e.key == key)
    }

    /// Bytes of everything loaded.
    pub fn loaded_bytes(&self) -> u64 {
        self.loaded.iter().map(|e| e.memory).sum()
    }
}

/// A test-only fault: a panic inside an engine call while a runner is out of its pool, the failure the pool must
/// survive. Nothing a client sends can arm it: only [`arm`](test_fault::arm) (called by `totoc serve` when its
/// process was started with the test-only `TOTOC_TEST_PANIC_AT_CALL` variable, and by tests).
#[doc(hidden)]
pub mod test_fault {
    use std::sync::atomic::{AtomicBool, Ordering};

    static ARMED: AtomicBool = AtomicBool::new(false);

    /// Makes the next runner taken out of any pool of this process panic (once).
    pub fn arm() {
        ARMED.store(true, Ordering::SeqCst);
    }

    pub(crate) fn panic_if_armed() {
        if ARMED.swap(false, Ordering::SeqCst) {
            panic!("test fault: a panic injected while a runner is out of its pool (test-only)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(p: &mut LruPool<u8, String>, key: u8, keep: &[u8]) -> Result<String, TakeError<()>> {
        p.take(key, 10, 5, 35, keep, || Ok(format!("runner {key}")))
    }

    #[test]
    fn loads_on_first_take_and_evicts_the_least_recently_used_within_the_budget() {
        let mut p = LruPool::default();
        // budget 35 = 5 resident + three of 10
        for k in [1, 2, 3] {
            let v = take(&mut p, k, &[]).unwrap();
            p.put(k, v);
        }
        assert_eq!(p.loaded_bytes(), 30);
        // 1 is taken again: now 2 is the least recently used
        let v = take(&mut p, 1, &[]).unwrap();
        assert_eq!(v, "runner 1");
        p.put(1, v);
        let v = take(&mut p, 4, &[]).unwrap();
        p.put(4, v);
        assert!(p.is_loaded(1) && !p.is_loaded(2) && p.is_loaded(3) && p.is_loaded(4));
    }

    #[test]
    fn values_in_use_or_kept_are_never_evicted() {
        let mut p = LruPool::default();
        let one = take(&mut p, 1, &[]).unwrap(); // held by the call
        let v = take(&mut p, 2, &[]).unwrap();
        p.put(2, v);
        let v = take(&mut p, 3, &[]).unwrap();
        p.put(3, v);
        assert_eq!(take(&mut p, 1, &[]), Err(TakeError::InUse));
        // 2 and 3 are kept: nothing can go
        assert_eq!(take(&mut p, 4, &[2, 3]), Err(TakeError::OverBudget { used: 30 }));
        assert!(take(&mut p, 4, &[2]).is_ok());
        assert!(p.is_loaded(1) && p.is_loaded(2) && !p.is_loaded(3));
        p.put(1, one);
    }

    #[test]
    fn a_value_lost_to_a_panic_is_evicted_and_loads_again() {
        let mut p: LruPool<u8, String> = LruPool::default();
        let v = take(&mut p, 1, &[]).unwrap();
        p.put(1, v);
        let lost = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _v = take(&mut p, 1, &[]).unwrap();
            panic!("the call fails while it holds the runner");
        }));
        assert!(lost.is_err());
        assert_eq!(take(&mut p, 1, &[]), Err(TakeError::InUse));
        assert_eq!(p.evict_lost(), 1);
        assert!(!p.is_loaded(1));
        assert_eq!(take(&mut p, 1, &[]).unwrap(), "runner 1");
        assert_eq!(p.evict_lost(), 1, "a value out of the pool counts as lost: call it only between calls");
    }

    #[test]
    fn a_failed_load_leaves_nothing_behind() {
        let mut p: LruPool<u8, String> = LruPool::default();
        assert_eq!(p.take(1, 10, 0, 100, &[], || Err("broken")), Err(TakeError::Load("broken")));
        assert!(!p.is_loaded(1));
        assert_eq!(p.loaded_bytes(), 0);
    }
}
