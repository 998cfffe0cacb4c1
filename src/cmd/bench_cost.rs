//! `totoc bench cost`: the cost model against the clock.
//!
//! Loads an engine and warms it up (which measures every graph's rate, as `totoc serve` does before it reports
//! ready), prints the rates, then for each request (`--request SERIESxVARIATESxHORIZONxSAMPLES`, or a ladder
//! from the engine's limits) prints its estimate — graph runs, row-steps, seconds — and whether `totoc serve`
//! with `--request-timeout-ms` = `--deadline-s` would admit it alone. An admitted request is then forecast
//! alone `--runs` times and its median time printed beside the estimate; a refused one prints the smallest
//! changes that fit. Exits 1 if an admitted request estimated at [`CALIBRATE_MIN_SECONDS`] or more took more than
//! [`MAX_RATIO`] × its estimate (shorter ones are printed too: their few milliseconds are mostly the fixed cost of
//! each graph run — waking the intra-op threads, the scheduler on a busy machine — which no rate holds). The requests
//! are built from the engine's limits and its family's capabilities only (no family is named here).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use engines::budget::RequestSize;
use engines::cost::CALIBRATE_MIN_SECONDS;
use engines::engine::{Engine, LoadOptions};
use engines::request::ForecastRequest;

use crate::cli::BenchCostArgs;
use crate::cmd::bench_body::{decode, request_body, BodySpec};
use crate::cmd::bench_support::bench_series;
use crate::serve::cost::Allowance;

/// The most an admitted request may take over its estimate.
pub const MAX_RATIO: f64 = 2.0;

/// One request's line.
#[derive(Debug, Clone, serde::Serialize)]
struct Row {
    request: String,
    graph_runs: u64,
    row_steps: u64,
    estimate_s: Option<f64>,
    admitted: bool,
    measured_s: Option<f64>,
    ratio: Option<f64>,
    /// For a refused request: the smallest changes that fit.
    fits_with: Vec<String>,
}

