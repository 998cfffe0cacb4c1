//! `--reference-checkpoint`: the eager reference (the engines' family's Python harness, reached through
//! [`crate::registry::backtest_reference`]) forecasts all or `--reference-windows M` windows of every series
//! from exactly the requests the engines got, one window at a time in a loop, as a user backtesting with it
//! would. Then, per engine of that family: the max |Δ| of the deterministic forecasts (Toto 1.0's mean path;
//! Toto 2.0's median and quantile knots), each metric's difference on the same windows, whether the MAE equals
//! the reference's within 1e-4 relative, and the time per window of both.
//!
//! Sampled forecasts (Toto 1.0 with `--samples N`) are not compared path by path (the reference draws its own
//! random paths): both sides' sampled metrics are two estimates of the same distribution's metric, reported as
//! their difference with no verdict.
//!
//! A model of two checkpoint directories (`--reference-tokenizer`) is referenced for the first engine of
//! such a model, from that engine's own requests (its columns and timestamps up to each cutoff), scored on the
//! backtest's column. `--reference-mode train` runs that reference as upstream's loader leaves it (training
//! mode): each metric's difference is reported, with no verdict.
//!
//! Near-ties ([`NearTies`]): a harness that returns each window's smallest decision and quantizer margins (a model
//! with a tokenizer, in eval mode, greedy: upstream's top-2 logit gap at any step and token level, and its encoded
//! context's smallest |z|, in units of the measured kernel drift) has the windows below `factor` × that drift
//! flagged: they are listed, the comparison and the MAE verdict are over the others, and the verdict fails when
//! more than [`NEAR_TIE_MAX_SHARE`] of the windows are flagged. A token that flips on rounding alone changes the
//! whole path after it, so such a window compares kernels' rounding, not the engine.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use backtest::metrics::{MetricRow, Scope};
use backtest::run::{window_request, RunSpec, WindowForecast};
use backtest::windows::spread;
use serde::Deserialize;

use super::{Backtest, EngineRun};
use crate::cli::{BacktestArgs, ReferenceMode};

/// The reference's model label in the tables.
pub const LABEL: &str = "reference";
/// "Does this engine change my backtest?": an engine's MAE equals the reference's within this relative gap.
pub const MAE_RTOL: f64 = 1e-4;
/// The fp32 verify tolerance of a mean forecast (`totoc verify`): |Δ| ≤ 1e-4·σ + 1e-6·|ref|, σ the window's
/// context standard deviation.
const SIGMA_REL: f64 = 1e-4;
const REF_REL: f64 = 1e-6;
/// At most this share of the reference's windows may be flagged near-ties for the MAE verdict (issue 35).
pub const NEAR_TIE_MAX_SHARE: f64 = 0.02;

/// What the reference harness prints (one JSON object).
#[derive(Deserialize)]
struct Output {
    seconds: f64,
    forecasts: Vec<RefForecast>,
    #[serde(default)]
    versions: serde_json::Value,
    /// The near-tie rule of a harness that returns margins.
    #[serde(default)]
    near_tie: Option<NearTieRule>,
}

#[derive(Deserialize)]
struct NearTieRule {
    factor: f64,
    drift: Drift,
}

/// The measured kernel drift the margins are counted in (the harness's: the family's kernel-drift table rounded
/// up).
#[derive(Deserialize, Clone, Copy, Debug)]
pub struct Drift {
    pub z: f64,
    pub logits: f64,
}

/// One window's smallest margins, in units of the drift: `z` the encoded context's smallest |z| / (unit + |z|)
/// over `drift.z`; `decision` the smallest greedy top-1 − top-2 logit gap (relative) over `drift.logits`.
#[derive(Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct Margins {
    pub z: f64,
    pub decision: f64,
}

impl Margins {
    /// The smaller margin (not a number when either is not: `f64::min` would drop it).
    pub fn min(&self) -> f64 {
        match self.z.is_nan() || self.decision.is_nan() {
            true => f64::NAN,
            false => self.z.min(self.decision),
        }
    }
}

