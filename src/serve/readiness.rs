//! The readiness gate. The server is live as soon as it listens, but reports ready only once the loaded engine
//! has proven itself: every bucket is warmed up ([`Engine::warm_up`], so no live request pays for a first load),
//! then the bundle's golden toto-ts cases run through it exactly as `totoc verify` runs them. A failing check
//! keeps the server unready for good (a load balancer never sends it traffic), logs the verify table and shows
//! in `/metrics` (`totoc_golden_checks{result="failed"}`, `totoc_verified 0`). A bundle without golden cases
//! becomes ready after the warm-up, and its log, metrics and model metadata say it is unverified.
//!
//! [`Readiness`] is the state every front end reads: inference is refused (503 with `Retry-After`) unless it is
//! [`Phase::Ready`]; SIGTERM moves it to [`Phase::Draining`].

use std::path::Path;
use std::sync::RwLock;

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
    /// The gate failed; the server stays unready.
    Failed(String),
    /// SIGTERM: finishing in-flight requests.
    Draining,
}

/// The shared readiness state.
#[derive(Debug)]
pub struct Readiness {
    phase: RwLock<Phase>,
}

impl Default for Readiness {
    fn default() -> Self {
        Readiness { phase: RwLock::new(Phase::Verifying) }
    }
}

impl Readiness {
    pub fn phase(&self) -> Phase {
        self.phase.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, phase: Phase, metrics: &Metrics) {
        metrics.ready.set(i64::from(matches!(phase, Phase::Ready { .. })));
        *self.phase.write().unwrap_or_else(|p| p.into_inner()) = phase;
    }

    pub fn is_ready(&self) -> bool {
        matches!(*self.phase.read().unwrap_or_else(|p| p.into_inner()), Phase::Ready { .. })
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
            Phase::Draining => Err(ServeError::overloaded(Overload::Draining, "the server is shutting down")),
        }
    }

    /// What the model metadata reports as `verification`.
    pub fn verification(&self) -> String {
        match self.phase() {
            Phase::Verifying => "pending".into(),
            Phase::Ready { summary, .. } => summary,
            Phase::Failed(why) => format!("failed: {why}"),
            Phase::Draining => "draining".into(),
        }
    }

    /// SIGTERM: stop reporting ready.
    pub fn drain(&self, metrics: &Metrics) {
        self.set(Phase::Draining, metrics);
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
    // A SIGTERM during the gate wins: never report ready while draining.
    if readiness.phase() != Phase::Draining {
        readiness.set(phase, metrics);
    }
}

fn gate(engine: &Engine, metrics: &Metrics) -> Phase {
    let start = std::time::Instant::now();
    match engine.warm_up() {
        Ok(graphs) => {
            tracing::info!(graphs, ms = start.elapsed().as_millis() as u64, "warmed up every bucket")
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
        r.set(Phase::Failed("1 of 2 golden output checks passed".into()), &m);
        let e = r.check().unwrap_err();
        assert_eq!(e.status(), axum::http::StatusCode::SERVICE_UNAVAILABLE);
        assert!(e.to_string().contains("readiness gate failed (1 of 2"), "{e}");
        r.set(Phase::Ready { verified: true, summary: "verified: ok".into() }, &m);
        assert!(r.check().is_ok() && r.is_ready());
        assert!(m.render().contains("totoc_ready 1"));
        r.drain(&m);
        assert!(!r.is_ready());
        assert!(r.check().unwrap_err().to_string().contains("shutting down"));
        assert!(m.render().contains("totoc_ready 0"));
    }
}
