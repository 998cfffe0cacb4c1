//! The forecaster as an Open Inference Protocol model: its metadata, its input tensors turned into forecast
//! requests ([`plan`]) and its responses turned into output tensors ([`Plan::respond`]). Shared by the REST and
//! gRPC front ends, so both speak exactly the same model (written down in `docs/formats.md`, "Open Inference
//! Protocol").
//!
//! Inputs: `target` FP32 `[V, T]` (one series) or `[N, V, T]` (N series; NaN/null = missing), optional
//! `id_mask` INT64 `[V]` or `[N, V]`, optional `lengths` INT64 `[N]` (each series' real length; its first
//! `T - lengths[n]` points are padding and not part of its context), optional `quantile_levels` FP32 `[Q]`.
//! Parameters: `horizon` (required), `samples`, `seed`, `strict_context`, `timeout` (µs, as Triton clients send
//! it). Outputs: the point forecast `mean` (Toto 1.0) or `median` (Toto 2.0) `[N?, V, H]`, `quantiles`
//! `[N?, Q, V, H]` with `quantile_levels` `[Q]` echoed, `samples` `[N?, S, V, H]`.
//!
//! Each series becomes one [`ForecastRequest`], validated exactly like a JSON request (the same checks and
//! messages as `totoc forecast`), so a series gets the same forecast as the CLI gives it. A family with named
//! columns and wall clocks takes its own inputs and parameters too ([`super::clock_inputs`]).
//! long-file: one request-to-tensors mapping shared by every family (inputs, parameters, outputs, provenance)
//! and its unit tests, which read best beside it.

use std::collections::BTreeMap;
use std::time::Duration;

use engines::budget::RequestSize;
use engines::engine::EngineInfo;
use engines::request::{ForecastRequest, ForecastResponse, RequestFields};
use serde::Serialize;

use super::clock_inputs::{self, ClockParams, StampsInput};
use super::error::ServeError;
use super::kserve::{InferRequest, InferResponse, OutputTensor, Param, TensorData};

/// The only model version served.
pub const VERSION: &str = "1";

/// The `platform` of the model metadata.
pub const PLATFORM: &str = "totoc";

fn bad(msg: impl Into<String>) -> ServeError {
    ServeError::BadRequest(msg.into())
}

/// What the model is and whether the readiness gate verified it, for the metadata.
#[derive(Debug, Clone)]
pub struct ModelSpec {
    pub name: String,
    pub info: EngineInfo,
    /// The engine's graph rates, measured at warm-up (empty before).
    pub rates: engines::cost::SharedRates,
}

/// One tensor of the metadata.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TensorMeta {
    pub name: &'static str,
    pub datatype: &'static str,
    /// -1: variable.
    pub shape: Vec<i64>,
}

/// The model metadata response (`GET /v2/models/{name}`); `parameters` is totoc's addition (engine, limits,
/// verification state, the graph rates measured at warm-up).
#[derive(Debug, Clone, Serialize)]
pub struct ModelMetadata {
    pub name: String,
    pub versions: Vec<String>,
    pub platform: &'static str,
    pub inputs: Vec<TensorMeta>,
    pub outputs: Vec<TensorMeta>,
    pub parameters: serde_json::Value,
}

