//! Shadow equivalence: a sampled fraction of live requests (`--shadow-rate`) is run again on a second engine
//! (`--shadow-engine`, typically fp32 CPU behind an fp16/int8 or GPU live engine), and the live point forecast
//! and quantiles are compared with the shadow's, normalised exactly like `totoc verify` (worst
//! `|live − shadow| / (1e-4·σ + 1e-6·|shadow|)`, σ the variate's context standard deviation). The ratio goes to
//! `/metrics` (`totoc_shadow_error_ratio`, `..._max`, `totoc_shadow_out_of_tolerance_total`), so numeric drift
//! of the live engine is seen in production. Sample paths are not compared: they are random draws, and their
//! quantiles already summarise them.
//!
//! It never costs live latency: the sampled copy is made only for sampled requests, the shadow queue is small
//! and drops when full, and the shadow thread starts a run only once the live batcher is idle (nothing queued,
//! no engine call running); if it stays busy for 50 ms the sample is skipped (`result="skipped_load"`).
//!
//! It is isolated from the live engine: its engine has its own memory budget (`--shadow-memory-budget`, counted
//! against the container beside the live one's), its queue holds at most [`QUEUE`] small items (the requests and
//! the live point forecast and quantiles, never sample paths), and at shutdown the queued samples are dropped and
//! the thread is waited for at most a bounded time ([`Shadow::close_within`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use engines::compare::{compare, context_sigma, Scale, Tolerance};
use engines::request::{ForecastRequest, ForecastResponse};

use super::batcher::{Backend, Batcher};
use super::error::ServeError;
use super::metrics::Metrics;

/// Sampled requests waiting for the shadow engine (more are dropped, counted as `skipped_queue_full`).
const QUEUE: usize = 4;

/// How long a sample waits for the live batcher to go idle before it is skipped.
const IDLE_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

struct Job {
    requests: Vec<ForecastRequest>,
    live: Vec<ForecastResponse>,
    request_id: String,
}

/// The shadow engine's thread and its bounded queue.
pub struct Shadow {
    rate: f64,
    tx: Mutex<Option<SyncSender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    metrics: Arc<Metrics>,
    /// Set at close: the thread drops what is queued instead of running it.
    stop: Arc<AtomicBool>,
}

impl Shadow {
    /// Starts the shadow thread; `live` is the live batcher (the shadow runs only while it is idle).
    pub fn start(engine: Arc<dyn Backend>, rate: f64, live: Arc<Batcher>, metrics: Arc<Metrics>) -> Self {
        let (tx, rx) = sync_channel(QUEUE);
        let m = metrics.clone();
        let stop = Arc::new(AtomicBool::new(false));
        let halt = stop.clone();
        let thread = std::thread::Builder::new()
            .name("totoc-shadow".into())
            .spawn(move || shadow_loop(rx, engine.as_ref(), &live, &m, &halt))
            .expect("spawn the shadow thread");
        Shadow { rate, tx: Mutex::new(Some(tx)), thread: Mutex::new(Some(thread)), metrics, stop }
    }

    /// Whether to shadow the next request (a `rate` fraction of them, at random).
    pub fn sample(&self) -> bool {
        self.rate > 0.0 && rand::random::<f64>() < self.rate
    }

