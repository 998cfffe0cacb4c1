//! The backtest's tables (docs/formats.md, "Backtest forecasts" and "Backtest metrics"):
//! * forecasts: one row per series, window and step: `unique_id`, the timestamp column (`ds` by default),
//!   `cutoff`, `y`, then per engine its point column (named by its label) and its quantile columns named as
//!   utilsforecast expects (`{label}-lo-{level}`, `{label}-hi-{level}`, `{label}-median`), then `naive`,
//!   `seasonal_naive`, and `reference` (+ its quantile columns) where the reference ran (null elsewhere), then
//!   with `--write-samples` each sampled engine's paths (`{label}-sample-{i}`);
//! * metrics: the long rows of `backtest::metrics::evaluate` (`model, scope, unique_id, cutoff, metric, value`).

use std::path::Path;

use backtest::frame::{forecast_table, sample_columns, Model};
use backtest::metrics::MetricRow;
use backtest::run::WindowForecast;

use super::reference::Reference;
use super::{Backtest, EngineRun};
use tables::table_out::{self, Column, Table};
use tables::{write, Format, Place};

/// The per-window forecast table: the engines', the baselines' and the reference's columns
/// ([`backtest::frame::forecast_table`]).
pub fn forecasts(
    bt: &Backtest,
    runs: &[EngineRun],
    baselines: &[(String, Vec<WindowForecast>); 2],
    reference: Option<&Reference>,
    write_samples: bool,
) -> Table {
    let mut models: Vec<Model<'_>> = Vec::new();
    for r in runs {
        models.push(Model {
            label: &r.label,
            forecasts: r.out.forecasts.iter().map(Some).collect(),
            levels: &r.spec.quantiles,
        });
    }
    for (name, fs) in baselines {
        models.push(Model { label: name, forecasts: fs.iter().map(Some).collect(), levels: &[] });
    }
    if let Some(r) = reference {
        models.push(Model {
            label: super::reference::LABEL,
            forecasts: r.by_window(bt.windows()),
            levels: &r.levels,
        });
    }
    let mut table = forecast_table(bt, &models);
    if write_samples {
        for r in runs.iter().filter(|r| r.spec.keep_samples) {
            let forecasts: Vec<_> = r.out.forecasts.iter().map(Some).collect();
            for (name, column) in sample_columns(bt, &r.label, &forecasts, r.spec.samples) {
                table.push(name, column);
            }
        }
    }
    table
}

/// The metric table: one row per metric row.
pub fn metrics(rows: &[MetricRow]) -> Table {
    let mut t = Table::default();
    t.push("model", Column::Text(rows.iter().map(|r| Some(r.model.clone())).collect()));
    t.push("scope", Column::Text(rows.iter().map(|r| Some(r.scope.name().to_string())).collect()));
    t.push("unique_id", Column::Text(rows.iter().map(|r| r.unique_id.clone()).collect()));
    t.push("cutoff", Column::Text(rows.iter().map(|r| r.cutoff.clone()).collect()));
    t.push("metric", Column::Text(rows.iter().map(|r| Some(r.metric.clone())).collect()));
    t.push("value", Column::Number(rows.iter().map(|r| Some(r.value).filter(|v| v.is_finite())).collect()));
    t
}

pub fn write(path: &Path, format: Format, table: &Table) -> anyhow::Result<()> {
    let name = path.display().to_string();
    let bytes = table_out::to_bytes(table, format, &name)?;
    write::emit(&Place::new(path), format, &bytes)?;
    Ok(())
}
