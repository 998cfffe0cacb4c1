//! [`TargetValues`]: a request's `target` as its reader holds it, before validation rounds it to f32.
//!
//! JSON numbers, table cells and float64 arrays are read as f64 and rounded to f32 once (what every family's
//! graphs take). A family that derives a column it was not given (`InputColumn::derived_when_absent`) derives it
//! from the values **as parsed**, before that rounding, as its reference does in f64; so readers that parse
//! text keep f64 until validation ([`TargetValues::F64`], NaN marking a missing point: 8 bytes a point, as
//! `Option<f32>`), and validation keeps an f64 copy only for such a request.
//!
//! Rounding is `x as f32` of the f64, which is what the readers did before (serde's f32 from a JSON number is
//! that cast of serde_json's f64; CSV and Parquet cells were parsed to f64 and cast), so the f32 values are
//! unchanged. A JSON integer beyond 2^53 (not exact in f64) is kept as its f32 widened, so it still rounds as
//! the integer itself does.

use std::fmt;

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

/// f32 points `[variate][time]`, `None` = missing: what a validated request holds.
pub type Points = Vec<Vec<Option<f32>>>;

/// f64 values `[variate][time]`, NaN = missing.
pub type Wide = Vec<Vec<f64>>;

/// One series' values, `[variate][time]`. Equal when they hold the same points (NaN, a missing point, equals
/// NaN: values are compared by their bits).
#[derive(Debug, Clone)]
pub enum TargetValues {
    /// f32 points, `None` = missing (arrays of float32, Open Inference Protocol tensors).
    F32(Vec<Vec<Option<f32>>>),
    /// Values as parsed, NaN = missing (JSON, tables, float64 arrays).
    F64(Vec<Vec<f64>>),
}

impl PartialEq for TargetValues {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (TargetValues::F32(a), TargetValues::F32(b)) => a == b,
            (TargetValues::F64(a), TargetValues::F64(b)) => {
                a.len() == b.len()
                    && a.iter().zip(b).all(|(x, y)| {
                        x.len() == y.len() && x.iter().zip(y).all(|(x, y)| x.to_bits() == y.to_bits())
                    })
            }
            _ => false,
        }
    }
}

impl Default for TargetValues {
    fn default() -> Self {
        TargetValues::F32(Vec::new())
    }
}

impl From<Vec<Vec<Option<f32>>>> for TargetValues {
    fn from(v: Vec<Vec<Option<f32>>>) -> Self {
        TargetValues::F32(v)
    }
}

impl From<Vec<Vec<f64>>> for TargetValues {
    fn from(v: Vec<Vec<f64>>) -> Self {
        TargetValues::F64(v)
    }
}

impl TargetValues {
    /// Variates (rows of `target`).
    pub fn rows(&self) -> usize {
        match self {
            TargetValues::F32(v) => v.len(),
            TargetValues::F64(v) => v.len(),
        }
    }

    /// Points of variate `v`.
    pub fn row_len(&self, v: usize) -> usize {
        match self {
            TargetValues::F32(x) => x[v].len(),
            TargetValues::F64(x) => x[v].len(),
        }
    }

    /// The bytes its vectors hold (at their capacity): what a bounded decode must have charged at least.
    #[cfg(test)]
    pub(crate) fn held_bytes(&self) -> u64 {
        fn of<T>(rows: &[Vec<T>], outer: usize) -> u64 {
            let inner: usize = rows.iter().map(|v| v.capacity() * std::mem::size_of::<T>()).sum();
            (outer * std::mem::size_of::<Vec<T>>() + inner) as u64
        }
        match self {
            TargetValues::F32(v) => of(v, v.capacity()),
            TargetValues::F64(v) => of(v, v.capacity()),
        }
    }

    /// The values in f64, `NaN` = missing (f32 input widened exactly).
    pub fn into_f64(self) -> Wide {
        match self {
            TargetValues::F32(v) => {
                v.iter().map(|row| row.iter().map(|x| x.map_or(f64::NAN, f64::from)).collect()).collect()
            }
            TargetValues::F64(v) => v,
        }
    }

    /// The f32 points (`None` = missing) and, when `keep_f64`, the values in f64 (`NaN` = missing; f32 input
    /// widened exactly).
    pub fn split(self, keep_f64: bool) -> (Points, Option<Wide>) {
        match self {
            TargetValues::F32(v) => {
                let wide = keep_f64.then(|| TargetValues::F32(v.clone()).into_f64());
                (v, wide)
            }
            TargetValues::F64(v) => {
                let narrow = v
                    .iter()
                    .map(|row| row.iter().map(|&x| (!x.is_nan()).then_some(x as f32)).collect())
                    .collect();
                (narrow, keep_f64.then_some(v))
            }
        }
    }
}

