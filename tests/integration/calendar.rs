//! Session calendars end to end (`totoc forecast`, `totoc plot`, JSON requests as `/v1/forecast` reads them): real
//! daily stock closes (trading days only, `tests/fixtures/data/aapl_wide.csv`, `stocks_long.csv` from
//! bokeh-sampledata) follow weekdays, with market holidays as missing points; a synthetic hourly FX week (Sunday
//! 17:00 to Friday 17:00 New York time, across the March 2024 DST change) follows New York's clock; a 24/7 series
//! is every slot; `--calendar continuous` is the fixed-step grid of before.
use std::fs;
use std::path::{Path, PathBuf};

use jiff::tz::TimeZone;
use jiff::Timestamp;
use serde_json::Value;

use crate::common::*;
use crate::forecast::engine;

fn data(name: &str) -> PathBuf {
    root().join("tests/fixtures/data").join(name)
}

/// Runs `totoc forecast` on `input`; (stdout, stderr).
fn forecast(input: &Path, extra: &[&str]) -> (String, String) {
    let mut args =
        vec!["forecast", "--engine", engine().to_str().unwrap(), "--input", input.to_str().unwrap()];
    args.extend_from_slice(extra);
    let out = totoc(&args);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "totoc {args:?} failed:\n{stderr}");
    (stdout.into_owned(), stderr.into_owned())
}

/// Grid points of a one-series input: the context note's `(up to N)` when the series is longer than the engine's
/// context, else the summary line's `forecast 1 series (N points) in ...`.
fn points(stderr: &str) -> usize {
    let after = match stderr.split("(up to ").nth(1) {
        Some(after) => after.split(')').next().unwrap(),
        None => stderr.split("series (").nth(1).expect("a summary line").split(' ').next().unwrap(),
    };
    after.parse().unwrap()
}

