//! `totoc backtest`: rolling-origin windows over every series of the input (`backtest::windows`), every window of
//! every series through each engine as one packed workload (`backtest::run`, the same `Engine::forecast` call as
//! `forecast` and `serve`, in chunks, with a progress bar and a summary line per engine), the naive and
//! seasonal-naive baselines on the same windows, metrics from `backtest::metrics`, and optionally the eager
//! reference on all or some of the windows ([`reference`]). Writes the per-window forecasts and the metric rows
//! ([`tables`]), prints the report ([`report`]) and draws it ([`chart`]).
mod chart;
mod outputs;
mod reference;
mod report;
mod season;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use backtest::metrics::MetricRow;
use backtest::run::{plan_all, RunOutput, RunSpec, WindowForecast};
use backtest::score;
use backtest::windows::{Window, WindowSpec};
use engines::engine::{Engine, LoadOptions};
use engines::request::Overrides;

use crate::cli::BacktestArgs;
use crate::cmd::bench_support::parse_engines;
use crate::cmd::forecast::{calendar_options, epoch_unit, format};
use crate::progress::Progress;
use tables::timestamps::parse_freq;
use tables::{self as data, Format, Place, ReadOptions};

/// One engine's part of the report.
pub(super) struct EngineRun {
    pub label: String,
    pub dir: PathBuf,
    pub engine: Engine,
    pub spec: RunSpec,
    pub out: RunOutput,
    pub seconds: f64,
}

pub(super) use backtest::frame::Backtest;

