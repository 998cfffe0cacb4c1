//! JSON requests (one per `.json` file, one per line of `.jsonl`), as `docs/formats.md` defines them, with the
//! optional `timestamps` of the request format 3: one ISO 8601 string or integer epoch per target point. A request
//! with timestamps is sorted and placed on its grid like a table series ([`super::series::place`]), so the same
//! series gives the same request from JSON or from a table. Everything else is checked by
//! `engines::request::RequestFields::validate`.
//!
//! Each request is decoded straight into its fields, never into a JSON tree: [`Line`] hands every key to
//! `RequestFields`' own `Deserialize` but the ones this reader handles (`timestamps`, `calendar`, `timezone`,
//! `holidays`), which it takes aside as they are read. The decode is [`engines::bounded`]: what it builds is
//! charged to the caller's [`Bounds`] as it is built (a server's bytes budget; nothing for local files), and
//! [`count_requests`] counts a body's requests without building any.

use engines::bounded::{self, Meter, SeqLimit, Tally, Unmetered};
use engines::request::{json_error, Limits, Overrides, RequestFields, TargetValues, TimeValue};
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::as_given;
use super::calendar::{self, CalendarMode, CalendarOptions, MAX_HOLIDAYS};
use super::error::{DataError, Loc, Result};
use super::series::{check_future, place, Context, RawSeries};
use super::timestamps::{epoch, parse_text, EpochUnit, Stamp, StampStyle};
use super::{ReadOptions, Series, TimeKind};

/// What placing one point of a timestamped request builds at most, in bytes, charged before it is built: its
/// stamp, its location, its values, and its grid's slots.
const PLACE_BYTES: u64 = 128;

/// What bounds a read of requests (see the module docs): where what the decode builds is charged, and the
/// most entries an array under a named key may hold.
pub struct Bounds<'m> {
    pub meter: &'m dyn Meter,
    pub limits: &'m [SeqLimit],
}

impl Bounds<'static> {
    /// No bounds (local files).
    pub const NONE: Bounds<'static> = Bounds { meter: &Unmetered, limits: &[] };
}

/// The requests a body holds, as [`read`] counts them: 1 for a JSON document, the non-blank lines of JSON Lines.
/// Linear, builds nothing: a server counts them against its limit before any is decoded.
pub fn count_requests(text: &str, lines: bool) -> usize {
    if !lines {
        return 1;
    }
    text.lines().filter(|l| !l.trim().is_empty()).count()
}

/// Reads the requests of a JSON document (`lines = false`) or of JSON Lines (blank lines skipped).
pub fn read(
    text: &str,
    lines: bool,
    source: &str,
    opts: &ReadOptions,
    overrides: &Overrides,
    limits: &Limits,
) -> Result<(Vec<Series>, TimeKind)> {
    read_bounded(text, lines, source, opts, overrides, limits, &Bounds::NONE)
}

