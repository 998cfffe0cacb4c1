//! `totoc backtest` end to end on the tiny fixtures: the documented columns of both tables, two engines in one
//! report, Nixtla's cutoffs, no leakage (a value after a cutoff changes no forecast of that cutoff), clear
//! errors for windows that do not fit, a Toto 2.0 backtest with utilsforecast's quantile columns, and the
//! toto-ts reference on the same windows within the verify tolerance (needs the reference venv).
//! long-file: each backtest behaviour end to end beside the table, OHLCV and reference helpers its checks share.
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::common::*;

/// Two daily series (a: 48 points from 2024-01-01, b: 40 points), deterministic, with a weekly pattern.
fn input(dir: &Path, tweak: &dyn Fn(&str, usize, f64) -> f64) -> PathBuf {
    let mut csv = String::from("unique_id,ds,y\n");
    for (id, n, level) in [("a", 48usize, 50.0), ("b", 40, 200.0)] {
        for t in 0..n {
            let day = jiff::civil::date(2024, 1, 1).checked_add(jiff::Span::new().days(t as i64)).unwrap();
            let y = level + 0.3 * t as f64 + 5.0 * (t as f64 * std::f64::consts::TAU / 7.0).sin();
            csv.push_str(&format!("{id},{day},{}\n", tweak(id, t, y)));
        }
    }
    let p = dir.join("in.csv");
    fs::write(&p, csv).unwrap();
    p
}

fn table(path: &Path) -> (Vec<String>, Vec<BTreeMap<String, String>>) {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header: Vec<String> = r.headers().unwrap().iter().map(str::to_string).collect();
    let rows = r
        .records()
        .map(|rec| header.iter().cloned().zip(rec.unwrap().iter().map(str::to_string)).collect())
        .collect();
    (header, rows)
}

/// The reference venv's Python, or `None` (the test skips): also when `TOTOC_SKIP_LIVE_REFERENCE=1` turns the
/// reference checks of `scripts/test.sh` off (the venv is then not set up).
fn reference_python() -> Option<String> {
    if std::env::var("TOTOC_SKIP_LIVE_REFERENCE").as_deref() == Ok("1") {
        eprintln!("SKIPPED: TOTOC_SKIP_LIVE_REFERENCE=1 (the eager reference is not run)");
        return None;
    }
    crate::venv::python(&crate::venv::REFERENCE)
}

fn backtest(args: &[&str]) -> String {
    let mut all = vec!["backtest"];
    all.extend_from_slice(args);
    totoc_ok(&all)
}

#[test]
fn two_engines_one_report_with_the_documented_columns_and_nixtla_cutoffs() {
    let dir = tempfile::tempdir().unwrap();
    let engine = crate::forecast::engine().to_str().unwrap();
    let inp = input(dir.path(), &|_, _, y| y);
    let (out, metrics) = (dir.path().join("cv.csv"), dir.path().join("m.parquet"));
    let stdout = backtest(&[
        "--engine",
        &format!("fp32={engine}"),
        "--engine",
        &format!("again={engine}"),
        "--input",
        inp.to_str().unwrap(),
        "--horizon",
        "3",
        "--windows",
        "4",
        "--step",
        "2",
        "--samples",
        "8",
        "--output",
        out.to_str().unwrap(),
        "--metrics",
        metrics.to_str().unwrap(),
    ]);
    let (header, rows) = table(&out);
    assert_eq!(
        header,
        [
            "unique_id",
            "ds",
            "cutoff",
            "y",
            "fp32",
            "fp32-lo-80",
            "fp32-median",
            "fp32-hi-80",
            "again",
            "again-lo-80",
            "again-median",
            "again-hi-80",
            "naive",
            "seasonal_naive"
        ]
    );
    // 2 series × 4 windows × 3 steps
    assert_eq!(rows.len(), 24);
    // Nixtla: the last cutoff is len - H - 1 = position 44 of a (2024-02-14), the windows 2 apart
    let cutoffs_a: Vec<&str> =
        rows.iter().filter(|r| r["unique_id"] == "a").map(|r| r["cutoff"].as_str()).step_by(3).collect();
    assert_eq!(cutoffs_a, ["2024-02-08", "2024-02-10", "2024-02-12", "2024-02-14"]);
    let last = rows.iter().rfind(|r| r["unique_id"] == "a").unwrap();
    assert_eq!(last["ds"], "2024-02-17");
    // the same engine under two labels gives the same forecasts (same seed)
    assert!(rows.iter().all(|r| r["fp32"] == r["again"] && r["fp32-hi-80"] == r["again-hi-80"]));
    // the naive forecast repeats the cutoff's value
    let first = &rows[0];
    let y_cut = 50.0 + 0.3 * 38.0 + 5.0 * (38.0 * std::f64::consts::TAU / 7.0).sin();
    assert!((first["naive"].parse::<f64>().unwrap() - y_cut).abs() < 1e-3, "{first:?}");

    // the metric table: long rows, every model, the skill rows
    let bytes = bytes::Bytes::from(fs::read(&metrics).unwrap());
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap();
    let batch = reader.into_iter().next().unwrap().unwrap();
    let names: Vec<String> = batch.schema().fields().iter().map(|f| f.name().clone()).collect();
    assert_eq!(names, ["model", "scope", "unique_id", "cutoff", "metric", "value"]);
    let col = |i: usize| {
        batch
            .column(i)
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap()
            .iter()
            .map(|s| s.map(str::to_string))
            .collect::<Vec<_>>()
    };
    let (models, metrics_col) = (col(0), col(4));
    for m in ["fp32", "again", "naive", "seasonal_naive"] {
        assert!(models.iter().any(|x| x.as_deref() == Some(m)), "{m}");
    }
    for m in ["mae", "mase", "wql", "coverage_80", "crps_samples", "skill_mase"] {
        assert!(metrics_col.iter().any(|x| x.as_deref() == Some(m)), "{m}");
    }
    assert!(stdout.contains("seasonal_naive") && stdout.contains("season 7"), "{stdout}");
}

