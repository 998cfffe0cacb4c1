//! `totoc forecast` on the data people have: long and wide CSV, Parquet and JSON with timestamps, on real public
//! series (statsmodels datasets converted by `tests/data/convert.py`, see `tests/fixtures/data/provenance.json`)
//! and on synthetic daily, hourly and epoch series (statsmodels ships none). The same series gives bitwise the
//! same forecast in every format; future timestamps continue each series at its frequency; malformed input is an
//! error naming the place, the problem and the fix, with exit code 2 and nothing written; a series longer than
//! the engine's context forecasts like its most recent points.
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Float32Type};
use arrow_schema::DataType;
use serde_json::Value;

use crate::common::*;
use crate::forecast::engine;

fn data(name: &str) -> PathBuf {
    root().join("tests/fixtures/data").join(name)
}

fn forecast(input: &Path, extra: &[&str]) -> String {
    let mut args =
        vec!["forecast", "--engine", engine().to_str().unwrap(), "--input", input.to_str().unwrap()];
    args.extend_from_slice(extra);
    totoc_ok(&args)
}

/// JSON Lines responses by series id (`""` for a series without one).
fn by_id(jsonl: &str) -> BTreeMap<String, Value> {
    jsonl
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let id =
                v.get("id").map_or(String::new(), |id| id.as_str().map_or(id.to_string(), str::to_string));
            (id, v)
        })
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|x| x.as_str().map_or(x.to_string(), str::to_string)).collect()
}

const H: &str = "8";

#[test]
fn long_csv_parquet_wide_csv_and_json_give_identical_forecasts() {
    let jsonl = ["--horizon", H, "--output-format", "jsonl"];
    let csv = by_id(&forecast(&data("long.csv"), &jsonl));
    let parquet = by_id(&forecast(&data("long.parquet"), &jsonl));
    let parquet_ts = by_id(&forecast(&data("long_timestamp.parquet"), &jsonl));
    let json = by_id(&forecast(&data("long.jsonl"), &jsonl));
    assert_eq!(csv.keys().collect::<Vec<_>>(), ["co2", "elnino", "sunspots"]);
    for (id, want) in &csv {
        assert_eq!(want["mean"].as_array().unwrap()[0].as_array().unwrap().len(), 8);
        for (name, other) in [("parquet", &parquet), ("parquet (timestamps)", &parquet_ts), ("json", &json)] {
            // bitwise: the same series is the same request
            assert_eq!(other[id]["mean"], want["mean"], "{id}: {name} differs from CSV");
        }
        assert_eq!(parquet[id]["timestamps"], want["timestamps"], "{id}");
        assert_eq!(json[id]["timestamps"], want["timestamps"], "{id}");
        let wide =
            serde_json::from_str::<Value>(&forecast(&data(&format!("{id}_wide.csv")), &["--horizon", H]))
                .unwrap();
        assert_eq!(wide["mean"], want["mean"], "{id}: wide CSV differs");
        assert_eq!(wide["timestamps"], want["timestamps"], "{id}");
        assert!(wide.get("id").is_none());
    }
    // weekly (Saturdays), monthly (calendar months), yearly
    assert_eq!(strings(&csv["co2"]["timestamps"])[..3], ["1967-01-21", "1967-01-28", "1967-02-04"]);
    assert_eq!(strings(&csv["elnino"]["timestamps"])[..3], ["2011-01-01", "2011-02-01", "2011-03-01"]);
    assert_eq!(strings(&csv["sunspots"]["timestamps"])[..2], ["2009-01-01", "2010-01-01"]);
    // pandas' datetime64 column is a date-time, written back as one
    assert_eq!(strings(&parquet_ts["co2"]["timestamps"])[0], "1967-01-21T00:00:00");
    // the co2 table leaves out the weeks the dataset lacks; JSON has them as null: same request, so the gaps
    // became missing points
    let rows = fs::read_to_string(data("co2_wide.csv")).unwrap().lines().count() - 1;
    let nulls =
        fs::read_to_string(data("long.jsonl")).unwrap().lines().next().unwrap().matches("null").count();
    assert_eq!((rows, nulls), (208, 32));
}