/// [`read`] within `bounds`.
pub fn read_bounded(
    text: &str,
    lines: bool,
    source: &str,
    opts: &ReadOptions,
    overrides: &Overrides,
    limits: &Limits,
    bounds: &Bounds<'_>,
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
    // One tally for the whole body: the meter sees what every request built so far.
    let tally = Tally::new(bounds.meter, bounds.limits);
    for (at, doc) in docs {
        let s = request(doc, &at, opts, overrides, limits, &tally)?;
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
    tally: &Tally<'_>,
) -> Result<Series> {
    let unit = opts.timestamp_unit;
    let Line { mut fields, extra } =
        bounded::from_json_slice_seed(text.as_bytes(), tally, LineSeed(tally, unit))
            .map_err(|e| json_error(text, at, &e))?;
    let calendar = request_calendar(&extra, at, &opts.calendar)?;
    if extra.timestamps.is_none() && calendar.is_some() {
        return Err(DataError::input(
            at,
            "`calendar`, `timezone` and `holidays` need `timestamps`",
            "give the request its `timestamps`, or leave those fields out",
        ));
    }
    let calendar = calendar.unwrap_or_else(|| opts.calendar.clone());
    let variates = fields.target.rows();
    let mut target_names: Vec<String> = (0..variates).map(|v| v.to_string()).collect();
    let (mut time, mut future) = (None, None);
    if let Some(timestamps) = &extra.timestamps {
        let len = if variates > 0 { fields.target.row_len(0) } else { 0 };
        // Ragged or empty targets are left to the request checks, which name the variate.
        if variates > 0 && len > 0 && (0..variates).all(|v| fields.target.row_len(v) == len) {
            // What placing the series on its grid builds (stamps, locations, values, slots), before it is built.
            let points = (len as u64).saturating_mul(variates as u64 + 1);
            tally.charge(points.saturating_mul(PLACE_BYTES)).map_err(|e| DataError::at(at, e))?;
            let stamps = parse_stamps(timestamps, len, at, unit)?;
            let wide = std::mem::take(&mut fields.target).into_f64();
            let raw = RawSeries {
                id: None,
                locs: (0..len).map(Loc::Index).collect(),
                stamps,
                values: (0..len).flat_map(|t| wide.iter().map(move |s| s[t])).collect(),
            };
            let names = column_names(&fields, limits, variates);
            let cx = Context {
                source: at,
                target_names: &names,
                freq: opts.freq,
                calendar: &calendar,
                overrides,
                limits,
            };
            if limits.shape.missing_points {
                let (target, axis) = place(&raw, &cx, at)?;
                fields.target = target.into();
                time = axis;
            } else {
                // a family without missing points: the rows as given, the calendar only continues them
                let mut given = as_given::rows(&raw, &cx, at, fields.future_timestamps.is_none(), true)?;
                fields.target = TargetValues::F64(std::mem::take(&mut given.target));
                if limits.shape.reads_timestamps {
                    fields.timestamps = Some(as_given::clocks(&given.stamps, "timestamps", at)?);
                    future = future_steps(&mut fields, &given, overrides, limits, unit, at)?;
                }
                time = given.axis;
            }
        }
    }
    let request = fields.validate(at, overrides, limits)?;
    if future.is_none() {
        check_future(time.as_ref(), request.horizon, at)?;
    }
    if !request.columns.is_empty() {
        target_names = request.columns.iter().map(|c| c.to_string()).collect();
    }
    Ok(Series { request, at: at.to_string(), target_names, time, future, rows: Vec::new() })
}

/// How a request's rows are named in messages before validation: its `columns`, else the family's columns in
/// their default order, else the variates' indices.
fn column_names(fields: &RequestFields, limits: &Limits, variates: usize) -> Vec<String> {
    if let Some(given) = &fields.columns {
        return given.clone();
    }
    let family = limits.shape.columns.unwrap_or(&[]);
    (0..variates).map(|v| family.get(v).map_or_else(|| v.to_string(), |c| c.name.to_string())).collect()
}

/// The forecast steps of a request of a family that reads wall clocks, handed to it as clocks: the request's own
/// `future_timestamps` (each after the one before, the first after the series' last row; returned, the output
/// writes them), or else the steps that continue the series' calendar (`horizon` of them, when it is known).
fn future_steps(
    fields: &mut RequestFields,
    given: &as_given::AsGiven,
    overrides: &Overrides,
    limits: &Limits,
    unit: EpochUnit,
    at: &str,
) -> Result<Option<Vec<Stamp>>> {
    let Some(values) = fields.future_timestamps.take() else {
        if let (Some(axis), Some(h)) = (&given.axis, overrides.horizon.or(fields.horizon)) {
            fields.future_timestamps = Some(as_given::continued(axis, h, limits, at)?.1);
        }
        return Ok(None);
    };
    let stamps = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let stamp = match v {
                TimeValue::Text(s) => parse_text(s, unit),
                TimeValue::Epoch(x) => epoch(*x, unit),
                TimeValue::Clock(c) => parse_text(&c.to_string(), unit),
            };
            stamp.map_err(|m| DataError::at(format!("{at}: future_timestamps[{i}]"), m))
        })
        .collect::<Result<Vec<Stamp>>>()?;
    let last = given.stamps.last().expect("a series with timestamps has rows");
    as_given::check_future_stamps(&stamps, last, at)?;
    fields.future_timestamps = Some(as_given::clocks(&stamps, "future_timestamps", at)?);
    Ok(Some(stamps))
}

