//! Static shape profiles, read from YAML (`configs/*.yaml`).
//!
//! A profile bounds one request: at most `batch` series of at most `variates` variates, `context` points of
//! history, `horizon` forecast points and `samples` sample paths. Every graph of the profile has static shapes
//! derived from these bounds (see [`crate::signature::Dims`]).

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
}