#[test]
fn a_multivariate_series_from_long_parquet_and_wide_csv() {
    let long = forecast(&data("macro_long.csv"), &["--horizon", H]);
    let long: Value = serde_json::from_str(&long).unwrap();
    let parquet: Value =
        serde_json::from_str(&forecast(&data("macro_long.parquet"), &["--horizon", H])).unwrap();
    let wide: Value = serde_json::from_str(&forecast(&data("macro_wide.csv"), &["--horizon", H])).unwrap();
    assert_eq!(long["mean"].as_array().unwrap().len(), 3);
    assert_eq!(parquet["mean"], long["mean"]);
    assert_eq!(wide["mean"], long["mean"]);
    // quarterly
    assert_eq!(strings(&long["timestamps"])[..3], ["2009-10-01", "2010-01-01", "2010-04-01"]);
    // a table out names the variates
    let out = forecast(&data("macro_long.csv"), &["--horizon", "2", "--output-format", "csv"]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "unique_id,ds,target_name,model,mean");
    assert!(lines[1].starts_with("us,2009-10-01,realgdp,"), "{}", lines[1]);
    assert!(lines[3].starts_with("us,2009-10-01,realcons,"), "{}", lines[3]);
    assert_eq!(lines.len(), 1 + 3 * 2);
}

#[test]
fn parquet_and_csv_out_carry_the_input_columns_and_future_timestamps() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("forecast.parquet");
    forecast(&data("long.parquet"), &["--horizon", H, "--output", out.to_str().unwrap()]);
    let json = by_id(&forecast(&data("long.parquet"), &["--horizon", H, "--output-format", "jsonl"]));
    let file = fs::File::open(&out).unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.map(Result::unwrap).collect();
    let schema = batches[0].schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["unique_id", "ds", "model", "mean"]);
    assert_eq!(schema.field(1).data_type(), &DataType::Date32);
    let b = &batches[0];
    assert_eq!(b.num_rows(), 3 * 8);
    let ids = b.column(0).as_string::<i32>();
    let days = b.column(1).as_primitive::<Date32Type>();
    assert!(b.column(2).as_string::<i32>().iter().all(|m| m == Some("toto-1.0")));
    let mean = b.column(3).as_primitive::<Float32Type>();
    // series in the order they first appear (the table is sorted by time: sunspots from 1700 first)
    let first_rows: Vec<(&str, i32)> = (0..3).map(|s| (ids.value(8 * s), days.value(8 * s))).collect();
    // first forecast steps (day 0 = 1970-01-01): 2009-01-01, 2011-01-01, 1967-01-21
    assert_eq!(first_rows, [("sunspots", 14245), ("elnino", 14975), ("co2", -1076)]);
    for r in 0..b.num_rows() {
        let want = json[ids.value(r)]["mean"][0][r % 8].as_f64().unwrap() as f32;
        assert_eq!(mean.value(r), want, "row {r}");
    }

    let csv = forecast(&data("long.csv"), &["--horizon", "2", "--output-format", "csv"]);
    assert_eq!(csv.lines().next(), Some("unique_id,ds,model,mean"));
    assert!(csv.lines().any(|l| l.starts_with("co2,1967-01-21,")), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("co2,1967-01-28,")), "{csv}");
}

