//! long-file: the queue and its engine thread share one state; every policy below is tested against one fake
//! engine in this file.
//!
//! [`Batcher`]: dynamic batching onto the engine. Requests from every front end wait in one bounded queue; a
//! dedicated engine thread packs what is waiting into **one** [`Backend::forecast`] call (one
//! `Engine::forecast`, which places the series on its shape buckets) and answers each request through its own
//! oneshot channel. The tokio runtime never blocks on the engine: handlers only take a short lock to enqueue and
//! then await their channel.
//!
//! Policy:
//! * **Queue delay**: a batch is flushed when the oldest waiting request has waited `queue_delay`, when
//!   `max_batch` series are waiting, or at shutdown. Requests that arrive while the engine is busy are packed into
//!   the next call anyway, so even a zero delay batches under load.
//! * **Rejoin**: when a call ends, its clients are answered and a closed-loop client sends its next request at
//!   once; a batch taken the moment the call ended would hold only the requests that waited through it, and a
//!   busy server's calls would settle into halves (8 clients: calls of 4 and 4, each paying the call's shared
//!   work). So for at most [`REJOIN_SHARE`] of the ended call's time (and [`REJOIN_MAX`]) the next batch waits
//!   until as many series as that call answered have joined those waiting (or `max_batch` are waiting). A lone
//!   client is never delayed by it (its own request is the one awaited), and a server whose clients do not come
//!   back loses at most that share of its throughput.
//! * **Bounded queue**: at most `capacity` series wait, and a tenth more from small requests (of at most a tenth
//!   of `capacity` series each: one large request waiting never refuses them); a request that does not fit is
//!   refused at once (429 with `Retry-After`), so memory never grows with load. A request with more series than
//!   `capacity` can never fit and is a 400.
//! * **Deadlines**: a request whose deadline passes while queued is answered 503 without running; one whose
//!   client went away (its receiver dropped) is skipped. Both are dropped before packing, so they cost nothing.
//! * **Packing**: FIFO; a batch takes whole requests while it holds at most `max_batch` series (the first request
//!   always goes, whatever its size) and while the packed call's estimated time (the engine's plan of the whole
//!   batch at its measured rates, with admission's margin) lets every member finish within its deadline. Requests are never split or
//!   reordered, so a request's series stay together.
//! * **Cost in seconds** (see [`super::cost`]): each queued request carries its own estimate; a request is queued
//!   only if the estimated time until it is answered fits its [`Allowance`] (429 `engine_backlog` with
//!   `Retry-After` otherwise): what is left of the running call, then the queue and the request itself in the
//!   calls the batcher will pack them into (whole requests in order, at most `max_batch` series a call), each
//!   priced by the engine as **one merged call** ([`Backend::seconds`] of its series) — not as the sum of its
//!   requests' own estimates, which counts every series' share of a call's shared work again and refused
//!   nearly every request of a loaded server whose calls merge. (A backend that gives no estimate of a merged
//!   call falls back to that sum.) One that can no longer finish by its deadline when its turn comes is
//!   answered 503 without running.
//! * **Cancellation**: while a call runs, the engine asks between graph runs whether any of its requests is
//!   still wanted (a client waiting within its deadline); once none is, the call stops
//!   (`totoc_cancelled_total{reason}`), and the requests still waiting are answered 503 (deadline).
//! * A panic in the engine answers that batch's requests with 500 and the thread carries on; panics and engine
//!   errors (never a request's 4xx) are reported to the [`Readiness`] health policy.
//! * Two condition variables, one per purpose: `wake` for the engine thread (a request queued, close), `idle`
//!   for those waiting for the batcher to be idle (the shadow), so no notify meant for one is taken by the other.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use engines::budget::RequestSize;
use engines::engine::{Cancel, Engine, RunOptions};
use engines::request::{ForecastRequest, ForecastResponse};
use tokio::sync::oneshot;

use super::cost::Allowance;
use super::error::{Overload, ServeError};
use super::metrics::{BucketLabels, Metrics, ReasonLabels};
use super::readiness::Readiness;

/// What the batcher forecasts with: the engine, or a stand-in in tests.
pub trait Backend: Send + Sync + 'static {
    /// One result per request, in order (as [`Engine::forecast`]).
    fn forecast(&self, reqs: Vec<ForecastRequest>) -> Vec<engines::Result<ForecastResponse>>;
    /// [`forecast`](Self::forecast), stopping between graph runs once `cancel` says so (the requests not
    /// finished then fail with `engines::Error::Cancelled`).
    fn forecast_until(
        &self,
        reqs: Vec<ForecastRequest>,
        cancel: &(dyn Fn() -> bool + Sync),
    ) -> Vec<engines::Result<ForecastResponse>> {
        let _ = cancel;
        self.forecast(reqs)
    }
    /// The graph runs of the last call, grouped: (bucket name, rows that held work, the bucket's rows, runs).
    fn last_runs(&self) -> Vec<(String, usize, usize, u64)> {
        Vec::new()
    }
    /// The seconds one call of these series would take (the engine's plan at its measured rates); `None` when
    /// it cannot say.
    fn seconds(&self, sizes: &[RequestSize]) -> Option<f64> {
        let _ = sizes;
        None
    }
}

impl Backend for Engine {
    fn forecast(&self, reqs: Vec<ForecastRequest>) -> Vec<engines::Result<ForecastResponse>> {
        Engine::forecast(self, reqs)
    }

    fn forecast_until(
        &self,
        reqs: Vec<ForecastRequest>,
        cancel: &(dyn Fn() -> bool + Sync),
    ) -> Vec<engines::Result<ForecastResponse>> {
        let opts = RunOptions { cancel: Some(Cancel(cancel)), ..RunOptions::default() };
        self.forecast_with(reqs, opts).into_iter().map(|r| r.map(|f| f.response)).collect()
    }

    fn last_runs(&self) -> Vec<(String, usize, usize, u64)> {
        // grouped before naming: an autoregressive family's call makes a few runs a step (hundreds a call) on a
        // handful of buckets, and a name and a metric label per run cost a quarter of a millisecond before the answers
        let mut groups: Vec<(exporter::bucket::Bucket, usize, u64)> = Vec::new();
        for r in self.last_call() {
            match groups.iter_mut().find(|(b, used, _)| *b == r.bucket && *used == r.rows_used) {
                Some((_, _, n)) => *n += 1,
                None => groups.push((r.bucket, r.rows_used, 1)),
            }
        }
        groups.into_iter().map(|(b, used, n)| (self.bucket_name(b), used, b.rows, n)).collect()
    }

    fn seconds(&self, sizes: &[RequestSize]) -> Option<f64> {
        self.estimate_seconds(sizes)
    }
}

