//! Forecast requests and responses, shared with the Python reference harness (`tests/reference/run_reference.py`).
//!
//! A request (JSON, unknown fields rejected; the format is `docs/formats.md`, "Forecast request"):
//! ```json
//! {"target": [[1.0, null, 3.0], [4.0, 5.0, 6.0]], "id_mask": [0, 0], "horizon": 24,
//!  "samples": 256, "quantiles": [0.1, 0.5, 0.9], "seed": 7}
//! ```
//! * `target` `[variate][time]`, `null` = missing (fed to the model as 0 with weight 0);
//! * `id_mask` optional, one group id ≥ 0 per variate (variates with equal ids attend to each other), default
//!   all 0;
//! * `horizon` ≥ 1 steps; `samples` 0 or absent = the mean path only, N > 0 = N sampled paths;
//! * `quantiles` optional levels in (0, 1) computed from the samples: default none on the mean path and
//!   `[0.1, 0.5, 0.9]` when sampling (`[]` turns them off); asking for quantiles without samples is an error;
//! * `seed` optional, default 0.
//!
//! [`RequestFields`] is a request as written; [`RequestFields::validate`] applies [`Overrides`] (command-line
//! values) and checks every field against [`Limits`], so every reader (JSON text here, the tables and time
//! stamps of the `totoc` binary's data layer) ends in the same checks. [`parse_request`] parses one JSON request
//! (an HTTP body, a golden case). Errors name where the request came from (`at`) and say how to fix the input.
//! Nothing here panics on input.
//!
//! [`ForecastResponse`] is what the engines return. Files (JSON Lines, CSV, Parquet) are read and written by the
//! binary, not here.
//!
//! **What a family takes** ([`RequestShape`], from its `Capabilities`, in [`Limits::shape`]): beyond the fields
//! above, a request may carry `columns` (the names of `target`'s rows), `timestamps` / `future_timestamps` (each
//! point's and each forecast step's wall clock), the sampling controls `temperature`, `top_k`, `top_p`, and
//! `params` (family parameters, numbers by name). Shared parsing asks the shape: a field the family does not take
//! is refused by name with its reason; a family without missing points refuses one naming its column and row.
//! The values travel in [`ForecastRequest`] for the family's engine ([`ForecastRequest::columns`],
//! [`ForecastRequest::target_f64`], [`ForecastRequest::timestamps`], ...).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::host::wall_clock::WallClock;

mod shape;
#[cfg(test)]
mod shape_tests;
mod stamps;
mod values;

pub use shape::{RequestShape, Sampling};
pub use stamps::TimeValue;
pub use values::TargetValues;

/// Quantile levels of a sampled request that does not name any.
pub const DEFAULT_QUANTILES: [f64; 3] = [0.1, 0.5, 0.9];

/// A request's identifier, echoed in its response: a string or an integer, as the request gave it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Int(i64),
    Str(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Int(i) => write!(f, "{i}"),
            RequestId::Str(s) => f.write_str(s),
        }
    }
}

/// A validated forecast request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForecastRequest {
    /// Echoed in the response.
    pub id: Option<RequestId>,
    /// `[variate][time]`, `None` = missing; all variates have the same length ≥ 1 and at least one value.
    pub target: Vec<Vec<Option<f32>>>,
    /// One group id ≥ 0 per variate.
    pub id_mask: Vec<i64>,
    pub horizon: usize,
    /// 0 = mean path.
    pub samples: usize,
    /// Levels in (0, 1); empty on the mean path.
    pub quantiles: Vec<f64>,
    pub seed: u64,
    /// A context longer than the engine holds is an error instead of being cut to its most recent points.
    pub strict_context: bool,
    /// Set when the engine's context policy cut this request's context ([`crate::engine::admit`]).
    #[serde(skip)]
    pub context_cut: Option<ContextCut>,
    /// For a family that reads named columns: the name of each row of `target`, in order (the family's
    /// canonical names); empty otherwise. The response's variates are these, in this order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<&'static str>,
    /// `target` as read, in f64 (`NaN` = missing), `[variate][time]`: kept only when the family derives a column
    /// the request leaves out ([`RequestShape::columns`]), which it derives from the values before they are
    /// rounded to f32, as its reference does. Cut with the context.
    #[serde(skip)]
    pub target_f64: Option<Vec<Vec<f64>>>,
    /// For a family that reads each point's wall clock: one per context point, `[time]`; empty otherwise. Cut
    /// with the context.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub timestamps: Vec<WallClock>,
    /// For a family that reads wall clocks: one per forecast step, `[horizon]`; empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub future_timestamps: Vec<WallClock>,
    /// Sampling controls as given (absent: the family's defaults); only for a family that takes them.
    #[serde(skip_serializing_if = "Sampling::is_empty")]
    pub sampling: Sampling,
    /// Family parameters by name (each a name the family takes; its engine checks the values).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, f64>,
}

