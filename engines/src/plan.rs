//! Packing a group of requests onto an engine's buckets: which prefill calls and decode passes run, on which
//! static shapes. Pure (no ONNX Runtime), so the packing rules are unit-tested directly.
//!
//! Every request is one series of `variates` rows. Its prefill needs `variates` rows and `ceil(context/P)` slots;
//! if its horizon spans more than one patch it also needs `paths × variates` decode rows (`paths` = sample paths,
//! 1 for a mean forecast) with caches of `slots + steps − 1` slots for `steps − 1` decode steps.
//!
//! * **Decode passes.** Series that need decoding are sorted by cache length and packed first-fit into passes of
//!   at most the largest decode bucket's rows (within the memory budget); a series whose paths do not fit in one
//!   pass is split into chunks of whole paths (each path is its own seeded stream, so where it runs changes
//!   nothing — toto-ts's `samples_per_batch` does the same). Each pass runs on the smallest decode bucket that
//!   holds its rows and its longest cache, for as many steps as its longest horizon.
//! * **Prefill calls.** The series of each pass (and the series that need no decode) are sorted by context and
//!   packed into calls of at most the largest prefill bucket's rows, each on the smallest bucket (fewest row ×
//!   slot tokens) that holds its rows and its longest context. A pass's prefills run just before it, so their
//!   caches go straight into its decode rows; a series split over passes is prefilled once per pass.
//!
//! The result is deterministic for a given group and bucket set.

use exporter::bucket::Bucket;
use exporter::signature::GraphKind;

use crate::error::{Error, Result};

/// What the planner needs of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub variates: usize,
    /// Context patch slots `ceil(context / P)` (≥ 1).
    pub slots: usize,
    /// Forecast patches `ceil(horizon / P)` (≥ 1).
    pub steps: usize,
    /// Sample paths, 1 for a mean forecast.
    pub paths: usize,
}

impl Shape {
    /// Decode cache slots this request needs.
    pub fn decode_slots(&self) -> usize {
        self.slots + self.steps - 1
    }
}

/// A bucket the planner may use, with its estimated memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Available {
    pub bucket: Bucket,
    pub memory_bytes: u64,
}

/// Some paths of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathRange {
    pub request: usize,
    /// First path and number of paths.
    pub first: usize,
    pub count: usize,
}

/// One prefill run: the series it holds, in row order (`variates` rows each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefillCall {
    pub bucket: Bucket,
    pub requests: Vec<usize>,
}

/// One decode pass: its prefills, then its path ranges (rows in order: path-major, then variates).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodePass {
    pub bucket: Bucket,
    pub prefills: Vec<PrefillCall>,
    pub paths: Vec<PathRange>,
    /// Decode steps this pass runs (its longest horizon's patches − 1).
    pub steps: usize,
}

/// The whole group's plan.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Prefill calls of series that need no decode (horizon within one patch).
    pub prefill_only: Vec<PrefillCall>,
    pub passes: Vec<DecodePass>,
}

impl Plan {
    /// Every bucket the plan runs.
    pub fn buckets(&self) -> impl Iterator<Item = Bucket> + '_ {
        self.prefill_only.iter().map(|c| c.bucket).chain(
            self.passes
                .iter()
                .flat_map(|p| std::iter::once(p.bucket).chain(p.prefills.iter().map(|c| c.bucket))),
        )
    }
}

/// Which buckets a request may use (e.g. to pin one for tests): `None` = any.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pins {
    pub prefill: Option<Bucket>,
    pub decode: Option<Bucket>,
}

/// Whether some bucket holds `shape` (the plan can then always place it); `Err` says what it needs.
pub fn fits(shape: &Shape, buckets: &[Available], pins: Pins) -> std::result::Result<(), String> {
    let need = |what: String| {
        Err(format!("it needs {what}, and no bucket within the engine's memory budget holds it"))
    };
    let prefill = usable(buckets, GraphKind::Prefill, pins.prefill);
    if !prefill.iter().any(|b| b.slots >= shape.slots && b.rows >= shape.variates) {
        return need(format!("a prefill of {} rows × {} context patches", shape.variates, shape.slots));
    }
    let decode = usable(buckets, GraphKind::Decode, pins.decode);
    if shape.steps > 1 && !decode.iter().any(|b| b.slots >= shape.decode_slots() && b.rows >= shape.variates)
    {
        return need(format!(
            "a decode of {} rows with {} cache patches",
            shape.variates,
            shape.decode_slots()
        ));
    }
    Ok(())
}