#[test]
fn sampled_forecasts_write_quantile_columns_and_samples_only_when_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("daily.csv");
    let mut text = String::from("date,sales\n");
    for d in 0..60 {
        text += &format!("{},{}\n", civil_day(d), 100 + (d * 7) % 13);
    }
    fs::write(&input, text).unwrap();
    let args =
        ["--horizon", "4", "--samples", "16", "--quantiles", "0.05,0.5,0.975", "--output-format", "csv"];
    let out = forecast(&input, &args);
    assert_eq!(out.lines().next(), Some("date,model,mean,q0.05,q0.5,q0.975"));
    assert_eq!(out.lines().nth(1).unwrap().split(',').next(), Some("2024-03-01"));
    let with = forecast(&input, &[&args[..], &["--write-samples"]].concat());
    let header: Vec<&str> = with.lines().next().unwrap().split(',').collect();
    assert_eq!(header.len(), 6 + 16);
    assert_eq!((header[6], header[21]), ("sample_0", "sample_15"));
    let json: Value =
        serde_json::from_str(&forecast(&input, &["--horizon", "4", "--samples", "16"])).unwrap();
    assert!(json["samples"].is_null());
    let json: Value =
        serde_json::from_str(&forecast(&input, &["--horizon", "4", "--samples", "16", "--write-samples"]))
            .unwrap();
    assert_eq!(json["samples"].as_array().unwrap().len(), 16);
}

/// Day `d` after 2024-01-01 as `YYYY-MM-DD` (2024 is a leap year).
fn civil_day(d: usize) -> String {
    let months = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let (mut m, mut day) = (0, d);
    while day >= months[m] {
        day -= months[m];
        m += 1;
    }
    format!("2024-{:02}-{:02}", m + 1, day + 1)
}

/// Forecasts a CSV written from `rows` and returns the output CSV's timestamp column.
fn future_of(header: &str, rows: &[String], extra: &[&str]) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.csv");
    fs::write(&input, format!("{header}\n{}\n", rows.join("\n"))).unwrap();
    let out = forecast(&input, &[&["--horizon", "3", "--output-format", "csv"], extra].concat());
    let col = out.lines().next().unwrap().split(',').position(|c| header.split(',').any(|h| h == c)).unwrap();
    out.lines().skip(1).map(|l| l.split(',').nth(col).unwrap().to_string()).collect()
}

#[test]
fn future_timestamps_for_daily_hourly_monthly_and_epoch_series() {
    // synthetic: daily through the leap day
    let daily: Vec<String> = (0..58).map(|d| format!("{},{}", civil_day(d), d % 5)).collect();
    assert_eq!(future_of("ds,y", &daily, &[]), ["2024-02-28", "2024-02-29", "2024-03-01"]);
    // hourly with an offset: spaced in UTC, written with the input's offset
    let hourly: Vec<String> =
        (0..30).map(|h| format!("2024-03-{:02}T{:02}:00:00+02:00,{}", 1 + h / 24, h % 24, h % 7)).collect();
    assert_eq!(
        future_of("timestamp,value", &hourly, &[]),
        ["2024-03-02T06:00:00+02:00", "2024-03-02T07:00:00+02:00", "2024-03-02T08:00:00+02:00"]
    );
    // month ends, across February of a leap year
    let ends = ["2023-09-30", "2023-10-31", "2023-11-30", "2023-12-31", "2024-01-31"];
    let monthly: Vec<String> = ends.iter().enumerate().map(|(i, d)| format!("{d},{i}")).collect();
    assert_eq!(future_of("date,y", &monthly, &[]), ["2024-02-29", "2024-03-31", "2024-04-30"]);
    // epoch seconds (every 5 minutes) and milliseconds
    let epochs: Vec<String> = (0..20).map(|i| format!("{},{}", 1_700_000_000 + 300 * i, i % 3)).collect();
    assert_eq!(future_of("time,y", &epochs, &[]), ["1700006000", "1700006300", "1700006600"]);
    let ms: Vec<String> = (0..20).map(|i| format!("{},{}", 1_700_000_000_000i64 + 1000 * i, i % 3)).collect();
    assert_eq!(
        future_of("time,y", &ms, &["--timestamp-unit", "ms"]),
        ["1700000020000", "1700000021000", "1700000022000"]
    );
}

