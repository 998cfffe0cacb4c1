//! [`Metrics`]: what `GET /metrics` exports, in the Prometheus/OpenMetrics text format (`prometheus-client`).
//!
//! Every metric is named `totoc_*`. Label values come from fixed sets (route templates, status codes, bucket
//! names of the engine, fixed reasons), never from request data, so the set of series stays bounded however
//! long the server runs.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    /// The route template (`/v2/models/{name}/infer`), or `unmatched`.
    pub route: String,
    pub code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcLabels {
    pub method: String,
    /// The gRPC status code name (`Ok`, `InvalidArgument`, ...).
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BucketLabels {
    /// The engine's shape bucket (graph), e.g. `default.decode.n8.t69`.
    pub bucket: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Occupancy buckets: tenths of a bucket's rows.
fn occupancy_histogram() -> Histogram {
    Histogram::new((1..=10).map(|i| i as f64 / 10.0))
}

/// Latency buckets from 100 µs to ~105 s (×2 each).
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-4, 2.0, 21))
}

/// Series per engine call: 1, 2, 4, ... 1024.
fn count_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 2.0, 11))
}

/// Shadow error in units of `verify`'s tolerance: 0.001 .. ~1000 (×√10 each); ≤ 1 is within tolerance.
fn ratio_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-3, 10f64.sqrt(), 13))
}

