//! The backtest metrics against the packages that define them: seeded random cases (several series and cutoffs,
//! NaNs in histories and actuals, ties with quantiles, a 0/0 sMAPE step, a constant history, a history of exactly
//! one season, a window with no actual, shuffled quantile levels, seasons 1, 5 and 7) are scored here and by
//! `tests/metrics/oracle.py` with fev 0.10.0 and utilsforecast 0.2.17, and every value with an oracle (window,
//! series, cutoff and overall rows of mae, rmse, smape, mase, wql, scaled_crps, coverage_L; fev's skill scores)
//! must agree within 1e-9 relative, and be defined on both sides or on neither.
//!
//! The venv comes from `tests/metrics/setup_venv.sh` (`TOTOC_METRICS_PYTHON` overrides it); without it the test
//! skips, or fails under `TOTOC_STRICT_TESTS=1`.

#[path = "../../tests/support/venv.rs"]
mod venv;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use backtest::metrics::{
    evaluate, point_as_quantiles, relative_skill, relative_skill_by_cutoff, seasonal_naive, MetricRow,
    Quantiles, SeriesWindows, WindowInput,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};

/// Relative tolerance of every comparison.
const TOLERANCE: f64 = 1e-9;

/// The metrics the oracle computes (the rest — crps_samples, direction_accuracy — are checked by hand in the
/// crate's unit tests).
fn has_oracle(metric: &str) -> bool {
    ["mae", "rmse", "smape", "mase", "wql", "scaled_crps"].contains(&metric)
        || metric.starts_with("coverage_")
}

const SKILL_METRICS: [&str; 5] = ["mae", "rmse", "smape", "mase", "wql"];

/// (case, model, scope, unique_id, cutoff, metric)
type Key = (usize, String, String, Option<String>, Option<String>, String);

struct Window {
    cutoff: String,
    history: Vec<f64>,
    actual: Vec<f64>,
    point: Vec<f64>,
    /// `[level * H + step]`
    quantiles: Vec<f64>,
    baseline: Vec<f64>,
}

struct Series {
    id: String,
    windows: Vec<Window>,
}

struct Case {
    season: usize,
    /// Whether the skill scores are checked on this case (fev.leaderboard takes ~0.2 s a call: one case only).
    skill: bool,
    levels: Vec<f64>,
    series: Vec<Series>,
}