impl Default for ForecastRequest {
    /// An empty request (tests build theirs from it).
    fn default() -> Self {
        ForecastRequest {
            id: None,
            target: Vec::new(),
            id_mask: Vec::new(),
            horizon: 0,
            samples: 0,
            quantiles: Vec::new(),
            seed: 0,
            strict_context: false,
            context_cut: None,
            columns: Vec::new(),
            target_f64: None,
            timestamps: Vec::new(),
            future_timestamps: Vec::new(),
            sampling: Sampling::default(),
            params: BTreeMap::new(),
        }
    }
}

impl ForecastRequest {
    pub fn variates(&self) -> usize {
        self.target.len()
    }

    /// Context length T (shared by all variates).
    pub fn context_len(&self) -> usize {
        self.target.first().map_or(0, Vec::len)
    }
}

/// A request as written, before overrides and checks (absent fields are `None`). Its `Deserialize` is the one
/// definition of a JSON request's fields (every reader and the server's bounded decode parse through it, the
/// tables layer taking its own keys aside).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestFields {
    #[serde(default)]
    pub id: Option<RequestId>,
    pub target: TargetValues,
    #[serde(default)]
    pub id_mask: Option<Vec<i64>>,
    #[serde(default)]
    pub horizon: Option<usize>,
    #[serde(default)]
    pub samples: Option<usize>,
    #[serde(default)]
    pub quantiles: Option<Vec<f64>>,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub strict_context: Option<bool>,
    /// Names of `target`'s rows (a family with named columns).
    #[serde(default)]
    pub columns: Option<Vec<String>>,
    /// One per point: for a family that reads wall clocks. (The tables layer's JSON reader takes `timestamps`,
    /// `calendar`, `timezone` and `holidays` aside as it decodes, places the points, and hands such a family its
    /// wall clocks here.)
    #[serde(default)]
    pub timestamps: Option<Vec<TimeValue>>,
    /// One per forecast step (a family that reads wall clocks); absent: a table reader continues the series.
    #[serde(default)]
    pub future_timestamps: Option<Vec<TimeValue>>,
    #[serde(default)]
    pub temperature: Option<f64>,
    #[serde(default)]
    pub top_k: Option<i64>,
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Family parameters by name.
    #[serde(default)]
    pub params: Option<BTreeMap<String, f64>>,
}

impl ForecastRequest {
    /// Validates `fields` exactly as a JSON request with those fields is validated (same defaults, same errors
    /// naming `at`): what a server decoding another wire format (Open Inference Protocol tensors) builds.
    pub fn from_fields(fields: RequestFields, at: &str, limits: &Limits) -> Result<ForecastRequest> {
        fields.validate(at, &Overrides::default(), limits)
    }
}

/// Values given on the command line; each replaces the request's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    pub horizon: Option<usize>,
    pub samples: Option<usize>,
    pub quantiles: Option<Vec<f64>>,
    pub seed: Option<u64>,
    /// `--strict-context`.
    pub strict_context: Option<bool>,
    /// `--temperature`, `--top-k`, `--top-p`.
    pub temperature: Option<f64>,
    pub top_k: Option<i64>,
    pub top_p: Option<f64>,
    /// `--param NAME=VALUE`, each replacing the request's parameter of that name.
    pub params: BTreeMap<String, f64>,
}

/// What the engine serving the requests can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_samples: usize,
    /// `quantiles` may be given without `samples` (Toto 2.0 predicts quantiles directly); Toto 1.0 computes them
    /// from sample paths, so without samples they are an error.
    pub quantiles_without_samples: bool,
    /// What the family's requests may hold (default: unnamed variates, missing points allowed, nothing else).
    pub shape: RequestShape,
    /// The most forecast steps the engine serves (admission refuses more): a reader builds no more forecast
    /// timestamps than this for a family that reads them.
    pub max_horizon: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_samples: usize::MAX,
            quantiles_without_samples: false,
            shape: RequestShape::default(),
            max_horizon: usize::MAX,
        }
    }
}

