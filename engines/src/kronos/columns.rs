//! The candles of one series, as upstream's `KronosPredictor.predict` prepares them (k:522-538 of
//! `kronos_finance/_vendor/kronos_model/kronos.py`): the named input columns checked, the missing ones derived,
//! the matrix rounded to f32.
//!
//! Upstream's rules, reproduced:
//! * `open`, `high`, `low`, `close` are required (lowercase names, as upstream's `df.columns` check);
//! * no `volume`: volume **and amount** are 0, even when an `amount` column is given ([`VolumeSource::Absent`]);
//! * `volume` without `amount`: `amount = volume × df[price_cols].mean(axis=1)` in f64 ([`derived_amount`]);
//! * every value is rounded to f32 (`.values.astype(np.float32)`).
//!
//! Upstream refuses NaN (k:532) but lets ±inf through (into NaN statistics); totoc refuses NaN, ±inf, null and
//! values that overflow f32, naming the series, the row and the column.
//!
//! **f64 in, for the amount.** Upstream's DataFrame holds f64 (a CSV parsed to f64), so the derived amount is
//! computed from the f64 values and rounded once. Computed from values already rounded to f32 it differs in the
//! last bits (and whenever a price has more digits than f32 keeps). A caller that parsed the numbers from text
//! (tables: CSV, Parquet f64, JSON) must pass them as f64 ([`ColumnValues::F64`]); values that arrive as f32
//! (a JSON request's `target`, parsed to f32) are exact in f64 and give what upstream gives for a DataFrame of
//! those f32 values. Rounding text to f64 then to f32 is also what upstream does for the prices, which can differ
//! in the last bit from rounding the text straight to f32: parse to f64 first.

use crate::error::{Error, Result};

/// Upstream's input columns in its order (`price_cols + [vol_col, amt_vol]`, k:484-486); also the order of a
/// request that names no `columns`.
pub const COLUMNS: [&str; 6] = ["open", "high", "low", "close", "volume", "amount"];

/// How many of [`COLUMNS`] are prices (all required).
pub const PRICES: usize = 4;
const VOLUME: usize = 4;
const AMOUNT: usize = 5;

