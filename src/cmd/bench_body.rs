//! The `POST /v1/forecast` body `totoc bench serve` sends, built from what the engine's family reads (its
//! `Capabilities`), so that one bench serves every family:
//! * unnamed variates (no `columns`): one variate of [`bench_series`], `horizon`, `samples`, `seed` — the body the
//!   bench has always sent, byte for byte;
//! * named columns: every column the family lists, as rows of one seeded candle walk (open, high, low, close,
//!   volume, amount: high ≥ max(open, close), low ≤ min(open, close), volume > 0, amount = volume × the mean
//!   price), with `columns` naming them;
//! * a family that reads each point's wall clock also gets `timestamps` (one per point) and `future_timestamps`
//!   (one per step), ISO 8601 wall clocks a day or an hour apart (`--frequency`), so the server does no calendar
//!   inference the engine-alone timing would not.
//!
//! A column name the candle walk does not know is refused naming it (a new family's columns need a generator here).

use anyhow::{bail, Context};
use bytes::Bytes;
use engines::engine::Engine;
use engines::request::{ForecastRequest, Overrides};
use exporter::registry::family::Capabilities;
use serde_json::json;

pub use crate::cli::Frequency;
use crate::cmd::bench_support::bench_series;

/// The seconds between two of the bench series' timestamps.
fn seconds(f: Frequency) -> i64 {
    match f {
        Frequency::Daily => 86_400,
        Frequency::Hourly => 3_600,
    }
}

/// What the benchmark request asks for.
#[derive(Debug, Clone, Copy)]
pub struct BodySpec {
    pub context: usize,
    pub horizon: usize,
    pub samples: usize,
    /// `None`: daily for a family that reads timestamps; given for another family: refused.
    pub frequency: Option<Frequency>,
}

/// The seed every bench request carries.
const SEED: u64 = 1;
/// The first timestamp (seconds since 1970, read as a wall clock): 2020-01-01T00:00:00.
const START: i64 = 1_577_836_800;

/// The request body for an engine of `caps`'s family (see the module docs).
pub fn request_body(caps: &Capabilities, spec: &BodySpec) -> anyhow::Result<Bytes> {
    if spec.frequency.is_some() && !caps.reads_timestamps {
        bail!(
            "--frequency: {} engines do not read timestamps; leave --frequency out for this engine",
            caps.title
        );
    }
    if spec.samples > 0 && !caps.samples {
        bail!(
            "--samples {}: {} engines draw no sample paths (they predict quantiles directly); leave --samples out",
            spec.samples,
            caps.title
        );
    }
    let mut body = match caps.columns {
        None => json!({
            "target": [bench_series(spec.context, 1).swap_remove(0)],
            "horizon": spec.horizon, "samples": spec.samples, "seed": SEED,
        }),
        Some(cols) => {
            let names: Vec<&str> = cols.iter().map(|c| c.name).collect();
            let rows = candle_rows(&names, spec.context)?;
            json!({
                "columns": names, "target": rows,
                "horizon": spec.horizon, "samples": spec.samples, "seed": SEED,
            })
        }
    };
    if !caps.samples {
        // a family without sample paths refuses `samples` and `seed` by name (its answer: the quantile knots)
        let fields = body.as_object_mut().expect("an object");
        fields.remove("samples");
        fields.remove("seed");
    }
    if caps.reads_timestamps {
        let step = seconds(spec.frequency.unwrap_or(Frequency::Daily));
        let stamps = wall_clocks(0, spec.context, step)?;
        let future = wall_clocks(spec.context, spec.horizon, step)?;
        body["timestamps"] = json!(stamps);
        body["future_timestamps"] = json!(future);
    }
    Ok(Bytes::from(serde_json::to_vec(&body)?))
}

