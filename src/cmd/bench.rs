//! `totoc bench`: the reference workloads (1 series × 512 points; mean H=336, 256 samples H=64,
//! 64 samples H=336, mean H=64) through an engine, medians of `--runs`, side by side with toto-ts eager
//! (`tests/reference/bench_reference.py`) in the same run, with each decode step set against the memory-bandwidth
//! floor (every weight streamed once per step) and the peak RSS.
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use engines::engine_bundle::EngineBundle;
use engines::forecaster::Forecaster;
use engines::request::ForecastRequest;
use serde_json::{json, Value};

use crate::cli::BenchArgs;

/// (name as bench_reference.py names it, samples, horizon)
const CASES: [(&str, usize, usize); 4] =
    [("mean_h336", 0, 336), ("samples256_h64", 256, 64), ("samples64_h336", 64, 336), ("mean_h64", 0, 64)];

pub fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    let engine = a.engine.clone().context("--engine DIR is required (or use `totoc bench serve`)")?;
    if a.runs == 0 {
        bail!("--runs must be at least 1");
    }
    // toto-ts first, so its memory is gone before ours is measured (both in this one invocation).
    let reference = match &a.reference_checkpoint {
        Some(ck) => Some(run_reference(&a, ck)?),
        None => None,
    };
    engines::runtime::set_intra_threads(a.threads);
    let bundle = EngineBundle::load(&engine, a.ort.ort_lib.as_deref())
        .with_context(|| format!("loading engine {}", engine.display()))?;
    let weight_bytes = 4 * param_count(&bundle.manifest().model) as u64;
    let mut f = Forecaster::new(bundle);
    let series = bench_series(a.context);

    let mut rows = Vec::new();
    let mut step_ms = Vec::new();
    let mut prefill_ms = Vec::new();
    for (name, samples, horizon) in CASES {
        let req = ForecastRequest {
            id: None,
            strict_context: false,
            context_cut: None,
            target: vec![series.clone()],
            id_mask: vec![0],
            horizon,
            samples,
            quantiles: if samples > 0 { vec![0.1, 0.5, 0.9] } else { Vec::new() },
            seed: 1,
        };
        let profile = f.choose_profile(&req)?.profile.name.clone();
        f.forecast(std::slice::from_ref(&req), false)?; // warm-up: loads the profile
        let mut times = Vec::with_capacity(a.runs);
        for _ in 0..a.runs {
            f.timings = Default::default();
            let t = Instant::now();
            let out = f.forecast(std::slice::from_ref(&req), false)?;
            times.push(t.elapsed());
            std::hint::black_box(out);
            if name == "mean_h336" {
                step_ms.extend(f.timings.decode.iter().map(ms));
                prefill_ms.extend(f.timings.prefill.iter().map(ms));
            }
        }
        let med = median(times.iter().map(ms).collect());
        let min = times.iter().map(ms).fold(f64::INFINITY, f64::min);
        rows.push((name, samples, horizon, profile, med, min));
    }
    // Peak RSS first: the bandwidth probe below allocates its own 512 MiB.
    let rss_mb = peak_rss_mb();
    let rss_now_mb = proc_status_mb("VmRSS:");
    let bw = read_bandwidth_gbs(engines::runtime::intra_threads());
    let floor_ms = weight_bytes as f64 / (bw * 1e9) * 1e3;
    let step = median(step_ms);
    let pre = median(prefill_ms);

    println!(
        "totoc bench: {} ({}), 1 series × {} points, median of {} runs",
        engine.display(),
        f.engine_label(),
        a.context,
        a.runs
    );
    println!(
        "{:<16} {:>8} {:>8} {:<12} {:>10} {:>10} {:>12} {:>9}",
        "case", "samples", "horizon", "profile", "totoc ms", "min ms", "toto-ts ms", "speedup"
    );
    let mut out_cases = serde_json::Map::new();
    for (name, samples, horizon, profile, med, min) in &rows {
        let r = reference.as_ref().and_then(|r| r["cases"][*name]["median_ms"].as_f64());
        let (rs, sp) = match r {
            Some(r) => (format!("{r:.1}"), format!("{:.1}×", r / med)),
            None => ("-".into(), "-".into()),
        };
        println!(
            "{name:<16} {samples:>8} {horizon:>8} {profile:<12} {med:>10.1} {min:>10.1} {rs:>12} {sp:>9}"
        );
        out_cases.insert(
            name.to_string(),
            json!({"samples": samples, "horizon": horizon, "profile": profile, "median_ms": med, "min_ms": min,
                   "reference_median_ms": r, "speedup": r.map(|r| r / med)}),
        );
    }
    println!(
        "decode step (mean H=336, batch 1): median {step:.1} ms; floor {floor_ms:.1} ms = {:.0} MB of weights at the {bw:.1} GB/s \
         this machine reads → {:.2}× the floor; prefill {pre:.1} ms",
        weight_bytes as f64 / 1e6,
        step / floor_ms
    );
    let ref_rss = reference.as_ref().and_then(|r| r["peak_rss_mb"].as_f64());
    println!(
        "peak RSS: totoc {rss_mb:.0} MB = {:.2}× the weight bytes (steady state after the runs {rss_now_mb:.0} MB = \
         {:.2}×){}",
        rss_mb * 1e6 / weight_bytes as f64,
        rss_now_mb * 1e6 / weight_bytes as f64,
        ref_rss.map(|r| format!("; toto-ts {r:.0} MB")).unwrap_or_default()
    );
    if let Some(path) = &a.json {
        let doc = json!({"engine": engine, "runs": a.runs, "context": a.context, "cases": out_cases,
            "decode_step_ms": step, "prefill_ms": pre, "floor_ms": floor_ms, "read_bandwidth_gbs": bw,
            "weight_bytes": weight_bytes, "peak_rss_mb": rss_mb, "rss_after_runs_mb": rss_now_mb, "reference": reference});
        exporter::fsutil::write_atomic(path, serde_json::to_string_pretty(&doc)?.as_bytes())?;
    }
    Ok(ExitCode::SUCCESS)
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

