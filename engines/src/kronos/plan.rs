//! The Kronos planner: which graph runs what, as pure functions of the engine's buckets and the call's series.
//!
//! * **Rows.** A series runs `paths` rows (its samples, or the one greedy path). Encode and prefill run once per
//!   series (a prefill's caches are copied to each of its paths' rows); recompute, decode, refine and detokenize
//!   run one row per path.
//! * **Lanes.** A call's path rows are cut into lanes of at most the largest decode rows (a series' paths stay in
//!   one lane when they fit in one), and each lane runs its steps on the decode and refine graphs of the smallest
//!   rows that hold it: every step of a lane is one decode run over its cached rows, the recomputes of its slid
//!   rows, and one refine run over all of them. Lanes run one after another.
//! * **Packing** ([`pack`]): items that need `slots` positions each (a series' N rows to encode, a window to
//!   prefill or recompute, a final window to detokenize) go to the smallest slots that hold them, right-padded;
//!   items of one slot count are packed in order into runs of at most the largest rows of that slot count, each
//!   on the smallest rows that hold it.
//!
//! Rows of a graph are independent of each other and of the bucket (checked by the exporter, bitwise), so the
//! plan changes no number: a series forecasts the same alone, in a ragged call, or on any bucket.

use exporter::bucket::Bucket;
use exporter::signature::GraphKind;

/// The buckets an engine runs, and the tests' pins.
#[derive(Debug, Clone, Default)]
pub struct Ladder {
    buckets: Vec<Bucket>,
    pins: KronosPins,
}

/// Pins for tests and diagnostics: the same series on other buckets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KronosPins {
    /// Lanes on the decode/refine graphs of exactly these rows.
    pub rows: Option<usize>,
    /// Windows on the largest slots of their kind instead of the smallest that hold them.
    pub largest_slots: bool,
    /// Every packed item (an encode, a prefill, a recompute, a final decode) in a run of its own.
    pub alone: bool,
}

/// One graph run of a [`pack`]: its bucket and the items it holds (in row order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run<T> {
    pub bucket: Bucket,
    pub items: Vec<T>,
}

/// A lane: consecutive path rows of the call that step together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    /// Rows of its decode and refine graphs.
    pub rows: usize,
    /// The call's path rows it holds, in order: (series, path).
    pub paths: Vec<(usize, usize)>,
}

impl Ladder {
    /// The ladder of `buckets` (any order).
    pub fn new(mut buckets: Vec<Bucket>, pins: KronosPins) -> Self {
        buckets.sort();
        buckets.dedup();
        Ladder { buckets, pins }
    }

    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    fn of(&self, kind: GraphKind) -> impl Iterator<Item = &Bucket> {
        self.buckets.iter().filter(move |b| b.kind == kind)
    }

    /// The row counts a lane may run on: those with a decode and a refine graph (within the pin).
    fn lane_rows(&self) -> Vec<usize> {
        let mut rows: Vec<usize> = self
            .of(GraphKind::Decode)
            .map(|b| b.rows)
            .filter(|&r| self.of(GraphKind::Refine).any(|b| b.rows == r))
            .filter(|&r| self.pins.rows.is_none_or(|p| p == r))
            .collect();
        rows.sort_unstable();
        rows.dedup();
        rows
    }

    /// The cache slots of the decode graphs (the engine's window).
    pub fn window(&self) -> Option<usize> {
        self.of(GraphKind::Decode).map(|b| b.slots).max()
    }

    /// The slot count of `kind` that holds `slots` positions: the smallest (or, pinned, the largest) at least
    /// that many.
    fn slots_for(&self, kind: GraphKind, slots: usize) -> Option<usize> {
        let fit = self.of(kind).map(|b| b.slots).filter(|&s| s >= slots);
        if self.pins.largest_slots {
            fit.max()
        } else {
            fit.min()
        }
    }

