//! Plain report tables out (`totoc backtest`'s forecast and metric tables): named columns of text or f64 written
//! as CSV, Parquet (Utf8 / Float64 columns) or JSON Lines (one object per row; `.json` writes one array), then
//! atomically through [`super::write::emit`]. Missing numbers are empty CSV fields, Parquet nulls and JSON
//! `null`.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};

use super::error::{DataError, Result};
use super::Format;

/// One column of a report table.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    Text(Vec<Option<String>>),
    Number(Vec<Option<f64>>),
}

impl Column {
    fn len(&self) -> usize {
        match self {
            Column::Text(v) => v.len(),
            Column::Number(v) => v.len(),
        }
    }
}

/// A report table: column names and columns of equal length.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Table {
    pub names: Vec<String>,
    pub columns: Vec<Column>,
}

impl Table {
    pub fn push(&mut self, name: impl Into<String>, column: Column) {
        self.names.push(name.into());
        self.columns.push(column);
    }

    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, Column::len)
    }
}

/// The table in `format`; `name` names the output in errors.
pub fn to_bytes(table: &Table, format: Format, name: &str) -> Result<Vec<u8>> {
    let n = table.rows();
    assert!(table.columns.iter().all(|c| c.len() == n), "columns of one table have one length");
    match format {
        Format::Csv => csv(table, name),
        Format::Parquet => parquet(table, name),
        Format::Json | Format::JsonLines => json(table, format == Format::Json, name),
    }
}

fn number_text(x: f64) -> String {
    // Rust's shortest round-trip decimal: reading it back gives the same f64.
    if x.is_finite() {
        format!("{x}")
    } else {
        String::new()
    }
}

fn csv(table: &Table, name: &str) -> Result<Vec<u8>> {
    let fail = |e: csv::Error| DataError::at(name, e.to_string());
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(&table.names).map_err(fail)?;
    for r in 0..table.rows() {
        let record = table.columns.iter().map(|c| match c {
            Column::Text(v) => v[r].clone().unwrap_or_default(),
            Column::Number(v) => v[r].map(number_text).unwrap_or_default(),
        });
        w.write_record(record).map_err(fail)?;
    }
    w.into_inner().map_err(|e| DataError::at(name, e.to_string()))
}

fn json(table: &Table, array: bool, name: &str) -> Result<Vec<u8>> {
    let row = |r: usize| -> serde_json::Value {
        let mut o = serde_json::Map::new();
        for (n, c) in table.names.iter().zip(&table.columns) {
            let v = match c {
                Column::Text(v) => v[r].clone().map_or(serde_json::Value::Null, serde_json::Value::String),
                Column::Number(v) => v[r]
                    .and_then(serde_json::Number::from_f64)
                    .map_or(serde_json::Value::Null, serde_json::Value::Number),
            };
            o.insert(n.clone(), v);
        }
        serde_json::Value::Object(o)
    };
    let fail = |e: serde_json::Error| DataError::at(name, e.to_string());
    let mut out = Vec::new();
    if array {
        let rows: Vec<_> = (0..table.rows()).map(row).collect();
        serde_json::to_writer(&mut out, &rows).map_err(fail)?;
        out.push(b'\n');
    } else {
        for r in 0..table.rows() {
            serde_json::to_writer(&mut out, &row(r)).map_err(fail)?;
            out.push(b'\n');
        }
    }
    Ok(out)
}

/// The table as one Arrow record batch: Utf8 and Float64 columns (nullable), as in its Parquet file.
pub fn record_batch(table: &Table, name: &str) -> Result<RecordBatch> {
    let fail = |e: String| DataError::at(name, format!("cannot make the table: {e}"));
    let columns: Vec<ArrayRef> = table
        .columns
        .iter()
        .map(|c| -> ArrayRef {
            match c {
                Column::Text(v) => Arc::new(StringArray::from_iter(v.iter().map(|s| s.as_deref()))),
                Column::Number(v) => Arc::new(Float64Array::from(v.clone())),
            }
        })
        .collect();
    let fields: Vec<Field> = table
        .names
        .iter()
        .zip(&table.columns)
        .map(|(n, c)| {
            let t = match c {
                Column::Text(_) => DataType::Utf8,
                Column::Number(_) => DataType::Float64,
            };
            Field::new(n, t, true)
        })
        .collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).map_err(|e| fail(e.to_string()))
}

fn parquet(table: &Table, name: &str) -> Result<Vec<u8>> {
    let fail = |e: String| DataError::at(name, format!("cannot write Parquet: {e}"));
    let batch = record_batch(table, name)?;
    let schema = batch.schema();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(Vec::new(), schema, Some(props))
        .map_err(|e| fail(e.to_string()))?;
    w.write(&batch).map_err(|e| fail(e.to_string()))?;
    w.into_inner().map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        let mut t = Table::default();
        t.push("unique_id", Column::Text(vec![Some("a".into()), None]));
        t.push("y", Column::Number(vec![Some(1.5), None]));
        t
    }

    #[test]
    fn csv_and_json_write_missing_values_as_empty_and_null() {
        let csv = String::from_utf8(to_bytes(&table(), Format::Csv, "t").unwrap()).unwrap();
        assert_eq!(csv, "unique_id,y\na,1.5\n,\n");
        let jl = String::from_utf8(to_bytes(&table(), Format::JsonLines, "t").unwrap()).unwrap();
        assert_eq!(jl, "{\"unique_id\":\"a\",\"y\":1.5}\n{\"unique_id\":null,\"y\":null}\n");
        let j = String::from_utf8(to_bytes(&table(), Format::Json, "t").unwrap()).unwrap();
        assert_eq!(j, "[{\"unique_id\":\"a\",\"y\":1.5},{\"unique_id\":null,\"y\":null}]\n");
    }

    #[test]
    fn parquet_has_utf8_and_float64_columns() {
        let bytes = to_bytes(&table(), Format::Parquet, "t").unwrap();
        let r =
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(bytes))
                .unwrap()
                .build()
                .unwrap();
        let batch = r.into_iter().next().unwrap().unwrap();
        assert_eq!(batch.num_rows(), 2);
        assert_eq!(batch.schema().field(0).data_type(), &DataType::Utf8);
        assert_eq!(batch.schema().field(1).data_type(), &DataType::Float64);
    }
}
