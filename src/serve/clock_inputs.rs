//! The Open Inference Protocol inputs and parameters of a family whose requests name their columns and read each
//! point's wall clock (its `Capabilities`: `columns`, `reads_timestamps`, `sampling_controls`, `params`), beside
//! the tensors every family takes ([`super::model`]):
//!
//! * `target` FP32 `[N, C, T]` (or `[C, T]`): C rows in the family's column order (the model metadata lists it),
//!   at least its required columns; checked here ([`check_columns`]) so the error names the input;
//! * `timestamps` INT64 `[N, T]` (or `[T]`) and optional `future_timestamps` INT64 `[N, H]` (or `[H]`): seconds,
//!   read as **wall-clock** seconds (the stamp as written, read as if UTC: what pandas gives tz-naive stamps), or
//!   as UTC instants shown on the clock of the request parameter `timezone` (an IANA name). A series' padding
//!   (`lengths`) is left out of its stamps as of its values. Without `future_timestamps` the series' calendar,
//!   inferred from its stamps as `POST /v1/forecast` infers it, continues it ([`StampsInput::continued`]);
//! * parameters `temperature`, `top_k`, `top_p`, `timezone` and the family's own (`params`, by name).
//!
//! Each series' stamps become the request fields `timestamps` / `future_timestamps` as resolved wall clocks, so
//! a series is validated (order, count, bounds) exactly as the same JSON request to `POST /v1/forecast`.

use std::collections::BTreeMap;

use engines::host::wall_clock::WallClock;
use engines::request::{Limits, Overrides, TimeValue};
use exporter::registry::family::Capabilities;
use jiff::tz::TimeZone;
use jiff::Timestamp;
use tables::as_given;
use tables::calendar::CalendarOptions;
use tables::error::Loc;
use tables::series::{Context, RawSeries};
use tables::timestamps::{EpochUnit, Stamp, StampStyle};

use super::error::ServeError;
use super::kserve::{InputTensor, Param, TensorData};

fn bad(msg: impl Into<String>) -> ServeError {
    ServeError::BadRequest(msg.into())
}

/// The parameters of such a family a request gave (each checked for its type here; values by the request's
/// validation and the family).
#[derive(Debug, Default)]
pub struct ClockParams {
    pub temperature: Option<f64>,
    pub top_k: Option<i64>,
    pub top_p: Option<f64>,
    /// Family parameters by name.
    pub params: BTreeMap<String, f64>,
    /// `timezone`: the stamps are UTC seconds shown on this zone's clock.
    pub timezone: Option<TimeZone>,
}

/// A number parameter (JSON/gRPC number or a decimal string).
fn number(key: &str, p: &Param) -> Result<f64, ServeError> {
    let x = match p {
        Param::Int(i) => Some(*i as f64),
        Param::Float(x) => Some(*x),
        Param::Str(s) => s.trim().parse().ok(),
        Param::Bool(_) => None,
    };
    x.filter(|x: &f64| x.is_finite())
        .ok_or_else(|| bad(format!("parameter `{key}` is {p}; it must be a number")))
}

