//! `totoc bench` on Toto 1.0 engines: reference workloads through one or more engines, interleaved run by run in one invocation
//! (run-to-run noise on a shared machine is larger than the ratios worth measuring), side by side with toto-ts
//! eager (`tests/reference/bench_reference.py`, embedded in the binary) timed in the same invocation. Also: each
//! engine's decode step against the memory-bandwidth floor (every weight streamed once per step), and each
//! engine's peak RSS per workload, measured in a fresh child process per (engine, workload) so one workload's
//! buffers never count against another's.
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use engines::engine::{Engine, LoadOptions};
use engines::request::ForecastRequest;
use exporter::signature::GraphKind;
use serde_json::{json, Value};

use crate::cli::BenchArgs;
use crate::cmd::bench_support::{bench_series, child_rss, proc_status_mb};
use crate::plot;

/// A benchmark workload: `series` series of the bench context, each with `samples` paths and `horizon`, sent as
/// one call or as one call per series.
#[derive(Debug, Clone, Copy)]
struct Workload {
    /// As `bench_reference.py` names it.
    name: &'static str,
    series: usize,
    samples: usize,
    horizon: usize,
    /// One call per series instead of one call for all.
    separate_calls: bool,
}

const WORKLOADS: [Workload; 6] = [
    Workload { name: "mean_h336", series: 1, samples: 0, horizon: 336, separate_calls: false },
    Workload { name: "samples64_h336", series: 1, samples: 64, horizon: 336, separate_calls: false },
    Workload { name: "samples256_h64", series: 1, samples: 256, horizon: 64, separate_calls: false },
    Workload { name: "mean_h64", series: 1, samples: 0, horizon: 64, separate_calls: false },
    Workload { name: "batch8_mean_h336", series: 8, samples: 0, horizon: 336, separate_calls: false },
    Workload { name: "single8_mean_h336", series: 8, samples: 0, horizon: 336, separate_calls: true },
];

/// The reference scripts, embedded so an installed totoc needs no source tree.
const BENCH_REFERENCE_PY: &str = include_str!("../../tests/reference/bench_reference.py");
const RUN_REFERENCE_PY: &str = include_str!("../../tests/reference/run_reference.py");

/// One `--engine` and what it measured.
struct Bench {
    label: String,
    dir: PathBuf,
    engine: Engine,
    /// Per workload: run times (None: the engine cannot run it).
    times: Vec<Option<Vec<Duration>>>,
    decode_step_ms: Vec<f64>,
    prefill_ms: Vec<f64>,
}

