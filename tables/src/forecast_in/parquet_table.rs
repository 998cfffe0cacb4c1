//! Forecast tables in Parquet (arrow-rs `parquet`) read into [`Rows`]: the schema's names resolved to their roles
//! ([`Roles`]), then only those columns decoded (never the sample paths), batch by batch, with the column readers
//! of the Parquet input ([`super::super::parquet_in`]).

use engines::request::RequestId;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use super::super::error::{DataError, Loc, Result};
use super::super::parquet_in::{integers, numbers_f32, stamps, text_values, Ids};
use super::super::series::IdRef;
use super::super::timestamps::EpochUnit;
use super::super::Columns;
use super::{Roles, Row, Rows, StepValue};

pub(super) fn parquet_rows(
    bytes: bytes::Bytes,
    source: &str,
    columns: &Columns,
    unit: EpochUnit,
) -> Result<Rows> {
    let not_parquet = |e: parquet::errors::ParquetError| {
        DataError::input(
            source,
            format!("cannot read it as Parquet ({e})"),
            "give a Parquet forecast table, or name the format with --forecast-format",
        )
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(not_parquet)?;
    let names: Vec<String> = builder.schema().fields().iter().map(|f| f.name().clone()).collect();
    let roles = Roles::resolve(&names, columns, source)?;
    let mut wanted: Vec<usize> = roles
        .id
        .into_iter()
        .chain([roles.time, roles.point.0])
        .chain(roles.target_name)
        .chain(roles.model)
        .chain(roles.quantiles.iter().map(|&(i, _)| i))
        .collect();
    wanted.sort_unstable();
    // A projected batch holds the wanted columns in schema order (the sample paths are never decoded).
    let slot = |i: usize| wanted.binary_search(&i).expect("wanted column");
    let mask = ProjectionMask::roots(builder.parquet_schema(), wanted.iter().copied());
    let reader = builder.with_projection(mask).build().map_err(not_parquet)?;
    let mut rows = Vec::new();
    let mut first_row = 1u64;
    for batch in reader {
        let batch = batch.map_err(|e| {
            DataError::input(source, format!("cannot decode it ({e})"), "check that the file is complete")
        })?;
        let at_row = |r: usize| Loc::Row(first_row + r as u64);
        let ids = roles.id.map(|i| Ids::new(batch.column(slot(i)), &names[i], source)).transpose()?;
        let time = batch.column(slot(roles.time));
        let steps: Vec<StepValue> = if roles.numbered {
            let ints = integers(time).ok_or_else(|| {
                DataError::input(
                    source,
                    "column `step` does not hold integers",
                    "give a table written by totoc forecast",
                )
            })?;
            ints.iter()
                .enumerate()
                .map(|(r, x)| {
                    x.map(StepValue::Number).ok_or_else(|| {
                        DataError::input(
                            at_row(r).at(source),
                            "column `step` is null",
                            "give a table written by totoc forecast",
                        )
                    })
                })
                .collect::<Result<_>>()?
        } else {
            stamps(time, &names[roles.time], source, first_row, unit)?
                .into_iter()
                .map(StepValue::Stamp)
                .collect()
        };
        let variates = match roles.target_name {
            Some(i) => Some(text_values(batch.column(slot(i))).ok_or_else(|| {
                DataError::input(
                    source,
                    "column `target_name` does not hold text",
                    "give a table written by totoc forecast",
                )
            })?),
            None => None,
        };
        let models = match roles.model {
            Some(i) => Some(text_values(batch.column(slot(i))).ok_or_else(|| {
                DataError::input(
                    source,
                    "column `model` does not hold text",
                    "give a table written by totoc forecast",
                )
            })?),
            None => None,
        };
        let (pi, pname) = roles.point;
        let point = numbers_f32(batch.column(slot(pi)), pname, source, first_row)?;
        let quantiles: Vec<Vec<Option<f32>>> = roles
            .quantiles
            .iter()
            .map(|&(i, _)| numbers_f32(batch.column(slot(i)), &names[i], source, first_row))
            .collect::<Result<_>>()?;
        for (r, step) in steps.into_iter().enumerate() {
            let null = |column: &str| {
                DataError::input(
                    at_row(r).at(source),
                    format!("column `{column}` is null"),
                    "give a table written by totoc forecast",
                )
            };
            let id = match &ids {
                Some(ids) => Some(match ids.get(r).ok_or_else(|| null(ids.column))? {
                    IdRef::Str(s) => RequestId::Str(s.to_string()),
                    IdRef::Int(i) => RequestId::Int(i),
                }),
                None => None,
            };
            let variate = match &variates {
                Some(v) => Some(v[r].ok_or_else(|| null("target_name"))?.to_string()),
                None => None,
            };
            rows.push(Row {
                loc: at_row(r),
                id,
                step,
                variate,
                model: models.as_ref().and_then(|m| m[r]).map(str::to_string),
                point: point[r].ok_or_else(|| null(pname))?,
                quantiles: quantiles.iter().map(|q| q[r]).collect(),
            });
        }
        first_row += batch.num_rows() as u64;
    }
    Ok(Rows { roles, rows })
}