/// The reference windows' margins and which of them are flagged near-ties.
#[derive(Debug)]
pub struct NearTies {
    pub factor: f64,
    pub drift: Drift,
    /// Each reference window's margins, in the order of [`Reference::windows`].
    pub margins: Vec<Margins>,
    /// Positions in [`Reference::windows`] of the flagged windows.
    pub flagged: Vec<usize>,
    /// Each reference window's series id and cutoff text (filled in by [`run`]).
    pub at: Vec<(String, String)>,
}

impl NearTies {
    /// Flags the windows with a margin below `factor` (a margin that is not a number is flagged too).
    pub fn new(factor: f64, drift: Drift, margins: Vec<Margins>) -> Self {
        let flagged = margins
            .iter()
            .enumerate()
            .filter(|(_, m)| m.min().is_nan() || m.min() < factor)
            .map(|(i, _)| i)
            .collect();
        NearTies { factor, drift, margins, flagged, at: Vec::new() }
    }

    pub fn share(&self) -> f64 {
        self.flagged.len() as f64 / self.margins.len().max(1) as f64
    }

    /// More windows flagged than the verdict allows.
    pub fn too_many(&self) -> bool {
        self.share() > NEAR_TIE_MAX_SHARE
    }

    /// Per reference window: whether it is flagged.
    fn mask(&self) -> Vec<bool> {
        let mut out = vec![false; self.margins.len()];
        for &i in &self.flagged {
            out[i] = true;
        }
        out
    }
}

#[derive(Deserialize)]
struct RefForecast {
    point: Vec<f64>,
    #[serde(default)]
    quantiles: std::collections::BTreeMap<String, Vec<f64>>,
    #[serde(default)]
    margins: Option<Margins>,
}

/// One engine against the reference.
pub struct Comparison {
    pub label: String,
    /// Whether the engine's forecasts are deterministic (compared pointwise).
    pub deterministic: bool,
    pub max_abs_point: f64,
    /// max over points of |Δ| / (1e-4·σ + 1e-6·|ref|): ≤ 1 is within the fp32 verify tolerance.
    pub tolerance_ratio: f64,
    /// Over the quantile levels both sides have (deterministic quantiles only).
    pub max_abs_quantiles: Option<f64>,
    /// (metric, engine, reference) of the overall rows on the reference's windows, both scored with the quantile
    /// levels both made.
    pub metrics: Vec<(String, f64, f64)>,
    pub engine_s_per_window: f64,
    /// Whether the MAE comparison gives a verdict (not against a training-mode reference).
    pub verdict: bool,
    /// The reference windows compared (those without a flagged near-tie) and the flagged ones left out.
    pub windows_compared: usize,
    pub near_ties_flagged: usize,
    /// More than [`NEAR_TIE_MAX_SHARE`] of the windows are flagged: the verdict fails.
    pub near_ties_too_many: bool,
}

impl Comparison {
    pub fn mae(&self) -> Option<(f64, f64)> {
        self.metrics.iter().find(|(m, _, _)| m == "mae").map(|(_, e, r)| (*e, *r))
    }

    /// The MAE equals the reference's within [`MAE_RTOL`] relative.
    pub fn mae_equal(&self) -> Option<bool> {
        self.mae().map(|(e, r)| (e - r).abs() <= MAE_RTOL * r.abs())
    }
}

pub struct Reference {
    /// Flat window indices (plan order) the reference ran.
    pub windows: Vec<usize>,
    pub forecasts: Vec<WindowForecast>,
    pub levels: Vec<f64>,
    pub seconds: f64,
    pub rows: Vec<MetricRow>,
    pub comparisons: Vec<Comparison>,
    pub family: String,
    pub versions: serde_json::Value,
    /// `eval`, or `train` (`--reference-mode train`).
    pub mode: &'static str,
    /// Where the harness returned margins (a tokenizer's model in eval mode, greedy).
    pub near_ties: Option<NearTies>,
}

