//! The speed bound of each engine's run when the reference times it (`--reference-checkpoint`): its family's bound
//! of the run it made ([`crate::registry::speed_bound`]: each engine call's series as built, at rates measured
//! now on its engine), so the report can say how far the engine is from the fastest any engine could be on this
//! machine, and how much faster than the reference that fastest is.

use engines::budget::RequestSize;

use super::EngineRun;
use crate::speed_bound::SpeedBound;

/// The bound of every engine whose family gives one, by label (the report prints those the reference is compared
/// with).
pub fn bounds(runs: &[EngineRun]) -> anyhow::Result<Vec<(String, SpeedBound)>> {
    let threads = engines::runtime::intra_threads();
    let mut out = Vec::new();
    for r in runs {
        // the calls as the run made them: its windows in plan order, `chunk` to a call
        let calls: Vec<Vec<RequestSize>> = r.sizes.chunks(r.spec.chunk.max(1)).map(<[_]>::to_vec).collect();
        if let Some(b) = crate::registry::speed_bound(&r.engine, &calls, threads) {
            let b = b?;
            eprintln!(
                "engine {}: speed bound measured (prefill {:.0} tokens/s, read bandwidth {:.1} GB/s, {threads} threads)",
                r.label,
                b.prefill_tokens_per_s,
                b.read_bytes_per_s / 1e9
            );
            out.push((r.label.clone(), b));
        }
    }
    Ok(out)
}
