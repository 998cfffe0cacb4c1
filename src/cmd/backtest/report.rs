//! The report on stdout: every model's overall metrics side by side, fev's relative skill against the
//! seasonal-naive baseline, and, with a reference, "does this engine change my backtest?" in numbers and words,
//! with the time per window of both; then each sampled engine's calibration (coverage of the paths' central
//! intervals against their nominal levels, and the PIT histogram).

use std::fmt::Write;

use backtest::calibration::{Calibration, PIT_BINS};
use backtest::metrics::{relative_skill, Metric, MetricRow, Scope};
use backtest::run::WindowForecast;
use backtest::score::SEASONAL_NAIVE;

use super::reference::{Comparison, Reference, MAE_RTOL, NEAR_TIE_MAX_SHARE};
use super::{Backtest, EngineRun};
use crate::cli::BacktestArgs;
use crate::speed_bound::SpeedBound;

/// The metrics fev's relative skill is reported for.
const SKILL_METRICS: [&str; 2] = ["mase", "wql"];

/// fev's relative skill score of every engine and the naive baseline against the seasonal naive, as overall
/// rows named `skill_{metric}` (absent where the metric is, e.g. WQL without quantiles).
pub fn skills(
    rows: &[MetricRow],
    runs: &[EngineRun],
    baselines: &[(String, Vec<WindowForecast>); 2],
) -> Vec<MetricRow> {
    let of = |model: &str| -> Vec<MetricRow> { rows.iter().filter(|r| r.model == model).cloned().collect() };
    let base = of(SEASONAL_NAIVE);
    let mut out = Vec::new();
    let models = runs.iter().map(|r| r.label.clone()).chain(std::iter::once(baselines[0].0.clone()));
    for model in models {
        let mine = of(&model);
        for metric in SKILL_METRICS {
            if let Some(v) = relative_skill(&mine, &base, metric) {
                out.push(MetricRow {
                    model: model.clone(),
                    scope: Scope::Overall,
                    unique_id: None,
                    cutoff: None,
                    metric: format!("skill_{metric}"),
                    value: v,
                });
            }
        }
    }
    out
}

/// The report's header: per engine its model, the sha256 of its manifest and its sampler settings (the flags
/// that reach it; a setting not given is its family's default), and a warning where a sampled engine truncates
/// its sampling distribution (`top_p` < 1 narrows every path, so the cones and the calibration with them).
pub fn engines(a: &BacktestArgs, runs: &[EngineRun]) -> String {
    let mut s = String::new();
    for r in runs {
        let shape = r.engine.info().request_limits().shape;
        let model = r.engine.info().model.as_str();
        let mut sampler = match r.spec.samples {
            0 => "deterministic (--samples 0)".to_string(),
            n => format!("{n} paths, seed {}", r.spec.seed),
        };
        if shape.sampling_controls {
            let given = |v: Option<String>| v.unwrap_or_else(|| "default".into());
            if r.spec.samples == 0 {
                sampler.push_str(", greedy (top_k 1)");
            } else {
                let _ = write!(
                    sampler,
                    ", temperature {}, top_k {}, top_p {}",
                    given(a.model.temperature.map(|v| v.to_string())),
                    given(a.model.top_k.map(|v| v.to_string())),
                    given(a.model.top_p.map(|v| v.to_string()))
                );
            }
        }
        if !shape.params.is_empty() {
            let params: Vec<String> = a.model.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = write!(
                sampler,
                ", params {}",
                if params.is_empty() { "default".to_string() } else { params.join(" ") }
            );
        }
        let _ = writeln!(s, "engine {}: {model}, manifest sha256 {}, {sampler}", r.label, r.manifest_sha256);
        let top_k_on = a.model.top_k.is_some_and(|k| k > 0);
        if shape.sampling_controls && r.spec.samples > 0 && !top_k_on && a.model.top_p.is_none_or(|p| p < 1.0)
        {
            let _ = writeln!(
                s,
                "  warning: {} samples with top_p {} < 1: every path leaves out the unlikeliest tokens, so the \
                 paths are narrower than the model's distribution (cones, coverage and CRPS with them); --top-p 1 \
                 samples the whole distribution",
                r.label,
                a.model.top_p.map_or_else(|| "(the family's default)".to_string(), |p| p.to_string())
            );
        }
    }
    s
}