impl Reference {
    /// The comparisons as overall metric rows of each engine: `max_abs_delta_point`, `tolerance_ratio_point`,
    /// `max_abs_delta_quantiles` (deterministic forecasts only), `{metric}_minus_reference` and
    /// `seconds_per_window`, `reference_seconds_per_window`; with near-ties, [`Reference::near_tie_rows`].
    pub fn comparison_rows(&self) -> Vec<MetricRow> {
        let row = |model: &str, metric: String, value: f64| MetricRow {
            model: model.to_string(),
            scope: Scope::Overall,
            unique_id: None,
            cutoff: None,
            metric,
            value,
        };
        let mut out = Vec::new();
        for c in &self.comparisons {
            if c.deterministic {
                out.push(row(&c.label, "max_abs_delta_point".into(), c.max_abs_point));
                out.push(row(&c.label, "tolerance_ratio_point".into(), c.tolerance_ratio));
                if let Some(q) = c.max_abs_quantiles {
                    out.push(row(&c.label, "max_abs_delta_quantiles".into(), q));
                }
            }
            for (m, e, r) in &c.metrics {
                out.push(row(&c.label, format!("{m}_minus_reference"), e - r));
            }
            out.push(row(&c.label, "seconds_per_window".into(), c.engine_s_per_window));
            if self.near_ties.is_some() {
                out.push(row(&c.label, "windows_compared".into(), c.windows_compared as f64));
                out.push(row(&c.label, "near_tie_windows".into(), c.near_ties_flagged as f64));
            }
        }
        out.push(row(LABEL, "seconds_per_window".into(), self.s_per_window()));
        out.extend(self.near_tie_rows());
        out
    }

    /// Each reference window's margins as `window` rows of the reference: `near_tie_margin_z` and
    /// `near_tie_margin_decision`, in units of the measured kernel drift (below the factor: flagged).
    pub fn near_tie_rows(&self) -> Vec<MetricRow> {
        let Some(n) = &self.near_ties else { return Vec::new() };
        let mut out = Vec::new();
        for ((id, cutoff), m) in n.at.iter().zip(&n.margins) {
            for (metric, value) in [("near_tie_margin_z", m.z), ("near_tie_margin_decision", m.decision)] {
                out.push(MetricRow {
                    model: LABEL.to_string(),
                    scope: Scope::Window,
                    unique_id: Some(id.clone()),
                    cutoff: Some(cutoff.clone()),
                    metric: metric.to_string(),
                    value,
                });
            }
        }
        out
    }

    /// The reference's forecast of every window in plan order (`None` where it did not run).
    pub fn by_window(&self, total: usize) -> Vec<Option<&WindowForecast>> {
        let mut out = vec![None; total];
        for (i, f) in self.windows.iter().zip(&self.forecasts) {
            out[*i] = Some(f);
        }
        out
    }

    pub fn s_per_window(&self) -> f64 {
        self.seconds / self.forecasts.len().max(1) as f64
    }
}