/// `[[number or null, ...], ...]` → [`TargetValues::F64`].
impl<'de> Deserialize<'de> for TargetValues {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let rows: Vec<Row> = Vec::deserialize(d)?;
        Ok(TargetValues::F64(rows.into_iter().map(|r| r.0).collect()))
    }
}

/// One variate of a JSON `target`.
struct Row(Vec<f64>);

impl<'de> Deserialize<'de> for Row {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_seq(RowVisitor)
    }
}

struct RowVisitor;

impl<'de> Visitor<'de> for RowVisitor {
    type Value = Row;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of numbers or null")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Row, A::Error> {
        // as serde's own Vec: no capacity from the size hint beyond a small cap (the hint is the client's)
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(Point(x)) = seq.next_element()? {
            out.push(x);
        }
        Ok(Row(out))
    }
}

/// One point: a number, or `null` (NaN).
struct Point(f64);

impl<'de> Deserialize<'de> for Point {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_option(PointVisitor)
    }
}

struct PointVisitor;

/// Beyond 2^53 an integer is not exact in f64: keep the f32 it rounds to (see the module docs).
fn integer(x: f64, as_f32: f32) -> f64 {
    if x.abs() <= 9_007_199_254_740_992.0 {
        x
    } else {
        f64::from(as_f32)
    }
}

impl<'de> Visitor<'de> for PointVisitor {
    type Value = Point;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Point, E> {
        Ok(Point(f64::NAN))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Point, E> {
        Ok(Point(f64::NAN))
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Point, D::Error> {
        d.deserialize_f64(PointVisitor)
    }

    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Point, E> {
        Ok(Point(x))
    }

    fn visit_i64<E: de::Error>(self, x: i64) -> Result<Point, E> {
        Ok(Point(integer(x as f64, x as f32)))
    }

    fn visit_u64<E: de::Error>(self, x: u64) -> Result<Point, E> {
        Ok(Point(integer(x as f64, x as f32)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> TargetValues {
        serde_json::from_str(text).unwrap()
    }

    /// The f32 points are those serde gives for `Vec<Vec<Option<f32>>>` (what requests held before).
    #[test]
    fn f32_points_are_serdes() {
        let text = "[[1.5, null, 3, -0.0, 0.1, 932.956787109375, 3.4028234663852886e38, 1e39, 16777217, \
                    18446744073709551615, -9223372036854775808, 1152921573326323713, 2.000000059604645]]";
        let want: Vec<Vec<Option<f32>>> = serde_json::from_str(text).unwrap();
        let (got, wide) = parse(text).split(false);
        assert!(wide.is_none());
        assert_eq!(got.len(), 1);
        for (g, w) in got[0].iter().zip(&want[0]) {
            assert_eq!(g.map(f32::to_bits), w.map(f32::to_bits), "{g:?} {w:?}");
        }
        assert_eq!(got[0].len(), want[0].len());
    }

    #[test]
    fn f64_values_are_kept_when_asked() {
        let (points, wide) = parse("[[0.1, null], [2, 3]]").split(true);
        assert_eq!(points, vec![vec![Some(0.1f32), None], vec![Some(2.0), Some(3.0)]]);
        let wide = wide.unwrap();
        assert_eq!(wide[0][0], 0.1f64);
        assert!(wide[0][1].is_nan());
        let (_, from_f32) = TargetValues::from(vec![vec![Some(0.1f32), None]]).split(true);
        let from_f32 = from_f32.unwrap();
        assert_eq!(from_f32[0][0], f64::from(0.1f32));
        assert!(from_f32[0][1].is_nan());
    }

    #[test]
    fn shapes_and_types_are_checked_by_serde() {
        for bad in ["[1, 2]", "[[\"x\"]]", "{\"a\": 1}", "[[true]]"] {
            assert!(serde_json::from_str::<TargetValues>(bad).is_err(), "{bad}");
        }
        assert_eq!(parse("[[], [1]]").rows(), 2);
        assert_eq!(parse("[[1, null]]"), parse("[[1.0, null]]"));
        assert_ne!(parse("[[1, null]]"), parse("[[1, 2]]"));
        assert_eq!(parse("[[], [1]]").row_len(1), 1);
    }
}
