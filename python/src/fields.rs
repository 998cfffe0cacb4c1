//! The request fields beyond the values that a family may take (`columns`, `timestamps`, `future_timestamps`,
//! `temperature`, `top_k`, `top_p`, `params`; `docs/formats.md`, "Forecast request"), read from `forecast`'s
//! arguments and passed through to the request's validation unchanged: whether the engine's family takes them,
//! and what their values may be, is the validation's to say, with the CLI's messages (a Toto engine refuses each
//! by name).
//!
//! Stamps arrive from `totoc._engine` already written as ISO 8601 text, one list per series, each with the count
//! of stamps the caller gave: only the last `max_context` of a series' stamps (the points the engine keeps) and
//! the first `horizon` of its future stamps are copied, and the counts say whether the caller gave one per point
//! and per step.

use std::collections::BTreeMap;

use engines::request::TimeValue;
use engines::Error;
use pyo3::prelude::*;

use crate::errors::invalid;

/// One series' stamps: how many the caller gave, and the text of those passed on.
#[derive(Debug, Clone, Default)]
pub struct Stamps {
    pub given: usize,
    pub text: Vec<String>,
}

impl Stamps {
    /// The last `keep` stamps as request values.
    fn values(&self, keep: usize) -> Vec<TimeValue> {
        self.text[self.text.len().saturating_sub(keep)..].iter().cloned().map(TimeValue::Text).collect()
    }
}

/// The fields of one `forecast` call beyond the values and the Toto fields (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Extra {
    pub columns: Option<Vec<String>>,
    /// One per series.
    pub timestamps: Option<Vec<Stamps>>,
    /// One per series.
    pub future_timestamps: Option<Vec<Stamps>>,
    pub temperature: Option<f64>,
    pub top_k: Option<i64>,
    pub top_p: Option<f64>,
    pub params: Option<BTreeMap<String, f64>>,
}

impl Extra {
    /// The sampling controls and family parameters of a table call (`predict_df`, `cross_validation`), read
    /// from their Python arguments; the per-series fields stay empty.
    pub fn sampling(
        temperature: Option<&Bound<'_, PyAny>>,
        top_k: Option<&Bound<'_, PyAny>>,
        top_p: Option<&Bound<'_, PyAny>>,
        params: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Extra> {
        Ok(Extra {
            temperature: number(temperature, "temperature")?,
            top_k: integer(top_k, "top_k")?,
            top_p: number(top_p, "top_p")?,
            params: self::params(params)?,
            ..Extra::default()
        })
    }

    /// Series `n`'s `(timestamps, future_timestamps)` as request values: the stamps of its last `kept` points.
    pub fn stamps_of(&self, n: usize, kept: usize) -> (Option<Vec<TimeValue>>, Option<Vec<TimeValue>>) {
        let of = |s: &Option<Vec<Stamps>>, keep| s.as_ref().and_then(|s| s.get(n)).map(|s| s.values(keep));
        (of(&self.timestamps, kept), of(&self.future_timestamps, usize::MAX))
    }

    /// After validation accepted series `n`'s request: the counts the caller gave match the points (`points`,
    /// before any cut) and the steps (`horizon`) — the stamps passed on were only those the engine reads.
    pub fn check_counts(&self, n: usize, points: usize, horizon: usize, at: &str) -> engines::Result<()> {
        let bad = |field: &str, given: usize, want: String| Error::BadField {
            at: at.to_string(),
            field: field.into(),
            message: format!(
                "`{field}` has {given} stamps but {want}; give one stamp per {}",
                match field {
                    "timestamps" => "point of `target`",
                    _ => "forecast step",
                }
            ),
        };
        if let Some(s) = self.timestamps.as_ref().and_then(|s| s.get(n)).filter(|s| s.given != points) {
            return Err(bad("timestamps", s.given, format!("`target` has {points} points")));
        }
        if let Some(s) = self.future_timestamps.as_ref().and_then(|s| s.get(n)).filter(|s| s.given != horizon)
        {
            return Err(bad("future_timestamps", s.given, format!("`horizon` is {horizon}")));
        }
        Ok(())
    }
}

/// Reads the stamps argument of `n` series (`name`: `timestamps` or `future_timestamps`): `None`, or a list of
/// `n` `(count, [text])` pairs as `totoc._engine` writes them.
pub fn stamps(obj: Option<&Bound<'_, PyAny>>, name: &str, n: usize) -> PyResult<Option<Vec<Stamps>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    let each: Vec<(usize, Vec<String>)> = obj.extract().map_err(|_| {
        invalid(format!(
            "`{name}` must be one sequence of stamps per series (ISO 8601 text, datetime64, datetime)"
        ))
    })?;
    if each.len() != n {
        return Err(invalid(format!(
            "`{name}` has {} sequences of stamps for {n} series; give one per series",
            each.len()
        )));
    }
    Ok(Some(each.into_iter().map(|(given, text)| Stamps { given, text }).collect()))
}

/// Reads `columns`: `None` or a sequence of names.
pub fn columns(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<String>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    if obj.is_instance_of::<pyo3::types::PyString>() {
        return Err(invalid("`columns` must be a sequence of column names, e.g. [\"open\", \"high\", \"low\", \"close\"], not one string"));
    }
    obj.extract().map(Some).map_err(|_| invalid("`columns` must be a sequence of column names (strings)"))
}

/// Reads `params`: `None` or a mapping of names to numbers.
pub fn params(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<BTreeMap<String, f64>>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    obj.extract().map(Some).map_err(|_| invalid("`params` must be a dict of parameter names to numbers"))
}

/// Reads a number argument (`temperature`, `top_p`).
pub fn number(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<f64>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(invalid(format!("`{name}` must be a number, got a bool")));
    }
    obj.extract().map(Some).map_err(|_| invalid(format!("`{name}` must be a number")))
}

/// Reads an integer argument (`top_k`; its range is validation's).
pub fn integer(obj: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<i64>> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else { return Ok(None) };
    if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(invalid(format!("`{name}` must be an integer, got a bool")));
    }
    obj.extract().map(Some).map_err(|_| invalid(format!("`{name}` must be an integer")))
}
