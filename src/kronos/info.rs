//! `totoc bundle info` lines of a Kronos profile: one bucket line per graph (encode, prefill, recompute, decode,
//! refine, detokenize), its rows and slots (tokens per row, or cache slots for decode and refine).

use crate::profile_lines::{bucket_info, profile_info, ProfileInfo};

/// A Kronos profile of an export or engine bundle (fp32 graphs).
pub fn profile(p: &exporter::kronos::manifest::KronosProfileEntry) -> ProfileInfo {
    let buckets = p.graphs.iter().map(|g| bucket_info(&g.bucket, "fp32", &g.file, g.memory_bytes)).collect();
    profile_info(&p.profile, buckets)
}