pub fn run(
    a: &BacktestArgs,
    checkpoint: &Path,
    bt: &Backtest,
    runs: &[EngineRun],
) -> anyhow::Result<Reference> {
    let base = reference_run(a, runs)?;
    let family = base.engine.info().model;
    let caps = family.capabilities();
    let train = a.reference_mode == ReferenceMode::Train;
    // The reference gets the first engine's requests: same context, samples, quantiles and seed.
    let spec = RunSpec { keep_samples: false, ..base.spec.clone() };
    let levels: Vec<f64> = match caps.quantile_knots {
        Some(knots) => knots.to_vec(),
        None if spec.samples > 0 => spec.quantiles.clone(),
        None => Vec::new(),
    };
    // Windows: per series, M spread evenly (the last included), as flat indices in plan order.
    let mut windows = Vec::new();
    let mut offset = 0;
    for plan in &bt.plans {
        let m = a.reference_windows.unwrap_or(plan.len());
        windows.extend(spread(plan.len(), m).into_iter().map(|j| offset + j));
        offset += plan.len();
    }
    if windows.is_empty() {
        bail!("--reference-windows 0 runs no window through the reference; give at least 1");
    }
    let flat: Vec<(usize, backtest::windows::Window)> =
        bt.plans.iter().enumerate().flat_map(|(s, p)| p.iter().map(move |w| (s, *w))).collect();
    let limits = base.engine.info().request_limits();
    let mut lines = String::new();
    for &i in &windows {
        let (s, w) = flat[i];
        let line = match &base.own {
            Some(own) => {
                // Admitted as the engine admits it, so the family's resolved defaults (e.g. the transformer window it
                // runs, when smaller than upstream's default) reach the reference.
                let mut req = own.request(bt, s, &w, &spec)?;
                base.engine.admit(&mut req, &format!("window {}", i + 1))?;
                own_request_json(&req, a)?
            }
            None => serde_json::to_string(&window_request(&bt.series[s], &w, &spec, &limits)?)?,
        };
        lines.push_str(&line);
        lines.push('\n');
    }
    let dir = tempfile::tempdir().context("creating a temporary directory for the reference")?;
    let requests = dir.path().join("windows.jsonl");
    std::fs::write(&requests, lines)?;
    let python = python(a)?;
    eprintln!(
        "reference: {} eager on {} windows, one at a time (checkpoint {})",
        family.as_str(),
        windows.len(),
        checkpoint.display()
    );
    let scripts = crate::registry::backtest_reference_scripts(family);
    let mut extra: Vec<std::ffi::OsString> = Vec::new();
    if let Some(t) = &a.reference_tokenizer {
        extra.extend(["--tokenizer".into(), t.clone().into_os_string()]);
        extra.extend(["--mode".into(), if train { "train" } else { "eval" }.into()]);
    }
    let text = run_harness(&python, scripts, checkpoint, &requests, a.threads.unwrap_or(2), &extra)?;
    let out: Output = serde_json::from_slice(&text).context("parsing the reference harness's JSON")?;
    if out.forecasts.len() != windows.len() {
        bail!("the reference returned {} forecasts for {} windows", out.forecasts.len(), windows.len());
    }
    // A harness that returns no quantiles (upstream's predict returns the paths' mean only) is compared on its
    // point forecasts.
    let levels = match out.forecasts.iter().all(|f| f.quantiles.is_empty()) {
        true => Vec::new(),
        false => levels,
    };
    let mut near_ties = near_ties(&out, a.near_tie_factor)?;
    if let Some(n) = &mut near_ties {
        n.at = windows
            .iter()
            .map(|&i| (bt.series[flat[i].0].unique_id.clone(), bt.stamp(flat[i].0, flat[i].1.cutoff)))
            .collect();
    }
    let mut forecasts = Vec::with_capacity(windows.len());
    for (&i, f) in windows.iter().zip(out.forecasts) {
        let (s, w) = flat[i];
        let mut quantiles = Vec::new();
        for q in &levels {
            let v = f
                .quantiles
                .iter()
                .find(|(k, _)| k.parse::<f64>().is_ok_and(|k| (k - q).abs() <= 1e-12))
                .map(|(_, v)| v)
                .with_context(|| format!("the reference returned no quantile {q}"))?;
            quantiles.extend(v);
        }
        forecasts.push(WindowForecast { series: s, window: w, point: f.point, quantiles, samples: None });
    }
    let ref_spec = RunSpec { quantiles: levels.clone(), ..spec.clone() };
    let subset: Vec<&WindowForecast> = forecasts.iter().collect();
    let rows = super::evaluate(bt, LABEL, &subset, &ref_spec)?;

    let skip = near_ties.as_ref().map_or_else(|| vec![false; windows.len()], NearTies::mask);
    let mut comparisons = Vec::new();
    for r in runs.iter().filter(|r| r.engine.info().model == family) {
        let mut c = compare(bt, r, &windows, &forecasts, &levels, &skip)?;
        c.verdict = !train;
        c.near_ties_too_many = near_ties.as_ref().is_some_and(NearTies::too_many);
        comparisons.push(c);
    }
    Ok(Reference {
        windows,
        forecasts,
        levels,
        seconds: out.seconds,
        rows,
        comparisons,
        family: family.as_str().to_string(),
        versions: out.versions,
        mode: if train { "train" } else { "eval" },
        near_ties,
    })
}

