//! `totoc backtest`: rolling-origin windows over every series of the input (`backtest::windows`), every window of
//! every series through each engine as one packed workload (`backtest::run`, the same `Engine::forecast` call as
//! `forecast` and `serve`, in chunks, with a progress bar and a summary line per engine), the naive and
//! seasonal-naive baselines on the same windows, metrics from `backtest::metrics`, and optionally the eager
//! reference on all or some of the windows ([`reference`]). Writes the per-window forecasts and the metric rows
//! ([`tables`]), prints the report ([`report`]) and draws it ([`chart`]).
mod chart;
mod columns;
mod outputs;
mod reference;
mod report;
mod season;
mod speed;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use backtest::calibration::{self, Calibration};
use backtest::metrics::{interval_levels, MetricRow};
use backtest::run::{plan_all, RunOutput, RunSpec, WindowForecast};
use backtest::score;
use backtest::windows::{Window, WindowSpec};
use engines::budget::RequestSize;
use engines::engine::{Engine, LoadOptions};
use engines::request::{Limits, Overrides};

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
    /// sha256 of the engine's `manifest.json` (hex).
    pub manifest_sha256: String,
    /// The table as the engine's family reads it, when it reads its own columns ([`columns`]).
    pub own: Option<columns::ColumnInput>,
    /// The size of each window's request as built, in plan order (what the speed bound counts, [`speed`]).
    pub sizes: Vec<RequestSize>,
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
    check_flags(&a, &loaded)?;
    let opts = read_options(&a)?;
    let bt = read(&a, &input, in_format, &opts, &loaded)?;
    let context = context(&a, &loaded)?;

    let progress = Progress::new();
    progress.set_total((bt.windows() * loaded.len()) as u64);
    let table = InputTable { place: &input, format: in_format, opts: &opts };
    let mut runs = Vec::new();
    for one in loaded {
        runs.push(run_engine(&a, &table, &bt, context, &progress, one)?);
    }
    progress.finish();
    // The speed bound's rates are measured right after the engines ran, so both see the machine as it was then
    // (the reference runs for minutes after).
    let bounds = match &a.reference_checkpoint {
        Some(_) => speed::bounds(&runs)?,
        None => Vec::new(),
    };

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
    let calibrations = calibrations(&bt, &runs);
    for (label, c) in &calibrations {
        rows.extend(c.rows(label));
    }

    if let (Some(path), Some(f)) = (&a.output, output) {
        let table = outputs::forecasts(&bt, &runs, &baselines, reference.as_ref(), a.write_samples);
        outputs::write(path, f, &table)?;
        eprintln!("wrote {} forecast rows to {}", table.rows(), path.display());
    }
    if let (Some(path), Some(f)) = (&a.metrics, metrics_out) {
        let table = outputs::metrics(&rows);
        outputs::write(path, f, &table)?;
        eprintln!("wrote {} metric rows to {}", table.rows(), path.display());
    }
    print!("{}", report::engines(&a, &runs));
    print!("{}", report::text(&bt, &rows, reference.as_ref()));
    if let Some(r) = &reference {
        print!("{}", report::speed_bounds(&bounds, r, bt.windows()));
    }
    print!("{}", report::calibration(&calibrations));
    if let Some(path) = &a.plot {
        chart::draw(path, a.plot_cutoffs, &bt, &runs, &rows, &calibrations)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The input table, as the engines that read their own columns read it again.
pub(super) struct InputTable<'a> {
    pub place: &'a Place,
    pub format: Format,
    pub opts: &'a ReadOptions,
}