/// Batching settings (`--queue-delay-ms`, `--max-batch`, `--queue-capacity`).
#[derive(Debug, Clone, Copy)]
pub struct BatcherConfig {
    pub queue_delay: Duration,
    /// Series per engine call (a single larger request still runs, alone).
    pub max_batch: usize,
    /// Series that may wait.
    pub capacity: usize,
}

/// A request's answer: one result per series, and where its time went.
#[derive(Debug)]
pub struct Done {
    pub results: Vec<engines::Result<ForecastResponse>>,
    pub queue_wait: Duration,
    /// The engine call that served it (shared with the requests packed beside it).
    pub compute: Duration,
    /// Series in that engine call.
    pub batch_series: usize,
}

/// Where a job's answer goes.
type Reply = oneshot::Sender<Result<Done, ServeError>>;

struct Job {
    requests: Vec<ForecastRequest>,
    /// Each request's counts, for the packed call's estimate.
    sizes: Vec<RequestSize>,
    /// Its own estimated seconds, when the engine gives estimates.
    seconds: Option<f64>,
    deadline: Instant,
    enqueued: Instant,
    span: tracing::Span,
    request_id: String,
    reply: Reply,
    /// What the request holds of the server (its bytes, its slot): kept until the job is answered or dropped.
    hold: Hold,
}

/// Whatever a submitter keeps alive for as long as its job lives (see [`Batcher::submit_holding`]).
pub type Hold = Box<dyn std::any::Any + Send + Sync>;

#[derive(Default)]
struct State {
    queue: VecDeque<Job>,
    /// Series in `queue`.
    queued: usize,
    /// The engine thread is inside a forecast call.
    running: bool,
    /// When the running call should end, by its estimate.
    running_until: Option<Instant>,
    /// The queued jobs' estimated seconds.
    queued_seconds: f64,
    /// After a call: until when the next batch waits for its clients to come back, and for how many series
    /// (see the module docs, "Rejoin").
    rejoin: Option<(Instant, usize)>,
    closed: bool,
}

impl State {
    /// Estimated seconds of work ahead of a request queued now.
    fn ahead(&self, now: Instant) -> f64 {
        let running = self.running_until.map_or(0.0, |t| t.saturating_duration_since(now).as_secs_f64());
        running + self.queued_seconds
    }

    /// Recounts the queue's series and seconds (after jobs left it other than from the front).
    fn recount(&mut self) {
        self.queued = self.queue.iter().map(|j| j.requests.len()).sum();
        self.queued_seconds = self.queue.iter().filter_map(|j| j.seconds).sum();
    }

    /// Takes the front job off the queue's counts.
    fn pop(&mut self) -> Option<Job> {
        let job = self.queue.pop_front()?;
        self.queued -= job.requests.len();
        self.queued_seconds = match self.queue.is_empty() {
            // no drift from adding and taking away floats
            true => 0.0,
            false => (self.queued_seconds - job.seconds.unwrap_or(0.0)).max(0.0),
        };
        Some(job)
    }
}

