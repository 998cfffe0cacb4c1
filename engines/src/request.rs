//! Forecast requests and responses, shared with the Python reference harness (`tests/reference/run_reference.py`).
//!
//! A request (JSON, unknown fields rejected):
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
//! [`read_requests`] reads a `.json` file (one request), `.jsonl` (one per line, blank lines skipped) or `.csv`
//! (a header row of variate names, one column per variate, empty cell = missing; horizon and the rest come from
//! [`Overrides`]). CLI overrides replace the request's own values. Every request is validated ([`Limits`]);
//! errors name the source, line and variate and say how to fix the input. Nothing here panics on input.
//!
//! [`ForecastResponse`] is what the engines return; [`write_responses`] writes `.json` (one) or `.jsonl`
//! atomically.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

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

/// A request's fields as a client gave them, before validation: what a server decoding another wire format
/// (e.g. Open Inference Protocol tensors) builds, to get the same checks and defaults as a JSON request via
/// [`ForecastRequest::from_fields`]. `None` means "not given".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestFields {
    pub id: Option<RequestId>,
    pub target: Vec<Vec<Option<f32>>>,
    pub id_mask: Option<Vec<i64>>,
    pub horizon: Option<usize>,
    pub samples: Option<usize>,
    pub quantiles: Option<Vec<f64>>,
    pub seed: Option<u64>,
    pub strict_context: Option<bool>,
}

impl ForecastRequest {
    /// Validates `fields` exactly as a JSON request with those fields is validated (same defaults, same errors
    /// naming `at`).
    pub fn from_fields(fields: RequestFields, at: &str, limits: &Limits) -> Result<ForecastRequest> {
        let RequestFields { id, target, id_mask, horizon, samples, quantiles, seed, strict_context } = fields;
        let raw = RawRequest { id, target, id_mask, horizon, samples, quantiles, seed, strict_context };
        validate(raw, at, &Overrides::default(), limits)
    }
}

/// The request as written (JSON / JSON Lines).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRequest {
    #[serde(default)]
    id: Option<RequestId>,
    target: Vec<Vec<Option<f32>>>,
    #[serde(default)]
    id_mask: Option<Vec<i64>>,
    #[serde(default)]
    horizon: Option<usize>,
    #[serde(default)]
    samples: Option<usize>,
    #[serde(default)]
    quantiles: Option<Vec<f64>>,
    #[serde(default)]
    seed: Option<u64>,
    #[serde(default)]
    strict_context: Option<bool>,
}

/// Input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One JSON request.
    Json,
    /// One JSON request per line.
    JsonLines,
    /// Header of variate names, one column per variate, empty cell = missing.
    Csv,
}

impl Format {
    /// From the file extension: `.json`, `.jsonl`/`.ndjson`, `.csv` (case-insensitive).
    pub fn from_path(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "json" => Some(Format::Json),
            "jsonl" | "ndjson" => Some(Format::JsonLines),
            "csv" => Some(Format::Csv),
            _ => None,
        }
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
}

/// What the engine serving the requests can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_samples: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_samples: usize::MAX }
    }
}

/// Reads the requests in `path`; `format` defaults to the one its extension names.
pub fn read_requests(
    path: &Path,
    format: Option<Format>,
    overrides: &Overrides,
    limits: &Limits,
) -> Result<Vec<ForecastRequest>> {
    let name = path.display().to_string();
    let format = match format.or_else(|| Format::from_path(path)) {
        Some(f) => f,
        None => return Err(Error::UnknownFormat { at: name, path: path.to_path_buf() }),
    };
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse_requests(&text, format, &name, overrides, limits)
}

/// Parses requests from `text` (e.g. an HTTP body or stdin); `name` says where it came from in errors.
pub fn parse_requests(
    text: &str,
    format: Format,
    name: &str,
    overrides: &Overrides,
    limits: &Limits,
) -> Result<Vec<ForecastRequest>> {
    match format {
        Format::Json => Ok(vec![parse_json(text, name, overrides, limits)?]),
        Format::JsonLines => text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| parse_json(l, &format!("{name} line {}", i + 1), overrides, limits))
            .collect(),
        Format::Csv => Ok(vec![parse_csv(text, name, overrides, limits)?]),
    }
}

fn parse_json(text: &str, at: &str, overrides: &Overrides, limits: &Limits) -> Result<ForecastRequest> {
    let raw: RawRequest = serde_json::from_str(text).map_err(|e| json_error(text, at, &e))?;
    validate(raw, at, overrides, limits)
}