/// One input column's values, as the caller holds them.
#[derive(Debug, Clone, Copy)]
pub enum ColumnValues<'a> {
    F32(&'a [f32]),
    /// Values parsed from text: keep them f64 (see the module notes).
    F64(&'a [f64]),
    /// A request's `target` row; `None` (null) is refused.
    NullableF32(&'a [Option<f32>]),
    NullableF64(&'a [Option<f64>]),
}

impl ColumnValues<'_> {
    pub fn len(&self) -> usize {
        match self {
            ColumnValues::F32(v) => v.len(),
            ColumnValues::F64(v) => v.len(),
            ColumnValues::NullableF32(v) => v.len(),
            ColumnValues::NullableF64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `row` in f64 (exact for f32 input), `None` for null.
    fn get(&self, row: usize) -> Option<f64> {
        match self {
            ColumnValues::F32(v) => Some(f64::from(v[row])),
            ColumnValues::F64(v) => Some(v[row]),
            ColumnValues::NullableF32(v) => v[row].map(f64::from),
            ColumnValues::NullableF64(v) => v[row],
        }
    }
}

/// One named input column.
#[derive(Debug, Clone, Copy)]
pub struct Column<'a> {
    pub name: &'a str,
    pub values: ColumnValues<'a>,
}

/// Where volume and amount came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeSource {
    /// Both given.
    Given,
    /// Volume given, amount derived ([`derived_amount`]).
    AmountDerived,
    /// No volume: both are 0 (the forecast's volume and amount come back as `pred·1e-5`, their zero std).
    Absent,
    /// No volume but an amount: upstream sets both to 0 and drops the amount; a caller may want to say so.
    AbsentAmountIgnored,
}

/// The candles of one series: `[6][N]` f32 columns in [`COLUMNS`] order (column-major, as upstream's
/// Fortran-ordered matrix, whose statistics are per contiguous column).
#[derive(Debug, Clone, PartialEq)]
pub struct Candles {
    rows: usize,
    columns: [Vec<f32>; 6],
    volume: VolumeSource,
}

impl Candles {
    /// N, the number of candles.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Column `c` of [`COLUMNS`], `[N]`.
    pub fn column(&self, c: usize) -> &[f32] {
        &self.columns[c]
    }

    /// All six columns.
    pub fn columns(&self) -> &[Vec<f32>; 6] {
        &self.columns
    }

    /// Row `i`, the six values in [`COLUMNS`] order.
    pub fn row(&self, i: usize) -> [f32; 6] {
        std::array::from_fn(|c| self.columns[c][i])
    }

    pub fn volume_source(&self) -> VolumeSource {
        self.volume
    }

    /// Keeps the last `n` candles (all of them when there are fewer): a context cut to what an engine encodes.
    /// Every value is per row (the derived amount too), so this equals preparing the last `n` rows alone.
    pub fn keep_last(&mut self, n: usize) {
        let drop = self.rows.saturating_sub(n);
        for c in &mut self.columns {
            c.drain(..drop);
        }
        self.rows -= drop;
    }
}

/// pandas' derived amount (k:530): `volume × df[price_cols].mean(axis=1)` in f64. pandas 2.2's row mean over the
/// four f64 columns (`nanops.nanmean`, no bottleneck) is numpy's sum over each row from the identity `0.0`, in
/// column order, divided by the count 4.0 (checked bit for bit against pandas by `tests/data/kronos/amount.json`;
/// `(o+h)+(l+c)` differs in about one row in four).
pub fn derived_amount(open: f64, high: f64, low: f64, close: f64, volume: f64) -> f64 {
    let mean = ((((0.0 + open) + high) + low) + close) / 4.0;
    volume * mean
}

/// Checks and prepares the input columns of the series `at` (upstream's rules, see the module notes). Columns
/// are checked in the order given, each from row 0; the first bad value is the error.
pub fn prepare_columns(at: &str, columns: &[Column]) -> Result<Candles> {
    let slots = column_slots(at, columns)?;
    let rows = columns[0].values.len();
    if rows == 0 {
        return Err(refuse(at, "the context is empty; send at least one candle".to_string()));
    }
    for c in columns {
        if c.values.len() != rows {
            return Err(refuse(
                at,
                format!(
                    "column `{}` has {} rows but `{}` has {rows}; give every column one value per candle",
                    c.name,
                    c.values.len(),
                    columns[0].name
                ),
            ));
        }
    }
    let given = |c: usize| slots[c].map(|i| &columns[i]);
    let mut out: [Vec<f32>; 6] = Default::default();
    for (c, col) in out.iter_mut().enumerate().take(PRICES) {
        let values = given(c).expect("column_slots checked the prices").values;
        *col = to_f32(at, COLUMNS[c], values)?;
    }
    let volume = match (given(VOLUME), given(AMOUNT)) {
        (Some(v), Some(a)) => {
            out[VOLUME] = to_f32(at, COLUMNS[VOLUME], v.values)?;
            out[AMOUNT] = to_f32(at, COLUMNS[AMOUNT], a.values)?;
            VolumeSource::Given
        }
        (Some(v), None) => {
            out[VOLUME] = to_f32(at, COLUMNS[VOLUME], v.values)?;
            out[AMOUNT] = amount_column(at, columns, &slots, rows)?;
            VolumeSource::AmountDerived
        }
        (None, amount) => {
            // checked all the same: a bad value in a column the caller sent is an error, not silently dropped
            if let Some(a) = amount {
                to_f32(at, COLUMNS[AMOUNT], a.values)?;
            }
            out[VOLUME] = vec![0.0; rows];
            out[AMOUNT] = vec![0.0; rows];
            if amount.is_some() {
                VolumeSource::AbsentAmountIgnored
            } else {
                VolumeSource::Absent
            }
        }
    };
    Ok(Candles { rows, columns: out, volume })
}

/// Where each of [`COLUMNS`] is in `columns` (names checked: known, once each, the prices present).
fn column_slots(at: &str, columns: &[Column]) -> Result<[Option<usize>; 6]> {
    let mut slots = [None; 6];
    for (i, c) in columns.iter().enumerate() {
        let Some(k) = COLUMNS.iter().position(|&n| n == c.name) else {
            let hint = match COLUMNS.iter().find(|n| n.eq_ignore_ascii_case(c.name.trim())) {
                Some(n) => format!("column names are lowercase: use `{n}`"),
                None => {
                    "the columns are open, high, low, close (required), volume and amount (optional)".into()
                }
            };
            return Err(refuse(at, format!("`{}` is not a Kronos input column; {hint}", c.name)));
        };
        if slots[k].replace(i).is_some() {
            return Err(refuse(at, format!("column `{}` is given twice; give each column once", c.name)));
        }
    }
    let missing: Vec<String> =
        (0..PRICES).filter(|&k| slots[k].is_none()).map(|k| format!("`{}`", COLUMNS[k])).collect();
    if !missing.is_empty() {
        return Err(refuse(
            at,
            format!(
                "the price column{} {} {} missing; Kronos needs open, high, low and close (volume and amount are optional)",
                if missing.len() > 1 { "s" } else { "" },
                missing.join(", "),
                if missing.len() > 1 { "are" } else { "is" }
            ),
        ));
    }
    Ok(slots)
}

/// The derived amount column in f32, from the f64 values of volume and the prices.
fn amount_column(at: &str, columns: &[Column], slots: &[Option<usize>; 6], rows: usize) -> Result<Vec<f32>> {
    let value = |k: usize, row: usize| slots[k].and_then(|i| columns[i].values.get(row)).unwrap_or(f64::NAN);
    (0..rows)
        .map(|row| {
            let a = derived_amount(value(0, row), value(1, row), value(2, row), value(3, row), value(VOLUME, row));
            let a32 = a as f32;
            if a32.is_finite() {
                Ok(a32)
            } else {
                Err(refuse(
                    at,
                    format!(
                        "row {row}: the derived amount, volume × mean(open, high, low, close) = {a:e}, overflows f32 \
                         (|x| > 3.4e38); send an `amount` column or rescale volume"
                    ),
                ))
            }
        })
        .collect()
}

/// One column rounded to f32 (`astype(np.float32)`: round to nearest), refusing null, NaN, ±inf and overflow.
fn to_f32(at: &str, name: &str, values: ColumnValues) -> Result<Vec<f32>> {
    (0..values.len())
        .map(|row| {
            let bad = |what: String| {
                refuse(
                    at,
                    format!(
                        "row {row}, column `{name}`: {what}; Kronos takes no missing or non-finite values: \
                         drop or fill that candle"
                    ),
                )
            };
            match values.get(row) {
                None => Err(bad("null".into())),
                Some(x) if x.is_nan() => Err(bad("NaN".into())),
                Some(x) if x.is_infinite() => Err(bad(format!("{x}"))),
                Some(x) if !(x as f32).is_finite() => Err(bad(format!("{x:e} overflows f32 (|x| > 3.4e38)"))),
                Some(x) => Ok(x as f32),
            }
        })
        .collect()
}

fn refuse(at: &str, message: String) -> Error {
    Error::NotSupported { at: at.to_string(), message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kronos::testdata::{hex_f32, hex_f64, vectors, SplitMix};

    fn cols<'a>(names: &[&'a str], values: &'a [Vec<f64>]) -> Vec<Column<'a>> {
        names.iter().zip(values).map(|(&name, v)| Column { name, values: ColumnValues::F64(v) }).collect()
    }

    fn err(names: &[&str], values: &[Vec<f64>]) -> String {
        prepare_columns("series GOOG", &cols(names, values)).unwrap_err().to_string()
    }

    /// The generator's rows of prices in cents and integer volumes.
    fn cent_rows(seed: u64, n: usize) -> Vec<[f64; 5]> {
        let mut r = SplitMix::new(seed);
        (0..n)
            .map(|_| {
                let base = 1 + r.next_u64() % 500_000;
                let mut row = [0.0; 5];
                for p in row.iter_mut().take(4) {
                    *p = (base + r.next_u64() % 2000) as f64 / 100.0;
                }
                row[4] = (r.next_u64() % 1_000_000_000) as f64;
                row
            })
            .collect()
    }

    fn check_amounts(what: &str, rows: &[[f64; 5]], case: &serde_json::Value) {
        let want64 = hex_f64(case["amount64"].as_str().unwrap());
        let want32 = hex_f32(case["amount32"].as_str().unwrap());
        assert_eq!(rows.len(), want64.len());
        for (i, r) in rows.iter().enumerate() {
            let a = derived_amount(r[0], r[1], r[2], r[3], r[4]);
            assert_eq!(a.to_bits(), want64[i].to_bits(), "{what} row {i}: {a:e} vs pandas {:e}", want64[i]);
            assert_eq!((a as f32).to_bits(), want32[i].to_bits(), "{what} row {i}: f32");
        }
    }

    #[test]
    fn derived_amount_matches_pandas_bit_for_bit() {
        let v = vectors("amount");
        let cents =
            cent_rows(v["cents_seed"].as_u64().unwrap(), v["cents"]["rows"].as_u64().unwrap() as usize);
        check_amounts("cents", &cents, &v["cents"]);
        let flat = hex_f64(v["special"]["inputs"].as_str().unwrap());
        let special: Vec<[f64; 5]> = flat.chunks(5).map(|c| [c[0], c[1], c[2], c[3], c[4]]).collect();
        check_amounts("special", &special, &v["special"]);
    }

    #[test]
    fn amount_is_derived_from_the_f64_values() {
        let rows = cent_rows(42, 400);
        let v = vectors("amount");
        let want32 = hex_f32(v["cents"]["amount32"].as_str().unwrap());
        let t: Vec<Vec<f64>> = (0..5).map(|c| rows.iter().map(|r| r[c]).collect()).collect();
        let candles = prepare_columns("s", &cols(&["open", "high", "low", "close", "volume"], &t)).unwrap();
        assert_eq!(candles.volume_source(), VolumeSource::AmountDerived);
        assert_eq!(candles.column(5), want32.as_slice());
        // from values first rounded to f32 the amount is another number in some rows: why the f64 matters
        let differs = rows
            .iter()
            .zip(&want32)
            .filter(|(r, &w)| {
                let f = |x: f64| f64::from(x as f32);
                (derived_amount(f(r[0]), f(r[1]), f(r[2]), f(r[3]), f(r[4])) as f32) != w
            })
            .count();
        assert!(differs > 0, "every row agreed from f32 inputs");
        // the prices and volume are upstream's astype(np.float32)
        assert_eq!(candles.row(3)[..5], std::array::from_fn::<f32, 5, _>(|c| rows[3][c] as f32));
    }

    #[test]
    fn missing_volume_zeroes_volume_and_amount_even_when_amount_is_given() {
        let t = vec![vec![1.0, 2.0], vec![1.5, 2.5], vec![0.5, 1.5], vec![1.2, 2.2], vec![7.0, 8.0]];
        let c = prepare_columns("s", &cols(&["open", "high", "low", "close", "amount"], &t)).unwrap();
        assert_eq!(c.volume_source(), VolumeSource::AbsentAmountIgnored);
        assert_eq!((c.column(4), c.column(5)), (&[0.0f32, 0.0][..], &[0.0f32, 0.0][..]));
        let c = prepare_columns("s", &cols(&["close", "low", "high", "open"], &t[..4])).unwrap();
        assert_eq!(c.volume_source(), VolumeSource::Absent);
        // columns come back in upstream's order whatever the order given
        assert_eq!(c.row(1), [2.2, 1.5, 2.5, 2.0, 0.0, 0.0]);
        let all = prepare_columns("s", &cols(&COLUMNS, &[t.clone(), vec![vec![3.0, 4.0]]].concat())).unwrap();
        assert_eq!((all.volume_source(), all.row(0)[4..].to_vec()), (VolumeSource::Given, vec![7.0, 3.0]));
    }

    #[test]
    fn f32_and_nullable_inputs() {
        let o = [1.0f32, 2.0];
        let n = [Some(1.5f32), Some(2.5)];
        let c = prepare_columns(
            "s",
            &[
                Column { name: "open", values: ColumnValues::F32(&o) },
                Column { name: "high", values: ColumnValues::NullableF32(&n) },
                Column { name: "low", values: ColumnValues::F32(&o) },
                Column { name: "close", values: ColumnValues::NullableF64(&[Some(1.0), Some(3.0)]) },
                Column { name: "volume", values: ColumnValues::F32(&[10.0, 0.0]) },
            ],
        )
        .unwrap();
        assert_eq!(c.row(0), [1.0, 1.5, 1.0, 1.0, 10.0, 11.25]);
        assert_eq!(c.row(1)[5], 0.0);
        let null = [Some(1.0f32), None];
        let e = prepare_columns(
            "request 2",
            &[
                Column { name: "open", values: ColumnValues::F32(&o) },
                Column { name: "high", values: ColumnValues::F32(&o) },
                Column { name: "low", values: ColumnValues::NullableF32(&null) },
                Column { name: "close", values: ColumnValues::F32(&o) },
            ],
        )
        .unwrap_err();
        assert!(e.is_request_error());
        assert!(e.to_string().starts_with("request 2: row 1, column `low`: null;"), "{e}");
    }

    #[test]
    fn bad_input_names_series_row_and_column() {
        let ok = vec![1.0, 2.0, 3.0];
        let four = vec![ok.clone(); 4];
        let with = |c: usize, row: usize, x: f64| {
            let mut t = vec![ok.clone(); 5];
            t[c][row] = x;
            t
        };
        let names = ["open", "high", "low", "close", "volume"];
        let cases: Vec<(String, &str)> = vec![
            (err(&names, &with(3, 2, f64::NAN)), "series GOOG: row 2, column `close`: NaN;"),
            (err(&names, &with(1, 0, f64::INFINITY)), "series GOOG: row 0, column `high`: inf;"),
            (err(&names, &with(4, 1, f64::NEG_INFINITY)), "row 1, column `volume`: -inf;"),
            (err(&names, &with(0, 1, 1e39)), "row 1, column `open`: 1e39 overflows f32"),
            (
                err(&names, &with(4, 2, 2e38)),
                "row 2: the derived amount, volume × mean(open, high, low, close) = 6",
            ),
            (err(&["open", "high", "low"], &four[..3]), "the price column `close` is missing; Kronos needs"),
            (err(&["open", "low"], &four[..2]), "the price columns `high`, `close` are missing"),
            (
                err(&["open", "high", "low", "Close"], &four),
                "`Close` is not a Kronos input column; column names are lowercase: use `close`",
            ),
            (
                err(&["open", "high", "low", "close", "vwap"], &[four.clone(), vec![ok.clone()]].concat()),
                "`vwap` is not a Kronos input column; the columns are open",
            ),
            (
                err(&["open", "high", "low", "close", "open"], &[four.clone(), vec![ok.clone()]].concat()),
                "column `open` is given twice",
            ),
            (
                err(&["open", "high", "low", "close"], &[four[..3].to_vec(), vec![vec![1.0]]].concat()),
                "column `close` has 1 rows but `open` has 3",
            ),
            (err(&["open", "high", "low", "close"], &vec![vec![]; 4]), "the context is empty"),
        ];
        for (got, want) in cases {
            assert!(got.contains(want), "{got:?} should contain {want:?}");
        }
        // a bad amount is refused even where upstream drops the column (no volume)
        let bad_amount = err(
            &["open", "high", "low", "close", "amount"],
            &[four.clone(), vec![vec![1.0, f64::NAN, 1.0]]].concat(),
        );
        assert!(bad_amount.contains("row 1, column `amount`: NaN"), "{bad_amount}");
    }
}