/// Runs a forecast that must fail: exit 2, the message, and no output file or temp file.
fn assert_refused(name: &str, body: &str, extra: &[&str], want: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join(name);
    fs::write(&input, body).unwrap();
    let output = tmp.path().join("out.csv");
    let mut args = vec![
        "forecast",
        "--engine",
        engine().to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--output",
        output.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    if !extra.contains(&"--horizon") {
        args.extend(["--horizon", "4"]);
    }
    let out = totoc(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{name}: {err}");
    let want = want.replace("FILE", input.to_str().unwrap());
    assert!(err.contains(&want), "{name}:\n  got: {err}\n want: {want}");
    let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from(name)], "{name}: something was written");
}

#[test]
fn malformed_tables_are_clear_errors_and_write_nothing() {
    let h = "unique_id,ds,y\n";
    let ok_rows = "a,2024-01-01,1\na,2024-01-02,2\n";
    let cases: Vec<(&str, String, Vec<&str>, &str)> = vec![
        (
            "bad_date.csv",
            format!("{h}{ok_rows}a,2024-02-30,3\n"),
            vec![],
            "FILE:4: column `ds`: `2024-02-30` is not a timestamp; write ISO 8601 dates or date-times",
        ),
        (
            "duplicate.csv",
            format!("{h}{ok_rows}b,2024-01-01,1\na,2024-01-02,5\n"),
            vec![],
            "FILE:5: series a: timestamp 2024-01-02 is also on line 3; keep one row per time step",
        ),
        (
            "mixed.csv",
            format!(
                "{h}{}",
                ["01", "02", "03", "04", "05", "12", "19", "26"].map(|d| format!("a,2024-01-{d},1\n")).concat()
            ),
            vec![],
            "FILE: series a: the spacing changes from 1 day to 1 week at line 7 (2024-01-12), which would leave 18 \
             of 26 points missing: the series mixes frequencies; give each frequency its own series, or force one \
             step with --freq",
        ),
        (
            "irregular.csv",
            format!("{h}{ok_rows}a,2024-01-03,1\na,2024-01-04T06:00:00,1\n"),
            vec![],
            "FILE:5: series a: timestamp 2024-01-04T06:00:00 is 30 hours after line 4 (2024-01-03), not a whole \
             number of the series' step (1 day)",
        ),
        (
            "empty_series.csv",
            format!("{h}{ok_rows}b,2024-01-01,\nb,2024-01-02,\n"),
            vec![],
            "FILE: series b: column `y` has no value; give the series at least one value in every target column, \
             or leave it out",
        ),
        ("no_rows.csv", h.to_string(), vec![], "FILE: there are no data rows after the header"),
        (
            "not_a_number.csv",
            format!("{h}{ok_rows}a,2024-01-03,n/a\n"),
            vec![],
            "FILE:4: column `y`: `n/a` is not a number; write a number, or leave the cell empty for a missing point",
        ),
        (
            "missing_id.csv",
            format!("{h}{ok_rows}"),
            vec!["--id-column", "store"],
            "FILE: there is no column `store` (given by --id-column); the columns are `unique_id`, `ds`, `y`; name \
             one of them with --id-column",
        ),
        (
            "no_id_column.csv",
            "ds,y\n2024-01-01,1\n2024-01-02,2\n2024-01-01,3\n".to_string(),
            vec![],
            "FILE:4: timestamp 2024-01-01 is also on line 2; keep one row per time step (if the file holds several \
             series, name their id column with --id-column)",
        ),
        (
            "one_row.csv",
            format!("{h}a,2024-01-01,1\n"),
            vec![],
            "FILE: series a: one timestamp is not enough to infer the series' frequency; give the series at least \
             two rows, or pass --freq",
        ),
        (
            "horizon.csv",
            format!("{h}{ok_rows}"),
            vec!["--horizon", "1000"],
            "FILE: series a: horizon 1000 exceed this engine's limit of 160",
        ),
        (
            "bad_freq.csv",
            format!("{h}{ok_rows}"),
            vec!["--freq", "often"],
            "--freq `often`: not a duration",
        ),
        (
            "unknown.txt",
            format!("{h}{ok_rows}"),
            vec![],
            "FILE: the format cannot be told from the file name; name it *.json, *.jsonl, *.csv or *.parquet, or \
             pass --input-format",
        ),
        (
            "not_parquet.parquet",
            format!("{h}{ok_rows}"),
            vec![],
            "FILE: cannot read it as Parquet",
        ),
        (
            "bad.jsonl",
            "{\"id\": 1, \"target\": [[1, 2]], \"timestamps\": [\"2024-01-01\", \"2024-01-01\"]}\n".to_string(),
            vec![],
            "FILE:1: timestamps[1]: timestamp 2024-01-01 is also on timestamps[0]; keep one row per time step",
        ),
    ];
    for (name, body, extra, want) in cases {
        assert_refused(name, &body, &extra, want);
    }
    // several series to a one-document JSON output: refused before anything runs
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.json");
    let args = ["--horizon", "2", "--output", out.to_str().unwrap()];
    let run = totoc(
        &[
            &["forecast", "--engine", engine().to_str().unwrap(), "--input"],
            &[data("long.csv").to_str().unwrap()][..],
            &args,
        ]
        .concat(),
    );
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        err.contains("out.json: 3 forecasts do not fit one JSON document; write them as JSON Lines"),
        "{err}"
    );
    assert!(!out.exists());
}

