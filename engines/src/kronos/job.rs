//! What the Kronos engine forecasts for one series: a [`KronosJob`], upstream's `predict` inputs checked and
//! prepared (the candles with volume and amount derived, every row's time features, the horizon's, the sampling
//! controls and `max_context` / `clip`). Every reader ends here: [`KronosJob::new`] takes the fields of a Kronos
//! request ([`JobInput`], the shared request contract's Kronos fields: `columns`, `target`, `timestamps`,
//! `future_timestamps`, `temperature`, `top_k`, `top_p`, `params`) and refuses what cannot run with one error
//! naming the series (`at`), the row or the column, and the fix.
//!
//! The engine's limits apply here too ([`JobLimits`]): a context longer than the rows the engine encodes keeps
//! its most recent rows (or is an error with `strict_context`, as every family's context policy); `max_context`
//! is at most the engine's window; the horizon at most `max_context` (upstream refuses `pred_len > max_context`:
//! the last forecast rows are decoded within one window).

use crate::error::{Error, Result};
use crate::kronos::columns::{prepare_columns, Candles, Column};
#[cfg(test)]
use crate::kronos::columns::{ColumnValues, COLUMNS};
use crate::kronos::normalize::{clip_param, DEFAULT_CLIP};
use crate::kronos::sampler::{SamplingParams, DEFAULT_TEMPERATURE, DEFAULT_TOP_P};
use crate::kronos::stamps::{TimeFeatures, WallClock};
use crate::request::{ContextCut, RequestId, SamplerUsed, DEFAULT_QUANTILES};

/// `KronosPredictor`'s default `max_context` (k:482), used when a request gives none (or the engine's window,
/// when that is smaller).
pub const DEFAULT_MAX_CONTEXT: usize = 512;

/// What the engine holds: the bounds a job is checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    /// The transformer window (the caches' slots): the largest `max_context`.
    pub window: usize,
    /// Rows a series may bring (all are normalised and encoded); longer contexts keep their most recent rows.
    pub context: usize,
    pub horizon: usize,
    pub samples: usize,
}

/// The Kronos fields of one request, as read (the values of each named column, stamps already parsed).
#[derive(Debug, Clone, Default)]
pub struct JobInput<'a> {
    pub id: Option<RequestId>,
    /// The named input columns, each with one value per candle (names: [`COLUMNS`](crate::kronos::columns::COLUMNS)).
    pub columns: Vec<Column<'a>>,
    /// One wall-clock stamp per candle (`None`: the request gave none).
    pub timestamps: Option<&'a [WallClock]>,
    /// The horizon's stamps, `horizon` of them.
    pub future_timestamps: Option<&'a [WallClock]>,
    pub horizon: usize,
    /// 0: one greedy path; N: N sampled paths.
    pub samples: usize,
    pub seed: u64,
    /// `None`: the default levels when sampling, none on the greedy path.
    pub quantiles: Option<Vec<f64>>,
    pub temperature: Option<f64>,
    pub top_k: Option<i64>,
    pub top_p: Option<f64>,
    /// `params.max_context`.
    pub max_context: Option<u64>,
    /// `params.clip`.
    pub clip: Option<f64>,
    pub strict_context: bool,
}

/// One series, ready for the engine.
#[derive(Debug, Clone, PartialEq)]
pub struct KronosJob {
    pub id: Option<RequestId>,
    /// `[6][N]`, upstream's columns, f32.
    pub candles: Candles,
    /// Time features of the N context rows, then of the H future rows.
    pub stamps: Vec<TimeFeatures>,
    pub horizon: usize,
    pub samples: usize,
    pub seed: u64,
    pub sampling: SamplingParams,
    /// The transformer's window for this series (≤ the engine's window).
    pub max_context: usize,
    pub clip: f32,
    pub quantiles: Vec<f64>,
    /// Set when the context was longer than the engine encodes and its most recent rows were kept.
    pub context_cut: Option<ContextCut>,
    /// The sampler settings as the response reports them (the request's values, defaults filled in).
    pub sampler: SamplerUsed,
}

