//! `totoc bench` on Kronos engines: issue 34's workloads, against upstream in eval mode and a KV-cached plain-torch
//! loop over upstream's modules, both timed in the same invocation by `tests/reference/bench_kronos_reference.py`
//! (embedded in the binary, with the modules it imports), on the same threads.
//!
//! Workloads (one call each, 15-minute bars; upstream's are `kronos_inputs.bars`, totoc's [`bound::bars`] of the same
//! shape: the work does not depend on the values): 392 + 120 greedy and `samples: 1`; 392 + 120 `samples: 8`; 8
//! series × (392 + 120) in one call (against `predict_batch`); 400 + 120 (the window slides for the last 7 steps);
//! 2,000 + 48 at max_context 2048 (a Kronos-mini-shaped engine; no goal). max_context 512 elsewhere.
//!
//! For every workload the bench prints a **bound**: the tokens that run full passes (encode, prefill, the
//! recomputes after the slide, the final decode) at the engine's measured prefill throughput, plus every cached
//! step (decode and refine) at the bytes it must read (the weights it reads once, the valid part of its rows'
//! caches) over the machine's measured read bandwidth; and the ratio of totoc's time to it (goal ≤ 1.3). The FLOP
//! ratio of upstream's loop to an exact KV cache is printed beside each row. Peak RSS of each workload is measured
//! in a fresh child process and compared with 1.5 × (the weights + the caches the workload needs) above the
//! process's RSS with ONNX Runtime loaded.
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{bail, Context};
use engines::engine::{Engine, LoadOptions};
use engines::kronos::job::KronosJob;
use exporter::kronos::config::KronosConfig;
use serde_json::{json, Value};

use super::bound::{self, counts, kronos, read_bandwidth, run_jobs, Rates, Shape, Sizes};
use crate::cmd::bench_support::median_ms;

use crate::cli::BenchArgs;
use crate::cmd::bench_support::proc_status_mb;

/// The reference harness and the modules it imports, written to a temporary directory and run there.
const SCRIPTS: [(&str, &str); 4] = [
    ("bench_kronos_reference.py", include_str!("../../tests/reference/bench_kronos_reference.py")),
    ("kronos_inputs.py", include_str!("../../tests/reference/kronos_inputs.py")),
    ("run_kronos_reference.py", include_str!("../../tests/reference/run_kronos_reference.py")),
    ("kernels.py", include_str!("../../tests/reference/kernels.py")),
];

/// One workload: `series` series of `context` + `horizon` bars, `samples` paths each (0: greedy).
#[derive(Debug, Clone, Copy)]
pub struct Workload {
    pub name: &'static str,
    pub context: usize,
    pub horizon: usize,
    pub series: usize,
    pub samples: usize,
    pub max_context: usize,
    /// The speed goal against upstream (× faster), if any.
    pub goal: Option<f64>,
}

pub const WORKLOADS: [Workload; 6] = [
    Workload {
        name: "greedy_392_120",
        context: 392,
        horizon: 120,
        series: 1,
        samples: 0,
        max_context: 512,
        goal: Some(20.0),
    },
    Workload {
        name: "s1_392_120",
        context: 392,
        horizon: 120,
        series: 1,
        samples: 1,
        max_context: 512,
        goal: Some(20.0),
    },
    Workload {
        name: "s8_392_120",
        context: 392,
        horizon: 120,
        series: 1,
        samples: 8,
        max_context: 512,
        goal: Some(50.0),
    },
    Workload {
        name: "batch8_392_120",
        context: 392,
        horizon: 120,
        series: 8,
        samples: 1,
        max_context: 512,
        goal: Some(40.0),
    },
    Workload {
        name: "s1_400_120",
        context: 400,
        horizon: 120,
        series: 1,
        samples: 1,
        max_context: 512,
        goal: Some(7.5),
    },
    Workload {
        name: "mini_2000_48",
        context: 2000,
        horizon: 48,
        series: 1,
        samples: 1,
        max_context: 2048,
        goal: None,
    },
];

impl Workload {
    pub fn shape(&self) -> Shape {
        Shape {
            context: self.context,
            horizon: self.horizon,
            series: self.series,
            samples: self.samples,
            max_context: self.max_context,
        }
    }
}

/// The jobs of workload `w` on `engine`.
fn jobs(w: &Workload, engine: &engines::kronos::engine::KronosEngine) -> anyhow::Result<Vec<KronosJob>> {
    bound::jobs(w.name, &w.shape(), engine)
}

fn workload(name: &str) -> anyhow::Result<Workload> {
    WORKLOADS.iter().copied().find(|w| w.name == name).with_context(|| {
        format!("no Kronos workload {name:?} (have: {})", WORKLOADS.map(|w| w.name).join(", "))
    })
}

