//! Which columns of a table hold the series id, the timestamp and the target values.
//!
//! The common names are recognised (case-insensitively): id `unique_id` / `item_id` / `id` / `series_id` (Nixtla,
//! AutoGluon, Chronos' `predict_df`), timestamp `ds` / `timestamp` / `date` / `time`, target `y` / `target` /
//! `value`; `--id-column`, `--timestamp-column` and `--target-columns` say otherwise.
//!
//! A table with an id column is *long*: one row per (series, time), each id one series. Its target columns are
//! the named ones, else the first recognised target name, else every other column. A table without an id column
//! is one series (*wide*): every column other than the timestamp is a variate, unless `--target-columns` picks
//! them. Several target columns are the variates of one multivariate series.
//!
//! For a family that reads named columns (`Capabilities::columns`, e.g. candles' `open`, `high`, ...), the target
//! columns are those named like the family's columns (any case; named back as the family names them), in table
//! order, others left out, unless `--target-columns` picks them; a table with none of them falls back to the rules
//! above, and the request's checks then name what is missing.

use exporter::registry::family::InputColumn;

use super::error::{DataError, Result};
use super::ReadOptions;

pub const ID_NAMES: [&str; 4] = ["unique_id", "item_id", "id", "series_id"];
pub const TIME_NAMES: [&str; 4] = ["ds", "timestamp", "date", "time"];
pub const TARGET_NAMES: [&str; 3] = ["y", "target", "value"];

/// Column indices of a table's roles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub id: Option<usize>,
    pub time: Option<usize>,
    /// At least one.
    pub targets: Vec<usize>,
    /// Every column's name, in file order.
    pub names: Vec<String>,
    /// The engine family's input columns, when it reads named columns.
    pub family: Option<&'static [InputColumn]>,
}

impl Layout {
    /// Resolves the roles of `names` (the header of `source`) for an engine family whose input columns are
    /// `family` (`None`: unnamed variates).
    pub fn resolve(
        names: &[String],
        opts: &ReadOptions,
        source: &str,
        family: Option<&'static [InputColumn]>,
    ) -> Result<Layout> {
        let listed = || names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
        let named = |name: &str, flag: &str| {
            names.iter().position(|n| n == name).ok_or_else(|| {
                DataError::input(
                    source,
                    format!("there is no column `{name}` (given by {flag}); the columns are {}", listed()),
                    format!("name one of them with {flag}"),
                )
            })
        };
        let recognised = |candidates: &[&str], taken: &[usize]| {
            candidates.iter().find_map(|c| {
                names.iter().enumerate().position(|(i, n)| n.eq_ignore_ascii_case(c) && !taken.contains(&i))
            })
        };
        let id = match &opts.id_column {
            Some(name) => Some(named(name, "--id-column")?),
            None => recognised(&ID_NAMES, &[]),
        };
        let taken: Vec<usize> = id.into_iter().collect();
        let time = match &opts.timestamp_column {
            Some(name) => Some(named(name, "--timestamp-column")?),
            None => recognised(&TIME_NAMES, &taken),
        };
        let taken: Vec<usize> = id.into_iter().chain(time).collect();
        let targets = match &opts.target_columns {
            Some(list) => {
                let mut out = Vec::with_capacity(list.len());
                for name in list {
                    let i = named(name, "--target-columns")?;
                    if taken.contains(&i) || out.contains(&i) {
                        return Err(DataError::input(
                            source,
                            format!("column `{name}` is given twice (as a target and as the id, timestamp or another target)"),
                            "name each column once",
                        ));
                    }
                    out.push(i);
                }
                out
            }
            None => {
                let named: Vec<usize> = (0..names.len())
                    .filter(|i| !taken.contains(i) && canonical(family, &names[*i]).is_some())
                    .collect();
                match (id, recognised(&TARGET_NAMES, &taken)) {
                    _ if !named.is_empty() => named,
                    (Some(_), Some(t)) => vec![t],
                    _ => (0..names.len()).filter(|i| !taken.contains(i)).collect(),
                }
            }
        };
        if targets.is_empty() {
            return Err(DataError::input(
                source,
                format!("no column holds target values (the columns are {})", listed()),
                "add a value column (e.g. `y`) or name the target columns with --target-columns",
            ));
        }
        Ok(Layout { id, time, targets, names: names.to_vec(), family })
    }

    /// The target columns' names: the family's own name for a column named like one of its columns.
    pub fn target_names(&self) -> Vec<String> {
        self.targets
            .iter()
            .map(|&i| {
                canonical(self.family, &self.names[i]).map_or_else(|| self.names[i].clone(), str::to_string)
            })
            .collect()
    }

    pub fn id_name(&self) -> Option<&str> {
        self.id.map(|i| self.names[i].as_str())
    }

