//! `totoc forecast`: reads every series of the input (JSON requests or CSV / Parquet tables, [`tables`]),
//! checks them all against the engine before running any (a bad one stops the run with nothing written),
//! forecasts them in groups (the engine packs each group onto its graphs; a progress bar on a terminal; the steps
//! shared with the Python package's `predict_df`, [`tables::run`]), writes
//! the forecasts, and ends with a summary line on stderr: series, points, time, series/s, and the share of the
//! time spent outside the engine. `--plot` also draws them ([`crate::plot`]).
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use engines::engine::{Engine, LoadOptions};
use engines::request::Overrides;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{CalendarArg, CalendarArgs, ForecastArgs, FormatArg, LayoutArg, TimestampUnitArg};
use crate::plot;
use tables::calendar::{CalendarMode, CalendarOptions};
use tables::timestamps::{parse_freq, EpochUnit};
use tables::{self as data, write, Format, Place, ReadOptions};

pub fn run(a: ForecastArgs) -> anyhow::Result<ExitCode> {
    let input = Place::new(&a.input);
    let output = a.output.as_deref().map_or(Place::Std, Place::new);
    let opts = ReadOptions {
        id_column: a.id_column.clone(),
        timestamp_column: a.timestamp_column.clone(),
        target_columns: a.target_columns.clone(),
        timestamp_unit: epoch_unit(a.timestamp_unit),
        freq: a.freq.as_deref().map(parse_freq).transpose().map_err(anyhow::Error::msg)?,
        calendar: calendar_options(&a.calendar)?,
    };
    let overrides = Overrides {
        horizon: a.horizon,
        samples: a.samples,
        quantiles: a.quantiles.clone(),
        seed: a.seed,
        strict_context: a.strict_context.then_some(true),
        temperature: a.model.temperature,
        top_k: a.model.top_k,
        top_p: a.model.top_p,
        params: a.model.params.iter().cloned().collect(),
    };
    // Formats that cannot be told are errors before the engine loads.
    let in_format = input.format(a.input_format.map(format), "--input-format")?;
    let out_format = match (&output, a.output_format) {
        (Place::Std, None) => None,
        (place, given) => Some(place.format(given.map(format), "--output-format")?),
    };
    let chart = a.plot.as_ref().map(|p| plot::check(p, &a.plot_options)).transpose()?;

    let load_start = Instant::now();
    let memory_budget = a.memory_budget.as_deref().map(engines::memory::parse_size).transpose()?;
    let load = LoadOptions { ort_lib: a.ort.ort_lib.clone(), threads: a.threads, memory_budget };
    let engine =
        Engine::load(&a.engine, &load).with_context(|| format!("loading engine {}", a.engine.display()))?;
    let load_time = load_start.elapsed();

    let start = Instant::now();
    let limits = engine.info().request_limits();
    let mut dataset = data::read(&input, Some(in_format), &opts, &overrides, &limits)?;
    let read_time = start.elapsed();
    if let Some(line) = dataset.calendar_line() {
        eprintln!("{line}");
    }
    let n = dataset.series.len();
    let out_format = out_format.unwrap_or(if n == 1 { Format::Json } else { Format::JsonLines });
    if out_format == Format::Json && n > 1 {
        return Err(write::too_many_for_json(&output.name("stdout"), n).into());
    }
    // Every series is checked (and cut to the engine's context) before any is forecast.
    if let Some(note) = data::run::admit(&engine, &mut dataset)? {
        eprintln!("{note}");
    }

    let bar = progress(n as u64);
    let (mut responses, engine_time) = data::run::forecast(&engine, &dataset, |k| bar.inc(k as u64))?;
    bar.finish_and_clear();
    if !a.write_samples {
        responses.iter_mut().for_each(|r| r.samples = None);
    }
    // A model that predicts quantile knots interpolates other levels between them: say so once.
    if let Some(note) = data::run::interpolation_note(&engine, &responses) {
        eprintln!("{note}");
    }
    let write_start = Instant::now();
    let (point, model) = (engine.info().model.point_forecast(), engine.info().model.as_str());
    let layout = layout(a.layout, engine.info().model.capabilities().columns);
    let bytes = write::to_bytes_laid_out(&dataset, &responses, out_format, point, Some(model), &layout)?;
    write::emit(&output, out_format, &bytes)?;
    let write_time = write_start.elapsed();

    let wall = start.elapsed();
    let outside = wall.saturating_sub(engine_time);
    eprintln!(
        "forecast {n} series ({} points) in {:.2} s: {:.1} series/s; engine {:.2} s, outside the engine {:.3} s \
         ({:.1}%; reading {:.3} s, writing {:.3} s); engine load {:.2} s",
        dataset.points(),
        wall.as_secs_f64(),
        n as f64 / wall.as_secs_f64().max(1e-9),
        engine_time.as_secs_f64(),
        outside.as_secs_f64(),
        100.0 * outside.as_secs_f64() / wall.as_secs_f64().max(1e-9),
        read_time.as_secs_f64(),
        write_time.as_secs_f64(),
        load_time.as_secs_f64(),
    );
    if let (Some(path), Some(chart)) = (&a.plot, &chart) {
        plot::forecasts(path, chart, &dataset, &responses, &plot::about(&engine, &a.engine))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The table layout `--layout` asks for, given the engine family's input columns.
fn layout(arg: LayoutArg, columns: Option<&[exporter::registry::family::InputColumn]>) -> write::Layout {
    match arg {
        LayoutArg::Auto => write::Layout::for_family(columns, false),
        LayoutArg::Long => write::Layout::Long,
        LayoutArg::Wide => write::Layout::Wide {
            columns: columns.unwrap_or_default().iter().map(|c| c.name.to_string()).collect(),
        },
    }
}

pub(super) fn format(f: FormatArg) -> Format {
    match f {
        FormatArg::Json => Format::Json,
        FormatArg::Jsonl => Format::JsonLines,
        FormatArg::Csv => Format::Csv,
        FormatArg::Parquet => Format::Parquet,
    }
}

/// The calendar flags, checked (the zone name, the holiday file) before any engine loads.
pub(super) fn calendar_options(a: &CalendarArgs) -> anyhow::Result<CalendarOptions> {
    let mode = match a.calendar {
        CalendarArg::Auto => CalendarMode::Auto,
        CalendarArg::Continuous => CalendarMode::Continuous,
        CalendarArg::Weekdays => CalendarMode::Weekdays,
    };
    CalendarOptions::from_flags(mode, a.timezone.as_deref(), a.holidays.as_deref())
        .map_err(anyhow::Error::msg)
}

pub(super) fn epoch_unit(u: TimestampUnitArg) -> EpochUnit {
    match u {
        TimestampUnitArg::S => EpochUnit::Seconds,
        TimestampUnitArg::Ms => EpochUnit::Millis,
        TimestampUnitArg::Us => EpochUnit::Micros,
        TimestampUnitArg::Ns => EpochUnit::Nanos,
    }
}

/// A bar on stderr, drawn only when stderr is a terminal (indicatif hides it otherwise).
fn progress(total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{bar:30} {pos}/{len} series [{elapsed_precise}, {per_sec}, eta {eta}]")
    {
        bar.set_style(style);
    }
    bar
}
