//! What a Kronos engine warms up and times at start ([`FamilyEngine::warm_up`](crate::family::FamilyEngine) and
//! `measure`), proportionate to what serving needs: a Kronos engine has one graph per kind × slots × rows (a
//! Kronos-small-shaped profile: 110), and the full-pass graphs of many rows are the costliest of all (a 64-row
//! recompute over 512 slots is 32,768 positions through the backbone, seconds per run on two cores). Timing each
//! of them would make start-up take about ten minutes on two cores (an estimate from their positions; a loaded debug
//! server did not finish in fifteen).
//!
//! So at start: every per-step graph (decode, refine: milliseconds a run, and their rate per row falls steeply
//! with the rows, bandwidth-bound) is loaded and timed, and of the full-pass graphs (encode, prefill, recompute,
//! detokenize) the one of the fewest rows per kind and slots. A full-pass graph of more rows is loaded when a call
//! first needs it, and its rate is that graph's time per row × its rows: compute-bound passes of more rows take
//! at most that (batching only helps), so a cost estimate stays an upper bound, and the host factor the last
//! calls calibrate ([`crate::cost::SharedRates`]) brings it back towards what calls take.

use exporter::bucket::Bucket;
use exporter::signature::GraphKind;

use crate::cost::GraphRate;

/// Whether `b` runs once per call over full windows (its time grows with its rows × slots).
fn full_pass(b: &Bucket) -> bool {
    !matches!(b.kind, GraphKind::Decode | GraphKind::Refine)
}

/// The graphs warmed up and timed at start (see the module docs), in `buckets`' order.
pub fn timed_at_start(buckets: &[Bucket]) -> Vec<Bucket> {
    buckets.iter().filter(|b| !full_pass(b) || Some(**b) == representative(buckets, b)).copied().collect()
}

/// The full-pass graph whose rate stands for `b`'s: of `b`'s kind and slots, the one of the fewest rows.
fn representative(buckets: &[Bucket], b: &Bucket) -> Option<Bucket> {
    buckets.iter().filter(|o| o.kind == b.kind && o.slots == b.slots).min_by_key(|o| o.rows).copied()
}

/// The rate of a graph not timed at start (`label`: its name), from its representative's measured rate: the
/// same time per row, over its rows (0 timed runs: derived).
pub fn derived_rate(
    buckets: &[Bucket],
    b: &Bucket,
    label: String,
    timed: &[(Bucket, GraphRate)],
) -> Option<GraphRate> {
    let rep = representative(buckets, b)?;
    let (_, r) = timed.iter().find(|(t, _)| *t == rep)?;
    Some(GraphRate::new(label, b.kind.as_str(), b.rows, r.seconds_per_row_step * b.rows as f64, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(kind: GraphKind, rows: usize, slots: usize) -> Bucket {
        Bucket { kind, rows, slots }
    }

    #[test]
    fn every_step_graph_and_the_fewest_rows_of_each_full_pass_shape_are_timed() {
        let all = vec![
            b(GraphKind::Prefill, 1, 256),
            b(GraphKind::Prefill, 2, 256),
            b(GraphKind::Prefill, 1, 512),
            b(GraphKind::Recompute, 8, 512),
            b(GraphKind::Recompute, 64, 512),
            b(GraphKind::Decode, 1, 512),
            b(GraphKind::Decode, 64, 512),
            b(GraphKind::Refine, 64, 512),
        ];
        let timed = timed_at_start(&all);
        assert_eq!(
            timed,
            vec![
                b(GraphKind::Prefill, 1, 256),
                b(GraphKind::Prefill, 1, 512),
                b(GraphKind::Recompute, 8, 512),
                b(GraphKind::Decode, 1, 512),
                b(GraphKind::Decode, 64, 512),
                b(GraphKind::Refine, 64, 512),
            ]
        );
        // a 64-row recompute: the 8-row one's time per row × 64
        let rate = GraphRate::new("r8".into(), "recompute", 8, 0.4, 3);
        let d = derived_rate(&all, &all[4], "r64".into(), &[(all[3], rate)]).unwrap();
        assert_eq!((d.rows, d.timed_runs), (64, 0));
        assert!((d.seconds_per_run - 3.2).abs() < 1e-12 && (d.seconds_per_row_step - 0.05).abs() < 1e-12);
        // nothing to derive from: no rate
        assert!(derived_rate(&all, &all[4], "r64".into(), &[]).is_none());
    }
}