impl Limits {
    /// `horizon` against [`Limits::max_horizon`], with admission's error.
    pub fn check_horizon(&self, horizon: usize, at: &str) -> Result<()> {
        match horizon > self.max_horizon {
            true => Err(Error::Limit {
                at: at.to_string(),
                what: format!("horizon {horizon}"),
                limit: self.max_horizon,
            }),
            false => Ok(()),
        }
    }
}

/// Parses one JSON request (e.g. an HTTP body or a golden case); `at` says where it came from in errors.
pub fn parse_request(
    text: &str,
    at: &str,
    overrides: &Overrides,
    limits: &Limits,
) -> Result<ForecastRequest> {
    let raw: RequestFields = serde_json::from_str(text).map_err(|e| json_error(text, at, &e))?;
    raw.validate(at, overrides, limits)
}

/// A serde error of JSON `text` with a hint when the input holds NaN/Infinity literals (Python's `json.dumps`
/// writes them).
pub fn json_error(text: &str, at: &str, e: &serde_json::Error) -> Error {
    let line = text.lines().nth(e.line().saturating_sub(1)).unwrap_or("");
    let rest = line.get(e.column().saturating_sub(1)..).unwrap_or("");
    let rest = rest.trim_start_matches(['-', '+']);
    let message = if rest.starts_with("NaN") || rest.starts_with("Infinity") {
        format!("{e}: NaN/Infinity are not JSON numbers; use null to mark a missing point")
    } else if e.to_string().starts_with("number out of range") {
        format!("{e}: values must be finite f32 numbers (|x| < 3.4e38); use null to mark a missing point")
    } else {
        e.to_string()
    };
    Error::RequestSyntax { at: at.to_string(), message }
}

