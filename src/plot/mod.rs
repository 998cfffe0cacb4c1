//! Charts: forecasts drawn over their history (`totoc forecast --plot`, `totoc plot`) and the benchmark as bars
//! (`totoc bench --plot`), written as SVG or PNG.
//!
//! * [`model`]: the chart of a forecast as data (panels, lines, bands, ticks, notes), built from the series and
//!   their forecasts; [`bars`]: the bench chart as data; [`layout`]: where header, panels and notes go;
//!   [`ticks`]: axis ticks and labels (timestamps as the input wrote them).
//! * [`render`]: draws a model with plotters (SVG, or PNG with an embedded font: no system font needed).
//! * [`pair`]: which saved forecast belongs to which input series (`totoc plot`).
//!
//! The models are pure, so tests check what a chart shows without drawing it; the renderer only maps them onto
//! pixels. The chart formats are described in `docs/formats.md` ("Charts").

pub mod bars;
pub mod layout;
pub mod model;
pub mod pair;
pub mod render;
pub mod ticks;

use std::path::Path;

use anyhow::{bail, Context};

use engines::engine::Engine;
use engines::request::ForecastResponse;

use crate::cli::PlotOptions;
use model::{About, ChartOptions, Forecast};
use render::Chart;
use tables::Dataset;

/// Image formats of charts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Svg,
    Png,
}

impl ImageFormat {
    /// From the file name (`.svg`, `.png`, any case); `flag` names the option in the error.
    pub fn from_path(path: &Path, flag: &str) -> anyhow::Result<ImageFormat> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("svg") => Ok(ImageFormat::Svg),
            Some("png") => Ok(ImageFormat::Png),
            _ => bail!(
                "{flag} {}: charts are written as SVG or PNG; name the file *.svg or *.png",
                path.display()
            ),
        }
    }
}

/// Draws `chart` into `path` (SVG or PNG by its extension), atomically.
pub fn write(path: &Path, flag: &str, chart: &impl Chart) -> anyhow::Result<()> {
    let format = ImageFormat::from_path(path, flag)?;
    let bytes = render::render(chart, format)?;
    exporter::fsutil::write_atomic(path, &bytes)
        .with_context(|| format!("writing the chart {}", path.display()))?;
    Ok(())
}

/// The validated `--plot-*` flags.
pub fn chart_options(o: &PlotOptions) -> anyhow::Result<ChartOptions> {
    if o.plot_history == Some(0) {
        bail!("--plot-history 0 shows no history; give the number of points to show (at least 1)");
    }
    if o.plot_panels == 0 {
        bail!("--plot-panels 0 draws nothing; give the number of panels to draw (at least 1)");
    }
    let size = o.plot_size.as_deref().map(layout::parse_size).transpose().map_err(anyhow::Error::msg)?;
    // A size that cannot hold even one panel is refused before any work.
    layout::Layout::new(1, 0, size)?;
    Ok(ChartOptions { history: o.plot_history, max_panels: o.plot_panels, size, title: o.plot_title.clone() })
}

/// Checks `--plot FILE` and the `--plot-*` flags before any work is done.
pub fn check(path: &Path, o: &PlotOptions) -> anyhow::Result<ChartOptions> {
    ImageFormat::from_path(path, "--plot")?;
    chart_options(o)
}

/// The model and engine that made forecasts: the engine's model generation, its directory's name and target.
pub fn about(engine: &Engine, dir: &Path) -> About {
    let info = engine.info();
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    About {
        model: Some(info.model.as_str().to_string()),
        engine: Some(match name {
            Some(n) => format!("{n}: {}", info.label),
            None => info.label.clone(),
        }),
    }
}

/// Draws `responses[i]` over `dataset.series[i]` into `path` (`totoc forecast --plot`).
pub fn forecasts(
    path: &Path,
    chart: &ChartOptions,
    dataset: &Dataset,
    responses: &[ForecastResponse],
    about: &About,
) -> anyhow::Result<()> {
    let forecasts: Vec<Forecast<'_>> = dataset
        .series
        .iter()
        .zip(responses)
        .map(|(series, response)| Forecast { series, response })
        .collect();
    let figure = model::forecast_figure(&forecasts, about, Vec::new(), chart)?;
    write(path, "--plot", &figure)?;
    eprintln!("plotted {} series into {}", forecasts.len(), path.display());
    Ok(())
}
