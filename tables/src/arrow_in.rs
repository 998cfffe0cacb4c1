//! Tables handed over in memory as Arrow record batches (the Python package's data frames, through the Arrow C
//! stream interface), read exactly as a Parquet file's decoded batches are ([`super::parquet_in::collect`]): the
//! same column roles ([`super::layout`]), column types, missing values, row numbers in messages (`SOURCE: row N`,
//! 1-based over the whole table) and errors.

use arrow_array::RecordBatch;
use arrow_schema::Schema;
use exporter::registry::family::InputColumn;

use super::error::Result;
use super::layout::Layout;
use super::series::Collector;
use super::{ReadOptions, TimeKind};

/// Reads the rows of `batches` (all of `schema`) into a [`Collector`]; `source` names the table in messages,
/// `family` is the engine family's input columns ([`Layout::resolve`]).
pub fn read(
    schema: &Schema,
    batches: &[RecordBatch],
    source: &str,
    opts: &ReadOptions,
    family: Option<&'static [InputColumn]>,
) -> Result<(Layout, TimeKind, Collector)> {
    let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
    let layout = Layout::resolve(&names, opts, source, family)?;
    // The batches hold every column of the schema: column `i` is batch column `i`.
    let (kind, rows) =
        super::parquet_in::collect(schema, &layout, batches.iter().cloned().map(Ok), &|i| i, source, opts)?;
    Ok((layout, kind, rows))
}
