//! `totoc bench` on Kronos engines: issue 34's workloads, against upstream in eval mode and a KV-cached plain-torch
//! loop over upstream's modules, both timed in the same invocation by `tests/reference/bench_kronos_reference.py`
//! (embedded in the binary, with the modules it imports), on the same threads.
//!
//! Workloads (one call each, 15-minute bars; upstream's are `kronos_inputs.bars`, totoc's [`bars`] of the same
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
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use engines::engine::{Engine, LoadOptions};
use engines::kronos::columns::{Column, ColumnValues, COLUMNS};
use engines::kronos::engine::KronosEngine;
use engines::kronos::hooks::Hooks;
use engines::kronos::job::{JobInput, KronosJob};
use engines::kronos::stamps::WallClock;
use exporter::kronos::config::KronosConfig;
use exporter::signature::GraphKind;
use serde_json::{json, Value};

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

fn workload(name: &str) -> anyhow::Result<Workload> {
    WORKLOADS.iter().copied().find(|w| w.name == name).with_context(|| {
        format!("no Kronos workload {name:?} (have: {})", WORKLOADS.map(|w| w.name).join(", "))
    })
}

/// `count` 15-minute bars from 2024-03-04 09:30 on weekdays (26 a day): stamps and the six columns, a random walk
/// of prices to the cent, intraday U-shaped volume, amount = volume × the typical price.
pub fn bars(seed: u64, count: usize) -> (Vec<WallClock>, [Vec<f64>; 6]) {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut normal = move || {
        // the sum of 12 uniforms − 6: a cheap, deterministic near-normal
        (0..12)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 11) as f64 / (1u64 << 53) as f64
            })
            .sum::<f64>()
            - 6.0
    };
    let cent = |x: f64| (x * 100.0).round() / 100.0;
    let mut stamps = Vec::with_capacity(count);
    // 2024 (a leap year) from Monday 4 March, day by day, into the next years as far as `count` needs
    const DAYS: [u32; 12] = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let (mut year, mut month, mut dom, mut day) = (2024u32, 3u32, 4u32, 0u32);
    while stamps.len() < count {
        let weekday = day % 7;
        if weekday < 5 {
            for k in 0..26u32 {
                let minutes = 570 + 15 * k;
                stamps.push(
                    WallClock::new(year as i32, month, dom, minutes / 60, minutes % 60, 0, 0)
                        .expect("a valid stamp"),
                );
            }
        }
        day += 1;
        dom += 1;
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
        if dom > DAYS[month as usize - 1] - u32::from(month == 2 && !leap) {
            (dom, month) = (1, month + 1);
            if month > 12 {
                (month, year) = (1, year + 1);
            }
        }
    }
    stamps.truncate(count);
    let mut cols: [Vec<f64>; 6] = Default::default();
    let mut close = cent(100.0 * (0.3 * normal()).exp());
    for i in 0..count {
        let first = i > 0 && stamps[i].day() != stamps[i - 1].day();
        let o = cent(close * ((if first { 0.01 } else { 0.0005 }) * normal()).exp());
        let c = cent(o * (0.003 * normal()).exp());
        let hi = cent(o.max(c) * (1.0 + 0.002 * normal().abs())).max(o).max(c);
        let lo = cent(o.min(c) * (1.0 - 0.002 * normal().abs())).min(o).min(c);
        let k = (i % 26) as f64;
        let vol =
            100.0 * (200.0 * (1.0 + 1.5 * ((k - 12.5) / 12.5).powi(2)) * (0.4 * normal()).exp()).round();
        let amt = cent(vol * (hi + lo + c) / 3.0);
        for (col, v) in cols.iter_mut().zip([o, hi, lo, c, vol, amt]) {
            col.push(v);
        }
        close = c;
    }
    (stamps, cols)
}

/// The jobs of workload `w` on `engine`.
fn jobs(w: &Workload, engine: &KronosEngine) -> anyhow::Result<Vec<KronosJob>> {
    (0..w.series)
        .map(|b| {
            let (stamps, cols) = bars(9000 + b as u64, w.context + w.horizon);
            let columns: Vec<Column> = COLUMNS
                .iter()
                .zip(&cols)
                .map(|(&name, v)| Column { name, values: ColumnValues::F64(&v[..w.context]) })
                .collect();
            let input = JobInput {
                columns,
                timestamps: Some(&stamps[..w.context]),
                future_timestamps: Some(&stamps[w.context..]),
                horizon: w.horizon,
                samples: w.samples,
                seed: b as u64,
                max_context: Some(w.max_context as u64),
                ..JobInput::default()
            };
            let at = format!("{} series {b}", w.name);
            let job = KronosJob::new(&at, input, &engine.job_limits())?;
            engine.check_fits(&job, &at)?;
            Ok(job)
        })
        .collect()
}

fn kronos(engine: &Engine) -> anyhow::Result<&KronosEngine> {
    engine.family_engine().as_any().downcast_ref::<KronosEngine>().context("not a Kronos engine")
}