/// A serde error with a hint when the input holds NaN/Infinity literals (Python's `json.dumps` writes them).
fn json_error(text: &str, at: &str, e: &serde_json::Error) -> Error {
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

fn parse_csv(text: &str, at: &str, overrides: &Overrides, limits: &Limits) -> Result<ForecastRequest> {
    let syntax = |message: String| Error::RequestSyntax { at: at.to_string(), message };
    let mut reader =
        csv::ReaderBuilder::new().has_headers(true).trim(csv::Trim::All).from_reader(text.as_bytes());
    let names: Vec<String> = reader
        .headers()
        .map_err(|e| syntax(format!("header row: {e}")))?
        .iter()
        .map(str::to_string)
        .collect();
    if names.is_empty() || (names.len() == 1 && names[0].is_empty()) {
        return Err(syntax(
            "no header row of variate names; the first line must name one column per variate".into(),
        ));
    }
    let mut target: Vec<Vec<Option<f32>>> = vec![Vec::new(); names.len()];
    for (row, record) in reader.records().enumerate() {
        let line = row + 2;
        let record =
            record.map_err(|e| syntax(format!("line {line}: {e}; every row needs one cell per variate")))?;
        for (v, cell) in record.iter().enumerate() {
            let value = if cell.is_empty() {
                None
            } else {
                let x: f32 = cell.parse().map_err(|_| {
                    syntax(format!(
                        "line {line}, column `{}`: `{cell}` is not a number; leave the cell empty for a missing point",
                        names[v]
                    ))
                })?;
                if !x.is_finite() {
                    return Err(Error::NonFinite {
                        at: format!("{at} line {line} (column `{}`)", names[v]),
                        variate: v,
                        t: row,
                        value: cell.to_string(),
                    });
                }
                Some(x)
            };
            target[v].push(value);
        }
    }
    let raw = RawRequest {
        id: None,
        target,
        id_mask: None,
        horizon: None,
        samples: None,
        quantiles: None,
        seed: None,
        strict_context: None,
    };
    validate(raw, at, overrides, limits)
}

/// Applies the overrides and checks every field.
fn validate(raw: RawRequest, at: &str, o: &Overrides, limits: &Limits) -> Result<ForecastRequest> {
    let at_s = || at.to_string();
    let horizon = o.horizon.or(raw.horizon).ok_or(Error::MissingField {
        at: at_s(),
        field: "horizon",
        fix: "add \"horizon\": N to the request or pass --horizon N",
    })?;
    let samples = o.samples.or(raw.samples).unwrap_or(0);
    let seed = o.seed.or(raw.seed).unwrap_or(0);
    let strict_context = o.strict_context.or(raw.strict_context).unwrap_or(false);
    let quantiles = match (o.quantiles.clone().or(raw.quantiles), samples) {
        (Some(q), 0) if !q.is_empty() => return Err(Error::QuantilesWithoutSamples { at: at_s() }),
        (Some(q), _) => q,
        (None, 0) => Vec::new(),
        (None, _) => DEFAULT_QUANTILES.to_vec(),
    };
    let target = raw.target;
    if target.is_empty() {
        return Err(Error::NoVariates { at: at_s() });
    }
    let len = target[0].len();
    for (v, series) in target.iter().enumerate() {
        if series.is_empty() {
            return Err(Error::EmptySeries { at: at_s(), variate: v });
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
    /// The profile and engine that produced it.
    pub profile: String,
    pub engine: String,
}

impl ForecastResponse {
    /// The point forecast `[variate][horizon]`: the mean (Toto 1.0) or the median (Toto 2.0).
    pub fn point(&self) -> &[Vec<f32>] {
        self.mean.as_deref().or(self.median.as_deref()).unwrap_or(&[])
    }
}

/// Serialises responses: `.jsonl` → one compact line each; otherwise exactly one JSON document.
pub fn responses_to_string(
    responses: &[ForecastResponse],
    format: Format,
) -> std::result::Result<String, String> {
    let line = |r: &ForecastResponse| serde_json::to_string(r).map_err(|e| e.to_string());
    match format {
        Format::JsonLines => {
            let mut s = String::new();
            for r in responses {
                s.push_str(&line(r)?);
                s.push('\n');
            }
            Ok(s)
        }
        _ => match responses {
            [one] => Ok(line(one)? + "\n"),
            _ => Err(format!("{} responses do not fit one JSON document", responses.len())),
        },
    }
}

/// Writes responses atomically (temp file, then rename): one to a `.json` file, any number to `.jsonl`.
pub fn write_responses(path: &Path, responses: &[ForecastResponse]) -> Result<()> {
    let format =
        if Format::from_path(path) == Some(Format::JsonLines) { Format::JsonLines } else { Format::Json };
    let text = responses_to_string(responses, format)
        .map_err(|_| Error::ResponseCount { path: path.to_path_buf(), count: responses.len() })?;
    exporter::fsutil::write_atomic(path, text.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Result<ForecastRequest> {
        parse_requests(text, Format::Json, "req.json", &Overrides::default(), &Limits { max_samples: 512 })
            .map(|mut v| v.remove(0))
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
            target: vec![vec![Some(1.5), None, Some(3.0)]],
            horizon: Some(4),
            samples: Some(8),
            seed: Some(2),
            ..RequestFields::default()
        };
        let limits = Limits { max_samples: 512 };
        assert_eq!(
            ForecastRequest::from_fields(fields.clone(), "req.json", &limits).unwrap(),
            json(text).unwrap()
        );
        let bad = RequestFields { target: vec![vec![None]], ..fields };
        let e = ForecastRequest::from_fields(bad, "input `target`", &limits).unwrap_err().to_string();
        assert_eq!(e, "input `target`: variate 0 has no observed point (all null); drop it or give it at least one value");
    }

    #[test]
    fn json_lines_name_the_line() {
        let text = "{\"target\": [[1]], \"horizon\": 2}\n\n{\"target\": [[1]], \"horizon\": 0}\n";
        let e = parse_requests(text, Format::JsonLines, "r.jsonl", &Overrides::default(), &Limits::default())
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("r.jsonl line 3: `horizon` is 0"), "{e}");
        let ok = parse_requests(
            "{\"target\": [[1]], \"horizon\": 2}\n{\"target\": [[2]], \"horizon\": 3}",
            Format::JsonLines,
            "r.jsonl",
            &Overrides::default(),
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
    }

    #[test]
    fn overrides_replace_request_values() {
        let o = Overrides {
            horizon: Some(9),
            samples: Some(16),
            quantiles: Some(vec![0.25]),
            seed: Some(5),
            strict_context: Some(true),
        };
        let r = parse_requests(
            r#"{"target": [[1]], "horizon": 2, "samples": 0, "seed": 1}"#,
            Format::Json,
            "x",
            &o,
            &Limits::default(),
        )
        .unwrap()
        .remove(0);
        assert_eq!((r.horizon, r.samples, r.quantiles.clone(), r.seed), (9, 16, vec![0.25], 5));
        assert!(r.strict_context);
    }

    #[test]
    fn csv_requests() {
        let o = Overrides { horizon: Some(4), ..Overrides::default() };
        let text = "cpu, mem\n1.0, 10\n,11\n3.5 ,\n";
        let r = parse_requests(text, Format::Csv, "m.csv", &o, &Limits::default()).unwrap().remove(0);
        assert_eq!(r.target, vec![vec![Some(1.0), None, Some(3.5)], vec![Some(10.0), Some(11.0), None]]);
        assert_eq!((r.horizon, r.samples), (4, 0));

        let e = |text: &str, o: &Overrides| {
            parse_requests(text, Format::Csv, "m.csv", o, &Limits::default()).unwrap_err().to_string()
        };
        assert!(e("a\n1\n", &Overrides::default()).contains("pass --horizon N"));
        let msg = e("a,b\n1,2\n3,nan\n", &o);
        assert!(msg.contains("m.csv line 3 (column `b`): variate 1, t=1: nan is not a finite f32"), "{msg}");
        assert!(e("a,b\n1,inf\n", &o).contains("inf is not a finite f32"));
        assert!(e("a,b\n1,x\n", &o).contains("line 2, column `b`: `x` is not a number"));
        assert!(e("a,b\n1,2\n3\n", &o).contains("line 3: "));
        assert!(e("a,b\n", &o).contains("variate 0 is empty"));
        assert!(e("a,b\n1,\n2,\n", &o).contains("variate 1 has no observed point"));
        assert!(e("", &o).contains("no header row"));
    }

    #[test]
    fn formats_from_paths() {
        assert_eq!(Format::from_path(Path::new("a/b.JSON")), Some(Format::Json));
        assert_eq!(Format::from_path(Path::new("b.jsonl")), Some(Format::JsonLines));
        assert_eq!(Format::from_path(Path::new("b.csv")), Some(Format::Csv));
        assert_eq!(Format::from_path(Path::new("b.txt")), None);
        let e =
            read_requests(Path::new("/nonexistent/b.txt"), None, &Overrides::default(), &Limits::default())
                .unwrap_err();
        assert!(e.to_string().contains("name it *.json, *.jsonl or *.csv"), "{e}");
        let e =
            read_requests(Path::new("/nonexistent/b.json"), None, &Overrides::default(), &Limits::default())
                .unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
    }

    #[test]
    fn responses_round_trip_and_write_atomically() {
        let r = ForecastResponse {
            id: None,
            mean: Some(vec![vec![1.5, 2.25]]),
            median: None,
            quantiles: vec![QuantileForecast { q: 0.5, values: vec![vec![1.0, 2.0]] }],
            samples: None,
            context_truncated: None,
            profile: "tiny".into(),
            engine: "cpu".into(),
        };
        let text = responses_to_string(std::slice::from_ref(&r), Format::Json).unwrap();
        assert_eq!(
            text,
            "{\"mean\":[[1.5,2.25]],\"quantiles\":[{\"q\":0.5,\"values\":[[1.0,2.0]]}],\"samples\":null,\
             \"profile\":\"tiny\",\"engine\":\"cpu\"}\n"
        );
        assert_eq!(serde_json::from_str::<ForecastResponse>(&text).unwrap(), r);
        let dir = tempfile::tempdir().unwrap();
        let one = dir.path().join("out.json");
        write_responses(&one, std::slice::from_ref(&r)).unwrap();
        assert_eq!(std::fs::read_to_string(&one).unwrap(), text);
        let many = dir.path().join("out.jsonl");
        write_responses(&many, &[r.clone(), r.clone()]).unwrap();
        assert_eq!(std::fs::read_to_string(&many).unwrap().lines().count(), 2);
        let e = write_responses(&one, &[r.clone(), r]).unwrap_err();
        assert!(e.to_string().contains("2 responses do not fit one JSON document"), "{e}");
    }
}
