//! [`Service`]: the protocol-neutral core every front end calls (REST `/v1/forecast`, REST v2, gRPC v2). It
//! owns the engine handle, the batcher, the readiness state, the shadow and the metrics, and does the steps
//! that are the same whatever the wire format: the in-flight limit, the bytes budget ([`super::hold`]), the
//! model name check, admission (the engine's limits and context policy), the answer's size, the deadline, the
//! estimated engine time against it ([`super::cost`]), the batched forecast, and handing samples to the shadow.
//! Decoding, encoding and the search for what a refused request could ask instead run on a bounded pool of the
//! blocking threads ([`Service::off_runtime`]), never on the async workers that answer health probes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use engines::budget::{Budget, RequestSize};
use engines::engine::Engine;
use engines::request::{ForecastRequest, ForecastResponse};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;

use super::hold::{ByteBudget, InFlight, Part, Ticket};

use super::batcher::Batcher;
use super::error::{Overload, ServeError};
use super::metrics::Metrics;
use super::model::{ModelSpec, Plan, VERSION};
use super::readiness::Readiness;
use super::shadow::Shadow;

/// Request-level limits (`--max-body-bytes`, `--request-timeout-ms`, `--max-in-flight`,
/// `--max-bytes-in-flight`, `--max-bytes-per-peer`, `--body-read-timeout-ms`, `--min-upload-bytes-per-s`,
/// `--max-response-bytes`, and the request budget: `--max-series`, `--max-variates`, `--max-quantile-levels`,
/// `--max-response-values`, `--max-request-cost`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body_bytes: usize,
    /// The longest a request may take; a client's own timeout can only shorten it.
    pub request_timeout: Duration,
    pub max_in_flight: usize,
    /// Bytes the requests being received, decoded, computed and answered hold at once: their bodies as they
    /// arrive, what decoding them builds, and their answers ([`super::hold`]).
    pub max_bytes_in_flight: u64,
    /// ... of which one client address may hold at most this much.
    pub max_bytes_per_peer: u64,
    /// The longest a client may take to send a body (from its headers to its last byte).
    pub body_read_timeout: Duration,
    /// After [`UPLOAD_GRACE`], a body must have arrived at this average rate at least (bytes per second).
    pub min_upload_rate: u64,
    /// The largest encoded answer (HTTP body or gRPC message), checked from its counts before the engine runs.
    pub max_response_bytes: u64,
    /// What one request may ask of the engine, checked from its counts before anything is built.
    pub budget: Budget,
}

/// Where a request's time went (the HTTP `Server-Timing` header).
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub queue: Duration,
    pub compute: Duration,
    pub batch_series: usize,
}

/// The shared server core (see the module docs).
pub struct Service {
    pub engine: Arc<Engine>,
    pub spec: ModelSpec,
    pub batcher: Arc<Batcher>,
    pub readiness: Arc<Readiness>,
    pub metrics: Arc<Metrics>,
    pub shadow: Option<Shadow>,
    pub limits: Limits,
    in_flight: Arc<Semaphore>,
    /// `--max-bytes-in-flight` and its per-client shares.
    pub budget: Arc<ByteBudget>,
    /// The decodes and encodes that may run at once on the blocking pool.
    coders: Arc<Semaphore>,
    /// The bearer token, when one is required.
    token: Option<Token>,
}

/// A bearer token, kept as its SHA-256: requests are compared by digest, so the time a comparison takes says
/// nothing about the token.
pub struct Token([u8; 32]);

impl Token {
    pub fn new(token: &str) -> Self {
        Token(Sha256::digest(token.as_bytes()).into())
    }

    /// Whether an `Authorization` value (`Bearer <token>`, the scheme in any case) carries this token.
    pub fn accepts(&self, authorization: Option<&str>) -> bool {
        let Some((scheme, given)) = authorization.map(str::trim_start).and_then(|h| h.split_once(' ')) else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case("bearer") {
            return false;
        }
        let given = given.trim();
        let got: [u8; 32] = Sha256::digest(given.as_bytes()).into();
        got.iter().zip(&self.0).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
    }
}