/// Plans `shapes` on `buckets`. Fails (naming the request, 1-based) only if some request fits no bucket at all;
/// the caller admits requests against the engine's limits first, so that means the engine cannot serve it.
pub fn plan(shapes: &[Shape], buckets: &[Available], pins: Pins) -> Result<Plan> {
    let prefill: Vec<Bucket> = usable(buckets, GraphKind::Prefill, pins.prefill);
    let decode: Vec<Bucket> = usable(buckets, GraphKind::Decode, pins.decode);
    for (i, s) in shapes.iter().enumerate() {
        fits(s, buckets, pins).map_err(|why| Error::Unservable { at: format!("request {}", i + 1), why })?;
    }
    let prefill_only: Vec<usize> = (0..shapes.len()).filter(|&i| shapes[i].steps == 1).collect();
    let mut plan = Plan { prefill_only: prefill_calls(shapes, &prefill_only, &prefill), passes: Vec::new() };

    let mut decoding: Vec<usize> = (0..shapes.len()).filter(|&i| shapes[i].steps > 1).collect();
    decoding.sort_by_key(|&i| (shapes[i].decode_slots(), i));
    let mut current: Option<(Vec<PathRange>, usize, usize)> = None; // (ranges, rows, slots)
    let mut passes: Vec<(Vec<PathRange>, usize)> = Vec::new();
    for i in decoding {
        let s = shapes[i];
        let mut first = 0;
        while first < s.paths {
            let (ranges, rows, slots) = current.get_or_insert_with(|| (Vec::new(), 0, 0));
            let t = (*slots).max(s.decode_slots());
            let free_paths = max_rows(&decode, t).saturating_sub(*rows) / s.variates;
            if free_paths == 0 {
                if ranges.is_empty() {
                    return Err(no_bucket(i, format!("a decode of {} rows", s.variates)));
                }
                // Nothing more of this series fits the current pass: close it and start another.
                let (ranges, _, slots) = current.take().expect("current pass");
                passes.push((ranges, slots));
                continue;
            }
            let count = free_paths.min(s.paths - first);
            ranges.push(PathRange { request: i, first, count });
            *rows += count * s.variates;
            *slots = t;
            first += count;
        }
    }
    if let Some((ranges, _, slots)) = current {
        passes.push((ranges, slots));
    }
    for (ranges, slots) in passes {
        let rows: usize = ranges.iter().map(|r| r.count * shapes[r.request].variates).sum();
        let bucket = smallest(&decode, rows, slots, |b| (b.rows, b.slots)).expect("checked above");
        let mut series: Vec<usize> = ranges.iter().map(|r| r.request).collect();
        series.dedup();
        let steps = ranges.iter().map(|r| shapes[r.request].steps - 1).max().unwrap_or(0);
        plan.passes.push(DecodePass {
            bucket,
            prefills: prefill_calls(shapes, &series, &prefill),
            paths: ranges,
            steps,
        });
    }
    Ok(plan)
}

fn no_bucket(request: usize, what: String) -> Error {
    Error::Unservable {
        at: format!("request {}", request + 1),
        why: format!("it needs {what}, and no bucket within the engine's memory budget holds it"),
    }
}

fn usable(buckets: &[Available], kind: GraphKind, pin: Option<Bucket>) -> Vec<Bucket> {
    let mut v: Vec<Bucket> =
        buckets.iter().map(|a| a.bucket).filter(|b| b.kind == kind && pin.is_none_or(|p| p == *b)).collect();
    v.sort();
    v.dedup();
    v
}

/// Most rows of any bucket with at least `slots` slots.
fn max_rows(buckets: &[Bucket], slots: usize) -> usize {
    buckets.iter().filter(|b| b.slots >= slots).map(|b| b.rows).max().unwrap_or(0)
}