impl ModelSpec {
    /// The point forecast's output name: `mean` (Toto 1.0) or `median` (Toto 2.0): the family's.
    pub fn point(&self) -> &'static str {
        self.info.model.point_forecast()
    }

    /// Whether the engine makes sample paths (engines of a sampling family with sampling profiles).
    pub fn samples(&self) -> bool {
        self.info.model.capabilities().samples && self.info.limits.max_samples > 0
    }

    /// The inputs the family takes, in [`input_names`] order.
    pub fn inputs(&self) -> Vec<TensorMeta> {
        input_names(self)
            .iter()
            .map(|&name| match name {
                "target" => TensorMeta { name, datatype: "FP32", shape: vec![-1, -1, -1] },
                "quantile_levels" => TensorMeta { name, datatype: "FP32", shape: vec![-1] },
                "lengths" => TensorMeta { name, datatype: "INT64", shape: vec![-1] },
                _ => TensorMeta { name, datatype: "INT64", shape: vec![-1, -1] },
            })
            .collect()
    }

    pub fn outputs(&self) -> Vec<TensorMeta> {
        let mut v = vec![
            TensorMeta { name: self.point(), datatype: "FP32", shape: vec![-1, -1, -1] },
            TensorMeta { name: "quantiles", datatype: "FP32", shape: vec![-1, -1, -1, -1] },
            TensorMeta { name: "quantile_levels", datatype: "FP32", shape: vec![-1] },
        ];
        if self.samples() {
            v.push(TensorMeta { name: "samples", datatype: "FP32", shape: vec![-1, -1, -1, -1] });
        }
        v
    }

    /// The metadata; `verification` says what the readiness gate found (`verified`, `unverified: ...`,
    /// `failed: ...`, `pending`).
    pub fn metadata(&self, verification: &str) -> ModelMetadata {
        let l = &self.info.limits;
        let caps = self.info.model.capabilities();
        let mut parameters = serde_json::json!({
            "model_family": self.info.model.as_str(),
            "engine": self.info.label,
            "max_variates": l.max_variates,
            "max_context": l.max_context,
            "max_horizon": l.max_horizon,
            "max_samples": l.max_samples,
            "verification": verification,
            "rates": self.rates.get(),
        });
        if let Some(cols) = caps.columns {
            // the order of `target`'s rows, and the parameters beyond every family's
            let names: Vec<&str> = cols.iter().map(|c| c.name).collect();
            let required = cols.iter().filter(|c| c.derived_when_absent.is_none()).count();
            parameters["columns"] = serde_json::json!(names);
            parameters["required_columns"] = serde_json::json!(required);
        }
        let extra = clock_inputs::parameter_names(caps);
        if !extra.is_empty() {
            parameters["request_parameters"] = serde_json::json!(extra);
        }
        ModelMetadata {
            name: self.name.clone(),
            versions: vec![VERSION.to_string()],
            platform: PLATFORM,
            inputs: self.inputs(),
            outputs: self.outputs(),
            parameters,
        }
    }
}

/// Which outputs go back and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Output {
    Point,
    Quantiles,
    QuantileLevels,
    Samples,
}

/// A decoded inference request ready for the engine, and how to shape its answer.
#[derive(Debug)]
pub struct Plan {
    /// One per series, in order.
    pub requests: Vec<ForecastRequest>,
    /// The client's deadline (`timeout` parameter, µs).
    pub timeout: Option<Duration>,
    id: Option<String>,
    /// `target` was `[N, V, T]` (outputs keep the N axis) rather than `[V, T]`.
    batched: bool,
    outputs: Vec<(Output, bool)>,
    levels: Vec<f64>,
    point: &'static str,
}

impl Plan {
    /// Whether any output goes back as JSON `data` (REST without the binary extension for it).
    pub fn json_outputs(&self) -> bool {
        self.outputs.iter().any(|&(_, binary)| !binary)
    }
}

/// A non-negative integer parameter (a JSON/gRPC integer, an integral float, or a decimal string).
fn uint_param(key: &str, p: &Param) -> Result<u64, ServeError> {
    let v = match p {
        Param::Int(i) => u64::try_from(*i).ok(),
        Param::Float(x) if x.fract() == 0.0 && *x >= 0.0 && *x < 1.8e19 => Some(*x as u64),
        Param::Str(s) => s.trim().parse().ok(),
        _ => None,
    };
    v.ok_or_else(|| bad(format!("parameter `{key}` is {p}; it must be an integer >= 0")))
}

fn bool_param(key: &str, p: &Param) -> Result<bool, ServeError> {
    match p {
        Param::Bool(b) => Ok(*b),
        Param::Str(s) if s == "true" || s == "false" => Ok(s == "true"),
        _ => Err(bad(format!("parameter `{key}` is {p}; it must be true or false"))),
    }
}

/// A quantile level sent as FP32, read as the decimal the client wrote: `0.1f32` is 0.100000001490116…, and
/// `0.1` is what the client meant (and what the same request gives the CLI); the shortest decimal that
/// round-trips the f32 recovers it.
fn level_from_f32(x: f32) -> f64 {
    x.to_string().parse().unwrap_or(f64::from(x))
}

/// The inputs of `spec`'s family: a family with named columns has no `id_mask` (its columns are one series),
/// a family that reads wall clocks takes `timestamps` and `future_timestamps`.
fn input_names(spec: &ModelSpec) -> Vec<&'static str> {
    let caps = spec.info.model.capabilities();
    let mut names = vec!["target"];
    if caps.columns.is_none() {
        names.push("id_mask");
    }
    names.push("lengths");
    if caps.reads_timestamps {
        names.extend(["timestamps", "future_timestamps"]);
    }
    names.push("quantile_levels");
    names
}