/// Bytes of the caches a workload holds at once: its lane's rows (the call's paths, at most the largest decode
/// rows), each `[layers][k, v][T][D]` plus the dependency cache `[k, v][T][D]`.
fn cache_bytes(w: &Workload, s: &Sizes, engine: &Engine) -> f64 {
    let window = kronos(engine).map(|k| k.job_limits().window).unwrap_or(w.max_context) as f64;
    let rows = (w.series * w.samples.max(1)) as f64;
    rows * 4.0 * (2.0 * s.layers + 2.0) * s.d * window
}

/// The engines' model config.
fn config(engine: &Engine) -> anyhow::Result<KronosConfig> {
    engine.manifest().model.kronos().cloned().context("not a Kronos engine")
}

/// A row of the table: one workload on one engine.
struct Row {
    engine: String,
    workload: Workload,
    ms: f64,
    bound_ms: f64,
    flop_ratio: f64,
    rss: Option<(f64, f64)>,
    budget_mb: f64,
}

/// Runs the Kronos benchmark (every `--engine` must be a Kronos engine).
pub fn run(
    a: &BenchArgs,
    engines_arg: &[(String, PathBuf)],
    budget: Option<u64>,
) -> anyhow::Result<ExitCode> {
    let opts = LoadOptions { ort_lib: a.ort.ort_lib.clone(), threads: a.threads, memory_budget: budget };
    let mut loaded = Vec::new();
    for (label, dir) in engines_arg {
        let engine = Engine::load(dir, &opts)
            .with_context(|| format!("loading engine {label} ({})", dir.display()))?;
        if engine.info().model != exporter::registry::Family::Kronos {
            bail!(
                "engine {label} holds {}, not Kronos: bench each family separately",
                engine.info().model.as_str()
            );
        }
        loaded.push((label.clone(), dir.clone(), engine));
    }
    let pairs = match &a.reference_checkpoint {
        Some(root) => reference_pairs(root, &loaded)?,
        None => Vec::new(),
    };
    let reference = match pairs.first() {
        Some(_) => Some(run_reference(a, &pairs)?),
        None => None,
    };
    // the harness times the first pair's model on every workload but the mini row, the second's on that row
    let timed: Vec<&str> = pairs.iter().map(|(label, _, _)| label.as_str()).collect();
    let threads = engines::runtime::intra_threads();
    let read = read_bandwidth(threads);
    let mut rows = Vec::new();
    for (label, dir, engine) in &loaded {
        let k = kronos(engine)?;
        let sizes = Sizes::of(&config(engine)?);
        let rates = Rates { prefill_tokens_per_s: bound::prefill_rate(engine)?, read_bytes_per_s: read };
        eprintln!(
            "{label}: prefill {:.0} tokens/s, read bandwidth {:.1} GB/s ({threads} threads)",
            rates.prefill_tokens_per_s,
            rates.read_bytes_per_s / 1e9
        );
        for w in WORKLOADS {
            let Ok(jobs) = jobs(&w, k) else { continue };
            run_jobs(engine, &jobs)?;
            let mut times = Vec::with_capacity(a.runs);
            for _ in 0..a.runs {
                let t = Instant::now();
                run_jobs(engine, &jobs)?;
                times.push(t.elapsed());
            }
            let c = counts(&[w.shape()], &sizes);
            let bound_ms = rates.seconds(&c) * 1e3;
            let rss = if a.no_rss { None } else { child_rss(a, dir, w.name).ok() };
            let budget_mb =
                1.5 * (engine.manifest().weights_bytes as f64 + cache_bytes(&w, &sizes, engine)) / 1e6;
            rows.push(Row {
                engine: label.clone(),
                workload: w,
                ms: median_ms(&times),
                bound_ms,
                flop_ratio: c.upstream_flops / c.exact_flops,
                rss,
                budget_mb,
            });
        }
    }
    print_table(&rows, reference.as_ref(), &timed, threads, read);
    if let Some(path) = &a.json {
        let out: Vec<Value> = rows
            .iter()
            .map(|r| {
                json!({"engine": r.engine, "workload": r.workload.name, "median_ms": r.ms, "bound_ms": r.bound_ms,
                    "flop_ratio": r.flop_ratio, "peak_rss_above_ort_mb": r.rss.map(|x| x.0 - x.1),
                    "rss_budget_mb": r.budget_mb})
            })
            .collect();
        let v = json!({"model": "kronos", "threads": threads, "cpu": engines::cpu::cpu_summary(), "read_bytes_per_s": read,
            "loadavg": std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim(), "rows": out,
            "reference": reference, "reference_engines": timed});
        std::fs::write(path, serde_json::to_vec_pretty(&v)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The table; a row's upstream and cached-loop columns are the harness's times of its workload when they are of
/// its engine's model (`timed`: the engines whose checkpoints the harness ran, the mini row's second).
fn print_table(rows: &[Row], reference: Option<&Value>, timed: &[&str], threads: usize, read: f64) {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "Kronos: {threads} threads; read bandwidth {:.1} GB/s; load average {}; cpu {}",
        read / 1e9,
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        engines::cpu::cpu_summary().as_deref().unwrap_or("unknown")
    );
    println!(
        "{:<10} {:<16} {:>10} {:>10} {:>7} {:>11} {:>7} {:>10} {:>8} {:>9} {:>6} {:>12}",
        "engine",
        "workload",
        "totoc ms",
        "bound ms",
        "/bound",
        "upstream ms",
        "×",
        "cached ms",
        "×cached",
        "goal",
        "FLOP×",
        "ms/cand/path"
    );
    let ran = |engine: &str, w: &str| {
        let which = if w == "mini_2000_48" { timed.get(1) } else { timed.first() };
        which.is_some_and(|&label| label == engine)
    };
    let case = |r: &Row| {
        let w = r.workload.name;
        reference
            .filter(|_| ran(&r.engine, w))
            .and_then(|x| x["cases"].get(w))
            .filter(|c| c.get("skipped").is_none())
    };
    let fmt = |x: Option<f64>, p: usize| x.map_or("-".to_string(), |x| format!("{x:.p$}"));
    for r in rows {
        let up = case(r).and_then(|c| c["upstream"]["median_ms"].as_f64());
        let cached = case(r).and_then(|c| c["cached"]["median_ms"].as_f64());
        let paths = (r.workload.series * r.workload.samples.max(1)) as f64;
        let goal = match (r.workload.goal, up) {
            (Some(g), Some(u)) => format!("{g}× {}", if u / r.ms >= g { "met" } else { "MISSED" }),
            (Some(g), None) => format!("{g}×"),
            (None, _) => "-".into(),
        };
        println!(
            "{:<10} {:<16} {:>10.1} {:>10.1} {:>7.2} {:>11} {:>7} {:>10} {:>8} {:>9} {:>6.1} {:>12.3}",
            r.engine,
            r.workload.name,
            r.ms,
            r.bound_ms,
            r.ms / r.bound_ms,
            fmt(up, 0),
            fmt(up.map(|u| u / r.ms), 1),
            fmt(cached, 0),
            fmt(cached.map(|c| c / r.ms), 2),
            goal,
            r.flop_ratio,
            r.ms / (r.workload.horizon as f64 * paths),
        );
    }
    for r in rows {
        if let Some((peak, base)) = r.rss {
            let above = peak - base;
            println!(
                "{} {}: peak RSS {peak:.0} MB, {above:.0} MB above the {base:.0} MB with ONNX Runtime loaded; goal ≤ 1.5 × \
                 (weights + caches) = {:.0} MB: {}",
                r.engine,
                r.workload.name,
                r.budget_mb,
                if above <= r.budget_mb { "within" } else { "OVER" }
            );
        }
    }
}

/// The reference checkpoints under `root` (itself or its subdirectories: each `predictor/` + `tokenizer/`, as
/// `make_kronos_checkpoints.py --out` writes them) that match the engines' predictors by hash, in engine order,
/// each with the label of its engine.
fn reference_pairs(
    root: &Path,
    engines: &[(String, PathBuf, Engine)],
) -> anyhow::Result<Vec<(String, PathBuf, PathBuf)>> {
    let mut dirs = vec![root.to_path_buf()];
    for e in std::fs::read_dir(root).with_context(|| format!("reading {}", root.display()))? {
        dirs.push(e?.path());
    }
    let mut found = Vec::new();
    for d in dirs.iter().filter(|d| d.join("predictor").is_dir() && d.join("tokenizer").is_dir()) {
        let sha = exporter::fsutil::sha256_file(&d.join("predictor/model.safetensors"))?;
        found.push((sha, d.join("predictor"), d.join("tokenizer")));
    }
    let mut pairs = Vec::new();
    for (label, _, e) in engines {
        let want = &e.manifest().source.checkpoint.safetensors_sha256;
        match found.iter().find(|(sha, _, _)| sha == want) {
            Some((_, p, t)) => pairs.push((label.clone(), p.clone(), t.clone())),
            None => eprintln!(
                "note: no reference checkpoint under {} matches engine {label}'s predictor",
                root.display()
            ),
        }
    }
    if pairs.is_empty() {
        bail!(
            "--reference-checkpoint {}: no predictor/ + tokenizer/ pair there (or in its subdirectories) is an engine's \
             checkpoint; make one with tests/reference/make_kronos_checkpoints.py --config small --out DIR",
            root.display()
        );
    }
    Ok(pairs)
}

/// Times upstream and the cached torch loop with the embedded harness: the first pair as the small model, a
/// second as the mini model.
fn run_reference(a: &BenchArgs, pairs: &[(String, PathBuf, PathBuf)]) -> anyhow::Result<Value> {
    let python = a.reference_python.clone().unwrap_or_else(|| {
        PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join(".cache/totoc/reference-venv/bin/python")
    });
    if !python.exists() {
        bail!(
            "the Kronos reference venv is not at {}: create it with tests/reference/setup_venv.sh (kronos-finance 0.1.5 \
             on the reference venv), or pass --reference-python",
            python.display()
        );
    }
    let dir = tempfile::tempdir().context("creating a directory for the reference scripts")?;
    for (name, text) in SCRIPTS {
        std::fs::write(dir.path().join(name), text)?;
    }
    let threads = a.threads.unwrap_or_else(engines::cpu::physical_cores);
    let mut cmd = Command::new(&python);
    cmd.arg(dir.path().join(SCRIPTS[0].0))
        .arg("--predictor")
        .arg(&pairs[0].1)
        .arg("--tokenizer")
        .arg(&pairs[0].2)
        .args(["--runs", &a.runs.to_string(), "--threads", &threads.to_string()]);
    if let Some((_, p, t)) = pairs.get(1) {
        cmd.arg("--mini-predictor").arg(p).arg("--mini-tokenizer").arg(t);
    }
    eprintln!(
        "timing upstream Kronos and the cached torch loop ({} runs each; this takes a while) ...",
        a.runs
    );
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    if out.stdout.is_empty() {
        bail!("the Kronos reference benchmark failed ({})", out.status);
    }
    serde_json::from_slice(&out.stdout).context("parsing the reference benchmark's JSON")
}

/// Peak RSS and the RSS with ONNX Runtime loaded (MB) of workload `name` run alone in a fresh child process.
fn child_rss(a: &BenchArgs, dir: &Path, name: &str) -> anyhow::Result<(f64, f64)> {
    let exe = std::env::current_exe().context("locating the totoc executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("bench").arg("--engine").arg(dir).args(["--rss-probe", name]);
    crate::cmd::bench_support::engine_options(
        &mut cmd,
        a.threads,
        a.memory_budget.as_deref(),
        a.ort.ort_lib.as_deref(),
    );
    let out = cmd.stderr(std::process::Stdio::null()).output()?;
    if !out.status.success() {
        bail!("RSS probe of {name} failed ({})", out.status);
    }
    let v: Value = serde_json::from_slice(&out.stdout)?;
    Ok((
        v["peak_rss_mb"].as_f64().context("no peak_rss_mb")?,
        v["ort_rss_mb"].as_f64().context("no ort_rss_mb")?,
    ))
}

/// Child mode (`--rss-probe WORKLOAD` on a Kronos engine): ONNX Runtime loaded, its RSS; then the engine and the
/// workload once; the peak.
pub fn rss_probe(a: &BenchArgs, dir: &Path, name: &str, budget: Option<u64>) -> anyhow::Result<ExitCode> {
    let w = workload(name)?;
    engines::runtime::set_intra_threads(a.threads);
    engines::runtime::init(a.ort.ort_lib.as_deref())?;
    let ort_rss = proc_status_mb("VmRSS:");
    let opts = LoadOptions { ort_lib: a.ort.ort_lib.clone(), threads: a.threads, memory_budget: budget };
    let engine = Engine::load(dir, &opts)?;
    run_jobs(&engine, &jobs(&w, kronos(&engine)?)?)?;
    println!("{}", json!({"peak_rss_mb": proc_status_mb("VmHWM:"), "ort_rss_mb": ort_rss}));
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flop_model_gives_the_notes_ratio_for_the_slide() {
        // Kronos-small: 400 + 120 at 512 is 13.9× in the model notes (2.75 TF vs 198 GF), 392 + 120 about 107×
        let small = Sizes { d: 512.0, ff: 1024.0, layers: 8.0, vocab: 1024.0 };
        let c = counts(&[workload("s1_400_120").unwrap().shape()], &small);
        let r = c.upstream_flops / c.exact_flops;
        assert!((13.0..15.0).contains(&r), "{r}: {:.3e} vs {:.3e}", c.upstream_flops, c.exact_flops);
        let c = counts(&[workload("greedy_392_120").unwrap().shape()], &small);
        let r = c.upstream_flops / c.exact_flops;
        assert!((95.0..120.0).contains(&r), "{r}");
    }
}
