//! JSON requests (one per `.json` file, one per line of `.jsonl`), as `docs/formats.md` defines them, with the
//! optional `timestamps` of the request format 3: one ISO 8601 string or integer epoch per target point. A request
//! with timestamps is sorted and placed on its grid like a table series ([`super::series::place`]), so the same
//! series gives the same request from JSON or from a table. Everything else is checked by
//! `engines::request::RequestFields::validate`.

use engines::request::{json_error, Limits, Overrides, RequestFields};
use serde_json::Value;

use super::calendar::{self, CalendarMode, CalendarOptions, MAX_HOLIDAYS};
use super::error::{DataError, Loc, Result};
use super::series::{check_future, place, Context, RawSeries};
use super::timestamps::{epoch, parse_text, EpochUnit, Stamp, StampStyle};
use super::{ReadOptions, Series, TimeKind};

/// Reads the requests of a JSON document (`lines = false`) or of JSON Lines (blank lines skipped).
pub fn read(
    text: &str,
    lines: bool,
    source: &str,
    opts: &ReadOptions,
    overrides: &Overrides,
    limits: &Limits,
) -> Result<(Vec<Series>, TimeKind)> {
    let unit = opts.timestamp_unit;
    let mut series = Vec::new();
    let mut all_epochs = true;
    let docs: Vec<(String, &str)> = if lines {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (Loc::Line(i as u64 + 1).at(source), l))
            .collect()
    } else {
        vec![(source.to_string(), text)]
    };
    if docs.is_empty() {
        return Err(DataError::input(source, "there is no request in it", "write one JSON request per line"));
    }
    for (at, doc) in docs {
        let s = request(doc, &at, opts, overrides, limits)?;
        if let Some(t) = &s.time {
            all_epochs &= matches!(t.last.style, StampStyle::Epoch(_));
        }
        series.push(s);
    }
    let has_time = series.iter().any(|s| s.time.is_some());
    let kind = if has_time && all_epochs { TimeKind::Epoch(unit) } else { TimeKind::Text };
    Ok((series, kind))
}

fn request(
    text: &str,
    at: &str,
    opts: &ReadOptions,
    overrides: &Overrides,
    limits: &Limits,
) -> Result<Series> {
    let unit = opts.timestamp_unit;
    let mut value: Value = serde_json::from_str(text).map_err(|e| json_error(text, at, &e))?;
    let timestamps = value.as_object_mut().and_then(|o| o.remove("timestamps"));
    let calendar = request_calendar(&mut value, at, &opts.calendar)?;
    if timestamps.is_none() && calendar.is_some() {
        return Err(DataError::input(
            at,
            "`calendar`, `timezone` and `holidays` need `timestamps`",
            "give the request its `timestamps`, or leave those fields out",
        ));
    }
    let calendar = calendar.unwrap_or_else(|| opts.calendar.clone());
    let mut fields: RequestFields =
        serde_json::from_value(value).map_err(|e| DataError::at(at, e.to_string()))?;
    let variates = fields.target.rows();
    let target_names: Vec<String> = (0..variates).map(|v| v.to_string()).collect();
    let mut time = None;
    if let Some(timestamps) = timestamps {
        let len = if variates > 0 { fields.target.row_len(0) } else { 0 };
        // Ragged or empty targets are left to the request checks, which name the variate.
        if variates > 0 && len > 0 && (0..variates).all(|v| fields.target.row_len(v) == len) {
            let stamps = parse_stamps(&timestamps, len, at, unit)?;
            let (points, _) = std::mem::take(&mut fields.target).split(false);
            let raw = RawSeries {
                id: None,
                locs: (0..len).map(Loc::Index).collect(),
                stamps,
                values: (0..len).flat_map(|t| points.iter().map(move |s| s[t])).collect(),
            };
            let cx = Context {
                source: at,
                target_names: &target_names,
                freq: opts.freq,
                calendar: &calendar,
                overrides,
                limits,
            };
            let (target, axis) = place(&raw, &cx, at)?;
            fields.target = target.into();
            time = axis;
        }
    }
    let request = fields.validate(at, overrides, limits)?;
    check_future(time.as_ref(), request.horizon, at)?;
    Ok(Series { request, at: at.to_string(), target_names, time })
}

/// The request's own `calendar` (`"auto"`, `"continuous"`, `"weekdays"`), `timezone` (an IANA name) and
/// `holidays` (at most [`MAX_HOLIDAYS`] `YYYY-MM-DD` dates), over the reader's options; `None` when it gives none.
fn request_calendar(value: &mut Value, at: &str, base: &CalendarOptions) -> Result<Option<CalendarOptions>> {
    let Some(obj) = value.as_object_mut() else { return Ok(None) };
    let (mode, zone, holidays) = (obj.remove("calendar"), obj.remove("timezone"), obj.remove("holidays"));
    if mode.is_none() && zone.is_none() && holidays.is_none() {
        return Ok(None);
    }
    let mut opts = base.clone();
    if let Some(mode) = mode {
        let fix = "give `calendar` as \"auto\", \"continuous\" or \"weekdays\"";
        let text = mode.as_str().ok_or_else(|| DataError::input(at, "`calendar` is not a string", fix))?;
        opts.mode = CalendarMode::parse(text).map_err(|e| DataError::input(at, e, fix))?;
    }
    if let Some(zone) = zone {
        let text = zone.as_str().ok_or_else(|| {
            DataError::input(
                at,
                "`timezone` is not a string",
                "give an IANA name such as \"America/New_York\"",
            )
        })?;
        opts.zone =
            Some(calendar::parse_zone(text).map_err(|e| DataError::at(at, format!("`timezone`: {e}")))?);
    }
    if let Some(holidays) = holidays {
        let fix =
            format!("give `holidays` as an array of at most {MAX_HOLIDAYS} dates such as \"2024-12-25\"");
        let items = holidays
            .as_array()
            .filter(|a| a.len() <= MAX_HOLIDAYS)
            .ok_or_else(|| DataError::input(at, "`holidays` is not an array of dates", &fix))?;
        let mut days = std::collections::BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let text = item
                .as_str()
                .ok_or_else(|| DataError::input(at, format!("holidays[{i}] is not a string"), &fix))?;
            days.insert(
                calendar::parse_holiday(text)
                    .map_err(|e| DataError::at(at, format!("holidays[{i}]: {e}")))?,
            );
        }
        opts.holidays = std::sync::Arc::new(days);
    }
    Ok(Some(opts))
}

