//! Cost in seconds at admission: a request's estimated engine time (the engine's own plan of it, priced at the
//! rates it measured at warm-up: `engines::cost`) against the time it may take, alone and behind the work
//! already queued.
//!
//! * **Margin.** An estimate is trusted within [`MARGIN`]× (what `totoc bench cost` checks: an admitted request
//!   finishes within twice its estimate), so a request is admitted only if [`MARGIN`] × (the estimated work queued
//!   ahead of it + its own estimate) fits the time it may take.
//! * **What a request may take** ([`Allowance`]): its deadline (the client's, within `--request-timeout-ms`). A
//!   request that is not small — whose margined estimate exceeds the reserve, [`RESERVE_SHARE`] of the server's
//!   deadline — may take at most the server's deadline less the reserve: so the work queued by such requests
//!   never exceeds half of that, and however the queue fills with it, a small request always finds room within
//!   its deadline.
//! * **Alone** ([`admit`]): a request whose estimate exceeds that is refused before it is queued (429 /
//!   RESOURCE_EXHAUSTED, no `Retry-After`: waiting cannot help), naming the estimate, the limit and the smallest
//!   changes that fit (`engines::cost::smallest_fit`).
//! * **Behind the queue** (the batcher, under its lock): the estimated work ahead (what is left of the running
//!   call, and every queued request's estimate) plus the request's own must fit the same limit, else 429 with
//!   `Retry-After` (the work ahead drains).
//!
//! An engine without rates (a family that gives none) is bounded by the request budget alone.

use std::time::Duration;

use engines::budget::RequestSize;
use engines::engine::Engine;

use super::error::ServeError;

/// The `reason` of `totoc_rejected_total` for a request refused on its estimate alone.
pub const REJECT_REASON: &str = "estimated_time";

/// How far an estimate is trusted: a request is admitted if this many times its estimate fits.
pub const MARGIN: f64 = 2.0;

/// The share of the server's deadline (`--request-timeout-ms`) kept for small requests: what a request whose
/// margined estimate exceeds it may not use.
pub const RESERVE_SHARE: f64 = 0.1;

/// What one request may wait behind, in estimated seconds of work (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Allowance {
    /// Its own estimate.
    pub own: f64,
    /// The most estimated work ahead of it it may wait behind (negative: it does not fit even alone).
    pub ahead: f64,
    /// The time this allows (its deadline, or the server's deadline less the reserve), for messages.
    pub time: f64,
}

impl Allowance {
    /// The allowance of a request estimated at `own` seconds with `deadline` to go, on a server whose deadline
    /// is `server` (see the module docs).
    pub fn new(own: f64, deadline: Duration, server: Duration) -> Self {
        let reserve = server.as_secs_f64() * RESERVE_SHARE;
        let deadline = deadline.as_secs_f64();
        let time = match MARGIN * own <= reserve {
            true => deadline,
            false => deadline.min(server.as_secs_f64() - reserve),
        };
        Allowance { own, ahead: time / MARGIN - own, time }
    }

    /// Whether it fits behind `ahead` estimated seconds of work.
    pub fn fits_behind(&self, ahead: f64) -> bool {
        ahead <= self.ahead
    }
}

/// Logs what the warm-up measured for the cost estimates, or that the engine gives none.
pub fn log_rates(engine: &Engine) {
    match engine.rates().get() {
        Some(r) => {
            let slowest = r.graphs.iter().map(|g| g.seconds_per_run).fold(0.0, f64::max);
            // a graph of 0 timed runs has a rate derived from another's (the family's proportionate warm-up)
            tracing::info!(
                graphs = r.graphs.len(),
                timed = r.graphs.iter().filter(|g| g.timed_runs > 0).count(),
                slowest_run_ms = slowest * 1e3,
                host_factor = r.host_factor,
                "rated every graph for the cost estimates"
            )
        }
        None => tracing::warn!(
            "this engine's model family gives no graph rates: requests are bounded by the request budget \
             (--max-request-cost) alone, not by their estimated seconds"
        ),
    }
}

