//! A Kronos request as JSON ([`KronosRequest`]: the shared request contract's Kronos fields), as the reference
//! fixtures and the golden cases of a bundle hold it, read into a [`KronosJob`]. Numbers are read as f64, as the
//! reference harness reads them (a derived amount is computed from them in f64, as pandas does).

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::kronos::job::{named_columns, JobInput, JobLimits, KronosJob};
use crate::kronos::stamps::WallClock;
use crate::request::RequestId;

/// One Kronos request as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KronosRequest {
    #[serde(default)]
    pub id: Option<RequestId>,
    #[serde(default)]
    pub columns: Option<Vec<String>>,
    /// `[column][time]`.
    pub target: Vec<Vec<Option<f64>>>,
    #[serde(default)]
    pub timestamps: Option<Vec<String>>,
    #[serde(default)]
    pub future_timestamps: Option<Vec<String>>,
    #[serde(default)]
    pub horizon: Option<usize>,
    #[serde(default)]
    pub samples: Option<usize>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub quantiles: Option<Vec<f64>>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_k: Option<i64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    #[serde(default)]
    pub params: Option<KronosParams>,
    #[serde(default)]
    pub strict_context: Option<bool>,
}

/// The request's `params`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KronosParams {
    #[serde(default)]
    pub max_context: Option<u64>,
    #[serde(default)]
    pub clip: Option<f64>,
}

/// Parses a list of stamps, naming the field and row of a bad one.
fn stamps(at: &str, field: &str, list: &[String]) -> Result<Vec<WallClock>> {
    list.iter()
        .enumerate()
        .map(|(row, text)| {
            WallClock::parse(text).map_err(|e| Error::RequestSyntax {
                at: at.to_string(),
                message: format!("`{field}` row {row}: {e}"),
            })
        })
        .collect()
}

impl KronosRequest {
    /// The request's job on an engine with `limits` (`at` names it in errors).
    pub fn job(&self, at: &str, limits: &JobLimits) -> Result<KronosJob> {
        let ts = self.timestamps.as_deref().map(|t| stamps(at, "timestamps", t)).transpose()?;
        let fut =
            self.future_timestamps.as_deref().map(|t| stamps(at, "future_timestamps", t)).transpose()?;
        let horizon = self.horizon.ok_or(Error::MissingField {
            at: at.to_string(),
            field: "horizon",
            fix: "add \"horizon\": N to the request",
        })?;
        let params = self.params.clone().unwrap_or_default();
        let input = JobInput {
            id: self.id.clone(),
            columns: named_columns(at, self.columns.as_deref(), &self.target)?,
            timestamps: ts.as_deref(),
            future_timestamps: fut.as_deref(),
            horizon,
            samples: self.samples.unwrap_or(0),
            seed: self.seed.unwrap_or(0),
            quantiles: self.quantiles.clone(),
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            max_context: params.max_context,
            clip: params.clip,
            strict_context: self.strict_context.unwrap_or(false),
        };
        KronosJob::new(at, input, limits)
    }
}