#[test]
fn changing_values_after_a_cutoff_changes_no_forecast_of_that_cutoff() {
    let dir = tempfile::tempdir().unwrap();
    let engine = crate::forecast::engine().to_str().unwrap();
    let run = |name: &str, tweak: &dyn Fn(&str, usize, f64) -> f64| {
        let sub = dir.path().join(name);
        fs::create_dir_all(&sub).unwrap();
        let inp = input(&sub, tweak);
        let out = sub.join("cv.csv");
        backtest(&[
            "--engine",
            engine,
            "--input",
            inp.to_str().unwrap(),
            "--horizon",
            "4",
            "--windows",
            "5",
            "--step",
            "3",
            "--output",
            out.to_str().unwrap(),
        ]);
        table(&out).1
    };
    let base = run("base", &|_, _, y| y);
    // Series a's cutoffs are positions 31, 34, 37, 40, 43; change every value of both series after position 37.
    let changed = run("changed", &|_, t, y| if t > 37 { y * 3.0 + 1000.0 } else { y });
    let cut = "2024-02-07"; // position 37 of a
    let label = Path::new(engine).file_name().unwrap().to_str().unwrap().to_string();
    let mut same = 0;
    let mut differ = 0;
    for (b, c) in base.iter().zip(&changed) {
        assert_eq!((&b["unique_id"], &b["cutoff"], &b["ds"]), (&c["unique_id"], &c["cutoff"], &c["ds"]));
        if b["unique_id"] == "a" && b["cutoff"].as_str() <= cut {
            assert_eq!(b[&label], c[&label], "window {} leaked a later value", b["cutoff"]);
            assert_eq!(b["naive"], c["naive"]);
            same += 1;
        } else if b["unique_id"] == "a" {
            differ += usize::from(b[&label] != c[&label]);
        }
    }
    assert_eq!(same, 12);
    // the later windows saw the change: the comparison above can fail
    assert!(differ > 0);
}

#[test]
fn windows_that_do_not_fit_are_errors_naming_the_series_and_the_first_bad_cutoff() {
    let dir = tempfile::tempdir().unwrap();
    let engine = crate::forecast::engine().to_str().unwrap();
    let inp = input(dir.path(), &|_, _, y| y);
    // b has 40 points: 13 windows of 3 need 13*3 + 1 = 40 + ... one too many
    let e = totoc_err(&[
        "backtest",
        "--engine",
        engine,
        "--input",
        inp.to_str().unwrap(),
        "--horizon",
        "3",
        "--windows",
        "14",
    ]);
    assert!(e.contains("b: 40 points are too few for 14 windows"), "{e}");
    assert!(
        e.contains("window 1 (the first bad one)")
            && e.contains("grid position -3")
            && e.contains("2023-12-29"),
        "{e}"
    );
    assert!(e.contains("at most 13 windows"), "{e}");
    // a huge count is refused before anything is allocated
    let e = totoc_err(&[
        "backtest",
        "--engine",
        engine,
        "--input",
        inp.to_str().unwrap(),
        "--horizon",
        "3",
        "--windows",
        "18446744073709551615",
    ]);
    assert!(e.contains("span more grid positions than fit") || e.contains("too few"), "{e}");
    let e = totoc_err(&[
        "backtest",
        "--engine",
        engine,
        "--input",
        inp.to_str().unwrap(),
        "--horizon",
        "0",
        "--windows",
        "2",
    ]);
    assert!(e.contains("--horizon must be at least 1"), "{e}");
}