/// What makes one case: its season, levels, horizon, step, windows and the shape of each series.
struct Plan {
    season: usize,
    levels: Vec<f64>,
    horizon: usize,
    step: usize,
    windows: usize,
    /// Per series: (history length at the first cutoff, level, seasonal amplitude, random-walk noise).
    series: Vec<(usize, f64, f64, f64)>,
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u: f64 = rng.random::<f64>().max(1e-300);
    let v: f64 = rng.random();
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

fn generate(plan: &Plan, rng: &mut ChaCha8Rng) -> Case {
    let h = plan.horizon;
    let mut series = Vec::new();
    for (i, &(first, level, amp, noise)) in plan.series.iter().enumerate() {
        // Series 0 gets one more window than the others: a cutoff only it has.
        let windows = plan.windows + usize::from(i == 0);
        let len = first + plan.step * (windows - 1) + h;
        let mut y = Vec::with_capacity(len);
        let mut walk = 0.0;
        for t in 0..len {
            walk += noise * normal(rng);
            let seasonal = amp * (2.0 * std::f64::consts::PI * t as f64 / plan.season as f64).sin();
            y.push(level + seasonal + walk);
        }
        // Missing values anywhere but the first point (every history keeps an observation).
        for v in y.iter_mut().skip(1) {
            if rng.random::<f64>() < 0.1 {
                *v = f64::NAN;
            }
        }
        let mut out = Vec::new();
        for k in 0..windows {
            let cut = first + plan.step * k; // the history's length
            let history = y[..cut].to_vec();
            let actual = y[cut..cut + h].to_vec();
            let last = history.iter().rev().find(|v| !v.is_nan()).copied().unwrap();
            let spread = noise.max(0.5) * 2.0;
            let point: Vec<f64> =
                (0..h).map(|t| last + spread * (t as f64 + 1.0).sqrt() * 0.5 * normal(rng)).collect();
            let mut quantiles = Vec::with_capacity(plan.levels.len() * h);
            for &q in &plan.levels {
                let z = (q / (1.0 - q)).ln();
                quantiles.extend((0..h).map(|t| point[t] + spread * (t as f64 + 1.0).sqrt() * 0.6 * z));
            }
            let baseline = seasonal_naive(&history, h, plan.season);
            out.push(Window {
                cutoff: format!("c{}", windows - 1 - k),
                history,
                actual,
                point,
                quantiles,
                baseline,
            });
        }
        series.push(Series { id: format!("s{i}"), windows: out });
    }
    Case { season: plan.season, skill: false, levels: plan.levels.clone(), series }
}

/// Puts the edge cases in: actuals on an interval's ends, an exact forecast, a 0/0 sMAPE step.
fn add_ties(case: &mut Case, lower: f64, upper: f64) {
    let lo = case.levels.iter().position(|&q| q == lower).unwrap();
    let hi = case.levels.iter().position(|&q| q == upper).unwrap();
    for s in &mut case.series {
        for w in &mut s.windows {
            let h = w.actual.len();
            if let Some(t) = w.actual.iter().position(|v| !v.is_nan()) {
                w.quantiles[lo * h + t] = w.actual[t]; // y on the lower end: covered, and y ≤ x in fev's loss
            }
            if let Some(t) = w.actual.iter().rposition(|v| !v.is_nan()) {
                w.quantiles[hi * h + t] = w.actual[t];
                w.point[t] = w.actual[t]; // an exact forecast
            }
        }
    }
    let w = &mut case.series[1].windows[0];
    w.actual[1] = 0.0;
    w.point[1] = 0.0; // sMAPE 0/0: left out
}

fn cases() -> Vec<Case> {
    let deciles: Vec<f64> = (1..10).map(|i| i as f64 / 10.0).collect();
    let mut wide = vec![0.025];
    wide.extend(&deciles);
    wide.push(0.975);
    let shuffled = vec![0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6];
    let mut rng = ChaCha8Rng::seed_from_u64(24);
    let mut a = generate(
        &Plan {
            season: 1,
            levels: deciles,
            horizon: 6,
            step: 6,
            windows: 3,
            series: vec![(40, 100.0, 0.0, 1.5), (40, 20.0, 0.0, 0.8), (40, 5.0, 0.0, 0.3)],
        },
        &mut rng,
    );
    add_ties(&mut a, 0.1, 0.9);
    let mut b = generate(
        &Plan {
            season: 5,
            levels: wide,
            horizon: 5,
            step: 3,
            windows: 4,
            series: vec![
                (30, 50.0, 8.0, 1.0),
                (23, 10.0, 3.0, 0.5),
                (41, 200.0, 20.0, 4.0),
                (17, 1.0, 0.5, 0.1),
            ],
        },
        &mut rng,
    );
    add_ties(&mut b, 0.025, 0.975);
    b.skill = true;
    let mut c = generate(
        &Plan {
            season: 7,
            levels: shuffled,
            horizon: 7,
            step: 7,
            windows: 2,
            // A series around 0 (sign changes), a series whose first history is exactly one season (no seasonal
            // pair: MASE undefined), a constant series (MASE scale 0). Series 0 has the extra cutoff: a cutoff
            // where no series defines MASE would make fev's mean over the cutoffs NaN, where totoc leaves it out.
            series: vec![(28, 0.0, 2.0, 1.0), (7, 30.0, 5.0, 1.0), (30, 50.0, 0.0, 0.0)],
        },
        &mut rng,
    );
    // No actual at all in one window; only zeros in another (WQL undefined, scaled CRPS over its ε).
    c.series[1].windows[1].actual.iter_mut().for_each(|v| *v = f64::NAN);
    c.series[0].windows[1].actual.iter_mut().for_each(|v| *v = 0.0);
    vec![a, b, c]
}

fn window_json(w: &Window, point: &[f64], quantiles: &[f64], levels: usize) -> Value {
    let h = w.actual.len();
    let q: Vec<Vec<f64>> = (0..levels).map(|i| quantiles[i * h..(i + 1) * h].to_vec()).collect();
    json!({"cutoff": w.cutoff, "history": w.history, "actual": w.actual, "point": point, "quantiles": q})
}

/// fev's seasonal_naive reports its point forecast as every quantile.
fn baseline_quantiles(w: &Window, levels: usize) -> Vec<f64> {
    point_as_quantiles(&w.baseline, levels)
}

fn cases_json(cases: &[Case]) -> Value {
    let cases: Vec<Value> = cases
        .iter()
        .map(|c| {
            let n = c.levels.len();
            let model = |baseline: bool| -> Vec<Value> {
                c.series
                    .iter()
                    .map(|s| {
                        let windows: Vec<Value> = s
                            .windows
                            .iter()
                            .map(|w| match baseline {
                                false => window_json(w, &w.point, &w.quantiles, n),
                                true => window_json(w, &w.baseline, &baseline_quantiles(w, n), n),
                            })
                            .collect();
                        json!({"unique_id": s.id, "windows": windows})
                    })
                    .collect()
            };
            json!({"season": c.season, "quantile_levels": c.levels, "skill": c.skill,
                   "models": {"model": model(false), "seasonal_naive": model(true)}})
        })
        .collect();
    json!({ "cases": cases })
}

/// Scores the cases here: every row of `evaluate` for both models, and the skill scores.
fn rust_values(cases: &[Case]) -> BTreeMap<Key, f64> {
    let mut out = BTreeMap::new();
    for (i, c) in cases.iter().enumerate() {
        let base_q: Vec<Vec<Vec<f64>>> = c
            .series
            .iter()
            .map(|s| s.windows.iter().map(|w| baseline_quantiles(w, c.levels.len())).collect())
            .collect();
        let mut tables: BTreeMap<&str, Vec<MetricRow>> = BTreeMap::new();
        for model in ["model", "seasonal_naive"] {
            let series: Vec<SeriesWindows> = c
                .series
                .iter()
                .enumerate()
                .map(|(si, s)| SeriesWindows {
                    unique_id: &s.id,
                    windows: s
                        .windows
                        .iter()
                        .enumerate()
                        .map(|(wi, w)| {
                            let (point, values) = match model {
                                "model" => (&w.point, &w.quantiles),
                                _ => (&w.baseline, &base_q[si][wi]),
                            };
                            let input = WindowInput {
                                history: &w.history,
                                actual: &w.actual,
                                point,
                                quantiles: Some(Quantiles { levels: &c.levels, values }),
                                samples: None,
                            };
                            (w.cutoff.clone(), input)
                        })
                        .collect(),
                })
                .collect();
            let rows = evaluate(model, &series, c.season).expect("the generated cases are valid");
            for r in &rows {
                let key =
                    (i, r.model.clone(), r.scope.name().to_string(), r.unique_id.clone(), r.cutoff.clone());
                out.insert((key.0, key.1, key.2, key.3, key.4, r.metric.clone()), r.value);
            }
            tables.insert(model, rows);
        }
        let (m, b) = (&tables["model"], &tables["seasonal_naive"]);
        for metric in SKILL_METRICS.into_iter().filter(|_| c.skill) {
            for (scope, v) in [
                ("skill", relative_skill(m, b, metric)),
                ("skill_by_cutoff", relative_skill_by_cutoff(m, b, metric)),
            ] {
                if let Some(v) = v {
                    out.insert((i, "model".into(), scope.into(), None, None, metric.into()), v);
                }
            }
        }
    }
    out
}

fn oracle_values(records: &[Value]) -> BTreeMap<Key, Option<f64>> {
    let text = |v: &Value| v.as_str().map(str::to_string);
    records
        .iter()
        .map(|r| {
            let key = (
                r["case"].as_u64().unwrap() as usize,
                text(&r["model"]).unwrap(),
                text(&r["scope"]).unwrap(),
                text(&r["unique_id"]),
                text(&r["cutoff"]),
                text(&r["metric"]).unwrap(),
            );
            (key, r["value"].as_f64())
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= TOLERANCE * a.abs().max(b.abs())
}

/// Every disagreement: a value off by more than 1e-9 relative, a value one side has and the other not.
fn compare(rust: &BTreeMap<Key, f64>, oracle: &BTreeMap<Key, Option<f64>>) -> Vec<String> {
    let mut bad = Vec::new();
    for (key, want) in oracle {
        match (rust.get(key), want) {
            (Some(got), Some(want)) if !close(*got, *want) => bad.push(format!(
                "{key:?}: totoc {got:e}, oracle {want:e}, rel {:e}",
                (got - want).abs() / want.abs()
            )),
            (None, Some(want)) => bad.push(format!("{key:?}: totoc has none, oracle {want:e}")),
            (Some(got), None) => bad.push(format!("{key:?}: totoc {got:e}, oracle undefined (NaN/Inf)")),
            _ => {}
        }
    }
    for (key, got) in rust {
        let compared = has_oracle(&key.5) || key.2.starts_with("skill");
        if compared && !oracle.contains_key(key) {
            bad.push(format!("{key:?}: totoc {got:e}, the oracle has no such row"));
        }
    }
    bad
}

fn cpu() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let name = info.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1));
    name.map_or_else(|| "unknown CPU".into(), |n| n.trim().to_string())
}

