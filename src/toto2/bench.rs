//! `totoc bench` on Toto 2.0 engines: the two workloads, against toto-2 eager
//! (`tests/reference/bench_toto2_reference.py`, embedded in the binary) timed in the same invocation on the same
//! threads:
//! * `single_h336`: one series of `--context` points, H=336, one call (single pass); median of `--runs`;
//! * `throughput_h336`: `--throughput-series` series in calls of 512 (toto-2's `batch_size` on the public
//!   leaderboard), timed once after a warm-up; series/s.
//!
//! Peak RSS of each engine per workload is measured in a fresh child process (as for Toto 1.0) and compared with
//! the goal `1.5 × weight bytes + 64 MB`; the machine's load average is printed, since a shared machine moves
//! every figure.
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{bail, Context};
use engines::engine::{Engine, LoadOptions};
use engines::request::ForecastRequest;
use serde_json::{json, Value};

use crate::cli::BenchArgs;
use crate::cmd::bench_support::{bench_series, child_rss, median_ms, proc_status_mb};

const BENCH_TOTO2_REFERENCE_PY: &str = include_str!("../../tests/reference/bench_toto2_reference.py");
const RUN_TOTO2_REFERENCE_PY: &str = include_str!("../../tests/reference/run_toto2_reference.py");
const HORIZON: usize = 336;
/// Series per call of the throughput workload (toto-2's batch_size on the leaderboard).
const CALL_SERIES: usize = 512;
pub const WORKLOADS: [&str; 2] = ["single_h336", "throughput_h336"];