pub fn run(a: BenchCostArgs) -> anyhow::Result<ExitCode> {
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    if !(a.deadline_s.is_finite() && a.deadline_s > 0.0 && a.deadline_s <= 3600.0) {
        bail!("--deadline-s must be in (0, 3600]");
    }
    let budget = a.memory_budget.as_deref().map(engines::memory::parse_size).transpose()?;
    let load = LoadOptions { ort_lib: a.ort.ort_lib.clone(), threads: a.threads, memory_budget: budget };
    let engine =
        Engine::load(&a.engine, &load).with_context(|| format!("loading engine {}", a.engine.display()))?;
    let t0 = Instant::now();
    engine.warm_up().context("warming up the engine")?;
    let Some(rates) = engine.rates().get() else {
        bail!("this engine's model family gives no graph rates: there is no estimate to compare");
    };
    println!(
        "engine {} ({}): {} graphs timed at warm-up in {:.1} s (median of each graph's timed runs; host factor {})",
        a.engine.display(),
        engine.info().label,
        rates.graphs.len(),
        t0.elapsed().as_secs_f64(),
        rates.host_factor
    );
    for g in &rates.graphs {
        println!(
            "  {:<32} {:<7} rows {:>4}  {:>10.3} ms/run  {:>10.3} µs/row-step",
            g.graph,
            g.kind,
            g.rows,
            g.seconds_per_run * 1e3,
            g.seconds_per_row_step * 1e6
        );
    }
    let context = a.context.unwrap_or(engine.info().limits.max_context);
    let sizes = match a.requests.is_empty() {
        true => ladder(&engine, context),
        false => a.requests.iter().map(|r| parse_request(r, context)).collect::<anyhow::Result<_>>()?,
    };
    let deadline = Duration::from_secs_f64(a.deadline_s);
    println!(
        "\n{:<28} {:>7} {:>11} {:>11} {:>9} {:>11} {:>8}",
        "request (series×variates h samples)",
        "runs",
        "row-steps",
        "estimate s",
        "admitted",
        "measured s",
        "ratio"
    );
    let mut rows = Vec::new();
    for size in sizes {
        let row = measure(&engine, size, deadline, a.runs)?;
        let fmt = |v: Option<f64>, digits: usize| v.map_or("-".to_string(), |v| format!("{v:.digits$}"));
        println!(
            "{:<28} {:>7} {:>11} {:>11} {:>9} {:>11} {:>8}",
            row.request,
            row.graph_runs,
            row.row_steps,
            fmt(row.estimate_s, 3),
            if row.admitted { "yes" } else { "no" },
            fmt(row.measured_s, 3),
            fmt(row.ratio, 2)
        );
        if !row.fits_with.is_empty() {
            println!("    refused; it fits with {}", row.fits_with.join(", or "));
        }
        rows.push(row);
    }
    let held = |r: &&Row| r.estimate_s.is_some_and(|t| t >= CALIBRATE_MIN_SECONDS);
    let worst = rows.iter().filter(held).filter_map(|r| r.ratio).fold(0.0f64, f64::max);
    let worst_short = rows.iter().filter(|r| !held(r)).filter_map(|r| r.ratio).fold(0.0f64, f64::max);
    println!(
        "\nworst measured / estimate of an admitted request estimated at {:.0} ms or more: {worst:.2} (must be at \
         most {MAX_RATIO}); of the shorter ones: {worst_short:.2}; deadline {:.1} s",
        CALIBRATE_MIN_SECONDS * 1e3,
        a.deadline_s
    );
    if let Some(path) = &a.json {
        let out = serde_json::json!({ "engine": a.engine, "deadline_s": a.deadline_s, "rates": rates, "rows": rows });
        std::fs::write(path, serde_json::to_vec_pretty(&out)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(if worst <= MAX_RATIO { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// The default requests, from the engine's limits: one series and a few, one variate and all, a mean forecast
/// and (for a family that samples) all the sample paths, at the longest horizon.
fn ladder(engine: &Engine, context: usize) -> Vec<RequestSize> {
    let l = engine.info().limits;
    let samples = if engine.info().model.capabilities().samples { l.max_samples } else { 0 };
    let (v, h) = (l.max_variates, l.max_horizon);
    let mut out: Vec<RequestSize> = Vec::new();
    for (series, variates, samples) in
        [(1, 1, 0), (8, 1, 0), (1, v, 0), (1, 1, samples), (1, v, samples), (4, v, samples), (16, v, samples)]
    {
        let s = size(series, variates, context, h, samples);
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

fn size(series: usize, variates: usize, context: usize, horizon: usize, samples: usize) -> RequestSize {
    let quantiles = if samples > 0 { 3 } else { 0 };
    RequestSize { series, variates, context, horizon, samples, quantiles, max_context: None }
}

/// `SERIESxVARIATESxHORIZONxSAMPLES`, e.g. `1x4x336x256`.
fn parse_request(text: &str, context: usize) -> anyhow::Result<RequestSize> {
    let parts: Vec<usize> =
        text.split('x').map(|p| p.trim().parse::<usize>()).collect::<Result<_, _>>().map_err(|_| {
            anyhow::anyhow!("--request {text}: give SERIESxVARIATESxHORIZONxSAMPLES, e.g. 1x4x336x256")
        })?;
    match parts[..] {
        [series, variates, horizon, samples] if series > 0 && series <= 4096 && variates > 0 && horizon > 0 => {
            Ok(size(series, variates, context, horizon, samples))
        }
        _ => bail!("--request {text}: give SERIESxVARIATESxHORIZONxSAMPLES with at most 4096 series and every count but samples at least 1, e.g. 1x4x336x256"),
    }
}

/// One request's estimate and, if admitted, its measured time alone.
fn measure(engine: &Engine, s: RequestSize, deadline: Duration, runs: usize) -> anyhow::Result<Row> {
    let name = format!("{}×{} h{} s{}", s.series, s.variates, s.horizon, s.samples);
    let estimate = engine.estimate(&[s]).ok_or_else(|| {
        anyhow::anyhow!(
            "request {name}: the engine cannot run it (no graph holds it, or it exceeds its limits)"
        )
    })?;
    let seconds = engine.rates().seconds(&estimate);
    let admitted = seconds.is_some_and(|t| Allowance::new(t, deadline, deadline).fits_behind(0.0));
    let mut row = Row {
        request: name.clone(),
        graph_runs: estimate.runs(),
        row_steps: estimate.row_steps(),
        estimate_s: seconds,
        admitted,
        measured_s: None,
        ratio: None,
        fits_with: Vec::new(),
    };
    if !admitted {
        let fits = |sizes: &[RequestSize]| {
            engine
                .estimate_seconds(sizes)
                .is_some_and(|t| Allowance::new(t, deadline, deadline).fits_behind(0.0))
        };
        row.fits_with = engines::cost::smallest_fit(&[s], &fits);
        return Ok(row);
    }
    let reqs = requests(engine, s, &name)?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t0 = Instant::now();
        let out = engine.forecast(reqs.clone());
        times.push(t0.elapsed().as_secs_f64());
        if let Some(e) = out.into_iter().find_map(Result::err) {
            bail!("request {name}: {e}");
        }
    }
    let measured = engines::cost::median(&mut times);
    row.measured_s = Some(measured);
    row.ratio = seconds.map(|t| measured / t.max(f64::MIN_POSITIVE));
    Ok(row)
}

/// The series of a request of `s`'s counts (the bench's synthetic series), admitted. A family that reads each
/// point's wall clock gets `totoc bench serve`'s body for it (its columns, `timestamps`, `future_timestamps`),
/// read as `POST /v1/forecast` reads it.
fn requests(engine: &Engine, s: RequestSize, name: &str) -> anyhow::Result<Vec<ForecastRequest>> {
    let caps = engine.info().model.capabilities();
    // one series, built (and for a wall-clock family decoded) once: the request's series differ only in seed
    let series = if caps.reads_timestamps {
        let spec = BodySpec { context: s.context, horizon: s.horizon, samples: s.samples, frequency: None };
        decode(engine, &request_body(caps, &spec)?)?
    } else {
        ForecastRequest {
            id: None,
            target: bench_series(s.context, s.variates),
            id_mask: vec![0; s.variates],
            horizon: s.horizon,
            samples: s.samples,
            ..ForecastRequest::default()
        }
    };
    (0..s.series)
        .map(|i| {
            let mut r = series.clone();
            r.quantiles = if s.samples > 0 { vec![0.1, 0.5, 0.9] } else { Vec::new() };
            r.seed = if s.samples > 0 { i as u64 + 1 } else { 0 };
            engine.admit(&mut r, name).with_context(|| format!("request {name}"))?;
            Ok(r)
        })
        .collect()
}
