//! A request's time fields: `timestamps` and `future_timestamps` ([`TimeValue`] each).
//!
//! Who reads them depends on the family ([`super::shape::RequestShape::reads_timestamps`]):
//! * a family that reads each point's wall clock gets them here, as [`WallClock`]s: one per context point
//!   (`timestamps`) and one per forecast step (`future_timestamps`). The tables layer (`totoc forecast`, `POST
//!   /v1/forecast`) parses them, sorts the rows by time, refuses duplicates, continues the series' calendar when
//!   `future_timestamps` is absent, and hands over [`TimeValue::Clock`]s; another reader (a golden case, the
//!   Python package) gives ISO 8601 text, read by [`WallClock::parse`] as written;
//! * for the other families the tables layer places the points on the series' grid by their `timestamps` (it
//!   takes the field aside as it decodes), so a request that carries one here was not read by a table
//!   reader, and is refused naming the field.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

use crate::error::{Error, Result};
use crate::host::wall_clock::WallClock;

/// One timestamp of a request, as written or as a reader resolved it.
#[derive(Debug, Clone, PartialEq)]
pub enum TimeValue {
    /// ISO 8601 text.
    Text(String),
    /// An integer epoch (its unit is the reader's, `--timestamp-unit`).
    Epoch(i64),
    /// A wall clock the reader resolved (the tables layer).
    Clock(WallClock),
}

impl<'de> Deserialize<'de> for TimeValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_any(TimeVisitor)
    }
}

struct TimeVisitor;

impl Visitor<'_> for TimeVisitor {
    type Value = TimeValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a timestamp: ISO 8601 text or an integer epoch")
    }

    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<TimeValue, E> {
        Ok(TimeValue::Text(s.to_string()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> std::result::Result<TimeValue, E> {
        Ok(TimeValue::Text(s))
    }

    fn visit_i64<E: de::Error>(self, x: i64) -> std::result::Result<TimeValue, E> {
        Ok(TimeValue::Epoch(x))
    }

    fn visit_u64<E: de::Error>(self, x: u64) -> std::result::Result<TimeValue, E> {
        i64::try_from(x)
            .map(TimeValue::Epoch)
            .map_err(|_| E::custom(format!("{x} is too large for an epoch timestamp")))
    }
}

/// The wall clocks of a request of `points` context points and `horizon` steps, for a family that reads them:
/// both fields are required.
pub(super) fn wall_clocks(
    shape: &super::RequestShape,
    timestamps: Option<Vec<TimeValue>>,
    future: Option<Vec<TimeValue>>,
    points: usize,
    horizon: usize,
    at: &str,
) -> Result<(Vec<WallClock>, Vec<WallClock>)> {
    let missing =
        |field: &str, message: String| Error::BadField { at: at.to_string(), field: field.into(), message };
    let Some(timestamps) = timestamps else {
        return Err(missing(
            "timestamps",
            format!(
                "`timestamps` is missing; {} reads the wall-clock time of every point: give one ISO 8601 stamp per \
                 point of `target`, oldest first (a table: its timestamp column)",
                shape.title
            ),
        ));
    };
    let Some(future) = future else {
        return Err(missing(
            "future_timestamps",
            format!(
                "`future_timestamps` is missing; {} reads the wall-clock time of every forecast step: give \
                 `horizon` stamps, or send the series through `totoc forecast` or `POST /v1/forecast`, which \
                 continue its calendar",
                shape.title
            ),
        ));
    };
    let context = clocks(timestamps, "timestamps", points, &format!("`target` has {points} points"), at)?;
    let steps = clocks(future, "future_timestamps", horizon, &format!("the horizon is {horizon}"), at)?;
    Ok((context, steps))
}

/// The wall clocks of `values` (a request's `field`: `timestamps` or `future_timestamps`), which must be `want`
/// of them (`of` says what they count, in the error).
pub(super) fn clocks(
    values: Vec<TimeValue>,
    field: &str,
    want: usize,
    of: &str,
    at: &str,
) -> Result<Vec<WallClock>> {
    let bad = |message: String| Error::BadField { at: at.to_string(), field: field.to_string(), message };
    if values.len() != want {
        return Err(bad(format!(
            "`{field}` has {} entries but {of}; give one wall-clock stamp per {}",
            values.len(),
            if field == "timestamps" { "point of `target`, oldest first" } else { "forecast step" }
        )));
    }
    values
        .into_iter()
        .enumerate()
        .map(|(row, v)| match v {
            TimeValue::Clock(c) => Ok(c),
            TimeValue::Text(text) => WallClock::parse(&text)
                .map_err(|e| bad(format!("`{field}` row {row}: {e}"))),
            TimeValue::Epoch(x) => Err(bad(format!(
                "`{field}` row {row} is the integer {x}: an epoch's unit is a reader's option (`totoc forecast` \
                 and `POST /v1/forecast` read epochs with --timestamp-unit); give ISO 8601 text here, e.g. \
                 \"2024-01-31T09:30:00\""
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Fields {
        #[serde(default)]
        t: Option<Vec<TimeValue>>,
    }

    fn parse(text: &str) -> std::result::Result<Fields, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn time_values_are_text_or_integers() {
        let f = parse(r#"{"t": ["2024-01-31", 1700000000, -5]}"#).unwrap();
        assert_eq!(
            f.t.unwrap(),
            vec![TimeValue::Text("2024-01-31".into()), TimeValue::Epoch(1_700_000_000), TimeValue::Epoch(-5)]
        );
        for bad in [r#"{"t": [1.5]}"#, r#"{"t": [null]}"#, r#"{"t": [true]}"#] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("ISO 8601 text or an integer epoch"), "{bad}: {e}");
        }
        assert!(parse(r#"{"t": "2024-01-31"}"#).unwrap_err().contains("expected a sequence"));
        assert!(parse(r#"{"t": [18446744073709551615]}"#).unwrap_err().contains("too large for an epoch"));
    }

    #[test]
    fn clocks_are_counted_and_read_as_written() {
        let text = |s: &[&str]| s.iter().map(|s| TimeValue::Text(s.to_string())).collect::<Vec<_>>();
        let c = clocks(text(&["2024-01-31T09:30:00+05:00", "2024-02-01"]), "timestamps", 2, "", "r").unwrap();
        assert_eq!(c[0].hour(), 9);
        let e = clocks(text(&["2024-01-31"]), "timestamps", 2, "`target` has 2 points", "r").unwrap_err();
        assert_eq!(
            e.to_string(),
            "r: `timestamps` has 1 entries but `target` has 2 points; give one wall-clock stamp per point of \
             `target`, oldest first"
        );
        let e = clocks(text(&["2024-02-30"]), "future_timestamps", 1, "", "r").unwrap_err().to_string();
        assert!(e.starts_with("r: `future_timestamps` row 0: `2024-02-30` is not a timestamp"), "{e}");
        let e = clocks(vec![TimeValue::Epoch(5)], "timestamps", 1, "", "r").unwrap_err().to_string();
        assert!(e.contains("`timestamps` row 0 is the integer 5") && e.contains("ISO 8601 text"), "{e}");
        assert!(matches!(
            clocks(vec![TimeValue::Epoch(5)], "timestamps", 1, "", "r"),
            Err(Error::BadField { ref field, .. }) if field == "timestamps"
        ));
    }
}
