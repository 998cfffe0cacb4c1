//! `--plot FILE`: two images. FILE holds every model's overall metrics as grouped bars (one group per metric,
//! one bar per engine, baseline and the reference; log scale, the metrics span decades); `FILE-forecasts.EXT`
//! holds the first engine's forecasts at `--plot-cutoffs` cutoffs per series (spread evenly, the last included)
//! over the history up to each cutoff, drawn by the same code as `totoc forecast --plot`; with sampled engines,
//! `FILE-calibration.EXT` holds their PIT histograms side by side (the report's calibration section).

use std::path::{Path, PathBuf};

use anyhow::Context;
use backtest::calibration::{Calibration, PIT_BINS};
use backtest::metrics::{MetricRow, Scope};
use backtest::windows::spread;
use engines::request::{ForecastRequest, ForecastResponse, QuantileForecast, RequestId};

use super::{Backtest, EngineRun};
use crate::plot;
use tables::{Columns, Dataset, Series, TimeKind};

/// The metrics drawn as bars (those present).
const BAR_METRICS: [&str; 5] = ["mae", "rmse", "mase", "smape", "wql"];

pub fn draw(
    path: &Path,
    cutoffs: usize,
    bt: &Backtest,
    runs: &[EngineRun],
    rows: &[MetricRow],
    calibrations: &[(String, Calibration)],
) -> anyhow::Result<()> {
    bars(path, bt, rows)?;
    let second = forecasts_path(path);
    forecasts(&second, cutoffs, bt, &runs[0])?;
    eprintln!(
        "plotted the metrics into {} and the forecasts at chosen cutoffs into {}",
        path.display(),
        second.display()
    );
    if !calibrations.is_empty() {
        let third = suffixed(path, "calibration");
        pit(&third, calibrations)?;
        eprintln!("plotted the PIT histogram of every sampled engine into {}", third.display());
    }
    Ok(())
}

/// The PIT histogram of every sampled engine, one bar per engine in each bin ([`backtest::calibration`]).
fn pit(path: &Path, calibrations: &[(String, Calibration)]) -> anyhow::Result<()> {
    let names: Vec<String> = (0..PIT_BINS)
        .map(|k| format!("{:.1}–{:.1}", k as f64 / PIT_BINS as f64, (k + 1) as f64 / PIT_BINS as f64))
        .collect();
    let groups: Vec<&str> = names.iter().map(String::as_str).collect();
    let values: Vec<(String, Vec<f64>)> = calibrations
        .iter()
        .map(|(label, c)| (label.clone(), (0..PIT_BINS).map(|k| c.pit_fraction(k)).collect()))
        .collect();
    let coverage: Vec<String> = calibrations
        .iter()
        .map(|(label, c)| {
            let levels: Vec<String> = c.coverage.iter().map(|(l, v)| format!("{l}% {v:.2}")).collect();
            format!("{label}: {}", levels.join(", "))
        })
        .collect();
    let subtitle = format!(
        "share of the points per PIT bin ({:.2} each if calibrated); coverage {}",
        1.0 / PIT_BINS as f64,
        coverage.join("; ")
    );
    let chart = plot::bars::histogram_chart(
        "totoc backtest: calibration (PIT histogram of the sample paths)",
        &groups,
        &values,
        subtitle,
    )?;
    plot::write(path, "--plot", &chart)
}

/// `cv.png` → `cv-forecasts.png`.
pub fn forecasts_path(path: &Path) -> PathBuf {
    suffixed(path, "forecasts")
}

/// `cv.png` → `cv-{what}.png`.
fn suffixed(path: &Path, what: &str) -> PathBuf {
    let stem = path.file_stem().map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let ext = path.extension().map_or_else(String::new, |e| e.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}-{what}.{ext}"))
}

