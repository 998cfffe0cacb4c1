//! CSV tables (the `csv` crate): long (an id column, one row per series and time) or wide (one series, one column
//! per variate), each with an optional timestamp column ([`super::layout`]). A header row is required; cells are
//! trimmed; an empty or NaN target cell is a missing point. Values are read as f64 and rounded to f32 when the request
//! is made, as JSON numbers are, so the same value gives the same request in every format.

use engines::request::RequestShape;

use super::error::{DataError, Loc, Result};
use super::layout::Layout;
use super::series::{Collector, IdRef};
use super::timestamps::{parse_text, Stamp};
use super::{ReadOptions, TimeKind};

/// Reads the rows of a CSV table into a [`Collector`].
pub fn read(
    bytes: &[u8],
    source: &str,
    opts: &ReadOptions,
    shape: &RequestShape,
) -> Result<(Layout, TimeKind, Collector)> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).trim(csv::Trim::All).from_reader(bytes);
    let header = reader.headers().map_err(|e| csv_error(e, source))?;
    let names: Vec<String> = header.iter().map(str::to_string).collect();
    if names.iter().all(String::is_empty) {
        return Err(DataError::input(
            source,
            "the file is empty or has no header row",
            "start the file with a header row naming the columns, e.g. `unique_id,ds,y`",
        ));
    }
    let layout = Layout::resolve(&names, opts, source, shape.columns)?;
    let fix = number_fix(shape);
    let mut rows = Collector::new(layout.targets.len());
    let mut values = vec![None; layout.targets.len()];
    let mut record = csv::StringRecord::new();
    let mut epochs = None;
    while reader.read_record(&mut record).map_err(|e| csv_error(e, source))? {
        let line = record.position().map_or(0, |p| p.line());
        let loc = Loc::Line(line);
        let cell = |i: usize| record.get(i).unwrap_or("");
        let id = match layout.id {
            Some(i) if cell(i).is_empty() => {
                return Err(DataError::input(
                    loc.at(source),
                    format!("column `{}` is empty", layout.names[i]),
                    "give every row its series id",
                ))
            }
            Some(i) => Some(IdRef::Str(cell(i))),
            None => None,
        };
        let stamp = match layout.time {
            Some(i) => {
                let s = timestamp(cell(i), &layout.names[i], loc, source, opts)?;
                // A column of integers is written back as integers (epochs), anything else as ISO text.
                let is_epoch = matches!(s.style, super::timestamps::StampStyle::Epoch(_));
                *epochs.get_or_insert(is_epoch) &= is_epoch;
                Some(s)
            }
            None => None,
        };
        for (slot, &c) in values.iter_mut().zip(&layout.targets) {
            *slot = number_f64(cell(c), &layout.names[c], loc, source, &fix)?;
        }
        rows.push(id, loc, stamp, &values);
    }
    if rows.series.is_empty() {
        return Err(DataError::input(
            source,
            "there are no data rows after the header",
            "add one row per time step (and series)",
        ));
    }
    let kind = if epochs == Some(true) { TimeKind::Epoch(opts.timestamp_unit) } else { TimeKind::Text };
    Ok((layout, kind, rows))
}

fn timestamp(cell: &str, column: &str, loc: Loc, source: &str, opts: &ReadOptions) -> Result<Stamp> {
    if cell.is_empty() {
        return Err(DataError::input(
            loc.at(source),
            format!("column `{column}` is empty"),
            "give every row its timestamp",
        ));
    }
    parse_text(cell, opts.timestamp_unit)
        .map_err(|message| DataError::at(loc.at(source), format!("column `{column}`: {message}")))
}

/// How to fix a target cell that is not a number, for a family of `shape`: leave it empty for a missing point,
/// or, for a family that takes none, give the row a value (or drop it).
pub fn number_fix(shape: &RequestShape) -> String {
    match shape.missing_points {
        true => MISSING_FIX.to_string(),
        false => format!(
            "write a number: {} takes no missing points (give the row a value in every column, or drop the row)",
            shape.title
        ),
    }
}

/// The fix of a bad number where a missing point is allowed.
const MISSING_FIX: &str = "write a number, or leave the cell empty for a missing point";

/// A target cell: empty or NaN (`NaN`, `nan`: what pandas and numpy write for a missing float) = missing, as a
/// Parquet NaN is; anything else must be a finite number that fits in f32.
pub fn number(cell: &str, column: &str, loc: Loc, source: &str) -> Result<Option<f32>> {
    Ok(number_f64(cell, column, loc, source, MISSING_FIX)?.map(|x| x as f32))
}

/// [`number`] as parsed, in f64 (its f32 rounding is finite); `fix` says how to fix a bad cell ([`number_fix`]).
pub fn number_f64(cell: &str, column: &str, loc: Loc, source: &str, fix: &str) -> Result<Option<f64>> {
    if cell.is_empty() {
        return Ok(None);
    }
    let x: f64 = cell.parse().map_err(|_| {
        let problem = format!("column `{column}`: `{cell}` is not a number");
        if parse_text(cell, Default::default()).is_ok() {
            // The usual cause: a timestamp column under a name that is not recognised.
            let fix = format!("if it holds the timestamps, pass --timestamp-column {column}");
            DataError::input(loc.at(source), problem, fix)
        } else {
            DataError::input(loc.at(source), problem, fix)
        }
    })?;
    if x.is_nan() {
        return Ok(None);
    }
    if !(x as f32).is_finite() {
        return Err(DataError::input(
            loc.at(source),
            format!("column `{column}`: `{cell}` is not a finite f32 number (|x| < 3.4e38)"),
            fix,
        ));
    }
    Ok(Some(x))
}