/// One engine's run over every planned window: its requests (the scored series', or its own columns cut at the
/// same cutoffs), packed into its calls, with the progress and the summary line.
fn run_engine(
    a: &BacktestArgs,
    table: &InputTable<'_>,
    bt: &Backtest,
    context: usize,
    progress: &Progress,
    (label, dir, engine): (String, PathBuf, Engine),
) -> anyhow::Result<EngineRun> {
    let total = bt.windows();
    let spec = spec(a, &engine, context);
    // The size check of what this engine's run keeps (its quantiles and samples).
    plan_all(&bt.series, &spec, &|_, _| None)?;
    let limits = engine.info().request_limits();
    let manifest_sha256 = exporter::fsutil::sha256_file(&dir.join("manifest.json"))
        .with_context(|| format!("hashing engine {label}'s manifest.json"))?;
    // A family that reads named columns takes its own from the table, cut at the same cutoffs.
    let own = match columns::reads_columns(&engine) {
        true => Some(columns::read(a, table, &engine, &spec, bt, &label)?),
        false => None,
    };
    let start = Instant::now();
    let mut last = 0;
    let ids: Vec<&str> = bt.series.iter().map(|s| s.unique_id.as_str()).collect();
    let mut sizes = Vec::with_capacity(total);
    let mut build = |s: usize, w: &Window| -> Result<_, backtest::run::RunError> {
        let req = match &own {
            Some(c) => c.request(bt, s, w, &spec),
            None => backtest::run::window_request(&bt.series[s], w, &spec, &limits),
        }?;
        sizes.push(RequestSize::of(&req));
        Ok(req)
    };
    let out = backtest::run::run_requests(
        &ids,
        &bt.plans,
        &spec,
        &mut build,
        own.as_ref().map_or(0, |c| c.variate),
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
    Ok(EngineRun { label, dir, engine, spec, out, seconds, manifest_sha256, own, sizes })
}

/// The calibration of every engine that kept sample paths, from its paths ([`backtest::calibration`]).
fn calibrations(bt: &Backtest, runs: &[EngineRun]) -> Vec<(String, Calibration)> {
    runs.iter()
        .filter(|r| r.spec.keep_samples)
        .filter_map(|r| {
            let all: Vec<&WindowForecast> = r.out.forecasts.iter().collect();
            let levels = calibration::intervals(&interval_levels(&r.spec.quantiles));
            Some((r.label.clone(), calibration::calibrate(&bt.values, &all, r.spec.samples, &levels)?))
        })
        .collect()
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

fn read_options(a: &BacktestArgs) -> anyhow::Result<ReadOptions> {
    Ok(ReadOptions {
        id_column: a.id_column.clone(),
        timestamp_column: a.timestamp_column.clone(),
        target_columns: a.target_columns.clone(),
        timestamp_unit: epoch_unit(a.timestamp_unit),
        freq: a.freq.as_deref().map(parse_freq).transpose().map_err(anyhow::Error::msg)?,
        calendar: calendar_options(&a.calendar)?,
    })
}

/// Reads the scored series as `totoc forecast` does, on their grid (with the limits of the first engine whose
/// model reads unnamed variates; a plain grid when every engine reads named columns: those read their own
/// columns, [`columns`]), and plans every series' windows.
fn read(
    a: &BacktestArgs,
    input: &Place,
    in_format: Format,
    opts: &ReadOptions,
    engines: &[(String, PathBuf, Engine)],
) -> anyhow::Result<Backtest> {
    let limits = engines
        .iter()
        .find(|(_, _, e)| !columns::reads_columns(e))
        .map_or_else(Limits::default, |(_, _, e)| e.info().request_limits());
    // The horizon is the windows'; the reader only checks it is given.
    let overrides = Overrides { horizon: Some(a.horizon.max(1)), ..Overrides::default() };
    let dataset = data::read(input, Some(in_format), opts, &overrides, &limits)?;
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

/// Flags that must reach some engine: sampling flags and parameters given where no engine's model takes them are
/// an error (not silently ignored); an engine that reads named columns needs the scored one named.
fn check_flags(a: &BacktestArgs, engines: &[(String, PathBuf, Engine)]) -> anyhow::Result<()> {
    if engines.iter().any(|(_, _, e)| columns::reads_columns(e)) {
        columns::scored_name(a)?;
    }
    let shapes: Vec<_> = engines.iter().map(|(_, _, e)| e.info().request_limits().shape).collect();
    let given = a.model.temperature.is_some() || a.model.top_k.is_some() || a.model.top_p.is_some();
    if given && !shapes.iter().any(|s| s.sampling_controls) {
        bail!(
            "--temperature / --top-k / --top-p are sampling controls, and no engine of this backtest takes them \
             (its models draw paths without them); remove them"
        );
    }
    if a.samples > 0 && !engines.iter().any(|(_, _, e)| e.info().model.capabilities().samples) {
        bail!(
            "--samples {}: no engine of this backtest draws sample paths (their models predict quantiles \
             directly); remove --samples (and --seed) and use --quantiles",
            a.samples
        );
    }
    if !a.model.params.is_empty() && !shapes.iter().any(|s| !s.params.is_empty()) {
        bail!("--param: no engine of this backtest takes model parameters; remove it");
    }
    Ok(())
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

/// How `engine` forecasts each window: quantiles where the engine makes them. `--samples` and `--seed` reach the
/// engines whose models draw paths; a model that predicts its quantiles directly (and refuses both) is run
/// without them, so it can share a report with sampled engines.
fn spec(a: &BacktestArgs, engine: &Engine, context: usize) -> RunSpec {
    let windows = WindowSpec::new(a.windows, a.step, a.horizon);
    let model_samples = engine.info().model.capabilities().samples;
    let (samples, seed) = if model_samples { (a.samples, a.seed) } else { (0, 0) };
    backtest::frame::run_spec(windows, context, samples, a.quantiles.clone(), seed, a.chunk, model_samples)
}
