//! Engines whose family reads named columns and each row's timestamp (its `Capabilities`: `columns`,
//! `reads_timestamps`) in a backtest of one scored column: such an engine reads its own input columns (those of
//! its family's columns the table has, the others derived by the family's rules) from the same table, as its rows
//! as given, and is scored on the variate named by `--target-columns` (one of its columns).
//!
//! Cutoffs are shared timestamps: the scored series' windows are planned on its grid ([`super::Backtest`]), and
//! each window's request here holds the rows at or before the cutoff's timestamp (the most recent `--context` of
//! them), with the grid's next `H` timestamps as its forecast steps, so its forecast lands on the steps every
//! other model is scored on. A table without timestamps cannot be cut so; it is an error naming the fix.

use std::collections::HashMap;

use anyhow::{bail, Context};
use backtest::run::{RunError, RunSpec};
use backtest::windows::Window;
use engines::engine::Engine;
use engines::host::wall_clock::WallClock;
use engines::request::{ForecastRequest, Overrides, TimeValue};
use tables::{self as data, ReadOptions};

use super::{Backtest, InputTable};
use crate::cli::BacktestArgs;

/// The table as one such engine reads it.
pub struct ColumnInput {
    /// Each scored series' whole request (every row, its columns and each row's wall clock), by the scored
    /// series' index.
    series: Vec<ForecastRequest>,
    /// The row of the answer that is scored: the position of the scored column among the request's columns.
    pub variate: usize,
}

/// Whether `engine`'s family reads named columns with timestamps (it then takes its input here).
pub fn reads_columns(engine: &Engine) -> bool {
    let shape = engine.info().request_limits().shape;
    shape.columns.is_some()
}

/// The sampling flags for `engine`: those given, when its family takes them (others refuse them by name, so they
/// are passed only to families that take them).
pub fn sampling(a: &BacktestArgs, engine: &Engine) -> Overrides {
    let shape = engine.info().request_limits().shape;
    let mut o = Overrides::default();
    if shape.sampling_controls {
        o.temperature = a.model.temperature;
        o.top_k = a.model.top_k;
        o.top_p = a.model.top_p;
    }
    if !shape.params.is_empty() {
        o.params = a.model.params.iter().cloned().collect();
    }
    o
}

/// Reads the table as `engine`'s family reads it and matches its series to the scored ones by id.
pub fn read(
    a: &BacktestArgs,
    table: &InputTable<'_>,
    engine: &Engine,
    spec: &RunSpec,
    bt: &Backtest,
    label: &str,
) -> anyhow::Result<ColumnInput> {
    let limits = engine.info().request_limits();
    let Some(columns) = limits.shape.columns else { bail!("engine {label} reads no named columns") };
    let scored = scored_name(a)?;
    let names: Vec<&str> = columns.iter().map(|c| c.name).collect();
    if !names.contains(&scored) {
        bail!(
            "engine {label} is scored on --target-columns {scored}, which is not one of its columns ({}); give \
             --target-columns one of them",
            names.join(", ")
        );
    }
    let overrides = Overrides {
        horizon: Some(spec.windows.horizon),
        samples: Some(spec.samples),
        quantiles: Some(spec.quantiles.clone()),
        seed: Some(spec.seed),
        ..sampling(a, engine)
    };
    // The family's own columns: the scored column alone is not its input.
    let opts = ReadOptions { target_columns: None, ..table.opts.clone() };
    let dataset = data::read(table.place, Some(table.format), &opts, &overrides, &limits)
        .with_context(|| format!("engine {label} reads the table as its family does"))?;
    let mut by_id: HashMap<String, ForecastRequest> = HashMap::new();
    for (i, s) in dataset.series.into_iter().enumerate() {
        let id = s.request.id.as_ref().map_or_else(|| format!("series_{i}"), ToString::to_string);
        by_id.insert(id, s.request);
    }
    let mut series = Vec::with_capacity(bt.series.len());
    for s in &bt.series {
        let request = by_id.remove(&s.unique_id).with_context(|| {
            format!("engine {label}: series {} has no rows with its columns in the table", s.unique_id)
        })?;
        if request.timestamps.is_empty() {
            bail!(
                "engine {label} reads each row's timestamp, and series {} has none: give the table a timestamp \
                 column (--timestamp-column), so its windows can be cut at the other engines' cutoffs",
                s.unique_id
            );
        }
        series.push(request);
    }
    // The columns the table gives (the family's order); the same for every series of one table.
    let variate = series
        .first()
        .and_then(|r| r.columns.iter().position(|c| *c == scored))
        .with_context(|| format!("engine {label}: the table has no column {scored}"))?;
    Ok(ColumnInput { series, variate })
}

/// The scored column's name (`--target-columns`, one).
pub fn scored_name(a: &BacktestArgs) -> anyhow::Result<&str> {
    match a.target_columns.as_deref() {
        Some([one]) => Ok(one.as_str()),
        _ => bail!(
            "an engine that reads named columns is scored on one of them: give --target-columns COL (e.g. \
             --target-columns close)"
        ),
    }
}

/// The wall clock of grid position `k` of scored series `s`.
fn clock(bt: &Backtest, s: usize, k: usize) -> Result<WallClock, String> {
    let stamp = bt.time(s, k).ok_or_else(|| format!("grid position {k} has no timestamp"))?;
    match tables::as_given::clocks(&[stamp], "timestamps", &bt.series[s].unique_id) {
        Ok(v) => match v.into_iter().next() {
            Some(TimeValue::Clock(c)) => Ok(c),
            _ => Err(format!("grid position {k} has no wall clock")),
        },
        Err(e) => Err(e.to_string()),
    }
}

impl ColumnInput {
    /// The request of window `w` of scored series `s`: the rows at or before the cutoff's timestamp, the most
    /// recent `spec.context` of them, and the grid's next `H` timestamps as the forecast steps.
    pub fn request(
        &self,
        bt: &Backtest,
        s: usize,
        w: &Window,
        spec: &RunSpec,
    ) -> Result<ForecastRequest, RunError> {
        let bad = |message: String| RunError::Request {
            series: bt.series[s].unique_id.clone(),
            window: w.index + 1,
            cutoff: w.cutoff,
            message,
            refused: None,
        };
        let full = &self.series[s];
        let cutoff = clock(bt, s, w.cutoff).map_err(bad)?;
        let end = full.timestamps.partition_point(|t| *t <= cutoff);
        if end == 0 {
            return Err(bad(format!("no row at or before the cutoff ({})", bt.stamp(s, w.cutoff))));
        }
        let future = w.actual_range().map(|k| clock(bt, s, k)).collect::<Result<Vec<_>, _>>().map_err(bad)?;
        let id = engines::request::RequestId::Str(format!("{}@{}", bt.series[s].unique_id, w.cutoff));
        Ok(backtest::rows::cut(full, id, end, spec.context, w.horizon, future))
    }
}
