//! Static shape profiles: the bounds of one request and the buckets they are exported as.
//!
//! A profile bounds one request: at most `batch` series of at most `variates` variates, `context` points of
//! history, `horizon` forecast points and `samples` sample paths. Every graph of the profile has static shapes
//! derived from these bounds (each family's `signature.rs`). Profiles are read from YAML files
//! ([`crate::profile_file`]). A family with settings of its own (a window, its own bucket ladders) reads them from
//! the profile's `family` section, which only that family parses.

use serde::{Deserialize, Serialize};

/// One static shape profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    /// Max series per call.
    pub batch: usize,
    /// Max variates per series.
    pub variates: usize,
    /// Max context points.
    pub context: usize,
    /// Max forecast points.
    pub horizon: usize,
    /// Max sample paths per series (0 = mean forecasts only).
    #[serde(default)]
    pub samples: usize,
    /// The profile's own bucket ladder (default: the family's ladder, e.g. Toto 1.0's default ladder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<BucketSpec>,
    /// Toto 2.0 only: block decoding with blocks of this many points (a multiple of the patch) for horizons
    /// longer than one block; without it the profile runs a single pass up to its horizon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_block: Option<usize>,
    /// The model family's own settings for this profile (the YAML's `family:` section, as written), parsed and
    /// checked by the family that exports it; a family that has none refuses a profile with one. Absent
    /// otherwise, so other families' profiles (and the manifests and build inputs that carry them) are as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<serde_json::Value>,
}

/// Buckets listed in a profile, in points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BucketSpec {
    #[serde(default)]
    pub prefill: Vec<PrefillSpec>,
    #[serde(default)]
    pub decode: Vec<DecodeSpec>,
}

/// A prefill bucket: `rows` series × variates of up to `context` points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrefillSpec {
    pub rows: usize,
    pub context: usize,
}

/// A decode bucket: `rows` series × paths × variates with caches for `context` + `horizon` points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodeSpec {
    pub rows: usize,
    pub context: usize,
    pub horizon: usize,
}