/// A deterministic daily-seasonal series with trend and noise, like the reference harness's.
/// The benchmark series: a trend, a daily cycle and seeded noise (`n` points, no missing ones).
pub(crate) fn bench_series(n: usize) -> Vec<Option<f32>> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..n)
        .map(|t| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let noise = (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            let x = 100.0
                + 0.05 * t as f64
                + 10.0 * (t as f64 * std::f64::consts::TAU / 24.0).sin()
                + 2.0 * noise;
            Some(x as f32)
        })
        .collect()
}

fn param_count(model: &exporter::config::ModelConfig) -> usize {
    exporter::checkpoint::expected_tensors(model).iter().map(|(_, s)| s.iter().product::<usize>()).sum()
}

/// Peak resident set size of this process (VmHWM), MB.
fn peak_rss_mb() -> f64 {
    proc_status_mb("VmHWM:")
}

/// A size field of /proc/self/status, MB.
fn proc_status_mb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb * 1024.0 / 1e6)
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

fn run_reference(a: &BenchArgs, checkpoint: &std::path::Path) -> anyhow::Result<Value> {
    let python = a.reference_python.clone().unwrap_or_else(|| {
        PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join(".cache/totoc/reference-venv/bin/python")
    });
    if !python.exists() {
        bail!(
            "toto-ts venv not found at {}: run tests/reference/setup_venv.sh, or pass --reference-python",
            python.display()
        );
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/bench_reference.py");
    let threads = a.threads.unwrap_or_else(engines::backend::physical_cores);
    eprintln!("timing toto-ts eager ({} runs per case; this takes a while) ...", a.runs);
    let out = Command::new(&python)
        .arg(&script)
        .args(["--checkpoint".as_ref(), checkpoint.as_os_str()])
        .args(["--runs", &a.runs.to_string(), "--threads", &threads.to_string()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!("{} failed ({})", script.display(), out.status);
    }
    serde_json::from_slice(&out.stdout).context("parsing bench_reference.py's JSON")
}