impl Service {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        engine: Arc<Engine>,
        spec: ModelSpec,
        batcher: Arc<Batcher>,
        readiness: Arc<Readiness>,
        metrics: Arc<Metrics>,
        shadow: Option<Shadow>,
        limits: Limits,
        token: Option<&str>,
    ) -> Self {
        let metrics_for_budget = metrics.clone();
        Service {
            engine,
            spec,
            batcher,
            readiness,
            metrics,
            shadow,
            in_flight: Arc::new(Semaphore::new(limits.max_in_flight)),
            budget: ByteBudget::new(
                limits.max_bytes_in_flight,
                limits.max_bytes_per_peer,
                metrics_for_budget,
            ),
            coders: Arc::new(Semaphore::new(coder_threads())),
            limits,
            token: token.map(Token::new),
        }
    }

    /// Whether any request is being received, decoded, computed or answered (it holds bytes or a slot).
    pub fn busy(&self) -> bool {
        self.budget.held() > 0 || self.in_flight.available_permits() < self.limits.max_in_flight
    }

    /// Checks the bearer token of a request (`Authorization` header or gRPC metadata), if one is required.
    pub fn authorize(&self, authorization: Option<&str>) -> Result<(), ServeError> {
        match &self.token {
            Some(t) if !t.accepts(authorization) => Err(ServeError::Unauthorized),
            _ => Ok(()),
        }
    }

    /// Takes an in-flight slot or refuses with 503.
    pub fn enter(&self) -> Result<InFlight, ServeError> {
        match self.in_flight.clone().try_acquire_owned() {
            Ok(permit) => {
                self.metrics.in_flight.inc();
                Ok(InFlight::new(permit, self.metrics.clone()))
            }
            Err(_) => {
                self.metrics.reject(Overload::InFlight.label());
                Err(ServeError::overloaded(
                    Overload::InFlight,
                    format!("{} requests are in flight, the server's limit", self.limits.max_in_flight),
                ))
            }
        }
    }

    /// A hold for one request of `peer` ([`super::hold`]), holding nothing yet.
    pub fn ticket(&self, peer: std::net::IpAddr) -> Arc<Ticket> {
        self.budget.ticket(peer)
    }

    /// Runs `f` (a decode or an encode) on the blocking pool, at most [`coder_threads`] at once, so that no
    /// client's bytes keep the async workers (and the health probes they answer) waiting. Waiting for a turn
    /// ends when the caller's future is dropped (its client left); `f` should hold what it works for (its
    /// [`Ticket`]) so that its budget lasts as long as it runs.
    pub async fn off_runtime<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T, ServeError> + Send + 'static,
    ) -> Result<T, ServeError> {
        let turn = self.coders.clone().acquire_owned().await.expect("the coder semaphore is never closed");
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            f()
        })
        .await
        .map_err(|e| ServeError::Internal(format!("decoder task: {e}")))?
    }

    /// Holds the answer of `requests` in `ticket` before the engine runs: the engine's output and its encoding
    /// (`json`: as JSON text, else as binary tensors), checked against `--max-response-bytes` (413 naming it).
    pub fn hold_answer<'a>(
        &self,
        ticket: &Ticket,
        requests: impl IntoIterator<Item = &'a ForecastRequest>,
        json: bool,
    ) -> Result<(), ServeError> {
        let knots = self.engine.info().model.capabilities().quantile_knots.map_or(0, |k| k.len());
        let mut series = 0u64;
        let (values, steps) = requests.into_iter().fold((0u64, 0u64), |(v, s), r| {
            series += 1;
            let size = RequestSize {
                series: 1,
                variates: r.variates(),
                context: 0,
                horizon: r.horizon,
                samples: r.samples,
                quantiles: r.quantiles.len().max(knots),
                max_context: None,
            };
            (v.saturating_add(size.response_values()), s.saturating_add(r.horizon as u64))
        });
        let encoded = super::hold::encoded_bytes(values, steps, series, json);
        if encoded > self.limits.max_response_bytes {
            self.metrics.reject("max_response_bytes");
            return Err(ServeError::TooLarge(format!(
                "the answer would take up to {encoded} bytes ({values} values{}), more than the server's limit of \
                 {} bytes (--max-response-bytes); ask for fewer series, steps, samples or quantiles{}",
                if json { " as JSON text" } else { "" },
                self.limits.max_response_bytes,
                if json { ", or binary outputs" } else { "" }
            )));
        }
        ticket.hold(Part::Answer, super::hold::answer_bytes(values, encoded))
    }

    /// Checks a request's counts (before anything per series is built) against the engine's limits and the
    /// request budget; a refusal by the budget is counted under its reason.
    pub fn check_size(&self, sizes: &[RequestSize], at: &str) -> Result<(), ServeError> {
        self.engine.check_size(&self.limits.budget, sizes, at).map_err(|e| {
            if let engines::Error::OverBudget { reason, .. } = &e {
                self.metrics.reject(reason);
            }
            ServeError::from(e)
        })
    }

    /// The model `name` (and `version`, if given) is the one served, else 404.
    pub fn check_model(&self, name: &str, version: Option<&str>) -> Result<(), ServeError> {
        if name != self.spec.name {
            return Err(ServeError::NotFound(format!(
                "unknown model `{}`; this server serves `{}`",
                super::error::clip(name),
                self.spec.name
            )));
        }
        match version {
            Some(v) if !v.is_empty() && v != VERSION => Err(ServeError::NotFound(format!(
                "model `{name}` has no version `{}`; it has version {VERSION}",
                super::error::clip(v)
            ))),
            _ => Ok(()),
        }
    }

    /// Applies the engine's limits and context policy to one request (`at` names it in errors).
    pub fn admit(&self, req: &mut ForecastRequest, at: &str) -> Result<(), ServeError> {
        self.engine.admit(req, at).map(|_| ()).map_err(ServeError::from)
    }

    /// Admits every series of a v2 request (see [`Service::admit`]).
    pub fn admit_plan(&self, plan: &mut Plan) -> Result<(), ServeError> {
        let labels: Vec<String> = (0..plan.requests.len()).map(|i| plan.label(i)).collect();
        for (r, at) in plan.requests.iter_mut().zip(&labels) {
            self.admit(r, at)?;
        }
        Ok(())
    }

    /// Forecasts admitted requests (one client request's series) through the batcher, by the client's `timeout`
    /// or the server's, whichever is sooner. Any series' failure fails the whole request.
    pub async fn forecast(
        &self,
        requests: Vec<ForecastRequest>,
        timeout: Option<Duration>,
        request_id: &str,
        ticket: &Arc<Ticket>,
    ) -> Result<(Vec<ForecastResponse>, Timing), ServeError> {
        let queued = match self.submit(requests, timeout, request_id, ticket)? {
            Ok(q) => q,
            // the bisection that names what would fit is CPU work, off the runtime's workers
            Err(refused) => {
                let engine = self.engine.clone();
                return Err(self.off_runtime(move || Ok(refused.explain(&engine))).await?);
            }
        };
        self.answer(queued, request_id).await
    }

    /// The first half of [`Service::forecast`], for a caller that is not on the async workers (a decode on the
    /// blocking pool queues its request itself, so the engine thread hears of it without a hop back to the
    /// runtime first): the checks before queuing, the request's estimate against the time it may take, and the
    /// job queued. `Ok(Err(_))`: refused on its estimate alone, to be explained (CPU work: not on the async
    /// workers). [`Service::answer`] awaits the result.
    pub fn submit(
        &self,
        requests: Vec<ForecastRequest>,
        timeout: Option<Duration>,
        request_id: &str,
        ticket: &Arc<Ticket>,
    ) -> Result<Result<Queued, Refused>, ServeError> {
        // Reaching here, the request was accepted (received in full): it is served even if SIGTERM came
        // while it was uploading.
        self.readiness.check_accepted().inspect_err(|e| {
            if let ServeError::Overloaded { kind, .. } = e {
                self.metrics.reject(kind.label());
            }
        })?;
        let budget = timeout.map_or(self.limits.request_timeout, |t| t.min(self.limits.request_timeout));
        let deadline = Instant::now() + budget;
        // Cost in seconds: a request that cannot finish within what it may take is refused before it is queued
        // (one plan, here; the bisection that names what would fit is left to the caller).
        let sizes: Vec<RequestSize> = requests.iter().map(RequestSize::of).collect();
        let allowance = match super::cost::admit(&self.engine, &sizes, budget, self.limits.request_timeout) {
            Ok(a) => a,
            Err(refusal) => {
                self.metrics.reject(super::cost::REJECT_REASON);
                return Ok(Err(Refused { refusal, sizes }));
            }
        };
        let shadow_copy = self.shadow.as_ref().filter(|s| s.sample()).map(|_| requests.clone());
        // The job holds the ticket: a client that leaves does not give back what its queued or running job holds.
        let hold = Box::new(ticket.clone());
        let rx = self.batcher.submit_holding(requests, deadline, request_id, allowance, hold)?;
        Ok(Ok(Queued { rx, deadline, budget, shadow_copy }))
    }

    /// The second half of [`Service::forecast`]: waits for a [`Queued`] job's answer within its deadline.
    pub async fn answer(
        &self,
        queued: Queued,
        request_id: &str,
    ) -> Result<(Vec<ForecastResponse>, Timing), ServeError> {
        let Queued { rx, deadline, budget, shadow_copy } = queued;
        let done = match tokio::time::timeout_at(deadline.into(), rx).await {
            Err(_) => {
                self.metrics.reject(Overload::Deadline.label());
                return Err(ServeError::overloaded(
                    Overload::Deadline,
                    format!(
                        "the request's deadline of {} ms passed before the engine answered",
                        budget.as_millis()
                    ),
                ));
            }
            Ok(Err(_)) => return Err(ServeError::Internal("the engine thread stopped".into())),
            Ok(Ok(answer)) => answer?,
        };
        let timing =
            Timing { queue: done.queue_wait, compute: done.compute, batch_series: done.batch_series };
        let mut responses = Vec::with_capacity(done.results.len());
        for (i, r) in done.results.into_iter().enumerate() {
            match r {
                Ok(r) => responses.push(r),
                // Requests were admitted before queuing (which checks that a bucket holds each), so what fails here
                // is the engine itself; the engine names the request by its place in the packed batch, so say which
                // series of this request it was.
                Err(engines::Error::Unservable { why, .. }) => {
                    return Err(ServeError::BadRequest(format!(
                        "series {i}: this engine cannot run it: {why}; export a profile that covers it \
                         (configs/*.yaml) and rebuild the engine"
                    )))
                }
                Err(e) => return Err(ServeError::from(e)),
            }
        }
        if let (Some(shadow), Some(reqs)) = (&self.shadow, shadow_copy) {
            shadow.offer(reqs, responses.clone(), request_id);
        }
        Ok((responses, timing))
    }
}