/// Runs the Toto 1.0 benchmark (every `--engine` a Toto 1.0 engine).
pub fn run(
    a: &BenchArgs,
    engines_arg: &[(String, PathBuf)],
    budget: Option<u64>,
) -> anyhow::Result<ExitCode> {
    if let Some(path) = &a.plot {
        plot::ImageFormat::from_path(path, "--plot")?;
    }
    // toto-ts first, so its memory is gone before ours is measured (both in this one invocation).
    let reference = match &a.reference_checkpoint {
        Some(ck) => Some(run_reference(a, ck)?),
        None => None,
    };
    let opts = LoadOptions { ort_lib: a.ort.ort_lib.clone(), threads: a.threads, memory_budget: budget };
    let mut benches = Vec::new();
    for (label, dir) in engines_arg {
        let engine = Engine::load(dir, &opts)
            .with_context(|| format!("loading engine {label} ({})", dir.display()))?;
        benches.push(Bench {
            label: label.clone(),
            dir: dir.clone(),
            engine,
            times: vec![None; WORKLOADS.len()],
            decode_step_ms: Vec::new(),
            prefill_ms: Vec::new(),
        });
    }
    let series = bench_series(a.context, 8);
    // Warm-up: loads each engine's buckets for each workload it can run, and finds which those are.
    for b in &mut benches {
        for (w, slot) in WORKLOADS.iter().zip(&mut b.times) {
            if fits(&b.engine, w, &series) {
                run_workload(&b.engine, w, &series)?;
                *slot = Some(Vec::with_capacity(a.runs));
            }
        }
    }
    eprintln!(
        "timing {} engine(s) × {} workloads × {} runs, interleaved ...",
        benches.len(),
        WORKLOADS.len(),
        a.runs
    );
    for _ in 0..a.runs {
        for (wi, w) in WORKLOADS.iter().enumerate() {
            for b in &mut benches {
                let Some(times) = b.times[wi].as_mut() else { continue };
                let t = Instant::now();
                run_workload(&b.engine, w, &series)?;
                times.push(t.elapsed());
                if w.name == "mean_h336" {
                    for r in b.engine.last_call() {
                        let ms = r.seconds * 1e3;
                        match r.bucket.kind {
                            GraphKind::Prefill => b.prefill_ms.push(ms),
                            GraphKind::Decode => b.decode_step_ms.push(ms),
                            // a Toto 1.0 engine runs no other kind (its loader refuses them)
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    // Peak RSS in child processes (the bandwidth probe below allocates its own 512 MiB).
    let rss: Vec<Vec<Option<f64>>> = if a.no_rss {
        benches.iter().map(|_| vec![None; WORKLOADS.len()]).collect()
    } else {
        benches
            .iter()
            .map(|b| {
                WORKLOADS
                    .iter()
                    .zip(&b.times)
                    .map(|(w, t)| t.as_ref().and_then(|_| child_rss(a, &b.dir, w.name).ok()))
                    .collect()
            })
            .collect()
    };
    let threads = engines::runtime::intra_threads();
    let bw = read_bandwidth_gbs(threads);
    let medians = print_report(a, &benches, reference.as_ref(), &rss, bw, threads)?;
    if let Some(path) = &a.plot {
        plot_report(path, a, &benches, reference.is_some(), &medians, threads)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Per workload: each engine's median (ms) and toto-ts's.
type Medians = Vec<(Vec<Option<f64>>, Option<f64>)>;

/// `--plot`: the medians as bars per workload, log scale.
fn plot_report(
    path: &Path,
    a: &BenchArgs,
    benches: &[Bench],
    with_reference: bool,
    medians: &Medians,
    threads: usize,
) -> anyhow::Result<()> {
    let workloads: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
    let engines: Vec<(String, Vec<Option<f64>>)> = benches
        .iter()
        .enumerate()
        .map(|(bi, b)| (b.label.clone(), medians.iter().map(|(m, _)| m[bi]).collect()))
        .collect();
    let reference: Option<Vec<Option<f64>>> =
        with_reference.then(|| medians.iter().map(|(_, r)| *r).collect());
    let subtitle = format!(
        "{} points of context per series, median of {} interleaved runs, {threads} threads; lower is better",
        a.context, a.runs
    );
    let chart = plot::bars::bench_chart(&workloads, &engines, reference.as_deref(), subtitle)?;
    plot::write(path, "--plot", &chart)?;
    eprintln!("plotted the results into {}", path.display());
    Ok(())
}

/// The workload's requests: `series` of the bench series, each its own request.
fn requests(w: &Workload, series: &[Vec<Option<f32>>]) -> Vec<ForecastRequest> {
    series[..w.series]
        .iter()
        .map(|s| ForecastRequest {
            id: None,
            target: vec![s.clone()],
            id_mask: vec![0],
            horizon: w.horizon,
            samples: w.samples,
            quantiles: if w.samples > 0 { vec![0.1, 0.5, 0.9] } else { Vec::new() },
            seed: 1,
            strict_context: false,
            context_cut: None,
            ..ForecastRequest::default()
        })
        .collect()
}

fn fits(engine: &Engine, w: &Workload, series: &[Vec<Option<f32>>]) -> bool {
    requests(w, series).iter_mut().all(|r| engine.admit(r, "bench").is_ok())
}

fn run_workload(engine: &Engine, w: &Workload, series: &[Vec<Option<f32>>]) -> anyhow::Result<()> {
    let reqs = requests(w, series);
    let results = if w.separate_calls {
        reqs.into_iter().flat_map(|r| engine.forecast(vec![r])).collect::<Vec<_>>()
    } else {
        engine.forecast(reqs)
    };
    for r in results {
        std::hint::black_box(r.with_context(|| format!("workload {}", w.name))?);
    }
    Ok(())
}

/// Child mode (`--rss-probe WORKLOAD`): load the engine, run the workload once, print the peak RSS as JSON.
pub fn rss_probe(a: &BenchArgs, dir: &Path, name: &str, budget: Option<u64>) -> anyhow::Result<ExitCode> {
    let w = WORKLOADS.iter().find(|w| w.name == name).with_context(|| format!("no workload {name:?}"))?;
    let opts = LoadOptions { ort_lib: a.ort.ort_lib.clone(), threads: a.threads, memory_budget: budget };
    let engine = Engine::load(dir, &opts)?;
    run_workload(&engine, w, &bench_series(a.context, 8))?;
    println!(
        "{}",
        json!({"peak_rss_mb": proc_status_mb("VmHWM:"), "weights_bytes": engine.manifest().weights_bytes})
    );
    Ok(ExitCode::SUCCESS)
}

fn print_report(
    a: &BenchArgs,
    benches: &[Bench],
    reference: Option<&Value>,
    rss: &[Vec<Option<f64>>],
    bw: f64,
    threads: usize,
) -> anyhow::Result<Medians> {
    let med = |t: &Option<Vec<Duration>>| t.as_ref().map(|v| median(v.iter().map(ms).collect()));
    println!(
        "totoc bench: {} engine(s), {} points of context per series, median of {} interleaved runs, {threads} threads",
        benches.len(),
        a.context,
        a.runs
    );
    let cpu = engines::cpu::cpu_summary();
    println!("  cpu          {}", cpu.as_deref().unwrap_or("unknown (no /proc/cpuinfo)"));
    for b in benches {
        println!("  {:<12} {} ({})", b.label, b.dir.display(), b.engine.info().label);
    }
    let mut header = format!("{:<20} {:>6} {:>7} {:>7}", "workload", "series", "samples", "horizon");
    for b in benches {
        header += &format!(" {:>11}", format!("{} ms", b.label));
    }
    if benches.len() > 1 {
        header += &format!(" {:>12}", format!("{}/best", benches[0].label));
    }
    if reference.is_some() {
        header += &format!(" {:>11} {:>9}", "toto-ts ms", "speedup");
    }
    println!("{header}");
    let mut json_rows = serde_json::Map::new();
    let mut medians = Medians::new();
    for (wi, w) in WORKLOADS.iter().enumerate() {
        let meds: Vec<Option<f64>> = benches.iter().map(|b| med(&b.times[wi])).collect();
        let mut line = format!("{:<20} {:>6} {:>7} {:>7}", w.name, w.series, w.samples, w.horizon);
        for m in &meds {
            line += &format!(" {:>11}", m.map_or("-".into(), |m| format!("{m:.1}")));
        }
        let best_other = meds[1..].iter().flatten().copied().fold(f64::INFINITY, f64::min);
        let ratio = meds[0].filter(|_| best_other.is_finite()).map(|m| m / best_other);
        if benches.len() > 1 {
            line += &format!(" {:>12}", ratio.map_or("-".into(), |r| format!("{r:.2}×")));
        }
        let r = reference.and_then(|r| r["cases"][w.name]["median_ms"].as_f64());
        if reference.is_some() {
            let sp = r.zip(meds[0]).map(|(r, m)| r / m);
            line += &format!(
                " {:>11} {:>9}",
                r.map_or("-".into(), |r| format!("{r:.1}")),
                sp.map_or("-".into(), |s| format!("{s:.1}×"))
            );
        }
        println!("{line}");
        medians.push((meds.clone(), r));
        json_rows.insert(
            w.name.into(),
            json!({"series": w.series, "samples": w.samples, "horizon": w.horizon, "separate_calls": w.separate_calls,
                   "median_ms": benches.iter().zip(&meds).map(|(b, m)| (b.label.clone(), json!(m))).collect::<serde_json::Map<_, _>>(),
                   "first_vs_best_other": ratio, "reference_median_ms": r}),
        );
    }
    for (bi, b) in benches.iter().enumerate() {
        let (one, eight) = (med(&b.times[4]), med(&b.times[5]));
        if let (Some(one), Some(eight)) = (one, eight) {
            println!(
                "{}: 8 series in one call {one:.1} ms = {:.2}× the time of 8 single calls ({eight:.1} ms)",
                b.label,
                one / eight
            );
        }
        let weights = b.engine.manifest().weights_bytes;
        let floor_ms = weights as f64 / (bw * 1e9) * 1e3;
        let step = median(b.decode_step_ms.clone());
        let on_host = matches!(b.engine.manifest().target, engines::backend::Target::Cpu { .. });
        if step.is_finite() && !on_host {
            // the floor is host memory's bandwidth: a GPU engine reads its weights from device memory
            println!(
                "{}: decode step (mean H=336) median {step:.2} ms; prefill {:.2} ms",
                b.label,
                median(b.prefill_ms.clone())
            );
        } else if step.is_finite() {
            println!(
                "{}: decode step (mean H=336) median {step:.1} ms = {:.2}× the floor of {floor_ms:.1} ms ({:.0} MB of \
                 weights at the {bw:.1} GB/s this machine reads); prefill {:.1} ms",
                b.label,
                step / floor_ms,
                weights as f64 / 1e6,
                median(b.prefill_ms.clone())
            );
        }
        let peaks: Vec<String> = WORKLOADS
            .iter()
            .zip(&rss[bi])
            .filter_map(|(w, r)| {
                r.map(|r| format!("{} {r:.0} MB ({:.2}×)", w.name, r * 1e6 / weights as f64))
            })
            .collect();
        if !peaks.is_empty() {
            println!(
                "{}: peak RSS per workload (own process; × weight bytes): {}",
                b.label,
                peaks.join(", ")
            );
        }
    }
    if let Some(r) = reference.and_then(|r| r["peak_rss_cases_mb"].as_f64().or(r["peak_rss_mb"].as_f64())) {
        println!("toto-ts: peak RSS {r:.0} MB");
    }
    if let Some(path) = &a.json {
        let doc = json!({"runs": a.runs, "context": a.context, "threads": threads, "cpu": cpu, "read_bandwidth_gbs": bw,
            "engines": benches.iter().enumerate().map(|(bi, b)| json!({"label": b.label, "dir": b.dir,
                "weights_bytes": b.engine.manifest().weights_bytes,
                "decode_step_ms": median(b.decode_step_ms.clone()), "prefill_ms": median(b.prefill_ms.clone()),
                "peak_rss_mb": WORKLOADS.iter().zip(&rss[bi]).map(|(w, r)| (w.name.to_string(), json!(r))).collect::<serde_json::Map<_, _>>()}))
                .collect::<Vec<_>>(),
            "workloads": json_rows, "reference": reference});
        exporter::fsutil::write_atomic(path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
    }
    Ok(medians)
}

fn ms(d: &Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Read bandwidth of this machine (GB/s) with `threads` threads each summing its share of a 512 MiB buffer,
/// best of 5: what a decode step, which streams every weight once on the same threads, can at best achieve.
fn read_bandwidth_gbs(threads: usize) -> f64 {
    let buf: Vec<u64> = (0..(512usize << 20) / 8).map(|i| i as u64).collect();
    let chunk = buf.len().div_ceil(threads.max(1));
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let t = Instant::now();
        std::thread::scope(|s| {
            for part in buf.chunks(chunk) {
                s.spawn(move || std::hint::black_box(part.iter().fold(0u64, |a, &x| a.wrapping_add(x))));
            }
        });
        best = best.min(t.elapsed().as_secs_f64());
    }
    (buf.len() * 8) as f64 / best / 1e9
}

/// Times toto-ts eager with the embedded reference scripts (written to a temporary directory).
fn run_reference(a: &BenchArgs, checkpoint: &Path) -> anyhow::Result<Value> {
    let python = a.reference_python.clone().unwrap_or_else(|| {
        PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join(".cache/totoc/reference-venv/bin/python")
    });
    if !python.exists() {
        bail!(
            "toto-ts venv not found at {}: create it with tests/reference/setup_venv.sh from the totoc repository \
             (or `python3 -m venv V && V/bin/pip install toto-ts==0.2.0`), or pass --reference-python",
            python.display()
        );
    }
    let dir = tempfile::tempdir().context("creating a temporary directory for the reference scripts")?;
    std::fs::write(dir.path().join("bench_reference.py"), BENCH_REFERENCE_PY)?;
    std::fs::write(dir.path().join("run_reference.py"), RUN_REFERENCE_PY)?;
    let script = dir.path().join("bench_reference.py");
    let threads = a.threads.unwrap_or_else(engines::cpu::physical_cores);
    let cases = WORKLOADS.iter().filter(|w| !w.separate_calls).map(|w| w.name).collect::<Vec<_>>().join(",");
    eprintln!("timing toto-ts eager ({} runs per case; this takes a while) ...", a.runs);
    let out = Command::new(&python)
        .arg(&script)
        .args(["--checkpoint".as_ref(), checkpoint.as_os_str()])
        .args(["--runs", &a.runs.to_string(), "--threads", &threads.to_string(), "--cases", &cases])
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    if !out.status.success() {
        bail!("the toto-ts reference benchmark failed ({})", out.status);
    }
    serde_json::from_slice(&out.stdout).context("parsing the reference benchmark's JSON")
}
