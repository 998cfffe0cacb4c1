//! Bounded decoding: what a client's bytes become is counted while they become it, so a small input cannot
//! build a large structure before any limit is checked.
//!
//! [`Bounded`] wraps any serde [`Deserializer`] and the type being decoded keeps its own `Deserialize` (new
//! fields need no change here). As the decode visits values it adds an upper bound of what they cost once built
//! to a [`Tally`], and reports the running total to a [`Meter`] every [`REPORT_EVERY`] bytes; the meter may stop
//! the decode (a server's bytes budget spent, its client gone). Per-key limits ([`SeqLimit`]) stop a decode as
//! soon as an array under a named key has one entry too many (`target` with more variates than allowed), before
//! that entry is built.
//!
//! The stated upper bound per visited item (what [`Tally`] charges):
//! * a number, boolean or null: [`VALUE_BYTES`] (its slot in a vector is at most 8 bytes: f64, i64,
//!   `Option<f32>`, and a growing vector may hold up to twice its length);
//! * an array or object: [`CONTAINER_BYTES`] (a vector's header in its parent, twice over, and its first
//!   allocation: at least 4 slots of 8 bytes, with the allocator's own overhead);
//! * a string: twice its length, plus [`CONTAINER_BYTES`].
//!
//! So a JSON input builds at most 8 × its size in numbers (`0,`: 2 bytes, 16 charged) and 32 × in empty arrays
//! (`[],`); the unit tests decode such worst cases and compare the tally with what was actually built.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

use key::KeySeed;

mod key;

/// Bytes charged per number, boolean or null.
pub const VALUE_BYTES: u64 = 16;
/// Bytes charged per array or object.
pub const CONTAINER_BYTES: u64 = 96;
/// The tally reports to its meter each time it has grown by this much.
pub const REPORT_EVERY: u64 = 64 * 1024;

/// Where a bounded decode reports what it has built so far.
pub trait Meter: Sync {
    /// The decode has built about `bytes` bytes in all so far; an error stops it with that message.
    fn built(&self, bytes: u64) -> Result<(), String>;
}

/// A meter that never stops a decode (local files read by the command line).
pub struct Unmetered;

impl Meter for Unmetered {
    fn built(&self, _: u64) -> Result<(), String> {
        Ok(())
    }
}

/// At most `max` entries in an array under the object key `key` (any depth); `what` says what the entries are
/// and how to raise the limit, e.g. `variates (--max-variates)`.
#[derive(Debug, Clone, Copy)]
pub struct SeqLimit {
    pub key: &'static str,
    pub max: usize,
    pub what: &'static str,
}

/// What one decode has built so far (single-threaded: one decode, one tally).
pub struct Tally<'m> {
    meter: &'m dyn Meter,
    limits: &'m [SeqLimit],
    built: Cell<u64>,
    reported: Cell<u64>,
}

impl<'m> Tally<'m> {
    pub fn new(meter: &'m dyn Meter, limits: &'m [SeqLimit]) -> Self {
        Tally { meter, limits, built: Cell::new(0), reported: Cell::new(0) }
    }

    /// Bytes charged so far.
    pub fn built(&self) -> u64 {
        self.built.get()
    }

    /// Charges `bytes` more; reports to the meter when the total has grown by [`REPORT_EVERY`] since the last
    /// report.
    pub fn charge(&self, bytes: u64) -> Result<(), String> {
        let total = self.built.get().saturating_add(bytes);
        self.built.set(total);
        if total - self.reported.get() >= REPORT_EVERY {
            self.reported.set(total);
            self.meter.built(total)?;
        }
        Ok(())
    }

    /// Reports the total now (at the end of a decode, so that what is left under [`REPORT_EVERY`] counts too).
    pub fn flush(&self) -> Result<(), String> {
        self.reported.set(self.built.get());
        self.meter.built(self.built.get())
    }

    pub(crate) fn limit_of(&self, key: &str) -> Option<usize> {
        self.limits.iter().position(|l| l.key == key)
    }
}

/// A deserializer that charges what it builds to a [`Tally`] (see the module docs).
pub struct Bounded<'t, 'm, D> {
    de: D,
    tally: &'t Tally<'m>,
    /// The [`SeqLimit`] of the key this value stands under, if any.
    limit: Option<usize>,
}

