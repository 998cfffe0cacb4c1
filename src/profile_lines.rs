//! One profile of a bundle as `totoc bundle info` lists it: its bounds and one line per graph (each family's
//! lines come from its folder's `info.rs`, through the registry).

use exporter::bucket::Bucket;
use serde::Serialize;

#[derive(Debug, Serialize)]
pub(crate) struct ProfileInfo {
    pub(crate) name: String,
    pub(crate) batch: usize,
    pub(crate) variates: usize,
    pub(crate) context: usize,
    pub(crate) horizon: usize,
    pub(crate) samples: usize,
    pub(crate) buckets: Vec<BucketInfo>,
}

#[derive(Debug, Serialize)]
pub(crate) struct BucketInfo {
    /// `prefill` or `decode`.
    pub(crate) kind: String,
    pub(crate) rows: usize,
    pub(crate) slots: usize,
    pub(crate) precision: String,
    pub(crate) file: String,
    /// Estimated bytes of the bucket's buffers when loaded (besides the shared weights).
    pub(crate) memory_bytes: u64,
}

/// One bucket graph of an export or engine bundle, as `bundle info` lists it.
pub(crate) fn bucket_info(bucket: &Bucket, precision: &str, file: &str, memory_bytes: u64) -> BucketInfo {
    BucketInfo {
        kind: bucket.kind.as_str().into(),
        rows: bucket.rows,
        slots: bucket.slots,
        precision: precision.into(),
        file: file.to_string(),
        memory_bytes,
    }
}

pub(crate) fn profile_info(p: &exporter::profile::Profile, buckets: Vec<BucketInfo>) -> ProfileInfo {
    ProfileInfo {
        name: p.name.clone(),
        batch: p.batch,
        variates: p.variates,
        context: p.context,
        horizon: p.horizon,
        samples: p.samples,
        buckets,
    }
}
