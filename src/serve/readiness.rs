//! The readiness gate and the server's health. The server is live as soon as it listens, but reports ready only
//! once the loaded engine has proven itself: its graphs are warmed up and timed ([`Engine::warm_up`]: every bucket,
//! so no live request pays for a first load, unless its family keeps start-up proportionate by warming a subset
//! and deriving the others' rates: those load when a call first needs them), then the bundle's golden toto-ts cases run through it exactly as `totoc verify` runs
//! them. A failing first check keeps the server unready (a load balancer never sends it traffic), logs the
//! verify table and shows in `/metrics` (`totoc_golden_checks{result="failed"}`, `totoc_verified 0`); it is run
//! again after [`FIRST_RETRY`], doubling each time, and once `--ready-attempts` runs have failed the process
//! exits non-zero with the reason (a pod is restarted rather than left unready for good). A bundle without
//! golden cases becomes ready after the warm-up, and its log, metrics and model metadata say it is unverified.
//!
//! Readiness then follows the engine: `--unready-after-failures N` engine-side failures in a row (a panic, an
//! engine error answered 500; never a client's 4xx), all within `--failure-window-s`, make the server unready
//! ([`Phase::Unhealthy`]); the health thread then re-runs the gate (warm-up and golden cases, which also rebuild
//! any graph a panic lost) every few seconds, and a passing re-run makes it ready again. Liveness fails only
//! when the engine thread itself is gone (see `Batcher::engine_alive`).
//!
//! [`Readiness`] is the state every front end reads: inference is refused (503 with `Retry-After`) unless it is
//! [`Phase::Ready`]; SIGTERM moves it to [`Phase::Draining`] for good. Every change is one transition under one
//! lock, so no check-then-set can move the server out of `Draining`.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use engines::compare::find_cases;
use engines::engine::Engine;

use super::error::{Overload, ServeError};
use super::metrics::{Metrics, ResultLabels};

/// Where the server is in its life.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    /// Warming up and running the golden cases.
    Verifying,
    /// Serving; `verified` is false for a bundle without golden cases.
    Ready { verified: bool, summary: String },
    /// The first gate failed; the server stays unready.
    Failed(String),
    /// Engine-side failures in a row after ready; the gate is re-run until it passes.
    Unhealthy(String),
    /// SIGTERM: finishing in-flight requests.
    Draining,
}

/// When engine failures make the server unready (`--unready-after-failures`, `--failure-window-s`).
#[derive(Debug, Clone, Copy)]
pub struct HealthPolicy {
    /// Engine-side failures in a row (0: never unready for failures).
    pub failures: u32,
    /// ... all within this window.
    pub window: Duration,
}

impl Default for HealthPolicy {
    fn default() -> Self {
        HealthPolicy { failures: 5, window: Duration::from_secs(30) }
    }
}

/// How often the health thread re-runs the gate while unhealthy.
const RECHECK_EVERY: Duration = Duration::from_secs(2);

/// The wait before the first gate is run again after it failed; it doubles each time, up to [`LONGEST_RETRY`].
pub const FIRST_RETRY: Duration = Duration::from_secs(2);
const LONGEST_RETRY: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct State {
    phase: Phase,
    /// When each of the current run of engine failures happened (at most `policy.failures` kept).
    failures: VecDeque<Instant>,
    /// The server was ready when SIGTERM came: requests already accepted (still uploading, queued) are served.
    ready_at_drain: bool,
}

/// The shared readiness state.
#[derive(Debug)]
pub struct Readiness {
    state: Mutex<State>,
    policy: HealthPolicy,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness::new(HealthPolicy::default())
    }
}