/// A request queued by [`Service::submit`]: what [`Service::answer`] waits on.
pub struct Queued {
    rx: tokio::sync::oneshot::Receiver<Result<super::batcher::Done, ServeError>>,
    deadline: Instant,
    /// The time it may take (its deadline's distance when queued), for messages.
    budget: Duration,
    /// The requests, when the shadow takes this one.
    shadow_copy: Option<Vec<ForecastRequest>>,
}

/// A request [`Service::submit`] refused on its estimate alone.
pub struct Refused {
    refusal: super::cost::Refusal,
    sizes: Vec<RequestSize>,
}

impl Refused {
    /// The 429 naming the estimate and what would fit (a bisection of estimates: CPU work, for the blocking pool).
    pub fn explain(self, engine: &Engine) -> ServeError {
        self.refusal.explain(engine, &self.sizes)
    }
}

/// How long a body may take before [`Limits::min_upload_rate`] applies (at most the body timeout).
pub const UPLOAD_GRACE: Duration = Duration::from_secs(2);

/// When a body that began at `start` and has `received` bytes so far must be in: within the body timeout, and
/// at the minimum upload rate after [`UPLOAD_GRACE`] (the time allowed grows with every byte received).
pub fn body_deadline(limits: &Limits, start: Instant, received: u64) -> Instant {
    let grace = UPLOAD_GRACE.min(limits.body_read_timeout);
    let earned = Duration::from_secs_f64(received as f64 / limits.min_upload_rate.max(1) as f64);
    start + (grace + earned).min(limits.body_read_timeout)
}

