//! KServe's time-series wire types (the `kserve` 0.21 package, `kserve.protocol.rest.timeseries.types`): the
//! `ForecastRequest` as this server decodes it, and the `ForecastResponse` and `ErrorResponse` it writes.
//!
//! The request is decoded straight into these types under [`engines::bounded`] (every number, string and array
//! charged to the request's bytes budget as it is built; `inputs` stops at `--max-series` entries). `series` is
//! decoded into one flat vector ([`Observed`]) whatever its shape, so a value costs 8 bytes however it is nested.
//! KServe's models allow extra fields (pydantic's `extra = "allow"`) on an input and on `options`: the ones this
//! server reads are the `/v1/forecast` request's fields (docs/formats.md, "KServe time-series API"); any other
//! field is a 400 naming it, as `/v1/forecast` refuses unknown fields.

use std::collections::BTreeMap;
use std::fmt;

use engines::request::{ContextCut, QuantileForecast, SamplerUsed};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde::{Deserialize, Serialize};
use tables::timestamps::Freq;

/// KServe's `ForecastRequest`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub model: String,
    pub inputs: Vec<Input>,
    pub options: Options,
    /// The client's own metadata: accepted and not read.
    #[serde(default)]
    #[allow(dead_code)]
    pub metadata: Option<IgnoredAny>,
}

/// KServe's `TimeSeriesInput`, with the `/v1/forecast` request's per-series fields as extra fields.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    #[serde(rename = "type")]
    pub kind: SeriesType,
    pub name: String,
    pub series: Observed,
    pub frequency: Frequency,
    pub start_timestamp: Option<String>,
    pub timestamps: Option<Vec<String>>,
    pub future_timestamps: Option<Vec<String>>,
    pub columns: Option<Vec<String>>,
    pub id_mask: Option<Vec<i64>>,
    pub calendar: Option<String>,
    pub timezone: Option<String>,
    pub holidays: Option<Vec<String>>,
}

/// KServe's `ForecastOptions`, with the `/v1/forecast` request's sampling fields as extra fields.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Options {
    pub horizon: usize,
    pub quantiles: Option<Vec<f64>>,
    pub samples: Option<usize>,
    pub seed: Option<u64>,
    pub temperature: Option<f64>,
    pub top_k: Option<i64>,
    pub top_p: Option<f64>,
    pub params: Option<BTreeMap<String, f64>>,
    pub strict_context: Option<bool>,
}

/// KServe's `TimeSeriesType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum SeriesType {
    #[serde(rename = "univariate_time_series")]
    Univariate,
    #[serde(rename = "multivariate_time_series")]
    Multivariate,
}

/// KServe's `Frequency`: its name as the client wrote it (the answer echoes it) and the step it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frequency {
    pub name: &'static str,
    pub step: Freq,
}

/// Every name of KServe's `Frequency` enum, with the step it stands for (as KServe's `FREQUENCY_MAP`: days and
/// weeks are fixed durations, months, quarters and years calendar months).
const FREQUENCIES: [(&str, Freq); 16] = [
    ("second", Freq::Fixed(NANOS_PER_SECOND)),
    ("S", Freq::Fixed(NANOS_PER_SECOND)),
    ("minute", Freq::Fixed(60 * NANOS_PER_SECOND)),
    ("T", Freq::Fixed(60 * NANOS_PER_SECOND)),
    ("hour", Freq::Fixed(3_600 * NANOS_PER_SECOND)),
    ("H", Freq::Fixed(3_600 * NANOS_PER_SECOND)),
    ("day", Freq::Fixed(86_400 * NANOS_PER_SECOND)),
    ("D", Freq::Fixed(86_400 * NANOS_PER_SECOND)),
    ("week", Freq::Fixed(7 * 86_400 * NANOS_PER_SECOND)),
    ("W", Freq::Fixed(7 * 86_400 * NANOS_PER_SECOND)),
    ("month", Freq::Months(1)),
    ("M", Freq::Months(1)),
    ("quarter", Freq::Months(3)),
    ("Q", Freq::Months(3)),
    ("year", Freq::Months(12)),
    ("Y", Freq::Months(12)),
];