/// A client's string, cut for a message (at most 64 characters, `…` marking the cut).
pub(crate) fn clip(s: &str) -> String {
    match s.char_indices().nth(64) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

impl RequestFields {
    /// A request of one table's series: its values and id; everything else comes from [`Overrides`].
    pub fn from_target(id: Option<RequestId>, target: impl Into<TargetValues>) -> Self {
        RequestFields { id, target: target.into(), ..RequestFields::default() }
    }

    /// Applies the overrides and checks every field; `at` names the request in errors.
    pub fn validate(self, at: &str, overrides: &Overrides, limits: &Limits) -> Result<ForecastRequest> {
        validate(self, at, overrides, limits)
    }
}

fn validate(raw: RequestFields, at: &str, o: &Overrides, limits: &Limits) -> Result<ForecastRequest> {
    let at_s = || at.to_string();
    let shape = &limits.shape;
    let mut params = raw.params;
    if !o.params.is_empty() {
        params.get_or_insert_with(BTreeMap::new).extend(o.params.iter().map(|(k, v)| (k.clone(), *v)));
    }
    let (temperature, top_k, top_p) =
        (o.temperature.or(raw.temperature), o.top_k.or(raw.top_k), o.top_p.or(raw.top_p));
    let given = shape::Given {
        columns: raw.columns.is_some(),
        timestamps: raw.timestamps.is_some(),
        future_timestamps: raw.future_timestamps.is_some(),
        temperature: temperature.is_some(),
        top_k: top_k.is_some(),
        top_p: top_p.is_some(),
        params: params.as_ref(),
    };
    shape::refuse_untaken(shape, &given, at)?;
    let horizon = o.horizon.or(raw.horizon).ok_or(Error::MissingField {
        at: at_s(),
        field: "horizon",
        fix: "add \"horizon\": N to the request or pass --horizon N",
    })?;
    let samples = o.samples.or(raw.samples).unwrap_or(0);
    let seed = o.seed.or(raw.seed).unwrap_or(0);
    let strict_context = o.strict_context.or(raw.strict_context).unwrap_or(false);
    let quantiles = match (o.quantiles.clone().or(raw.quantiles), samples) {
        (Some(q), 0) if !q.is_empty() && !limits.quantiles_without_samples => {
            return Err(Error::QuantilesWithoutSamples { at: at_s() })
        }
        (Some(q), _) => q,
        (None, 0) => Vec::new(),
        (None, _) => DEFAULT_QUANTILES.to_vec(),
    };
    if raw.target.rows() == 0 {
        return Err(Error::NoVariates { at: at_s() });
    }
    let columns = shape::resolve_columns(shape, raw.columns, raw.target.rows(), at)?;
    let (target, target_f64) = raw.target.split(shape::derives_absent(shape, &columns));
    let len = target[0].len();
    for (v, series) in target.iter().enumerate() {
        if series.is_empty() {
            return Err(Error::EmptySeries { at: at_s(), what: shape::variate_name(&columns, v) });
        }
        if series.len() != len {
            return Err(Error::RaggedTarget { at: at_s(), variate: v, len: series.len(), expected: len });
        }
        if let Some((t, x)) =
            series.iter().enumerate().find_map(|(t, x)| x.filter(|x| !x.is_finite()).map(|x| (t, x)))
        {
            let value =
                if x.is_nan() { "NaN".to_string() } else { format!("{x} (overflows f32, |x| > 3.4e38)") };
            return Err(Error::NonFinite { at: at_s(), variate: v, t, value });
        }
        shape::refuse_missing(shape, v, series, &columns, at)?;
        if series.iter().all(Option::is_none) {
            return Err(Error::AllMissing { at: at_s(), variate: v });
        }
    }
    if horizon == 0 {
        return Err(Error::ZeroHorizon { at: at_s() });
    }
    let id_mask = raw.id_mask.unwrap_or_else(|| vec![0; target.len()]);
    if id_mask.len() != target.len() {
        return Err(Error::IdMaskLength { at: at_s(), len: id_mask.len(), variates: target.len() });
    }
    if let Some((variate, &id)) = id_mask.iter().enumerate().find(|(_, &id)| id < 0) {
        return Err(Error::NegativeId { at: at_s(), variate, id });
    }
    if let Some(&q) = quantiles.iter().find(|&&q| !(q > 0.0 && q < 1.0)) {
        return Err(Error::QuantileRange { at: at_s(), q });
    }
    if samples > limits.max_samples {
        return Err(Error::TooManySamples { at: at_s(), samples, limit: limits.max_samples });
    }
    let (timestamps, future_timestamps) = match shape.reads_timestamps {
        true => stamps::wall_clocks(shape, raw.timestamps, raw.future_timestamps, len, horizon, at)?,
        false => (Vec::new(), Vec::new()),
    };
    let sampling = shape::sampling(temperature, top_k, top_p, samples, at)?;
    let params = shape::params(params, at)?;
    Ok(ForecastRequest {
        id: raw.id,
        target,
        id_mask,
        horizon,
        samples,
        quantiles,
        seed,
        strict_context,
        context_cut: None,
        columns,
        target_f64,
        timestamps,
        future_timestamps,
        sampling,
        params,
    })
}

/// Forecasts at one quantile level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuantileForecast {
    pub q: f64,
    /// `[variate][horizon]`.
    pub values: Vec<Vec<f32>>,
}

/// How a context longer than the engine holds was cut (its most recent points were kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextCut {
    /// Points the request gave.
    pub given: usize,
    /// Points the forecast used: the last `used` of them.
    pub used: usize,
}

/// An engine's answer to one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForecastResponse {
    /// The request's `id`, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<RequestId>,
    /// `[variate][horizon]`, Toto 1.0: the mean path, or the mean over the sampled paths.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean: Option<Vec<Vec<f32>>>,
    /// `[variate][horizon]`, Toto 2.0: the median (its point forecast).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<Vec<Vec<f32>>>,
    /// One entry per requested level, in request order.
    pub quantiles: Vec<QuantileForecast>,
    /// `[path][variate][horizon]` when sampling, else `null`.
    pub samples: Option<Vec<Vec<Vec<f32>>>>,
    /// Set when the context was cut to the most recent points the engine holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_truncated: Option<ContextCut>,
    /// The static-shape graphs ("buckets") that ran it, e.g. `default.prefill.n1.s8`, `default.decode.n1.t13`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub buckets: Vec<String>,
    /// The profile and engine that produced it.
    pub profile: String,
    pub engine: String,
    /// The sampler settings the forecast used, defaults filled in: set by a family with sampling controls
    /// (provenance: the same request to the same engine gives the same numbers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampler: Option<SamplerUsed>,
    /// The sha256 (hex) of the engine bundle's `manifest.json`, which hashes every file of the engine: set by
    /// [`crate::engine::Engine`] on every response of every family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_sha256: Option<String>,
}