impl KronosJob {
    /// N: the context rows.
    pub fn rows(&self) -> usize {
        self.candles.rows()
    }

    /// Paths the engine runs: `samples`, or the one greedy path.
    pub fn paths(&self) -> usize {
        self.samples.max(1)
    }

    /// Checks and prepares `input` (see the module docs); `at` names the series in errors.
    pub fn new(at: &str, input: JobInput<'_>, limits: &JobLimits) -> Result<KronosJob> {
        let refuse = |message: String| Error::NotSupported { at: at.to_string(), message };
        let mut sampler = sampler_used(&input);
        let JobInput { columns, timestamps, future_timestamps, horizon, samples, .. } = input;
        if horizon == 0 {
            return Err(Error::ZeroHorizon { at: at.to_string() });
        }
        if samples > limits.samples {
            return Err(Error::TooManySamples { at: at.to_string(), samples, limit: limits.samples });
        }
        let sampling =
            SamplingParams::from_request(at, samples, input.temperature, input.top_k, input.top_p)?;
        let max_context = max_context(at, input.max_context, limits.window)?;
        if horizon > max_context {
            return Err(refuse(format!(
                "horizon {horizon} exceeds max_context {max_context}: Kronos decodes the forecast within one window \
                 of max_context rows (upstream refuses pred_len > max_context); ask for at most {max_context} \
                 steps{}",
                if max_context < limits.window {
                    format!(" or raise params.max_context (up to this engine's window, {})", limits.window)
                } else {
                    String::new()
                }
            )));
        }
        if horizon > limits.horizon {
            return Err(Error::Limit {
                at: at.to_string(),
                what: format!("horizon {horizon}"),
                limit: limits.horizon,
            });
        }
        let clip = clip_param(at, input.clip)?;
        sampler.params.insert("max_context".to_string(), max_context as f64);
        let quantiles = quantiles(at, input.quantiles, samples)?;
        let given = columns.first().map_or(0, |c| c.values.len());
        let Some(stamps) = timestamps else {
            return Err(refuse(
                "no `timestamps`: Kronos reads every candle's wall-clock time (minute, hour, weekday, day, month); \
                 give one stamp per candle, e.g. \"timestamps\": [\"2024-03-04T09:30:00\", ...]"
                    .into(),
            ));
        };
        if stamps.len() != given {
            return Err(refuse(format!(
                "`timestamps` has {} stamps for {given} candles; give one stamp per candle",
                stamps.len()
            )));
        }
        let Some(future) = future_timestamps else {
            return Err(refuse(format!(
                "no `future_timestamps`: the {horizon} forecast rows need their stamps (the model reads each input \
                 row's time); give {horizon} stamps, or forecast through a table reader that continues the \
                 series' calendar"
            )));
        };
        if future.len() != horizon {
            return Err(refuse(format!(
                "`future_timestamps` has {} stamps for horizon {horizon}; give exactly one per forecast step",
                future.len()
            )));
        }
        check_order(at, stamps, future)?;
        // the context policy: the most recent rows the engine encodes, or an error
        let (keep_from, context_cut) = match given > limits.context {
            false => (0, None),
            true if input.strict_context => {
                return Err(Error::ContextTooLong { at: at.to_string(), given, limit: limits.context })
            }
            true => (given - limits.context, Some(ContextCut { given, used: limits.context })),
        };
        // every row checked (its row number as given), then the most recent kept
        let mut candles = prepare_columns(at, &columns)?;
        candles.keep_last(given - keep_from);
        let stamps = stamps[keep_from..].iter().chain(future).map(WallClock::features).collect();
        Ok(KronosJob {
            id: input.id,
            candles,
            stamps,
            horizon,
            samples,
            seed: input.seed,
            sampling,
            max_context,
            clip,
            quantiles,
            context_cut,
            sampler,
        })
    }
}

