//! The v2 request JSON as written, read within this model's limits: every list stops at its `MAX_*` entries
//! before one entry too many is built, parameters are checked as they are read (count, name length, string
//! length, kind), and tensor data is flattened as it is read. The decode is [`engines::bounded`]: what it builds
//! is charged to the caller's tally ([`parse_json`]).

use std::collections::BTreeMap;
use std::fmt;

use engines::bounded::Tally;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::super::error::ServeError;
use super::super::jsonscan::{NEG_INF_MARK, POS_INF_MARK};
use super::{bad, Param, MAX_DIMS, MAX_INPUTS, MAX_NAME, MAX_OUTPUTS, MAX_PARAMETERS, MAX_TEXT};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WireRequest {
    #[serde(default)]
    pub(super) id: Option<String>,
    #[serde(default)]
    pub(super) parameters: Option<Params>,
    pub(super) inputs: Capped<WireInput, Inputs>,
    #[serde(default)]
    pub(super) outputs: Option<Capped<WireOutput, Outputs>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WireInput {
    pub(super) name: String,
    pub(super) datatype: String,
    pub(super) shape: Capped<i64, Dims>,
    #[serde(default)]
    pub(super) parameters: Option<Params>,
    #[serde(default)]
    pub(super) data: Option<FlatData>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WireOutput {
    pub(super) name: String,
    #[serde(default)]
    pub(super) parameters: Option<Params>,
}

/// How many entries a list of the request may hold, and what to say past that.
pub(super) trait Cap {
    const MAX: usize;
    const WHAT: &'static str;
}

pub(super) struct Inputs;
impl Cap for Inputs {
    const MAX: usize = MAX_INPUTS;
    const WHAT: &'static str =
        "inputs; a model takes target, lengths, quantile_levels and id_mask (or timestamps and future_timestamps, \
         for a model that reads wall clocks), each once";
}

pub(super) struct Outputs;
impl Cap for Outputs {
    const MAX: usize = MAX_OUTPUTS;
    const WHAT: &'static str =
        "outputs; this model has four (the point forecast, quantiles, quantile_levels, samples)";
}

pub(super) struct Dims;
impl Cap for Dims {
    const MAX: usize = MAX_DIMS;
    const WHAT: &'static str = "shape dimensions; `target` must be [V, T] or [N, V, T]";
}

/// A list that stops at `C::MAX` entries: one more is an error before it is built.
pub(super) struct Capped<T, C>(pub(super) Vec<T>, std::marker::PhantomData<C>);

impl<'de, T: Deserialize<'de>, C: Cap> Deserialize<'de> for Capped<T, C> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T, C>(std::marker::PhantomData<(T, C)>);
        impl<'de, T: Deserialize<'de>, C: Cap> Visitor<'de> for V<T, C> {
            type Value = Capped<T, C>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "an array of at most {} {}", C::MAX, C::WHAT)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                loop {
                    if v.len() == C::MAX {
                        return match seq.next_element::<de::IgnoredAny>()? {
                            None => Ok(Capped(v, std::marker::PhantomData)),
                            Some(_) => Err(de::Error::custom(format!("more than {} {}", C::MAX, C::WHAT))),
                        };
                    }
                    match seq.next_element()? {
                        Some(x) => v.push(x),
                        None => return Ok(Capped(v, std::marker::PhantomData)),
                    }
                }
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
    }
}

/// Parameters as read: at most [`MAX_PARAMETERS`], names of at most [`MAX_NAME`] bytes, each a string (at most
/// [`MAX_TEXT`] bytes), a number or a boolean, checked entry by entry as they are read.
pub(super) struct Params(pub(super) BTreeMap<String, Param>);

impl<'de> Deserialize<'de> for Params {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Params;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of parameters")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Params, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(key) = map.next_key::<ParamName>()? {
                    if out.len() == MAX_PARAMETERS && !out.contains_key(&key.0) {
                        return Err(de::Error::custom(format!(
                            "more than {MAX_PARAMETERS} parameters; this model takes horizon, samples, seed, \
                             strict_context, timeout and binary_data_output"
                        )));
                    }
                    let value = map.next_value_seed(ParamSeed(&key.0))?;
                    out.insert(key.0, value);
                }
                Ok(Params(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A parameter's name, at most [`MAX_NAME`] bytes.
struct ParamName(String);

impl<'de> Deserialize<'de> for ParamName {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ParamName;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a parameter name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ParamName, E> {
                if v.len() > MAX_NAME {
                    return Err(E::custom(format!(
                        "parameter `{}` has a name of {} bytes; names are at most {MAX_NAME}",
                        super::super::error::clip(v),
                        v.len()
                    )));
                }
                Ok(ParamName(v.to_string()))
            }
        }
        d.deserialize_str(V)
    }
}

