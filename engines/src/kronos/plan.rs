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
    /// Positions (rows × slots) a run of a once-per-call graph may hold at most, when set (see
    /// [`with_run_positions`](Self::with_run_positions)).
    run_positions: Option<usize>,
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
        Ladder { buckets, pins, run_positions: None }
    }

    /// This ladder with runs of the graphs that run once per series or path (encode, prefill, recompute,
    /// detokenize) held to at most `positions` rows × slots each (a run of one item however long it is): their
    /// activations are the call's peak memory beside the weights and the caches and grow with the rows (an 8-row
    /// prefill of 392 tokens needs about 220 MB on Kronos-small), while their speed per position barely does.
    pub fn with_run_positions(mut self, positions: usize) -> Self {
        self.run_positions = Some(positions);
        self
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

    /// The most items of one `kind` run at `slots` slots hold (1 when pinned alone; within the run positions of
    /// [`with_run_positions`](Self::with_run_positions), else the fewest rows there are).
    fn max_rows(&self, kind: GraphKind, slots: usize) -> Option<usize> {
        let rows: Vec<usize> = self.of(kind).filter(|b| b.slots == slots).map(|b| b.rows).collect();
        let once = matches!(
            kind,
            GraphKind::Encode | GraphKind::Prefill | GraphKind::Recompute | GraphKind::Detokenize
        );
        let most = match self.run_positions.filter(|_| once) {
            Some(cap) => {
                let within = rows.iter().copied().filter(|&r| r * slots <= cap.max(slots)).max();
                within.or_else(|| rows.iter().copied().min())
            }
            None => rows.iter().copied().max(),
        };
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

/// A series' counts as the planner sees them (what [`Ladder::call_runs`] plans from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeriesCounts {
    /// N: the rows it encodes.
    pub rows: usize,
    /// H.
    pub horizon: usize,
    /// Its path rows (its samples, or the one greedy path).
    pub paths: usize,
    pub max_context: usize,
}

impl SeriesCounts {
    /// The window length at step `i`: min(N + i, max_context).
    fn window(&self, i: usize) -> usize {
        (self.rows + i).min(self.max_context)
    }

    /// Whether step `i ≥ 1` is a cached decode step (the window has not slid).
    fn cached(&self, i: usize) -> bool {
        i >= 1 && self.rows + i <= self.max_context
    }
}

impl Ladder {
    /// The graph runs a call of `series` makes, as the driver (`crate::kronos::driver`) runs them, by bucket in
    /// the order first run: the encode packs; per lane, step 0's prefill packs (one item per series), then per
    /// step ≥ 1 one decode run over its cached rows (when it has any) and the recompute packs of its slid rows,
    /// and each step one refine run; the detokenize packs. A recompute is a full-window pass every step after the
    /// slide, so it counts as a run of a graph of its slots, like every other. `None` when some item fits no
    /// graph or no lane can run (admission refuses those). Linear in steps × path rows.
    pub fn call_runs(&self, series: &[SeriesCounts]) -> Option<Vec<(Bucket, u64)>> {
        let mut out: Vec<(Bucket, u64)> = Vec::new();
        let mut add = |bucket: Bucket, runs: u64| match out.iter_mut().find(|(b, _)| *b == bucket) {
            Some((_, n)) => *n += runs,
            None => out.push((bucket, runs)),
        };
        // packs `items` onto graphs of `kind`, adding a run per pack; false when one fits no graph
        let add_packed = |add: &mut dyn FnMut(Bucket, u64), kind: GraphKind, items: &[(usize, usize)]| {
            let (runs, unfit) = self.pack(kind, items);
            runs.iter().for_each(|r| add(r.bucket, 1));
            unfit.is_empty()
        };
        let items: Vec<(usize, usize)> = series.iter().enumerate().map(|(b, s)| (b, s.rows)).collect();
        if !add_packed(&mut add, GraphKind::Encode, &items) {
            return None;
        }
        let window = self.window()?;
        let lanes = self.lanes(&series.iter().map(|s| s.paths).collect::<Vec<_>>());
        if lanes.is_empty() && !series.is_empty() {
            return None;
        }
        for lane in &lanes {
            let mut members: Vec<usize> = lane.paths.iter().map(|&(b, _)| b).collect();
            members.dedup();
            let steps = members.iter().map(|&b| series[b].horizon).max().unwrap_or(0);
            if steps == 0 {
                continue;
            }
            let prefills: Vec<(usize, usize)> = members.iter().map(|&b| (b, series[b].window(0))).collect();
            if !add_packed(&mut add, GraphKind::Prefill, &prefills) {
                return None;
            }
            let refine = Bucket::of(GraphKind::Refine, lane.rows, window);
            add(refine, 1);
            for i in 1..steps {
                let active = lane.paths.iter().map(|&(b, _)| b).filter(|&b| i < series[b].horizon);
                let (cached, slid): (Vec<usize>, Vec<usize>) = active.partition(|&b| series[b].cached(i));
                if !cached.is_empty() {
                    add(Bucket::of(GraphKind::Decode, lane.rows, window), 1);
                }
                let items: Vec<(usize, usize)> = slid.iter().map(|&b| (b, series[b].window(i))).collect();
                if !add_packed(&mut add, GraphKind::Recompute, &items) {
                    return None;
                }
                add(refine, 1);
            }
        }
        let finals: Vec<(usize, usize)> = series
            .iter()
            .enumerate()
            .flat_map(|(b, s)| std::iter::repeat_n((b, (s.rows + s.horizon).min(s.max_context)), s.paths))
            .collect();
        add_packed(&mut add, GraphKind::Detokenize, &finals).then_some(out)
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
    fn a_call_counts_the_runs_the_driver_makes() {
        let l = ladder(KronosPins::default());
        let counts = |rows, horizon, paths, max_context| SeriesCounts { rows, horizon, paths, max_context };
        // N 100, H 40, one path, max_context 128: the window grows to 128 at step 28, slides from step 29
        let runs = l.call_runs(&[counts(100, 40, 1, 128)]).unwrap();
        assert_eq!(
            runs,
            [
                (Bucket::of(Encode, 1, 160), 1),
                (Bucket::of(Prefill, 1, 128), 1),
                (Bucket::of(Refine, 1, 128), 40),
                (Bucket::of(Decode, 1, 128), 28),
                (Bucket::of(Recompute, 1, 128), 11),
                (Bucket::of(Detokenize, 12, 128), 1),
            ]
        );
        // two series in one lane of 12: 3 paths of N 20 (H 10, max_context 64) and 5 of N 100 (H 4): both encoded
        // in one 3-row run, one prefill each (64 and 128 slots), a decode run while either is cached (steps 1–9),
        // no recompute; the 8 paths detokenized in one 12-row run
        let runs = l.call_runs(&[counts(20, 10, 3, 64), counts(100, 4, 5, 128)]).unwrap();
        assert_eq!(
            runs,
            [
                (Bucket::of(Encode, 3, 160), 1),
                (Bucket::of(Prefill, 1, 64), 1),
                (Bucket::of(Prefill, 1, 128), 1),
                (Bucket::of(Refine, 12, 128), 10),
                (Bucket::of(Decode, 12, 128), 9),
                (Bucket::of(Detokenize, 12, 128), 1),
            ]
        );
        // a series longer than any encode graph: no plan
        assert_eq!(l.call_runs(&[counts(161, 4, 1, 128)]), None);
    }

    #[test]
    fn run_positions_hold_the_once_per_call_runs_and_not_the_lanes() {
        let l = ladder(KronosPins::default()).with_run_positions(128);
        // windows of 64: only the 1-row bucket is within 128 positions (4 × 64 = 256), so one a run
        let (runs, _) = l.pack(Recompute, &(0..5).map(|i| (i, 64)).collect::<Vec<_>>());
        assert_eq!(runs.iter().map(|r| (r.bucket.rows, r.items.len())).collect::<Vec<_>>(), [(1, 1); 5]);
        // windows of 30 (32 slots): 4 rows × 32 = 128, four a run on the 4-row bucket
        let (runs, _) = l.pack(Recompute, &(0..9).map(|i| (i, 30)).collect::<Vec<_>>());
        let shapes: Vec<(usize, usize)> = runs.iter().map(|r| (r.bucket.rows, r.items.len())).collect();
        assert_eq!(shapes, [(4, 4), (4, 4), (1, 1)]);
        // no bucket within the cap: the fewest rows there are, filled (its rows run whether filled or not)
        let (runs, _) = l.pack(Detokenize, &[(0, 30), (1, 30)]);
        assert_eq!(runs.iter().map(|r| (r.bucket.rows, r.items.len())).collect::<Vec<_>>(), [(12, 2)]);
        // lanes are not held: 11 paths still step on 12 rows
        assert_eq!(l.lanes(&[11])[0].rows, 12);
        // and the planner counts the runs the cap makes: two series encoded and prefilled one a run
        let counts = SeriesCounts { rows: 100, horizon: 4, paths: 3, max_context: 128 };
        let runs = l.call_runs(&[counts, counts]).unwrap();
        for want in [(Bucket::of(Encode, 1, 160), 2), (Bucket::of(Prefill, 1, 128), 2)] {
            assert!(runs.contains(&want), "{runs:?}");
        }
        let uncapped = ladder(KronosPins::default()).call_runs(&[counts, counts]).unwrap();
        assert!(uncapped.contains(&(Bucket::of(Encode, 3, 160), 1)), "{uncapped:?}");
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