/// One row per name, `n` points each, of a seeded random walk of candles.
fn candle_rows(names: &[&str], n: usize) -> anyhow::Result<Vec<Vec<f32>>> {
    let candles = candle_walk(n);
    names
        .iter()
        .map(|&name| {
            let pick: fn(&Candle) -> f64 = match name {
                "open" => |c| c.open,
                "high" => |c| c.high,
                "low" => |c| c.low,
                "close" => |c| c.close,
                "volume" => |c| c.volume,
                "amount" => |c| c.volume * (c.open + c.high + c.low + c.close) / 4.0,
                other => bail!(
                    "totoc bench serve cannot synthesise the input column {other:?} (it knows open, high, low, \
                     close, volume, amount); add a generator for it in src/cmd/bench_body.rs"
                ),
            };
            // f64 → f32 rounding is monotonic, so high ≥ max(open, close) and low ≤ min(open, close) still hold
            Ok(candles.iter().map(|c| pick(c) as f32).collect())
        })
        .collect()
}

struct Candle {
    open: f64,
    high: f64,
    low: f64,
    close: f64,
    volume: f64,
}

/// `n` candles: each opens at the previous close, moves by up to ±1%, its wicks reach up to 0.5% beyond the body,
/// and its volume is in [1000, 2000). xorshift64 from a fixed state, so the same bytes every run.
fn candle_walk(n: usize) -> Vec<Candle> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut price = 100.0f64;
    (0..n)
        .map(|_| {
            let open = price;
            let close = open * (1.0 + 0.02 * (uniform() - 0.5));
            let high = open.max(close) * (1.0 + 0.005 * uniform());
            let low = open.min(close) * (1.0 - 0.005 * uniform());
            let volume = 1000.0 * (1.0 + uniform());
            price = close;
            Candle { open, high, low, close, volume }
        })
        .collect()
}

/// `count` ISO 8601 wall clocks `step` seconds apart, the first `first` steps after [`START`].
fn wall_clocks(first: usize, count: usize, step: i64) -> anyhow::Result<Vec<String>> {
    (first..first + count)
        .map(|i| {
            let s = i64::try_from(i).ok().and_then(|i| i.checked_mul(step)?.checked_add(START));
            let t =
                s.and_then(|s| jiff::Timestamp::from_second(s).ok()).context("bench timestamps overflow")?;
            Ok(t.strftime("%Y-%m-%dT%H:%M:%S").to_string())
        })
        .collect()
}