impl ClockParams {
    /// Takes parameter `key` when `caps`' family takes it (`Ok(false)`: not one of these).
    pub fn take(&mut self, caps: &Capabilities, key: &str, p: &Param) -> Result<bool, ServeError> {
        match key {
            "temperature" if caps.sampling_controls => self.temperature = Some(number(key, p)?),
            "top_p" if caps.sampling_controls => self.top_p = Some(number(key, p)?),
            "top_k" if caps.sampling_controls => {
                let k = number(key, p)?;
                if k.fract() != 0.0 || k.abs() > 9.0e15 {
                    return Err(bad(format!("parameter `top_k` is {p}; it must be a whole number ≥ 0")));
                }
                self.top_k = Some(k as i64);
            }
            "timezone" if caps.reads_timestamps => {
                let Param::Str(name) = p else {
                    return Err(bad(format!(
                        "parameter `timezone` is {p}; give an IANA time zone name such as America/New_York"
                    )));
                };
                let zone = tables::calendar::parse_zone(name).map_err(|e| {
                    bad(format!("parameter `timezone`: {e} (the stamps are then UTC seconds)"))
                })?;
                self.timezone = Some(zone);
            }
            name if caps.params.contains(&name) => {
                self.params.insert(name.to_string(), number(key, p)?);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// The request parameters `caps`' family takes beyond every family's, for messages and the metadata.
pub fn parameter_names(caps: &Capabilities) -> Vec<&'static str> {
    let mut names = Vec::new();
    if caps.sampling_controls {
        names.extend(["temperature", "top_k", "top_p"]);
    }
    names.extend(caps.params.iter().copied());
    if caps.reads_timestamps {
        names.push("timezone");
    }
    names
}

/// `target`'s C rows against the family's columns: at least the required ones (the first of its order), at most
/// all of them.
pub fn check_columns(caps: &Capabilities, c: usize) -> Result<(), ServeError> {
    let Some(cols) = caps.columns else { return Ok(()) };
    let required = cols.iter().filter(|c| c.derived_when_absent.is_none()).count();
    if (required..=cols.len()).contains(&c) {
        return Ok(());
    }
    let names: Vec<&str> = cols.iter().map(|c| c.name).collect();
    let required_names = names[..required].join(", ");
    let what = match c < required {
        true => format!("misses the `{}` column", names[c]),
        false => format!("has more rows than the {} columns {} reads", cols.len(), caps.title),
    };
    Err(bad(format!(
        "input `target` has {c} columns (axis 1) and {what}; send {required} to {} rows in the model's column \
         order, {} (the first {required}, {required_names}, are required)",
        cols.len(),
        names.join(", ")
    )))
}

/// A stamps input (`timestamps` or `future_timestamps`) of a request of `n` series: INT64 `[n, len]`, or `[len]`
/// for a `[C, T]` target.
pub struct StampsInput {
    name: &'static str,
    data: Vec<i64>,
    len: usize,
}

impl StampsInput {
    /// Checks `tensor`'s datatype and shape: `len` stamps per series (`want` says what they count).
    pub fn new(
        name: &'static str,
        tensor: InputTensor,
        n: usize,
        batched: bool,
        len: usize,
        want: &str,
    ) -> Result<Self, ServeError> {
        let TensorData::Int64(data) = tensor.data else {
            return Err(bad(format!(
                "input `{name}` is {}; it must be INT64 seconds (wall-clock seconds, or UTC seconds with the \
                 `timezone` parameter)",
                tensor.data.datatype()
            )));
        };
        let ok = tensor.shape == [n, len] || (!batched && tensor.shape == [len]);
        if !ok {
            let shape = if batched { format!("[{n}, {len}]") } else { format!("[{len}] or [1, {len}]") };
            return Err(bad(format!(
                "input `{name}` has shape {:?}; it must be {shape}: one stamp per {want}",
                tensor.shape
            )));
        }
        Ok(StampsInput { name, data, len })
    }

    /// Series `s`'s last `keep` stamps (seconds), after `check` bounded `keep` by the row.
    fn row(&self, s: usize, keep: usize) -> &[i64] {
        &self.data[(s + 1) * self.len - keep..(s + 1) * self.len]
    }

    /// The `horizon` forecast steps that continue series `s`'s last `keep` stamps on its calendar (inferred as
    /// `POST /v1/forecast` infers it from the same stamps: its session or its regular step; `zone`: the slots
    /// are read on that zone's clock), as wall clocks: what a request without `future_timestamps` gets.
    pub fn continued(
        &self,
        s: usize,
        keep: usize,
        horizon: usize,
        zone: Option<&TimeZone>,
        limits: &Limits,
        at: &str,
    ) -> Result<Vec<TimeValue>, ServeError> {
        let stamps = self
            .row(s, keep)
            .iter()
            .map(|&x| {
                let t = Timestamp::from_second(x).map_err(|_| {
                    bad(format!("{at}: input `timestamps`: {x} seconds is outside the years jiff represents"))
                })?;
                Ok(match zone {
                    Some(z) => Stamp { at: t, offset: z.to_offset(t), style: StampStyle::Offset },
                    None => Stamp::civil(t, StampStyle::Epoch(EpochUnit::Seconds)),
                })
            })
            .collect::<Result<Vec<Stamp>, ServeError>>()?;
        // only the stamps matter here; the values are checked with the request
        let names = ["stamps".to_string()];
        let calendar = CalendarOptions { zone: zone.cloned(), ..CalendarOptions::default() };
        let cx = Context {
            source: at,
            target_names: &names,
            freq: None,
            calendar: &calendar,
            overrides: &Overrides::default(),
            limits,
        };
        let raw = RawSeries {
            id: None,
            locs: (0..keep).map(Loc::Index).collect(),
            stamps,
            values: vec![0.0; keep],
        };
        let fail = |e: tables::error::DataError| {
            bad(format!("{e}; or send the steps' stamps as input `future_timestamps` INT64 [N, H]"))
        };
        let given = as_given::rows(&raw, &cx, at, true, false).map_err(fail)?;
        let axis = given.axis.ok_or_else(|| bad(format!("{at}: input `timestamps` is empty")))?;
        Ok(as_given::continued(&axis, horizon, limits, at).map_err(fail)?.1)
    }

    /// Series `s`'s last `keep` stamps as wall clocks (`zone`: the stamps are UTC instants on its clock);
    /// `at` names the series.
    pub fn clocks(
        &self,
        s: usize,
        keep: usize,
        zone: Option<&TimeZone>,
        at: &str,
    ) -> Result<Vec<TimeValue>, ServeError> {
        let skip = self.len - keep;
        self.row(s, keep)
            .iter()
            .enumerate()
            .map(|(i, &x)| {
                wall_clock(x, zone).map(TimeValue::Clock).map_err(|e| {
                    bad(format!("{at}: input `{}` row {}: {x} seconds {e}", self.name, skip + i))
                })
            })
            .collect()
    }
}

/// The wall clock of `seconds`: as if UTC (no zone), or the UTC instant on `zone`'s clock.
fn wall_clock(seconds: i64, zone: Option<&TimeZone>) -> Result<WallClock, String> {
    let at =
        Timestamp::from_second(seconds).map_err(|_| "is outside the years jiff represents".to_string())?;
    let dt = match zone {
        Some(z) => z.to_datetime(at),
        None => TimeZone::UTC.to_datetime(at),
    };
    WallClock::new(
        i32::from(dt.year()),
        dt.month() as u32,
        dt.day() as u32,
        dt.hour() as u32,
        dt.minute() as u32,
        dt.second() as u32,
        0,
    )
    .map_err(|e| format!("is not a stamp this model reads ({e}); send seconds since 1970-01-01T00:00:00"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::kserve::InferRequest;
    use crate::serve::model::{plan, ModelSpec};
    use engines::engine::{EngineInfo, EngineLimits};
    use exporter::registry::Family;

    /// A family with named columns that reads wall clocks.
    fn clock_spec() -> ModelSpec {
        let model = Family::ALL
            .into_iter()
            .find(|f| f.capabilities().reads_timestamps && f.capabilities().columns.is_some())
            .expect("a family with named columns and wall clocks");
        ModelSpec {
            name: "m".into(),
            info: EngineInfo {
                model,
                target: "cpu".into(),
                ort_version: "1.31.1".into(),
                label: "cpu (onnxruntime 1.31.1)".into(),
                limits: EngineLimits { max_variates: 6, max_context: 160, max_horizon: 24, max_samples: 4 },
                has_golden: true,
            },
            rates: Default::default(),
        }
    }

    fn tensor(name: &str, shape: Vec<usize>, data: TensorData) -> InputTensor {
        InputTensor { name: name.into(), shape, data }
    }

    /// Two series of 4 columns, 3 points (the first padded by one), horizon 2, daily stamps from `t0`.
    fn request(t0: i64, params: &[(&str, Param)], extra: Vec<InputTensor>) -> InferRequest {
        let target: Vec<f32> = (0..2 * 4 * 3).map(|i| 10.0 + i as f32).collect();
        let day = 86_400;
        let stamps: Vec<i64> = (0..2).flat_map(|_| (0..3).map(move |i| t0 + i * day)).collect();
        let future: Vec<i64> = (0..2).flat_map(|_| (3..5).map(move |i| t0 + i * day)).collect();
        let mut inputs = vec![
            tensor("target", vec![2, 4, 3], TensorData::Fp32(target)),
            tensor("lengths", vec![2], TensorData::Int64(vec![2, 3])),
            tensor("timestamps", vec![2, 3], TensorData::Int64(stamps)),
            tensor("future_timestamps", vec![2, 2], TensorData::Int64(future)),
        ];
        inputs.extend(extra);
        let mut parameters: BTreeMap<String, Param> =
            params.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        parameters.insert("horizon".into(), Param::Int(2));
        InferRequest { inputs, parameters, ..InferRequest::default() }
    }

    #[test]
    fn the_metadata_lists_the_named_column_inputs_and_parameters() {
        let spec = clock_spec();
        let names: Vec<&str> = spec.inputs().iter().map(|i| i.name).collect();
        assert_eq!(names, ["target", "lengths", "timestamps", "future_timestamps", "quantile_levels"]);
        let p = spec.metadata("pending").parameters;
        assert_eq!(p["columns"], serde_json::json!(["open", "high", "low", "close", "volume", "amount"]));
        assert_eq!(p["required_columns"], 4);
        let want = ["temperature", "top_k", "top_p", "max_context", "clip", "timezone"];
        assert_eq!(p["request_parameters"], serde_json::json!(want));
    }

    #[test]
    fn series_get_their_stamps_as_wall_clocks_and_the_sampling_parameters() {
        let spec = clock_spec();
        // 2024-03-08T00:00:00 as wall-clock seconds
        let t0 = 1_709_856_000;
        let params = [
            ("samples", Param::Int(4)),
            ("temperature", Param::Float(0.7)),
            ("top_k", Param::Int(5)),
            ("top_p", Param::Str("0.8".into())),
            ("max_context", Param::Int(64)),
            ("clip", Param::Float(3.0)),
        ];
        let p = plan(&spec, request(t0, &params, vec![])).unwrap();
        let (a, b) = (&p.requests[0], &p.requests[1]);
        assert_eq!((a.context_len(), b.context_len()), (2, 3), "the padding is left out");
        assert_eq!(a.columns, ["open", "high", "low", "close"]);
        assert_eq!(a.target[0], [Some(11.0), Some(12.0)]);
        let text = |c: &[WallClock]| c.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(text(&a.timestamps), ["2024-03-09T00:00:00", "2024-03-10T00:00:00"]);
        assert_eq!(text(&b.future_timestamps), ["2024-03-11T00:00:00", "2024-03-12T00:00:00"]);
        let s = a.sampling;
        assert_eq!((s.temperature, s.top_k, s.top_p), (Some(0.7), Some(5), Some(0.8)));
        assert_eq!(a.params, BTreeMap::from([("clip".into(), 3.0), ("max_context".into(), 64.0)]));
        // without `future_timestamps`: the stamps' calendar (daily) continues each series
        let mut continued = request(t0, &[], vec![]);
        continued.inputs.remove(3);
        let p = plan(&spec, continued).unwrap();
        assert_eq!(text(&p.requests[0].future_timestamps), ["2024-03-11T00:00:00", "2024-03-12T00:00:00"]);
        // the same instants as UTC seconds on Tokyo's clock (UTC+9): nine hours later on the wall
        let zone = [("timezone", Param::Str("Asia/Tokyo".into()))];
        let p = plan(&spec, request(t0, &zone, vec![])).unwrap();
        assert_eq!(text(&p.requests[1].timestamps)[0], "2024-03-08T09:00:00");
    }

    #[test]
    fn bad_named_column_requests_name_the_problem_and_the_fix() {
        let spec = clock_spec();
        let t0 = 1_709_856_000;
        let err = |r: InferRequest| plan(&spec, r).unwrap_err().to_string();
        let mut three = request(t0, &[], vec![]);
        three.inputs[0] = tensor("target", vec![2, 3, 3], TensorData::Fp32(vec![1.0; 18]));
        let e = err(three);
        assert!(e.contains("has 3 columns (axis 1) and misses the `close` column"), "{e}");
        let mut short = request(t0, &[], vec![]);
        short.inputs[2] = tensor("timestamps", vec![2, 2], TensorData::Int64(vec![t0; 4]));
        let e = err(short);
        assert!(e.contains("input `timestamps` has shape [2, 2]; it must be [2, 3]"), "{e}");
        let mut none = request(t0, &[], vec![]);
        none.inputs.remove(2);
        assert!(err(none).contains("input `timestamps` is missing"));
        let ids = tensor("id_mask", vec![4], TensorData::Int64(vec![0; 4]));
        let e = err(request(t0, &[], vec![ids]));
        assert!(e.contains("unknown input `id_mask`; this model takes target, lengths, timestamps"), "{e}");
        let e = err(request(t0, &[("tz", Param::Str("UTC".into()))], vec![]));
        assert!(
            e.contains("unknown parameter `tz`") && e.contains("top_p, max_context, clip, timezone"),
            "{e}"
        );
        let e = err(request(t0, &[("timezone", Param::Str("Mars/Base".into()))], vec![]));
        assert!(e.contains("parameter `timezone`: `Mars/Base` is not a time zone"), "{e}");
        let mut nan = request(t0, &[], vec![]);
        nan.inputs[0] = tensor("target", vec![2, 4, 3], TensorData::Fp32([1.0, 2.0, f32::NAN].repeat(8)));
        let e = err(nan);
        assert!(e.contains("column `open`, row 1 is missing") && e.contains("no missing points"), "{e}");
        let e = err(request(t0, &[("temperature", Param::Float(0.5))], vec![]));
        assert!(e.contains("`temperature` given with `samples: 0`"), "{e}");
    }

    #[test]
    fn seconds_are_wall_clocks_or_utc_on_a_zone() {
        // 2024-03-08T14:30:00Z
        let x = 1_709_908_200;
        assert_eq!(wall_clock(x, None).unwrap().to_string(), "2024-03-08T14:30:00");
        let ny = TimeZone::get("America/New_York").unwrap();
        assert_eq!(wall_clock(x, Some(&ny)).unwrap().to_string(), "2024-03-08T09:30:00");
        // after the DST change (2024-03-10): UTC-4
        assert_eq!(wall_clock(x + 7 * 86_400, Some(&ny)).unwrap().to_string(), "2024-03-15T10:30:00");
        assert!(wall_clock(i64::MAX, None).unwrap_err().contains("outside the years"));
        assert!(wall_clock(-70_000_000_000, None).unwrap_err().contains("not a stamp this model reads"));
    }
}