/// The sampler settings of a checked `input` as its response reports them: the values given, else upstream
/// `predict`'s defaults (T 1, top_k 0, top_p 0.9, clip 5); the greedy path is top_k 1 at T 1. `max_context`
/// is added once it is resolved against the engine's window.
fn sampler_used(input: &JobInput<'_>) -> SamplerUsed {
    let greedy = input.samples == 0;
    SamplerUsed {
        samples: input.samples,
        seed: input.seed,
        temperature: input.temperature.unwrap_or(DEFAULT_TEMPERATURE),
        top_k: if greedy { 1 } else { input.top_k.map_or(0, |k| k.max(0) as u64) },
        top_p: input.top_p.unwrap_or(DEFAULT_TOP_P),
        params: [("clip".to_string(), input.clip.unwrap_or(DEFAULT_CLIP))].into(),
    }
}

/// `params.max_context`: default [`DEFAULT_MAX_CONTEXT`] (or the window when smaller), 1 to the window.
fn max_context(at: &str, asked: Option<u64>, window: usize) -> Result<usize> {
    match asked {
        None => Ok(DEFAULT_MAX_CONTEXT.min(window)),
        Some(m) if m >= 1 && m <= window as u64 => Ok(m as usize),
        Some(m) => Err(Error::NotSupported {
            at: at.to_string(),
            message: format!(
                "`params.max_context` is {m}; it must be 1 to this engine's window, {window} (the transformer sees \
                 the last max_context rows; upstream's default is {DEFAULT_MAX_CONTEXT})"
            ),
        }),
    }
}

/// The quantile levels: as given (each in (0, 1)), the defaults when sampling, none on the greedy path; levels
/// without sample paths are an error.
fn quantiles(at: &str, given: Option<Vec<f64>>, samples: usize) -> Result<Vec<f64>> {
    let q = match (given, samples) {
        (Some(q), 0) if !q.is_empty() => return Err(Error::QuantilesWithoutSamples { at: at.to_string() }),
        (Some(q), _) => q,
        (None, 0) => Vec::new(),
        (None, _) => DEFAULT_QUANTILES.to_vec(),
    };
    if let Some(&bad) = q.iter().find(|&&q| !(q > 0.0 && q < 1.0)) {
        return Err(Error::QuantileRange { at: at.to_string(), q: bad });
    }
    Ok(q)
}

/// Context stamps strictly increasing (a repeated stamp is a duplicate candle), then the future stamps after the
/// last one, strictly increasing.
fn check_order(at: &str, stamps: &[WallClock], future: &[WallClock]) -> Result<()> {
    let refuse = |message: String| Error::NotSupported { at: at.to_string(), message };
    for (what, list, offset) in [("timestamps", stamps, 0), ("future_timestamps", future, 0)] {
        for (i, w) in list.windows(2).enumerate() {
            if w[1] <= w[0] {
                let how = if w[1] == w[0] { "repeats" } else { "is before" };
                return Err(refuse(format!(
                    "`{what}` row {} ({}) {how} row {} ({}): give the candles in time order, each stamp once",
                    i + 1 + offset,
                    show(&w[1]),
                    i + offset,
                    show(&w[0])
                )));
            }
        }
    }
    if let (Some(last), Some(first)) = (stamps.last(), future.first()) {
        if first <= last {
            return Err(refuse(format!(
                "`future_timestamps` row 0 ({}) is not after the last context stamp ({}); the forecast continues \
                 the series",
                show(first),
                show(last)
            )));
        }
    }
    Ok(())
}

fn show(w: &WallClock) -> String {
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        w.year(),
        w.month(),
        w.day(),
        w.hour(),
        w.minute(),
        w.second()
    )
}