fn series_label(batched: bool, i: usize) -> String {
    if batched {
        format!("input `target` series {i}")
    } else {
        "input `target`".to_string()
    }
}

/// [`plan_checked`] with no size check (tests).
#[cfg(test)]
pub fn plan(spec: &ModelSpec, req: InferRequest) -> Result<Plan, ServeError> {
    plan_checked(spec, req, &|_| Ok(()))
}

/// Turns a decoded request into forecast requests (validated like JSON requests), checking every input's
/// name, datatype and shape. `check` sees the request's counts ([`RequestSize`]) before any series is built
/// (the server checks them against the engine's limits and its request budget).
pub fn plan_checked(
    spec: &ModelSpec,
    req: InferRequest,
    check: &dyn Fn(RequestSize) -> Result<(), ServeError>,
) -> Result<Plan, ServeError> {
    let InferRequest { id, parameters, inputs, outputs, binary_data_output } = req;
    // Parameters.
    let caps = spec.info.model.capabilities();
    let inputs_list = input_names(spec).join(", ");
    let (mut horizon, mut samples, mut seed, mut strict_context, mut timeout) =
        (None, None, None, None, None);
    let mut clock = ClockParams::default();
    for (key, p) in &parameters {
        match key.as_str() {
            "horizon" => horizon = Some(uint_param(key, p)? as usize),
            "samples" => samples = Some(uint_param(key, p)? as usize),
            "seed" => seed = Some(uint_param(key, p)?),
            "strict_context" => strict_context = Some(bool_param(key, p)?),
            "timeout" => timeout = Some(Duration::from_micros(uint_param(key, p)?)),
            other if clock.take(caps, other, p)? => {}
            other => {
                let extra: String =
                    clock_inputs::parameter_names(caps).iter().map(|n| format!("{n}, ")).collect();
                return Err(bad(format!(
                    "unknown parameter `{}`; this model takes horizon, samples, seed, strict_context, {extra}and \
                     timeout (µs)",
                    super::error::clip(other)
                )));
            }
        }
    }
    if horizon.is_none() {
        return Err(bad("parameter `horizon` is missing; add \"parameters\": {\"horizon\": N}"));
    }
    if samples.unwrap_or(0) > 0 && !spec.samples() {
        return Err(bad(format!(
            "parameter `samples`: this engine makes no sample paths ({}, max_samples {})",
            spec.info.model.as_str(),
            spec.info.limits.max_samples
        )));
    }

    // Inputs.
    let mut target = None;
    let mut id_mask = None;
    let mut lengths = None;
    let mut levels = None;
    let (mut stamps, mut future) = (None, None);
    for t in inputs {
        let taken = input_names(spec).contains(&t.name.as_str());
        let slot = match t.name.as_str() {
            "target" => &mut target,
            "id_mask" if taken => &mut id_mask,
            "lengths" => &mut lengths,
            "timestamps" if taken => &mut stamps,
            "future_timestamps" if taken => &mut future,
            "quantile_levels" => &mut levels,
            other => {
                return Err(bad(format!(
                    "unknown input `{}`; this model takes {inputs_list}",
                    super::error::clip(other)
                )))
            }
        };
        if slot.is_some() {
            return Err(bad(format!("input `{}` is given twice", t.name)));
        }
        *slot = Some(t);
    }
    let target =
        target.ok_or_else(|| bad(format!("input `target` is missing; this model takes {inputs_list}")))?;
    let TensorData::Fp32(values) = target.data else {
        return Err(bad(format!("input `target` is {}; it must be FP32", target.data.datatype())));
    };
    let (n, v, t, batched) = match target.shape[..] {
        [v, t] => (1, v, t, false),
        [n, v, t] => (n, v, t, true),
        _ => {
            return Err(bad(format!(
                "input `target` has shape {:?}; it must be [V, T] (one series) or [N, V, T]",
                target.shape
            )))
        }
    };
    if n == 0 || v == 0 || t == 0 {
        return Err(bad(format!(
            "input `target` has shape {:?}; every dimension must be >= 1",
            target.shape
        )));
    }
    if n.checked_mul(v).and_then(|nv| nv.checked_mul(t)) != Some(values.len()) {
        return Err(bad(format!(
            "input `target` has shape {:?} but {} elements",
            target.shape,
            values.len()
        )));
    }
    clock_inputs::check_columns(caps, v)?;
    // The counts, before anything per series is built.
    let samples_n = samples.unwrap_or(0);
    // No levels asked: a quantile model answers with its knots, a sampling one (with samples) with the defaults.
    let quantile_count = match (&levels, spec.info.model.capabilities().quantile_knots) {
        (Some(x), _) => x.data.count(),
        (None, Some(knots)) => knots.len(),
        (None, None) if samples_n > 0 => engines::request::DEFAULT_QUANTILES.len(),
        (None, None) => 0,
    };
    check(RequestSize {
        series: n,
        variates: v,
        context: t,
        horizon: horizon.unwrap_or(0),
        samples: samples_n,
        quantiles: quantile_count,
        max_context: None,
    })?;
    if let Some((i, x)) = values.iter().enumerate().find(|(_, x)| x.is_infinite()) {
        return Err(bad(format!(
            "input `target`: element {i} is {x}, not finite; send finite values (NaN or null for a missing point)"
        )));
    }
    let int_input = |tensor: Option<super::kserve::InputTensor>, name: &str| -> Result<_, ServeError> {
        match tensor {
            None => Ok(None),
            Some(x) => match x.data {
                TensorData::Int64(d) => Ok(Some((x.shape, d))),
                other => Err(bad(format!("input `{name}` is {}; it must be INT64", other.datatype()))),
            },
        }
    };
    let id_mask = match int_input(id_mask, "id_mask")? {
        None => None,
        Some((shape, d)) => {
            let ok = shape == [v] || (batched && shape == [n, v]);
            if !ok {
                let want = if batched { format!("[{v}] or [{n}, {v}]") } else { format!("[{v}]") };
                return Err(bad(format!(
                    "input `id_mask` has shape {shape:?}; for this target it must be {want}"
                )));
            }
            Some(d)
        }
    };
    let lengths = match int_input(lengths, "lengths")? {
        None => None,
        Some((shape, d)) => {
            if shape != [n] {
                return Err(bad(format!(
                    "input `lengths` has shape {shape:?}; it must be [{n}], one length per series of `target`"
                )));
            }
            if let Some((i, &l)) = d.iter().enumerate().find(|(_, &l)| l < 1 || l as u64 > t as u64) {
                return Err(bad(format!(
                    "input `lengths`: series {i} has length {l}; each length must be in 1..={t} (the time axis \
                     of `target`)"
                )));
            }
            Some(d)
        }
    };
    let quantiles = match levels {
        None => None,
        Some(x) => {
            let TensorData::Fp32(d) = x.data else {
                return Err(bad(format!(
                    "input `quantile_levels` is {}; it must be FP32",
                    x.data.datatype()
                )));
            };
            if x.shape.len() != 1 {
                return Err(bad(format!("input `quantile_levels` has shape {:?}; it must be [Q]", x.shape)));
            }
            Some(d.into_iter().map(level_from_f32).collect::<Vec<f64>>())
        }
    };

    let stamps = match stamps {
        Some(x) => Some(StampsInput::new("timestamps", x, n, batched, t, "point of `target` (axis 2)")?),
        None if caps.reads_timestamps => {
            return Err(bad(format!(
            "input `timestamps` is missing; {} reads every point's wall clock: send INT64 [N, T] seconds, \
                 one per point of `target` (wall-clock seconds: the stamp as written, read as if UTC; or UTC \
                 seconds with the `timezone` parameter)",
            caps.title
        )))
        }
        None => None,
    };
    let h = horizon.unwrap_or(0);
    let future = match future {
        Some(x) => {
            Some(StampsInput::new("future_timestamps", x, n, batched, h, "forecast step (`horizon`)")?)
        }
        None => None,
    };
    let zone = clock.timezone.as_ref();

    // One validated request per series.
    let limits = spec.info.request_limits();
    let mut requests = Vec::with_capacity(n);
    for s in 0..n {
        let len = lengths.as_ref().map_or(t, |l| l[s] as usize);
        let series: Vec<Vec<Option<f32>>> = (0..v)
            .map(|var| {
                let row = &values[(s * v + var) * t..(s * v + var + 1) * t];
                row[t - len..].iter().map(|&x| (!x.is_nan()).then_some(x)).collect()
            })
            .collect();
        let ids =
            id_mask.as_ref().map(|d| if d.len() == v { d.clone() } else { d[s * v..(s + 1) * v].to_vec() });
        let at = series_label(batched, s);
        let timestamps = stamps.as_ref().map(|x| x.clocks(s, len, zone, &at)).transpose()?;
        let future_timestamps = match (&future, &stamps) {
            (Some(x), _) => Some(x.clocks(s, h, zone, &at)?),
            // absent: the series' calendar continues it, as `POST /v1/forecast` continues it
            (None, Some(x)) => Some(x.continued(s, len, h, zone, &limits, &at)?),
            (None, None) => None,
        };
        let fields = RequestFields {
            id: None,
            target: series.into(),
            id_mask: ids,
            horizon,
            samples,
            quantiles: quantiles.clone(),
            seed,
            strict_context,
            timestamps,
            future_timestamps,
            temperature: clock.temperature,
            top_k: clock.top_k,
            top_p: clock.top_p,
            params: (!clock.params.is_empty()).then(|| clock.params.clone()),
            ..RequestFields::default()
        };
        requests.push(ForecastRequest::from_fields(fields, &at, &limits)?);
    }
    // No levels asked: a quantile model answers with its knots (the engine's default), so they are its levels.
    let levels = match (requests[0].quantiles.is_empty(), spec.info.model.capabilities().quantile_knots) {
        (true, Some(knots)) => knots.to_vec(),
        _ => requests[0].quantiles.clone(),
    };

    // Outputs.
    let produced = |o: Output| match o {
        Output::Point => true,
        Output::Quantiles | Output::QuantileLevels => !levels.is_empty(),
        Output::Samples => requests[0].samples > 0,
    };
    // An empty list asks for every output, as gRPC's empty `outputs` does (Triton treats both alike).
    let outputs = match outputs.filter(|asked| !asked.is_empty()) {
        None => [Output::Point, Output::Quantiles, Output::QuantileLevels, Output::Samples]
            .into_iter()
            .filter(|&o| produced(o))
            .map(|o| (o, binary_data_output))
            .collect(),
        Some(asked) => {
            let mut v = Vec::with_capacity(asked.len());
            for o in asked {
                let kind = match o.name.as_str() {
                    name if name == spec.point() => Output::Point,
                    "quantiles" => Output::Quantiles,
                    "quantile_levels" => Output::QuantileLevels,
                    "samples" if spec.samples() => Output::Samples,
                    other => {
                        let names: Vec<&str> = spec.outputs().iter().map(|m| m.name).collect();
                        return Err(bad(format!(
                            "unknown output `{}`; this model has {}",
                            super::error::clip(other),
                            names.join(", ")
                        )));
                    }
                };
                if !produced(kind) {
                    let why = if kind == Output::Samples {
                        "set parameter `samples` > 0"
                    } else {
                        "send `quantile_levels` or sample paths (the default levels come with samples)"
                    };
                    return Err(bad(format!("output `{}` is empty for this request; {why}", o.name)));
                }
                if v.iter().any(|&(k, _)| k == kind) {
                    return Err(bad(format!(
                        "output `{}` is asked for twice; name each output once",
                        o.name
                    )));
                }
                v.push((kind, o.binary.unwrap_or(binary_data_output)));
            }
            v
        }
    };
    Ok(Plan { requests, timeout, id, batched, outputs, levels, point: spec.point() })
}