/// The server's metrics (see the module docs). Cheap to update from any thread.
pub struct Metrics {
    registry: Registry,
    pub http_requests: Family<HttpLabels, Counter>,
    pub http_seconds: HistogramFamily<HttpLabels>,
    pub grpc_requests: Family<GrpcLabels, Counter>,
    pub queue_wait_seconds: Histogram,
    pub compute_seconds: Histogram,
    pub batch_series: Histogram,
    pub bucket_occupancy: HistogramFamily<BucketLabels>,
    pub batch_requests: Histogram,
    pub queued_series: Gauge,
    pub in_flight: Gauge,
    pub rejected: Family<ReasonLabels, Counter>,
    pub abandoned: Counter,
    pub ready: Gauge,
    pub verified: Gauge,
    pub golden_checks: Family<ResultLabels, Gauge>,
    pub shadow_requests: Family<ResultLabels, Counter>,
    pub shadow_error_ratio: Histogram,
    pub shadow_error_ratio_max: Gauge<f64, AtomicU64>,
    pub shadow_out_of_tolerance: Counter,
    pub engine_failures: Counter,
    pub cancelled: Family<ReasonLabels, Counter>,
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("totoc");
        let m = Metrics {
            http_requests: Family::default(),
            http_seconds: Family::new_with_constructor(latency_histogram),
            grpc_requests: Family::default(),
            queue_wait_seconds: latency_histogram(),
            compute_seconds: latency_histogram(),
            batch_series: count_histogram(),
            bucket_occupancy: Family::new_with_constructor(occupancy_histogram),
            batch_requests: count_histogram(),
            queued_series: Gauge::default(),
            in_flight: Gauge::default(),
            rejected: Family::default(),
            abandoned: Counter::default(),
            ready: Gauge::default(),
            verified: Gauge::default(),
            golden_checks: Family::default(),
            shadow_requests: Family::default(),
            shadow_error_ratio: ratio_histogram(),
            shadow_error_ratio_max: Gauge::default(),
            shadow_out_of_tolerance: Counter::default(),
            engine_failures: Counter::default(),
            cancelled: Family::default(),
            registry: Registry::default(),
        };
        let r = &mut registry;
        r.register(
            "http_requests",
            "HTTP requests by route template and status code",
            m.http_requests.clone(),
        );
        r.register_with_unit(
            "http_request",
            "HTTP request latency from first byte to response, by route and status code",
            Unit::Seconds,
            m.http_seconds.clone(),
        );
        r.register("grpc_requests", "gRPC requests by method and status code", m.grpc_requests.clone());
        r.register_with_unit(
            "queue_wait",
            "Time a request waited in the batcher's queue before its engine call",
            Unit::Seconds,
            m.queue_wait_seconds.clone(),
        );
        r.register_with_unit(
            "compute",
            "Wall time of one engine call (one packed batch)",
            Unit::Seconds,
            m.compute_seconds.clone(),
        );
        r.register("batch_series", "Series per engine call (one packed batch)", m.batch_series.clone());
        r.register(
            "bucket_occupancy",
            "Per graph run, the share of its shape bucket's rows that held work (batch occupancy per bucket)",
            m.bucket_occupancy.clone(),
        );
        r.register("batch_requests", "Client requests packed into one engine call", m.batch_requests.clone());
        r.register("queued_series", "Series waiting in the batcher's queue", m.queued_series.clone());
        r.register("in_flight", "Forecast requests being received, queued or served", m.in_flight.clone());
        r.register(
            "rejected",
            "Requests turned away for load or state (queue_full: 429; deadline, not_ready, draining, in_flight: 503)",
            m.rejected.clone(),
        );
        r.register(
            "abandoned",
            "Queued requests dropped because their client went away before the engine got to them",
            m.abandoned.clone(),
        );
        r.register("ready", "1 when the server reports ready (the readiness gate passed)", m.ready.clone());
        r.register(
            "verified",
            "1 when the engine passed its bundle's golden cases at start; 0 when unverified or failed",
            m.verified.clone(),
        );
        r.register(
            "golden_checks",
            "Golden output checks of the readiness gate, by result (passed, failed)",
            m.golden_checks.clone(),
        );
        r.register(
            "shadow_requests",
            "Live requests sampled for the shadow engine, by result (compared, skipped_load, skipped_queue_full, unsupported, failed)",
            m.shadow_requests.clone(),
        );
        r.register(
            "shadow_error_ratio",
            "Shadow vs live point forecast and quantiles: worst |difference| over verify's tolerance (1e-4·σ + 1e-6·|shadow|); <= 1 is within it",
            m.shadow_error_ratio.clone(),
        );
        r.register(
            "shadow_error_ratio_max",
            "Largest shadow_error_ratio seen since start",
            m.shadow_error_ratio_max.clone(),
        );
        r.register(
            "shadow_out_of_tolerance",
            "Shadow comparisons whose error exceeded verify's tolerance",
            m.shadow_out_of_tolerance.clone(),
        );
        r.register(
            "engine_failures",
            "Engine-side failures (a panic, an engine error answered 500, a failed re-check); a run of them makes the server unready",
            m.engine_failures.clone(),
        );
        r.register(
            "cancelled",
            "Engine calls stopped between graph runs, or requests not started, because every client of the call left (client_gone) or its deadline passed (deadline)",
            m.cancelled.clone(),
        );
        // Every fixed label value exists from the start, so dashboards and alerts see 0 rather than nothing.
        for reason in ["queue_full", "deadline", "not_ready", "draining", "in_flight"] {
            let _ = m.rejected.get_or_create(&ReasonLabels { reason: reason.into() });
        }
        for reason in ["client_gone", "deadline"] {
            let _ = m.cancelled.get_or_create(&ReasonLabels { reason: reason.into() });
        }
        for result in ["compared", "skipped_load", "skipped_queue_full", "unsupported", "failed"] {
            let _ = m.shadow_requests.get_or_create(&ResultLabels { result: result.into() });
        }
        Metrics { registry, ..m }
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    pub fn reject(&self, reason: &str) {
        self.rejected.get_or_create(&ReasonLabels { reason: reason.to_string() }).inc();
    }

    pub fn shadow(&self, result: &str) {
        self.shadow_requests.get_or_create(&ResultLabels { result: result.to_string() }).inc();
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_family_with_the_prefix() {
        let m = Metrics::new();
        m.http_requests.get_or_create(&HttpLabels { route: "/v1/forecast".into(), code: 200 }).inc();
        m.batch_series.observe(3.0);
        m.bucket_occupancy
            .get_or_create(&BucketLabels { bucket: "default.decode.n8.t69".into() })
            .observe(0.5);
        m.reject("queue_full");
        m.ready.set(1);
        let text = m.render();
        for needle in [
            "totoc_http_requests_total{route=\"/v1/forecast\",code=\"200\"} 1",
            "totoc_batch_series_bucket{le=\"4.0\"} 1",
            "totoc_bucket_occupancy_bucket{le=\"0.5\",bucket=\"default.decode.n8.t69\"} 1",
            "totoc_rejected_total{reason=\"queue_full\"} 1",
            "totoc_ready 1",
            "# TYPE totoc_queue_wait_seconds histogram",
            "# EOF",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }
}