/// The report's text.
pub fn text(bt: &Backtest, rows: &[MetricRow], reference: Option<&Reference>) -> String {
    let mut s = String::new();
    // The quality metrics and skills; the reference comparison's rows are written out in words below.
    let overall: Vec<&MetricRow> = rows
        .iter()
        .filter(|r| r.scope == Scope::Overall)
        .filter(|r| Metric::from_name(&r.metric).is_some() || r.metric.starts_with("skill_"))
        .collect();
    let mut models: Vec<&str> = Vec::new();
    let mut metrics: Vec<&str> = Vec::new();
    for r in &overall {
        if !models.contains(&r.model.as_str()) {
            models.push(&r.model);
        }
        if !metrics.contains(&r.metric.as_str()) {
            metrics.push(&r.metric);
        }
    }
    let _ = writeln!(
        s,
        "backtest: {} series, {} windows ({} per series at most), horizon {}, season {}",
        bt.series.len(),
        bt.windows(),
        bt.plans.iter().map(Vec::len).max().unwrap_or(0),
        bt.plans.iter().flatten().next().map_or(0, |w| w.horizon),
        bt.season
    );
    let width = models.iter().map(|m| m.len()).max().unwrap_or(5).max(5);
    let _ = write!(s, "{:width$}", "model");
    for m in &metrics {
        let _ = write!(s, " {:>14}", m);
    }
    s.push('\n');
    for model in &models {
        let _ = write!(s, "{model:width$}");
        for m in &metrics {
            let v = overall.iter().find(|r| r.model == *model && r.metric == *m).map(|r| r.value);
            let _ = write!(s, " {:>14}", v.map_or_else(|| "-".to_string(), |v| format!("{v:.6}")));
        }
        s.push('\n');
    }
    if let Some(r) = reference {
        let _ = writeln!(
            s,
            "reference ({} eager, {} mode, one window at a time; {}): {} windows, {:.4} s per window",
            r.family,
            r.mode,
            r.versions,
            r.forecasts.len(),
            r.s_per_window()
        );
        s.push_str(&near_ties(r));
        for c in &r.comparisons {
            let _ = writeln!(
                s,
                "{}: {:.4} s per window, {:.1}x the reference's speed",
                c.label,
                c.engine_s_per_window,
                r.s_per_window() / c.engine_s_per_window.max(1e-12)
            );
            if c.deterministic {
                let _ = write!(
                    s,
                    "  max |Δ| of the point forecasts {:.3e} ({:.3} of the fp32 verify tolerance)",
                    c.max_abs_point, c.tolerance_ratio
                );
                if let Some(q) = c.max_abs_quantiles {
                    let _ = write!(s, "; of the quantiles {q:.3e}");
                }
                s.push('\n');
            } else {
                let _ = writeln!(
                    s,
                    "  sampled forecasts: compared as distributions (each side draws its own paths; the metric \
                     differences below are two estimates of one distribution's metric, not a pathwise Δ)"
                );
            }
            for (m, e, rv) in &c.metrics {
                let rel = if *rv != 0.0 { (e - rv) / rv.abs() } else { f64::NAN };
                let _ = writeln!(s, "  {m}: {e:.6} vs {rv:.6} (Δ {:+.3e}, {:+.3e} relative)", e - rv, rel);
            }
            match (c.mae(), c.mae_equal().filter(|_| c.deterministic)) {
                _ if c.verdict && c.deterministic && c.near_ties_too_many => {
                    let _ = writeln!(
                        s,
                        "  verdict: fails: {} of {} windows are flagged near-ties, more than {}: too many windows \
                         could flip a token on rounding alone for the MAE to say whether {} changes the backtest",
                        c.near_ties_flagged,
                        c.near_ties_flagged + c.windows_compared,
                        percent(NEAR_TIE_MAX_SHARE),
                        c.label
                    );
                }
                (Some(_), _) if !c.verdict => {
                    let _ = writeln!(
                        s,
                        "  verdict: none against a training-mode reference (it runs as the upstream loader leaves \
                         it, not as the engine computes; the differences above are what the engine changes against \
                         backtests run that way)"
                    );
                }
                (Some(_), None) => {
                    let _ = writeln!(
                        s,
                        "  verdict: none on sampled forecasts; --samples 0 compares the deterministic mean path"
                    );
                }
                (Some((e, rv)), Some(true)) => {
                    let _ = writeln!(
                        s,
                        "  verdict: {}'s backtest MAE equals the reference's within {MAE_RTOL:e} relative{} ({e:.6} \
                         vs {rv:.6}): this engine does not change the backtest",
                        c.label,
                        over(c)
                    );
                }
                (Some((e, rv)), Some(false)) => {
                    let _ = writeln!(
                        s,
                        "  verdict: {}'s backtest MAE differs from the reference's by more than {MAE_RTOL:e} \
                         relative{} ({e:.6} vs {rv:.6}, {:+.3e}): this engine changes the backtest",
                        c.label,
                        over(c),
                        (e - rv) / rv.abs()
                    );
                }
                _ => {}
            }
        }
    }
    s
}