/// The bucket holding `rows × slots` with the least `cost`.
fn smallest(
    buckets: &[Bucket],
    rows: usize,
    slots: usize,
    cost: impl Fn(&Bucket) -> (usize, usize),
) -> Option<Bucket> {
    buckets.iter().filter(|b| b.rows >= rows && b.slots >= slots).min_by_key(|b| cost(b)).copied()
}

/// What one more graph run costs beyond its tokens, in tokens: every run streams all the weights once, which on
/// CPU takes about as long as computing ~32 tokens (base model, 2 cores: an 8-token prefill 47 ms, 64 tokens
/// 140 ms).
const RUN_OVERHEAD_TOKENS: usize = 32;

/// Packs `series` (sorted by context) into prefill calls of at most the largest bucket's rows. A series joins
/// the current call while rows remain, unless it would move the call to a longer context bucket and that costs
/// more than a call of its own (run overhead + tokens): short series share calls, but a long context does not make
/// every short one in its call pay its length.
fn prefill_calls(shapes: &[Shape], series: &[usize], buckets: &[Bucket]) -> Vec<PrefillCall> {
    let mut order = series.to_vec();
    order.sort_by_key(|&i| (shapes[i].slots, i));
    let cost = |rows: usize, slots: usize| {
        smallest(buckets, rows, slots, |b| (b.tokens(), b.rows)).map(|b| b.tokens() + RUN_OVERHEAD_TOKENS)
    };
    // The context bucket a slot count lands in.
    let slot_bucket = |slots: usize| buckets.iter().map(|b| b.slots).filter(|&s| s >= slots).min();
    let mut calls: Vec<(Vec<usize>, usize, usize)> = Vec::new(); // (series, rows, slots)
    for i in order {
        let s = shapes[i];
        let fits = calls.last().is_some_and(|&(_, rows, slots)| {
            let joined_slots = slots.max(s.slots);
            if rows + s.variates > max_rows(buckets, joined_slots) {
                return false;
            }
            if slot_bucket(joined_slots) == slot_bucket(slots) {
                return true;
            }
            let joined = cost(rows + s.variates, joined_slots);
            let apart = cost(rows, slots).zip(cost(s.variates, s.slots)).map(|(a, b)| a + b);
            matches!((joined, apart), (Some(j), Some(a)) if j <= a)
        });
        if !fits {
            calls.push((Vec::new(), 0, 0));
        }
        let (members, rows, slots) = calls.last_mut().expect("pushed");
        members.push(i);
        *rows += s.variates;
        *slots = (*slots).max(s.slots);
    }
    calls
        .into_iter()
        .map(|(requests, rows, slots)| PrefillCall {
            bucket: smallest(buckets, rows, slots, |b| (b.tokens(), b.rows)).expect("checked in plan()"),
            requests,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(variates: usize, slots: usize, steps: usize, paths: usize) -> Shape {
        Shape { variates, slots, steps, paths }
    }

    /// The default ladder of the wide base profile (batch 8, variates 4, context 4096, horizon 336, samples 256).
    fn wide() -> Vec<Available> {
        let mut v = Vec::new();
        for rows in [1, 4, 16] {
            for slots in [8, 16, 32, 64] {
                v.push(Available { bucket: Bucket::prefill(rows, slots), memory_bytes: 0 });
            }
        }
        for rows in [1, 8, 16, 32, 64, 128, 256] {
            if rows >= 64 {
                v.push(Available { bucket: Bucket::decode(rows, 13), memory_bytes: 0 });
            }
            v.push(Available { bucket: Bucket::decode(rows, 69), memory_bytes: 0 });
        }
        v
    }

    #[test]
    fn a_mean_forecast_pays_for_one_row() {
        let p = plan(&[shape(1, 8, 6, 1)], &wide(), Pins::default()).unwrap();
        assert!(p.prefill_only.is_empty());
        assert_eq!(p.passes.len(), 1);
        assert_eq!(p.passes[0].bucket, Bucket::decode(1, 69));
        assert_eq!(p.passes[0].steps, 5);
        assert_eq!(p.passes[0].prefills, [PrefillCall { bucket: Bucket::prefill(1, 8), requests: vec![0] }]);
    }

    #[test]
    fn sample_paths_use_the_short_cache_and_one_patch_needs_no_decode() {
        let p = plan(&[shape(1, 8, 6, 64)], &wide(), Pins::default()).unwrap();
        assert_eq!(p.passes[0].bucket, Bucket::decode(64, 13));
        let p = plan(&[shape(1, 8, 1, 256)], &wide(), Pins::default()).unwrap();
        assert!(p.passes.is_empty());
        assert_eq!(p.prefill_only, [PrefillCall { bucket: Bucket::prefill(1, 8), requests: vec![0] }]);
    }

    #[test]
    fn eight_series_share_one_prefill_and_one_decode_pass() {
        let shapes = vec![shape(1, 8, 6, 1); 8];
        let p = plan(&shapes, &wide(), Pins::default()).unwrap();
        assert_eq!(p.passes.len(), 1);
        assert_eq!(p.passes[0].bucket, Bucket::decode(8, 69));
        assert_eq!(p.passes[0].prefills.len(), 1);
        assert_eq!(p.passes[0].prefills[0].bucket, Bucket::prefill(16, 8));
        assert_eq!(p.passes[0].prefills[0].requests, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn many_paths_split_into_passes_of_whole_paths() {
        // 8 series × 4 variates × 256 paths = 8192 rows: passes of 256 rows = 64 paths of 4 variates each.
        let shapes = vec![shape(4, 64, 6, 256); 8];
        let p = plan(&shapes, &wide(), Pins::default()).unwrap();
        assert_eq!(p.passes.len(), 32);
        for pass in &p.passes {
            assert_eq!(pass.bucket, Bucket::decode(256, 69));
            let rows: usize = pass.paths.iter().map(|r| r.count * 4).sum();
            assert_eq!(rows, 256);
            assert_eq!(pass.prefills.len(), 1);
        }
        // every path of every request exactly once, in order
        for req in 0..8 {
            let mut next = 0;
            for r in p.passes.iter().flat_map(|p| &p.paths).filter(|r| r.request == req) {
                assert_eq!(r.first, next);
                next += r.count;
            }
            assert_eq!(next, 256);
        }
    }

    #[test]
    fn prefill_calls_group_by_context_and_respect_rows() {
        // 20 univariate series, 10 short and 10 long: calls of ≤ 16 rows, short ones on 8 slots.
        let mut shapes = vec![shape(1, 8, 1, 1); 10];
        shapes.extend(vec![shape(1, 64, 1, 1); 10]);
        let p = plan(&shapes, &wide(), Pins::default()).unwrap();
        let calls: Vec<(Bucket, usize)> =
            p.prefill_only.iter().map(|c| (c.bucket, c.requests.len())).collect();
        assert_eq!(calls, [(Bucket::prefill(16, 8), 10), (Bucket::prefill(16, 64), 10)]);
        // small ones share a call even when that pads them: a run costs its weight traffic too
        let p = plan(&[shape(1, 8, 1, 1), shape(2, 8, 1, 1)], &wide(), Pins::default()).unwrap();
        assert_eq!(p.prefill_only, [PrefillCall { bucket: Bucket::prefill(4, 8), requests: vec![0, 1] }]);
    }

    #[test]
    fn pins_restrict_buckets_and_unservable_requests_fail_alone_with_a_reason() {
        let pins = Pins { prefill: Some(Bucket::prefill(16, 64)), decode: Some(Bucket::decode(256, 69)) };
        let p = plan(&[shape(1, 8, 6, 1)], &wide(), pins).unwrap();
        assert_eq!(p.passes[0].bucket, Bucket::decode(256, 69));
        assert_eq!(p.passes[0].prefills[0].bucket, Bucket::prefill(16, 64));
        let e =
            plan(&[shape(1, 8, 6, 1), shape(1, 65, 1, 1)], &wide(), Pins::default()).unwrap_err().to_string();
        assert!(e.contains("request 2") && e.contains("65 context patches"), "{e}");
    }
}
