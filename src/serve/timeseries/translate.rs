//! KServe's inputs as `/v1/forecast` requests: one JSON line per input, read back by the `/v1` path's own reader
//! ([`super::super::routes::decode_requests`]), so a series gives the same requests (timestamps, calendar,
//! checks, errors) and the same numbers on both routes by construction.
//!
//! An input becomes `{"id": name, "target": [variate][time], "horizon": ..., "timestamps": [...], ...}`: its
//! `series` transposed (KServe writes a multivariate series row by row, `[time][variate]`), `options`' fields
//! (`horizon`, `quantiles`, and the extra `samples`, `seed`, `temperature`, `top_k`, `top_p`, `params`,
//! `strict_context`) on every line, and its own extra fields as they are. Its `timestamps` are its extra field
//! `timestamps` when given, else `start_timestamp` continued at its `frequency` (one per row, as KServe's
//! `FREQUENCY_MAP` steps: calendar months counted from the start's day). The text is held from the request's
//! bytes budget as it is written.

use std::io::Write;

use serde::ser::{self, SerializeSeq, Serializer};
use serde::Serialize;
use tables::axis::TimeAxis;
use tables::timestamps::{parse_text, Freq, MonthAnchor, Stamp};
use tables::ReadOptions;

use super::super::error::{clip, ServeError};
use super::super::hold::{Part, Ticket};
use super::wire::{Frequency, Input, Observed, Options, Request, SeriesType};

/// How much more text is written between two holds of it.
const HOLD_EVERY: u64 = 64 * 1024;

/// Stamps continued per walk of the calendar (what one walk builds at once).
const STAMPS_PER_WALK: usize = 1024;

/// One input as the answer names it.
pub struct Meta {
    pub name: String,
    pub kind: SeriesType,
    pub frequency: Frequency,
}

/// The inputs as `/v1/forecast` JSON Lines, and the reader's options for them.
pub struct Translated {
    pub lines: Vec<u8>,
    pub inputs: Vec<Meta>,
    pub opts: ReadOptions,
}

/// Translates `req` (see the module docs); `wire` is what the body holds already (the text is held on top).
pub fn to_lines(req: Request, ticket: &Ticket, wire: u64) -> Result<Translated, ServeError> {
    let opts = ReadOptions { freq: common_step(&req.inputs), ..ReadOptions::default() };
    let mut out = Held { buf: Vec::new(), ticket, wire, held: 0, refusal: None };
    let mut inputs = Vec::with_capacity(req.inputs.len());
    for (i, input) in req.inputs.iter().enumerate() {
        ticket.check_here()?;
        let at = format!("inputs[{i}] (`{}`)", clip(&input.name));
        let line = line(input, &req.options, &at, &opts)?;
        let written = serde_json::to_writer(&mut out, &line)
            .map_err(|e| e.to_string())
            .and_then(|()| out.write_all(b"\n").map_err(|e| e.to_string()));
        if let Err(e) = written {
            return Err(out.refusal.take().unwrap_or_else(|| ServeError::bad_request(format!("{at}: {e}"))));
        }
        inputs.push(Meta { name: input.name.clone(), kind: input.kind, frequency: input.frequency });
    }
    out.hold()?;
    Ok(Translated { lines: out.buf, inputs, opts })
}

/// The step every input shares, forced on the reader as `--freq` is (so that a series of one row is still placed
/// on its grid), when every input's stamps are continued from its `start_timestamp`. `None` when the steps differ
/// or an input gives its own `timestamps`: those are read as `/v1/forecast` reads them (step inferred, session
/// calendar detected), so that both routes place them alike.
fn common_step(inputs: &[Input]) -> Option<Freq> {
    let first = inputs.first()?.frequency.step;
    inputs.iter().all(|i| i.frequency.step == first && i.timestamps.is_none()).then_some(first)
}