/// The reference's near-ties (a harness that returns margins: a tokenizer's model in eval mode, greedy): the rule,
/// how many windows it flags, and each flagged window with its smallest margins; or the smallest margin when none
/// is flagged.
fn near_ties(r: &Reference) -> String {
    let mut s = String::new();
    let Some(n) = &r.near_ties else { return s };
    let _ = writeln!(
        s,
        "near-ties (the reference's greedy top-2 logit gap at any step, or its encoded context's |z|, below {}x the \
         measured kernel drift: logits {:e}, z {:e}): {} of {} windows ({}; at most {} for a verdict)",
        n.factor,
        n.drift.logits,
        n.drift.z,
        n.flagged.len(),
        n.margins.len(),
        percent(n.share()),
        percent(NEAR_TIE_MAX_SHARE)
    );
    for &k in &n.flagged {
        let ((id, cutoff), m) = (&n.at[k], n.margins[k]);
        let _ = writeln!(
            s,
            "  flagged: {id} at cutoff {cutoff}: decisions {:.3}x, z {:.3}x the drift (left out of the comparison)",
            m.decision, m.z
        );
    }
    if n.flagged.is_empty() {
        if let Some(m) = n.margins.iter().map(|m| m.min()).reduce(f64::min) {
            let _ = writeln!(s, "  none flagged: the smallest margin is {m:.3}x the drift");
        }
    }
    s
}

/// `share` (0..1) as a percentage with two decimals.
fn percent(share: f64) -> String {
    format!("{:.2}%", share * 100.0)
}

/// The windows a comparison covers, when near-ties left some out.
fn over(c: &Comparison) -> String {
    match c.near_ties_flagged {
        0 => String::new(),
        k => format!(" over the {} windows without a flagged near-tie ({k} left out)", c.windows_compared),
    }
}

/// The speed bound of each engine compared with the reference (its family's, [`super::speed`]): per window, the
/// engine's time against it, and the reference's (the most any engine could beat the reference by here).
pub fn speed_bounds(bounds: &[(String, SpeedBound)], reference: &Reference, windows: usize) -> String {
    let mut s = String::new();
    for (label, b) in bounds {
        let Some(c) = reference.comparisons.iter().find(|c| c.label == *label) else { continue };
        let per_window = b.seconds / windows.max(1) as f64;
        let _ = writeln!(
            s,
            "{label}: bound {per_window:.4} s per window ({:.0} full-pass tokens at the engine's prefill {:.0} tokens/s + \
             {:.2} GB of cached-step reads at {:.1} GB/s, over {windows} windows): the engine at {:.2}x the bound; the \
             reference at {:.1}x the bound (the most an engine could be faster than it here)",
            b.pass_tokens,
            b.prefill_tokens_per_s,
            b.step_bytes / 1e9,
            b.read_bytes_per_s / 1e9,
            c.engine_s_per_window / per_window.max(1e-12),
            reference.s_per_window() / per_window.max(1e-12)
        );
    }
    s
}

/// The calibration section: per sampled engine, the coverage of its paths' central intervals against their nominal
/// levels and its PIT histogram (the figures of its `path_coverage_L` and `pit_A-B` metric rows, to 4 decimals).
pub fn calibration(calibrations: &[(String, Calibration)]) -> String {
    let mut s = String::new();
    if calibrations.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "calibration, from the sample paths (PIT: the share of paths below the actual, ties counted half; \
         calibrated: coverage = nominal, every PIT bin {:.4}):",
        1.0 / PIT_BINS as f64
    );
    for (label, c) in calibrations {
        let _ = writeln!(s, "{label}: {} paths, {} points", c.paths, c.points);
        let _ = write!(s, "  coverage");
        for (level, v) in &c.coverage {
            let _ = write!(s, "  {level}%: {v:.4} (nominal {:.2})", f64::from(*level) / 100.0);
        }
        s.push('\n');
        let _ = write!(s, "  PIT histogram");
        for k in 0..PIT_BINS {
            let _ = write!(s, " {:.4}", c.pit_fraction(k));
        }
        s.push('\n');
        let (low, high) = (c.pit_fraction(0), c.pit_fraction(PIT_BINS - 1));
        let edge = 2.0 / PIT_BINS as f64;
        if low + high > 2.0 * edge {
            let _ = writeln!(
                s,
                "  the outer PIT bins hold {:.4} of the points ({edge:.4} if calibrated; lowest {low:.4}, highest \
                 {high:.4}): the actuals fall outside the paths too often: the cones are too narrow, or off-centre \
                 where one side dominates",
                low + high
            );
        }
    }
    s
}