/// One call of `jobs`.
fn run_jobs(engine: &Engine, jobs: &[KronosJob]) -> anyhow::Result<()> {
    let refs: Vec<&KronosJob> = jobs.iter().collect();
    for r in kronos(engine)?.forecast_jobs(engine.call(), &refs, Hooks::default(), None) {
        std::hint::black_box(r?);
    }
    Ok(())
}

fn median_ms(v: &[Duration]) -> f64 {
    let mut ms: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let n = ms.len();
    if n % 2 == 1 {
        ms[n / 2]
    } else {
        (ms[n / 2 - 1] + ms[n / 2]) / 2.0
    }
}

/// What the machine and the engine measure: the prefill's throughput and the memory's read bandwidth.
#[derive(Debug, Clone, Copy)]
struct Rates {
    /// Tokens per second of the engine's full-window prefill (one series, its largest prefill bucket's slots).
    prefill_tokens_per_s: f64,
    /// Bytes per second a `threads`-thread sum reads from a buffer far larger than the caches.
    read_bytes_per_s: f64,
}

/// The prefill throughput: the median of 5 one-step calls of a series of the largest prefill window, timed on its
/// prefill run alone.
fn prefill_rate(engine: &Engine) -> anyhow::Result<f64> {
    let k = kronos(engine)?;
    let window = engine
        .buckets()
        .iter()
        .filter(|b| b.kind == GraphKind::Prefill)
        .map(|b| b.slots)
        .max()
        .context("no prefill graph")?
        .min(k.job_limits().window);
    let w = Workload {
        name: "prefill",
        context: window,
        horizon: 1,
        series: 1,
        samples: 0,
        max_context: window,
        goal: None,
    };
    let jobs = jobs(&w, k)?;
    let mut times = Vec::new();
    for _ in 0..6 {
        run_jobs(engine, &jobs)?;
        let s: f64 = engine
            .last_call()
            .iter()
            .filter(|r| r.bucket.kind == GraphKind::Prefill)
            .map(|r| r.seconds)
            .sum();
        times.push(Duration::from_secs_f64(s));
    }
    Ok(window as f64 / (median_ms(&times[1..]) / 1e3))
}

/// Read bandwidth: the best of 5 passes of `threads` threads summing 256 MiB of f32.
fn read_bandwidth(threads: usize) -> f64 {
    let n: usize = 64 << 20;
    let data: Vec<f32> = (0..n).map(|i| (i % 251) as f32).collect();
    let threads = threads.max(1);
    let mut best = 0.0f64;
    for _ in 0..5 {
        let t = Instant::now();
        let total: f32 = std::thread::scope(|s| {
            let chunk = n.div_ceil(threads);
            let handles: Vec<_> = data
                .chunks(chunk)
                .map(|c| {
                    s.spawn(move || {
                        let mut acc = [0f32; 16];
                        for block in c.chunks_exact(16) {
                            for (a, x) in acc.iter_mut().zip(block) {
                                *a += x;
                            }
                        }
                        acc.iter().sum::<f32>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0.0)).sum()
        });
        std::hint::black_box(total);
        best = best.max((n * 4) as f64 / t.elapsed().as_secs_f64());
    }
    best
}

/// The model sizes the bound and the FLOP model need.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    d: f64,
    ff: f64,
    layers: f64,
    vocab: f64,
}

impl Sizes {
    fn of(cfg: &KronosConfig) -> Self {
        let p = &cfg.predictor;
        Sizes {
            d: p.d_model as f64,
            ff: p.ff_dim as f64,
            layers: p.n_layers as f64,
            vocab: (1u64 << cfg.bits()) as f64,
        }
    }

    /// Bytes of the weights one decode step reads (every layer, the token fusion, the dependency keys/values, the
    /// s1 head).
    fn decode_weights(&self) -> f64 {
        let Sizes { d, ff, layers, vocab } = *self;
        4.0 * (layers * (4.0 * d * d + 4.0 * d + 3.0 * d * ff + 2.0 * d)
            + 2.0 * d * d
            + d
            + 2.0 * d * d
            + 2.0 * d
            + vocab * d
            + vocab
            + d)
    }

    /// Bytes of the weights one refine run reads (the dependency query and output, its norm, the s2 head).
    fn refine_weights(&self) -> f64 {
        let Sizes { d, vocab, .. } = *self;
        4.0 * (2.0 * d * d + 2.0 * d + d + vocab * d + vocab)
    }

    /// Multiply-adds of one position through the backbone, besides attention (and the token fusion).
    fn position_macs(&self) -> f64 {
        let Sizes { d, ff, layers, .. } = *self;
        layers * (4.0 * d * d + 3.0 * d * ff) + 2.0 * d * d
    }

    /// Multiply-adds of a causal pass over `w` positions (each position attends to those before it).
    fn pass_macs(&self, w: f64) -> f64 {
        w * self.position_macs() + self.layers * 2.0 * self.d * w * (w + 1.0) / 2.0
    }
}

/// What a workload runs, counted from its shape (the planner's: one prefill per series, cached steps while the
/// window grows, a full recompute per path once it slides, the final decode per path).
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    /// Tokens of full passes: encode, prefill, recompute, final decode.
    pass_tokens: f64,
    /// Bytes the cached steps (decode and refine) read.
    step_bytes: f64,
    /// Model FLOPs, upstream's loop and with an exact KV cache.
    upstream_flops: f64,
    exact_flops: f64,
}