/// The `/v1/forecast` request of one input, after the checks KServe's schema leaves to the model.
fn line<'a>(
    input: &'a Input,
    options: &'a Options,
    at: &str,
    opts: &ReadOptions,
) -> Result<Line<'a>, ServeError> {
    let obs = &input.series;
    match (input.kind, obs.width) {
        (SeriesType::Univariate, Some(w)) => {
            return Err(ServeError::bad_request(format!(
            "{at}: `type` is univariate_time_series but `series` holds rows of {w} values; send a list of \
                 numbers, or say multivariate_time_series"
        )))
        }
        (SeriesType::Multivariate, None) if obs.rows > 0 => {
            return Err(ServeError::bad_request(format!(
                "{at}: `type` is multivariate_time_series but `series` holds plain numbers; send one row of \
                 values per time step ([time][variate]), or say univariate_time_series"
            )))
        }
        _ => {}
    }
    let timestamps = match (&input.timestamps, &input.start_timestamp) {
        (Some(given), start) => {
            check_start(given, start.as_deref(), at, opts)?;
            Stamps::Given(given)
        }
        (None, Some(start)) => {
            let first = parse_text(start, opts.timestamp_unit)
                .map_err(|e| ServeError::bad_request(format!("{at}: start_timestamp: {e}")))?;
            Stamps::Continued { first, freq: input.frequency.step, count: obs.rows }
        }
        (None, None) => {
            return Err(ServeError::bad_request(format!(
            "{at}: give `start_timestamp` (ISO 8601: the time of the series' first point), or the time of \
                 every point as `timestamps`; the answer's `start_timestamp` (the first forecast step) is \
                 continued from it at `frequency`"
        )))
        }
    };
    Ok(Line {
        id: &input.name,
        target: Target(obs),
        horizon: options.horizon,
        quantiles: options.quantiles.as_deref(),
        samples: options.samples,
        seed: options.seed,
        temperature: options.temperature,
        top_k: options.top_k,
        top_p: options.top_p,
        params: options.params.as_ref(),
        strict_context: options.strict_context,
        timestamps,
        future_timestamps: input.future_timestamps.as_deref(),
        columns: input.columns.as_deref(),
        id_mask: input.id_mask.as_deref(),
        calendar: input.calendar.as_deref(),
        timezone: input.timezone.as_deref(),
        holidays: input.holidays.as_deref(),
    })
}

/// An input with both `timestamps` and `start_timestamp`: they must agree on the first point.
fn check_start(
    given: &[String],
    start: Option<&str>,
    at: &str,
    opts: &ReadOptions,
) -> Result<(), ServeError> {
    let (Some(start), Some(first)) = (start, given.first()) else { return Ok(()) };
    let unit = opts.timestamp_unit;
    let same = match (parse_text(start, unit), parse_text(first, unit)) {
        (Ok(a), Ok(b)) => a.at == b.at,
        // a bad stamp is named by the reader (`timestamps`) or here
        (Err(e), _) => return Err(ServeError::bad_request(format!("{at}: start_timestamp: {e}"))),
        (_, Err(_)) => true,
    };
    match same {
        true => Ok(()),
        false => Err(ServeError::bad_request(format!(
            "{at}: start_timestamp `{}` is not the first of `timestamps` (`{}`); give one of them, or the same \
             time in both",
            clip(start),
            clip(first)
        ))),
    }
}

/// One `/v1/forecast` request (docs/formats.md, "Forecast request").
#[derive(Serialize)]
struct Line<'a> {
    id: &'a str,
    target: Target<'a>,
    horizon: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    quantiles: Option<&'a [f64]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    samples: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a std::collections::BTreeMap<String, f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict_context: Option<bool>,
    timestamps: Stamps<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    future_timestamps: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    columns: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id_mask: Option<&'a [i64]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    calendar: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timezone: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    holidays: Option<&'a [String]>,
}

/// `series` as `[variate][time]`.
struct Target<'a>(&'a Observed);

impl Serialize for Target<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let obs = self.0;
        s.collect_seq((0..obs.variates()).map(|v| Variate { obs, v }))
    }
}

/// Variate `v` of `series`, oldest first.
struct Variate<'a> {
    obs: &'a Observed,
    v: usize,
}

impl Serialize for Variate<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((0..self.obs.rows).map(|t| self.obs.at(t, self.v)))
    }
}

/// An input's `timestamps`: given, or continued from `start_timestamp` (`count` of them), walked in chunks of
/// [`STAMPS_PER_WALK`] as they are written.
enum Stamps<'a> {
    Given(&'a [String]),
    Continued { first: Stamp, freq: Freq, count: usize },
}