/// A request's allowance (`sizes`: its series as admitted; `deadline`: its time to go), from one estimate (one
/// plan: cheap enough to make on the async workers), or the [`Refusal`] of one whose estimate alone exceeds it.
/// `None`: the engine gives no estimate.
pub fn admit(
    engine: &Engine,
    sizes: &[RequestSize],
    deadline: Duration,
    server: Duration,
) -> Result<Option<Allowance>, Refusal> {
    let Some(estimate) = engine.estimate(sizes) else { return Ok(None) };
    let Some(own) = engine.rates().seconds(&estimate) else { return Ok(None) };
    let allowance = Allowance::new(own, deadline, server);
    match allowance.fits_behind(0.0) {
        true => Ok(Some(allowance)),
        false => Err(Refusal { estimate, allowance, deadline, server }),
    }
}

/// A request refused on its estimate alone; [`Refusal::explain`] says why and what would fit.
#[derive(Debug)]
pub struct Refusal {
    estimate: engines::cost::Estimate,
    allowance: Allowance,
    deadline: Duration,
    server: Duration,
}

impl Refusal {
    /// The 429 naming the estimate, the time the request may take, and the smallest single changes that fit
    /// (a bisection of estimates per count: CPU work, for the blocking pool).
    pub fn explain(self, engine: &Engine, sizes: &[RequestSize]) -> ServeError {
        let Refusal { estimate, allowance, deadline, server } = self;
        let time = allowance.time;
        let limit = match time < deadline.as_secs_f64() {
            true => format!(
                "the {time:.1} s a request of its size may take (the server's {:.1} s deadline less the tenth kept \
                 for small requests)",
                server.as_secs_f64()
            ),
            false => format!("its deadline of {time:.1} s"),
        };
        let fits = |s: &[RequestSize]| {
            engine.estimate_seconds(s).is_some_and(|t| Allowance::new(t, deadline, server).fits_behind(0.0))
        };
        let changes = engines::cost::smallest_fit(sizes, &fits);
        let fix = match changes.is_empty() {
            true => "no single change fits: send a much smaller request".to_string(),
            false => format!("it fits with {}", changes.join(", or ")),
        };
        ServeError::TooCostly(format!(
            "the request's estimated engine time is {:.1} s ({} row-steps in {} graph runs, at the rates this \
             engine measured at warm-up); {MARGIN}× that must fit {limit}; {fix}",
            allowance.own,
            estimate.row_steps(),
            estimate.runs()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_requests_may_use_the_reserve_and_others_may_not() {
        let server = Duration::from_secs(30);
        // reserve: 3 s of time, so 1.5 s of estimate; a small one: 2 × (ahead + own) within its deadline
        let small = Allowance::new(1.5, server, server);
        assert_eq!((small.ahead, small.time), (13.5, 30.0));
        assert!(small.fits_behind(13.5) && !small.fits_behind(13.6));
        // a large one: 2 × (ahead + own) within 27 s
        let large = Allowance::new(1.6, server, server);
        assert_eq!(large.time, 27.0);
        assert!((large.ahead - 11.9).abs() < 1e-9);
        assert!(large.fits_behind(11.9) && !large.fits_behind(12.0));
        // however much work large requests queue (at most 13.5 s), a small request fits behind it
        assert!(Allowance::new(1.5, server, server).fits_behind(Allowance::new(13.5, server, server).own));
        // a client's shorter deadline is the limit for both
        let short = Duration::from_secs(5);
        assert_eq!(Allowance::new(1.0, short, server).ahead, 1.5);
        assert_eq!(Allowance::new(2.0, short, server).ahead, 0.5);
        // alone: a request estimated over half of the server's deadline less the reserve never fits
        assert!(!Allowance::new(13.6, server, server).fits_behind(0.0));
        assert!(Allowance::new(13.5, server, server).fits_behind(0.0));
    }
}