const NANOS_PER_SECOND: i128 = 1_000_000_000;

impl<'de> Deserialize<'de> for Frequency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        match FREQUENCIES.iter().find(|(n, _)| *n == text) {
            Some(&(name, step)) => Ok(Frequency { name, step }),
            None => Err(de::Error::custom(format!(
                "frequency `{}` is not one of KServe's: {}",
                super::super::error::clip(&text),
                FREQUENCIES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ))),
        }
    }
}

/// An input's `series`, flat: `rows` observations (time steps), each of `width` values (`None`: a univariate
/// series of plain numbers), row after row.
#[derive(Debug, Default)]
pub struct Observed {
    pub values: Vec<f64>,
    pub width: Option<usize>,
    pub rows: usize,
}

impl Observed {
    /// The value of variate `v` at time `t`.
    pub fn at(&self, t: usize, v: usize) -> f64 {
        self.values[t * self.width.unwrap_or(1) + v]
    }

    /// Variates per row.
    pub fn variates(&self) -> usize {
        self.width.unwrap_or(1)
    }
}

impl<'de> Deserialize<'de> for Observed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(SeriesVisitor)
    }
}

struct SeriesVisitor;

impl<'de> Visitor<'de> for SeriesVisitor {
    type Value = Observed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of numbers (univariate) or a list of rows of numbers (multivariate)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Observed, A::Error> {
        let mut out = Observed::default();
        while seq.next_element_seed(Step { out: &mut out })?.is_some() {}
        Ok(out)
    }
}

/// One entry of `series`: a number, or a row of numbers, all entries alike.
struct Step<'a> {
    out: &'a mut Observed,
}

impl<'de> DeserializeSeed<'de> for Step<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Step<'_> {
    fn number<E: de::Error>(self, x: f64) -> Result<(), E> {
        if self.out.width.is_some() {
            return Err(E::custom("`series` mixes rows and plain numbers; give all rows or all numbers"));
        }
        self.out.values.push(x);
        self.out.rows += 1;
        Ok(())
    }
}

impl<'de> Visitor<'de> for Step<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a number or a row of numbers")
    }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<(), E> {
        self.number(x)
    }

    fn visit_i64<E: de::Error>(self, x: i64) -> Result<(), E> {
        self.number(x as f64)
    }

    fn visit_u64<E: de::Error>(self, x: u64) -> Result<(), E> {
        self.number(x as f64)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let out = self.out;
        if out.rows > 0 && out.width.is_none() {
            return Err(de::Error::custom(
                "`series` mixes plain numbers and rows; give all rows or all numbers",
            ));
        }
        let start = out.values.len();
        while let Some(x) = seq.next_element::<f64>()? {
            out.values.push(x);
        }
        let width = out.values.len() - start;
        match out.width {
            Some(w) if w != width => {
                return Err(de::Error::custom(format!(
                "row {} of `series` has {width} values, row 0 has {w}; every row holds one value per variate",
                out.rows
            )))
            }
            None if width == 0 => {
                return Err(de::Error::custom(
                    "row 0 of `series` is empty; a row holds one value per variate",
                ))
            }
            _ => out.width = Some(width),
        }
        out.rows += 1;
        Ok(())
    }
}

// --- the answer

/// KServe's `ForecastResponse`, one output holding every input's forecast.
#[derive(Serialize)]
pub struct Response<'a> {
    pub id: &'a str,
    pub created_at: u64,
    pub status: &'static str,
    pub model: &'a str,
    pub outputs: [Output<'a>; 1],
}

/// KServe's `ForecastOutput`.
#[derive(Serialize)]
pub struct Output<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: &'a str,
    pub status: &'static str,
    pub content: Vec<Forecast<'a>>,
}