/// The near-ties of a harness that returned margins: every window's, or none (an error names a harness that
/// returned them for some windows only); `factor` (`--near-tie-factor`) replaces the harness's.
fn near_ties(out: &Output, factor: Option<f64>) -> anyhow::Result<Option<NearTies>> {
    if let Some(f) = factor {
        if !f.is_finite() || f < 0.0 {
            bail!("--near-tie-factor {f} is not a multiple of the drift; give a finite number ≥ 0 (default 100)");
        }
    }
    let margins: Vec<Margins> = out.forecasts.iter().filter_map(|f| f.margins).collect();
    match &out.near_tie {
        Some(rule) if margins.len() == out.forecasts.len() => {
            Ok(Some(NearTies::new(factor.unwrap_or(rule.factor), rule.drift, margins)))
        }
        Some(_) if margins.is_empty() => Ok(None),
        Some(_) => bail!(
            "the reference harness returned near-tie margins for {} of {} windows; it returns them for every \
             greedy window or none",
            margins.len(),
            out.forecasts.len()
        ),
        None => Ok(None),
    }
}

/// The engine whose family the reference runs: with `--reference-tokenizer`, the first engine of a model read
/// from two checkpoint directories; else the first engine.
fn reference_run<'a>(a: &BacktestArgs, runs: &'a [EngineRun]) -> anyhow::Result<&'a EngineRun> {
    let two_dirs = |r: &&EngineRun| r.engine.info().model.capabilities().tokenizer_keys.is_some();
    match &a.reference_tokenizer {
        Some(_) => runs.iter().find(two_dirs).with_context(|| {
            "--reference-tokenizer names a tokenizer, and no engine of this backtest has a model read with one; \
             remove it, or add such an engine"
                .to_string()
        }),
        None => match runs.first().filter(two_dirs) {
            Some(r) => bail!(
                "engine {}'s model has a tokenizer: give its directory as --reference-tokenizer (with the \
                 predictor as --reference-checkpoint)",
                r.label
            ),
            None => runs.first().context("no engine"),
        },
    }
}

/// One window's request of an engine that reads its own columns, as the reference harness reads it: the values as
/// read (f64) as `target`, and `score_column`, the column the backtest scores.
fn own_request_json(req: &engines::request::ForecastRequest, a: &BacktestArgs) -> anyhow::Result<String> {
    let mut v = serde_json::to_value(req)?;
    if let Some(t) = &req.target_f64 {
        v["target"] = serde_json::to_value(t)?;
    }
    v["score_column"] = serde_json::Value::from(super::columns::scored_name(a)?);
    Ok(serde_json::to_string(&v)?)
}