    pub fn time_name(&self) -> Option<&str> {
        self.time.map(|i| self.names[i].as_str())
    }
}

/// The family's name of the column `name` (any case), if it is one of its columns.
fn canonical(family: Option<&'static [InputColumn]>, name: &str) -> Option<&'static str> {
    family?.iter().find(|c| c.name.eq_ignore_ascii_case(name.trim())).map(|c| c.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(header: &str, opts: &ReadOptions) -> Result<Layout> {
        let names: Vec<String> = header.split(',').map(str::to_string).collect();
        Layout::resolve(&names, opts, "t.csv", None)
    }

    fn roles(header: &str) -> (Option<usize>, Option<usize>, Vec<usize>) {
        let l = resolve(header, &ReadOptions::default()).unwrap();
        (l.id, l.time, l.targets)
    }

    #[test]
    fn common_names_are_recognised() {
        assert_eq!(roles("unique_id,ds,y"), (Some(0), Some(1), vec![2]));
        assert_eq!(roles("item_id,timestamp,target,promo"), (Some(0), Some(1), vec![2]));
        assert_eq!(roles("Date,Series_ID,Value"), (Some(1), Some(0), vec![2]));
        // long without a recognised target: every other column is a variate
        assert_eq!(roles("id,time,cpu,mem"), (Some(0), Some(1), vec![2, 3]));
        // wide: no id column, every non-time column is a variate
        assert_eq!(roles("date,cpu,mem"), (None, Some(0), vec![1, 2]));
        assert_eq!(roles("cpu,mem"), (None, None, vec![0, 1]));
        assert_eq!(roles("ds,y,extra"), (None, Some(0), vec![1, 2]));
    }

    #[test]
    fn a_family_with_named_columns_takes_them_by_name() {
        const CANDLES: &[InputColumn] = &[
            InputColumn { name: "open", derived_when_absent: None },
            InputColumn { name: "close", derived_when_absent: None },
            InputColumn { name: "volume", derived_when_absent: Some("0") },
        ];
        let resolve = |header: &str, opts: &ReadOptions| {
            let names: Vec<String> = header.split(',').map(str::to_string).collect();
            Layout::resolve(&names, opts, "t.csv", Some(CANDLES)).unwrap()
        };
        let opts = ReadOptions::default();
        // long: the family's columns, in table order, the others left out; named as the family names them
        let l = resolve("unique_id,timestamp,Close,adj_close,open,value", &opts);
        assert_eq!((l.id, l.time, l.targets.clone()), (Some(0), Some(1), vec![2, 4]));
        assert_eq!(l.target_names(), vec!["close", "open"]);
        // wide
        let l = resolve("date,open,close,volume,note", &opts);
        assert_eq!(
            (l.id, l.targets.clone(), l.target_names()),
            (None, vec![1, 2, 3], vec!["open".to_string(), "close".into(), "volume".into()])
        );
        // none of them: the usual rules (the request's checks name what is missing)
        assert_eq!(resolve("id,ds,y,x", &opts).targets, vec![2]);
        // --target-columns picks them
        let picked =
            ReadOptions { target_columns: Some(vec!["OPEN".into(), "x".into()]), ..ReadOptions::default() };
        assert_eq!(resolve("ds,OPEN,x", &picked).target_names(), vec!["open".to_string(), "x".into()]);
        // a family of unnamed variates names columns as the table does
        let names: Vec<String> = "ds,Open".split(',').map(str::to_string).collect();
        assert_eq!(
            Layout::resolve(&names, &opts, "t.csv", None).unwrap().target_names(),
            vec!["Open".to_string()]
        );
    }

    #[test]
    fn flags_override_and_unknown_columns_are_errors() {
        let opts = ReadOptions {
            id_column: Some("store".into()),
            timestamp_column: Some("when".into()),
            target_columns: Some(vec!["sales".into(), "visits".into()]),
            ..ReadOptions::default()
        };
        assert_eq!(resolve("when,store,visits,sales,y", &opts).unwrap().targets, vec![3, 2]);
        let e =
            resolve("unique_id,ds,y", &ReadOptions { id_column: Some("store".into()), ..Default::default() })
                .unwrap_err()
                .to_string();
        assert_eq!(
            e,
            "t.csv: there is no column `store` (given by --id-column); the columns are `unique_id`, `ds`, `y`; \
             name one of them with --id-column"
        );
        let e = resolve("id,ds", &ReadOptions::default()).unwrap_err().to_string();
        assert!(e.contains("no column holds target values") && e.contains("--target-columns"), "{e}");
        let e = resolve(
            "id,ds,y",
            &ReadOptions { target_columns: Some(vec!["ds".into()]), ..Default::default() },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("given twice"), "{e}");
    }
}
