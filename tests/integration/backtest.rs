//! `totoc backtest` end to end on the tiny fixtures: the documented columns of both tables, two engines in one
//! report, Nixtla's cutoffs, no leakage (a value after a cutoff changes no forecast of that cutoff), clear
//! errors for windows that do not fit, a Toto 2.0 backtest with utilsforecast's quantile columns, and the
//! toto-ts reference on the same windows within the verify tolerance (needs the reference venv).
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