/// KServe's `TimeSeriesForecast`, with the point forecast's kind, the variates' names (multivariate) and the
/// context cut (`/v1/forecast`'s `context_truncated`) as extra fields.
#[derive(Serialize)]
pub struct Forecast<'a> {
    #[serde(rename = "type")]
    pub kind: SeriesType,
    pub name: &'a str,
    pub mean_forecast: Values<'a>,
    pub frequency: &'static str,
    pub start_timestamp: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantiles: Option<Levels<'a>>,
    pub point_forecast: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub columns: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_truncated: Option<ContextCut>,
    /// Provenance, as `/v1/forecast` writes it: the sampler settings used (families with sampling controls) and
    /// the engine manifest's sha256.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampler: Option<&'a SamplerUsed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_sha256: Option<&'a str>,
}

/// `[variate][horizon]` values written KServe's way: `[horizon]` for a univariate series, `[horizon][variate]`
/// for a multivariate one.
pub struct Values<'a> {
    pub rows: &'a [Vec<f32>],
    pub kind: SeriesType,
}

impl Serialize for Values<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.kind {
            SeriesType::Univariate => self.rows.first().map_or(&[][..], |r| r.as_slice()).serialize(s),
            SeriesType::Multivariate => {
                let steps = self.rows.first().map_or(0, Vec::len);
                let mut seq = s.serialize_seq(Some(steps))?;
                for h in 0..steps {
                    seq.serialize_element(&StepValues { rows: self.rows, h })?;
                }
                seq.end()
            }
        }
    }
}

/// Every variate's value at step `h`.
struct StepValues<'a> {
    rows: &'a [Vec<f32>],
    h: usize,
}

impl Serialize for StepValues<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.rows.iter().map(|r| r[self.h]))
    }
}

/// The quantile forecasts as KServe's `{"0.1": values, ...}`, in the request's order of levels.
pub struct Levels<'a> {
    pub levels: &'a [QuantileForecast],
    pub kind: SeriesType,
}

impl Serialize for Levels<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.levels.len()))?;
        for q in self.levels {
            map.serialize_entry(&q.q.to_string(), &Values { rows: &q.values, kind: self.kind })?;
        }
        map.end()
    }
}

/// KServe's `ErrorResponse`.
#[derive(Serialize)]
pub struct ErrorResponse {
    pub error: Error,
}

/// KServe's `Error`: `code` is the HTTP status, as KServe's own `create_error_response` writes it.
#[derive(Serialize)]
pub struct Error {
    pub code: String,
    pub message: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(json: &str) -> Result<Observed, String> {
        serde_json::from_str::<Observed>(json).map_err(|e| e.to_string())
    }

    #[test]
    fn series_decode_flat_whatever_their_shape() {
        let uni = series("[1, 2.5, -3]").unwrap();
        assert_eq!((uni.values, uni.width, uni.rows), (vec![1.0, 2.5, -3.0], None, 3));
        let multi = series("[[1, 2], [3, 4], [5, 6]]").unwrap();
        assert_eq!((multi.width, multi.rows, multi.at(2, 1)), (Some(2), 3, 6.0));
        assert_eq!(series("[]").unwrap().rows, 0);
        let e = series("[[1, 2], [3]]").unwrap_err();
        assert!(e.contains("row 1 of `series` has 1 values, row 0 has 2"), "{e}");
        assert!(series("[1, [2]]").unwrap_err().contains("mixes plain numbers and rows"));
        assert!(series("[[2], 1]").unwrap_err().contains("mixes rows and plain numbers"));
        assert!(series("[[]]").unwrap_err().contains("row 0 of `series` is empty"));
        assert!(series("[1, null]").is_err());
        assert!(series("[[1, \"x\"]]").is_err());
    }

    #[test]
    fn frequencies_are_kserves_names() {
        let f: Frequency = serde_json::from_str("\"Q\"").unwrap();
        assert_eq!((f.name, f.step), ("Q", Freq::Months(3)));
        let f: Frequency = serde_json::from_str("\"week\"").unwrap();
        assert_eq!(f.step, Freq::Fixed(7 * 86_400 * NANOS_PER_SECOND));
        let e = serde_json::from_str::<Frequency>("\"fortnight\"").unwrap_err().to_string();
        assert!(e.contains("`fortnight` is not one of KServe's: second, S, minute"), "{e}");
    }
}