impl Readiness {
    pub fn new(policy: HealthPolicy) -> Self {
        Readiness {
            state: Mutex::new(State {
                phase: Phase::Verifying,
                failures: VecDeque::new(),
                ready_at_drain: false,
            }),
            policy,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn phase(&self) -> Phase {
        self.lock().phase.clone()
    }

    /// Moves to the phase `to` returns for the current one (`None`: stays), as one step under the lock; returns
    /// whether it moved.
    fn transition(&self, metrics: &Metrics, to: impl FnOnce(&Phase) -> Option<Phase>) -> bool {
        let mut st = self.lock();
        let Some(next) = to(&st.phase) else { return false };
        metrics.ready.set(i64::from(matches!(next, Phase::Ready { .. })));
        st.phase = next;
        true
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.lock().phase, Phase::Ready { .. })
    }

    /// `Ok` when inference may run; else the 503 that says why.
    pub fn check(&self) -> Result<(), ServeError> {
        match self.phase() {
            Phase::Ready { .. } => Ok(()),
            Phase::Verifying => Err(ServeError::overloaded(
                Overload::NotReady,
                "not ready yet: the engine is warming up and running its golden cases",
            )),
            Phase::Failed(why) => Err(ServeError::overloaded(
                Overload::NotReady,
                format!("not ready: the readiness gate failed ({why}); see the server log and /metrics"),
            )),
            Phase::Unhealthy(why) => Err(ServeError::overloaded(
                Overload::NotReady,
                format!("not ready: {why}; the engine is being re-checked"),
            )),
            Phase::Draining => Err(ServeError::overloaded(Overload::Draining, "the server is shutting down")),
        }
    }

    /// [`check`](Self::check) for a request the server already accepted (its connection was open, its upload
    /// under way): after SIGTERM it is still served, within the drain, if the server was ready then. The
    /// listeners stop taking connections at SIGTERM, so nothing new gets this far.
    pub fn check_accepted(&self) -> Result<(), ServeError> {
        {
            let st = self.lock();
            if st.ready_at_drain && st.phase == Phase::Draining {
                return Ok(());
            }
        }
        self.check()
    }

    /// What the model metadata reports as `verification`.
    pub fn verification(&self) -> String {
        match self.phase() {
            Phase::Verifying => "pending".into(),
            Phase::Ready { summary, .. } => summary,
            Phase::Failed(why) => format!("failed: {why}"),
            Phase::Unhealthy(why) => format!("unhealthy: {why}"),
            Phase::Draining => "draining".into(),
        }
    }

    /// SIGTERM: stop reporting ready, whatever the phase, for good.
    pub fn drain(&self, metrics: &Metrics) {
        let mut st = self.lock();
        if st.phase != Phase::Draining {
            st.ready_at_drain = matches!(st.phase, Phase::Ready { .. });
        }
        metrics.ready.set(0);
        st.phase = Phase::Draining;
    }

    /// An engine call that answered (whatever its requests' own 4xx): the run of failures ends.
    pub fn engine_ok(&self) {
        self.lock().failures.clear();
    }

    /// An engine-side failure (`why`: a panic, an engine error): the `N`th in a row within the window makes a
    /// ready server unhealthy. Returns whether this one did.
    pub fn engine_failed(&self, why: &str, metrics: &Metrics) -> bool {
        metrics.engine_failures.inc();
        let n = self.policy.failures as usize;
        let mut st = self.lock();
        if n == 0 {
            return false;
        }
        let now = Instant::now();
        st.failures.push_back(now);
        while st.failures.len() > n {
            st.failures.pop_front();
        }
        let first = *st.failures.front().expect("just pushed");
        if st.failures.len() < n
            || now.duration_since(first) > self.policy.window
            || !matches!(st.phase, Phase::Ready { .. })
        {
            return false;
        }
        st.failures.clear();
        let why = format!(
            "{n} engine failures in a row within {} s (the last: {why})",
            self.policy.window.as_secs()
        );
        tracing::error!("NOT READY: {why}; re-running the readiness gate");
        metrics.ready.set(0);
        st.phase = Phase::Unhealthy(why);
        true
    }
}

/// Runs the gate (blocking: call it off the async runtime) and records the outcome in `readiness` and
/// `metrics`.
pub fn run_gate(engine: &Engine, readiness: &Readiness, metrics: &Metrics) {
    // An engine that panics on its own warm-up or golden cases is not ready (and the server stays up to say so).
    let phase = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| gate(engine, metrics)))
        .unwrap_or_else(|_| {
            Phase::Failed("the engine panicked during warm-up or a golden case (a bug in totoc)".into())
        });
    match &phase {
        Phase::Ready { verified: true, summary } => tracing::info!("ready: {summary}"),
        Phase::Ready { verified: false, summary } => tracing::warn!("ready, UNVERIFIED: {summary}"),
        Phase::Failed(why) => tracing::error!("NOT READY: the readiness gate failed: {why}"),
        _ => {}
    }
    metrics.verified.set(i64::from(matches!(phase, Phase::Ready { verified: true, .. })));
    // A SIGTERM during the gate wins: never report ready while draining (one transition, no check-then-set).
    readiness.transition(metrics, |now| matches!(now, Phase::Verifying | Phase::Failed(_)).then_some(phase));
}