impl Serialize for Stamps<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let &Stamps::Continued { first, freq, count } = self else {
            let Stamps::Given(given) = self else { unreachable!("matched above") };
            return given.serialize(s);
        };
        let mut seq = s.serialize_seq(Some(count))?;
        if count == 0 {
            return seq.end();
        }
        seq.serialize_element(&first.to_text())?;
        // KServe steps months from the start's day (relativedelta), clamped to each month's length.
        let anchor = MonthAnchor::Day(first.local().day());
        let (mut last, mut left) = (first, count - 1);
        while left > 0 {
            let n = left.min(STAMPS_PER_WALK);
            let steps = TimeAxis::continuous(last, freq, anchor).future(n).ok_or_else(|| {
                ser::Error::custom("start_timestamp continued at `frequency` passes the year 9999")
            })?;
            for st in &steps {
                seq.serialize_element(&st.to_text())?;
            }
            last = steps[n - 1];
            left -= n;
        }
        seq.end()
    }
}

/// The lines' text, held in the ticket (on top of the body, `wire`) as it grows.
struct Held<'t> {
    buf: Vec<u8>,
    ticket: &'t Ticket,
    wire: u64,
    held: u64,
    refusal: Option<ServeError>,
}

impl Held<'_> {
    fn hold(&mut self) -> Result<(), ServeError> {
        self.held = self.buf.len() as u64;
        self.ticket.check_here()?;
        self.ticket.hold(Part::Wire, self.wire.saturating_add(self.held))
    }
}

impl Write for Held<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() as u64 >= self.held + HOLD_EVERY {
            if let Err(e) = self.hold() {
                let text = e.to_string();
                self.refusal = Some(e);
                return Err(std::io::Error::other(text));
            }
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tables::timestamps::EpochUnit;

    fn continued(start: &str, freq: Freq, count: usize) -> String {
        let first = parse_text(start, EpochUnit::Seconds).unwrap();
        serde_json::to_string(&Stamps::Continued { first, freq, count }).unwrap()
    }

    #[test]
    fn stamps_continue_as_kserves_frequency_map() {
        // relativedelta(months=k) from the start: clamped to each month, back to the 31st when it has one
        assert_eq!(
            continued("2024-01-31", Freq::Months(1), 4),
            r#"["2024-01-31","2024-02-29","2024-03-31","2024-04-30"]"#
        );
        assert_eq!(
            continued("2023-11-30T06:00:00", Freq::Months(3), 2),
            r#"["2023-11-30T06:00:00","2024-02-29T06:00:00"]"#
        );
        let hour = Freq::Fixed(3_600 * 1_000_000_000);
        assert_eq!(
            continued("2024-01-01T23:00:00Z", hour, 2),
            r#"["2024-01-01T23:00:00Z","2024-01-02T00:00:00Z"]"#
        );
        assert_eq!(continued("2024-01-01", hour, 0), "[]");
        // more stamps than one walk builds: the walks join without a gap
        let many: Vec<String> =
            serde_json::from_str(&continued("2024-01-01T00:00:00", hour, STAMPS_PER_WALK + 3)).unwrap();
        assert_eq!(many.len(), STAMPS_PER_WALK + 3);
        assert_eq!(many[STAMPS_PER_WALK], "2024-02-12T16:00:00");
        // past the year 9999: an error, not a panic
        let first = parse_text("9999-11-01", EpochUnit::Seconds).unwrap();
        assert!(serde_json::to_string(&Stamps::Continued { first, freq: Freq::Months(1), count: 4 }).is_err());
    }

    #[test]
    fn a_multivariate_series_is_transposed() {
        let obs = Observed { values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], width: Some(2), rows: 3 };
        assert_eq!(serde_json::to_string(&Target(&obs)).unwrap(), "[[1.0,3.0,5.0],[2.0,4.0,6.0]]");
        let uni = Observed { values: vec![1.5, 2.5], width: None, rows: 2 };
        assert_eq!(serde_json::to_string(&Target(&uni)).unwrap(), "[[1.5,2.5]]");
    }
}