/// One parameter's value; `.0` is its name, for messages.
struct ParamSeed<'a>(&'a str);

impl<'de> DeserializeSeed<'de> for ParamSeed<'_> {
    type Value = Param;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Param, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ParamSeed<'_> {
    type Value = Param;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string, number or boolean")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Param, E> {
        Ok(Param::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Param, E> {
        Ok(Param::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Param, E> {
        Ok(i64::try_from(v).map_or(Param::Float(v as f64), Param::Int))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Param, E> {
        Ok(Param::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Param, E> {
        if v.len() > MAX_TEXT {
            return Err(E::custom(format!(
                "parameter `{}` is a string of {} bytes; string parameters are at most {MAX_TEXT}",
                self.0,
                v.len()
            )));
        }
        Ok(Param::Str(v.to_string()))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Param, E> {
        Err(E::custom(self.not_taken("null")))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Param, A::Error> {
        Err(de::Error::custom(self.not_taken("an array")))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> Result<Param, A::Error> {
        Err(de::Error::custom(self.not_taken("an object")))
    }
}

impl ParamSeed<'_> {
    fn not_taken(&self, what: &str) -> String {
        format!("parameter `{}` is {what}; parameters are strings, numbers or booleans", self.0)
    }
}

/// JSON tensor data, flat or nested, flattened row-major into f64 with NaN for `null` (and the `NaN` token) and
/// ±inf for the `±Infinity` tokens ([`super::jsonscan`]'s markers). f64 holds every FP32 value and every INT64 up to 2^53 exactly.
pub(super) struct FlatData(pub(super) Vec<f64>);

impl<'de> Deserialize<'de> for FlatData {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut out = Vec::new();
        FlatSeed(&mut out).deserialize(d)?;
        Ok(FlatData(out))
    }
}

/// Appends the elements of one (possibly nested) array. serde_json's recursion limit bounds the nesting.
struct FlatSeed<'a>(&'a mut Vec<f64>);

impl<'de> DeserializeSeed<'de> for FlatSeed<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for FlatSeed<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("numbers or null, in a flat or nested array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if let Some(n) = seq.size_hint() {
            self.0.reserve(n);
        }
        while seq.next_element_seed(FlatSeed(self.0))?.is_some() {}
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        self.0.push(v);
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.0.push(v as f64);
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.0.push(v as f64);
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.push(f64::NAN);
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Err(E::custom("tensor data holds a boolean; totoc's tensors are FP32 or INT64 numbers"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        match v {
            POS_INF_MARK => {
                self.0.push(f64::INFINITY);
                return Ok(());
            }
            NEG_INF_MARK => {
                self.0.push(f64::NEG_INFINITY);
                return Ok(());
            }
            _ => {}
        }
        Err(E::custom(
            "tensor data holds a string; totoc's tensors are FP32 or INT64 numbers (null = missing)",
        ))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<(), A::Error> {
        Err(de::Error::custom("tensor data holds an object; send numbers in a flat or nested array"))
    }
}

/// Reads the JSON object of a request, bounded by `tally`, with the NaN hint the CLI gives too (Python's
/// `json.dumps` writes NaN).
pub(super) fn parse_json<T: for<'de> Deserialize<'de>>(
    json: &[u8],
    tally: &Tally<'_>,
) -> Result<T, ServeError> {
    engines::bounded::from_json_slice(json, tally).map_err(|e| {
        let text = String::from_utf8_lossy(json);
        let line = text.lines().nth(e.line().saturating_sub(1)).unwrap_or("");
        let rest = line.get(e.column().saturating_sub(1)..).unwrap_or("");
        let rest = rest.trim_start_matches(['-', '+']);
        if rest.starts_with("NaN") || rest.starts_with("Infinity") {
            bad(format!(
                "request JSON: {e}: NaN/Infinity are not JSON; they are read only as elements of an input's \
                 `data` (NaN = a missing point, like null)"
            ))
        } else {
            bad(format!("request JSON: {e}"))
        }
    })
}