impl Plan {
    /// How errors name series `i`: `input `target` series 3`, or `input `target`` for a `[V, T]` target.
    pub fn label(&self, i: usize) -> String {
        series_label(self.batched, i)
    }

    /// The response tensors for the engine's responses (one per series, in order).
    pub fn respond(&self, model_name: &str, responses: &[ForecastResponse]) -> InferResponse {
        let (v, h) = match responses.first() {
            Some(r) => (r.point().len(), r.point().first().map_or(0, Vec::len)),
            None => (0, 0),
        };
        let n = responses.len();
        let lead = |rest: &[usize]| -> Vec<usize> {
            let mut s = if self.batched { vec![n] } else { Vec::new() };
            s.extend_from_slice(rest);
            s
        };
        let mut outputs = Vec::with_capacity(self.outputs.len());
        for &(kind, binary) in &self.outputs {
            let (name, shape, data): (&str, Vec<usize>, Vec<f32>) = match kind {
                Output::Point => {
                    (self.point, lead(&[v, h]), responses.iter().flat_map(|r| r.point().concat()).collect())
                }
                Output::Quantiles => (
                    "quantiles",
                    lead(&[self.levels.len(), v, h]),
                    responses
                        .iter()
                        .flat_map(|r| r.quantiles.iter().flat_map(|q| q.values.concat()))
                        .collect(),
                ),
                Output::QuantileLevels => (
                    "quantile_levels",
                    vec![self.levels.len()],
                    self.levels.iter().map(|&q| q as f32).collect(),
                ),
                Output::Samples => {
                    let s = responses.first().and_then(|r| r.samples.as_ref()).map_or(0, Vec::len);
                    let data = responses
                        .iter()
                        .flat_map(|r| r.samples.iter().flatten().flat_map(|path| path.concat()))
                        .collect();
                    ("samples", lead(&[s, v, h]), data)
                }
            };
            outputs.push(OutputTensor { name: name.to_string(), shape, data, binary });
        }
        let mut parameters = BTreeMap::new();
        let cut: Vec<_> = responses.iter().filter_map(|r| r.context_truncated).collect();
        if let Some(c) = cut.first() {
            // The engine keeps the same number of points for every cut series: its context limit.
            parameters.insert("context_truncated_series".to_string(), Param::Int(cut.len() as i64));
            parameters.insert("context_used".to_string(), Param::Int(c.used as i64));
        }
        if let Some(r) = responses.first() {
            parameters.insert("engine".to_string(), Param::Str(r.engine.clone()));
            provenance_parameters(r, &mut parameters);
        }
        InferResponse {
            model_name: model_name.to_string(),
            model_version: VERSION.to_string(),
            id: self.id.clone(),
            parameters,
            outputs,
        }
    }
}