/// The request's own `calendar` (`"auto"`, `"continuous"`, `"weekdays"`), `timezone` (an IANA name) and
/// `holidays` (at most [`MAX_HOLIDAYS`] `YYYY-MM-DD` dates), over the reader's options; `None` when it gives none.
fn request_calendar(extra: &Extra, at: &str, base: &CalendarOptions) -> Result<Option<CalendarOptions>> {
    if extra.calendar.is_none() && extra.timezone.is_none() && extra.holidays.is_none() {
        return Ok(None);
    }
    let mut opts = base.clone();
    if let Some(mode) = &extra.calendar {
        let fix = "give `calendar` as \"auto\", \"continuous\" or \"weekdays\"";
        let Loose::Is(text) = mode else {
            return Err(DataError::input(at, "`calendar` is not a string", fix));
        };
        opts.mode = CalendarMode::parse(text).map_err(|e| DataError::input(at, e, fix))?;
    }
    if let Some(zone) = &extra.timezone {
        let Loose::Is(text) = zone else {
            return Err(DataError::input(
                at,
                "`timezone` is not a string",
                "give an IANA name such as \"America/New_York\"",
            ));
        };
        opts.zone =
            Some(calendar::parse_zone(text).map_err(|e| DataError::at(at, format!("`timezone`: {e}")))?);
    }
    if let Some(holidays) = &extra.holidays {
        let fix =
            format!("give `holidays` as an array of at most {MAX_HOLIDAYS} dates such as \"2024-12-25\"");
        let Loose::Is(items) = holidays else {
            return Err(DataError::input(at, "`holidays` is not an array of dates", &fix));
        };
        let mut days = std::collections::BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let Loose::Is(text) = item else {
                return Err(DataError::input(at, format!("holidays[{i}] is not a string"), &fix));
            };
            days.insert(
                calendar::parse_holiday(text)
                    .map_err(|e| DataError::at(at, format!("holidays[{i}]: {e}")))?,
            );
        }
        opts.holidays = std::sync::Arc::new(days);
    }
    Ok(Some(opts))
}

fn parse_stamps(value: &Loose<Vec<RawStamp>>, len: usize, at: &str, unit: EpochUnit) -> Result<Vec<Stamp>> {
    let fix = "give one timestamp per target point: ISO 8601 strings or integer epochs";
    let Loose::Is(items) = value else {
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
            // the location is formatted only for an error (one per timestamp was an eighth of a decode)
            let where_ = || Loc::Index(i).at(at);
            match item {
                RawStamp::Stamp(s) => Ok(*s),
                RawStamp::Text(s) => parse_text(s, unit).map_err(|m| DataError::at(where_(), m)),
                RawStamp::Int(x) => epoch(*x, unit).map_err(|m| DataError::at(where_(), m)),
                RawStamp::Number(n) => {
                    Err(DataError::input(where_(), format!("{n} is not an integer epoch"), fix))
                }
                RawStamp::Other(other) => {
                    Err(DataError::input(where_(), format!("{other} is not a timestamp"), fix))
                }
            }
        })
        .collect()
}

// --- one request as written, decoded without a JSON tree

/// A request line: its `RequestFields`, and the fields this reader handles (see the module docs).
struct Line {
    fields: RequestFields,
    extra: Extra,
}

/// The fields a request line gives beside `RequestFields`' own, as written.
#[derive(Default)]
struct Extra {
    timestamps: Option<Loose<Vec<RawStamp>>>,
    calendar: Option<Loose<String>>,
    timezone: Option<Loose<String>>,
    holidays: Option<Loose<Vec<Loose<String>>>>,
}

/// A value of the expected kind, or of another kind (skipped, not built; the request's checks name it).
enum Loose<T> {
    Is(T),
    Not,
}

