//! Shared parsing follows `Capabilities`: a toy family that reads named columns, wall clocks, sampling controls
//! and parameters, against the shape of a family that takes none of them (and the real families' shapes).

use std::collections::BTreeMap;

use exporter::registry::family::{Capabilities, InputColumn};
use exporter::registry::Family;

use super::*;

/// A family with named columns (two required, two derived when absent), per-point clocks, no missing points,
/// sampling controls and two parameters.
const TOY: Capabilities = Capabilities {
    name: "toy-candles",
    title: "Toy Candles",
    folder: "toy",
    reference: "none",
    config_keys: &["toy_candles"],
    tokenizer_keys: None,
    point_forecast: "mean",
    samples: true,
    quantile_knots: None,
    precisions: &[],
    targets: &["cpu"],
    columns: Some(&[
        InputColumn { name: "open", derived_when_absent: None },
        InputColumn { name: "close", derived_when_absent: None },
        InputColumn { name: "volume", derived_when_absent: Some("0") },
        InputColumn { name: "amount", derived_when_absent: Some("volume × mean(open, close)") },
    ]),
    reads_timestamps: true,
    missing_points: false,
    sampling_controls: true,
    params: &["window", "clip"],
};

fn toy_limits() -> Limits {
    Limits { max_samples: 64, shape: RequestShape::of(&TOY), ..Limits::default() }
}

fn toy(text: &str) -> Result<ForecastRequest> {
    parse_request(text, "r", &Overrides::default(), &toy_limits())
}

fn toy_err(text: &str) -> String {
    toy(text).unwrap_err().to_string()
}

const STAMPS: &str = r#""timestamps": ["2024-01-31T09:30:00", "2024-01-31T09:31:00+05:00", "2024-02-01"],
    "future_timestamps": ["2024-02-02T16:00:00Z", "2024-02-03"]"#;

