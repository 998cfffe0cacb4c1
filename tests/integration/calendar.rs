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

/// A sample data file of backtesting.py 0.6.6 (`backtesting/test/NAME`; AGPL-3.0, so read from the package the
/// data venv installs, hash-pinned by `tests/data/requirements-nodeps.txt`, and never copied here), or `None` after
/// a skip.
pub(crate) fn backtesting_data(name: &str) -> Option<String> {
    let python = crate::venv::python(&crate::venv::DATA)?;
    // The package's folder without importing it (its dependencies are not installed).
    let out = std::process::Command::new(&python)
        .args([
            "-c",
            "import importlib.util as u; print(u.find_spec('backtesting').submodule_search_locations[0])",
        ])
        .output()
        .expect("run the data venv's python");
    if !out.status.success() {
        crate::venv::skip(&format!(
            "backtesting 0.6.6 is not installed in the data venv ({python}): run tests/data/setup_venv.sh ({})",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
        return None;
    }
    let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    Some(fs::read_to_string(dir.join("test").join(name)).unwrap())
}

/// backtesting.py's `EURUSD.csv` (`,Open,High,Low,Close,Volume`; naive stamps that are UTC: the week closes after
/// the 20:00 bar in summer and the 21:00 bar in winter, Friday 16:00 New York time either way) as `ds,y` rows of
/// the close, each stamp followed by `suffix`.
fn eurusd(suffix: &str) -> Option<String> {
    let text = backtesting_data("EURUSD.csv")?;
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(",Open,High,Low,Close,Volume"));
    let rows: Vec<String> = lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            format!("{}{suffix},{}", cells[0].replace(' ', "T"), cells[4])
        })
        .collect();
    assert_eq!(rows.len(), 5_000);
    assert!(rows[0].starts_with("2017-04-19T09:00:00") && rows[4_999].starts_with("2018-02-07T15:00:00"));
    Some(format!("ds,y\n{}\n", rows.join("\n")))
}

/// Whether an instant is a bar of the FX week: Sunday 17:00 to Friday 16:00 New York time.
fn in_fx_week(t: Timestamp) -> bool {
    let local = TimeZone::get("America/New_York").unwrap().to_datetime(t);
    matches!((local.weekday().to_monday_zero_offset(), local.hour()), (6, 17..) | (0..=3, _) | (4, ..=16))
}

#[test]
fn real_hourly_fx_bars_follow_the_fx_week_in_new_york_time() {
    // 5,000 hourly bars from Wednesday 19 April 2017 to Wednesday 7 February 2018: across the US change of
    // 5 November 2017, with the Christmas and New Year closures (73 hours each) and two bars after a Friday close.
    let tmp = tempfile::tempdir().unwrap();
    for (suffix, style) in [("Z", "UTC"), ("", "naive")] {
        let Some(rows) = eurusd(suffix) else { return };
        let input = tmp.path().join(format!("eurusd_{style}.csv"));
        fs::write(&input, rows).unwrap();
        let (out, err) = forecast(&input, &["--horizon", "72"]);
        let v: Value = serde_json::from_str(&out).unwrap();
        let week = "Sun 17:00 – Fri 17:00 America/New_York (zone inferred), 1 hour";
        assert_eq!(v["calendar"], week, "{style}");
        assert!(err.contains(&format!("calendar: {week}\n")), "{err}");
        // The closures are missing points (24 bars each); the two extra bars are points of their own.
        assert_eq!(points(&err), 5_000 + 48, "{style}");
        let steps = stamps(&v);
        let instants: Vec<Timestamp> =
            steps.iter().map(|s| format!("{}Z", s.trim_end_matches('Z')).parse().unwrap()).collect();
        assert!(instants.iter().all(|&t| in_fx_week(t)), "a step in a closed hour: {steps:?}");
        // Friday 9 February closes after 16:00 EST (21:00Z); the next step is Sunday 17:00 EST (22:00Z).
        assert_eq!(steps[53], format!("2018-02-09T21:00:00{suffix}"), "{style}");
        assert_eq!(steps[54], format!("2018-02-11T22:00:00{suffix}"), "{style}");
    }
    // --timezone America/New_York names the zone: the same week, not marked as inferred.
    let input = tmp.path().join("eurusd_UTC.csv");
    let (out, _) = forecast(&input, &["--horizon", "2", "--timezone", "America/New_York"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["calendar"], "Sun 17:00 – Fri 17:00 America/New_York, 1 hour");
    // --calendar continuous keeps the fixed hourly grid (the weekend hours are missing points and steps).
    let (out, _) = forecast(&input, &["--horizon", "72", "--calendar", "continuous"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(stamps(&v).iter().any(|s| !in_fx_week(s.parse().unwrap())));
}

#[test]
fn real_daily_stock_prices_with_exchange_holidays_follow_weekdays() {
    // GOOG daily, 19 August 2004 to Friday 1 March 2013: trading days only, exchange holidays absent.
    let Some(text) = backtesting_data("GOOG.csv") else { return };
    let rows: String = text
        .lines()
        .skip(1)
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            format!("{},{}\n", c[0], c[4])
        })
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("goog.csv");
    fs::write(&input, format!("ds,y\n{rows}")).unwrap();
    let (out, err) = forecast(&input, &["--horizon", "6"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["calendar"], "weekdays Mon–Fri");
    assert!(err.contains("calendar: weekdays Mon–Fri\n"), "{err}");
    assert_eq!(
        stamps(&v),
        ["2013-03-04", "2013-03-05", "2013-03-06", "2013-03-07", "2013-03-08", "2013-03-11"]
    );
    // Every weekday from the first to the last close is a grid point: the holidays are the missing ones.
    let csv =
        format!("ds\n{}", rows.lines().map(|l| l.split(',').next().unwrap()).collect::<Vec<_>>().join("\n"));
    assert_eq!(points(&err), rows.lines().count() + absent_weekdays(&csv).len());
}