/// The health thread: runs the gate until it passes (at most `attempts` times, waiting [`FIRST_RETRY`],
/// doubling, between runs; `give_up` gets the last reason when none passed), then while the server lives re-runs
/// it whenever engine failures made the server unhealthy, and makes it ready again once a re-run passes. Returns
/// at SIGTERM.
pub fn run_health(
    engine: &Engine,
    readiness: &Readiness,
    metrics: &Metrics,
    attempts: u32,
    give_up: impl FnOnce(String),
) {
    let run = || run_gate(engine, readiness, metrics);
    if !first_gate(readiness, attempts, FIRST_RETRY, run, give_up) {
        return;
    }
    loop {
        std::thread::sleep(RECHECK_EVERY);
        match readiness.phase() {
            Phase::Draining => return,
            Phase::Unhealthy(_) => {}
            _ => continue,
        }
        let phase = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| gate(engine, metrics)))
            .unwrap_or_else(|_| Phase::Failed("the engine panicked during the re-check".into()));
        match phase {
            Phase::Ready { verified, summary } => {
                let back = Phase::Ready { verified, summary: summary.clone() };
                if readiness.transition(metrics, |now| matches!(now, Phase::Unhealthy(_)).then_some(back)) {
                    readiness.engine_ok();
                    tracing::info!("ready again: the re-check passed ({summary})");
                }
            }
            Phase::Failed(why) => {
                metrics.engine_failures.inc();
                tracing::error!("still NOT READY: the re-check failed: {why}");
            }
            _ => {}
        }
    }
}

/// Runs the first gate (`run`) until it passes, at most `attempts` times, waiting `first_wait` (doubling) between
/// runs; `give_up` gets the last reason when none passed. Returns whether the server goes on (false: it gave
/// up, or SIGTERM came).
fn first_gate(
    readiness: &Readiness,
    attempts: u32,
    first_wait: Duration,
    mut run: impl FnMut(),
    give_up: impl FnOnce(String),
) -> bool {
    let attempts = attempts.max(1);
    let mut wait = first_wait;
    for attempt in 1..=attempts {
        run();
        let why = match readiness.phase() {
            Phase::Failed(why) => why,
            Phase::Draining => return false,
            _ => return true,
        };
        if attempt == attempts {
            tracing::error!("the readiness gate failed {attempt} times (--ready-attempts); exiting: {why}");
            give_up(why);
            return false;
        }
        tracing::warn!(attempt, attempts, "running the readiness gate again in {} ms", wait.as_millis());
        if !sleep_unless_draining(readiness, wait) {
            return false;
        }
        wait = (wait * 2).min(LONGEST_RETRY);
    }
    true
}

/// Sleeps `d` in short steps; false as soon as the server drains.
fn sleep_unless_draining(readiness: &Readiness, d: Duration) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if readiness.phase() == Phase::Draining {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100).min(end.saturating_duration_since(Instant::now())));
    }
    readiness.phase() != Phase::Draining
}