fn compare(
    bt: &Backtest,
    r: &EngineRun,
    windows: &[usize],
    reference: &[WindowForecast],
    levels: &[f64],
    skip: &[bool],
) -> anyhow::Result<Comparison> {
    let deterministic = r.spec.samples == 0 || !r.engine.info().model.capabilities().samples;
    let (mut max_abs, mut ratio, mut max_q) = (0.0f64, 0.0f64, None::<f64>);
    // The windows without a flagged near-tie, both sides.
    let kept = |k: &usize| !skip[*k];
    let mine: Vec<&WindowForecast> =
        (0..windows.len()).filter(kept).map(|k| &r.out.forecasts[windows[k]]).collect();
    let reference: Vec<&WindowForecast> = (0..windows.len()).filter(kept).map(|k| &reference[k]).collect();
    let flagged = windows.len() - mine.len();
    for (e, f) in mine.iter().zip(&reference) {
        // the engine's and the reference's forecasts of one window
        debug_assert_eq!((e.series, e.window), (f.series, f.window));
        let (s, w) = (f.series, f.window);
        let sigma =
            context_sigma(&bt.values[s][w.history_len().saturating_sub(r.spec.context)..w.history_len()]);
        for (x, y) in e.point.iter().zip(&f.point) {
            let d = (x - y).abs();
            max_abs = max_abs.max(d);
            ratio = ratio.max(d / (SIGMA_REL * sigma + REF_REL * y.abs()).max(f64::MIN_POSITIVE));
        }
        if deterministic {
            let h = w.horizon;
            for (j, q) in levels.iter().enumerate() {
                if let Some(k) = r.spec.quantiles.iter().position(|x| (x - q).abs() <= 1e-12) {
                    for step in 0..h {
                        let d = (e.quantiles[k * h + step] - f.quantiles[j * h + step]).abs();
                        max_q = Some(max_q.unwrap_or(0.0).max(d));
                    }
                }
            }
        }
    }
    // Both sides scored on the reference's windows with the quantile levels both have (WQL and coverage depend
    // on the levels), without sample-path metrics (the reference keeps none).
    let common: Vec<(usize, usize)> = r
        .spec
        .quantiles
        .iter()
        .enumerate()
        .filter_map(|(k, q)| levels.iter().position(|x| (x - q).abs() <= 1e-12).map(|j| (k, j)))
        .collect();
    let keep = |f: &WindowForecast, pick: &dyn Fn(&(usize, usize)) -> usize| -> WindowForecast {
        let h = f.window.horizon;
        let quantiles =
            common.iter().flat_map(|c| f.quantiles[pick(c) * h..(pick(c) + 1) * h].to_vec()).collect();
        WindowForecast { quantiles, samples: None, ..f.clone() }
    };
    let mine_common: Vec<WindowForecast> = mine.iter().map(|f| keep(f, &|c| c.0)).collect();
    let ref_common: Vec<WindowForecast> = reference.iter().map(|f| keep(f, &|c| c.1)).collect();
    let spec = RunSpec {
        keep_samples: false,
        quantiles: common.iter().map(|c| r.spec.quantiles[c.0]).collect(),
        ..r.spec.clone()
    };
    // No window left (every one flagged): no metric to compare.
    let metrics = match mine.is_empty() {
        true => Vec::new(),
        false => {
            let rows = super::evaluate(bt, &r.label, &mine_common.iter().collect::<Vec<_>>(), &spec)?;
            let ref_rows = super::evaluate(bt, LABEL, &ref_common.iter().collect::<Vec<_>>(), &spec)?;
            let overall = |rows: &[MetricRow]| -> Vec<(String, f64)> {
                rows.iter()
                    .filter(|x| x.scope == Scope::Overall)
                    .map(|x| (x.metric.clone(), x.value))
                    .collect()
            };
            let theirs = overall(&ref_rows);
            overall(&rows)
                .into_iter()
                .filter_map(|(m, v)| theirs.iter().find(|(n, _)| *n == m).map(|(_, rv)| (m, v, *rv)))
                .collect()
        }
    };
    Ok(Comparison {
        label: r.label.clone(),
        deterministic,
        max_abs_point: max_abs,
        tolerance_ratio: ratio,
        max_abs_quantiles: max_q,
        metrics,
        engine_s_per_window: r.seconds / bt.windows().max(1) as f64,
        verdict: true,
        windows_compared: mine.len(),
        near_ties_flagged: flagged,
        near_ties_too_many: false,
    })
}

/// The standard deviation of the observed values of a context (1 when it has fewer than two, or none vary).
fn context_sigma(values: &[f64]) -> f64 {
    let obs: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if obs.len() < 2 {
        return 1.0;
    }
    let mean = obs.iter().sum::<f64>() / obs.len() as f64;
    let var = obs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / obs.len() as f64;
    if var > 0.0 {
        var.sqrt()
    } else {
        1.0
    }
}

/// The reference venv's Python.
fn python(a: &BacktestArgs) -> anyhow::Result<PathBuf> {
    let python = a.reference_python.clone().unwrap_or_else(|| {
        PathBuf::from(std::env::var("HOME").unwrap_or_default())
            .join(".cache/totoc/reference-venv/bin/python")
    });
    if !python.exists() {
        bail!(
            "the reference venv was not found at {}: create it with tests/reference/setup_venv.sh from the totoc \
             repository, or pass --reference-python",
            python.display()
        );
    }
    Ok(python)
}

