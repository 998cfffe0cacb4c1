//! [`RequestShape`]: what a request may hold for the engine's model family, from its `Capabilities` — named
//! columns (and which a family derives when absent), per-point wall clocks, missing points, sampling controls,
//! family parameters — and the checks shared parsing makes with it: a field the family does not take is refused
//! by name with the family's reason ([`refuse_untaken`]), `columns` are resolved against the family's list
//! ([`resolve_columns`]), a missing point is refused for a family without them ([`refuse_missing`]), and the
//! sampling controls and `params` are checked ([`sampling`], [`params`]). The family checks the values only it
//! knows the range of (a parameter's bounds, its window) in its own `admit`.

use std::collections::BTreeMap;

use exporter::registry::family::{Capabilities, InputColumn};

use crate::error::{Error, Result};

/// What a request may hold for a family (see the module docs). [`Default`] is the shape of a family of unnamed
/// variates: any number of them, missing points allowed, no wall clocks, no sampling controls, no parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestShape {
    /// Names the family in refusals: `Toto 1.0`.
    pub title: &'static str,
    /// The family's input columns in their default order; `None`: unnamed variates.
    pub columns: Option<&'static [InputColumn]>,
    pub reads_timestamps: bool,
    pub missing_points: bool,
    pub sampling_controls: bool,
    /// Whether it draws sample paths at all (the reason a sampling control is refused).
    pub samples: bool,
    /// The `params` it takes, by name.
    pub params: &'static [&'static str],
}

impl Default for RequestShape {
    fn default() -> Self {
        RequestShape {
            title: "this model",
            columns: None,
            reads_timestamps: false,
            missing_points: true,
            sampling_controls: false,
            samples: true,
            params: &[],
        }
    }
}

impl RequestShape {
    /// The shape of a family's requests, from its capabilities.
    pub fn of(c: &'static Capabilities) -> Self {
        RequestShape {
            title: c.title,
            columns: c.columns,
            reads_timestamps: c.reads_timestamps,
            missing_points: c.missing_points,
            sampling_controls: c.sampling_controls,
            samples: c.samples,
            params: c.params,
        }
    }

    /// The family's columns as `open, high, low, close (required), volume, amount` for messages.
    fn column_list(&self) -> String {
        let cols = self.columns.unwrap_or(&[]);
        let required: Vec<&str> =
            cols.iter().filter(|c| c.derived_when_absent.is_none()).map(|c| c.name).collect();
        let optional: Vec<&str> =
            cols.iter().filter(|c| c.derived_when_absent.is_some()).map(|c| c.name).collect();
        match optional.is_empty() {
            true => required.join(", "),
            false => format!("{} (required), {} (optional)", required.join(", "), optional.join(", ")),
        }
    }
}

/// Which of the fields a family may not take a request gives (any of them from the request or the command line).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Given<'a> {
    pub columns: bool,
    pub timestamps: bool,
    pub future_timestamps: bool,
    pub temperature: bool,
    pub top_k: bool,
    pub top_p: bool,
    pub params: Option<&'a BTreeMap<String, f64>>,
}

/// Refuses, by name, the first field `given` holds that `shape`'s family does not take, with its reason.
pub(super) fn refuse_untaken(shape: &RequestShape, given: &Given<'_>, at: &str) -> Result<()> {
    let not_taken = |field: &str, why: String| {
        Err(Error::FieldNotTaken { at: at.to_string(), field: field.to_string(), model: shape.title, why })
    };
    if given.columns && shape.columns.is_none() {
        return not_taken("columns", "its variates are unnamed rows of `target`, in any order".into());
    }
    if given.timestamps && !shape.reads_timestamps {
        return not_taken(
            "timestamps",
            "it forecasts from the values alone; `totoc forecast` and `POST /v1/forecast` read a request's \
             `timestamps` to place its points on the series' grid, this reader does not"
                .into(),
        );
    }
    if given.future_timestamps && !shape.reads_timestamps {
        return not_taken(
            "future_timestamps",
            "it does not read timestamps (the forecast's timestamps continue the series' calendar)".into(),
        );
    }
    let why_sampling = match shape.samples {
        true => {
            "it draws its sample paths from the distribution it predicts, as predicted (`samples`, `seed`)"
        }
        false => "it draws no sample paths",
    };
    for (field, is) in [("temperature", given.temperature), ("top_k", given.top_k), ("top_p", given.top_p)] {
        if is && !shape.sampling_controls {
            return not_taken(field, why_sampling.into());
        }
    }
    if let Some(name) = given.params.and_then(|p| p.keys().find(|k| !shape.params.contains(&k.as_str()))) {
        let takes = match shape.params {
            [] => "it takes no parameters".to_string(),
            names => {
                format!(
                    "its parameters are {}",
                    names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
                )
            }
        };
        return not_taken(&format!("params.{}", crate::request::clip(name)), takes);
    }
    Ok(())
}

