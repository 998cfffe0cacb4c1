//! Forecast tables in CSV (the `csv` crate) read into [`Rows`]: the header names resolved to their roles
//! ([`Roles`]), then one [`Row`] per record. Cells are trimmed; numbers are read as [`csv_in::number`] reads them.

use engines::request::RequestId;

use super::super::csv_in;
use super::super::error::{DataError, Loc, Result};
use super::super::timestamps::{parse_text, EpochUnit};
use super::super::Columns;
use super::{Roles, Row, Rows, StepValue};

pub(super) fn csv_rows(bytes: &[u8], source: &str, columns: &Columns, unit: EpochUnit) -> Result<Rows> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).trim(csv::Trim::All).from_reader(bytes);
    let csv_err = |e: csv::Error| {
        let line = e.position().map_or(0, |p| p.line());
        DataError::input(
            Loc::Line(line).at(source),
            e.to_string(),
            "give a CSV table written by totoc forecast",
        )
    };
    let names: Vec<String> = reader.headers().map_err(csv_err)?.iter().map(str::to_string).collect();
    let roles = Roles::resolve(&names, columns, source)?;
    let mut rows = Vec::new();
    let mut record = csv::StringRecord::new();
    while reader.read_record(&mut record).map_err(csv_err)? {
        let loc = Loc::Line(record.position().map_or(0, |p| p.line()));
        let cell = |i: usize| record.get(i).unwrap_or("");
        let empty = |i: usize| {
            DataError::input(
                loc.at(source),
                format!("column `{}` is empty", names[i]),
                "give a table written by totoc forecast",
            )
        };
        let id = match roles.id {
            Some(i) if cell(i).is_empty() => return Err(empty(i)),
            Some(i) => Some(RequestId::Str(cell(i).to_string())),
            None => None,
        };
        let t = cell(roles.time);
        let step =
            if roles.numbered {
                StepValue::Number(t.parse().map_err(|_| {
                    DataError::input(
                        loc.at(source),
                        format!("step `{t}` is not a step number"),
                        "give a table written by totoc forecast",
                    )
                })?)
            } else {
                StepValue::Stamp(parse_text(t, unit).map_err(|m| {
                    DataError::at(loc.at(source), format!("column `{}`: {m}", names[roles.time]))
                })?)
            };
        let variate = roles.target_name.map(|i| cell(i).to_string());
        let model = roles.model.map(|i| cell(i).to_string()).filter(|m| !m.is_empty());
        let (pi, pname) = roles.point;
        let point = csv_in::number(cell(pi), pname, loc, source)?.ok_or_else(|| empty(pi))?;
        let quantiles = roles
            .quantiles
            .iter()
            .map(|&(i, _)| csv_in::number(cell(i), &names[i], loc, source))
            .collect::<Result<_>>()?;
        rows.push(Row { loc, id, step, variate, model, point, quantiles });
    }
    Ok(Rows { roles, rows })
}