/// Runs a family's reference harness: `scripts` (name, text) are written to a temporary directory (the first
/// is the entry point, the others its imports) and run as `python MAIN --checkpoint DIR --requests FILE
/// --threads N EXTRA...`; returns its stdout (one JSON object). Its stderr goes to ours (progress).
pub fn run_harness(
    python: &Path,
    scripts: &[(&str, &str)],
    checkpoint: &Path,
    requests: &Path,
    threads: usize,
    extra: &[std::ffi::OsString],
) -> anyhow::Result<Vec<u8>> {
    let Some((first, _)) = scripts.first() else {
        bail!("this model family has no eager reference harness: run the backtest without --reference-checkpoint")
    };
    let dir = tempfile::tempdir().context("creating a temporary directory for the reference scripts")?;
    for (name, text) in scripts {
        std::fs::write(dir.path().join(name), text)?;
    }
    let main = dir.path().join(first);
    let out = Command::new(python)
        .arg(&main)
        .arg("--checkpoint")
        .arg(checkpoint)
        .arg("--requests")
        .arg(requests)
        .arg("--threads")
        .arg(threads.to_string())
        .args(extra)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", python.display()))?;
    if !out.status.success() {
        bail!("the reference harness failed ({}); its messages are above", out.status);
    }
    Ok(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(json: &str) -> Output {
        serde_json::from_str(json).unwrap()
    }

    const RULE: &str = r#""near_tie": {"factor": 100, "drift": {"z": 2e-6, "logits": 6e-7}}"#;

    #[test]
    fn windows_below_the_factor_are_flagged_and_more_than_two_percent_fail() {
        let drift = Drift { z: 2e-6, logits: 6e-7 };
        let m = |z: f64, decision: f64| Margins { z, decision };
        // 1 of 50 (2%) flagged: allowed; the decision or the z margin alone flags; exactly the factor is kept
        let mut margins = vec![m(500.0, 300.0); 50];
        margins[7] = m(500.0, 99.9);
        margins[9] = m(100.0, 100.0);
        let n = NearTies::new(100.0, drift, margins.clone());
        assert_eq!(n.flagged, vec![7]);
        assert_eq!(n.share(), 0.02);
        assert!(!n.too_many());
        assert_eq!(n.mask().iter().filter(|x| **x).count(), 1);
        margins[11] = m(3.0, 1e9);
        let n = NearTies::new(100.0, drift, margins.clone());
        assert_eq!(n.flagged, vec![7, 11]);
        assert!(n.too_many());
        // a margin that is not a number is flagged, never silently kept
        margins[11] = m(f64::NAN, 1e9);
        assert_eq!(NearTies::new(100.0, drift, margins.clone()).flagged, vec![7, 11]);
        // factor 0 flags nothing (but NaN)
        margins[11] = m(500.0, 300.0);
        assert!(NearTies::new(0.0, drift, margins).flagged.is_empty());
    }

    #[test]
    fn the_harness_rule_and_the_factor_flag_give_the_near_ties() {
        let both = format!(
            r#"{{"seconds": 1.0, {RULE}, "forecasts": [{{"point": [1.0], "margins": {{"z": 50.0, "decision": 1e4}}}},
            {{"point": [2.0], "margins": {{"z": 1e3, "decision": 1e4}}}}]}}"#
        );
        let n = near_ties(&output(&both), None).unwrap().unwrap();
        assert_eq!((n.factor, n.flagged.clone()), (100.0, vec![0]));
        assert_eq!(n.margins[1], Margins { z: 1e3, decision: 1e4 });
        let n = near_ties(&output(&both), Some(10.0)).unwrap().unwrap();
        assert!(n.flagged.is_empty());
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let e = near_ties(&output(&both), Some(bad)).unwrap_err().to_string();
            assert!(e.contains("--near-tie-factor") && e.contains("finite number"), "{e}");
        }
        // no rule (Toto, training mode) or no margins (sampled windows): no near-ties
        let none = r#"{"seconds": 1.0, "forecasts": [{"point": [1.0]}]}"#;
        assert!(near_ties(&output(none), None).unwrap().is_none());
        let sampled = format!(r#"{{"seconds": 1.0, {RULE}, "forecasts": [{{"point": [1.0]}}]}}"#);
        assert!(near_ties(&output(&sampled), None).unwrap().is_none());
        // margins for some windows only: an error, never a comparison of a part
        let some = format!(
            r#"{{"seconds": 1.0, {RULE}, "forecasts": [{{"point": [1.0], "margins": {{"z": 500.0, "decision": 1e4}}}},
            {{"point": [2.0]}}]}}"#
        );
        let e = near_ties(&output(&some), None).unwrap_err().to_string();
        assert!(e.contains("margins for 1 of 2 windows"), "{e}");
    }
}