    /// Hands a sampled request and its live answer to the shadow thread, or drops it if the queue is full. The
    /// queue keeps only what is compared: sample paths are dropped here.
    pub fn offer(&self, requests: Vec<ForecastRequest>, mut live: Vec<ForecastResponse>, request_id: &str) {
        for r in &mut live {
            r.samples = None;
        }
        let tx = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = tx.as_ref() else { return };
        match tx.try_send(Job { requests, live, request_id: request_id.to_string() }) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.metrics.shadow("skipped_queue_full"),
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Stops the thread after the run in progress (queued samples are dropped).
    pub fn close(&self) {
        self.close_within(Duration::MAX);
    }

    /// [`close`](Self::close), waiting at most `timeout` for the run in progress; returns whether the thread
    /// ended (else it is left to the process exit).
    pub fn close_within(&self, timeout: Duration) -> bool {
        self.stop.store(true, Ordering::SeqCst);
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
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

impl Drop for Shadow {
    fn drop(&mut self) {
        self.close();
    }
}

fn shadow_loop(rx: Receiver<Job>, engine: &dyn Backend, live: &Batcher, m: &Metrics, stop: &AtomicBool) {
    while let Ok(job) = rx.recv() {
        if stop.load(Ordering::SeqCst) {
            // Shutting down: what is queued is dropped, not run.
            return;
        }
        // The live call that produced this sample is just finishing; anything else means load.
        if !live.wait_idle(IDLE_WAIT) {
            m.shadow("skipped_load");
            continue;
        }
        let span = tracing::debug_span!("shadow", request_id = %job.request_id);
        let _e = span.enter();
        // A shadow run stops between graph runs once the server shuts down: it never holds up the exit.
        let stopping = || {
            super::batcher::test_step_delay();
            stop.load(Ordering::SeqCst)
        };
        let shadow = engine.forecast_until(job.requests.clone(), &stopping);
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let mut worst: f64 = 0.0;
        let mut outcome = "compared";
        for ((req, live), shadow) in job.requests.iter().zip(&job.live).zip(shadow) {
            let s = match shadow {
                Ok(s) => s,
                Err(e) => {
                    // A request the shadow engine cannot take (its limits) is not drift.
                    outcome = if ServeError::from(e).is_server_fault() { "failed" } else { "unsupported" };
                    break;
                }
            };
            match error_ratio(req, live, &s) {
                Ok(r) => worst = worst.max(r),
                Err(e) => {
                    tracing::warn!("shadow comparison failed: {e}");
                    outcome = "failed";
                    break;
                }
            }
        }
        m.shadow(outcome);
        if outcome != "compared" {
            continue;
        }
        m.shadow_error_ratio.observe(worst);
        if worst > m.shadow_error_ratio_max.get() {
            m.shadow_error_ratio_max.set(worst);
        }
        if worst > 1.0 {
            m.shadow_out_of_tolerance.inc();
            tracing::warn!(
                error_ratio = worst,
                "shadow engine disagrees with the live engine beyond verify's tolerance"
            );
        } else {
            tracing::debug!(error_ratio = worst, "shadow comparison");
        }
    }
}

/// The worst `|live − shadow| / tol` over the point forecast and every quantile level of one series, with
/// `tol = 1e-4·σ_v + 1e-6·|shadow|` (`totoc verify`'s tolerance, the shadow as reference).
pub fn error_ratio(
    req: &ForecastRequest,
    live: &ForecastResponse,
    shadow: &ForecastResponse,
) -> Result<f64, String> {
    let sigma: Vec<f64> = req.target.iter().map(|s| context_sigma(s)).collect();
    let v = req.variates();
    let tol = Tolerance::default();
    let mut pairs: Vec<(String, Vec<f32>, Vec<f32>)> =
        vec![("point".into(), live.point().concat(), shadow.point().concat())];
    if live.quantiles.len() != shadow.quantiles.len() {
        return Err(format!(
            "{} live quantile levels vs {} shadow",
            live.quantiles.len(),
            shadow.quantiles.len()
        ));
    }
    for (a, b) in live.quantiles.iter().zip(&shadow.quantiles) {
        pairs.push((format!("q{}", a.q), a.values.concat(), b.values.concat()));
    }
    let mut worst: f64 = 0.0;
    for (name, a, b) in pairs {
        let report =
            compare(&name, 0, &a, &b, v, Scale::PerVariate(&sigma), &tol).map_err(|e| e.to_string())?;
        if let Some(w) = report.worst {
            let r = if w.tol > 0.0 {
                w.error / w.tol
            } else if w.error == 0.0 {
                0.0
            } else {
                f64::INFINITY
            };
            worst = worst.max(r);
        }
    }
    Ok(worst)
}

#[cfg(test)]
mod tests {
    use super::*;
    use engines::request::QuantileForecast;

    fn req() -> ForecastRequest {
        ForecastRequest {
            id: None,
            target: vec![vec![Some(0.0), Some(2.0)]], // σ = 1
            id_mask: vec![0],
            horizon: 2,
            samples: 0,
            quantiles: vec![],
            seed: 0,
            strict_context: false,
            context_cut: None,
            ..ForecastRequest::default()
        }
    }

    fn resp(mean: [f32; 2], q: Option<[f32; 2]>) -> ForecastResponse {
        ForecastResponse {
            id: None,
            mean: Some(vec![mean.to_vec()]),
            median: None,
            quantiles: q
                .map(|q| vec![QuantileForecast { q: 0.5, values: vec![q.to_vec()] }])
                .unwrap_or_default(),
            samples: None,
            context_truncated: None,
            buckets: Vec::new(),
            profile: "p".into(),
            engine: "e".into(),
            sampler: None,
            engine_sha256: None,
        }
    }

    #[test]
    fn the_ratio_is_verifys_normalised_error() {
        // σ = 1, reference 10: tol = 1e-4 + 1e-5 = 1.1e-4.
        let r = error_ratio(&req(), &resp([10.0, 10.0], None), &resp([10.0, 10.0], None)).unwrap();
        assert_eq!(r, 0.0);
        let r = error_ratio(&req(), &resp([10.0, 10.001], None), &resp([10.0, 10.0], None)).unwrap();
        assert!((r - 0.001 / 1.1e-4).abs() < 0.1, "{r}");
        // Quantiles count too.
        let r = error_ratio(&req(), &resp([1.0, 1.0], Some([5.0, 5.0])), &resp([1.0, 1.0], Some([5.0, 5.1])));
        assert!(r.unwrap() > 100.0);
        assert!(error_ratio(&req(), &resp([1.0, 1.0], Some([5.0, 5.0])), &resp([1.0, 1.0], None)).is_err());
    }
}