/// The columns of a request's `target` rows named by `columns` (absent: the first `target.len()` of
/// [`COLUMNS`], upstream's order): the tests' reader (requests are read by the request seam and
/// `KronosEngine::job_of`).
#[cfg(test)]
pub fn named_columns<'a>(
    at: &str,
    columns: Option<&'a [String]>,
    target: &'a [Vec<Option<f64>>],
) -> Result<Vec<Column<'a>>> {
    let names: Vec<&str> = match columns {
        Some(c) => c.iter().map(String::as_str).collect(),
        None if target.len() <= COLUMNS.len() => COLUMNS[..target.len()].to_vec(),
        None => {
            return Err(Error::NotSupported {
                at: at.to_string(),
                message: format!(
                    "`target` has {} rows but a Kronos series has at most {} columns ({}); name them in `columns`",
                    target.len(),
                    COLUMNS.len(),
                    COLUMNS.join(", ")
                ),
            })
        }
    };
    if names.len() != target.len() {
        return Err(Error::NotSupported {
            at: at.to_string(),
            message: format!(
                "`columns` names {} columns but `target` has {} rows; give one name per row of `target`",
                names.len(),
                target.len()
            ),
        });
    }
    Ok(names
        .into_iter()
        .zip(target)
        .map(|(name, v)| Column { name, values: ColumnValues::NullableF64(v) })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: JobLimits = JobLimits { window: 64, context: 100, horizon: 32, samples: 8 };

    fn stamps(n: usize, day0: u32) -> Vec<WallClock> {
        (0..n as u32).map(|i| WallClock::new(2024, 3, day0, 9 + i / 60, i % 60, 0, 0).unwrap()).collect()
    }

    fn input<'a>(cols: &'a [Vec<Option<f64>>], ts: &'a [WallClock], fut: &'a [WallClock]) -> JobInput<'a> {
        JobInput {
            columns: named_columns("s", None, cols).unwrap(),
            timestamps: Some(ts),
            future_timestamps: Some(fut),
            horizon: fut.len(),
            ..JobInput::default()
        }
    }

    fn ohlc(n: usize) -> Vec<Vec<Option<f64>>> {
        (0..4).map(|c| (0..n).map(|i| Some(10.0 + c as f64 + i as f64 * 0.1)).collect()).collect()
    }

    #[test]
    fn a_valid_series_becomes_a_job_with_its_stamps() {
        let (cols, ts, fut) = (ohlc(20), stamps(20, 4), stamps(5, 5));
        let job = KronosJob::new("s", input(&cols, &ts, &fut), &LIMITS).unwrap();
        assert_eq!((job.rows(), job.horizon, job.paths(), job.max_context), (20, 5, 1, 64));
        assert_eq!(job.stamps.len(), 25);
        assert_eq!(job.stamps[21].day, 5);
        assert_eq!(job.sampling, SamplingParams::greedy());
        assert!(job.quantiles.is_empty() && job.context_cut.is_none());
        // no volume: volume and amount are 0
        assert!(job.candles.column(4).iter().all(|&v| v == 0.0));
    }

    #[test]
    fn long_contexts_keep_their_last_rows_or_fail_when_strict() {
        let (cols, ts, fut) = (ohlc(130), stamps(130, 4), stamps(4, 5));
        let job = KronosJob::new("s", input(&cols, &ts, &fut), &LIMITS).unwrap();
        assert_eq!(job.context_cut, Some(ContextCut { given: 130, used: 100 }));
        assert_eq!(job.candles.column(0)[0], (10.0 + 30.0 * 0.1) as f32);
        let e = KronosJob::new("s", JobInput { strict_context: true, ..input(&cols, &ts, &fut) }, &LIMITS);
        assert!(e.unwrap_err().to_string().contains("130 points but this engine holds 100"));
    }

    #[test]
    fn bad_input_names_the_series_row_or_column_and_the_fix() {
        let (cols, ts, fut) = (ohlc(10), stamps(10, 4), stamps(3, 5));
        let err = |i: JobInput| KronosJob::new("series AAPL", i, &LIMITS).unwrap_err().to_string();
        let e = err(JobInput { timestamps: None, ..input(&cols, &ts, &fut) });
        assert!(e.starts_with("series AAPL: no `timestamps`"), "{e}");
        let mut dup = ts.clone();
        dup[6] = dup[5];
        let e = err(input(&cols, &dup, &fut));
        assert!(e.contains("`timestamps` row 6") && e.contains("repeats row 5"), "{e}");
        let e = err(input(&cols, &ts, &stamps(3, 3)));
        assert!(e.contains("`future_timestamps` row 0") && e.contains("not after"), "{e}");
        let e = err(JobInput { horizon: 4, ..input(&cols, &ts, &fut) });
        assert!(e.contains("3 stamps for horizon 4"), "{e}");
        let e = err(JobInput { max_context: Some(65), ..input(&cols, &ts, &fut) });
        assert!(e.contains("`params.max_context` is 65") && e.contains("window, 64"), "{e}");
        let long_fut = stamps(40, 5);
        let e = err(input(&cols, &ts, &long_fut));
        assert!(e.contains("horizon 40 exceeds max_context") || e.contains("horizon 40"), "{e}");
        let e = err(JobInput { max_context: Some(2), ..input(&cols, &ts, &fut) });
        assert!(
            e.contains("horizon 3 exceeds max_context 2") && e.contains("raise params.max_context"),
            "{e}"
        );
        let e = err(JobInput { temperature: Some(0.5), ..input(&cols, &ts, &fut) });
        assert!(e.contains("`temperature` given with `samples: 0`"), "{e}");
        let e = err(JobInput { samples: 2, top_p: Some(1.5), ..input(&cols, &ts, &fut) });
        assert!(e.contains("`top_p` is 1.5"), "{e}");
        let e = err(JobInput { samples: 2, top_k: Some(-1), ..input(&cols, &ts, &fut) });
        assert!(e.contains("`top_k` is -1"), "{e}");
        let e = err(JobInput { samples: 2, temperature: Some(0.0), ..input(&cols, &ts, &fut) });
        assert!(e.contains("`temperature` is 0"), "{e}");
        let e = err(JobInput { samples: 9, ..input(&cols, &ts, &fut) });
        assert!(e.contains("9 samples exceed"), "{e}");
        let e = err(JobInput { quantiles: Some(vec![0.5]), ..input(&cols, &ts, &fut) });
        assert!(e.contains("quantiles need sampled paths"), "{e}");
        let e = err(JobInput { clip: Some(-1.0), ..input(&cols, &ts, &fut) });
        assert!(e.contains("`params.clip` is -1"), "{e}");
        // a missing price column, NaN and inf name the column and row (columns.rs)
        let three = &cols[..3];
        let e = err(input(three, &ts, &fut));
        assert!(e.contains("`close` is missing"), "{e}");
        let mut nan = cols.clone();
        nan[1][4] = Some(f64::NAN);
        let e = err(input(&nan, &ts, &fut));
        assert!(e.contains("high") && e.contains("row 4"), "{e}");
        let mut inf = cols.clone();
        inf[2][7] = Some(f64::INFINITY);
        let e = err(input(&inf, &ts, &fut));
        assert!(e.contains("low") && e.contains("row 7"), "{e}");
        let empty: Vec<Vec<Option<f64>>> = vec![Vec::new(); 4];
        let e = err(input(&empty, &[], &fut));
        assert!(e.contains("the context is empty"), "{e}");
    }

    #[test]
    fn columns_are_named_or_take_upstreams_order() {
        let t: Vec<Vec<Option<f64>>> = vec![vec![Some(1.0)]; 7];
        assert!(named_columns("s", None, &t).unwrap_err().to_string().contains("at most 6 columns"));
        let names = vec!["close".to_string()];
        assert!(named_columns("s", Some(&names), &t[..2])
            .unwrap_err()
            .to_string()
            .contains("one name per row"));
        let c = named_columns("s", None, &t[..5]).unwrap();
        assert_eq!(c.iter().map(|c| c.name).collect::<Vec<_>>(), ["open", "high", "low", "close", "volume"]);
    }
}