/// The one request of `body`, read as `POST /v1/forecast` reads it.
pub fn decode(engine: &Engine, body: &[u8]) -> anyhow::Result<ForecastRequest> {
    let limits = engine.info().request_limits();
    let opts = tables::ReadOptions::default();
    let at = "benchmark request";
    let bounds = tables::json::Bounds::NONE;
    let mut data =
        tables::parse_json(body, tables::Format::Json, at, &opts, &Overrides::default(), &limits, &bounds)?;
    match data.series.len() {
        1 => Ok(data.series.swap_remove(0).request),
        n => bail!("the benchmark body holds {n} requests, not 1"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use exporter::registry::family::Family;
    use serde_json::Value;

    fn spec(context: usize, horizon: usize, frequency: Option<Frequency>) -> BodySpec {
        BodySpec { context, horizon, samples: 0, frequency }
    }

    fn families(pred: impl Fn(&Capabilities) -> bool) -> Vec<&'static Capabilities> {
        Family::ALL.iter().map(|f| f.capabilities()).filter(|c| pred(c)).collect()
    }

    #[test]
    fn a_family_without_sample_paths_gets_neither_samples_nor_a_seed() {
        let quantiles = families(|c| !c.samples);
        assert!(!quantiles.is_empty());
        for caps in quantiles {
            let body: Value =
                serde_json::from_slice(&request_body(caps, &spec(512, 64, None)).unwrap()).unwrap();
            let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
            assert!(!keys.iter().any(|k| *k == "samples" || *k == "seed"), "{}: {keys:?}", caps.name);
            assert_eq!(body["horizon"], 64);
            let e =
                request_body(caps, &BodySpec { samples: 4, ..spec(512, 64, None) }).unwrap_err().to_string();
            assert!(e.contains("--samples 4") && e.contains("draw no sample paths"), "{e}");
        }
    }

    #[test]
    fn unnamed_variates_get_the_body_the_bench_always_sent() {
        let unnamed = families(|c| c.columns.is_none() && !c.reads_timestamps && c.samples);
        assert!(!unnamed.is_empty());
        for caps in unnamed {
            for samples in [0, 16] {
                let s = BodySpec { samples, ..spec(512, 336, None) };
                // the bench's body before it read the family's capabilities, built as it was built
                let target = bench_series(512, 1);
                let old = serde_json::to_vec(&json!({
                    "target": [target[0]], "horizon": 336, "samples": samples, "seed": 1u64,
                }))
                .unwrap();
                assert_eq!(request_body(caps, &s).unwrap(), Bytes::from(old), "{}", caps.name);
            }
        }
    }

    #[test]
    fn named_columns_get_consistent_candles_and_wall_clocks() {
        let named = families(|c| c.columns.is_some() && c.reads_timestamps);
        assert!(!named.is_empty());
        for caps in named {
            let body: Value =
                serde_json::from_slice(&request_body(caps, &spec(392, 120, None)).unwrap()).unwrap();
            let names: Vec<&str> = caps.columns.unwrap().iter().map(|c| c.name).collect();
            assert_eq!(body["columns"], json!(names));
            let rows: Vec<Vec<f64>> = serde_json::from_value(body["target"].clone()).unwrap();
            assert_eq!(rows.len(), names.len());
            let col = |n: &str| &rows[names.iter().position(|&x| x == n).unwrap()];
            let (o, h, l, c, v) = (col("open"), col("high"), col("low"), col("close"), col("volume"));
            for t in 0..392 {
                assert!(h[t] >= o[t].max(c[t]) && l[t] <= o[t].min(c[t]), "{}: candle {t}", caps.name);
                assert!(l[t] > 0.0 && v[t] > 0.0);
            }
            // a walk: each candle opens at the previous close (to f32), and it moves
            assert!((1..392).all(|t| o[t] == c[t - 1]));
            assert!(c.iter().any(|&x| (x - c[0]).abs() > 1.0));
            let stamps = body["timestamps"].as_array().unwrap();
            let future = body["future_timestamps"].as_array().unwrap();
            assert_eq!((stamps.len(), future.len()), (392, 120));
            assert_eq!(stamps[0], "2020-01-01T00:00:00");
            assert_eq!(stamps[1], "2020-01-02T00:00:00");
            assert_eq!(future[0], "2021-01-27T00:00:00"); // day 392 after 2020-01-01 (2020 has 366 days)
            assert_eq!(
                (body["horizon"].clone(), body["samples"].clone(), body["seed"].clone()),
                (json!(120), json!(0), json!(1))
            );
            // seeded: the same bytes twice
            assert_eq!(
                request_body(caps, &spec(392, 120, None)).unwrap(),
                request_body(caps, &spec(392, 120, None)).unwrap()
            );
            let hourly: Value =
                serde_json::from_slice(&request_body(caps, &spec(30, 5, Some(Frequency::Hourly))).unwrap())
                    .unwrap();
            assert_eq!(hourly["timestamps"][25], "2020-01-02T01:00:00");
            assert_eq!(hourly["future_timestamps"][0], "2020-01-02T06:00:00");
        }
    }

    #[test]
    fn frequency_for_a_family_without_timestamps_is_refused() {
        for caps in families(|c| !c.reads_timestamps) {
            let e = request_body(caps, &spec(8, 2, Some(Frequency::Hourly))).unwrap_err().to_string();
            assert!(e.contains("--frequency") && e.contains("do not read timestamps"), "{e}");
        }
    }

    #[test]
    fn an_unknown_column_is_refused_by_name() {
        let e = candle_rows(&["open", "spread"], 4).unwrap_err().to_string();
        assert!(e.contains("\"spread\"") && e.contains("bench_body.rs"), "{e}");
    }
}