#[test]
fn toto_2_backtests_write_quantile_columns() {
    let dir = tempfile::tempdir().unwrap();
    let engine = crate::toto2::engine().to_str().unwrap();
    let inp = input(dir.path(), &|_, _, y| y);
    let out = dir.path().join("cv.csv");
    let stdout = backtest(&[
        "--engine",
        &format!("t2={engine}"),
        "--input",
        inp.to_str().unwrap(),
        "--horizon",
        "4",
        "--windows",
        "2",
        "--quantiles",
        "0.1,0.25,0.5,0.75,0.9",
        "--output",
        out.to_str().unwrap(),
    ]);
    let (header, rows) = table(&out);
    assert_eq!(header[4..10], ["t2", "t2-lo-80", "t2-lo-50", "t2-median", "t2-hi-50", "t2-hi-80"]);
    assert_eq!(rows.len(), 16);
    for r in &rows {
        let v = |k: &str| r[k].parse::<f64>().unwrap();
        assert!(
            v("t2-lo-80") <= v("t2-lo-50")
                && v("t2-lo-50") <= v("t2-median")
                && v("t2-median") <= v("t2-hi-80")
        );
        // Toto 2.0's point forecast is its median
        assert_eq!(r["t2"], r["t2-median"]);
    }
    assert!(
        stdout.contains("wql") && stdout.contains("coverage_80") && stdout.contains("coverage_50"),
        "{stdout}"
    );
}

#[test]
fn the_reference_on_the_same_windows_is_within_the_verify_tolerance() {
    let Some(py) = reference_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let engine = crate::forecast::engine().to_str().unwrap();
    let inp = input(dir.path(), &|_, _, y| y);
    let metrics = dir.path().join("m.csv");
    let ck = fixture_checkpoint("tiny");
    let stdout = backtest(&[
        "--engine",
        &format!("fp32={engine}"),
        "--input",
        inp.to_str().unwrap(),
        "--horizon",
        "5",
        "--windows",
        "4",
        "--reference-checkpoint",
        ck.to_str().unwrap(),
        "--reference-windows",
        "2",
        "--reference-python",
        &py,
        "--threads",
        "1",
        "--metrics",
        metrics.to_str().unwrap(),
    ]);
    let (_, rows) = table(&metrics);
    let value = |model: &str, metric: &str| -> f64 {
        rows.iter()
            .find(|r| r["model"] == model && r["metric"] == metric && r["scope"] == "overall")
            .unwrap_or_else(|| panic!("no overall {metric} of {model}"))["value"]
            .parse()
            .unwrap()
    };
    // every point within the fp32 verify tolerance 1e-4·σ + 1e-6·|ref|
    let ratio = value("fp32", "tolerance_ratio_point");
    assert!(ratio <= 1.0, "max |Δ| is {ratio} of the tolerance\n{stdout}");
    assert!(value("fp32", "max_abs_delta_point") > 0.0 || ratio == 0.0);
    let (mae, diff) = (value("reference", "mae"), value("fp32", "mae_minus_reference"));
    assert!(diff.abs() <= 1e-4 * mae, "{stdout}");
    // the reference ran 2 windows of each series (4 windows), reported in its own rows
    assert_eq!(
        rows.iter()
            .filter(|r| r["model"] == "reference" && r["scope"] == "window" && r["metric"] == "mae")
            .count(),
        4
    );
    assert!(stdout.contains("equals the reference's within 1e-4 relative"), "{stdout}");
    assert!(stdout.contains("s per window"), "{stdout}");
}

#[test]
fn toto_2_against_toto_2_eager_compares_the_median_and_the_knots() {
    let Some(py) = reference_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let engine = crate::toto2::engine();
    let ck = engine.parent().unwrap().join("checkpoint");
    let inp = input(dir.path(), &|_, _, y| y);
    let metrics = dir.path().join("m.csv");
    let stdout = backtest(&[
        "--engine",
        &format!("t2={}", engine.display()),
        "--input",
        inp.to_str().unwrap(),
        "--horizon",
        "4",
        "--windows",
        "2",
        "--reference-checkpoint",
        ck.to_str().unwrap(),
        "--reference-windows",
        "1",
        "--reference-python",
        &py,
        "--threads",
        "1",
        "--metrics",
        metrics.to_str().unwrap(),
    ]);
    let (_, rows) = table(&metrics);
    let value = |metric: &str| -> f64 {
        rows.iter().find(|r| r["model"] == "t2" && r["metric"] == metric).unwrap()["value"].parse().unwrap()
    };
    assert!(value("tolerance_ratio_point") <= 1.0, "{stdout}");
    // the quantile knots both made (0.1, 0.5, 0.9 of the default levels) are compared too, and WQL with them
    assert!(value("max_abs_delta_quantiles") < 1e-2, "{stdout}");
    assert!(value("wql_minus_reference").abs() < 1e-4, "{stdout}");
    assert!(stdout.contains("t2's backtest MAE equals the reference's"), "{stdout}");
}