/// A toy request with `rest` spliced in.
fn with(rest: &str) -> String {
    format!(r#"{{"target": [[1, 2, 3], [1.5, 2.5, 3.5]], "horizon": 2, {STAMPS}{rest}}}"#)
}

#[test]
fn a_family_that_takes_the_fields_gets_them() {
    let r = toy(&with(
        r#", "columns": ["close", "open"], "samples": 4, "temperature": 0.7, "top_p": 0.9,
           "params": {"window": 512, "clip": 5}"#,
    ))
    .unwrap();
    assert_eq!(r.columns, vec!["close", "open"]);
    assert_eq!(r.target[1], vec![Some(1.5), Some(2.5), Some(3.5)]);
    assert_eq!(
        r.timestamps.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["2024-01-31T09:30:00", "2024-01-31T09:31:00", "2024-02-01T00:00:00"]
    );
    assert_eq!(r.future_timestamps[0].hour(), 16);
    assert_eq!(r.sampling, Sampling { temperature: Some(0.7), top_k: None, top_p: Some(0.9) });
    assert_eq!(r.params, BTreeMap::from([("clip".to_string(), 5.0), ("window".to_string(), 512.0)]));
    // volume and amount are absent and derived: the values travel in f64 too, as parsed
    let r = toy(&format!(r#"{{"target": [[0.1, 2, 3], [1, 2, 3]], "horizon": 2, {STAMPS}}}"#)).unwrap();
    assert_eq!(r.target_f64.as_ref().unwrap()[0][0], 0.1f64);
    assert_eq!(r.target[0][0], Some(0.1f32));
    // without `columns`, the rows are the family's columns in their default order
    assert_eq!(r.columns, vec!["open", "close"]);
    // every column given: nothing is derived, no f64 copy
    let four = format!(
        r#"{{"target": [[1, 2, 3], [1, 2, 3], [1, 2, 3], [1, 2, 3]], "horizon": 2, {STAMPS},
            "columns": ["amount", "volume", "close", "open"]}}"#
    );
    let r = toy(&four).unwrap();
    assert!(r.target_f64.is_none());
    assert!(r.sampling.is_empty() && r.params.is_empty());
}

#[test]
fn each_new_field_is_checked_naming_it_and_the_fix() {
    let cases = [
        (r#", "columns": ["Close", "open"]"#, "`columns` names `Close`, which is not a column Toy Candles reads; column names are lowercase: use `close`"),
        (r#", "columns": ["high", "open"]"#, "its columns are open, close (required), volume, amount (optional)"),
        (r#", "columns": ["open", "open"]"#, "`columns` names `open` twice; name each column once"),
        (r#", "columns": ["open", "close", "volume"]"#, "`columns` names 3 columns but `target` has 2 rows; give one name per row"),
        (r#", "columns": ["open", "volume"]"#, "there is no `close` column, which Toy Candles requires"),
        (r#", "samples": 0, "temperature": 0.5"#, "`temperature` given with `samples: 0`, the deterministic forecast (one greedy path); drop it or ask for `samples` ≥ 1"),
        (r#", "top_k": 3, "top_p": 0.5"#, "`top_k`, `top_p` given with `samples: 0`"),
        (r#", "samples": 2, "temperature": 0"#, "`temperature` is 0; it must be a finite number > 0"),
        (r#", "samples": 2, "temperature": -1.5"#, "`temperature` is -1.5; it must be a finite number > 0"),
        (r#", "samples": 2, "top_k": -1"#, "`top_k` is -1; it must be ≥ 0 (0 turns it off"),
        (r#", "samples": 2, "top_p": 0"#, "`top_p` is 0; it must be in (0, 1]"),
        (r#", "samples": 2, "top_p": 1.5"#, "`top_p` is 1.5; it must be in (0, 1] (1 turns nucleus filtering off)"),
        (r#", "params": {"windw": 5}"#, "`params.windw` is not a field Toy Candles takes: its parameters are `window`, `clip`; remove it"),
        (r#", "params": {"window": "big"}"#, "invalid type: string \"big\", expected f64"),
    ];
    for (rest, want) in cases {
        let msg = toy_err(&with(rest));
        assert!(msg.starts_with("r: "), "{msg}");
        assert!(msg.contains(want), "{rest}\n  gave: {msg}\n  want: {want}");
    }
    let three_rows = r#"{"target": [[1], [1], [1], [1], [1]], "horizon": 1}"#;
    assert!(toy_err(three_rows).contains("`target` has 5 rows but Toy Candles reads at most 4 columns (open, close (required), volume, amount (optional)); drop the extra rows"));
    let one_row = format!(r#"{{"target": [[1, 2, 3]], "horizon": 2, {STAMPS}}}"#);
    assert!(toy_err(&one_row).contains("there is no `close` column, which Toy Candles requires"));
    // params from the command line are checked as the request's
    let o = Overrides { params: BTreeMap::from([("clip".into(), f64::INFINITY)]), ..Overrides::default() };
    let e = parse_request(&with(""), "r", &o, &toy_limits()).unwrap_err().to_string();
    assert_eq!(e, "r: `params.clip` is inf; give a finite number");
}

#[test]
fn missing_points_are_refused_naming_the_column_and_row() {
    let e = toy_err(&format!(r#"{{"target": [[1, 2, 3], [1, null, 3]], "horizon": 2, {STAMPS}}}"#));
    assert_eq!(
        e,
        "r: column `close`, row 1 is missing (null or NaN); Toy Candles takes no missing points: give every row a \
         value in every column, or drop the row"
    );
    let all = toy(&format!(r#"{{"target": [[1, 2, 3], [null, null, null]], "horizon": 2, {STAMPS}}}"#));
    assert!(all.unwrap_err().to_string().contains("column `close`, row 0 is missing"));
    assert!(matches!(
        toy(&format!(r#"{{"target": [[1, 2, 3], [1, null, 3]], "horizon": 2, {STAMPS}}}"#)),
        Err(Error::BadField { ref field, .. }) if field == "target"
    ));
}

#[test]
fn an_empty_series_is_named_by_its_column() {
    // the family's default order when `columns` is absent, the request's names when given
    let e = toy_err(r#"{"target": [[], []], "horizon": 2}"#);
    assert_eq!(e, "r: column `open` is empty; every series needs at least one point");
    let e = toy_err(r#"{"target": [[], []], "columns": ["close", "open"], "horizon": 2}"#);
    assert!(e.starts_with("r: column `close` is empty"), "{e}");
    // a family of unnamed variates names the variate
    let e =
        parse_request(r#"{"target": [[]], "horizon": 2}"#, "r", &Overrides::default(), &Limits::default());
    assert_eq!(e.unwrap_err().to_string(), "r: variate 0 is empty; every series needs at least one point");
}

#[test]
fn wall_clocks_are_required_and_counted() {
    let target = r#""target": [[1, 2, 3], [1, 2, 3]], "horizon": 2"#;
    let e = toy_err(&format!("{{{target}}}"));
    assert!(
        e.starts_with("r: `timestamps` is missing; Toy Candles reads the wall-clock time of every point"),
        "{e}"
    );
    let e = toy_err(&format!(r#"{{{target}, "timestamps": ["2024-01-01", "2024-01-02", "2024-01-03"]}}"#));
    assert!(
        e.starts_with("r: `future_timestamps` is missing;") && e.contains("continue its calendar"),
        "{e}"
    );
    let e = toy_err(&format!(
        r#"{{{target}, "timestamps": ["2024-01-01", "2024-01-02"], "future_timestamps": ["2024-01-04", "2024-01-05"]}}"#
    ));
    assert!(e.contains("`timestamps` has 2 entries but `target` has 3 points"), "{e}");
    let e = toy_err(&format!(
        r#"{{{target}, "timestamps": ["2024-01-01", "2024-01-02", "2024-01-03"], "future_timestamps": ["2024-01-04"]}}"#
    ));
    assert!(e.contains("`future_timestamps` has 1 entries but the horizon is 2; give one wall-clock stamp per forecast step"), "{e}");
    let e = toy_err(&format!(
        r#"{{{target}, "timestamps": ["2024-01-01", "2024-01-32", "2024-01-03"], "future_timestamps": ["2024-01-04", "2024-01-05"]}}"#
    ));
    assert!(e.contains("`timestamps` row 1: `2024-01-32` is not a timestamp"), "{e}");
    let e = toy_err(&format!(
        r#"{{{target}, "timestamps": [1, 2, 3], "future_timestamps": ["2024-01-04", "2024-01-05"]}}"#
    ));
    assert!(e.contains("`timestamps` row 0 is the integer 1") && e.contains("--timestamp-unit"), "{e}");
    // a horizon given on the command line counts the future stamps
    let o = Overrides { horizon: Some(3), ..Overrides::default() };
    let e = parse_request(&with(""), "r", &o, &toy_limits()).unwrap_err().to_string();
    assert!(e.contains("`future_timestamps` has 2 entries but the horizon is 3"), "{e}");
}

/// The shape of a family of unnamed variates refuses every new field by name, with the reason its capabilities
/// give; the same request passes for the toy family.
#[test]
fn a_family_without_them_refuses_each_by_name() {
    let plain = Limits::default();
    let no_samples = Limits {
        shape: RequestShape { title: "Knots", samples: false, ..RequestShape::default() },
        quantiles_without_samples: true,
        ..Limits::default()
    };
    let cases = [
        (r#""columns": ["open"]"#, "`columns` is not a field this model takes: its variates are unnamed rows of `target`"),
        (
            r#""future_timestamps": ["2024-01-04"]"#,
            "`future_timestamps` is not a field this model takes: it does not read timestamps",
        ),
        (r#""timestamps": ["2024-01-01"]"#, "`timestamps` is not a field this model takes: it forecasts from the values alone"),
        (
            r#""temperature": 0.7, "samples": 4"#,
            "`temperature` is not a field this model takes: it draws its sample paths from the distribution it predicts",
        ),
        (r#""top_k": 5"#, "`top_k` is not a field this model takes"),
        (r#""top_p": 0.9"#, "`top_p` is not a field this model takes"),
        (r#""params": {"clip": 5}"#, "`params.clip` is not a field this model takes: it takes no parameters; remove it"),
    ];
    for (field, want) in cases {
        let text = format!(r#"{{"target": [[1]], "horizon": 1, {field}}}"#);
        let e = parse_request(&text, "r", &Overrides::default(), &plain).unwrap_err();
        assert!(e.is_request_error());
        assert!(e.to_string().contains(want), "{field}\n  gave: {e}\n  want: {want}");
    }
    let e = parse_request(
        r#"{"target": [[1]], "horizon": 1, "top_p": 0.9}"#,
        "r",
        &Overrides::default(),
        &no_samples,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(e, "r: `top_p` is not a field Knots takes: it draws no sample paths; remove it");
    // from the command line too
    let o = Overrides { temperature: Some(0.5), samples: Some(4), ..Overrides::default() };
    let e = parse_request(r#"{"target": [[1]], "horizon": 1}"#, "r", &o, &plain).unwrap_err().to_string();
    assert!(e.contains("`temperature` is not a field this model takes"), "{e}");
    // a missing point is fine for it
    assert!(
        parse_request(r#"{"target": [[1, null]], "horizon": 1}"#, "r", &Overrides::default(), &plain).is_ok()
    );
}

/// The families' own shapes: today's all take unnamed variates with missing points and nothing new, and refuse
/// the new fields naming themselves; a family that samples and one that does not give their reasons.
#[test]
fn the_families_shapes_come_from_their_capabilities() {
    for f in Family::ALL {
        let c = f.capabilities();
        let shape = RequestShape::of(c);
        assert_eq!(
            (shape.columns.is_some(), shape.reads_timestamps, shape.missing_points, shape.sampling_controls),
            (c.columns.is_some(), c.reads_timestamps, c.missing_points, c.sampling_controls)
        );
        if c.sampling_controls {
            continue;
        }
        let limits = Limits { shape, ..Limits::default() };
        let text = r#"{"target": [[1, 2]], "horizon": 1, "samples": 2, "temperature": 1.0}"#;
        let e = parse_request(text, "r", &Overrides::default(), &limits).unwrap_err().to_string();
        let why = if c.samples { "it draws its sample paths" } else { "it draws no sample paths" };
        assert!(e.starts_with(&format!("r: `temperature` is not a field {} takes: {why}", c.title)), "{e}");
    }
}
