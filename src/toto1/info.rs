//! `totoc bundle info` lines of a Toto 1.0 profile: one per bucket graph.

use crate::profile_lines::{bucket_info, profile_info, ProfileInfo};

/// A profile of an export bundle: one line per bucket graph of each precision.
pub fn export_profile(p: &exporter::toto1::manifest::ProfileEntry) -> ProfileInfo {
    let buckets = p
        .graphs
        .iter()
        .map(|g| bucket_info(&g.bucket, g.precision.as_str(), &g.file, g.memory_bytes))
        .collect();
    profile_info(&p.profile, buckets)
}

/// A profile of an engine: one line per bucket kept.
pub fn engine_profile(p: &engines::toto1::manifest::EngineProfile, precision: &str) -> ProfileInfo {
    let buckets =
        p.graphs.iter().map(|g| bucket_info(&g.bucket, precision, &g.file, g.memory_bytes)).collect();
    profile_info(&p.profile, buckets)
}