/// The names of a request's `rows` target rows: `given` (`columns`) checked against the family's list, or the
/// family's default order. Empty for a family of unnamed variates (which [`refuse_untaken`] has checked).
pub(super) fn resolve_columns(
    shape: &RequestShape,
    given: Option<Vec<String>>,
    rows: usize,
    at: &str,
) -> Result<Vec<&'static str>> {
    let Some(family) = shape.columns else { return Ok(Vec::new()) };
    let bad = |message: String| Error::BadField { at: at.to_string(), field: "columns".into(), message };
    let names: Vec<&'static str> = match given {
        None => {
            if rows > family.len() {
                return Err(bad(format!(
                    "`target` has {rows} rows but {} reads at most {} columns ({}); drop the extra rows",
                    shape.title,
                    family.len(),
                    shape.column_list()
                )));
            }
            family[..rows].iter().map(|c| c.name).collect()
        }
        Some(given) => {
            let mut names = Vec::with_capacity(given.len());
            for name in &given {
                let Some(c) = family.iter().find(|c| c.name == name.as_str()) else {
                    let hint = match family.iter().find(|c| c.name.eq_ignore_ascii_case(name.trim())) {
                        Some(c) => format!("column names are lowercase: use `{}`", c.name),
                        None => format!("its columns are {}", shape.column_list()),
                    };
                    return Err(bad(format!(
                        "`columns` names `{}`, which is not a column {} reads; {hint}",
                        crate::request::clip(name),
                        shape.title
                    )));
                };
                if names.contains(&c.name) {
                    return Err(bad(format!("`columns` names `{}` twice; name each column once", c.name)));
                }
                names.push(c.name);
            }
            if names.len() != rows {
                return Err(bad(format!(
                    "`columns` names {} columns but `target` has {rows} rows; give one name per row of `target`",
                    names.len()
                )));
            }
            names
        }
    };
    if let Some(c) = family.iter().find(|c| c.derived_when_absent.is_none() && !names.contains(&c.name)) {
        return Err(bad(format!(
            "there is no `{}` column, which {} requires (its columns are {}); add its row to `target`{}",
            c.name,
            shape.title,
            shape.column_list(),
            if rows == 0 {
                ""
            } else {
                " and its name to `columns` (without `columns`, the rows are in that order)"
            }
        )));
    }
    Ok(names)
}

/// Whether the family derives a column these `names` leave out: validation then keeps the f64 values.
pub(super) fn derives_absent(shape: &RequestShape, names: &[&str]) -> bool {
    shape
        .columns
        .is_some_and(|cols| cols.iter().any(|c| c.derived_when_absent.is_some() && !names.contains(&c.name)))
}

/// Variate `v` as messages name it: `column `open`` where the family names its columns (`names`, as resolved),
/// else `variate 2`.
pub(super) fn variate_name(names: &[&str], v: usize) -> String {
    names.get(v).map_or_else(|| format!("variate {v}"), |n| format!("column `{n}`"))
}

/// For a family without missing points: the first missing point of variate `v` (`series`) is an error naming
/// its column (`names`, else the variate) and row.
pub(super) fn refuse_missing(
    shape: &RequestShape,
    v: usize,
    series: &[Option<f32>],
    names: &[&str],
    at: &str,
) -> Result<()> {
    let Some(t) = series.iter().position(Option::is_none).filter(|_| !shape.missing_points) else {
        return Ok(());
    };
    let column = variate_name(names, v);
    Err(Error::BadField {
        at: at.to_string(),
        field: "target".into(),
        message: format!(
            "{column}, row {t} is missing (null or NaN); {} takes no missing points: give every row a value in \
             every column, or drop the row",
            shape.title
        ),
    })
}

/// A request's sampling controls as given (absent: the family's defaults), checked: `temperature` finite and
/// > 0, `top_k` ≥ 0, `top_p` in (0, 1], and none of them without sample paths.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Sampling {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
}

impl Sampling {
    /// None given.
    pub fn is_empty(&self) -> bool {
        *self == Sampling::default()
    }
}

/// Checks the sampling controls of a request of `samples` paths.
pub(super) fn sampling(
    temperature: Option<f64>,
    top_k: Option<i64>,
    top_p: Option<f64>,
    samples: usize,
    at: &str,
) -> Result<Sampling> {
    let bad =
        |field: &str, message: String| Error::BadField { at: at.to_string(), field: field.into(), message };
    let given: Vec<&str> =
        [("temperature", temperature.is_some()), ("top_k", top_k.is_some()), ("top_p", top_p.is_some())]
            .into_iter()
            .filter_map(|(f, is)| is.then_some(f))
            .collect();
    if samples == 0 && !given.is_empty() {
        return Err(bad(
            given[0],
            format!(
                "`{}` given with `samples: 0`, the deterministic forecast (one greedy path); drop {} or ask for \
                 `samples` ≥ 1",
                given.join("`, `"),
                if given.len() > 1 { "them" } else { "it" }
            ),
        ));
    }
    if let Some(t) = temperature.filter(|t| !(t.is_finite() && *t > 0.0)) {
        return Err(bad(
            "temperature",
            format!("`temperature` is {t}; it must be a finite number > 0 (1 samples the model's distribution as is)"),
        ));
    }
    let top_k = match top_k {
        Some(k) if k < 0 => {
            return Err(bad(
                "top_k",
                format!(
                "`top_k` is {k}; it must be ≥ 0 (0 turns it off; k > 0 samples among the k likeliest tokens)"
            ),
            ))
        }
        k => k.map(|k| k as u64),
    };
    if let Some(p) = top_p.filter(|p| !(*p > 0.0 && *p <= 1.0)) {
        return Err(bad(
            "top_p",
            format!("`top_p` is {p}; it must be in (0, 1] (1 turns nucleus filtering off)"),
        ));
    }
    Ok(Sampling { temperature, top_k, top_p })
}

/// Checks `params` (names: [`refuse_untaken`]): every value a finite number.
pub(super) fn params(params: Option<BTreeMap<String, f64>>, at: &str) -> Result<BTreeMap<String, f64>> {
    let params = params.unwrap_or_default();
    if let Some((name, x)) = params.iter().find(|(_, x)| !x.is_finite()) {
        return Err(Error::BadField {
            at: at.to_string(),
            field: format!("params.{name}"),
            message: format!("`params.{name}` is {x}; give a finite number"),
        });
    }
    Ok(params)
}