fn gate(engine: &Engine, metrics: &Metrics) -> Phase {
    let start = std::time::Instant::now();
    match engine.warm_up() {
        Ok(graphs) => {
            let ms = start.elapsed().as_millis() as u64;
            match engine.buckets().len() {
                n if graphs >= n => tracing::info!(graphs, ms, "warmed up every bucket"),
                n => tracing::info!(
                    graphs,
                    ms,
                    "warmed up {graphs} of the {n} buckets (the family's proportionate start-up: the others load \
                     when a call first needs them)"
                ),
            }
            super::cost::log_rates(engine);
        }
        Err(e) => return Phase::Failed(format!("warm-up: {e}")),
    }
    let dir = engine.dir().join(exporter::export::GOLDEN_DIR);
    if !engine.info().has_golden || !dir.is_dir() {
        return Phase::Ready {
            verified: false,
            summary:
                "unverified: the engine bundle carries no golden cases (export with --golden to have it \
                      checked at start)"
                    .into(),
        };
    }
    match run_golden(engine, &dir) {
        Ok((passed, failed, cases)) => {
            let set = |result: &str, n: usize| {
                metrics.golden_checks.get_or_create(&ResultLabels { result: result.into() }).set(n as i64)
            };
            set("passed", passed);
            set("failed", failed);
            let summary = format!(
                "{passed} of {} golden output checks passed ({cases} cases, tolerance 1e-4·σ + 1e-6·|ref|)",
                passed + failed
            );
            if failed == 0 {
                Phase::Ready { verified: true, summary: format!("verified: {summary}") }
            } else {
                Phase::Failed(summary)
            }
        }
        Err(e) => Phase::Failed(e),
    }
}