    /// The most items of one `kind` run at `slots` slots hold (1 when pinned alone).
    fn max_rows(&self, kind: GraphKind, slots: usize) -> Option<usize> {
        let most = self.of(kind).filter(|b| b.slots == slots).map(|b| b.rows).max();
        if self.pins.alone {
            most.map(|_| 1)
        } else {
            most
        }
    }

    /// Whether some bucket of `kind` holds one item of `slots` positions.
    pub fn holds(&self, kind: GraphKind, slots: usize) -> bool {
        self.slots_for(kind, slots).and_then(|s| self.max_rows(kind, s)).is_some_and(|r| r >= 1)
    }

    /// Whether lanes can run (a decode and a refine graph of equal rows).
    pub fn has_lanes(&self) -> bool {
        !self.lane_rows().is_empty()
    }

    /// Packs `items`, each needing `slots` positions, onto graphs of `kind` (see the module docs). Every item must
    /// fit some bucket ([`holds`](Self::holds)); one that does not is returned in the second list.
    pub fn pack<T: Copy>(&self, kind: GraphKind, items: &[(T, usize)]) -> (Vec<Run<T>>, Vec<T>) {
        let mut groups: Vec<(usize, Vec<T>)> = Vec::new();
        let mut unfit = Vec::new();
        for &(item, need) in items {
            match self.slots_for(kind, need) {
                None => unfit.push(item),
                Some(s) => match groups.iter_mut().find(|(g, _)| *g == s) {
                    Some((_, v)) => v.push(item),
                    None => groups.push((s, vec![item])),
                },
            }
        }
        groups.sort_by_key(|(s, _)| *s);
        let mut runs = Vec::new();
        for (slots, members) in groups {
            let Some(max) = self.max_rows(kind, slots).filter(|&m| m >= 1) else {
                unfit.extend(members);
                continue;
            };
            for chunk in members.chunks(max) {
                let rows = self
                    .of(kind)
                    .filter(|b| b.slots == slots && b.rows >= chunk.len())
                    .map(|b| b.rows)
                    .min()
                    .expect("max_rows holds the chunk");
                runs.push(Run { bucket: Bucket::of(kind, rows, slots), items: chunk.to_vec() });
            }
        }
        (runs, unfit)
    }