/// One entry of `timestamps` as written: a text already read as a timestamp (most entries: no copy of the text
/// is kept), or kept as written for [`parse_stamps`] to name its problem where the request's checks come to it.
enum RawStamp {
    Stamp(Stamp),
    /// Text that is not a timestamp, as written.
    Text(String),
    Int(i64),
    /// A number that is not an integer epoch, as written.
    Number(String),
    /// Anything else, named.
    Other(&'static str),
}

/// Decodes a [`Line`]; the tally is the decode's, for what this reader's own fields build beyond
/// [`engines::bounded`]'s bound per item (their entries are larger than a number); the unit is that of integer
/// epochs written as text (`--timestamp-unit`).
struct LineSeed<'t, 'm>(&'t Tally<'m>, EpochUnit);

impl<'de> de::DeserializeSeed<'de> for LineSeed<'_, '_> {
    type Value = Line;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Line, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for LineSeed<'_, '_> {
    type Value = Line;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        // What `RequestFields`' own derive says.
        f.write_str("struct RequestFields")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> std::result::Result<Line, A::Error> {
        let mut extra = Extra::default();
        let fields =
            de::Deserialize::deserialize(Split { map, extra: &mut extra, tally: self.0, unit: self.1 })?;
        Ok(Line { fields, extra })
    }
}

/// The keys of a request object, as `RequestFields` sees them: this reader's own are taken aside.
struct Split<'e, 't, 'm, A> {
    map: A,
    extra: &'e mut Extra,
    tally: &'t Tally<'m>,
    unit: EpochUnit,
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for Split<'_, '_, '_, A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> std::result::Result<V::Value, A::Error> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option unit
        unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier ignored_any
    }
}

/// A key of a request object: one of this reader's, or `RequestFields`' (or unknown: its derive says so).
enum Key {
    Timestamps,
    Calendar,
    Timezone,
    Holidays,
    Other(String),
}