/// Runs the Toto 2.0 benchmark (every `--engine` must be a Toto 2.0 engine).
pub fn run(
    a: &BenchArgs,
    engines_arg: &[(String, PathBuf)],
    budget: Option<u64>,
) -> anyhow::Result<ExitCode> {
    if a.context != 512 && a.reference_checkpoint.is_some() {
        eprintln!(
            "note: toto-2's side always uses 512 context points; --context {} applies to totoc only",
            a.context
        );
    }
    let reference = match &a.reference_checkpoint {
        Some(ck) => Some(run_reference(a, ck)?),
        None => None,
    };
    let opts = LoadOptions { ort_lib: a.ort.ort_lib.clone(), threads: a.threads, memory_budget: budget };
    let series = bench_series(a.context, a.throughput_series);
    let mut rows = Vec::new();
    for (label, dir) in engines_arg {
        let engine = Engine::load(dir, &opts)
            .with_context(|| format!("loading engine {label} ({})", dir.display()))?;
        if engine.info().model != exporter::registry::Family::Toto2 {
            bail!(
                "engine {label} holds {}, not Toto 2.0: bench Toto 1.0 and 2.0 engines separately",
                engine.info().model.as_str()
            );
        }
        run_workload(&engine, "single_h336", &series)?;
        let mut single = Vec::with_capacity(a.runs);
        for _ in 0..a.runs {
            let t = Instant::now();
            run_workload(&engine, "single_h336", &series)?;
            single.push(t.elapsed());
        }
        // warm-up: one call of the throughput shape, then the timed pass over every series
        run_workload_n(&engine, &series[..CALL_SERIES.min(series.len())])?;
        let t = Instant::now();
        run_workload(&engine, "throughput_h336", &series)?;
        let thr = series.len() as f64 / t.elapsed().as_secs_f64();
        let rss: Vec<Option<f64>> = if a.no_rss {
            vec![None; 2]
        } else {
            WORKLOADS.iter().map(|w| child_rss(a, dir, w).ok()).collect()
        };
        rows.push((label.clone(), median_ms(&single), thr, rss, engine.manifest().weights_bytes));
    }
    let threads = engines::runtime::intra_threads();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cpu = engines::cpu::cpu_summary();
    println!(
        "Toto 2.0: {} series × {} points, H={HORIZON}, single pass; {threads} threads; load average {}; cpu {}",
        a.throughput_series,
        a.context,
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        cpu.as_deref().unwrap_or("unknown")
    );
    println!(
        "{:<14} {:>16} {:>14} {:>8} {:>18} {:>14} {:>8}",
        "engine", "1 series ms", "toto-2 ms", "×", "series/s", "toto-2", "×"
    );
    let ref_single = reference.as_ref().and_then(|r| r["cases"]["single_h336"]["median_ms"].as_f64());
    let ref_thr = reference.as_ref().and_then(|r| r["cases"]["throughput_h336"]["series_per_s"].as_f64());
    let fmt = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |x| format!("{x:.p$}"));
    let mut out_rows = Vec::new();
    for (label, single, thr, rss, weights) in &rows {
        println!(
            "{:<14} {:>16.1} {:>14} {:>8} {:>18.1} {:>14} {:>8}",
            label,
            single,
            fmt(ref_single, 1),
            fmt(ref_single.map(|r| r / single), 2),
            thr,
            fmt(ref_thr, 1),
            fmt(ref_thr.map(|r| thr / r), 2),
        );
        let limit = 1.5 * *weights as f64 / 1e6 + 64.0;
        let rss_txt: Vec<String> = WORKLOADS
            .iter()
            .zip(rss)
            .map(|(w, r)| {
                format!(
                    "{w} {}",
                    r.map_or("-".into(), |r| format!(
                        "{r:.0} MB ({})",
                        if r <= limit { "within" } else { "OVER" }
                    ))
                )
            })
            .collect();
        println!(
            "{label}: peak RSS (own process) {}; goal ≤ 1.5 × weights ({:.0} MB) + 64 MB = {limit:.0} MB",
            rss_txt.join(", "),
            *weights as f64 / 1e6
        );
        out_rows.push(json!({"engine": label, "single_h336_ms": single, "throughput_series_per_s": thr,
            "peak_rss_mb": {"single_h336": rss[0], "throughput_h336": rss[1]}, "weights_bytes": weights}));
    }
    if let Some(r) = &reference {
        println!("toto-2 eager: peak RSS {} MB", fmt(r["peak_rss_mb"].as_f64(), 0));
    }
    if let Some(path) = &a.json {
        let v = json!({"model": "toto-2.0", "threads": threads, "cpu": cpu, "context": a.context, "horizon": HORIZON,
            "loadavg": load.trim(), "engines": out_rows, "reference": reference});
        std::fs::write(path, serde_json::to_vec_pretty(&v)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn request(s: &[Option<f32>]) -> ForecastRequest {
    ForecastRequest {
        id: None,
        target: vec![s.to_vec()],
        id_mask: vec![0],
        horizon: HORIZON,
        samples: 0,
        quantiles: Vec::new(),
        seed: 0,
        strict_context: false,
        context_cut: None,
        ..ForecastRequest::default()
    }
}

fn run_workload_n(engine: &Engine, series: &[Vec<Option<f32>>]) -> anyhow::Result<()> {
    for r in engine.forecast(series.iter().map(|s| request(s)).collect()) {
        std::hint::black_box(r?);
    }
    Ok(())
}

/// Runs a workload by name: one series, or every series in calls of [`CALL_SERIES`].
fn run_workload(engine: &Engine, name: &str, series: &[Vec<Option<f32>>]) -> anyhow::Result<()> {
    match name {
        "single_h336" => run_workload_n(engine, &series[..1]),
        "throughput_h336" => series.chunks(CALL_SERIES).try_for_each(|c| run_workload_n(engine, c)),
        _ => bail!("no Toto 2.0 workload {name:?} (have: {})", WORKLOADS.join(", ")),
    }
}

/// Child mode (`--rss-probe WORKLOAD` on a Toto 2.0 engine): run the workload once, print the peak RSS.
pub fn rss_probe(a: &BenchArgs, dir: &Path, name: &str, budget: Option<u64>) -> anyhow::Result<ExitCode> {
    let opts = LoadOptions { ort_lib: a.ort.ort_lib.clone(), threads: a.threads, memory_budget: budget };
    let engine = Engine::load(dir, &opts)?;
    run_workload(&engine, name, &bench_series(a.context, a.throughput_series))?;
    println!(
        "{}",
        json!({"peak_rss_mb": proc_status_mb("VmHWM:"), "weights_bytes": engine.manifest().weights_bytes})
    );
    Ok(ExitCode::SUCCESS)
}

/// Times toto-2 eager with the embedded script.
fn run_reference(a: &BenchArgs, checkpoint: &Path) -> anyhow::Result<Value> {
    let python = a.reference_python.clone().unwrap_or_else(|| {
        PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join(".cache/totoc/reference-venv/bin/python")
    });
    if !python.exists() {
        bail!(
            "toto-2 venv not found at {}: create it with tests/reference/setup_venv.sh from the totoc repository \
             (it installs toto-2 2.0.0 on Python 3.11), or pass --reference-python",
            python.display()
        );
    }
    let dir = tempfile::tempdir().context("creating a temporary directory for the reference script")?;
    let script = dir.path().join("bench_toto2_reference.py");
    std::fs::write(&script, BENCH_TOTO2_REFERENCE_PY)?;
    std::fs::write(dir.path().join("run_toto2_reference.py"), RUN_TOTO2_REFERENCE_PY)?;
    let threads = a.threads.unwrap_or_else(engines::cpu::physical_cores);
    eprintln!("timing toto-2 eager ({} runs; this takes a while) ...", a.runs);
    let out = Command::new(&python)
        .arg(&script)
        .args(["--checkpoint".as_ref(), checkpoint.as_os_str()])
        .args(["--runs", &a.runs.to_string(), "--threads", &threads.to_string()])
        .args(["--series", &a.throughput_series.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    if !out.status.success() {
        bail!("the toto-2 reference benchmark failed ({})", out.status);
    }
    serde_json::from_slice(&out.stdout).context("parsing the reference benchmark's JSON")
}