fn counts(w: &Workload, s: &Sizes) -> Counts {
    let (n, h, m) = (w.context, w.horizon, w.max_context);
    let paths = w.samples.max(1) as f64;
    let series = w.series as f64;
    let mut c = Counts::default();
    let d = s.d;
    c.pass_tokens += series * (n + n.min(m)) as f64 + series * paths * (n + h).min(m) as f64;
    // s2 given s1 over a window of `k` keys: the dependency query and output, attention, the s2 head
    let s2 = |k: f64| 2.0 * d * d + 2.0 * k * d + s.vocab * d;
    let w0 = n.min(m) as f64;
    c.exact_flops += series * (s.pass_macs(w0) + 2.0 * d * d * w0 + s.vocab * d);
    for i in 0..h {
        let l = n + i;
        let win = l.min(m) as f64;
        // upstream: the whole window every step, both heads and the dependency keys/values on every row
        c.upstream_flops += series
            * paths
            * (s.pass_macs(win) + win * s.vocab * d + 2.0 * d * d * win + s2(win) + win * s.vocab * d);
        if i == 0 {
            c.exact_flops += series * paths * s2(win);
            c.step_bytes += s.refine_weights() + series * paths * 4.0 * 2.0 * d * win;
            continue;
        }
        if l <= m {
            c.exact_flops += series
                * paths
                * (s.position_macs() + s.layers * 2.0 * win * d + 2.0 * d * d + s.vocab * d + s2(win));
            // one decode and one refine run for all the call's rows: the weights once, each row's valid caches
            c.step_bytes += s.decode_weights() + series * paths * 4.0 * 2.0 * s.layers * d * win;
        } else {
            c.pass_tokens += series * paths * m as f64;
            c.exact_flops += series * paths * (s.pass_macs(win) + 2.0 * d * d * win + s.vocab * d + s2(win));
        }
        c.step_bytes += s.refine_weights() + series * paths * 4.0 * 2.0 * d * win;
    }
    c.upstream_flops *= 2.0;
    c.exact_flops *= 2.0;
    c
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
        let rates = Rates { prefill_tokens_per_s: prefill_rate(engine)?, read_bytes_per_s: read };
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
            let c = counts(&w, &sizes);
            let bound_ms =
                (c.pass_tokens / rates.prefill_tokens_per_s + c.step_bytes / rates.read_bytes_per_s) * 1e3;
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
    fn bars_are_weekday_sessions_of_15_minutes() {
        let (stamps, cols) = bars(1, 60);
        assert_eq!(stamps.len(), 60);
        assert_eq!((stamps[0].hour(), stamps[0].minute()), (9, 30));
        assert_eq!((stamps[25].hour(), stamps[25].minute()), (15, 45));
        assert_eq!((stamps[26].day(), stamps[26].hour()), (5, 9));
        // Friday 8 March, then Monday 11 March
        let (s, _) = bars(1, 26 * 6);
        assert_eq!((s[26 * 5].day(), s[26 * 5].weekday()), (11, 0));
        // the mini row's 2,048 bars run into June, every stamp a weekday, in order
        let (s, _) = bars(1, 2048);
        assert!(s.windows(2).all(|w| w[0] < w[1]) && s.iter().all(|t| t.weekday() < 5));
        assert_eq!((s[2047].month(), s[2047].day()), (6, 20));
        let row = |i: usize| cols.each_ref().map(|c| c[i]);
        for [o, h, l, c, v, a] in (0..60).map(row) {
            assert!(h >= o.max(c) && l <= o.min(c));
            assert!(v > 0.0 && a > 0.0);
        }
    }

    #[test]
    fn the_flop_model_gives_the_notes_ratio_for_the_slide() {
        // Kronos-small: 400 + 120 at 512 is 13.9× in the model notes (2.75 TF vs 198 GF), 392 + 120 about 107×
        let small = Sizes { d: 512.0, ff: 1024.0, layers: 8.0, vocab: 1024.0 };
        let c = counts(&workload("s1_400_120").unwrap(), &small);
        let r = c.upstream_flops / c.exact_flops;
        assert!((13.0..15.0).contains(&r), "{r}: {:.3e} vs {:.3e}", c.upstream_flops, c.exact_flops);
        let c = counts(&workload("greedy_392_120").unwrap(), &small);
        let r = c.upstream_flops / c.exact_flops;
        assert!((95.0..120.0).contains(&r), "{r}");
    }
}