#[test]
fn windows_of_series_without_timestamps_pool_by_their_index_from_the_end() {
    // a: 100 points y = t, b: 120 points y = 3t, no timestamps; h = 10, 3 windows: a's cutoffs are at positions 69,
    // 79, 89 and b's at 89, 99, 109. Window i of each is pooled with window i of the other (fev, Nixtla), so the
    // positions are counted with both aligned at their last point: 89, 99, 109 for both.
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("unique_id,y\n");
    (0..100).for_each(|t| csv.push_str(&format!("a,{t}\n")));
    (0..120).for_each(|t| csv.push_str(&format!("b,{}\n", 3 * t)));
    let inp = dir.path().join("in.csv");
    fs::write(&inp, csv).unwrap();
    let (out, metrics) = (dir.path().join("cv.csv"), dir.path().join("m.csv"));
    let engine = format!("totoc={}", crate::forecast::engine().display());
    backtest(&[
        "--engine",
        &engine,
        "--input",
        inp.to_str().unwrap(),
        "--horizon",
        "10",
        "--windows",
        "3",
        "--output",
        out.to_str().unwrap(),
        "--metrics",
        metrics.to_str().unwrap(),
    ]);
    let (_, rows) = table(&out);
    for id in ["a", "b"] {
        let mut cutoffs: Vec<&str> =
            rows.iter().filter(|r| r["unique_id"] == id).map(|r| r["cutoff"].as_str()).collect();
        cutoffs.dedup();
        assert_eq!(cutoffs, ["89", "99", "109"], "series {id}");
    }
    let (_, m) = table(&metrics);
    let cutoff_rows = |model: &str| -> Vec<(String, f64)> {
        m.iter()
            .filter(|r| r["model"] == model && r["scope"] == "cutoff" && r["metric"] == "mae")
            .map(|r| (r["cutoff"].clone(), r["value"].parse().unwrap()))
            .collect()
    };
    // The naive forecast of a ramp misses by slope × 1..=10: 5.5 for a, 16.5 for b, 11 pooled over both.
    let naive = cutoff_rows("naive");
    assert_eq!(naive, [("89".to_string(), 11.0), ("99".to_string(), 11.0), ("109".to_string(), 11.0)]);
    assert_eq!(cutoff_rows("totoc").len(), 3, "one cutoff row per window index for the engine too");
}

/// The mid-rank PIT of `y` among `paths` (docs/formats.md, "Backtest metrics"), written again here.
fn pit(paths: &[f64], y: f64) -> f64 {
    let below = paths.iter().filter(|&&x| x < y).count() as f64;
    let equal = paths.iter().filter(|&&x| x == y).count() as f64;
    (below + 0.5 * equal) / paths.len() as f64
}

/// The calibration figures of `label` recomputed from a `--write-samples` forecast table: (`path_coverage_L` for
/// 50, 80, 90, 95, the ten `pit_A-B` fractions, points).
fn calibration_of(
    rows: &[BTreeMap<String, String>],
    label: &str,
    paths: usize,
) -> (Vec<f64>, Vec<f64>, usize) {
    let mut pits = Vec::new();
    for r in rows.iter().filter(|r| !r["y"].is_empty()) {
        let y: f64 = r["y"].parse().unwrap();
        let xs: Vec<f64> = (0..paths).map(|i| r[&format!("{label}-sample-{i}")].parse().unwrap()).collect();
        pits.push(pit(&xs, y));
    }
    let n = pits.len() as f64;
    let coverage = [50.0, 80.0, 90.0, 95.0]
        .iter()
        .map(|l: &f64| {
            let half = l / 100.0 / 2.0;
            pits.iter().filter(|&&u| (0.5 - half..=0.5 + half).contains(&u)).count() as f64 / n
        })
        .collect();
    let bins = (0..10)
        .map(|k| pits.iter().filter(|&&u| ((u * 10.0).floor() as usize).min(9) == k).count() as f64 / n)
        .collect();
    (coverage, bins, pits.len())
}

