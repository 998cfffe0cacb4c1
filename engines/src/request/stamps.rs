//! A request's time fields: `timestamps` and `future_timestamps` ([`TimeValue`] each), and the session calendar
//! fields a table reader applies with them (`calendar`, `timezone`, `holidays`).
//!
//! Who reads them depends on the family ([`super::shape::RequestShape::reads_timestamps`]):
//! * a family that reads each point's wall clock gets them here, as [`WallClock`]s: one per context point
//!   (`timestamps`) and one per forecast step (`future_timestamps`). The tables layer (`totoc forecast`, `POST
//!   /v1/forecast`) parses them, sorts the rows by time, refuses duplicates, continues the series' calendar when
//!   `future_timestamps` is absent, and hands over [`TimeValue::Clock`]s; another reader (a golden case, the
//!   Python package) gives ISO 8601 text, read by [`WallClock::parse`] as written;
//! * for the other families the tables layer places the points on the series' grid by their `timestamps` and
//!   clears the field before validation, so a request that still carries one here was not read by a table
//!   reader, and is refused naming the field.
//!
//! The calendar fields are always the tables layer's: they are parsed here only so that one `Deserialize` covers
//! the whole request (the server's bounded decode), with their messages.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
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

/// `calendar` and `timezone`: text, or `null`; anything else names the field.
pub(super) fn calendar_text<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<String>, D::Error> {
    d.deserialize_any(TextField {
        message: "`calendar` is not a string; give `calendar` as \"auto\", \"continuous\" or \"weekdays\"",
    })
}

/// See [`calendar_text`].
pub(super) fn timezone_text<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<String>, D::Error> {
    d.deserialize_any(TextField {
        message: "`timezone` is not a string; give an IANA name such as \"America/New_York\"",
    })
}

/// A text field whose other types are refused with `message`.
struct TextField {
    message: &'static str,
}

impl TextField {
    fn refuse<T, E: de::Error>(&self) -> std::result::Result<T, E> {
        Err(E::custom(self.message))
    }
}

impl<'de> Visitor<'de> for TextField {
    type Value = Option<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.message)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<Option<String>, E> {
        Ok(Some(s.to_string()))
    }

    fn visit_unit<E: de::Error>(self) -> std::result::Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> std::result::Result<Option<String>, E> {
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Option<String>, E> {
        self.refuse()
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Option<String>, E> {
        self.refuse()
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Option<String>, E> {
        self.refuse()
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Option<String>, E> {
        self.refuse()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> std::result::Result<Option<String>, A::Error> {
        self.refuse()
    }

    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> std::result::Result<Option<String>, A::Error> {
        self.refuse()
    }
}

const HOLIDAYS: &str = "`holidays` is not an array of dates; give `holidays` as an array of dates such as \
                        \"2024-12-25\"";

/// `holidays`: an array of text (each date is checked by the tables layer), or `null`.
pub(super) fn holidays<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Vec<String>>, D::Error> {
    d.deserialize_any(Holidays)
}

struct Holidays;

impl<'de> Visitor<'de> for Holidays {
    type Value = Option<Vec<String>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(HOLIDAYS)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(HolidayText(s)) = seq.next_element()? {
            out.push(s);
        }
        Ok(Some(out))
    }

    fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Self::Value, E> {
        Err(E::custom(HOLIDAYS))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Self::Value, E> {
        Err(E::custom(HOLIDAYS))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Self::Value, E> {
        Err(E::custom(HOLIDAYS))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Self::Value, E> {
        Err(E::custom(HOLIDAYS))
    }

    fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Err(E::custom(HOLIDAYS))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> std::result::Result<Self::Value, A::Error> {
        Err(de::Error::custom(HOLIDAYS))
    }
}

/// One entry of `holidays`: text.
struct HolidayText(String);

impl<'de> Deserialize<'de> for HolidayText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        String::deserialize(d).map(HolidayText).map_err(|_| de::Error::custom(HOLIDAYS))
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
        #[serde(default, deserialize_with = "calendar_text")]
        calendar: Option<String>,
        #[serde(default, deserialize_with = "holidays")]
        holidays: Option<Vec<String>>,
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
    fn calendar_fields_name_themselves() {
        let f = parse(r#"{"calendar": "weekdays", "holidays": ["2024-12-25"]}"#).unwrap();
        assert_eq!(
            (f.calendar.as_deref(), f.holidays),
            (Some("weekdays"), Some(vec!["2024-12-25".to_string()]))
        );
        let f = parse(r#"{"calendar": null, "holidays": null}"#).unwrap();
        assert_eq!((f.calendar, f.holidays), (None, None));
        assert!(parse(r#"{"calendar": 3}"#).unwrap_err().starts_with("`calendar` is not a string"));
        for bad in [r#"{"holidays": "2013-03-04"}"#, r#"{"holidays": [3]}"#, r#"{"holidays": {"a": 1}}"#] {
            assert!(parse(bad).unwrap_err().starts_with("`holidays` is not an array of dates"), "{bad}");
        }
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