impl<'de> de::Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Key, E> {
                Ok(match v {
                    "timestamps" => Key::Timestamps,
                    "calendar" => Key::Calendar,
                    "timezone" => Key::Timezone,
                    "holidays" => Key::Holidays,
                    other => Key::Other(other.to_string()),
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Split<'_, '_, '_, A> {
    type Error = A::Error;

    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> std::result::Result<Option<K::Value>, A::Error> {
        loop {
            match self.map.next_key::<Key>()? {
                None => return Ok(None),
                Some(Key::Timestamps) => {
                    self.extra.timestamps = Some(self.map.next_value_seed(StampsSeed(self.tally, self.unit))?)
                }
                Some(Key::Calendar) => self.extra.calendar = Some(self.map.next_value_seed(TextSeed)?),
                Some(Key::Timezone) => self.extra.timezone = Some(self.map.next_value_seed(TextSeed)?),
                Some(Key::Holidays) => {
                    self.extra.holidays = Some(self.map.next_value_seed(HolidaysSeed(self.tally))?)
                }
                Some(Key::Other(name)) => {
                    return seed.deserialize(de::value::StringDeserializer::new(name)).map(Some)
                }
            }
        }
    }

    fn next_value_seed<V: de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> std::result::Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// Skips what is left of an array or object that is not of the expected kind (read, never built).
fn skip_seq<'de, A: SeqAccess<'de>>(mut seq: A) -> std::result::Result<(), A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(())
}

fn skip_map<'de, A: MapAccess<'de>>(mut map: A) -> std::result::Result<(), A::Error> {
    while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
    Ok(())
}

/// Implements the visits that are "not of the expected kind" for a visitor of `Loose<T>`.
macro_rules! loose_otherwise {
    () => {
        fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Self::Value, E> {
            Ok(Loose::Not)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Self::Value, E> {
            Ok(Loose::Not)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<Self::Value, E> {
            Ok(Loose::Not)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Self::Value, E> {
            Ok(Loose::Not)
        }
        fn visit_unit<E: de::Error>(self) -> std::result::Result<Self::Value, E> {
            Ok(Loose::Not)
        }
        fn visit_map<M: MapAccess<'de>>(self, map: M) -> std::result::Result<Self::Value, M::Error> {
            skip_map(map)?;
            Ok(Loose::Not)
        }
    };
}

/// A string (`calendar`, `timezone`, a holiday).
struct TextSeed;

impl<'de> de::DeserializeSeed<'de> for TextSeed {
    type Value = Loose<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TextSeed {
    type Value = Loose<String>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
        Ok(Loose::Is(v.to_string()))
    }
    fn visit_seq<S: SeqAccess<'de>>(self, seq: S) -> std::result::Result<Self::Value, S::Error> {
        skip_seq(seq)?;
        Ok(Loose::Not)
    }
    loose_otherwise!();
}

/// What one entry of a list of this reader's own fields builds beyond the bound per item the tally charged
/// already: its slot, twice over for the list's growth.
fn entry_bytes<T>() -> u64 {
    (2 * std::mem::size_of::<T>() as u64).saturating_sub(bounded::VALUE_BYTES)
}

fn charge<E: de::Error>(tally: &Tally<'_>, bytes: u64) -> std::result::Result<(), E> {
    tally.charge(bytes).map_err(E::custom)
}

/// `holidays`: an array of at most [`MAX_HOLIDAYS`] strings (more is not an array of dates: not built).
struct HolidaysSeed<'t, 'm>(&'t Tally<'m>);

impl<'de> de::DeserializeSeed<'de> for HolidaysSeed<'_, '_> {
    type Value = Loose<Vec<Loose<String>>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for HolidaysSeed<'_, '_> {
    type Value = Loose<Vec<Loose<String>>>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of dates")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Ok(Loose::Not)
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> std::result::Result<Self::Value, S::Error> {
        let mut days = Vec::new();
        while let Some(day) = seq.next_element_seed(TextSeed)? {
            if days.len() == MAX_HOLIDAYS {
                skip_seq(seq)?;
                return Ok(Loose::Not);
            }
            charge(self.0, entry_bytes::<Loose<String>>())?;
            days.push(day);
        }
        Ok(Loose::Is(days))
    }
    loose_otherwise!();
}

/// `timestamps`: an array of ISO 8601 strings or integer epochs, each entry read as a timestamp or kept as written.
struct StampsSeed<'t, 'm>(&'t Tally<'m>, EpochUnit);

impl<'de> de::DeserializeSeed<'de> for StampsSeed<'_, '_> {
    type Value = Loose<Vec<RawStamp>>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StampsSeed<'_, '_> {
    type Value = Loose<Vec<RawStamp>>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of timestamps")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<Self::Value, E> {
        Ok(Loose::Not)
    }
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> std::result::Result<Self::Value, S::Error> {
        let mut stamps = Vec::new();
        while let Some(stamp) = seq.next_element_seed(StampSeed(self.1))? {
            charge(self.0, entry_bytes::<RawStamp>())?;
            stamps.push(stamp);
        }
        Ok(Loose::Is(stamps))
    }
    loose_otherwise!();
}

struct StampSeed(EpochUnit);

impl<'de> de::DeserializeSeed<'de> for StampSeed {
    type Value = RawStamp;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<RawStamp, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StampSeed {
    type Value = RawStamp;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a timestamp")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<RawStamp, E> {
        // the text is kept only when it is not a timestamp (its message is made where it is reported)
        Ok(parse_text(v, self.0).map_or_else(|_| RawStamp::Text(v.to_string()), RawStamp::Stamp))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> std::result::Result<RawStamp, E> {
        Ok(RawStamp::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<RawStamp, E> {
        Ok(i64::try_from(v).map_or_else(|_| RawStamp::Number(v.to_string()), RawStamp::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> std::result::Result<RawStamp, E> {
        Ok(RawStamp::Number(v.to_string()))
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> std::result::Result<RawStamp, E> {
        Ok(RawStamp::Other(if v { "true" } else { "false" }))
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<RawStamp, E> {
        Ok(RawStamp::Other("null"))
    }
    fn visit_seq<S: SeqAccess<'de>>(self, seq: S) -> std::result::Result<RawStamp, S::Error> {
        skip_seq(seq)?;
        Ok(RawStamp::Other("an array"))
    }
    fn visit_map<M: MapAccess<'de>>(self, map: M) -> std::result::Result<RawStamp, M::Error> {
        skip_map(map)?;
        Ok(RawStamp::Other("an object"))
    }
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
    fn requests_are_counted_without_decoding_and_decoded_within_bounds() {
        assert_eq!(count_requests("{}\n\n  \n{}\r\n{}", true), 3);
        assert_eq!(count_requests("{}\n{}", false), 1);
        use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
        struct Budget(u64, AtomicU64);
        impl Meter for Budget {
            fn built(&self, bytes: u64) -> std::result::Result<(), String> {
                self.1.store(bytes, Relaxed);
                if bytes > self.0 {
                    return Err(format!("over {} bytes", self.0));
                }
                Ok(())
            }
        }
        let read_with = |text: &str, meter: &Budget, limits: &[SeqLimit]| {
            let bounds = Bounds { meter, limits };
            let (o, l) = (Overrides::default(), Limits::default());
            read_bounded(text, true, "r.jsonl", &ReadOptions::default(), &o, &l, &bounds).map(|(s, _)| s)
        };
        // What the requests build is reported as it grows, across lines; past the meter's budget, the read stops.
        let line = format!("{{\"target\": [[{}1]], \"horizon\": 1}}\n", "1,".repeat(10_000));
        let meter = Budget(u64::MAX, Default::default());
        assert_eq!(read_with(&line.repeat(3), &meter, &[]).unwrap().len(), 3);
        assert!(meter.1.load(Relaxed) >= 3 * 10_001 * 16, "{}", meter.1.load(Relaxed));
        let meter = Budget(200_000, Default::default());
        let e = read_with(&line.repeat(3), &meter, &[]).unwrap_err().to_string();
        assert!(e.contains("r.jsonl:2") && e.contains("over 200000 bytes"), "{e}");
        // Timestamps are charged for their entries and for placing the series.
        let stamps: Vec<String> = (0..2000).map(|i| format!("{}", 1_700_000_000 + 60 * i)).collect();
        let text = format!(
            "{{\"target\": [[{}1]], \"horizon\": 1, \"timestamps\": [{}]}}",
            "1,".repeat(1999),
            stamps.join(",")
        );
        let meter = Budget(u64::MAX, Default::default());
        let s = read_with(&text, &meter, &[]).unwrap();
        assert!(s[0].time.is_some());
        assert!(meter.1.load(Relaxed) >= 2000 * (16 + PLACE_BYTES), "{}", meter.1.load(Relaxed));
        // A limited key stops at its count.
        let limits = [SeqLimit { key: "target", max: 2, what: "variates (--max-variates)" }];
        let e = read_with("{\"target\": [[1], [2], [3]], \"horizon\": 1}", &meter, &limits)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("r.jsonl:1: `target` has more than 2 entries") && e.contains("--max-variates"),
            "{e}"
        );
    }

    #[test]
    fn the_readers_own_fields_keep_their_messages() {
        let e = |t: &str| read_str(t, true).unwrap_err().to_string();
        let base = "\"target\": [[1, 2]], \"horizon\": 1";
        assert!(e(&format!("{{{base}, \"calendar\": 3, \"timestamps\": [1, 2]}}"))
            .contains("`calendar` is not a string"));
        assert!(e(&format!("{{{base}, \"timezone\": [1], \"timestamps\": [1, 2]}}"))
            .contains("`timezone` is not a string"));
        assert!(e(&format!("{{{base}, \"holidays\": \"2024-01-01\", \"timestamps\": [1, 2]}}"))
            .contains("`holidays` is not an array of dates"));
        assert!(e(&format!("{{{base}, \"holidays\": [1], \"timestamps\": [1, 2]}}"))
            .contains("holidays[0] is not a string"));
        assert!(
            e(&format!("{{{base}, \"timestamps\": {{\"a\": 1}}}}")).contains("`timestamps` is not an array")
        );
        assert!(e(&format!("{{{base}, \"timestamps\": [1.5, 2]}}"))
            .contains("timestamps[0]: 1.5 is not an integer epoch"));
        assert!(e(&format!("{{{base}, \"timestamps\": [true, 2]}}"))
            .contains("timestamps[0]: true is not a timestamp"));
        assert!(e(&format!("{{{base}, \"calendar\": \"auto\"}}")).contains("need `timestamps`"));
        assert!(e("[1, 2]").contains("expected struct RequestFields"));
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
