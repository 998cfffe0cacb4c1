//! The Arrow C stream interface (the Arrow PyCapsule protocol) with arrow-rs's own FFI: tables in from any object
//! with `__arrow_c_stream__` (pandas >= 2.2, polars, pyarrow, duckdb, ...), tables out as an object that has one.
//!
//! Why not pyo3-arrow: it is built on an older arrow-rs than the workspace's 60.1 (the `tables` crate's), so it
//! would bring a second arrow-rs and a conversion between the two. The C stream interface is a small, stable C
//! ABI that arrow-rs implements itself (`arrow_array::ffi_stream`), and neither side needs pyarrow: the record
//! batches arrive as views of the producer's buffers (no copy) and leave as the buffers arrow-rs built.

use std::ffi::CString;

use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::{RecordBatch, RecordBatchIterator, RecordBatchReader};
use arrow_schema::SchemaRef;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors::{guard, invalid};

/// The capsule name the protocol gives a stream.
const STREAM: &std::ffi::CStr = c"arrow_array_stream";

/// The schema and record batches of `obj`'s Arrow stream (`obj.__arrow_c_stream__()`); `what` names it in errors.
pub fn import(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<(SchemaRef, Vec<RecordBatch>)> {
    let not_arrow = || {
        invalid(format!(
            "{what} is a {}, not a table; give a pandas or polars DataFrame, or an Arrow table (an object with \
             __arrow_c_stream__, such as a pyarrow.Table)",
            obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
        ))
    };
    if !obj.hasattr("__arrow_c_stream__")? {
        return Err(not_arrow());
    }
    let capsule = obj.call_method0("__arrow_c_stream__")?;
    let capsule = capsule.cast_into::<PyCapsule>().map_err(|_| not_arrow())?;
    let ptr = capsule.pointer_checked(Some(STREAM))?;
    // SAFETY: a capsule named `arrow_array_stream` holds an `ArrowArrayStream` (the protocol); `from_raw` moves
    // it out and marks the capsule's copy released, so the capsule's destructor does not release it again.
    let stream = unsafe { FFI_ArrowArrayStream::from_raw(ptr.as_ptr().cast::<FFI_ArrowArrayStream>()) };
    let bad = |e: arrow_schema::ArrowError| invalid(format!("{what}: cannot read its Arrow stream ({e})"));
    let reader = RecordBatchStreamReader::try_new(stream).map_err(bad)?;
    let schema = reader.schema();
    let batches = reader.collect::<Result<Vec<_>, _>>().map_err(bad)?;
    Ok((schema, batches))
}

/// A table made here, for any Arrow consumer: `pyarrow.table(t)`, `polars.DataFrame(t)`,
/// `pandas.DataFrame.from_arrow(t)`. Its stream can be taken once.
#[pyclass(module = "totoc._native", name = "ArrowTable", frozen)]
pub struct ArrowTable {
    batch: std::sync::Mutex<Option<RecordBatch>>,
    rows: usize,
    columns: Vec<String>,
}

impl ArrowTable {
    pub fn new(batch: RecordBatch) -> Self {
        let columns = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
        ArrowTable { rows: batch.num_rows(), columns, batch: std::sync::Mutex::new(Some(batch)) }
    }
}

#[pymethods]
impl ArrowTable {
    /// The Arrow PyCapsule protocol: the table as a C stream. `requested_schema` is not applied (the protocol
    /// allows that); the consumer casts if it wants other types.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        guard(|| {
            let batch = self.batch.lock().unwrap_or_else(|p| p.into_inner()).take().ok_or_else(|| {
                invalid("this table's Arrow stream was taken already; an ArrowTable converts once")
            })?;
            let schema = batch.schema();
            let reader: Box<dyn RecordBatchReader + Send> =
                Box::new(RecordBatchIterator::new(vec![Ok(batch)], schema));
            // Dropping the capsule drops the stream, which releases it unless the consumer moved it out.
            PyCapsule::new(py, FFI_ArrowArrayStream::new(reader), Some(CString::from(STREAM)))
        })
    }

    #[getter]
    fn num_rows(&self) -> usize {
        self.rows
    }

    #[getter]
    fn column_names(&self) -> Vec<String> {
        self.columns.clone()
    }

    fn __repr__(&self) -> String {
        format!("ArrowTable({} rows; {})", self.rows, self.columns.join(", "))
    }
}