/// The sampler settings a forecast of a family with sampling controls used (the response's `sampler`): the
/// request's values with the family's defaults filled in. The greedy forecast is `samples: 0` with `top_k: 1`
/// (then, as upstream, `top_p` is not applied: `top_k > 0` ignores it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplerUsed {
    pub samples: usize,
    pub seed: u64,
    pub temperature: f64,
    pub top_k: u64,
    pub top_p: f64,
    /// The family parameters used, by name (each as given, or its default).
    pub params: BTreeMap<String, f64>,
}

impl ForecastResponse {
    /// The point forecast `[variate][horizon]`: the mean (Toto 1.0) or the median (Toto 2.0).
    pub fn point(&self) -> &[Vec<f32>] {
        self.mean.as_deref().or(self.median.as_deref()).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Result<ForecastRequest> {
        parse_request(
            text,
            "req.json",
            &Overrides::default(),
            &Limits { max_samples: 512, ..Limits::default() },
        )
    }

    fn err(text: &str) -> String {
        json(text).unwrap_err().to_string()
    }

    #[test]
    fn full_request_and_defaults() {
        let r = json(
            r#"{"target": [[1.5, null, 3], [4, 5, 6]], "id_mask": [0, 1], "horizon": 24,
                         "samples": 256, "quantiles": [0.05, 0.95], "seed": 7}"#,
        )
        .unwrap();
        assert_eq!(r.target[0], vec![Some(1.5), None, Some(3.0)]);
        assert_eq!((r.variates(), r.context_len(), r.horizon, r.samples, r.seed), (2, 3, 24, 256, 7));
        assert_eq!(r.id_mask, vec![0, 1]);
        assert_eq!(r.quantiles, vec![0.05, 0.95]);

        let r = json(r#"{"target": [[1, 2]], "horizon": 3}"#).unwrap();
        assert_eq!((r.samples, r.seed, r.id_mask.clone(), r.quantiles.clone()), (0, 0, vec![0], vec![]));
        let r = json(r#"{"target": [[1, 2]], "horizon": 3, "samples": 8}"#).unwrap();
        assert_eq!(r.quantiles, DEFAULT_QUANTILES.to_vec());
        let r = json(r#"{"target": [[1, 2]], "horizon": 3, "samples": 8, "quantiles": []}"#).unwrap();
        assert!(r.quantiles.is_empty());
        let r = json(r#"{"target": [[1, 2]], "horizon": 3, "samples": 0, "seed": null}"#).unwrap();
        assert_eq!(r.seed, 0);
    }

    #[test]
    fn the_harness_fixture_requests_parse() {
        // the shared format, as tests/fixtures/*/cases/*.json carry it
        let r = json(
            r#"{"horizon": 20, "quantiles": [0.1, 0.5, 0.9], "samples": 64, "seed": 11,
                "target": [[932.956787109375, 906.5747680664062], [-56.34151077270508, null]]}"#,
        )
        .unwrap();
        assert_eq!(r.target[0][0], Some(932.956_8));
    }

    #[test]
    fn validation_errors_name_the_problem() {
        let cases = [
            (r#"{"target": [[1, 2]], "horizon": 3, "extra": 1}"#, "unknown field `extra`"),
            (r#"{"target": [], "horizon": 3}"#, "has no variates"),
            (r#"{"target": [[1], []], "horizon": 3}"#, "variate 1 is empty"),
            (r#"{"target": [[1, 2], [1]], "horizon": 3}"#, "variate 1 has 1 points but variate 0 has 2"),
            (r#"{"target": [[1, 1e39]], "horizon": 3}"#, "variate 0, t=1: inf (overflows f32"),
            (r#"{"target": [[1, NaN]], "horizon": 3}"#, "NaN/Infinity are not JSON numbers; use null"),
            (r#"{"target": [[1, -Infinity]], "horizon": 3}"#, "NaN/Infinity are not JSON numbers"),
            (r#"{"target": [[1], [null]], "horizon": 3}"#, "variate 1 has no observed point"),
            (r#"{"target": [[1]], "horizon": 0}"#, "`horizon` is 0"),
            (r#"{"target": [[1]]}"#, "`horizon` is missing; add \"horizon\": N"),
            (r#"{"target": [[1]], "horizon": -2}"#, "invalid value: integer `-2`"),
            (r#"{"target": [[1], [2]], "horizon": 1, "id_mask": [0]}"#, "has 1 ids for 2 variates"),
            (r#"{"target": [[1], [2]], "horizon": 1, "id_mask": [0, -3]}"#, "id -3 of variate 1 is negative"),
            (
                r#"{"target": [[1]], "horizon": 1, "samples": 4, "quantiles": [0.5, 1.0]}"#,
                "quantile 1 is outside (0, 1)",
            ),
            (r#"{"target": [[1]], "horizon": 1, "quantiles": [0.5]}"#, "quantiles need sampled paths"),
            (
                r#"{"target": [[1]], "horizon": 1, "samples": 1000}"#,
                "1000 samples exceed this engine's limit of 512",
            ),
            (r#"{"target": [[1]], "horizon": 1"#, "EOF while parsing"),
        ];
        for (text, want) in cases {
            let msg = err(text);
            assert!(msg.starts_with("req.json: "), "{msg}");
            assert!(msg.contains(want), "{text}\n  gave: {msg}\n  want: {want}");
        }
    }

    #[test]
    fn fields_validate_like_the_json_they_stand_for() {
        let text = r#"{"target": [[1.5, null, 3]], "horizon": 4, "samples": 8, "seed": 2}"#;
        let fields = RequestFields {
            target: vec![vec![Some(1.5), None, Some(3.0)]].into(),
            horizon: Some(4),
            samples: Some(8),
            seed: Some(2),
            ..RequestFields::default()
        };
        let limits = Limits { max_samples: 512, ..Limits::default() };
        assert_eq!(
            ForecastRequest::from_fields(fields.clone(), "req.json", &limits).unwrap(),
            json(text).unwrap()
        );
        let bad = RequestFields { target: vec![vec![None]].into(), ..fields };
        let e = ForecastRequest::from_fields(bad, "input `target`", &limits).unwrap_err().to_string();
        assert_eq!(e, "input `target`: variate 0 has no observed point (all null); drop it or give it at least one value");
    }

    #[test]
    fn overrides_replace_request_values() {
        let o = Overrides {
            horizon: Some(9),
            samples: Some(16),
            quantiles: Some(vec![0.25]),
            seed: Some(5),
            strict_context: Some(true),
            ..Overrides::default()
        };
        let r = parse_request(
            r#"{"target": [[1]], "horizon": 2, "samples": 0, "seed": 1}"#,
            "x",
            &o,
            &Limits::default(),
        )
        .unwrap();
        assert_eq!((r.horizon, r.samples, r.quantiles.clone(), r.seed), (9, 16, vec![0.25], 5));
        assert!(r.strict_context);
    }

    #[test]
    fn fields_from_a_table_are_checked_like_json() {
        let o = Overrides { horizon: Some(4), ..Overrides::default() };
        let id = Some(RequestId::Str("a".into()));
        let r = RequestFields::from_target(id.clone(), vec![vec![Some(1.0), None]])
            .validate("t.csv: series a", &o, &Limits::default())
            .unwrap();
        assert_eq!((r.id, r.horizon, r.samples, r.id_mask), (id, 4, 0, vec![0]));
        let e = RequestFields::from_target(None, vec![vec![None]])
            .validate("t.csv: series b", &o, &Limits::default())
            .unwrap_err();
        assert!(e.to_string().starts_with("t.csv: series b: variate 0 has no observed point"), "{e}");
    }

    #[test]
    fn responses_round_trip() {
        let r = ForecastResponse {
            id: Some(RequestId::Int(3)),
            mean: Some(vec![vec![1.5, 2.25]]),
            median: None,
            quantiles: vec![QuantileForecast { q: 0.5, values: vec![vec![1.0, 2.0]] }],
            samples: None,
            context_truncated: Some(ContextCut { given: 10, used: 8 }),
            buckets: Vec::new(),
            profile: "tiny".into(),
            engine: "cpu".into(),
            sampler: None,
            engine_sha256: None,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(
            text,
            "{\"id\":3,\"mean\":[[1.5,2.25]],\"quantiles\":[{\"q\":0.5,\"values\":[[1.0,2.0]]}],\"samples\":null,\
             \"context_truncated\":{\"given\":10,\"used\":8},\"profile\":\"tiny\",\"engine\":\"cpu\"}"
        );
        assert_eq!(serde_json::from_str::<ForecastResponse>(&text).unwrap(), r);
    }
}
