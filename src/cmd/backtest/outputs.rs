//! The backtest's tables (docs/formats.md, "Backtest forecasts" and "Backtest metrics"):
//! * forecasts: one row per series, window and step: `unique_id`, the timestamp column (`ds` by default),
//!   `cutoff`, `y`, then per engine its point column (named by its label) and its quantile columns named as
//!   utilsforecast expects (`{label}-lo-{level}`, `{label}-hi-{level}`, `{label}-median`), then `naive`,
//!   `seasonal_naive`, and `reference` (+ its quantile columns) where the reference ran (null elsewhere);
//! * metrics: the long rows of `backtest::metrics::evaluate` (`model, scope, unique_id, cutoff, metric, value`).

use std::path::Path;

use backtest::metrics::{self, MetricRow};
use backtest::run::WindowForecast;

use super::reference::Reference;
use super::{Backtest, EngineRun};
use tables::table_out::{self, Column, Table};
use tables::{write, Format, Place};

/// The column of quantile level `q` of model `label`: utilsforecast's `{label}-lo-{L}` / `{label}-hi-{L}`
/// ([`backtest::metrics::quantile_column`]), `{label}-median` for 0.5, and `{label}-q{q}` for a level whose
/// interval is not a whole percent (utilsforecast has no name for it).
pub fn quantile_column(label: &str, q: f64) -> String {
    metrics::quantile_column(label, q).unwrap_or_else(|| {
        if q == 0.5 {
            format!("{label}-median")
        } else {
            format!("{label}-q{q}")
        }
    })
}

/// One value per table row, from forecasts in plan order (`None`: that window has no forecast).
fn per_step(
    bt: &Backtest,
    forecasts: &[Option<&WindowForecast>],
    value: &dyn Fn(&WindowForecast, usize) -> f64,
) -> Column {
    let mut out = Vec::new();
    let mut i = 0;
    for plan in &bt.plans {
        for w in plan {
            for h in 0..w.horizon {
                out.push(forecasts[i].map(|f| value(f, h)).filter(|x| x.is_finite()));
            }
            i += 1;
        }
    }
    Column::Number(out)
}

fn push_model(
    t: &mut Table,
    bt: &Backtest,
    label: &str,
    forecasts: &[Option<&WindowForecast>],
    levels: &[f64],
) {
    t.push(label, per_step(bt, forecasts, &|f, h| f.point[h]));
    for (j, &q) in levels.iter().enumerate() {
        let h_len = bt.plans.iter().flatten().next().map_or(0, |w| w.horizon);
        t.push(
            quantile_column(label, q),
            per_step(bt, forecasts, &|f, h| f.quantiles.get(j * h_len + h).copied().unwrap_or(f64::NAN)),
        );
    }
}

/// The per-window forecast table.
pub fn forecasts(
    bt: &Backtest,
    runs: &[EngineRun],
    baselines: &[(String, Vec<WindowForecast>); 2],
    reference: Option<&Reference>,
) -> Table {
    let (mut ids, mut ds, mut cutoffs, mut ys) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (s, plan) in bt.plans.iter().enumerate() {
        for w in plan {
            let cutoff = bt.stamp(s, w.cutoff);
            for k in w.actual_range() {
                ids.push(Some(bt.series[s].unique_id.clone()));
                ds.push(Some(bt.stamp(s, k)));
                cutoffs.push(Some(cutoff.clone()));
                ys.push(Some(bt.values[s][k]).filter(|y| y.is_finite()));
            }
        }
    }
    let mut t = Table::default();
    t.push("unique_id", Column::Text(ids));
    t.push(bt.time_name.clone(), Column::Text(ds));
    t.push("cutoff", Column::Text(cutoffs));
    t.push("y", Column::Number(ys));
    for r in runs {
        let f: Vec<_> = r.out.forecasts.iter().map(Some).collect();
        push_model(&mut t, bt, &r.label, &f, &r.spec.quantiles);
    }
    for (name, fs) in baselines {
        let f: Vec<_> = fs.iter().map(Some).collect();
        push_model(&mut t, bt, name, &f, &[]);
    }
    if let Some(r) = reference {
        push_model(&mut t, bt, super::reference::LABEL, &r.by_window(bt.windows()), &r.levels);
    }
    t
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_columns_are_named_as_utilsforecast_expects() {
        assert_eq!(quantile_column("fp32", 0.1), "fp32-lo-80");
        assert_eq!(quantile_column("fp32", 0.9), "fp32-hi-80");
        assert_eq!(quantile_column("m", 0.025), "m-lo-95");
        assert_eq!(quantile_column("m", 0.975), "m-hi-95");
        assert_eq!(quantile_column("m", 0.5), "m-median");
        assert_eq!(quantile_column("m", 0.3), "m-lo-40");
        assert_eq!(quantile_column("m", 0.333), "m-q0.333");
    }
}
