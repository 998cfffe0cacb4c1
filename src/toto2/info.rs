//! `totoc bundle info` lines of a Toto 2.0 profile.

use crate::profile_lines::{profile_info, BucketInfo, ProfileInfo};

/// A Toto 2.0 profile: one bucket line per graph of each of its sets (rows; slots = context + forecast patches),
/// with the graph's own precision (an export bundle may hold several); `label` replaces it when given (an engine:
/// `fp16-emulation`).
pub fn profile(p: &exporter::toto2::manifest::Toto2ProfileEntry, label: Option<&str>) -> ProfileInfo {
    let buckets = p
        .sets
        .iter()
        .flat_map(|set| {
            set.graphs.iter().map(|g| BucketInfo {
                kind: g.kind.as_str().into(),
                rows: set.dims.rows,
                slots: set.dims.context_slots + set.dims.horizon_slots,
                precision: label.map_or_else(|| g.precision.as_str().to_string(), str::to_string),
                file: g.file.clone(),
                memory_bytes: set.memory_bytes,
            })
        })
        .collect();
    profile_info(&p.profile, buckets)
}