fn parse_stamps(value: &Value, len: usize, at: &str, unit: EpochUnit) -> Result<Vec<Stamp>> {
    let fix = "give one timestamp per target point: ISO 8601 strings or integer epochs";
    let Some(items) = value.as_array() else {
        return Err(DataError::input(at, "`timestamps` is not an array", fix));
    };
    if items.len() != len {
        return Err(DataError::input(
            at,
            format!("`timestamps` has {} entries but `target` has {len} points", items.len()),
            fix,
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let where_ = Loc::Index(i).at(at);
            match item {
                Value::String(s) => parse_text(s, unit).map_err(|m| DataError::at(where_, m)),
                Value::Number(n) => match n.as_i64() {
                    Some(x) => epoch(x, unit).map_err(|m| DataError::at(where_, m)),
                    None => Err(DataError::input(where_, format!("{n} is not an integer epoch"), fix)),
                },
                other => Err(DataError::input(where_, format!("{other} is not a timestamp"), fix)),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_str(text: &str, lines: bool) -> Result<Vec<Series>> {
        let o = Overrides::default();
        read(text, lines, "r.jsonl", &ReadOptions::default(), &o, &Limits::default()).map(|(s, _)| s)
    }

    #[test]
    fn requests_with_and_without_timestamps() {
        let text = r#"{"id": "a", "target": [[1, 2, 3]], "horizon": 2}

{"target": [[1, null], [3, 4]], "horizon": 1, "timestamps": ["2024-01-02", "2024-01-01"]}
{"target": [[5, 6]], "horizon": 1, "timestamps": [1700000000, 1700000600]}
"#;
        let s = read_str(text, true).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].at.as_str(), s[0].time.is_none(), s[0].request.horizon), ("r.jsonl:1", true, 2));
        // sorted by time: 1 January first
        assert_eq!(s[1].request.target, vec![vec![None, Some(1.0)], vec![Some(4.0), Some(3.0)]]);
        assert_eq!(s[1].time.as_ref().unwrap().last.to_text(), "2024-01-02");
        assert_eq!(s[1].at, "r.jsonl:3");
        assert_eq!(s[2].time.as_ref().unwrap().future(1).unwrap()[0].to_text(), "1700001200");
    }

    #[test]
    fn errors_name_the_line() {
        let e = |t: &str| read_str(t, true).unwrap_err().to_string();
        assert_eq!(
            e("{\"target\": [[1, 2]], \"horizon\": 1, \"timestamps\": [\"2024-01-01\"]}"),
            "r.jsonl:1: `timestamps` has 1 entries but `target` has 2 points; give one timestamp per target point: \
             ISO 8601 strings or integer epochs"
        );
        assert!(e("{\"target\": [[1, 2]], \"horizon\": 1, \"timestamps\": [\"2024-01-01\", \"x\"]}")
            .starts_with("r.jsonl:1: timestamps[1]: `x` is not a timestamp"));
        assert!(e(
            "\n{\"target\": [[1, 2]], \"horizon\": 1, \"timestamps\": [\"2024-01-01\", \"2024-01-01\"]}"
        )
        .starts_with("r.jsonl:2: timestamps[1]: timestamp 2024-01-01 is also on timestamps[0]"));
        assert!(e("{\"target\": [[1]], \"horizn\": 1}").starts_with("r.jsonl:1: unknown field `horizn`"));
        assert!(e("{\"target\": [[1, NaN]], \"horizon\": 1}").contains("use null to mark a missing point"));
        assert!(e("{\"target\": [[null]], \"horizon\": 1}").contains("variate 0 has no observed point"));
        assert!(e("\n\n").contains("no request"));
        // Forecast steps past the year 9999 are the request's fault, found when it is read (not after a run).
        let late = r#"{"target": [[1, 2, 3]], "horizon": 2, "timestamps": ["9999-12-27", "9999-12-28", "9999-12-29"]}"#;
        assert_eq!(
            e(late),
            "r.jsonl:1: the forecast steps run past the year 9999, or past the last open slot of the series' \
             calendar (thousands of holidays in a row); ask for a shorter horizon, or give fewer holidays"
        );
        let fits = r#"{"target": [[1, 2, 3]], "horizon": 1, "timestamps": ["9999-12-27", "9999-12-28", "9999-12-29"]}"#;
        assert!(read_str(fits, true).is_ok());
    }
}