/// A sampled engine's calibration section (coverage against nominal levels, PIT histogram): the report's figures
/// (its metric rows and its text) equal a recomputation from the sample paths `--write-samples` writes into
/// `--output`; the chart gains the PIT histogram image.
#[test]
fn the_calibration_of_a_sampled_engine_is_recomputed_from_its_written_paths() {
    let dir = tempfile::tempdir().unwrap();
    let engine = crate::forecast::engine().to_str().unwrap();
    let inp = input(dir.path(), &|_, _, y| y);
    let (out, metrics, plot) =
        (dir.path().join("cv.csv"), dir.path().join("m.csv"), dir.path().join("cv.svg"));
    let stdout = backtest(&[
        "--engine",
        &format!("fp32={engine}"),
        "--input",
        inp.to_str().unwrap(),
        "--horizon",
        "4",
        "--windows",
        "6",
        "--step",
        "2",
        "--samples",
        "16",
        "--output",
        out.to_str().unwrap(),
        "--write-samples",
        "--metrics",
        metrics.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    let (header, rows) = table(&out);
    // the paths come after every other column
    assert_eq!(header[header.len() - 16..].first().map(String::as_str), Some("fp32-sample-0"));
    assert_eq!(header.last().map(String::as_str), Some("fp32-sample-15"));
    let (coverage, bins, points) = calibration_of(&rows, "fp32", 16);
    assert_eq!(points, 2 * 6 * 4);
    let (_, m) = table(&metrics);
    let value = |metric: &str| -> f64 {
        let r = m.iter().find(|r| r["model"] == "fp32" && r["metric"] == metric && r["scope"] == "overall");
        r.unwrap_or_else(|| panic!("no {metric}"))["value"].parse().unwrap()
    };
    for (l, want) in [50, 80, 90, 95].iter().zip(&coverage) {
        assert_eq!(value(&format!("path_coverage_{l}")), *want, "coverage {l}");
        assert!(stdout.contains(&format!("{l}%: {want:.4} (nominal {:.2})", *l as f64 / 100.0)), "{stdout}");
    }
    let text: Vec<String> = bins.iter().map(|b| format!("{b:.4}")).collect();
    for (k, want) in bins.iter().enumerate() {
        assert_eq!(
            value(&format!("pit_{:.1}-{:.1}", k as f64 / 10.0, (k + 1) as f64 / 10.0)),
            *want,
            "bin {k}"
        );
    }
    assert!(stdout.contains(&format!("PIT histogram {}", text.join(" "))), "{stdout}");
    assert_eq!(value("pit_points"), points as f64);
    // the histogram is not degenerate: the figures compared above can differ
    assert!(bins.iter().filter(|&&b| b > 0.0).count() >= 2, "{bins:?}");
    // no calibration rows for the baselines, which have no paths
    assert!(!m.iter().any(|r| r["model"] == "naive" && r["metric"].starts_with("pit_")));
    let svg = fs::read_to_string(dir.path().join("cv-calibration.svg")).unwrap();
    assert!(svg.contains("PIT histogram") && svg.contains("0.9–1.0"), "the histogram image");
}

/// One k10 Kronos engine (tests/fixtures/kronos/k10 exported with configs/kronos-tiny.yaml: window 128, up to 4
/// paths) for the backtests of this module.
fn kronos_engine() -> &'static Path {
    static ENGINE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ENGINE.get_or_init(|| {
        let dir = shared_fixture_dir();
        let k10 = root().join("tests/fixtures/kronos/k10");
        let (bundle, engine) = (dir.join("bundle"), dir.join("engine"));
        totoc_ok(&[
            "export",
            "--checkpoint",
            k10.join("predictor").to_str().unwrap(),
            "--tokenizer",
            k10.join("tokenizer").to_str().unwrap(),
            "--config",
            root().join("configs/kronos-tiny.yaml").to_str().unwrap(),
            "--out",
            bundle.to_str().unwrap(),
        ]);
        totoc_ok(&[
            "build-engine",
            "--artifacts",
            bundle.to_str().unwrap(),
            "--out",
            engine.to_str().unwrap(),
        ]);
        engine
    })
}

/// The last `rows` daily candles of backtesting.py 0.6.6's GOOG.csv (AGPL-3.0: read from the data venv's
/// package, never copied here) as `ds,open,high,low,close,volume` lines, or `None` after a skip.
fn goog_ohlcv(rows: usize) -> Option<Vec<String>> {
    let text = crate::calendar::backtesting_data("GOOG.csv")?;
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(",Open,High,Low,Close,Volume"));
    let all: Vec<String> = lines.map(str::to_string).collect();
    Some(all[all.len() - rows..].to_vec())
}

fn write_ohlcv(path: &Path, lines: &[String]) {
    fs::write(path, format!("ds,open,high,low,close,volume\n{}\n", lines.join("\n"))).unwrap();
}