struct Shared {
    state: Mutex<State>,
    /// The engine, for the estimates of merged calls at admission ([`finish_estimate`]).
    backend: Arc<dyn Backend>,
    /// The engine thread waits on it: a request was queued, or the batcher closed.
    wake: Condvar,
    /// [`Batcher::wait_idle`] waits on it: an engine call ended, or the queue emptied.
    idle: Condvar,
    config: BatcherConfig,
    metrics: Arc<Metrics>,
    /// Where engine-side failures and successes are reported (the server's health policy).
    health: std::sync::OnceLock<Arc<Readiness>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic never happens while the lock is held (the engine runs outside it); recover anyway.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The queue and its engine thread (see the module docs).
pub struct Batcher {
    shared: Arc<Shared>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Batcher {
    /// Starts the engine thread.
    pub fn start(backend: Arc<dyn Backend>, config: BatcherConfig, metrics: Arc<Metrics>) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::default(),
            backend: backend.clone(),
            wake: Condvar::new(),
            idle: Condvar::new(),
            config,
            metrics,
            health: std::sync::OnceLock::new(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("totoc-engine".into())
            .spawn(move || engine_loop(&s, backend.as_ref()))
            .expect("spawn the engine thread");
        Batcher { shared, thread: Mutex::new(Some(thread)) }
    }

    /// Reports every engine call's outcome to `readiness` (its health policy) from now on.
    pub fn report_to(&self, readiness: Arc<Readiness>) {
        let _ = self.shared.health.set(readiness);
    }

    /// Whether the engine thread still runs (or was stopped on purpose by [`close`](Self::close)): the liveness
    /// probe. It ends only if something escaped its panic handling.
    pub fn engine_alive(&self) -> bool {
        self.thread.lock().unwrap_or_else(|p| p.into_inner()).as_ref().is_none_or(|h| !h.is_finished())
    }

    /// Queues `requests` (one request's series) to be answered by `deadline`; the receiver gets the answer (tests;
    /// the server keeps what a request holds with [`submit_holding`](Self::submit_holding)).
    #[cfg(test)]
    pub fn submit(
        &self,
        requests: Vec<ForecastRequest>,
        deadline: Instant,
        request_id: &str,
        allowance: Option<Allowance>,
    ) -> Result<oneshot::Receiver<Result<Done, ServeError>>, ServeError> {
        self.submit_holding(requests, deadline, request_id, allowance, Box::new(()))
    }

    /// Queues `requests` (one request's series) to be answered by `deadline`, keeping `hold` alive until the job
    /// is answered or dropped, whatever its client does meanwhile (the server's hold on the request's bytes and
    /// slot lasts as long as its work); the receiver gets the answer. Refuses at once when the queue cannot take
    /// them (429), when the estimated work ahead and the request's own (its `allowance`, if the engine gives
    /// estimates) would not fit its allowance (429 with `Retry-After`), or when the batcher is closed (503). The
    /// engine thread logs for this request in the caller's current span (which carries its request id).
    pub fn submit_holding(
        &self,
        requests: Vec<ForecastRequest>,
        deadline: Instant,
        request_id: &str,
        allowance: Option<Allowance>,
        hold: Hold,
    ) -> Result<oneshot::Receiver<Result<Done, ServeError>>, ServeError> {
        let span = tracing::Span::current();
        let cfg = self.shared.config;
        let n = requests.len();
        if n > cfg.capacity {
            return Err(ServeError::bad_request(format!(
                "the request has {n} series but this server queues at most {}; split it into smaller requests",
                cfg.capacity
            )));
        }
        // A small request may use the queue's reserve too, so that one large request waiting never refuses it.
        let room = match n <= queue_reserve(cfg.capacity) {
            true => cfg.capacity + queue_reserve(cfg.capacity),
            false => cfg.capacity,
        };
        let (reply, rx) = oneshot::channel();
        let mut st = self.shared.lock();
        if st.closed {
            self.shared.metrics.reject(Overload::Draining.label());
            return Err(ServeError::overloaded(Overload::Draining, "the server is shutting down"));
        }
        if st.queued + n > room {
            // Requests whose clients gave up (deadline, disconnect) still hold their place until the engine
            // thread pops them; drop them now rather than refuse a live request for their sake.
            let before = st.queue.len();
            st.queue.retain(|j| !j.reply.is_closed());
            let dropped = before - st.queue.len();
            if dropped > 0 {
                st.recount();
                self.shared.metrics.abandoned.inc_by(dropped as u64);
            }
        }
        if st.queued + n > room {
            let queued = st.queued;
            drop(st);
            self.shared.metrics.reject(Overload::QueueFull.label());
            return Err(ServeError::overloaded(
                Overload::QueueFull,
                format!("the queue is full ({queued} of {room} series waiting); retry after the Retry-After delay"),
            ));
        }
        let sizes: Vec<RequestSize> = requests.iter().map(RequestSize::of).collect();
        if let Some(a) = allowance {
            let now = Instant::now();
            // the work ahead of it: until it is answered, less its own estimate (the merged calls' estimate, or
            // the sum of the queued requests' own where the engine cannot price a merged call)
            let ahead =
                match finish_estimate(&st, self.shared.backend.as_ref(), cfg.max_batch, &sizes, a.own, now) {
                    Some(done) => done - a.own,
                    None => st.ahead(now),
                };
            if !a.fits_behind(ahead) {
                drop(st);
                self.shared.metrics.reject(Overload::Backlog.label());
                return Err(backlog(ahead, a));
            }
        }
        st.queued += n;
        let seconds = allowance.map(|a| a.own);
        st.queued_seconds += seconds.unwrap_or(0.0);
        let request_id = request_id.to_string();
        let enqueued = Instant::now();
        st.queue.push_back(Job {
            requests,
            sizes,
            seconds,
            deadline,
            enqueued,
            span,
            request_id,
            reply,
            hold,
        });
        self.shared.metrics.queued_series.set(st.queued as i64);
        drop(st);
        self.shared.wake.notify_one();
        Ok(rx)
    }

    /// Waits up to `timeout` for the batcher to be idle (nothing queued, no engine call running: when the
    /// shadow engine may run); false if it stayed busy.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        let mut st = self.shared.lock();
        loop {
            if st.queue.is_empty() && !st.running {
                return true;
            }
            let now = Instant::now();
            if now >= end {
                return false;
            }
            st = self.shared.idle.wait_timeout(st, end - now).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Stops taking requests, lets the engine thread finish everything queued, and joins it.
    pub fn close(&self) {
        self.close_within(Duration::MAX);
    }

    /// [`close`](Self::close), waiting at most `timeout` for the engine thread; returns whether it ended (else
    /// it is left to the process exit).
    pub fn close_within(&self, timeout: Duration) -> bool {
        self.shared.lock().closed = true;
        self.shared.wake.notify_all();
        let mut slot = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        let end = Instant::now().checked_add(timeout);
        while slot.as_ref().is_some_and(|h| !h.is_finished()) {
            if end.is_some_and(|e| Instant::now() >= e) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Some(h) = slot.take() {
            let _ = h.join();
        }
        true
    }
}

impl Drop for Batcher {
    fn drop(&mut self) {
        self.close();
    }
}

/// Estimated seconds from `now` until a request of `sizes` queued now is answered, or `None` when the backend
/// cannot price a call: what is left of the running call, then the queue's requests and this one in the calls
/// [`next_batch`] packs them into (whole requests in order, a call holding at most `max_batch` series, the first
/// always going), each call priced as one merged call. A bound for admission, not a schedule: it ignores the
/// deadline check that may start a call early, which only makes calls smaller. At most `capacity / max_batch + 1`
/// estimates (one per call), made under the queue's lock.
///
/// `own` is this request's own estimate (admission's): a last call holding only this request is priced at it, not
/// estimated again (a lone client's every request: a plan of its runs, tens of microseconds under the lock).
fn finish_estimate(
    st: &State,
    backend: &dyn Backend,
    max_batch: usize,
    sizes: &[RequestSize],
    own: f64,
    now: Instant,
) -> Option<f64> {
    let running = st.running_until.map_or(0.0, |t| t.saturating_duration_since(now).as_secs_f64());
    let mut total = running;
    let mut call: Vec<RequestSize> = Vec::new();
    for job in st.queue.iter().map(|j| &j.sizes[..]).chain([sizes]) {
        if !call.is_empty() && call.len() + job.len() > max_batch {
            total += backend.seconds(&call)?;
            call.clear();
        }
        call.extend_from_slice(job);
    }
    let last = if call.len() == sizes.len() { own } else { backend.seconds(&call)? };
    Some(total + last)
}

/// The share of an ended call's time the next batch may wait for that call's clients to come back.
pub const REJOIN_SHARE: f64 = 0.01;
/// The longest the next batch waits for them.
pub const REJOIN_MAX: Duration = Duration::from_millis(20);

/// The rejoin wait after a call of `series` series that took `took`, with `queued` series waiting when it ended:
/// until when, and for how many series waiting in all.
fn rejoin_after(took: Duration, series: usize, queued: usize, max_batch: usize) -> (Instant, usize) {
    let wait = took.mul_f64(REJOIN_SHARE).min(REJOIN_MAX);
    (Instant::now() + wait, (queued + series).min(max_batch))
}

/// Series of the queue kept for small requests (of at most this many series): a tenth of its capacity, beyond
/// it. A request of more series may fill the capacity, and a small one still finds room.
fn queue_reserve(capacity: usize) -> usize {
    capacity / 10
}

/// The refusal of a request whose estimate does not fit behind `ahead` seconds of estimated work: 429 with the
/// seconds until enough of that work is done.
fn backlog(ahead: f64, a: Allowance) -> ServeError {
    let wait = (ahead - a.ahead).ceil().clamp(1.0, 3600.0) as u64;
    ServeError::Overloaded {
        kind: Overload::Backlog,
        message: format!(
            "the engine has an estimated {ahead:.1} s of work ahead of this request, whose own estimate is {:.2} s: \
             it may wait behind at most {:.1} s to finish within {:.1} s (estimates count {}× in admission); \
             retry after the Retry-After delay",
            a.own,
            a.ahead.max(0.0),
            a.time,
            super::cost::MARGIN
        ),
        retry_after_s: wait,
    }
}

/// Waits for a batch to be due and takes it (see the module docs), or returns `None` when closed and empty.
fn next_batch(shared: &Shared, backend: &dyn Backend) -> Option<Vec<Job>> {
    let cfg = shared.config;
    let mut st = shared.lock();
    loop {
        let Some(oldest) = st.queue.front().map(|j| j.enqueued) else {
            if st.closed {
                return None;
            }
            st = shared.wake.wait(st).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        let due = oldest + cfg.queue_delay;
        let now = Instant::now();
        // waiting for the last call's clients to come back (see the module docs, "Rejoin")
        let rejoin = st.rejoin.filter(|&(until, want)| now < until && st.queued < want && !st.closed);
        if rejoin.is_none() && (st.queued >= cfg.max_batch || st.closed || now >= due) {
            break;
        }
        let until = match rejoin {
            Some((until, _)) if now < due => until.min(due),
            Some((until, _)) => until,
            None => due,
        };
        st = shared.wake.wait_timeout(st, until - now).unwrap_or_else(|p| p.into_inner()).0;
    }
    st.rejoin = None;
    let now = Instant::now();
    let mut batch: Vec<Job> = Vec::new();
    let mut series = 0;
    // the batch's series counts and earliest deadline, for the packed call's estimate
    let mut sizes: Vec<RequestSize> = Vec::new();
    let mut earliest: Option<Instant> = None;
    // the estimate of the batch as packed so far: its first request's own (admission's), then each packed
    // call's as the deadline check below makes it, so the call that runs is not planned once more
    let mut priced: Option<f64> = None;
    while let Some(job) = st.queue.front() {
        let n = job.requests.len();
        let gone = job.reply.is_closed();
        // A job that can no longer finish by its deadline (by its own estimate) is answered now, not run.
        let late = job.deadline <= now || job.seconds.is_some_and(|t| now + secs(t) > job.deadline);
        if !gone && !late && !batch.is_empty() {
            if series + n > cfg.max_batch {
                break;
            }
            // Would the packed call make any member (this one included) miss its deadline? (Its estimate counts
            // with the margin admission gives every estimate.)
            let packed: Vec<RequestSize> = sizes.iter().chain(&job.sizes).copied().collect();
            let by = earliest.map_or(job.deadline, |e| e.min(job.deadline));
            let estimate = backend.seconds(&packed);
            if estimate.is_some_and(|t| now + secs(t * super::cost::MARGIN) > by) {
                break;
            }
            priced = estimate;
        }
        let job = st.pop().expect("front exists");
        if gone {
            shared.metrics.abandoned.inc();
        } else if late {
            shared.metrics.reject(Overload::Deadline.label());
            let waited = now - job.enqueued;
            let why = match job.deadline <= now {
                true => "passed".to_string(),
                false => format!(
                    "cannot be met (its estimated engine time is {:.2} s, {:.2} s are left)",
                    job.seconds.unwrap_or(0.0),
                    job.deadline.saturating_duration_since(now).as_secs_f64()
                ),
            };
            let _ = job.reply.send(Err(ServeError::overloaded(
                Overload::Deadline,
                format!("the request's deadline {why} after {} ms in the queue", waited.as_millis()),
            )));
        } else {
            if batch.is_empty() {
                priced = job.seconds;
            }
            series += n;
            sizes.extend_from_slice(&job.sizes);
            earliest = Some(earliest.map_or(job.deadline, |e| e.min(job.deadline)));
            batch.push(job);
        }
    }
    shared.metrics.queued_series.set(st.queued as i64);
    st.running = !batch.is_empty();
    // The running call's end, by the engine's estimate of this merged call (what admission priced it at: see
    // `finish_estimate`; a lone request's own); else by its members' own estimates.
    st.running_until = match batch.is_empty() {
        true => None,
        false => priced
            .or_else(|| backend.seconds(&sizes))
            .or_else(|| batch.iter().map(|j| j.seconds).sum::<Option<f64>>())
            .map(|t| now + secs(t)),
    };
    if batch.is_empty() {
        // Everything due was dropped: nothing runs, which those waiting for idle must hear.
        shared.idle.notify_all();
    }
    Some(batch)
}

fn engine_loop(shared: &Shared, backend: &dyn Backend) {
    let mut calls = 0u64;
    while let Some(batch) = next_batch(shared, backend) {
        if batch.is_empty() {
            continue;
        }
        calls += 1;
        if test_panic_calls().contains(&calls) {
            engines::pool::test_fault::arm();
        }
        run_batch(shared, backend, batch);
        let mut st = shared.lock();
        st.running = false;
        st.running_until = None;
        drop(st);
        shared.idle.notify_all();
    }
    shared.idle.notify_all();
}

/// The live engine calls (1-based) in which a panic is injected while a runner is out of its pool: a test-only
/// fault, from the `TOTOC_TEST_PANIC_AT_CALL` variable (comma-separated call numbers) of the server's own
/// environment, read once. Nothing a client sends can trigger it.
fn test_panic_calls() -> &'static [u64] {
    static CALLS: std::sync::OnceLock<Vec<u64>> = std::sync::OnceLock::new();
    CALLS.get_or_init(|| {
        std::env::var("TOTOC_TEST_PANIC_AT_CALL")
            .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
            .unwrap_or_default()
    })
}

/// Seconds as a duration, for estimates (finite and non-negative, capped at a day).
fn secs(t: f64) -> Duration {
    Duration::from_secs_f64(if t.is_finite() { t.clamp(0.0, 86_400.0) } else { 86_400.0 })
}

/// A test-only pause before every graph run of an engine call (live or shadow), from the
/// `TOTOC_TEST_STEP_DELAY_MS` variable of the server's own environment, read once: it makes the tiny test engine's
/// calls long enough to disconnect, time out or SIGTERM in the middle of one. Nothing a client sends sets it.
pub(crate) fn test_step_delay() {
    static DELAY: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    let delay = DELAY.get_or_init(|| {
        std::env::var("TOTOC_TEST_STEP_DELAY_MS").ok().and_then(|v| v.parse().ok()).map(Duration::from_millis)
    });
    if let Some(d) = delay {
        std::thread::sleep(*d);
    }
}

/// One job of a running batch: what the cancellation check and the answer need.
struct Running {
    enqueued: Instant,
    deadline: Instant,
    span: tracing::Span,
    reply: Reply,
    _hold: Hold,
}

impl Running {
    /// Whether nobody waits for this job's answer any more (its client left, or its deadline passed).
    fn unwanted(&self, now: Instant) -> bool {
        self.reply.is_closed() || now >= self.deadline
    }
}

/// One engine call for the whole batch; each job gets its slice of the results.
fn run_batch(shared: &Shared, backend: &dyn Backend, batch: Vec<Job>) {
    let m = &shared.metrics;
    let start = Instant::now();
    let sizes: Vec<usize> = batch.iter().map(|j| j.requests.len()).collect();
    let total: usize = sizes.iter().sum();
    let mut jobs = Vec::with_capacity(batch.len());
    let mut requests = Vec::with_capacity(total);
    let mut ids = Vec::with_capacity(batch.len());
    for job in batch {
        m.queue_wait_seconds.observe((start - job.enqueued).as_secs_f64());
        requests.extend(job.requests);
        ids.push(job.request_id);
        jobs.push(Running {
            enqueued: job.enqueued,
            deadline: job.deadline,
            span: job.span,
            reply: job.reply,
            _hold: job.hold,
        });
    }
    // The batch span lists every request id, so each log line of the call names the requests it served.
    let batch_span = tracing::info_span!("batch", request_ids = %ids.join(","), series = total);
    let _entered = batch_span.enter();
    let unwanted = || {
        test_step_delay();
        let now = Instant::now();
        jobs.iter().all(|j| j.unwanted(now))
    };
    let outcome = catch_unwind(AssertUnwindSafe(|| backend.forecast_until(requests, &unwanted)));
    let compute = start.elapsed();
    m.compute_seconds.observe(compute.as_secs_f64());
    m.batch_requests.observe(jobs.len() as f64);
    let health = shared.health.get();
    let mut results = match outcome {
        Ok(r) if r.len() == total => r,
        Ok(r) => {
            let msg = format!("the engine returned {} results for {total} requests", r.len());
            tracing::error!("{msg}");
            if let Some(h) = health {
                h.engine_failed(&msg, m);
            }
            fail_all(jobs, "the engine failed on this batch (a bug in totoc; see the server log)");
            return;
        }
        Err(_) => {
            tracing::error!(series = total, "the engine panicked; its batch is answered with 500");
            if let Some(h) = health {
                h.engine_failed("a panic in the engine", m);
            }
            fail_all(jobs, "the engine failed on this batch (a bug in totoc; see the server log)");
            return;
        }
    };
    if results.iter().any(|r| r.as_ref().is_err_and(|e| e.is_cancelled())) {
        let now = Instant::now();
        let gone = jobs.iter().all(|j| j.reply.is_closed());
        let reason = if gone { "client_gone" } else { "deadline" };
        m.cancelled.get_or_create(&ReasonLabels { reason: reason.into() }).inc();
        tracing::info!(reason, ms = compute.as_secs_f64() * 1e3, "engine call cancelled between graph runs");
        for j in jobs {
            let waited = now - j.enqueued;
            let _ = j.reply.send(Err(ServeError::overloaded(
                Overload::Deadline,
                format!(
                    "the request's deadline passed after {} ms; its engine call was stopped",
                    waited.as_millis()
                ),
            )));
        }
        return;
    }
    if let Some(h) = health {
        // A request's own refusal (4xx) is not the engine's failure; an engine error is.
        match results.iter().find_map(|r| r.as_ref().err().filter(|e| !e.is_request_error())) {
            Some(e) => {
                h.engine_failed(&e.to_string(), m);
            }
            None => h.engine_ok(),
        }
    }
    // Batch occupancy: series per engine call, and per graph run the share of its bucket's rows that held work
    // (the engine packs the call onto its shape buckets; a bucket label is one of the engine's fixed graphs).
    m.batch_series.observe(total as f64);
    for (bucket, used, rows, runs) in backend.last_runs() {
        let occupancy = m.bucket_occupancy.get_or_create(&BucketLabels { bucket });
        for _ in 0..runs {
            occupancy.observe(used as f64 / rows.max(1) as f64);
        }
    }
    // The rejoin wait (see the module docs) counts the series waiting before any client is answered: one
    // answered and back before this thread took the lock would otherwise be awaited as well as counted, and
    // a lone client would wait the whole rejoin time for a second request.
    {
        let mut st = shared.lock();
        st.rejoin = Some(rejoin_after(compute, total, st.queued, shared.config.max_batch));
    }
    // Answer in order: each job takes the next `n` results.
    let mut rest = results.split_off(0).into_iter();
    for (job, n) in jobs.into_iter().zip(sizes) {
        let mine: Vec<_> = rest.by_ref().take(n).collect();
        job.span.in_scope(|| {
            tracing::debug!(
                series = n,
                batch_series = total,
                queue_ms = (start - job.enqueued).as_secs_f64() * 1e3,
                compute_ms = compute.as_secs_f64() * 1e3,
                "engine call done"
            )
        });
        let _ = job.reply.send(Ok(Done {
            results: mine,
            queue_wait: start - job.enqueued,
            compute,
            batch_series: total,
        }));
    }
}

fn fail_all(jobs: Vec<Running>, msg: &str) {
    for j in jobs {
        let _ = j.reply.send(Err(ServeError::Internal(msg.to_string())));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Echoes each request's first value as its mean, records every call's size, and sleeps `delay` per call;
    /// with a `cost` (per call, per series), estimates a call of n series at `per call + n × per series` seconds.
    struct Echo {
        calls: Mutex<Vec<usize>>,
        delay: Duration,
        panics: AtomicUsize,
        cost: Option<(f64, f64)>,
    }

    impl Echo {
        fn new(delay: Duration) -> Arc<Self> {
            Arc::new(Echo { calls: Mutex::default(), delay, panics: AtomicUsize::new(0), cost: None })
        }

        fn costing(delay: Duration, cost: f64) -> Arc<Self> {
            Self::costing_calls(delay, 0.0, cost)
        }

        /// A call of n series estimated at `per_call + n × per_series` seconds: work shared by a call's series
        /// (as a token-by-token family's cached steps are) beside each series' own.
        fn costing_calls(delay: Duration, per_call: f64, per_series: f64) -> Arc<Self> {
            let cost = Some((per_call, per_series));
            Arc::new(Echo { calls: Mutex::default(), delay, panics: AtomicUsize::new(0), cost })
        }
    }

    impl Backend for Echo {
        fn seconds(&self, sizes: &[RequestSize]) -> Option<f64> {
            self.cost.map(|(call, series)| call + series * sizes.len() as f64)
        }

        /// Sleeps `delay` in 10 ms steps, asking `cancel` between them as the engine does between graph runs.
        fn forecast_until(
            &self,
            reqs: Vec<ForecastRequest>,
            cancel: &(dyn Fn() -> bool + Sync),
        ) -> Vec<engines::Result<ForecastResponse>> {
            let end = Instant::now() + self.delay;
            while Instant::now() < end {
                if cancel() {
                    self.calls.lock().unwrap().push(usize::MAX);
                    return reqs
                        .iter()
                        .map(|_| Err(engines::Error::Cancelled { at: "step".into() }))
                        .collect();
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            self.forecast(reqs)
        }

        fn forecast(&self, reqs: Vec<ForecastRequest>) -> Vec<engines::Result<ForecastResponse>> {
            self.calls.lock().unwrap().push(reqs.len());
            if self.panics.load(Ordering::SeqCst) > 0 {
                self.panics.fetch_sub(1, Ordering::SeqCst);
                panic!("engine bug");
            }
            reqs.into_iter()
                .map(|r| {
                    Ok(ForecastResponse {
                        id: None,
                        mean: Some(vec![vec![r.target[0][0].unwrap()]]),
                        median: None,
                        quantiles: vec![],
                        samples: None,
                        context_truncated: None,
                        buckets: Vec::new(),
                        profile: "p".into(),
                        engine: "echo".into(),
                        sampler: None,
                        engine_sha256: None,
                    })
                })
                .collect()
        }
    }

    fn series(x: f32) -> ForecastRequest {
        ForecastRequest {
            id: None,
            target: vec![vec![Some(x)]],
            id_mask: vec![0],
            horizon: 1,
            samples: 0,
            quantiles: vec![],
            seed: 0,
            strict_context: false,
            context_cut: None,
            ..ForecastRequest::default()
        }
    }

    fn config(delay_ms: u64, max_batch: usize, capacity: usize) -> BatcherConfig {
        BatcherConfig { queue_delay: Duration::from_millis(delay_ms), max_batch, capacity }
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    fn wait(rx: oneshot::Receiver<Result<Done, ServeError>>) -> Result<Done, ServeError> {
        rx.blocking_recv().expect("answered")
    }

    fn means(d: &Done) -> Vec<f32> {
        d.results.iter().map(|r| r.as_ref().unwrap().point()[0][0]).collect()
    }

    #[test]
    fn requests_within_the_queue_delay_share_one_engine_call_and_keep_their_results() {
        let echo = Echo::new(Duration::ZERO);
        let b = Batcher::start(echo.clone(), config(200, 64, 64), Arc::new(Metrics::new()));
        let rx1 = b.submit(vec![series(1.0), series(2.0)], far(), "t", None).unwrap();
        let rx2 = b.submit(vec![series(3.0)], far(), "t", None).unwrap();
        let rx3 = b.submit(vec![series(4.0), series(5.0), series(6.0)], far(), "t", None).unwrap();
        let (d1, d2, d3) = (wait(rx1).unwrap(), wait(rx2).unwrap(), wait(rx3).unwrap());
        assert_eq!((means(&d1), means(&d2), means(&d3)), (vec![1.0, 2.0], vec![3.0], vec![4.0, 5.0, 6.0]));
        assert_eq!(*echo.calls.lock().unwrap(), vec![6]);
        assert_eq!(d1.batch_series, 6);
    }

    #[test]
    fn batches_hold_at_most_max_batch_series_of_whole_requests() {
        let echo = Echo::new(Duration::ZERO);
        let b = Batcher::start(echo.clone(), config(300, 3, 64), Arc::new(Metrics::new()));
        let rxs: Vec<_> = [2, 2, 1, 5]
            .iter()
            .map(|&n| b.submit((0..n).map(|i| series(i as f32)).collect(), far(), "t", None).unwrap())
            .collect();
        for rx in rxs {
            wait(rx).unwrap();
        }
        // [2] (2+2 > 3), then [2, 1], then the 5-series request alone.
        assert_eq!(*echo.calls.lock().unwrap(), vec![2, 3, 5]);
    }

    #[test]
    fn a_full_queue_refuses_at_once_and_oversized_requests_are_bad_requests() {
        let echo = Echo::new(Duration::from_millis(300));
        let m = Arc::new(Metrics::new());
        let b = Batcher::start(echo, config(0, 1, 2), m.clone());
        let first = b.submit(vec![series(1.0)], far(), "t", None).unwrap();
        // Let the engine thread take the first request, then fill the queue.
        std::thread::sleep(Duration::from_millis(50));
        let _a = b.submit(vec![series(2.0), series(3.0)], far(), "t", None).unwrap();
        let e = b.submit(vec![series(4.0)], far(), "t", None).unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::TOO_MANY_REQUESTS);
        assert!(e.to_string().contains("queue is full"), "{e}");
        let e = b.submit(vec![series(1.0); 3], far(), "t", None).unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::BAD_REQUEST);
        assert!(m.render().contains("totoc_rejected_total{reason=\"queue_full\"} 1"));
        wait(first).unwrap();
    }

    #[test]
    fn small_requests_find_room_beside_a_large_one_waiting() {
        let echo = Echo::new(Duration::from_millis(300));
        let b = Batcher::start(echo, config(0, 1, 20), Arc::new(Metrics::new()));
        let busy = b.submit(vec![series(1.0)], far(), "t", None).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        // a large request takes the whole capacity while it waits
        let large = b.submit(vec![series(2.0); 20], far(), "t", None).unwrap();
        // small ones (at most 2 series: a tenth) use the reserve of 2 series
        let small = b.submit(vec![series(3.0); 2], far(), "t", None).unwrap();
        let e = b.submit(vec![series(4.0)], far(), "t", None).unwrap_err();
        assert!(e.to_string().contains("queue is full (22 of 22 series waiting)"), "{e}");
        // a request of 3 series is not small: the capacity alone
        let e = b.submit(vec![series(4.0); 3], far(), "t", None).unwrap_err();
        assert!(e.to_string().contains("of 20 series waiting"), "{e}");
        for rx in [busy, large, small] {
            wait(rx).unwrap();
        }
    }

    #[test]
    fn abandoned_requests_give_their_place_to_live_ones() {
        let echo = Echo::new(Duration::ZERO);
        let b = Batcher::start(echo.clone(), config(300, 64, 2), Arc::new(Metrics::new()));
        let gone = b.submit(vec![series(1.0), series(2.0)], far(), "t", None).unwrap();
        drop(gone);
        let live = b.submit(vec![series(3.0)], far(), "t", None).unwrap();
        assert_eq!(means(&wait(live).unwrap()), vec![3.0]);
        assert_eq!(*echo.calls.lock().unwrap(), vec![1]);
    }

    #[test]
    fn expired_requests_are_answered_503_without_running() {
        let echo = Echo::new(Duration::from_millis(200));
        let b = Batcher::start(echo.clone(), config(0, 1, 8), Arc::new(Metrics::new()));
        let busy = b.submit(vec![series(1.0)], far(), "t", None).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let soon = Instant::now() + Duration::from_millis(50);
        let late = b.submit(vec![series(2.0)], soon, "t", None).unwrap();
        let e = wait(late).unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert!(e.to_string().contains("deadline passed"), "{e}");
        wait(busy).unwrap();
        assert_eq!(*echo.calls.lock().unwrap(), vec![1]);
    }

    #[test]
    fn an_engine_panic_fails_its_batch_and_the_thread_carries_on() {
        let echo = Echo::new(Duration::ZERO);
        echo.panics.store(1, Ordering::SeqCst);
        let b = Batcher::start(echo, config(0, 8, 8), Arc::new(Metrics::new()));
        let e = wait(b.submit(vec![series(1.0)], far(), "t", None).unwrap()).unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::INTERNAL_SERVER_ERROR);
        let d = wait(b.submit(vec![series(7.0)], far(), "t", None).unwrap()).unwrap();
        assert_eq!(means(&d), vec![7.0]);
    }

    #[test]
    fn a_call_nobody_waits_for_stops_between_steps_and_is_counted() {
        let echo = Echo::new(Duration::from_secs(5));
        let m = Arc::new(Metrics::new());
        let b = Batcher::start(echo.clone(), config(0, 8, 8), m.clone());
        let rx = b.submit(vec![series(1.0)], far(), "t", None).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        drop(rx); // the client leaves
        assert!(b.wait_idle(Duration::from_secs(2)), "the call ran on after its client left");
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(*echo.calls.lock().unwrap(), vec![usize::MAX]);
        assert!(m.render().contains("totoc_cancelled_total{reason=\"client_gone\"} 1"), "{}", m.render());
        // A deadline passing mid-call stops it too, and its client hears 503.
        let rx = b.submit(vec![series(1.0)], Instant::now() + Duration::from_millis(100), "t", None).unwrap();
        let e = wait(rx).unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert!(m.render().contains("totoc_cancelled_total{reason=\"deadline\"} 1"));
    }

    #[test]
    fn a_job_keeps_what_it_holds_until_its_call_ends_even_when_its_client_left() {
        let echo = Echo::new(Duration::from_millis(300));
        let b = Batcher::start(echo, config(0, 8, 8), Arc::new(Metrics::new()));
        let held = Arc::new(());
        let rx = b.submit_holding(vec![series(1.0)], far(), "t", None, Box::new(held.clone())).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        drop(rx); // the client leaves mid-call
        assert_eq!(Arc::strong_count(&held), 2, "the running job still holds it");
        assert!(b.wait_idle(Duration::from_secs(5)));
        assert_eq!(Arc::strong_count(&held), 1, "given back with the job");
        // Queued and then dropped (its client gone) without running: given back too.
        let queued = Arc::new(());
        let busy = b.submit(vec![series(1.0)], far(), "t", None).unwrap();
        let rx = b.submit_holding(vec![series(2.0)], far(), "t", None, Box::new(queued.clone())).unwrap();
        drop(rx);
        wait(busy).unwrap();
        assert!(b.wait_idle(Duration::from_secs(5)));
        assert_eq!(Arc::strong_count(&queued), 1);
    }

    #[test]
    fn engine_failures_reach_the_health_policy_and_answers_reset_it() {
        use super::super::readiness::{HealthPolicy, Phase};
        let echo = Echo::new(Duration::ZERO);
        let m = Arc::new(Metrics::new());
        let r = Arc::new(Readiness::new(HealthPolicy { failures: 2, window: Duration::from_secs(30) }));
        r.drain(&m); // not ready: engine failures must not flip it
        let b = Batcher::start(echo.clone(), config(0, 8, 8), m.clone());
        b.report_to(r.clone());
        echo.panics.store(2, Ordering::SeqCst);
        for _ in 0..2 {
            wait(b.submit(vec![series(1.0)], far(), "t", None).unwrap()).unwrap_err();
        }
        assert_eq!(r.phase(), Phase::Draining);
        assert!(m.render().contains("totoc_engine_failures_total 2"));
        assert!(b.engine_alive());
    }

    #[test]
    fn a_request_is_not_packed_where_the_call_would_make_a_member_miss_its_deadline() {
        // 0.3 s per series by the estimate: two series together take 0.6 s, 1.2 s with admission's margin, more
        // than the second one's deadline leaves when the batch forms (~0.9 s).
        let echo = Echo::costing(Duration::ZERO, 0.3);
        let b = Batcher::start(echo.clone(), config(100, 64, 64), Arc::new(Metrics::new()));
        let soon = Instant::now() + Duration::from_millis(1000);
        let a = b.submit(vec![series(1.0)], far(), "t", None).unwrap();
        let s = b.submit(vec![series(2.0)], soon, "t", None).unwrap();
        assert_eq!(means(&wait(a).unwrap()), vec![1.0]);
        assert_eq!(means(&wait(s).unwrap()), vec![2.0]);
        assert_eq!(
            *echo.calls.lock().unwrap(),
            vec![1, 1],
            "packed together, the second would end past its deadline"
        );
        // With time for both, they share a call.
        let a = b.submit(vec![series(1.0)], far(), "t", None).unwrap();
        let s = b.submit(vec![series(2.0)], far(), "t", None).unwrap();
        wait(a).unwrap();
        wait(s).unwrap();
        assert_eq!(*echo.calls.lock().unwrap(), vec![1, 1, 2]);
    }

    #[test]
    fn the_work_ahead_and_a_requests_own_must_fit_its_allowance() {
        let echo = Echo::new(Duration::from_millis(300));
        let m = Arc::new(Metrics::new());
        let b = Batcher::start(echo.clone(), config(0, 64, 64), m.clone());
        let allow = |own: f64, ahead: f64| Some(Allowance { own, ahead, time: 30.0 });
        let first = b.submit(vec![series(1.0)], far(), "t", allow(20.0, 7.0)).unwrap();
        // 20 s ahead (queued or running, by its estimate), 17 allowed: refused, retry when 3 s of it are done
        let e = b.submit(vec![series(2.0)], far(), "t", allow(10.0, 17.0)).unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(e.retry_after_s(), Some(3));
        assert!(e.to_string().contains("estimated 20.0 s of work ahead"), "{e}");
        assert!(m.render().contains("totoc_rejected_total{reason=\"engine_backlog\"} 1"), "{}", m.render());
        // a cheap one still fits behind it
        let cheap = b.submit(vec![series(3.0)], far(), "t", allow(1.0, 28.0)).unwrap();
        assert_eq!(means(&wait(first).unwrap()), vec![1.0]);
        assert_eq!(means(&wait(cheap).unwrap()), vec![3.0]);
        // once the engine is idle nothing is ahead
        assert!(b.wait_idle(Duration::from_secs(2)));
        let again = b.submit(vec![series(2.0)], far(), "t", allow(10.0, 17.0)).unwrap();
        assert_eq!(means(&wait(again).unwrap()), vec![2.0]);
    }

    /// Counts the estimates asked of it.
    struct Counting(AtomicUsize);

    impl Backend for Counting {
        fn seconds(&self, sizes: &[RequestSize]) -> Option<f64> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Some(sizes.len() as f64)
        }

        /// No results: the batch is answered with an error, which is all these tests need.
        fn forecast(&self, _: Vec<ForecastRequest>) -> Vec<engines::Result<ForecastResponse>> {
            Vec::new()
        }
    }

    #[test]
    fn a_request_alone_in_its_call_is_priced_at_its_own_estimate() {
        let now = Instant::now();
        let st = State {
            queue: VecDeque::new(),
            queued: 0,
            running: true,
            running_until: Some(now + Duration::from_secs(2)),
            queued_seconds: 0.0,
            rejoin: None,
            closed: false,
        };
        let counting = Counting(AtomicUsize::new(0));
        let sizes = [RequestSize::of(&series(1.0)), RequestSize::of(&series(2.0))];
        let done = finish_estimate(&st, &counting, 64, &sizes, 0.75, now).unwrap();
        assert!((done - 2.75).abs() < 1e-9, "{done}");
        assert_eq!(counting.0.load(Ordering::SeqCst), 0, "admission's own estimate, not a second one");
        // queued and run alone: neither admission nor the running call's end plans it again
        let counting = Arc::new(Counting(AtomicUsize::new(0)));
        let b = Batcher::start(counting.clone(), config(0, 64, 64), Arc::new(Metrics::new()));
        let allow = Some(Allowance { own: 0.5, ahead: 10.0, time: 30.0 });
        assert!(wait(b.submit(vec![series(1.0)], far(), "t", allow).unwrap()).is_err());
        assert_eq!(counting.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn admission_prices_the_queue_as_the_merged_calls_the_batcher_will_run() {
        // a call of n series is estimated at 0.9 + 0.1 n s: one series alone 1.0 s. Each request may be answered
        // within 4 s by its estimate (own 1.0, 3.0 ahead). The first runs (1.0 s ahead at most); the next seven
        // wait for one call of up to 7 series (at most 1.6 s), so all fit: summed as if they ran one after
        // another (1.0 each), the fifth would have 4.0 s ahead of it and be refused.
        let echo = Echo::costing_calls(Duration::from_millis(600), 0.9, 0.1);
        let m = Arc::new(Metrics::new());
        let b = Batcher::start(echo.clone(), config(0, 64, 64), m.clone());
        let allow = Some(Allowance { own: 1.0, ahead: 3.0, time: 8.0 });
        let first = b.submit(vec![series(0.0)], far(), "t", allow).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let queued: Vec<_> = (1..8)
            .map(|i| {
                b.submit(vec![series(i as f32)], far(), "t", allow)
                    .unwrap_or_else(|e| panic!("request {i} refused: {e}"))
            })
            .collect();
        assert_eq!(means(&wait(first).unwrap()), vec![0.0]);
        for (i, rx) in queued.into_iter().enumerate() {
            assert_eq!(means(&wait(rx).unwrap()), vec![(i + 1) as f32]);
        }
        assert_eq!(*echo.calls.lock().unwrap(), vec![1, 7], "the seven queued ran as one call");
        // calls are still bounded by max_batch: with 2 series a call, seven queued make four calls (0.9 + 0.2 +
        // 0.9 + 0.2 + ...), so the queue's end is past the allowance and the last ones are refused
        let b = Batcher::start(echo.clone(), config(0, 2, 64), m.clone());
        let busy = b.submit(vec![series(0.0)], far(), "t", allow).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let refused =
            (1..8).filter(|&i| b.submit(vec![series(i as f32)], far(), "t", allow).is_err()).count();
        assert!(refused >= 3, "{refused} refused");
        wait(busy).unwrap();
    }

    #[test]
    fn the_next_batch_waits_briefly_for_the_clients_of_the_call_that_ended() {
        // a closed-loop client sends again 5 ms after its answer; two others queue while its first call runs
        let echo = Echo::new(Duration::from_millis(2000));
        let b = Arc::new(Batcher::start(echo.clone(), config(0, 64, 64), Arc::new(Metrics::new())));
        let first = b.submit(vec![series(1.0)], far(), "t", None).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let others: Vec<_> =
            (2..4).map(|i| b.submit(vec![series(i as f32)], far(), "t", None).unwrap()).collect();
        let b2 = b.clone();
        let client = std::thread::spawn(move || {
            wait(first).unwrap();
            std::thread::sleep(Duration::from_millis(5));
            wait(b2.submit(vec![series(1.0)], far(), "t", None).unwrap()).unwrap()
        });
        for rx in others {
            wait(rx).unwrap();
        }
        assert_eq!(means(&client.join().unwrap()), vec![1.0]);
        // without the wait the two queued would have run at once, and the client's second request after them
        assert_eq!(*echo.calls.lock().unwrap(), vec![1, 3], "the client rejoined the next call");
        // a lone client is not delayed: the series awaited is its own (nothing waits for more)
        let (took, want) = (Duration::from_secs(1), 1);
        let (until, awaited) = rejoin_after(took, want, 0, 64);
        assert_eq!(awaited, 1);
        assert!(until <= Instant::now() + REJOIN_MAX);
    }

    #[test]
    fn a_request_that_can_no_longer_finish_by_its_deadline_is_answered_without_running() {
        let echo = Echo::new(Duration::from_millis(300));
        let b = Batcher::start(echo.clone(), config(0, 1, 8), Arc::new(Metrics::new()));
        let busy = b.submit(vec![series(1.0)], far(), "t", None).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        // 0.5 s to go, 0.4 s of its own: by its turn (after ~0.3 s) it cannot finish
        let deadline = Instant::now() + Duration::from_millis(500);
        let allowance = Some(Allowance { own: 0.4, ahead: 10.0, time: 30.0 });
        let doomed = b.submit(vec![series(2.0)], deadline, "t", allowance).unwrap();
        let e = wait(doomed).unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert!(e.to_string().contains("cannot be met (its estimated engine time is 0.40 s"), "{e}");
        assert!(Instant::now() < deadline, "answered before its deadline, not at it");
        wait(busy).unwrap();
        assert_eq!(*echo.calls.lock().unwrap(), vec![1]);
    }

    #[test]
    fn close_finishes_what_is_queued_then_refuses() {
        let echo = Echo::new(Duration::from_millis(20));
        let b = Batcher::start(echo, config(10_000, 64, 64), Arc::new(Metrics::new()));
        let rx = b.submit(vec![series(1.0)], far(), "t", None).unwrap();
        b.close();
        assert_eq!(means(&wait(rx).unwrap()), vec![1.0]);
        let e = b.submit(vec![series(1.0)], far(), "t", None).unwrap_err();
        assert!(e.to_string().contains("shutting down"), "{e}");
        assert!(b.wait_idle(Duration::ZERO));
    }
}