/// Decodes and encodes that may run at once: the cores, at least 2.
fn coder_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).max(2)
}

/// The request id of a request: the client's `x-request-id` when it is a sane token (1..=128 visible ASCII
/// characters), else a fresh one (`<process prefix>-<counter>`, unique within the process and across restarts
/// with high probability).
pub fn request_id(given: Option<&str>) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    if let Some(g) =
        given.filter(|g| !g.is_empty() && g.len() <= 128 && g.bytes().all(|b| b.is_ascii_graphic()))
    {
        return g.to_string();
    }
    static PREFIX: OnceLock<u32> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let prefix = PREFIX.get_or_init(rand::random::<u32>);
    format!("{prefix:08x}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_must_match_exactly() {
        let t = Token::new("s3cret");
        assert!(t.accepts(Some("Bearer s3cret")));
        assert!(t.accepts(Some("Bearer s3cret ")));
        assert!(!t.accepts(Some("Bearer s3cre")));
        assert!(!t.accepts(Some("Bearer s3crets")));
        assert!(!t.accepts(Some("s3cret")));
        assert!(t.accepts(Some("bearer s3cret")));
        assert!(t.accepts(Some("BEARER  s3cret")));
        assert!(!t.accepts(Some("Basic s3cret")));
        assert!(!t.accepts(Some("Bearers3cret")));
        assert!(!t.accepts(None));
    }

    #[test]
    fn request_ids_are_the_clients_or_fresh() {
        assert_eq!(request_id(Some("abc-123")), "abc-123");
        let a = request_id(None);
        let b = request_id(Some("has space"));
        let c = request_id(Some(&"x".repeat(129)));
        assert!(a != b && b != c && a.contains('-'), "{a} {b} {c}");
    }
}