/// Kronos and Toto 1.0 in one report on real daily candles: Toto reads `close` on its weekday grid, Kronos its
/// own open/high/low/close/volume rows up to the same cutoffs, both scored on close. Greedy Kronos (`--samples 0`)
/// gives what `totoc forecast` gives on the table cut at the cutoff (nothing after it is read); sampled, both engines get the calibration section recomputed from their paths, the header carries
/// each manifest's hash and the sampler settings, with the top_p warning; `--top-k 1` reaches Kronos (its paths
/// are then the greedy forecast); flags and columns no engine can use are errors.
#[test]
fn kronos_and_toto_in_one_report_on_real_daily_candles() {
    let Some(lines) = goog_ohlcv(120) else { return };
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("goog.csv");
    write_ohlcv(&inp, &lines);
    let (toto, kronos) = (crate::forecast::engine().to_str().unwrap(), kronos_engine().to_str().unwrap());
    let (toto_arg, kronos_arg) = (format!("toto={toto}"), format!("kronos={kronos}"));
    let run = |name: &str, extra: &[&str]| -> (String, Vec<BTreeMap<String, String>>, PathBuf) {
        let (out, metrics) =
            (dir.path().join(format!("{name}.csv")), dir.path().join(format!("{name}-m.csv")));
        let mut args = vec![
            "--engine",
            &toto_arg,
            "--engine",
            &kronos_arg,
            "--input",
            inp.to_str().unwrap(),
            "--target-columns",
            "close",
            "--horizon",
            "5",
            "--windows",
            "3",
            "--context",
            "48",
            "--output",
            out.to_str().unwrap(),
            "--metrics",
            metrics.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let stdout = backtest(&args);
        (stdout, table(&out).1, metrics)
    };
    // greedy
    let (stdout, greedy, _) = run("greedy", &[]);
    let rows = &greedy;
    assert_eq!(rows.len(), 3 * 5);
    // the grid's holiday is a step of every model (Kronos forecasts that timestamp too), with no actual
    let holiday = rows.iter().find(|r| r["ds"] == "2013-02-18").unwrap();
    assert!(holiday["y"].is_empty() && !holiday["kronos"].is_empty(), "{holiday:?}");
    assert!(rows.iter().all(|r| !r["kronos"].is_empty() && !r["toto"].is_empty()), "{:?}", rows[0]);
    let sha = |p: &str| exporter::fsutil::sha256_file(&Path::new(p).join("manifest.json")).unwrap();
    assert!(stdout.contains(&format!("engine kronos: kronos, manifest sha256 {}", sha(kronos))), "{stdout}");
    assert!(stdout.contains(&format!("engine toto: toto-1.0, manifest sha256 {}", sha(toto))), "{stdout}");
    assert!(stdout.contains("greedy (top_k 1)") && !stdout.contains("warning"), "{stdout}");
    // the first window (the most rows after its cutoff): `totoc forecast` on the rows at or before its cutoff (the
    // last 48), the same steps
    for cutoff in rows.iter().map(|r| r["cutoff"].clone()).take(1) {
        let upto: Vec<String> = lines.iter().filter(|l| l[..10] <= *cutoff).cloned().collect();
        let cut = dir.path().join("cut.csv");
        write_ohlcv(&cut, &upto[upto.len() - 48..]);
        let out = dir.path().join("f.json");
        totoc_ok(&[
            "forecast",
            "--engine",
            kronos,
            "--input",
            cut.to_str().unwrap(),
            "--horizon",
            "5",
            "--output",
            out.to_str().unwrap(),
        ]);
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&out).unwrap()).unwrap();
        let v = if v.is_array() { v[0].clone() } else { v };
        let close = 3; // open, high, low, close, volume: the table's columns in the family's order
                       // the same f32 values (JSON writes f32's shortest decimal, the table its exact f64)
        let want: Vec<f32> =
            v["mean"][close].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        let got: Vec<f32> = rows
            .iter()
            .filter(|r| r["cutoff"] == cutoff)
            .map(|r| r["kronos"].parse::<f64>().unwrap() as f32)
            .collect();
        assert_eq!(got, want, "window at {cutoff}");
    }

    // sampled: calibration of both engines from their paths; the top_p warning. A Toto 2.0 engine (quantiles, no
    // paths) shares the report: `--samples` reaches only the engines that draw paths.
    let toto2_arg = format!("toto2={}", crate::toto2::engine().to_str().unwrap());
    let (stdout, rows, metrics) =
        run("sampled", &["--samples", "4", "--write-samples", "--engine", &toto2_arg]);
    assert!(rows.iter().all(|r| !r["toto2"].is_empty()), "{:?}", rows[0]);
    assert!(!stdout.contains("toto2: 4 paths"), "{stdout}");
    let (_, m) = table(&metrics);
    for label in ["toto", "kronos"] {
        let (coverage, bins, points) = calibration_of(&rows, label, 4);
        // 15 steps on the weekday grid, one of them Presidents' Day (no close: not scored)
        assert_eq!(points, 14);
        let value = |metric: &str| -> f64 {
            m.iter().find(|r| r["model"] == label && r["metric"] == metric).unwrap()["value"].parse().unwrap()
        };
        assert_eq!(value("path_coverage_80"), coverage[1], "{label}");
        assert_eq!(value("pit_0.9-1.0"), bins[9], "{label}");
        assert!(m.iter().any(|r| r["model"] == label && r["metric"] == "crps_samples"), "{label}");
    }
    assert!(stdout.contains("kronos: 4 paths") && stdout.contains("toto: 4 paths"), "{stdout}");
    assert!(stdout.contains("warning: kronos samples with top_p (the family's default) < 1"), "{stdout}");
    assert!(
        stdout.contains("4 paths, seed 0, temperature default, top_k default, top_p default"),
        "{stdout}"
    );

    // --top-k 1 reaches Kronos: its paths are the greedy forecast (and no warning)
    let (stdout, topk, _) = run("topk", &["--samples", "2", "--top-k", "1", "--write-samples"]);
    for (a, b) in topk.iter().zip(&greedy) {
        assert_eq!((&a["kronos-sample-0"], &a["kronos-sample-1"]), (&b["kronos"], &b["kronos"]));
    }
    assert!(stdout.contains("top_k 1") && !stdout.contains("warning"), "{stdout}");

    // errors: a named-column engine without --target-columns; sampling flags no engine takes
    let base = ["backtest", "--input", inp.to_str().unwrap(), "--horizon", "5", "--windows", "2"];
    let e = totoc_err(&[&base[..], &["--engine", kronos]].concat());
    assert!(e.contains("--target-columns"), "{e}");
    let flags = ["--engine", toto, "--target-columns", "close", "--samples", "2", "--temperature", "0.5"];
    let e = totoc_err(&[&base[..], &flags].concat());
    assert!(e.contains("no engine of this backtest takes them"), "{e}");
    let toto2 = crate::toto2::engine().to_str().unwrap();
    let flags = ["--engine", toto2, "--target-columns", "close", "--samples", "2"];
    let e = totoc_err(&[&base[..], &flags].concat());
    assert!(e.contains("no engine of this backtest draws sample paths"), "{e}");
}