fn run_oracle(py: &str, cases: &[Case]) -> (Value, BTreeMap<Key, Option<f64>>) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("cases.json");
    let output = dir.path().join("oracle.json");
    std::fs::write(&input, serde_json::to_vec(&cases_json(cases)).unwrap()).unwrap();
    // To debug a disagreement, keep the cases: TOTOC_METRICS_CASES=path.json.
    if let Ok(keep) = std::env::var("TOTOC_METRICS_CASES") {
        std::fs::copy(&input, keep).unwrap();
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/metrics/oracle.py");
    let out = Command::new(py).arg(&script).arg(&input).arg(&output).output().expect("run the oracle");
    assert!(out.status.success(), "oracle.py failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&std::fs::read(&output).unwrap()).unwrap();
    let values = oracle_values(v["records"].as_array().unwrap());
    (v["versions"].clone(), values)
}

#[test]
fn metrics_match_fev_and_utilsforecast() {
    let Some(py) = venv::python(&venv::METRICS) else { return };
    let cpu = cpu();
    println!("CPU: {cpu}");
    let mut cases = cases();
    let (versions, oracle) = run_oracle(&py, &cases);
    println!("oracle versions: {versions}");
    assert_eq!(versions["fev"], "0.10.0");
    assert_eq!(versions["utilsforecast"], "0.2.17");
    let rust = rust_values(&cases);
    let bad = compare(&rust, &oracle);
    assert!(
        bad.is_empty(),
        "{} of {} values disagree (CPU: {cpu}):\n{}",
        bad.len(),
        oracle.len(),
        bad.join("\n")
    );
    // Every kind of value was checked: all scopes, all oracle metrics, both skill scores, undefined ones too.
    for scope in ["window", "series", "cutoff", "overall", "skill", "skill_by_cutoff"] {
        assert!(oracle.iter().any(|(k, v)| k.2 == scope && v.is_some()), "no {scope} value was checked");
    }
    for metric in
        ["mae", "rmse", "smape", "mase", "wql", "scaled_crps", "coverage_20", "coverage_80", "coverage_95"]
    {
        assert!(oracle.iter().any(|(k, v)| k.5 == metric && v.is_some()), "no {metric} value was checked");
    }
    let checked = oracle.values().filter(|v| v.is_some()).count();
    let undefined = oracle.len() - checked;
    assert!(undefined > 0, "no undefined value was checked");
    let worst = oracle
        .iter()
        .filter_map(|(k, want)| want.map(|w| (rust[k] - w).abs() / w.abs()))
        .filter(|r| r.is_finite())
        .fold(0.0, f64::max);
    println!(
        "{checked} values equal fev/utilsforecast within {TOLERANCE:e} relative (largest relative difference \
         {worst:e}); {undefined} undefined on both sides"
    );

    // The check can fail: one value off by 1e-8 relative is caught, and so is a 1e-6 change of one actual.
    let mut off = rust.clone();
    let (key, v) = off.iter_mut().find(|(k, _)| k.5 == "wql" && k.2 == "overall").unwrap();
    *v *= 1.0 + 1e-8;
    let key = key.clone();
    assert_eq!(compare(&off, &oracle).len(), 1, "a wrong {key:?} went unnoticed");
    let t = cases[0].series[0].windows[0].actual.iter().position(|v| !v.is_nan()).unwrap();
    cases[0].series[0].windows[0].actual[t] *= 1.0 + 1e-6;
    let moved = compare(&rust_values(&cases), &oracle);
    assert!(moved.len() >= 5, "a changed actual moved only {} values", moved.len());
}

#[test]
fn the_comparison_catches_small_and_missing_differences() {
    let key = |m: &str| (0, "model".to_string(), "window".to_string(), None, None, m.to_string());
    let oracle: BTreeMap<Key, Option<f64>> =
        [(key("mae"), Some(1.0)), (key("mase"), None), (key("wql"), Some(0.0))].into_iter().collect();
    let exact: BTreeMap<Key, f64> = [(key("mae"), 1.0 + 5e-10), (key("wql"), 0.0)].into_iter().collect();
    assert!(compare(&exact, &oracle).is_empty());
    let mut off = exact.clone();
    off.insert(key("mae"), 1.0 + 2e-9);
    assert_eq!(compare(&off, &oracle).len(), 1);
    let mut extra = exact.clone();
    extra.insert(key("mase"), 1.0); // defined here, undefined in the oracle
    extra.insert(key("smape"), 0.5); // no oracle row at all
    extra.insert(key("direction_accuracy"), 0.5); // no oracle for this metric: not compared
    assert_eq!(compare(&extra, &oracle).len(), 2);
    let mut missing = exact;
    missing.remove(&key("wql"));
    assert_eq!(compare(&missing, &oracle).len(), 1);
}