    /// Cuts the call's path rows (`paths[b]` rows of series b, in order) into lanes (see the module docs).
    pub fn lanes(&self, paths: &[usize]) -> Vec<Lane> {
        let rows = self.lane_rows();
        let Some(&max) = rows.last() else { return Vec::new() };
        let mut lanes: Vec<Vec<(usize, usize)>> = Vec::new();
        let mut current: Vec<(usize, usize)> = Vec::new();
        for (b, &n) in paths.iter().enumerate() {
            // a series that would straddle two lanes but fits a whole one starts a fresh lane
            if !current.is_empty() && current.len() + n > max && n <= max {
                lanes.push(std::mem::take(&mut current));
            }
            for p in 0..n {
                if current.len() == max {
                    lanes.push(std::mem::take(&mut current));
                }
                current.push((b, p));
            }
        }
        if !current.is_empty() {
            lanes.push(current);
        }
        lanes
            .into_iter()
            .map(|paths| {
                let rows =
                    *rows.iter().find(|&&r| r >= paths.len()).expect("lanes are at most the largest rows");
                Lane { rows, paths }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use GraphKind::*;

    fn ladder(pins: KronosPins) -> Ladder {
        let mut b = Vec::new();
        for r in [1, 3] {
            b.push(Bucket::of(Encode, r, 160));
            b.push(Bucket::of(Prefill, r, 128));
        }
        b.push(Bucket::of(Prefill, 1, 64));
        for r in [1, 4, 12] {
            for s in [32, 64, 96, 128] {
                b.push(Bucket::of(Recompute, r, s));
            }
            b.push(Bucket::of(Decode, r, 128));
            b.push(Bucket::of(Refine, r, 128));
        }
        b.push(Bucket::of(Decode, 2, 128)); // no refine of 2 rows: no lane of 2
        b.push(Bucket::of(Detokenize, 12, 128));
        Ladder::new(b, pins)
    }

    #[test]
    fn items_pack_onto_the_smallest_slots_then_the_smallest_rows() {
        let l = ladder(KronosPins::default());
        let (runs, unfit) = l.pack(Prefill, &[(0, 50), (1, 100), (2, 64), (3, 129), (4, 1)]);
        assert_eq!(unfit, [3]);
        let one = |slots, item| Run { bucket: Bucket::of(Prefill, 1, slots), items: vec![item] };
        assert_eq!(runs, [one(64, 0), one(64, 2), one(64, 4), one(128, 1)]);
        // recompute: 5 windows of 64 on the 12-row bucket (no 8 rows: the smallest that holds 5)
        let (runs, _) = l.pack(Recompute, &(0..5).map(|i| (i, 64)).collect::<Vec<_>>());
        assert_eq!(runs, [Run { bucket: Bucket::of(Recompute, 12, 64), items: vec![0, 1, 2, 3, 4] }]);
        let (runs, _) = l.pack(Recompute, &(0..14).map(|i| (i, 30)).collect::<Vec<_>>());
        let shapes: Vec<(usize, usize, usize)> =
            runs.iter().map(|r| (r.bucket.rows, r.bucket.slots, r.items.len())).collect();
        assert_eq!(shapes, [(12, 32, 12), (4, 32, 2)]);
        assert!(l.holds(Encode, 160) && !l.holds(Encode, 161) && l.holds(Detokenize, 3));
    }

    #[test]
    fn lanes_keep_a_series_together_and_run_on_the_smallest_rows() {
        let l = ladder(KronosPins::default());
        assert_eq!(l.window(), Some(128));
        // series of 4, 1, 8, 3 paths: 4 + 1 fit a lane of 12; 8 would straddle → a new lane with 3
        let lanes = l.lanes(&[4, 1, 8, 3]);
        assert_eq!(lanes.iter().map(|l| (l.rows, l.paths.len())).collect::<Vec<_>>(), [(12, 5), (12, 11)]);
        assert_eq!(lanes[1].paths[0], (2, 0));
        // one series of 30 paths: 12 + 12 + 6 (on 12 rows: no lane of 6)
        let lanes = l.lanes(&[30]);
        assert_eq!(
            lanes.iter().map(|l| (l.rows, l.paths.len())).collect::<Vec<_>>(),
            [(12, 12), (12, 12), (12, 6)]
        );
        // one greedy series: the one-row lane; 2 paths: 4 rows (decode of 2 rows has no refine)
        assert_eq!(l.lanes(&[1])[0].rows, 1);
        assert_eq!(l.lanes(&[2])[0].rows, 4);
    }

    #[test]
    fn pins_choose_other_buckets() {
        let l = ladder(KronosPins { rows: Some(1), largest_slots: true, alone: true });
        let lanes = l.lanes(&[3]);
        assert_eq!(
            lanes.iter().map(|l| (l.rows, l.paths.len())).collect::<Vec<_>>(),
            [(1, 1), (1, 1), (1, 1)]
        );
        let (runs, _) = l.pack(Recompute, &[(0, 30), (1, 30)]);
        assert_eq!(runs.iter().map(|r| r.bucket).collect::<Vec<_>>(), [Bucket::of(Recompute, 1, 128); 2]);
        let (runs, _) = l.pack(Prefill, &[(0, 30)]);
        assert_eq!(runs[0].bucket, Bucket::of(Prefill, 1, 128));
        // alone: a 12-row detokenize bucket holds one path a run
        let (runs, _) = l.pack(Detokenize, &[(0, 30), (1, 30)]);
        let got: Vec<(Bucket, usize)> = runs.iter().map(|r| (r.bucket, r.items.len())).collect();
        assert_eq!(got, [(Bucket::of(Detokenize, 12, 128), 1); 2]);
        // lanes of 12 rows for 3 paths
        let l = ladder(KronosPins { rows: Some(12), ..KronosPins::default() });
        assert_eq!(l.lanes(&[3])[0].rows, 12);
    }
}
