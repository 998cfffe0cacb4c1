//! What the benchmarks share: the synthetic series they forecast, this process's memory figures, and the child
//! process that measures one workload's peak RSS on its own.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::Value;

use crate::cli::BenchArgs;

/// `count` deterministic daily-seasonal series with trend and noise, like the reference harness's.
pub(crate) fn bench_series(n: usize, count: usize) -> Vec<Vec<Option<f32>>> {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    (0..count)
        .map(|_| {
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
        })
        .collect()
}

/// A size field of /proc/self/status, MB.
pub(crate) fn proc_status_mb(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb * 1024.0 / 1e6)
}

/// Passes the engine options a benchmark was given on to a child `totoc` (an RSS probe or a server).
pub(crate) fn engine_options(
    cmd: &mut Command,
    threads: Option<usize>,
    budget: Option<&str>,
    ort_lib: Option<&Path>,
) {
    if let Some(t) = threads {
        cmd.args(["--threads", &t.to_string()]);
    }
    if let Some(m) = budget {
        cmd.args(["--memory-budget", m]);
    }
    if let Some(l) = ort_lib {
        cmd.arg("--ort-lib").arg(l);
    }
}

/// Peak RSS (MB) of the workload `name` run alone in a fresh `totoc bench --rss-probe` child process on the engine
/// at `dir` (so each workload's peak is its own).
pub(crate) fn child_rss(a: &BenchArgs, dir: &Path, name: &str) -> anyhow::Result<f64> {
    let exe = std::env::current_exe().context("locating the totoc executable")?;
    let mut cmd = Command::new(exe);
    cmd.arg("bench").arg("--engine").arg(dir).args([
        "--rss-probe",
        name,
        "--context",
        &a.context.to_string(),
    ]);
    cmd.args(["--throughput-series", &a.throughput_series.to_string()]);
    engine_options(&mut cmd, a.threads, a.memory_budget.as_deref(), a.ort.ort_lib.as_deref());
    let out = cmd.stderr(std::process::Stdio::null()).output()?;
    if !out.status.success() {
        bail!("RSS probe of {name} failed ({})", out.status);
    }
    let v: Value = serde_json::from_slice(&out.stdout)?;
    v["peak_rss_mb"].as_f64().context("no peak_rss_mb")
}

/// `LABEL=DIR` or `DIR` (labelled by its directory name).
pub(crate) fn parse_engines(args: &[String]) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut out: Vec<(String, PathBuf)> = Vec::new();
    for a in args {
        let (label, dir) = match a.split_once('=') {
            Some((l, d)) if !l.is_empty() && !d.is_empty() => (l.to_string(), PathBuf::from(d)),
            Some(_) => bail!("--engine {a:?}: give LABEL=DIR or DIR"),
            None => {
                let dir = PathBuf::from(a);
                let label = dir.file_name().map_or_else(|| a.clone(), |n| n.to_string_lossy().into_owned());
                (label, dir)
            }
        };
        if out.iter().any(|(l, _)| *l == label) {
            bail!("--engine label {label:?} is given twice; label each engine (LABEL=DIR)");
        }
        out.push((label, dir));
    }
    Ok(out)
}

/// The median of `v`, in ms.
pub fn median_ms(v: &[Duration]) -> f64 {
    let mut ms: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    ms.sort_by(f64::total_cmp);
    let n = ms.len();
    if n % 2 == 1 {
        ms[n / 2]
    } else {
        (ms[n / 2 - 1] + ms[n / 2]) / 2.0
    }
}