#[test]
fn stdin_and_stdout_pipes_need_a_format() {
    let body = "unique_id,ds,y\na,2024-01-01,1\na,2024-01-02,2\na,2024-01-03,3\n";
    let e = engine().to_str().unwrap();
    let out = totoc_stdin(&["forecast", "--engine", e, "--input", "-", "--horizon", "2"], body.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("stdin: the format of a pipe cannot be told from a file name; pass --input-format"),
        "{err}"
    );
    let args = [
        "forecast",
        "--engine",
        e,
        "--input",
        "-",
        "--input-format",
        "csv",
        "--horizon",
        "2",
        "--output",
        "-",
    ];
    let out = totoc_stdin(&[&args[..], &["--output-format", "csv"]].concat(), body.as_bytes());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().next(), Some("unique_id,ds,model,mean"));
    assert!(text.lines().nth(2).unwrap().starts_with("a,2024-01-05,"), "{text}");
    // the summary line is on stderr
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("forecast 1 series (3 points)") && err.contains("series/s"), "{err}");
}

/// A CPU engine of the tiny checkpoint with one profile of context 512 (horizon 32).
fn ctx512_engine() -> &'static Path {
    static ENGINE: OnceLock<PathBuf> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let dir = shared_fixture_dir();
        let config = dir.join("ctx512.yaml");
        fs::write(
            &config,
            "profiles:\n  - name: ctx512\n    batch: 1\n    variates: 1\n    context: 512\n    horizon: 32\n",
        )
        .unwrap();
        let (bundle, engine) = (dir.join("bundle"), dir.join("engine"));
        let ck = fixture_checkpoint("tiny");
        let s = |p: &Path| p.to_str().unwrap().to_string();
        totoc_ok(&["export", "--checkpoint", &s(&ck), "--config", &s(&config), "--out", &s(&bundle)]);
        totoc_ok(&["build-engine", "--artifacts", &s(&bundle), "--out", &s(&engine)]);
        engine
    })
}