fn stamps(v: &Value) -> Vec<String> {
    v["timestamps"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect()
}

/// The weekdays between the fixture's first and last date that it has no row for (market holidays and the two
/// days Hurricane Sandy closed the exchange).
fn absent_weekdays(csv: &str) -> Vec<String> {
    let dates: Vec<jiff::civil::Date> =
        csv.lines().skip(1).map(|l| l.split(',').next().unwrap().parse().unwrap()).collect();
    let (first, last) = (dates[0], *dates.last().unwrap());
    let mut out = Vec::new();
    let mut d = first;
    while d <= last {
        if d.weekday().to_monday_zero_offset() < 5 && !dates.contains(&d) {
            out.push(d.to_string());
        }
        d = d.tomorrow().unwrap();
    }
    out
}

#[test]
fn daily_stock_closes_follow_weekdays_with_holidays_missing() {
    let input = data("aapl_wide.csv");
    let (out, err) = forecast(&input, &["--horizon", "6"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    // The last close is Friday 1 March 2013: the forecast starts Monday and skips the weekend after.
    assert_eq!(
        stamps(&v),
        ["2013-03-04", "2013-03-05", "2013-03-06", "2013-03-07", "2013-03-08", "2013-03-11"]
    );
    assert_eq!(v["calendar"], "weekdays Mon–Fri");
    assert!(err.contains("calendar: weekdays Mon–Fri\n"), "{err}");
    // 300 closes from Monday 2011-12-19 to Friday 2013-03-01: 315 weekdays, weekends are not grid points, and the
    // 15 weekdays without a close (holidays, Sandy) are missing points.
    let absent = absent_weekdays(&fs::read_to_string(&input).unwrap());
    assert_eq!(absent.len(), 15);
    assert!(absent.contains(&"2013-02-18".to_string()) && absent.contains(&"2012-10-30".to_string()));
    assert_eq!(points(&err), 315);

    // Holidays given: closed days, not missing points; none is a forecast step.
    let tmp = tempfile::tempdir().unwrap();
    let holidays = tmp.path().join("holidays.txt");
    fs::write(&holidays, format!("# NYSE closures\n{}\n2013-03-05  # a future closure\n", absent.join("\n")))
        .unwrap();
    let (out, err) = forecast(&input, &["--horizon", "3", "--holidays", holidays.to_str().unwrap()]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stamps(&v), ["2013-03-04", "2013-03-06", "2013-03-07"]);
    assert_eq!(v["calendar"], "weekdays Mon–Fri, 16 holidays");
    assert_eq!(points(&err), 300);

    // --calendar continuous: the fixed daily grid of before, weekends included.
    let (out, err) = forecast(&input, &["--horizon", "3", "--calendar", "continuous"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stamps(&v), ["2013-03-02", "2013-03-03", "2013-03-04"]);
    assert_eq!(v["calendar"], "continuous");
    assert_eq!(points(&err), 439);

    // The chart of the saved forecast pairs its steps with the session's.
    let saved = tmp.path().join("fc.json");
    forecast(&input, &["--horizon", "6", "--output", saved.to_str().unwrap()]);
    let plot = tmp.path().join("fc.svg");
    totoc_ok(&[
        "plot",
        "--input",
        input.to_str().unwrap(),
        "--forecast",
        saved.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    let svg = fs::read_to_string(&plot).unwrap();
    // Ticks count trading days back from the last close (a Friday), by weeks.
    assert!(svg.contains("2013-03-01") && svg.contains("2013-02-15"), "tick labels follow the session");
    assert!(!svg.contains("2013-03-02"), "no tick on the Saturday after the last close");
}

#[test]
fn a_long_table_of_two_stocks_reports_each_calendar_in_parquet_metadata() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("fc.parquet");
    let (_, err) = forecast(&data("stocks_long.csv"), &["--horizon", "4", "--output", out.to_str().unwrap()]);
    assert!(err.contains("calendar: weekdays Mon–Fri (2 series)\n"), "{err}");
    let file = fs::File::open(&out).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    use parquet::file::reader::FileReader;
    let meta = reader.metadata().file_metadata().key_value_metadata().cloned().unwrap_or_default();
    let cal = meta.iter().find(|kv| kv.key == "totoc.calendars").and_then(|kv| kv.value.clone()).unwrap();
    let cal: Value = serde_json::from_str(&cal).unwrap();
    assert_eq!(
        cal,
        serde_json::json!([
            {"id": "AAPL", "calendar": "weekdays Mon–Fri"},
            {"id": "MSFT", "calendar": "weekdays Mon–Fri"}
        ])
    );
}

/// Hourly FX bars open Sunday 17:00 to Friday 17:00 New York time from Sunday 4 February to Friday 22 March 2024
/// (the US clocks moved on Sunday 10 March), as `ds,y` rows in `style` (`z`: UTC, `offset`: New York's offset of
/// each bar), values a seeded random walk. `closed` dates (New York) have no bar: a holiday inside the session.
fn fx_rows(style: &str, closed: &[&str], end: &str) -> (String, usize) {
    let ny = TimeZone::get("America/New_York").unwrap();
    let (start, end): (Timestamp, Timestamp) =
        ("2024-02-04T22:00:00Z".parse().unwrap(), end.parse().unwrap());
    let mut text = String::from("ds,y\n");
    let (mut y, mut seed, mut rows) = (1.08f64, 42u64, 0);
    let mut t = start;
    while t <= end {
        let local = ny.to_datetime(t);
        let (wd, h) = (local.weekday().to_monday_zero_offset(), local.hour());
        let open = matches!((wd, h), (6, 17..) | (0..=3, _) | (4, ..=16));
        if open && !closed.contains(&local.date().to_string().as_str()) {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            y += ((seed >> 33) as f64 / (1u64 << 31) as f64 - 0.5) * 0.002;
            let ds = match style {
                "z" => t.to_string(),
                _ => t.display_with_offset(ny.to_offset(t)).to_string(),
            };
            text.push_str(&format!("{ds},{y:.5}\n"));
            rows += 1;
        }
        t = t.checked_add(jiff::SignedDuration::from_hours(1)).unwrap();
    }
    (text, rows)
}

#[test]
fn an_fx_week_follows_new_york_time_across_the_dst_change() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("eurusd.csv");
    // Wednesday 14 February (New York) has no bar: 24 missing points; the weekends are none.
    let (rows, n) = fx_rows("offset", &["2024-02-14"], "2024-03-22T20:00:00Z");
    fs::write(&input, rows).unwrap();
    let (out, err) = forecast(&input, &["--horizon", "3", "--timezone", "America/New_York"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["calendar"], "Sun 17:00 – Fri 17:00 America/New_York, 1 hour");
    assert_eq!(n, 7 * 120 - 24);
    assert_eq!(points(&err), 7 * 120);
    // After Friday 16:00 the week reopens Sunday 17:00, written in New York's offset.
    assert_eq!(
        stamps(&v),
        ["2024-03-24T17:00:00-04:00", "2024-03-24T18:00:00-04:00", "2024-03-24T19:00:00-04:00"]
    );
    // Without --timezone the bars' own offsets (-05:00, then -04:00) carry the same session.
    let (out, err) = forecast(&input, &["--horizon", "1"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["calendar"], "Sun 17:00 – Fri 17:00 (the timestamps' offsets), 1 hour");
    assert_eq!((points(&err), stamps(&v)), (7 * 120, vec!["2024-03-24T17:00:00-04:00".to_string()]));
    // The same bars in UTC, cut before the change: the week after opens at 21:00Z, the ones before at 22:00Z.
    let (rows, _) = fx_rows("z", &[], "2024-03-08T21:00:00Z");
    assert!(
        rows.contains("2024-03-03T22:00:00Z\n") || rows.contains("2024-03-03T22:00:00Z,"),
        "{}",
        &rows[..200]
    );
    let input = tmp.path().join("eurusd_utc.csv");
    fs::write(&input, rows).unwrap();
    let (out, _) = forecast(&input, &["--horizon", "2", "--timezone", "America/New_York"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stamps(&v), ["2024-03-10T21:00:00Z", "2024-03-10T22:00:00Z"]);
    // --calendar continuous: every hour of the weekend is a missing point and a forecast step (as before).
    let (out, _) = forecast(&input, &["--horizon", "2", "--calendar", "continuous"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stamps(&v), ["2024-03-08T22:00:00Z", "2024-03-08T23:00:00Z"]);
}

#[test]
fn a_24_7_series_is_every_slot_and_continues_like_a_continuous_one() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("btc.csv");
    let start = 1_704_067_200i64; // 2024-01-01T00:00:00Z
    let rows: String =
        (0..24 * 42).map(|h| format!("{},{}\n", start + h * 3_600, 40_000 + (h * 37) % 500)).collect();
    fs::write(&input, format!("ds,y\n{rows}")).unwrap();
    let (out, err) = forecast(&input, &["--horizon", "3"]);
    let (cont, _) = forecast(&input, &["--horizon", "3", "--calendar", "continuous"]);
    let (v, c): (Value, Value) = (serde_json::from_str(&out).unwrap(), serde_json::from_str(&cont).unwrap());
    assert_eq!(v["calendar"], "every slot, 1 hour");
    assert!(err.contains("calendar: every slot, 1 hour\n"), "{err}");
    assert_eq!(v["timestamps"], c["timestamps"]);
    assert_eq!(v["mean"], c["mean"]);
}

#[test]
fn json_requests_carry_their_own_calendar_and_bad_ones_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let csv = fs::read_to_string(data("aapl_wide.csv")).unwrap();
    let (ds, ys): (Vec<&str>, Vec<f64>) = csv
        .lines()
        .skip(1)
        .map(|l| l.split_once(',').unwrap())
        .map(|(d, y)| (d, y.parse::<f64>().unwrap()))
        .unzip();
    let request = |extra: Value| {
        let mut r = serde_json::json!({"target": [ys], "timestamps": ds, "horizon": 2});
        r.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let path = tmp.path().join("req.json");
        fs::write(&path, r.to_string()).unwrap();
        path
    };
    let (out, _) = forecast(&request(serde_json::json!({"holidays": ["2013-03-04"]})), &[]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(stamps(&v), ["2013-03-05", "2013-03-06"]);
    assert_eq!(v["calendar"], "weekdays Mon–Fri, 1 holiday");
    let (out, _) = forecast(&request(serde_json::json!({"calendar": "continuous"})), &[]);
    assert_eq!(stamps(&serde_json::from_str(&out).unwrap()), ["2013-03-02", "2013-03-03"]);
    let e = |extra: Value| {
        let path = request(extra);
        totoc_err(&["forecast", "--engine", engine().to_str().unwrap(), "--input", path.to_str().unwrap()])
    };
    assert!(e(serde_json::json!({"calendar": "lunar"}))
        .contains("calendar `lunar` is not one of auto, continuous, weekdays"));
    assert!(
        e(serde_json::json!({"timezone": "Mars/Olympus"})).contains("not a time zone of the IANA database")
    );
    assert!(e(serde_json::json!({"holidays": ["2013-02-30"]}))
        .contains("holidays[0]: `2013-02-30` is not a date"));
    assert!(e(serde_json::json!({"holidays": "2013-03-04"})).contains("`holidays` is not an array of dates"));
    // A row on a holiday is refused, naming it.
    let msg = e(serde_json::json!({"holidays": ["2013-03-01"]}));
    assert!(msg.contains("timestamp 2013-03-01 is on a holiday"), "{msg}");
}

#[test]
fn bad_calendar_flags_name_the_fix() {
    let input = data("aapl_wide.csv");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "forecast",
            "--engine",
            engine().to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--horizon",
            "2",
        ];
        args.extend_from_slice(extra);
        totoc_err(&args)
    };
    let e = run(&["--timezone", "America/Nowhere"]);
    assert!(
        e.contains("--timezone: `America/Nowhere` is not a time zone") && e.contains("America/New_York"),
        "{e}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let holidays = tmp.path().join("h.txt");
    fs::write(&holidays, "2013-01-01\n01/21/2013\n").unwrap();
    let e = run(&["--holidays", holidays.to_str().unwrap()]);
    assert!(e.contains("h.txt:2: `01/21/2013` is not a date; write one date per line as YYYY-MM-DD"), "{e}");
    // --calendar weekdays on a series with a Saturday row: the row is named.
    let sat = tmp.path().join("sat.csv");
    let mut csv = fs::read_to_string(&input).unwrap();
    csv.push_str("2013-03-02,431.0\n");
    fs::write(&sat, csv).unwrap();
    let mut args = vec![
        "forecast",
        "--engine",
        engine().to_str().unwrap(),
        "--input",
        sat.to_str().unwrap(),
        "--horizon",
        "2",
        "--calendar",
        "weekdays",
    ];
    let e = totoc_err(&args);
    assert!(e.contains("sat.csv:302: timestamp 2013-03-02 is in a slot the calendar has closed"), "{e}");
    // auto: the Saturday row makes the series continuous (it is not a weekday series), as before
    args.truncate(args.len() - 2);
    let out = totoc_ok(&args);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["calendar"], "continuous");
}