fn csv_error(e: csv::Error, source: &str) -> DataError {
    let line = e.position().map_or(0, |p| p.line());
    match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => DataError::input(
            Loc::Line(line).at(source),
            format!("the row has {len} cells but the header has {expected_len}"),
            "give every row one cell per column",
        ),
        csv::ErrorKind::Utf8 { .. } => DataError::input(
            Loc::Line(line).at(source),
            "the row is not UTF-8 text",
            "save the file as UTF-8",
        ),
        csv::ErrorKind::Io(err) => {
            DataError::Io { path: source.to_string(), err: std::io::Error::new(err.kind(), err.to_string()) }
        }
        _ => DataError::input(Loc::Line(line).at(source), e.to_string(), "check the CSV syntax"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series' raw values as request points (NaN = missing).
    fn points(values: &[f64]) -> Vec<Option<f32>> {
        values.iter().map(|&x| crate::series::point(x)).collect()
    }

    fn read_str(text: &str) -> Result<(Layout, TimeKind, Collector)> {
        read(text.as_bytes(), "t.csv", &ReadOptions::default(), &RequestShape::default())
    }

    fn err(text: &str) -> String {
        read_str(text).unwrap_err().to_string()
    }

    #[test]
    fn long_and_wide_tables() {
        let (l, kind, c) =
            read_str("unique_id,ds,y\na,2024-01-01,1\nb,2024-01-01,\na,2024-01-02, 2.5 \n").unwrap();
        assert_eq!((l.id, l.time, kind), (Some(0), Some(1), TimeKind::Text));
        assert_eq!(c.series.len(), 2);
        assert_eq!(points(&c.series[0].values), vec![Some(1.0), Some(2.5)]);
        assert_eq!(c.series[0].locs, vec![Loc::Line(2), Loc::Line(4)]);
        assert_eq!(points(&c.series[1].values), vec![None]);
        // NaN (as pandas writes a missing float) is a missing point, as in Parquet
        let (_, _, c) =
            read_str("ds,y\n2024-01-01,NaN\n2024-01-02,nan\n2024-01-03,-nan\n2024-01-04,1\n").unwrap();
        assert_eq!(points(&c.series[0].values), vec![None, None, None, Some(1.0)]);
        let (l, kind, c) = read_str("timestamp,cpu,mem\n1700000000,1,2\n1700000060,3,\n").unwrap();
        assert_eq!((l.id, l.targets.clone(), kind), (None, vec![1, 2], TimeKind::Epoch(Default::default())));
        assert_eq!(points(&c.series[0].values), vec![Some(1.0), Some(2.0), Some(3.0), None]);
        // `ts` is not a recognised timestamp name: the error says how to name it
        assert_eq!(
            err("ts,cpu\n2024-01-01,1\n"),
            "t.csv:2: column `ts`: `2024-01-01` is not a number; if it holds the timestamps, pass --timestamp-column ts"
        );
        let opts = ReadOptions { timestamp_column: Some("ts".into()), ..ReadOptions::default() };
        let (l, _, _) =
            read("ts,cpu\n2024-01-01,1\n".as_bytes(), "t.csv", &opts, &RequestShape::default()).unwrap();
        assert_eq!((l.time, l.targets), (Some(0), vec![1]));
    }

    #[test]
    fn a_bad_cell_of_a_family_without_missing_points_says_that_familys_fix() {
        let shape = RequestShape { title: "Candles", missing_points: false, ..RequestShape::default() };
        let e = |text: &str| {
            read(text.as_bytes(), "t.csv", &ReadOptions::default(), &shape).unwrap_err().to_string()
        };
        let fix =
            "write a number: Candles takes no missing points (give the row a value in every column, or drop \
                   the row)";
        assert_eq!(e("ds,y\n2024-01-01,abc\n"), format!("t.csv:2: column `y`: `abc` is not a number; {fix}"));
        assert!(e("ds,y\n2024-01-01,inf\n")
            .ends_with(&format!("is not a finite f32 number (|x| < 3.4e38); {fix}")));
        assert!(!e("ds,y\n2024-01-01,1e39\n").contains("missing point;"));
    }

    #[test]
    fn malformed_cells_name_the_line_and_column() {
        assert_eq!(
            err("unique_id,ds,y\na,2024-01-01,1\na,2024-01-02,abc\n"),
            "t.csv:3: column `y`: `abc` is not a number; write a number, or leave the cell empty for a missing point"
        );
        assert!(err("ds,y\n2024-01-01,inf\n").starts_with("t.csv:2: column `y`: `inf` is not a finite f32"));
        assert!(err("ds,y\n2024-01-01,1e39\n").contains("`1e39` is not a finite f32"));
        assert!(
            err("ds,y\n2024-02-30,1\n").starts_with("t.csv:2: column `ds`: `2024-02-30` is not a timestamp")
        );
        assert_eq!(
            err("unique_id,ds,y\n,2024-01-01,1\n"),
            "t.csv:2: column `unique_id` is empty; give every row its series id"
        );
        assert!(err("ds,y\n2024-01-01,1\n2024-01-02\n")
            .starts_with("t.csv:3: the row has 1 cells but the header has 2"));
        assert!(err("ds,y\n").contains("no data rows"));
        assert!(err("").contains("no header row"));
    }
}
