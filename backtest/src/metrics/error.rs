//! Why a window cannot be scored: each message names the input and the fix.

/// A window or a set of windows that cannot be scored.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum MetricError {
    #[error("the forecast horizon is empty: a window needs at least one actual value and one forecast")]
    EmptyHorizon,
    #[error(
        "the season is 0: pass a season of at least 1 (1 = no seasonality, MASE scaled by the naive error)"
    )]
    ZeroSeason,
    #[error("{what} has {got} values but the window needs {want} ({why})")]
    Length { what: &'static str, got: usize, want: usize, why: String },
    #[error("{what} value {index} is {value}: forecasts must be finite (fev refuses NaN/Inf predictions)")]
    NonFinite { what: &'static str, index: usize, value: f64 },
    #[error("quantile level {index} is {level}: levels must be distinct and strictly between 0 and 1")]
    QuantileLevel { index: usize, level: f64 },
    #[error("the sample paths are empty: pass at least one sample, or no samples at all")]
    NoSamples,
    #[error("{what} ({a} × {b}) overflows usize")]
    Overflow { what: &'static str, a: usize, b: usize },
    #[error(
        "the windows at cutoff {cutoff} have different quantile levels ({first:?} and {other:?}): WQL pools \
         them over the series as fev does, which needs one set of levels per cutoff"
    )]
    MixedQuantileLevels { cutoff: String, first: Vec<f64>, other: Vec<f64> },
    #[error("series {unique_id} has two windows at cutoff {cutoff}: each (series, cutoff) is scored once")]
    DuplicateWindow { unique_id: String, cutoff: String },
    #[error("in series {unique_id} at cutoff {cutoff}: {source}")]
    InWindow {
        unique_id: String,
        cutoff: String,
        #[source]
        source: Box<MetricError>,
    },
}
