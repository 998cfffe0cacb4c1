//! `totoc plot`: draws saved forecasts (the output of `totoc forecast`) over the history they continue (its
//! input), without an engine: reads both ([`tables`]), pairs each forecast with its series and checks that
//! its steps continue it ([`crate::plot::pair`]), and writes the chart.
use std::process::ExitCode;

use engines::request::{Limits, Overrides};
use exporter::registry::Family;

use crate::cli::PlotArgs;
use crate::cmd::forecast::{calendar_options, epoch_unit, format};
use crate::plot::model::{self, About, Forecast};
use crate::plot::{self as charts, ImageFormat};
use tables::timestamps::parse_freq;
use tables::{self as data, forecast_in, Place, ReadOptions};

pub fn run(a: PlotArgs) -> anyhow::Result<ExitCode> {
    ImageFormat::from_path(&a.plot, "--plot")?;
    let chart = charts::chart_options(&a.plot_options)?;
    let opts = ReadOptions {
        id_column: a.id_column.clone(),
        timestamp_column: a.timestamp_column.clone(),
        target_columns: a.target_columns.clone(),
        timestamp_unit: epoch_unit(a.timestamp_unit),
        freq: a.freq.as_deref().map(parse_freq).transpose().map_err(anyhow::Error::msg)?,
        calendar: calendar_options(&a.calendar)?,
    };
    let input = Place::new(&a.input);
    // The input is read for its history only; every forecast brings its own horizon (1 satisfies the checks).
    let overrides = Overrides { horizon: Some(1), ..Overrides::default() };
    let dataset = data::read(&input, a.input_format.map(format), &opts, &overrides, &Limits::default())?;
    let place = Place::new(&a.forecast);
    let saved =
        forecast_in::read(&place, a.forecast_format.map(format), &dataset.columns, opts.timestamp_unit)?;
    let engine = saved.iter().map(|s| s.response.engine.clone()).find(|e| !e.is_empty());
    let saved_model = saved.iter().find_map(|s| s.model.clone());
    let paired = charts::pair::pair(&dataset, saved, &input.name("stdin"), &place.name("stdin"))?;
    let forecasts: Vec<Forecast<'_>> = paired
        .forecasts
        .iter()
        .map(|(i, response)| Forecast { series: &dataset.series[*i], response })
        .collect();
    // The forecasts name their model (`model`); files written before they did are named by their point forecast:
    // the first family whose point forecast it is (`mean` is Toto 1.0's, `median` Toto 2.0's).
    let named = saved_model.or_else(|| {
        let point = forecasts.first().map_or("mean", |f| model::point_name(f.response));
        Family::ALL.into_iter().find(|f| f.point_forecast() == point).map(|f| f.as_str().to_string())
    });
    let about = About { model: named, engine };
    let figure = model::forecast_figure(&forecasts, &about, paired.notes.clone(), &chart)?;
    charts::write(&a.plot, "--plot", &figure)?;
    eprintln!("plotted {} series into {}", forecasts.len(), a.plot.display());
    Ok(ExitCode::SUCCESS)
}
