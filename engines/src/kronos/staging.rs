//! Where a prefill run writes its caches in the decode graph ([`staging_row`]) and how each series' cache then
//! reaches its paths' rows ([`spread_moves`]): the prefill's cache outputs are bound to a block of the decode
//! graph's rows (`GraphRunner::run_into`), so the decode graph's caches are the only copy.

use std::ops::Range;

use crate::graph::CacheMove;

/// The first of the `rows` decode rows a prefill run of `rows` rows writes its caches into, item k at row
/// r0 + k (its padding rows after them), or `None` when no block can take it. Item k's cache then goes to its
/// series' rows `dests[k]` by [`spread_moves`], items in reverse order, so a block is usable when it is inside
/// the lane, holds no row of a series already done, and no item's rows cover an earlier item's staged row (the
/// rows of a series in lane order start at or after its staged row, so the block at an item's own first row
/// usually qualifies).
pub(crate) fn staging_row(rows: usize, dests: &[Range<usize>], done: &[bool]) -> Option<usize> {
    let fits = |r0: usize| {
        r0 + rows <= done.len()
            && !done[r0..r0 + rows].iter().any(|&d| d)
            && dests.iter().enumerate().all(|(k, d)| (0..k).all(|j| !d.contains(&(r0 + j))))
    };
    let first = dests.first()?.start;
    // the items' own first row, else any block
    std::iter::once(first).chain(0..done.len()).find(|&r0| fits(r0))
}

/// The cache copies that give item k (series `items[k]`, its cache at row `from(k)`) to each of its rows
/// `dests[k]`, the series' first `slots(series)` slots; items in reverse order (see [`staging_row`]).
pub(crate) fn spread_moves(
    items: &[usize],
    dests: &[Range<usize>],
    from: impl Fn(usize) -> usize,
    slots: impl Fn(usize) -> usize,
) -> Vec<CacheMove> {
    (0..items.len())
        .rev()
        .flat_map(|k| dests[k].clone().map(move |dst| (k, dst)))
        .map(|(k, dst)| CacheMove { dst, src: from(k), slots: slots(items[k]) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lane rows after a prefill run staged at `r0` and spread by [`spread_moves`]: `Some(k)` where item k's
    /// cache is, `None` where something else is (padding rows the run wrote over).
    fn simulate(lane: &mut [Option<usize>], rows: usize, r0: usize, items: &[usize], dests: &[Range<usize>]) {
        for (t, row) in lane[r0..r0 + rows].iter_mut().enumerate() {
            *row = (t < items.len()).then_some(t);
        }
        for m in spread_moves(items, dests, |k| r0 + k, |_| 1) {
            lane[m.dst] = lane[m.src];
        }
    }

    /// The rows of a run of one series.
    fn alone(rows: Range<usize>) -> [Range<usize>; 1] {
        [rows]
    }

    #[test]
    fn prefill_stages_in_the_decode_rows_and_spreads_to_every_path() {
        // one series of 8 paths from a 1-row prefill; 8 one-path series from an 8-row prefill
        assert_eq!(staging_row(1, &alone(0..8), &[false; 8]), Some(0));
        let one_each: Vec<Range<usize>> = (0..8).map(|k| k..k + 1).collect();
        assert_eq!(staging_row(8, &one_each, &[false; 8]), Some(0));
        // two series of 4 paths in a 2-row run: staged at rows 0 and 1, row 1 read before series 0 covers it
        let dests = [0..4, 4..8];
        assert_eq!(staging_row(2, &dests, &[false; 8]), Some(0));
        let mut lane = vec![None; 8];
        simulate(&mut lane, 2, 0, &[0, 1], &dests);
        assert_eq!(lane, [0, 0, 0, 0, 1, 1, 1, 1].map(Some));
        // a later run skips the rows already done; a bucket larger than the lane, or no free block: copied
        let mut done = [true, true, true, true, false, false, false, false];
        assert_eq!(staging_row(4, &alone(4..8), &done), Some(4));
        assert_eq!(staging_row(4, &alone(0..2), &[false; 2]), None);
        done = [false, true, true, false, false, false, false, false];
        assert_eq!(staging_row(2, &[0..1, 3..4], &done[..4]), None);
        assert_eq!(staging_row(2, &[0..1, 3..4], &done), Some(4));
    }

    #[test]
    fn staged_prefills_reach_every_row_of_their_series_and_spare_the_rest() {
        // every split of a lane of up to 6 rows into consecutive series, every subset of them run together in
        // lane order by every bucket size, after every other series is done
        for lane_rows in 1..=6usize {
            for cuts in 0u32..1 << (lane_rows - 1) {
                let mut series: Vec<Range<usize>> = Vec::new();
                let mut start = 0;
                for r in 1..=lane_rows {
                    if r == lane_rows || cuts >> (r - 1) & 1 == 1 {
                        series.push(start..r);
                        start = r;
                    }
                }
                for subset in 1u32..1 << series.len() {
                    let items: Vec<usize> = (0..series.len()).filter(|&b| subset >> b & 1 == 1).collect();
                    let dests: Vec<Range<usize>> = items.iter().map(|&b| series[b].clone()).collect();
                    let mut done = vec![true; lane_rows];
                    for d in &dests {
                        d.clone().for_each(|r| done[r] = false);
                    }
                    for rows in items.len()..=lane_rows + 1 {
                        let Some(r0) = staging_row(rows, &dests, &done) else { continue };
                        let mut lane: Vec<Option<usize>> = vec![Some(usize::MAX); lane_rows];
                        simulate(&mut lane, rows, r0, &items, &dests);
                        for (k, d) in dests.iter().enumerate() {
                            assert!(
                                d.clone().all(|r| lane[r] == Some(k)),
                                "{series:?} {items:?} {rows} {lane:?}"
                            );
                        }
                        for r in (0..lane_rows).filter(|&r| done[r]) {
                            assert_eq!(lane[r], Some(usize::MAX), "a done row was written");
                        }
                    }
                    // the run's series in lane order always stage at the first one's row when the bucket fits
                    let first = dests[0].start;
                    if first + items.len() <= lane_rows && (first..first + items.len()).all(|r| !done[r]) {
                        assert!(staging_row(items.len(), &dests, &done).is_some());
                    }
                }
            }
        }
    }
}