/// Upstream Kronos as the reference of a Kronos engine's backtest (needs the reference venv): in eval mode the
/// greedy engine's MAE equals upstream's on the same windows, each window's near-tie margins are reported and the
/// windows below `--near-tie-factor` x the drift are listed and left out of the comparison (the verdict fails when
/// more than 2% are); in training mode (as upstream's loader leaves the modules) each metric's difference is
/// reported with no verdict.
#[test]
fn upstream_kronos_in_eval_and_training_mode_is_the_reference_of_a_kronos_backtest() {
    let Some(py) = reference_python() else { return };
    let Some(lines) = goog_ohlcv(80) else { return };
    let dir = tempfile::tempdir().unwrap();
    let inp = dir.path().join("goog.csv");
    // up to 2013-02-22: the windows at cutoffs 2013-02-08 (upstream's encoded |z| 39x the drift: a near-tie) and
    // 2013-02-15 (|z| 415x, decisions 5056x), both far from the 100x line whatever the CPU's rounding
    write_ohlcv(&inp, &lines[..lines.len() - 5]);
    let k10 = root().join("tests/fixtures/kronos/k10");
    let (predictor, tokenizer) = (k10.join("predictor"), k10.join("tokenizer"));
    let kronos = format!("kronos={}", kronos_engine().display());
    let run = |mode: &str, extra: &[&str]| -> (String, Vec<BTreeMap<String, String>>) {
        let metrics = dir.path().join(format!("m-{mode}.csv"));
        let args = [
            "--engine",
            &kronos,
            "--input",
            inp.to_str().unwrap(),
            "--target-columns",
            "close",
            "--horizon",
            "5",
            "--windows",
            "2",
            "--context",
            "48",
            "--reference-checkpoint",
            predictor.to_str().unwrap(),
            "--reference-tokenizer",
            tokenizer.to_str().unwrap(),
            "--reference-mode",
            mode,
            "--reference-python",
            &py,
            "--threads",
            "1",
            "--metrics",
            metrics.to_str().unwrap(),
        ];
        let stdout = backtest(&[&args[..], extra].concat());
        (stdout, table(&metrics).1)
    };
    let value = |rows: &[BTreeMap<String, String>], model: &str, metric: &str| -> f64 {
        rows.iter()
            .find(|r| r["model"] == model && r["metric"] == metric && r["scope"] == "overall")
            .unwrap_or_else(|| panic!("no overall {metric} of {model}"))["value"]
            .parse()
            .unwrap()
    };
    // eval on the last window, the harness's rule (100x the drift): no near-tie, the verdict
    let (stdout, rows) = run("eval", &["--reference-windows", "1"]);
    assert!(stdout.contains("reference (kronos eager, eval mode"), "{stdout}");
    assert!(value(&rows, "kronos", "tolerance_ratio_point") <= 1.0, "{stdout}");
    assert!(
        stdout.contains("kronos's backtest MAE equals the reference's within 1e-4 relative ("),
        "{stdout}"
    );
    // issue 34's speed bound of the engine's run: 2 windows of 48 rows + 5 steps, each encoded and prefilled over
    // its 48 rows and decoded over its 53 tokens: 298 full-pass tokens
    let bound =
        stdout.lines().find(|l| l.starts_with("kronos: bound ")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(bound.contains("(298 full-pass tokens at the engine's prefill"), "{bound}");
    assert!(bound.contains("x the bound; the reference at"), "{bound}");
    let last = near_tie_margins(&rows);
    assert!(last.len() == 1 && last[0].0 == "2013-02-15" && last[0].1 >= 400.0, "{last:?}");
    assert!(
        stdout.contains("near-ties (the reference's greedy top-2 logit gap") && stdout.contains("below 100x"),
        "{stdout}"
    );
    assert!(stdout.contains("0 of 1 windows (0.00%; at most 2.00% for a verdict)"), "{stdout}");
    assert!(stdout.contains("none flagged: the smallest margin is"), "{stdout}");
    assert_eq!(
        (value(&rows, "kronos", "windows_compared"), value(&rows, "kronos", "near_tie_windows")),
        (1.0, 0.0)
    );

    // both windows, the line moved to 50x: the first is flagged, listed and left out of the comparison (whose MAE
    // is recomputed here from --output on the other window), and 1 of 2 windows fails the verdict (more than 2%)
    let out = dir.path().join("cv.csv");
    let flags = ["--reference-windows", "2", "--near-tie-factor", "50", "--output", out.to_str().unwrap()];
    let (stdout, rows) = run("eval", &flags);
    assert!(stdout.contains("below 50x"), "{stdout}");
    let margins = near_tie_margins(&rows);
    assert_eq!(margins.len(), 2, "{rows:?}");
    assert_eq!(margins[1], last[0]);
    assert!(margins[0].0 == "2013-02-08" && margins[0].1 < 45.0, "{margins:?}");
    assert!(stdout.contains(" at cutoff 2013-02-08: decisions"), "{stdout}");
    assert!(!stdout.contains(" at cutoff 2013-02-15: decisions"), "{stdout}");
    assert!(stdout.contains("1 of 2 windows (50.00%; at most 2.00% for a verdict)"), "{stdout}");
    assert!(
        stdout.contains("verdict: fails: 1 of 2 windows are flagged near-ties, more than 2.00%"),
        "{stdout}"
    );
    assert_eq!(
        (value(&rows, "kronos", "windows_compared"), value(&rows, "kronos", "near_tie_windows")),
        (1.0, 1.0)
    );
    let (_, forecasts) = table(&out);
    let mae = |column: &str| -> f64 {
        let errors: Vec<f64> = forecasts
            .iter()
            .filter(|r| r["cutoff"] == "2013-02-15" && !r["y"].is_empty())
            .map(|r| (r[column].parse::<f64>().unwrap() - r["y"].parse::<f64>().unwrap()).abs())
            .collect();
        errors.iter().sum::<f64>() / errors.len() as f64
    };
    let want = mae("kronos") - mae("reference");
    let got = value(&rows, "kronos", "mae_minus_reference");
    assert!(
        (got - want).abs() <= 1e-9 * (1.0 + mae("reference")),
        "{got} vs {want} (the unflagged window's MAEs)"
    );
    let (stdout, rows) = run("train", &["--reference-windows", "1"]);
    assert!(stdout.contains("reference (kronos eager, train mode"), "{stdout}");
    assert!(stdout.contains("verdict: none against a training-mode reference"), "{stdout}");
    // the differences are reported; training mode's live dropout moves the forecast
    assert!(value(&rows, "kronos", "mae_minus_reference").is_finite());
    assert!(value(&rows, "kronos", "max_abs_delta_point") > 0.0, "{stdout}");
    assert!(!stdout.contains("near-ties") && near_tie_margins(&rows).is_empty(), "{stdout}");
}

/// The reference's per-window near-tie margins of a metrics table: (cutoff, the smaller of its z and decision
/// margins), in the table's order.
fn near_tie_margins(rows: &[BTreeMap<String, String>]) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for r in rows.iter().filter(|r| r["model"] == "reference" && r["metric"].starts_with("near_tie_margin_"))
    {
        assert_eq!(r["scope"], "window", "{r:?}");
        let v: f64 = r["value"].parse().unwrap();
        match out.iter_mut().find(|(c, _)| *c == r["cutoff"]) {
            Some(m) => m.1 = m.1.min(v),
            None => out.push((r["cutoff"].clone(), v)),
        }
    }
    out
}
