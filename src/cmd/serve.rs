//! `totoc serve`: validates the flags into [`crate::serve::Options`] and runs the server.
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use engines::budget::Budget;
use engines::engine::LoadOptions;

use crate::cli::ServeArgs;
use crate::serve::batcher::BatcherConfig;
use crate::serve::conn::ConnLimits;
use crate::serve::service::Limits;
use crate::serve::{self, Options};

pub fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    serve::run(options(a)?)?;
    Ok(ExitCode::SUCCESS)
}

fn options(a: ServeArgs) -> anyhow::Result<Options> {
    let grpc_addr = match a.grpc_addr.as_str() {
        "off" | "none" => None,
        s => Some(s.parse().map_err(|_| anyhow::anyhow!("--grpc-addr `{s}` is not HOST:PORT or `off`"))?),
    };
    if !(a.queue_delay_ms.is_finite() && (0.0..=10_000.0).contains(&a.queue_delay_ms)) {
        bail!("--queue-delay-ms {} must be between 0 and 10000", a.queue_delay_ms);
    }
    if a.max_batch == 0 || a.queue_capacity == 0 || a.max_in_flight == 0 {
        bail!("--max-batch, --queue-capacity and --max-in-flight must be at least 1");
    }
    if a.max_body_bytes < 1024 {
        bail!("--max-body-bytes {} is too small for any request; give at least 1024", a.max_body_bytes);
    }
    if a.request_timeout_ms == 0 {
        bail!("--request-timeout-ms must be at least 1");
    }
    let shadow_rate = a.shadow_rate.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&shadow_rate) {
        bail!("--shadow-rate {shadow_rate} must be a fraction in 0..=1");
    }
    let mut memory_budget = a.memory_budget.as_deref().map(engines::memory::parse_size).transpose()?;
    // The shadow engine's memory counts against the container too: by default the two share the usual 80%.
    let shadow_memory_budget = match (&a.shadow_engine, a.shadow_memory_budget.as_deref()) {
        (None, _) => None,
        (Some(_), given) => {
            let limit = engines::memory::memory_limit();
            memory_budget.get_or_insert(limit / 100 * 55);
            Some(match given {
                Some(s) => engines::memory::parse_size(s)
                    .map_err(|e| anyhow::anyhow!("--shadow-memory-budget: {e}"))?,
                None => limit / 4,
            })
        }
    };
    if a.failure_window_s == 0 {
        bail!("--failure-window-s must be at least 1");
    }
    let max_bytes_in_flight = engines::memory::parse_size(&a.max_bytes_in_flight)
        .map_err(|e| anyhow::anyhow!("--max-bytes-in-flight: {e}"))?;
    if max_bytes_in_flight < a.max_body_bytes as u64 {
        bail!(
            "--max-bytes-in-flight {max_bytes_in_flight} is below --max-body-bytes {}: the largest body could \
             never be received; give at least as much",
            a.max_body_bytes
        );
    }
    let max_bytes_per_peer = match a.max_bytes_per_peer.as_deref() {
        None => (max_bytes_in_flight / 2).max(a.max_body_bytes as u64),
        Some(s) => {
            engines::memory::parse_size(s).map_err(|e| anyhow::anyhow!("--max-bytes-per-peer: {e}"))?
        }
    };
    if max_bytes_per_peer < a.max_body_bytes as u64 || max_bytes_per_peer > max_bytes_in_flight {
        bail!(
            "--max-bytes-per-peer {max_bytes_per_peer} must be between --max-body-bytes {} (the largest body must \
             fit) and --max-bytes-in-flight {max_bytes_in_flight}",
            a.max_body_bytes
        );
    }
    let max_response_bytes = engines::memory::parse_size(&a.max_response_bytes)
        .map_err(|e| anyhow::anyhow!("--max-response-bytes: {e}"))?;
    if max_response_bytes < 64 << 10 {
        bail!("--max-response-bytes {max_response_bytes} is too small for any answer; give at least 64KiB");
    }
    for (flag, v) in [
        ("--max-series", a.max_series as u64),
        ("--max-variates", a.max_variates as u64),
        ("--max-response-values", a.max_response_values),
        ("--max-request-cost", a.max_request_cost),
        ("--header-read-timeout-ms", a.header_read_timeout_ms),
        ("--body-read-timeout-ms", a.body_read_timeout_ms),
        ("--idle-timeout-ms", a.idle_timeout_ms),
        ("--max-connections-per-peer", a.max_connections_per_peer as u64),
        ("--max-concurrent-streams", u64::from(a.max_concurrent_streams)),
        ("--min-upload-bytes-per-s", a.min_upload_bytes_per_s),
        ("--min-read-bytes-per-s", a.min_read_bytes_per_s),
        ("--ready-attempts", u64::from(a.ready_attempts)),
    ] {
        if v == 0 {
            bail!("{flag} must be at least 1");
        }
    }
    Ok(Options {
        engine: a.engine,
        load: LoadOptions { ort_lib: a.ort.ort_lib, threads: a.threads, memory_budget },
        addr: a.addr,
        grpc_addr,
        model_name: a.model_name,
        batcher: BatcherConfig {
            queue_delay: Duration::from_secs_f64(a.queue_delay_ms / 1e3),
            max_batch: a.max_batch,
            capacity: a.queue_capacity,
        },
        limits: Limits {
            max_body_bytes: a.max_body_bytes,
            request_timeout: Duration::from_millis(a.request_timeout_ms),
            max_in_flight: a.max_in_flight,
            max_bytes_in_flight,
            max_bytes_per_peer,
            body_read_timeout: Duration::from_millis(a.body_read_timeout_ms),
            min_upload_rate: a.min_upload_bytes_per_s,
            max_response_bytes,
            budget: Budget {
                max_series: a.max_series,
                max_variates: a.max_variates,
                max_quantiles: a.max_quantile_levels,
                max_response_values: a.max_response_values,
                max_cost: a.max_request_cost,
            },
        },
        conn: ConnLimits {
            max_per_peer: a.max_connections_per_peer,
            header_read_timeout: Duration::from_millis(a.header_read_timeout_ms),
            idle_timeout: Duration::from_millis(a.idle_timeout_ms),
            max_concurrent_streams: a.max_concurrent_streams,
            min_read_rate: a.min_read_bytes_per_s,
        },
        token_file: a.token_file,
        shadow_engine: a.shadow_engine,
        shadow_rate,
        shadow_memory_budget,
        health: serve::readiness::HealthPolicy {
            failures: a.unready_after_failures,
            window: Duration::from_secs(a.failure_window_s),
        },
        ready_attempts: a.ready_attempts,
        shutdown_timeout: Duration::from_secs(a.shutdown_timeout_s),
        json_logs: a.log_json,
    })
}