/// A response's provenance as response parameters (the protocol's parameters are scalars): `engine_sha256`,
/// and for a family with sampling controls the sampler settings used, under the request parameters' names
/// (`samples`, `seed`, `temperature`, `top_k`, `top_p`, and each family parameter: `max_context`, `clip`). One
/// request's series share their parameters, so the first series' settings are every series'.
fn provenance_parameters(r: &ForecastResponse, parameters: &mut BTreeMap<String, Param>) {
    if let Some(sha) = &r.engine_sha256 {
        parameters.insert("engine_sha256".to_string(), Param::Str(sha.clone()));
    }
    let Some(s) = &r.sampler else { return };
    let int = |x: u64| Param::Int(i64::try_from(x).unwrap_or(i64::MAX));
    parameters.insert("samples".to_string(), int(s.samples as u64));
    parameters.insert("seed".to_string(), int(s.seed));
    parameters.insert("temperature".to_string(), Param::Float(s.temperature));
    parameters.insert("top_k".to_string(), int(s.top_k));
    parameters.insert("top_p".to_string(), Param::Float(s.top_p));
    for (name, &x) in &s.params {
        let whole = x.fract() == 0.0 && x.abs() < 9.0e15;
        parameters.insert(name.clone(), if whole { Param::Int(x as i64) } else { Param::Float(x) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::kserve::{InputTensor, RequestedOutput};
    use engines::engine::EngineLimits;
    use engines::request::QuantileForecast;
    use exporter::registry::Family;

    /// A family that draws sample paths (Toto 1.0 today).
    fn sampling_family() -> Family {
        Family::ALL.into_iter().find(|f| f.capabilities().samples).expect("a sampling family")
    }

    /// A family that predicts quantile knots and draws no paths (Toto 2.0 today).
    fn knots_family() -> Family {
        Family::ALL
            .into_iter()
            .find(|f| !f.capabilities().samples && f.capabilities().quantile_knots.is_some())
            .expect("a quantile family")
    }

    fn spec(model: Family) -> ModelSpec {
        ModelSpec {
            name: "toto".into(),
            info: EngineInfo {
                model,
                target: "cpu".into(),
                ort_version: "1.31.1".into(),
                label: "cpu (onnxruntime 1.31.1)".into(),
                limits: EngineLimits {
                    max_variates: 4,
                    max_context: 256,
                    max_horizon: 160,
                    max_samples: 256,
                },
                has_golden: true,
            },
            rates: Default::default(),
        }
    }

    fn target(shape: Vec<usize>, data: Vec<f32>) -> InputTensor {
        InputTensor { name: "target".into(), shape, data: TensorData::Fp32(data) }
    }

    fn ints(name: &str, shape: Vec<usize>, data: Vec<i64>) -> InputTensor {
        InputTensor { name: name.into(), shape, data: TensorData::Int64(data) }
    }

    fn req(inputs: Vec<InputTensor>, params: &[(&str, Param)]) -> InferRequest {
        InferRequest {
            inputs,
            parameters: params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
            ..InferRequest::default()
        }
    }

    #[test]
    fn ragged_batches_drop_each_series_left_padding() {
        let data = vec![
            9.0,
            9.0,
            1.0,
            2.0, // series 0, length 2
            1.0,
            f32::NAN,
            3.0,
            4.0, // series 1, length 4 (one missing point)
        ];
        let r = req(
            vec![target(vec![2, 1, 4], data), ints("lengths", vec![2], vec![2, 4])],
            &[("horizon", Param::Int(3)), ("seed", Param::Str("5".into()))],
        );
        let p = plan(&spec(sampling_family()), r).unwrap();
        assert_eq!(p.requests.len(), 2);
        assert_eq!(p.requests[0].target, vec![vec![Some(1.0), Some(2.0)]]);
        assert_eq!(p.requests[1].target, vec![vec![Some(1.0), None, Some(3.0), Some(4.0)]]);
        assert_eq!((p.requests[1].horizon, p.requests[1].seed), (3, 5));
        assert!(p.batched);
    }

    #[test]
    fn outputs_have_the_documented_shapes() {
        let r = InferRequest {
            outputs: Some(vec![
                RequestedOutput { name: "mean".into(), binary: Some(true) },
                RequestedOutput { name: "quantiles".into(), binary: None },
                RequestedOutput { name: "quantile_levels".into(), binary: None },
                RequestedOutput { name: "samples".into(), binary: None },
            ]),
            ..req(
                vec![
                    target(vec![1, 2, 3], vec![1.0; 6]),
                    InputTensor {
                        name: "quantile_levels".into(),
                        shape: vec![1],
                        data: TensorData::Fp32(vec![0.1]),
                    },
                ],
                &[("horizon", Param::Int(2)), ("samples", Param::Int(2))],
            )
        };
        let p = plan(&spec(sampling_family()), r).unwrap();
        assert_eq!(p.requests[0].quantiles, vec![0.1], "f32 0.1 is read as the decimal 0.1");
        let vh = vec![vec![1.0f32, 2.0], vec![3.0, 4.0]];
        let resp = ForecastResponse {
            id: None,
            mean: Some(vh.clone()),
            median: None,
            quantiles: vec![QuantileForecast { q: 0.1, values: vh.clone() }],
            samples: Some(vec![vh.clone(), vh.clone()]),
            context_truncated: None,
            buckets: Vec::new(),
            profile: "p".into(),
            engine: "cpu".into(),
            sampler: None,
            engine_sha256: None,
        };
        let out = p.respond("toto", &[resp]);
        let shapes: Vec<_> =
            out.outputs.iter().map(|o| (o.name.as_str(), o.shape.clone(), o.binary)).collect();
        assert_eq!(
            shapes,
            vec![
                ("mean", vec![1, 2, 2], true),
                ("quantiles", vec![1, 1, 2, 2], false),
                ("quantile_levels", vec![1], false),
                ("samples", vec![1, 2, 2, 2], false)
            ]
        );
        assert_eq!(out.outputs[0].data, vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(out.outputs[2].data, vec![0.1f32]);
    }

    #[test]
    fn default_outputs_follow_what_the_request_produces() {
        let p = plan(
            &spec(sampling_family()),
            req(vec![target(vec![1, 3], vec![1.0; 3])], &[("horizon", Param::Int(2))]),
        )
        .unwrap();
        assert_eq!(p.outputs, vec![(Output::Point, false)]);
        let mut r = req(
            vec![target(vec![1, 3], vec![1.0; 3])],
            &[("horizon", Param::Int(2)), ("samples", Param::Int(4))],
        );
        r.binary_data_output = true;
        let p = plan(&spec(sampling_family()), r).unwrap();
        assert_eq!(
            p.outputs,
            vec![
                (Output::Point, true),
                (Output::Quantiles, true),
                (Output::QuantileLevels, true),
                (Output::Samples, true)
            ]
        );
        assert_eq!(p.levels, vec![0.1, 0.5, 0.9]);
    }

    #[test]
    fn quantile_models_answer_with_their_knots_by_default() {
        let s = spec(knots_family());
        let p = plan(&s, req(vec![target(vec![1, 3], vec![1.0; 3])], &[("horizon", Param::Int(2))])).unwrap();
        assert_eq!(
            p.outputs,
            vec![(Output::Point, false), (Output::Quantiles, false), (Output::QuantileLevels, false)]
        );
        let knots = s.info.model.capabilities().quantile_knots.unwrap();
        assert_eq!(p.levels, knots.to_vec());
        // Asking for them by name works too (the hint about samples is a sampling model's).
        let mut r = req(vec![target(vec![1, 3], vec![1.0; 3])], &[("horizon", Param::Int(2))]);
        r.outputs = Some(vec![RequestedOutput { name: "quantile_levels".into(), binary: None }]);
        assert_eq!(plan(&s, r).unwrap().outputs, vec![(Output::QuantileLevels, false)]);
    }

    #[test]
    fn toto2_engines_answer_with_the_median_and_no_samples() {
        let s = spec(knots_family());
        assert_eq!(s.point(), "median");
        assert!(s.outputs().iter().all(|o| o.name != "samples" && o.name != "mean"));
        let e = plan(
            &s,
            req(
                vec![target(vec![1, 3], vec![1.0; 3])],
                &[("horizon", Param::Int(2)), ("samples", Param::Int(4))],
            ),
        )
        .unwrap_err();
        assert!(e.to_string().contains("makes no sample paths"), "{e}");
    }

    #[test]
    fn bad_inputs_name_the_problem() {
        let h = [("horizon", Param::Int(2))];
        let cases: Vec<(InferRequest, &str)> = vec![
            (req(vec![target(vec![1, 3], vec![1.0; 3])], &[]), "`horizon` is missing"),
            (req(vec![target(vec![3], vec![1.0; 3])], &h), "must be [V, T]"),
            (req(vec![target(vec![1, 0], vec![])], &h), "every dimension must be >= 1"),
            (req(vec![target(vec![1, 2], vec![f32::NAN; 2])], &h), "variate 0 has no observed point"),
            (req(vec![target(vec![1, 2], vec![1.0, f32::INFINITY])], &h), "element 1 is inf, not finite"),
            (req(vec![target(vec![1, 2], vec![1.0])], &h), "but 1 elements"),
            (req(vec![ints("target", vec![1, 1], vec![1])], &h), "input `target` is INT64; it must be FP32"),
            (req(vec![target(vec![1, 1], vec![1.0]), ints("x", vec![1], vec![1])], &h), "unknown input `x`"),
            (
                req(
                    vec![target(vec![1, 1], vec![1.0])],
                    &[("horizon", Param::Int(2)), ("hor", Param::Int(1))],
                ),
                "unknown parameter `hor`",
            ),
            (req(vec![target(vec![1, 1], vec![1.0])], &[("horizon", Param::Int(-2))]), "integer >= 0"),
            (
                req(
                    vec![target(vec![1, 1], vec![1.0])],
                    &[("horizon", Param::Int(2)), ("strict_context", Param::Int(1))],
                ),
                "true or false",
            ),
            (
                req(vec![target(vec![2, 1, 1], vec![1.0; 2]), ints("lengths", vec![2], vec![1, 2])], &h),
                "series 1 has length 2",
            ),
            (
                req(vec![target(vec![2, 1, 1], vec![1.0; 2]), ints("lengths", vec![1], vec![1])], &h),
                "must be [2]",
            ),
            (
                req(vec![target(vec![1, 2, 1], vec![1.0; 2]), ints("id_mask", vec![3], vec![0; 3])], &h),
                "must be [2]",
            ),
            (
                req(vec![target(vec![1, 2, 1], vec![1.0; 2]), ints("id_mask", vec![2], vec![0, -1])], &h),
                "negative",
            ),
        ];
        for (r, want) in cases {
            let msg = plan(&spec(sampling_family()), r).unwrap_err().to_string();
            assert!(msg.contains(want), "gave: {msg}\nwant: {want}");
        }
        let r = InferRequest {
            outputs: Some(vec![RequestedOutput { name: "samples".into(), binary: None }]),
            ..req(vec![target(vec![1, 1], vec![1.0])], &h)
        };
        assert!(plan(&spec(sampling_family()), r)
            .unwrap_err()
            .to_string()
            .contains("set parameter `samples`"));
    }
}
