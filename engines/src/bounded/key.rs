//! The keys of an object under [`super::Bounded`]: read as every value is (charged), and matched against the
//! tally's [`super::SeqLimit`]s, so that the value that follows knows the limit of its key.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, Visitor};

use super::{Tally, Wrap};

/// Reads a key [`Bounded`], noting which [`SeqLimit`] names it.
pub(super) struct KeySeed<'t, 'm, 'f, K> {
    pub(super) seed: K,
    pub(super) tally: &'t Tally<'m>,
    pub(super) found: &'f Cell<Option<usize>>,
}

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, '_, '_, K> {
    type Value = K::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<K::Value, D::Error> {
        self.seed.deserialize(KeyDe { de: d, tally: self.tally, found: self.found })
    }
}

/// The deserializer of a key: as [`Bounded`], and the key's text is matched against the limits.
struct KeyDe<'t, 'm, 'f, D> {
    de: D,
    tally: &'t Tally<'m>,
    found: &'f Cell<Option<usize>>,
}

macro_rules! forward_key {
    ($($method:ident),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
                self.de.$method(KeyVisitor { visitor, tally: self.tally, found: self.found })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for KeyDe<'_, '_, '_, D> {
    type Error = D::Error;

    forward_key!(
        deserialize_any,
        deserialize_str,
        deserialize_string,
        deserialize_identifier,
        deserialize_ignored_any,
        deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.de.deserialize_unit_struct(name, KeyVisitor { visitor: v, tally: self.tally, found: self.found })
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        let kv = KeyVisitor { visitor: v, tally: self.tally, found: self.found };
        self.de.deserialize_newtype_struct(name, kv)
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, D::Error> {
        self.de.deserialize_tuple(len, KeyVisitor { visitor: v, tally: self.tally, found: self.found })
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        v: V,
    ) -> Result<V::Value, D::Error> {
        let kv = KeyVisitor { visitor: v, tally: self.tally, found: self.found };
        self.de.deserialize_tuple_struct(name, len, kv)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        let kv = KeyVisitor { visitor: v, tally: self.tally, found: self.found };
        self.de.deserialize_struct(name, fields, kv)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        let kv = KeyVisitor { visitor: v, tally: self.tally, found: self.found };
        self.de.deserialize_enum(name, variants, kv)
    }

    fn deserialize_i128<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.de.deserialize_i128(KeyVisitor { visitor: v, tally: self.tally, found: self.found })
    }

    fn deserialize_u128<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.de.deserialize_u128(KeyVisitor { visitor: v, tally: self.tally, found: self.found })
    }

    fn is_human_readable(&self) -> bool {
        self.de.is_human_readable()
    }
}

/// A key's visitor: string keys are matched against the limits; everything is charged as [`Wrap`] charges.
struct KeyVisitor<'t, 'm, 'f, V> {
    visitor: V,
    tally: &'t Tally<'m>,
    found: &'f Cell<Option<usize>>,
}

impl<'t, 'm, V> KeyVisitor<'t, 'm, '_, V> {
    fn note(&self, key: &str) {
        self.found.set(self.tally.limit_of(key));
    }

    fn wrap(self) -> Wrap<'t, 'm, V> {
        Wrap { visitor: self.visitor, tally: self.tally, limit: None }
    }
}

macro_rules! key_value {
    ($($method:ident: $t:ty),* $(,)?) => {
        $(
            fn $method<E: de::Error>(self, v: $t) -> Result<Self::Value, E> {
                self.wrap().$method(v)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for KeyVisitor<'_, '_, '_, V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.visitor.expecting(f)
    }

    key_value!(
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
        visit_bytes: &[u8],
        visit_byte_buf: Vec<u8>,
    );

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        self.note(v);
        self.wrap().visit_str(v)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        self.note(v);
        self.wrap().visit_borrowed_str(v)
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        self.note(&v);
        self.wrap().visit_string(v)
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Self::Value, E> {
        self.wrap().visit_borrowed_bytes(v)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.wrap().visit_none()
    }

    fn visit_some<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
        self.wrap().visit_some(d)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.wrap().visit_unit()
    }

    fn visit_newtype_struct<D2: Deserializer<'de>>(self, d: D2) -> Result<Self::Value, D2::Error> {
        self.wrap().visit_newtype_struct(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.wrap().visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.wrap().visit_map(map)
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.wrap().visit_enum(data)
    }
}