pub fn run(a: BacktestArgs) -> anyhow::Result<ExitCode> {
    let engines_arg = parse_engines(&a.engines)?;
    if a.chunk == 0 {
        bail!("--chunk must be at least 1 (windows per engine call)");
    }
    if a.season == Some(0) {
        bail!("--season must be at least 1 (1: no seasonality)");
    }
    // Outputs that cannot be written are errors before any engine loads.
    let output = a.output.as_deref().map(|p| out_format(p, "--output")).transpose()?;
    let metrics_out = a.metrics.as_deref().map(|p| out_format(p, "--metrics")).transpose()?;
    if let Some(p) = &a.plot {
        crate::plot::ImageFormat::from_path(p, "--plot")?;
    }
    let input = Place::new(&a.input);
    let in_format = input.format(a.input_format.map(format), "--input-format")?;

    let budget = a.memory_budget.as_deref().map(engines::memory::parse_size).transpose()?;
    let load = LoadOptions { ort_lib: a.ort.ort_lib.clone(), threads: a.threads, memory_budget: budget };
    let mut loaded = Vec::new();
    for (label, dir) in &engines_arg {
        let e = Engine::load(dir, &load)
            .with_context(|| format!("loading engine {label} ({})", dir.display()))?;
        loaded.push((label.clone(), dir.clone(), e));
    }
    let bt = read(&a, &input, in_format, &loaded[0].2)?;
    let context = context(&a, &loaded)?;

    let progress = Progress::new();
    let total = bt.windows();
    progress.set_total((total * loaded.len()) as u64);
    let mut runs = Vec::new();
    for (label, dir, engine) in loaded {
        let spec = spec(&a, &engine, context);
        // The size check of what this engine's run keeps (its quantiles and samples).
        plan_all(&bt.series, &spec, &|_, _| None)?;
        let limits = engine.info().request_limits();
        let start = Instant::now();
        let mut last = 0;
        let out = backtest::run::run(
            &bt.series,
            &bt.plans,
            &spec,
            &limits,
            &mut |reqs| engine.forecast(reqs),
            &mut |done| {
                progress.advance((done - last) as u64, &format!("{label}: window {done}/{total}"));
                last = done;
            },
        )
        .with_context(|| format!("engine {label}"))?;
        let seconds = start.elapsed().as_secs_f64();
        progress.note(&format!(
            "engine {label}: {total} windows of {} series in {} engine calls, {seconds:.2} s: {:.1} windows/s \
             (engine {:.2} s)",
            bt.series.len(),
            out.engine_calls,
            total as f64 / seconds.max(1e-9),
            out.engine_time.as_secs_f64()
        ));
        runs.push(EngineRun { label, dir, engine, spec, out, seconds });
    }
    progress.finish();

    let baselines = score::baselines(&bt.values, &bt.plans, bt.season, runs[0].spec.quantiles.len());
    let mut rows: Vec<MetricRow> = Vec::new();
    for r in &runs {
        let all: Vec<&WindowForecast> = r.out.forecasts.iter().collect();
        rows.extend(evaluate(&bt, &r.label, &all, &r.spec)?);
    }
    for (name, f) in &baselines {
        let all: Vec<&WindowForecast> = f.iter().collect();
        rows.extend(evaluate(&bt, name, &all, &RunSpec { keep_samples: false, ..runs[0].spec.clone() })?);
    }
    let reference = match &a.reference_checkpoint {
        Some(ck) => Some(reference::run(&a, ck, &bt, &runs)?),
        None => None,
    };
    if let Some(r) = &reference {
        rows.extend(r.rows.iter().cloned());
        rows.extend(r.comparison_rows());
    }
    let skills = report::skills(&rows, &runs, &baselines);
    rows.extend(skills.iter().cloned());

    if let (Some(path), Some(f)) = (&a.output, output) {
        let table = outputs::forecasts(&bt, &runs, &baselines, reference.as_ref());
        outputs::write(path, f, &table)?;
        eprintln!("wrote {} forecast rows to {}", table.rows(), path.display());
    }
    if let (Some(path), Some(f)) = (&a.metrics, metrics_out) {
        let table = outputs::metrics(&rows);
        outputs::write(path, f, &table)?;
        eprintln!("wrote {} metric rows to {}", table.rows(), path.display());
    }
    print!("{}", report::text(&bt, &rows, reference.as_ref()));
    if let Some(path) = &a.plot {
        chart::draw(path, a.plot_cutoffs, &bt, &runs, &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn out_format(p: &std::path::Path, flag: &str) -> anyhow::Result<Format> {
    Ok(Place::new(p).format(None, flag)?)
}

/// The metric rows of one model's forecasts (the windows given).
pub(super) fn evaluate(
    bt: &Backtest,
    model: &str,
    forecasts: &[&WindowForecast],
    spec: &RunSpec,
) -> anyhow::Result<Vec<MetricRow>> {
    let samples = if spec.keep_samples { spec.samples } else { 0 };
    let ids = bt.ids();
    let cutoff = |s: usize, w: &Window| bt.stamp(s, w.cutoff);
    let sc = score::Scoring { ids: &ids, values: &bt.values, season: bt.season, cutoff: &cutoff };
    score::evaluate(&sc, model, forecasts, &spec.quantiles, samples)
        .with_context(|| format!("scoring {model}"))
}

/// Reads the input as `totoc forecast` does and plans every series' windows.
fn read(a: &BacktestArgs, input: &Place, in_format: Format, first: &Engine) -> anyhow::Result<Backtest> {
    let opts = ReadOptions {
        id_column: a.id_column.clone(),
        timestamp_column: a.timestamp_column.clone(),
        target_columns: a.target_columns.clone(),
        timestamp_unit: epoch_unit(a.timestamp_unit),
        freq: a.freq.as_deref().map(parse_freq).transpose().map_err(anyhow::Error::msg)?,
        calendar: calendar_options(&a.calendar)?,
    };
    // The horizon is the windows'; the reader only checks it is given.
    let overrides = Overrides { horizon: Some(a.horizon.max(1)), ..Overrides::default() };
    let dataset = data::read(input, Some(in_format), &opts, &overrides, &first.info().request_limits())?;
    if let Some(line) = dataset.calendar_line() {
        eprintln!("{line}");
    }
    let mut bt = Backtest::from_dataset(dataset, WindowSpec::new(a.windows, a.step, a.horizon))?;
    if let Some(warning) = &bt.warning {
        eprintln!("{warning}");
    }
    bt.season = match a.season {
        Some(s) => s,
        None => season::of_series(&bt.series, &bt.axes)?,
    };
    Ok(bt)
}

/// Points each window's request holds: `--context`, else the smallest maximum context of the engines, so every
/// engine (and the reference) forecasts from the same points.
fn context(a: &BacktestArgs, engines: &[(String, PathBuf, Engine)]) -> anyhow::Result<usize> {
    let (label, max) = engines
        .iter()
        .map(|(l, _, e)| (l, e.info().limits.max_context))
        .min_by_key(|(_, m)| *m)
        .expect("at least one engine");
    match a.context {
        Some(0) => bail!("--context must be at least 1"),
        Some(c) if c > max => bail!(
            "--context {c} is more than engine {label} holds ({max} points); give --context {max} or less, so every \
             engine forecasts from the same points"
        ),
        Some(c) => Ok(c),
        None => Ok(max),
    }
}

/// How `engine` forecasts each window: quantiles where the engine makes them.
fn spec(a: &BacktestArgs, engine: &Engine, context: usize) -> RunSpec {
    let windows = WindowSpec::new(a.windows, a.step, a.horizon);
    let model_samples = engine.info().model.capabilities().samples;
    backtest::frame::run_spec(
        windows,
        context,
        a.samples,
        a.quantiles.clone(),
        a.seed,
        a.chunk,
        model_samples,
    )
}