#[test]
fn a_10000_point_series_forecasts_like_its_last_512_points() {
    let tmp = tempfile::tempdir().unwrap();
    let series: Vec<String> = (0..10_000)
        .map(|i| {
            format!("{},{:.3}", 1_600_000_000 + 3_600 * i, (i as f64 * 0.26).sin() * 10.0 + i as f64 * 0.01)
        })
        .collect();
    let full = tmp.path().join("full.csv");
    let last = tmp.path().join("last.csv");
    fs::write(&full, format!("timestamp,y\n{}\n", series.join("\n"))).unwrap();
    fs::write(&last, format!("timestamp,y\n{}\n", series[10_000 - 512..].join("\n"))).unwrap();
    let e = ctx512_engine().to_str().unwrap();
    let run = |input: &Path, extra: &[&str]| {
        let mut args = vec!["forecast", "--engine", e, "--input", input.to_str().unwrap()];
        args.extend_from_slice(extra);
        if !extra.contains(&"--horizon") {
            args.extend(["--horizon", "24"]);
        }
        totoc(&args)
    };
    let out = run(&full, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "note: 1 of 1 series have more points than the engine's context of 512 (up to 10000); their most recent \
             512 points were used (--strict-context makes this an error)"
        ),
        "{err}"
    );
    let from_full: Value = serde_json::from_slice(&out.stdout).unwrap();
    let from_last: Value = serde_json::from_slice(&run(&last, &[]).stdout).unwrap();
    assert_eq!(from_full["mean"], from_last["mean"]);
    assert_eq!(from_full["timestamps"], from_last["timestamps"]);
    assert_eq!(from_full["context_truncated"], serde_json::json!({"given": 10000, "used": 512}));
    assert!(from_last.get("context_truncated").is_none());

    let strict = run(&full, &["--strict-context"]);
    assert_eq!(strict.status.code(), Some(2));
    let err = String::from_utf8_lossy(&strict.stderr);
    assert!(err.contains("full.csv: the context has 10000 points but this engine holds 512"), "{err}");
    // beyond the engine's horizon: an error naming the largest one
    let long = run(&last, &["--horizon", "33"]);
    let err = String::from_utf8_lossy(&long.stderr);
    assert!(err.contains("horizon 33 exceed this engine's limit of 32"), "{err}");
}

/// The fields only some families take (issue 34's request seam) are refused by a Toto engine, naming each field
/// and its reason, from a table's command line and from a JSON request alike; nothing is written.
#[test]
fn fields_a_toto_engine_does_not_take_are_refused_by_name() {
    let table = "unique_id,ds,y\na,2024-01-01,1\na,2024-01-02,2\na,2024-01-03,3\n";
    let title = exporter::registry::Family::Toto1.capabilities().title;
    let sampling =
        format!("is not a field {title} takes: it draws its sample paths from the distribution it predicts");
    let cases: Vec<(&str, String, Vec<&str>, String)> = vec![
        ("t.csv", table.into(), vec!["--samples", "4", "--temperature", "0.7"], format!("`temperature` {sampling}")),
        ("t.csv", table.into(), vec!["--samples", "4", "--top-k", "5"], format!("`top_k` {sampling}")),
        ("t.csv", table.into(), vec!["--samples", "4", "--top-p", "0.9"], format!("`top_p` {sampling}")),
        (
            "t.csv",
            table.into(),
            vec!["--param", "clip=5"],
            format!("`params.clip` is not a field {title} takes: it takes no parameters; remove it"),
        ),
        (
            "r.json",
            r#"{"target": [[1, 2, 3]], "horizon": 2, "columns": ["close"]}"#.into(),
            vec![],
            format!("FILE: `columns` is not a field {title} takes: its variates are unnamed rows of `target`"),
        ),
        (
            "r.json",
            r#"{"target": [[1, 2]], "horizon": 1, "timestamps": ["2024-01-01", "2024-01-02"], "future_timestamps": ["2024-01-03"]}"#.into(),
            vec![],
            format!("FILE: `future_timestamps` is not a field {title} takes: it does not read timestamps"),
        ),
    ];
    for (name, body, extra, want) in cases {
        assert_refused(name, &body, &extra, &want);
    }
}