/// Runs every golden case and logs one line per case and output (the `totoc verify` table). Returns the passed
/// and failed output checks and the case count.
fn run_golden(engine: &Engine, dir: &Path) -> Result<(usize, usize, usize), String> {
    let paths = find_cases(dir).map_err(|e| e.to_string())?;
    if paths.is_empty() {
        return Err(format!("{} holds no golden case", dir.display()));
    }
    // One row per case and output, as `totoc verify` prints them; the whole table is logged when a check
    // fails, one summary line per case otherwise.
    let mut rows: Vec<(String, String, usize, f64, f64, Option<String>)> = Vec::new();
    for path in &paths {
        // Each family's cases hold its own outputs (`totoc verify` checks them the same way).
        let (case_name, reports) = crate::registry::golden_reports(engine, path)?;
        let mut names: Vec<&str> = Vec::new();
        for r in &reports {
            if !names.contains(&r.output.as_str()) {
                names.push(&r.output);
            }
        }
        for name in names {
            let of: Vec<_> = reports.iter().filter(|r| r.output == name).collect();
            let max = of.iter().map(|r| r.max_abs).fold(0.0, f64::max);
            let ratio = of
                .iter()
                .filter_map(|r| r.worst.map(|w| if w.tol > 0.0 { w.error / w.tol } else { 0.0 }))
                .fold(0.0, f64::max);
            let fail = of
                .iter()
                .find(|r| !r.passed())
                .map(|r| r.check().err().map(|e| e.to_string()).unwrap_or_default());
            rows.push((case_name.clone(), name.to_string(), of.len(), max, ratio, fail));
        }
    }
    let failed = rows.iter().filter(|r| r.5.is_some()).count();
    let passed = rows.len() - failed;
    if failed > 0 {
        tracing::error!("golden checks: {failed} of {} FAILED; the table:", rows.len());
        tracing::error!(
            "{:<24} {:<12} {:>5} {:>10} {:>9}  verdict",
            "case",
            "output",
            "steps",
            "max |Δ|",
            "worst/tol"
        );
        for (case, output, steps, max, ratio, fail) in &rows {
            let verdict = fail.as_ref().map_or("ok".to_string(), |f| format!("FAIL: {f}"));
            tracing::error!("{case:<24} {output:<12} {steps:>5} {max:>10.2e} {ratio:>9.3}  {verdict}");
        }
    } else {
        let mut cases: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        cases.dedup();
        for case in cases {
            let of: Vec<_> = rows.iter().filter(|r| r.0 == case).collect();
            let worst = of.iter().map(|r| r.4).fold(0.0, f64::max);
            tracing::info!(case, outputs = of.len(), worst_over_tol = worst, "golden case ok");
        }
    }
    Ok((passed, failed, paths.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_ready_phase_serves() {
        let m = Metrics::new();
        let r = Readiness::default();
        assert!(r.check().unwrap_err().to_string().contains("warming up"));
        assert_eq!(r.verification(), "pending");
        r.transition(&m, |_| Some(Phase::Failed("1 of 2 golden output checks passed".into())));
        let e = r.check().unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert!(e.to_string().contains("readiness gate failed (1 of 2"), "{e}");
        r.transition(&m, |_| Some(Phase::Ready { verified: true, summary: "verified: ok".into() }));
        assert!(r.check().is_ok() && r.is_ready());
        assert!(m.render().contains("totoc_ready 1"));
        r.drain(&m);
        assert!(!r.is_ready());
        assert!(r.check().unwrap_err().to_string().contains("shutting down"));
        assert!(m.render().contains("totoc_ready 0"));
    }

    fn ready(r: &Readiness, m: &Metrics) {
        r.transition(m, |_| Some(Phase::Ready { verified: true, summary: "verified: ok".into() }));
    }

    #[test]
    fn engine_failures_in_a_row_within_the_window_make_it_unready() {
        let m = Metrics::new();
        let r = Readiness::new(HealthPolicy { failures: 3, window: Duration::from_secs(30) });
        ready(&r, &m);
        assert!(!r.engine_failed("boom", &m) && !r.engine_failed("boom", &m));
        r.engine_ok(); // an answer in between: the run starts again
        assert!(!r.engine_failed("boom", &m) && !r.engine_failed("boom", &m));
        assert!(r.is_ready());
        assert!(r.engine_failed("boom", &m));
        assert!(!r.is_ready());
        assert!(r.check().unwrap_err().to_string().contains("3 engine failures in a row"), "{:?}", r.phase());
        assert!(m.render().contains("totoc_engine_failures_total 5"));
        // Spread over more than the window: never unready.
        let r = Readiness::new(HealthPolicy { failures: 2, window: Duration::from_millis(20) });
        ready(&r, &m);
        r.engine_failed("slow", &m);
        std::thread::sleep(Duration::from_millis(40));
        assert!(!r.engine_failed("slow", &m) && r.is_ready());
    }

    #[test]
    fn a_failed_first_gate_is_retried_then_given_up() {
        let m = Metrics::new();
        // Passes on its third run: ready, nothing given up.
        let r = Readiness::default();
        let mut runs = 0;
        let run = || {
            runs += 1;
            let phase = if runs < 3 {
                Phase::Failed(format!("run {runs}"))
            } else {
                Phase::Ready { verified: true, summary: "ok".into() }
            };
            r.transition(&m, |now| matches!(now, Phase::Verifying | Phase::Failed(_)).then_some(phase));
        };
        let start = Instant::now();
        assert!(first_gate(&r, 5, Duration::from_millis(20), run, |why| panic!("gave up: {why}")));
        assert!(r.is_ready());
        assert!(start.elapsed() >= Duration::from_millis(60), "waited 20 + 40 ms between runs");
        // Never passes: given up after `attempts` runs, with the last reason.
        let r = Readiness::default();
        let mut runs = 0;
        let run = || {
            runs += 1;
            r.transition(&m, |_| Some(Phase::Failed(format!("run {runs}"))));
        };
        let mut why = None;
        assert!(!first_gate(&r, 3, Duration::from_millis(1), run, |w| why = Some(w)));
        assert_eq!(why.as_deref(), Some("run 3"));
        // SIGTERM while waiting: stops, gives nothing up.
        let r = Readiness::default();
        let run = || {
            r.transition(&m, |_| Some(Phase::Failed("x".into())));
            r.drain(&m);
        };
        assert!(!first_gate(&r, 3, Duration::from_secs(60), run, |w| panic!("gave up: {w}")));
    }

    #[test]
    fn draining_is_never_left() {
        let m = Metrics::new();
        let r = Readiness::new(HealthPolicy { failures: 1, window: Duration::from_secs(30) });
        r.drain(&m);
        // The gate finishing after SIGTERM, and engine failures, leave it draining.
        r.transition(&m, |now| {
            matches!(now, Phase::Verifying).then_some(Phase::Ready { verified: true, summary: String::new() })
        });
        assert!(!r.engine_failed("boom", &m));
        assert_eq!(r.phase(), Phase::Draining);
        assert!(m.render().contains("totoc_ready 0"));
    }
}