impl<'t, 'm, D> Bounded<'t, 'm, D> {
    pub fn new(de: D, tally: &'t Tally<'m>) -> Self {
        Bounded { de, tally, limit: None }
    }
}

fn fail<E: de::Error>(r: Result<(), String>) -> Result<(), E> {
    r.map_err(E::custom)
}

macro_rules! forward {
    ($($method:ident),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
                self.de.$method(Wrap { visitor, tally: self.tally, limit: self.limit })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Bounded<'_, '_, D> {
    type Error = D::Error;

    forward!(
        deserialize_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_unit_struct(name, Wrap { visitor: v, tally: self.tally, limit: self.limit })
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_newtype_struct(name, Wrap { visitor: v, tally: self.tally, limit: self.limit })
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, D::Error> {
        self.de.deserialize_tuple(len, Wrap { visitor: v, tally: self.tally, limit: self.limit })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_tuple_struct(name, len, Wrap { visitor: v, tally: self.tally, limit: self.limit })
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_struct(name, fields, Wrap { visitor: v, tally: self.tally, limit: self.limit })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_enum(name, variants, Wrap { visitor: v, tally: self.tally, limit: self.limit })
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// The visitor of a [`Bounded`] value: charges each item, and wraps what it hands on.
pub(crate) struct Wrap<'t, 'm, V> {
    pub(crate) visitor: V,
    pub(crate) tally: &'t Tally<'m>,
    pub(crate) limit: Option<usize>,
}

macro_rules! value {
    ($($method:ident: $t:ty),* $(,)?) => {
        $(
            fn $method<E: de::Error>(self, v: $t) -> Result<Self::Value, E> {
                fail(self.tally.charge(VALUE_BYTES))?;
                self.visitor.$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<'_, '_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(f)
    }

    value!(
        visit_bool: bool,
        visit_i8: i8,
        visit_i16: i16,
        visit_i32: i32,
        visit_i64: i64,
        visit_i128: i128,
        visit_u8: u8,
        visit_u16: u16,
        visit_u32: u32,
        visit_u64: u64,
        visit_u128: u128,
        visit_f32: f32,
        visit_f64: f64,
        visit_char: char,
    );

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        fail(self.tally.charge(string_bytes(v.len())))?;
        self.visitor.visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        fail(self.tally.charge(string_bytes(v.len())))?;
        self.visitor.visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        fail(self.tally.charge(string_bytes(v.len())))?;
        self.visitor.visit_string(v)
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
        fail(self.tally.charge(string_bytes(v.len())))?;
        self.visitor.visit_bytes(v)
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Self::Value, E> {
        fail(self.tally.charge(string_bytes(v.len())))?;
        self.visitor.visit_borrowed_bytes(v)
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Self::Value, E> {
        fail(self.tally.charge(string_bytes(v.len())))?;
        self.visitor.visit_byte_buf(v)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        fail(self.tally.charge(VALUE_BYTES))?;
        self.visitor.visit_none()
    }

    fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
        self.visitor.visit_some(Bounded { de: d, tally: self.tally, limit: self.limit })
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        fail(self.tally.charge(VALUE_BYTES))?;
        self.visitor.visit_unit()
    }

    fn visit_newtype_struct<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
        self.visitor.visit_newtype_struct(Bounded { de: d, tally: self.tally, limit: self.limit })
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        fail(self.tally.charge(CONTAINER_BYTES))?;
        self.visitor.visit_seq(Seq { seq, tally: self.tally, limit: self.limit, count: 0 })
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        fail(self.tally.charge(CONTAINER_BYTES))?;
        self.visitor.visit_map(Map { map, tally: self.tally, next_limit: None })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        fail(self.tally.charge(CONTAINER_BYTES))?;
        self.visitor.visit_enum(Enum { data, tally: self.tally })
    }
}

fn string_bytes(len: usize) -> u64 {
    (len as u64).saturating_mul(2).saturating_add(CONTAINER_BYTES)
}

/// A seed whose value is decoded [`Bounded`].
struct Seed<'t, 'm, S> {
    seed: S,
    tally: &'t Tally<'m>,
    limit: Option<usize>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<'_, '_, S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.seed.deserialize(Bounded { de: d, tally: self.tally, limit: self.limit })
    }
}

/// An array: its entries are counted against the limit of its key, if any, before each is decoded.
struct Seq<'t, 'm, A> {
    seq: A,
    tally: &'t Tally<'m>,
    limit: Option<usize>,
    count: usize,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Seq<'_, '_, A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        if let Some(l) = self.limit.map(|i| self.tally.limits[i]) {
            if self.count == l.max {
                // One more entry would be over the limit: refuse if there is one, before it is decoded.
                return match self.seq.next_element::<de::IgnoredAny>()? {
                    None => Ok(None),
                    Some(_) => Err(de::Error::custom(format!(
                        "`{}` has more than {} entries, the most allowed: {}",
                        l.key, l.max, l.what
                    ))),
                };
            }
        }
        self.count += 1;
        // Entries of entries are not the key's own entries: the limit applies to the outer array only.
        self.seq.next_element_seed(Seed { seed, tally: self.tally, limit: None })
    }

    fn size_hint(&self) -> Option<usize> {
        // A hint from the input is not trusted to size anything.
        None
    }
}

/// An object: each key is read through a recorder that finds its [`SeqLimit`], for the value that follows.
struct Map<'t, 'm, A> {
    map: A,
    tally: &'t Tally<'m>,
    next_limit: Option<usize>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Map<'_, '_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        let found = Cell::new(None);
        let key = self.map.next_key_seed(KeySeed { seed, tally: self.tally, found: &found })?;
        self.next_limit = found.get();
        Ok(key)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        let limit = self.next_limit.take();
        self.map.next_value_seed(Seed { seed, tally: self.tally, limit })
    }

    fn size_hint(&self) -> Option<usize> {
        None
    }
}

/// An externally tagged enum: its variant's content is decoded [`Bounded`].
struct Enum<'t, 'm, A> {
    data: A,
    tally: &'t Tally<'m>,
}

impl<'t, 'm, 'de, A: EnumAccess<'de>> EnumAccess<'de> for Enum<'t, 'm, A> {
    type Error = A::Error;
    type Variant = Variant<'t, 'm, A::Variant>;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self::Variant), A::Error> {
        let (v, variant) = self.data.variant_seed(Seed { seed, tally: self.tally, limit: None })?;
        Ok((v, Variant { variant, tally: self.tally }))
    }
}

struct Variant<'t, 'm, A> {
    variant: A,
    tally: &'t Tally<'m>,
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Variant<'_, '_, A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.variant.unit_variant()
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, A::Error> {
        self.variant.newtype_variant_seed(Seed { seed, tally: self.tally, limit: None })
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, A::Error> {
        self.variant.tuple_variant(len, Wrap { visitor: v, tally: self.tally, limit: None })
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, A::Error> {
        self.variant.struct_variant(fields, Wrap { visitor: v, tally: self.tally, limit: None })
    }
}

/// Decodes one JSON value of `text` as `T`, bounded by `tally` (see the module docs); trailing characters are
/// an error, as in `serde_json::from_str`.
pub fn from_json_str<'a, T: serde::Deserialize<'a>>(
    text: &'a str,
    tally: &Tally<'_>,
) -> serde_json::Result<T> {
    from_json_slice(text.as_bytes(), tally)
}

/// [`from_json_str`] on bytes.
pub fn from_json_slice<'a, T: serde::Deserialize<'a>>(
    json: &'a [u8],
    tally: &Tally<'_>,
) -> serde_json::Result<T> {
    from_json_slice_seed(json, tally, std::marker::PhantomData::<T>)
}

/// [`from_json_slice`] with a seed: a type whose values are larger than this module's stated bound per item
/// takes the tally in its seed and charges the rest itself ([`Tally::charge`]).
pub fn from_json_slice_seed<'a, S: DeserializeSeed<'a>>(
    json: &'a [u8],
    tally: &Tally<'_>,
    seed: S,
) -> serde_json::Result<S::Value> {
    let mut de = serde_json::Deserializer::from_slice(json);
    let value = seed.deserialize(Bounded::new(&mut de, tally))?;
    de.end()?;
    tally.flush().map_err(<serde_json::Error as de::Error>::custom)?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::RequestFields;
    use std::sync::Mutex;

    /// Records every report, and stops the decode past `max`.
    struct Budget {
        max: u64,
        reports: Mutex<Vec<u64>>,
    }

    impl Meter for Budget {
        fn built(&self, bytes: u64) -> Result<(), String> {
            self.reports.lock().unwrap().push(bytes);
            if bytes > self.max {
                return Err(format!("over the budget of {} bytes", self.max));
            }
            Ok(())
        }
    }

    fn budget(max: u64) -> Budget {
        Budget { max, reports: Mutex::new(Vec::new()) }
    }

    /// The bytes a request's fields hold once built (vectors at their capacity).
    fn held(f: &RequestFields) -> u64 {
        f.target.held_bytes()
    }

    #[test]
    fn the_tally_bounds_what_a_request_builds() {
        // Worst cases per wire byte: one-digit values, empty variates, and a long run of a single variate.
        let cases = [
            format!(r#"{{"target": [[{}1]], "horizon": 1}}"#, "0,".repeat(100_000)),
            format!(r#"{{"target": [{}[1]], "horizon": 1}}"#, "[],".repeat(50_000)),
            format!(r#"{{"target": [[{}null]], "horizon": 1}}"#, "null,".repeat(40_000)),
        ];
        for text in cases {
            let meter = budget(u64::MAX);
            let tally = Tally::new(&meter, &[]);
            let f: RequestFields = from_json_str(&text, &tally).unwrap();
            let (charged, built) = (tally.built(), held(&f));
            assert!(charged >= built, "charged {charged} < built {built}");
            // The stated bound: at most 32 × the wire bytes.
            assert!(
                charged <= 32 * text.len() as u64 + 1024,
                "charged {charged} for {} wire bytes",
                text.len()
            );
            assert!(!meter.reports.lock().unwrap().is_empty());
        }
    }

    #[test]
    fn a_meter_stops_the_decode_once_it_is_over() {
        let text = format!(r#"{{"target": [[{}1]], "horizon": 1}}"#, "1,".repeat(1_000_000));
        let meter = budget(1 << 20);
        let tally = Tally::new(&meter, &[]);
        let e = from_json_str::<RequestFields>(&text, &tally).unwrap_err().to_string();
        assert!(e.contains("over the budget of 1048576 bytes"), "{e}");
        // It stopped within one report of the budget, long before the end of the input.
        let last = *meter.reports.lock().unwrap().last().unwrap();
        assert!(last <= (1 << 20) + REPORT_EVERY, "{last}");
    }

    #[test]
    fn a_limited_key_refuses_its_entry_past_the_limit() {
        let limits = [SeqLimit { key: "target", max: 3, what: "variates (--max-variates)" }];
        let meter = budget(u64::MAX);
        let ok = Tally::new(&meter, &limits);
        let f: RequestFields = from_json_str(r#"{"target": [[1], [2], [3]], "horizon": 1}"#, &ok).unwrap();
        assert_eq!(f.target.rows(), 3);
        let over = Tally::new(&meter, &limits);
        let text = format!(r#"{{"horizon": 1, "target": [[1], [2], [3], [{}]]}}"#, "5,".repeat(10_000) + "5");
        let e = from_json_str::<RequestFields>(&text, &over).unwrap_err().to_string();
        assert!(e.contains("`target` has more than 3 entries") && e.contains("--max-variates"), "{e}");
        // The fourth variate was skipped, never built: its 10,001 values were not charged.
        assert!(over.built() < 4096, "{}", over.built());
        // Inner arrays are not the key's entries.
        let long = Tally::new(&meter, &limits);
        let text = format!(r#"{{"target": [[{}1]], "horizon": 1}}"#, "1,".repeat(10));
        assert_eq!(from_json_str::<RequestFields>(&text, &long).unwrap().target.row_len(0), 11);
    }

    #[test]
    fn errors_and_values_are_those_of_the_plain_decode() {
        let meter = Unmetered;
        for text in [
            r#"{"target": [[1, null, 3]], "horizon": 2, "id": "a", "quantiles": [0.5], "seed": 3}"#,
            r#"{"target": [[1]], "horizn": 1}"#,
            r#"{"target": [[1, "x"]], "horizon": 1}"#,
            r#"{"target": [[1]], "horizon": 1} x"#,
            r#"{"id": 7, "target": [[1]], "horizon": 1}"#,
        ] {
            let tally = Tally::new(&meter, &[]);
            let bounded = from_json_str::<RequestFields>(text, &tally).map_err(|e| e.to_string());
            let plain = serde_json::from_str::<RequestFields>(text).map_err(|e| e.to_string());
            assert_eq!(bounded, plain, "{text}");
        }
    }
}
