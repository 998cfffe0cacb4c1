//! Parquet tables (arrow-rs `parquet`), with the column roles of CSV tables ([`super::layout`]). Only the id,
//! timestamp and target columns are decoded.
//!
//! Column types: ids are text (also dictionary-encoded, as pandas categoricals are written) or integers;
//! timestamps are Arrow timestamps (any unit; with or without a time zone), dates (`date32`, `date64`), ISO 8601
//! text, or integer epochs (`--timestamp-unit`); targets are floating-point or integer numbers, where null and
//! NaN are missing points (pandas and polars write missing floats as either).

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef};
use arrow_schema::{DataType, TimeUnit};
use exporter::registry::family::InputColumn;
use jiff::tz::{Offset, TimeZone};
use jiff::Timestamp;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::calendar::parse_zone;
use super::error::{DataError, Loc, Result};
use super::layout::Layout;
use super::series::{Collector, IdRef};
use super::timestamps::{epoch, parse_text, EpochUnit, Stamp, StampStyle};
use super::{ReadOptions, TimeKind};

/// Rows decoded per batch.
const BATCH_ROWS: usize = 64 * 1024;

/// Reads the rows of a Parquet file (its bytes) into a [`Collector`].
pub fn read(
    bytes: bytes::Bytes,
    source: &str,
    opts: &ReadOptions,
    family: Option<&'static [InputColumn]>,
) -> Result<(Layout, TimeKind, Collector)> {
    let not_parquet = |e: parquet::errors::ParquetError| {
        DataError::input(
            source,
            format!("cannot read it as Parquet ({e})"),
            "give a Parquet file, or name the format with --input-format",
        )
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(not_parquet)?;
    let schema = builder.schema().clone();
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let layout = Layout::resolve(&names, opts, source, family)?;
    let mut wanted: Vec<usize> =
        layout.id.into_iter().chain(layout.time).chain(layout.targets.iter().copied()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    // A projected batch holds the wanted columns in schema order.
    let slot = |i: usize| wanted.binary_search(&i).expect("wanted column");
    let mask = ProjectionMask::roots(builder.parquet_schema(), wanted.iter().copied());
    let reader = builder.with_projection(mask).with_batch_size(BATCH_ROWS).build().map_err(not_parquet)?;

    let batches = reader.map(|batch| {
        batch.map_err(|e| {
            DataError::input(source, format!("cannot decode it ({e})"), "check that the file is complete")
        })
    });
    let (time_kind, rows) = collect(&schema, &layout, batches, &slot, source, opts)?;
    Ok((layout, time_kind, rows))
}

/// The rows of record batches into a [`Collector`]: Parquet's decoded batches, or the batches of an Arrow table
/// handed over in memory ([`super::arrow_in`]). `slot(i)` is the batch column of schema column `i` (a projected
/// batch holds only the wanted columns).
pub(super) fn collect(
    schema: &arrow_schema::Schema,
    layout: &Layout,
    batches: impl Iterator<Item = Result<arrow_array::RecordBatch>>,
    slot: &dyn Fn(usize) -> usize,
    source: &str,
    opts: &ReadOptions,
) -> Result<(TimeKind, Collector)> {
    let time_kind = match layout.time.map(|i| schema.field(i).data_type()) {
        None | Some(DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => TimeKind::Text,
        Some(t) if t.is_integer() => TimeKind::Epoch(opts.timestamp_unit),
        Some(t @ (DataType::Timestamp(..) | DataType::Date32 | DataType::Date64)) => {
            TimeKind::Arrow(t.clone())
        }
        Some(t) => {
            return Err(DataError::input(
                source,
                format!("timestamp column `{}` has type {t}", layout.names[layout.time.unwrap_or(0)]),
                "store timestamps as a timestamp, date, ISO 8601 text or integer epoch column",
            ))
        }
    };
    let mut rows = Collector::new(layout.targets.len());
    let mut values = vec![None; layout.targets.len()];
    let mut first_row = 1u64;
    for batch in batches {
        let batch = batch?;
        let at_row = |r: usize| Loc::Row(first_row + r as u64);
        let ids = match layout.id {
            Some(i) => Some(Ids::new(batch.column(slot(i)), &layout.names[i], source)?),
            None => None,
        };
        let stamps = match layout.time {
            Some(i) => {
                Some(stamps(batch.column(slot(i)), &layout.names[i], source, first_row, opts.timestamp_unit)?)
            }
            None => None,
        };
        let targets: Vec<Vec<Option<f64>>> = layout
            .targets
            .iter()
            .map(|&i| numbers(batch.column(slot(i)), &layout.names[i], source, first_row))
            .collect::<Result<_>>()?;
        for r in 0..batch.num_rows() {
            let id = match &ids {
                Some(ids) => Some(ids.get(r).ok_or_else(|| {
                    DataError::input(
                        at_row(r).at(source),
                        format!("column `{}` is null", ids.column),
                        "give every row its series id",
                    )
                })?),
                None => None,
            };
            for (slot, column) in values.iter_mut().zip(&targets) {
                *slot = column[r];
            }
            rows.push(id, at_row(r), stamps.as_ref().map(|s| s[r]), &values);
        }
        first_row += batch.num_rows() as u64;
    }
    if rows.series.is_empty() {
        return Err(DataError::input(
            source,
            "the table has no rows",
            "add one row per time step (and series)",
        ));
    }
    Ok((time_kind, rows))
}

/// The id column of one batch.
pub(super) struct Ids<'a> {
    pub(super) column: &'a str,
    values: IdValues<'a>,
}

enum IdValues<'a> {
    Text(Vec<Option<&'a str>>),
    Int(Vec<Option<i64>>),
}

impl<'a> Ids<'a> {
    pub(super) fn new(array: &'a ArrayRef, column: &'a str, source: &str) -> Result<Self> {
        let values = if let Some(dict) = array.as_any_dictionary_opt() {
            let texts =
                text_values(dict.values()).ok_or_else(|| bad_id_type(array.data_type(), column, source))?;
            let keys = dict.normalized_keys();
            IdValues::Text(
                (0..array.len())
                    .map(|r| if dict.keys().is_null(r) { None } else { texts[keys[r]] })
                    .collect(),
            )
        } else if let Some(texts) = text_values(array) {
            IdValues::Text(texts)
        } else if let Some(ints) = integers(array) {
            IdValues::Int(ints)
        } else {
            return Err(bad_id_type(array.data_type(), column, source));
        };
        Ok(Ids { column, values })
    }

    pub(super) fn get(&self, r: usize) -> Option<IdRef<'a>> {
        match &self.values {
            IdValues::Text(v) => v[r].map(IdRef::Str),
            IdValues::Int(v) => v[r].map(IdRef::Int),
        }
    }
}

fn bad_id_type(t: &DataType, column: &str, source: &str) -> DataError {
    DataError::input(
        source,
        format!("id column `{column}` has type {t}"),
        "store series ids as text or integers, or name another id column with --id-column",
    )
}

/// A text column's values (null = `None`), or `None` when it is not text.
pub(super) fn text_values(array: &ArrayRef) -> Option<Vec<Option<&str>>> {
    if let Some(a) = array.as_string_opt::<i32>() {
        Some(a.iter().collect())
    } else if let Some(a) = array.as_string_opt::<i64>() {
        Some(a.iter().collect())
    } else {
        array.as_string_view_opt().map(|a| a.iter().collect())
    }
}

/// An integer column's values widened to i64, or `None` when it is not an integer column (or a u64 overflows).
pub(super) fn integers(array: &ArrayRef) -> Option<Vec<Option<i64>>> {
    fn widen<T: ArrowPrimitiveType>(array: &ArrayRef) -> Option<Vec<Option<i64>>>
    where
        T::Native: TryInto<i64>,
    {
        array
            .as_primitive_opt::<T>()?
            .iter()
            .map(|x| match x {
                None => Some(None),
                Some(x) => x.try_into().ok().map(Some),
            })
            .collect::<Option<_>>()
    }
    match array.data_type() {
        DataType::Int8 => widen::<Int8Type>(array),
        DataType::Int16 => widen::<Int16Type>(array),
        DataType::Int32 => widen::<Int32Type>(array),
        DataType::Int64 => widen::<Int64Type>(array),
        DataType::UInt8 => widen::<UInt8Type>(array),
        DataType::UInt16 => widen::<UInt16Type>(array),
        DataType::UInt32 => widen::<UInt32Type>(array),
        DataType::UInt64 => widen::<UInt64Type>(array),
        _ => None,
    }
}

/// The timestamps of one batch; a null or unreadable one is an error naming its row.
pub(super) fn stamps(
    array: &ArrayRef,
    column: &str,
    source: &str,
    first_row: u64,
    unit: EpochUnit,
) -> Result<Vec<Stamp>> {
    let at_row = |r: usize| Loc::Row(first_row + r as u64).at(source);
    let null = |r: usize| {
        DataError::input(at_row(r), format!("column `{column}` is null"), "give every row its timestamp")
    };
    let cell_err =
        |r: usize, message: String| DataError::at(at_row(r), format!("column `{column}`: {message}"));
    if let Some(texts) = text_values(array) {
        return texts
            .iter()
            .enumerate()
            .map(|(r, t)| parse_text(t.ok_or_else(|| null(r))?, unit).map_err(|m| cell_err(r, m)))
            .collect();
    }
    if let Some(ints) = integers(array) {
        return ints
            .iter()
            .enumerate()
            .map(|(r, x)| epoch(x.ok_or_else(|| null(r))?, unit).map_err(|m| cell_err(r, m)))
            .collect();
    }
    let out_of_range =
        |r: usize| cell_err(r, "the timestamp is out of the supported range (years -9999 to 9999)".into());
    let instants = |values: Vec<Option<i64>>, nanos: i128| -> Result<Vec<Timestamp>> {
        values
            .iter()
            .enumerate()
            .map(|(r, x)| {
                Timestamp::from_nanosecond(x.ok_or_else(|| null(r))? as i128 * nanos)
                    .map_err(|_| out_of_range(r))
            })
            .collect()
    };
    let (at, zone) = match array.data_type() {
        DataType::Timestamp(unit, tz) => {
            let nanos = match unit {
                TimeUnit::Second => 1_000_000_000,
                TimeUnit::Millisecond => 1_000_000,
                TimeUnit::Microsecond => 1_000,
                TimeUnit::Nanosecond => 1,
            };
            let raw: Vec<Option<i64>> = match unit {
                TimeUnit::Second => array.as_primitive::<TimestampSecondType>().iter().collect(),
                TimeUnit::Millisecond => array.as_primitive::<TimestampMillisecondType>().iter().collect(),
                TimeUnit::Microsecond => array.as_primitive::<TimestampMicrosecondType>().iter().collect(),
                TimeUnit::Nanosecond => array.as_primitive::<TimestampNanosecondType>().iter().collect(),
            };
            let zone = ArrowZone::of(tz.as_deref()).map_err(|m| {
                DataError::input(
                    source,
                    format!("timestamp column `{column}`: {m}"),
                    "store the timestamps with an IANA time zone (America/New_York), a ±HH:MM offset, UTC or \
                     no zone",
                )
            })?;
            (instants(raw, nanos)?, zone)
        }
        DataType::Date32 => {
            let days = array.as_primitive::<Date32Type>().iter().map(|d| d.map(i64::from)).collect();
            (instants(days, 86_400_000_000_000)?, ArrowZone::Date)
        }
        DataType::Date64 => {
            let ms = array.as_primitive::<Date64Type>().iter().collect();
            (instants(ms, 1_000_000)?, ArrowZone::Date)
        }
        t => {
            return Err(DataError::input(
                source,
                format!("timestamp column `{column}` has type {t}"),
                "store timestamps as a timestamp, date, ISO 8601 text or integer epoch column",
            ))
        }
    };
    Ok(at.into_iter().map(|at| zone.stamp(at)).collect())
}

/// How the stamps of an Arrow date or timestamp column are written, from its type's time zone.
pub(super) enum ArrowZone {
    /// A date column.
    Date,
    /// No time zone: a civil (local) date-time.
    Civil,
    /// `UTC` (and its aliases): written in UTC (`Z`).
    Utc,
    /// `+02:00`: that offset.
    Fixed(Offset),
    /// An IANA name (pandas `tz=`, polars `time_zone=`): each stamp written with its zone's offset at its
    /// instant (daylight saving time included); also the default zone of the series' calendars.
    Named(TimeZone),
}

impl ArrowZone {
    /// The zone of an Arrow timestamp type's time zone text, read by the calendar's zone parser (jiff's bundled
    /// IANA database); the error says what the text is not.
    pub(super) fn of(tz: Option<&str>) -> std::result::Result<ArrowZone, String> {
        const UTC: [&str; 9] =
            ["UTC", "Etc/UTC", "Z", "UCT", "Etc/UCT", "Zulu", "Etc/Zulu", "Universal", "Etc/Universal"];
        let Some(name) = tz else { return Ok(ArrowZone::Civil) };
        if UTC.iter().any(|u| u.eq_ignore_ascii_case(name)) {
            return Ok(ArrowZone::Utc);
        }
        if let Ok(s) = parse_text(&format!("2000-01-01T00:00:00{name}"), EpochUnit::Seconds) {
            return Ok(match s.style {
                StampStyle::Offset => ArrowZone::Fixed(s.offset),
                _ => ArrowZone::Utc,
            });
        }
        parse_zone(name).map(ArrowZone::Named).map_err(|e| format!("its time zone {e}"))
    }

    fn stamp(&self, at: Timestamp) -> Stamp {
        match self {
            ArrowZone::Date => Stamp::civil(at, StampStyle::Date),
            ArrowZone::Civil => Stamp::civil(at, StampStyle::DateTime),
            ArrowZone::Utc => Stamp { at, offset: Offset::UTC, style: StampStyle::Zulu },
            ArrowZone::Fixed(offset) => Stamp { at, offset: *offset, style: StampStyle::Offset },
            ArrowZone::Named(tz) => Stamp { at, offset: tz.to_offset(at), style: StampStyle::Offset },
        }
    }
}

/// The IANA zone of a timestamp column of this kind, if it has one: the default zone of its series' calendars.
pub fn column_zone(kind: &TimeKind) -> Option<TimeZone> {
    match kind {
        TimeKind::Arrow(DataType::Timestamp(_, tz)) => match ArrowZone::of(tz.as_deref()) {
            Ok(ArrowZone::Named(zone)) => Some(zone),
            _ => None,
        },
        _ => None,
    }
}

/// [`numbers`] rounded to f32 (a saved forecast's columns).
pub(super) fn numbers_f32(
    array: &ArrayRef,
    column: &str,
    source: &str,
    first_row: u64,
) -> Result<Vec<Option<f32>>> {
    Ok(numbers(array, column, source, first_row)?.into_iter().map(|x| x.map(|x| x as f32)).collect())
}

/// A target column of one batch as f64 values (rounded to f32 when the request is made): null and NaN are
/// missing; infinities and values beyond f32 are errors naming the row.
pub(super) fn numbers(
    array: &ArrayRef,
    column: &str,
    source: &str,
    first_row: u64,
) -> Result<Vec<Option<f64>>> {
    let f64s: Vec<Option<f64>> = match array.data_type() {
        DataType::Float64 => array.as_primitive::<Float64Type>().iter().collect(),
        DataType::Float32 => array.as_primitive::<Float32Type>().iter().map(|x| x.map(f64::from)).collect(),
        DataType::Float16 => array.as_primitive::<Float16Type>().iter().map(|x| x.map(f64::from)).collect(),
        t if t.is_integer() => match integers(array) {
            Some(v) => v.into_iter().map(|x| x.map(|x| x as f64)).collect(),
            None => array.as_primitive::<UInt64Type>().iter().map(|x| x.map(|x| x as f64)).collect(),
        },
        t => {
            return Err(DataError::input(
                source,
                format!("target column `{column}` has type {t}, not numbers"),
                "name the numeric target columns with --target-columns",
            ))
        }
    };
    f64s.into_iter()
        .enumerate()
        .map(|(r, x)| match x {
            None => Ok(None),
            Some(x) if x.is_nan() => Ok(None),
            Some(x) if (x as f32).is_finite() => Ok(Some(x)),
            Some(x) => Err(DataError::input(
                Loc::Row(first_row + r as u64).at(source),
                format!("column `{column}`: {x} is not a finite f32 number (|x| < 3.4e38)"),
                "write a finite number, or null for a missing point",
            )),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use arrow_array::{
        DictionaryArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray, TimestampSecondArray,
    };
    use arrow_schema::{Field, Schema};
    use std::sync::Arc;

    use super::*;

    /// A series' raw values as request points (NaN = missing).
    fn points(values: &[f64]) -> Vec<Option<f32>> {
        values.iter().map(|&x| crate::series::point(x)).collect()
    }

    fn file(columns: Vec<(&str, ArrayRef)>) -> bytes::Bytes {
        let schema = Schema::new(
            columns.iter().map(|(n, a)| Field::new(*n, a.data_type().clone(), true)).collect::<Vec<_>>(),
        );
        let batch =
            RecordBatch::try_new(Arc::new(schema), columns.into_iter().map(|(_, a)| a).collect()).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(Vec::new(), batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        w.into_inner().unwrap().into()
    }

    fn read_cols(columns: Vec<(&str, ArrayRef)>) -> Result<(Layout, TimeKind, Collector)> {
        read(file(columns), "t.parquet", &ReadOptions::default(), None)
    }

    #[test]
    fn integer_ids_offset_timestamps_and_missing_values() {
        let ts = TimestampSecondArray::from(vec![0, 3_600, 0]).with_timezone("+02:00");
        let (layout, kind, rows) = read_cols(vec![
            ("item_id", Arc::new(Int64Array::from(vec![7, 7, 8]))),
            ("timestamp", Arc::new(ts)),
            ("target", Arc::new(Float64Array::from(vec![Some(1.5), None, Some(f64::NAN)]))),
        ])
        .unwrap();
        assert_eq!((layout.id, layout.time, layout.targets.clone()), (Some(0), Some(1), vec![2]));
        assert!(matches!(kind, TimeKind::Arrow(DataType::Timestamp(TimeUnit::Second, Some(_)))));
        assert_eq!(rows.series.len(), 2);
        assert_eq!(rows.series[0].id, Some(engines::request::RequestId::Int(7)));
        // null and NaN are missing points
        assert_eq!(points(&rows.series[0].values), vec![Some(1.5), None]);
        assert_eq!(points(&rows.series[1].values), vec![None]);
        let s = rows.series[0].stamps[1];
        assert_eq!((s.to_text(), s.style), ("1970-01-01T03:00:00+02:00".to_string(), StampStyle::Offset));
        assert_eq!(rows.series[0].locs, vec![Loc::Row(1), Loc::Row(2)]);
    }

    #[test]
    fn dictionary_ids_and_errors_naming_the_row() {
        let ids: DictionaryArray<Int32Type> = vec!["a", "b", "a"].into_iter().collect();
        let (_, kind, rows) = read_cols(vec![
            ("unique_id", Arc::new(ids)),
            ("ds", Arc::new(Int32Array::from(vec![1, 1, 2]))),
            ("y", Arc::new(Int64Array::from(vec![1, 2, 3]))),
        ])
        .unwrap();
        assert_eq!(kind, TimeKind::Epoch(EpochUnit::Seconds));
        assert_eq!(rows.series.len(), 2);
        assert_eq!(points(&rows.series[0].values), vec![Some(1.0), Some(3.0)]);

        let e = |columns: Vec<(&str, ArrayRef)>| read_cols(columns).unwrap_err().to_string();
        let msg = e(vec![
            ("ds", Arc::new(StringArray::from(vec!["2024-01-01", "2024-01-02"]))),
            ("y", Arc::new(Float64Array::from(vec![1.0, f64::INFINITY]))),
        ]);
        assert_eq!(
            msg,
            "t.parquet: row 2: column `y`: inf is not a finite f32 number (|x| < 3.4e38); write a finite number, or \
             null for a missing point"
        );
        let msg = e(vec![
            ("id", Arc::new(StringArray::from(vec![Some("a"), None]))),
            ("y", Arc::new(Float64Array::from(vec![1.0, 2.0]))),
        ]);
        assert_eq!(msg, "t.parquet: row 2: column `id` is null; give every row its series id");
        let msg = e(vec![
            ("ds", Arc::new(StringArray::from(vec!["2024-01-01", "soon"]))),
            ("y", Arc::new(Float64Array::from(vec![1.0, 2.0]))),
        ]);
        assert!(msg.starts_with("t.parquet: row 2: column `ds`: `soon` is not a timestamp"), "{msg}");
        let msg = e(vec![
            ("id", Arc::new(Int64Array::from(vec![1]))),
            ("y", Arc::new(StringArray::from(vec!["x"]))),
        ]);
        assert!(msg.contains("target column `y` has type Utf8, not numbers"), "{msg}");
        let e = read(bytes::Bytes::from_static(b"id,y\n1,2\n"), "t.parquet", &ReadOptions::default(), None)
            .unwrap_err();
        assert!(e.to_string().starts_with("t.parquet: cannot read it as Parquet"), "{e}");
    }
}

#[cfg(test)]
mod zone_tests {
    use arrow_array::{Float64Array, RecordBatch, TimestampSecondArray};
    use arrow_schema::{Field, Schema};
    use engines::request::{Limits, Overrides};
    use std::sync::Arc;

    use super::*;
    use crate::{parse, Format};

    /// A Parquet file of daily values at local midnight in `zone` from `first` for `days` days.
    fn daily(zone: &str, first: &str, days: i64) -> (bytes::Bytes, Vec<Timestamp>) {
        let tz = TimeZone::get(zone).unwrap();
        let d0: jiff::civil::Date = first.parse().unwrap();
        let at: Vec<Timestamp> = (0..days)
            .map(|i| tz.to_timestamp(d0.checked_add(jiff::Span::new().days(i)).unwrap().into()).unwrap())
            .collect();
        let ts = TimestampSecondArray::from(at.iter().map(|t| t.as_second()).collect::<Vec<_>>())
            .with_timezone(zone);
        let y = Float64Array::from((0..days).map(|i| (i % 7) as f64 + 0.5 * i as f64).collect::<Vec<_>>());
        let schema = Schema::new(vec![
            Field::new("ds", ts.data_type().clone(), false),
            Field::new("y", DataType::Float64, false),
        ]);
        let batch = RecordBatch::try_new(Arc::new(schema), vec![Arc::new(ts), Arc::new(y)]).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(Vec::new(), batch.schema(), None).unwrap();
        w.write(&batch).unwrap();
        (w.into_inner().unwrap().into(), at)
    }

    fn future(bytes: Vec<u8>, format: Format, horizon: usize) -> (crate::Dataset, Vec<String>) {
        let o = Overrides { horizon: Some(horizon), ..Overrides::default() };
        let d = parse(bytes, format, "t", &crate::ReadOptions::default(), &o, &Limits::default()).unwrap();
        let f = d.series[0].time.as_ref().unwrap().future(horizon).unwrap();
        (d, f.iter().map(|s| s.to_text()).collect())
    }

    #[test]
    fn an_iana_zone_gives_each_stamp_its_offset_and_the_calendar_its_zone() {
        // Daily at New York midnight, 1 February to 31 March 2024: the clocks moved on 10 March.
        let (bytes, _) = daily("America/New_York", "2024-02-01", 60);
        let (_, _, rows) = read(bytes.clone(), "t.parquet", &crate::ReadOptions::default(), None).unwrap();
        let s = &rows.series[0].stamps;
        assert_eq!(
            (s[0].to_text(), s[0].style),
            ("2024-02-01T00:00:00-05:00".to_string(), StampStyle::Offset)
        );
        assert_eq!(s[59].to_text(), "2024-03-31T00:00:00-04:00");
        // The same data as ISO text with offsets: the same series and forecast steps.
        let text: String = s.iter().zip(&rows.series[0].values).map(|(t, y)| format!("{t},{y}\n")).collect();
        let (a, fa) = future(bytes.to_vec(), Format::Parquet, 3);
        let (b, fb) = future(format!("ds,y\n{text}").into_bytes(), Format::Csv, 3);
        assert_eq!(a.series[0].request.target, b.series[0].request.target);
        assert_eq!(a.series[0].request.context_len(), 60, "no missing day across the change");
        assert_eq!(
            fa,
            ["2024-04-01T00:00:00-04:00", "2024-04-02T00:00:00-04:00", "2024-04-03T00:00:00-04:00"]
        );
        assert_eq!(fa, fb);
        assert_eq!(a.calendar_line(), b.calendar_line());
        // A forecast across the next change follows the zone (ISO text can only keep its last offset).
        let (bytes, _) = daily("America/New_York", "2024-02-01", 37);
        let (_, fa) = future(bytes.to_vec(), Format::Parquet, 3);
        assert_eq!(
            fa,
            ["2024-03-09T00:00:00-05:00", "2024-03-10T00:00:00-05:00", "2024-03-11T00:00:00-04:00"]
        );
    }

    #[test]
    fn utc_fixed_and_unknown_zones() {
        assert!(matches!(ArrowZone::of(None), Ok(ArrowZone::Civil)));
        assert!(matches!(ArrowZone::of(Some("UTC")), Ok(ArrowZone::Utc)));
        assert!(matches!(ArrowZone::of(Some("Etc/UTC")), Ok(ArrowZone::Utc)));
        assert!(matches!(ArrowZone::of(Some("+05:30")), Ok(ArrowZone::Fixed(o)) if o.seconds() == 19_800));
        assert!(matches!(ArrowZone::of(Some("Europe/London")), Ok(ArrowZone::Named(_))));
        let (bytes, _) = daily("UTC", "2024-01-01", 3);
        let (_, _, rows) = read(bytes, "t.parquet", &crate::ReadOptions::default(), None).unwrap();
        assert_eq!(rows.series[0].stamps[0].to_text(), "2024-01-01T00:00:00Z");
        let e = ArrowZone::of(Some("Mars/Olympus_Mons")).err().unwrap();
        assert!(e.contains("`Mars/Olympus_Mons` is not a time zone of the IANA database"), "{e}");
    }
}