fn bars(path: &Path, bt: &Backtest, rows: &[MetricRow]) -> anyhow::Result<()> {
    let overall: Vec<&MetricRow> = rows.iter().filter(|r| r.scope == Scope::Overall).collect();
    let metrics: Vec<&str> =
        BAR_METRICS.iter().copied().filter(|m| overall.iter().any(|r| r.metric == *m)).collect();
    let mut models: Vec<String> = Vec::new();
    for r in &overall {
        if !models.contains(&r.model) {
            models.push(r.model.clone());
        }
    }
    let values: Vec<(String, Vec<Option<f64>>)> = models
        .iter()
        .map(|m| {
            let v = metrics
                .iter()
                .map(|k| overall.iter().find(|r| r.model == *m && r.metric == *k).map(|r| r.value))
                .collect();
            (m.clone(), v)
        })
        .collect();
    let subtitle = format!(
        "{} series, {} windows, season {}; lower is better",
        bt.series.len(),
        bt.windows(),
        bt.season
    );
    let chart =
        plot::bars::value_chart("totoc backtest: overall metrics per model", &metrics, &values, subtitle)?;
    plot::write(path, "--plot", &chart)
}

fn forecasts(path: &Path, per_series: usize, bt: &Backtest, run: &EngineRun) -> anyhow::Result<()> {
    let mut series = Vec::new();
    let mut responses = Vec::new();
    let mut offset = 0;
    for (s, plan) in bt.plans.iter().enumerate() {
        for j in spread(plan.len(), per_series.max(1)) {
            let w = plan[j];
            let f = &run.out.forecasts[offset + j];
            let history = bt.series[s].values[..w.history_len()].to_vec();
            // the cutoff's stamp from the backtest's one walk per series (`Backtest::time`), not a walk per chart
            let time = bt.axes[s].as_ref().map(|a| tables::axis::TimeAxis {
                last: bt.time(s, w.cutoff).unwrap_or(a.last),
                ..a.clone()
            });
            let id = RequestId::Str(format!("{} @ {}", bt.series[s].unique_id, bt.stamp(s, w.cutoff)));
            series.push(Series {
                request: ForecastRequest {
                    id: Some(id.clone()),
                    target: vec![history],
                    id_mask: vec![0],
                    horizon: w.horizon,
                    samples: 0,
                    quantiles: Vec::new(),
                    seed: 0,
                    strict_context: false,
                    context_cut: None,
                    ..ForecastRequest::default()
                },
                at: id.to_string(),
                target_names: vec!["y".into()],
                time,
                future: None,
                rows: Vec::new(),
            });
            let h = w.horizon;
            let point = vec![f.point.iter().map(|&x| x as f32).collect()];
            let quantiles = run
                .spec
                .quantiles
                .iter()
                .enumerate()
                .map(|(k, &q)| QuantileForecast {
                    q,
                    values: vec![f.quantiles[k * h..(k + 1) * h].iter().map(|&x| x as f32).collect()],
                })
                .collect();
            let family = run.engine.info().model;
            let median = family.point_forecast() == "median";
            responses.push(ForecastResponse {
                id: Some(id),
                mean: (!median).then(|| point.clone()),
                median: median.then_some(point),
                quantiles,
                samples: None,
                context_truncated: None,
                buckets: Vec::new(),
                profile: String::new(),
                engine: run.label.clone(),
                sampler: None,
                engine_sha256: None,
            });
        }
        offset += plan.len();
    }
    let dataset = Dataset {
        columns: Columns { id: Some("unique_id".into()), time: Some((bt.time_name.clone(), TimeKind::Text)) },
        series,
    };
    let options = plot::model::ChartOptions {
        history: None,
        max_panels: plot::model::DEFAULT_PANELS,
        size: None,
        title: Some(format!("{}: forecasts at chosen cutoffs", run.label)),
    };
    plot::forecasts(path, &options, &dataset, &responses, &plot::about(&run.engine, &run.dir))
        .with_context(|| format!("drawing {}", path.display()))
}
