//! `POST /v1/timeseries/forecast`: KServe's time-series API (the `kserve` 0.21 package,
//! `kserve.protocol.rest.timeseries`), beside the Open Inference Protocol and `/v1/forecast`, for every family.
//!
//! A `ForecastRequest`'s inputs are decoded bounded ([`wire`]), translated into `/v1/forecast` requests
//! ([`translate`]: one JSON line per input) and read by the `/v1` path's own reader with its limits (counts
//! before anything is built, `--max-variates`, `--max-quantile-levels`, the bytes budget, cost admission), then
//! forecast through the same batcher: the numbers are `/v1/forecast`'s by construction. The answer is a
//! `ForecastResponse` with one output whose `content` holds each input's forecast, in order; every error is
//! KServe's `ErrorResponse` (`{"error": {"code": "400", "message": ..., "type": ...}}`) with its HTTP status
//! (and `Retry-After` when overloaded). Auth, the access log and the HTTP metrics come from the router's
//! middleware; a refusal by the token check answers before this handler (the server's `{"error": ...}`).
//! `GET /v1/timeseries/models` lists the served model, as KServe's endpoint does. The mapping is
//! docs/formats.md, "KServe time-series API".

mod translate;
mod wire;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use engines::bounded::{self, SeqLimit, Tally};
use engines::request::ForecastResponse;
use tables::{Dataset, Format};

use super::conn::Peer;
use super::error::ServeError;
use super::hold::{Leaving, Ticket};
use super::routes::{self, Holding, RequestId, INLINE_CODE_BYTES};
use super::service::Service;
use translate::Meta;
use wire::{Forecast, Levels, Output, SeriesType, Values};

/// How the translated requests are named in the `/v1` reader's errors: `input:N`, the N-th input (1-based).
const SOURCE: &str = "input";

/// The routes, for [`routes::router`] to serve behind its middleware: the forecast, and the list of models
/// KServe's time-series endpoints register beside it.
pub fn routes() -> Router<Arc<Service>> {
    Router::new().route("/v1/timeseries/forecast", post(forecast)).route("/v1/timeseries/models", get(models))
}

/// `GET /v1/timeseries/models`: the names of the models served, as KServe's endpoint lists them (one here).
async fn models(State(svc): State<Arc<Service>>) -> Response {
    let mut r = Response::new(Body::from(serde_json::to_vec(&[&svc.spec.name]).unwrap_or_default()));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// The route's handler (see the module docs).
pub async fn forecast(
    State(svc): State<Arc<Service>>,
    Extension(RequestId(rid)): Extension<RequestId>,
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    serve(svc, rid, peer, headers, body).await.unwrap_or_else(error_response)
}

async fn serve(
    svc: Arc<Service>,
    rid: String,
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ServeError> {
    json_only(&headers)?;
    let ticket = svc.ticket(routes::peer_of(peer));
    let leaving = Leaving::new(ticket.clone());
    let bytes = routes::read_body(&svc, &ticket, &headers, body).await?;
    ticket.keep_slot(svc.enter()?);
    let (svc2, t2) = (svc.clone(), ticket.clone());
    // On the blocking pool, as `/v1/forecast`'s decode: timestamps and calendars cost more than their bytes.
    let (mut dataset, inputs) = svc.off_runtime(move || decode(&svc2, &t2, bytes)).await?;
    let reqs = routes::take_requests(&mut dataset);
    let (mut responses, timing) =
        svc.forecast(reqs, routes::header_timeout(&headers)?, &rid, &ticket).await?;
    // KServe's forecast has no sample paths.
    responses.iter_mut().for_each(|r| r.samples = None);
    let small = ticket.answer_held() <= INLINE_CODE_BYTES as u64;
    let svc2 = svc.clone();
    let encode = move || encode(&svc2, &rid, &dataset, &inputs, &responses);
    let text = if small { encode()? } else { svc.off_runtime(encode).await? };
    leaving.answered();
    let mut r = Response::new(Body::new(Holding::new(text, ticket)));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    routes::server_timing(r.headers_mut(), timing);
    Ok(r)
}

/// `application/json`, or no `Content-Type`.
fn json_only(headers: &HeaderMap) -> Result<(), ServeError> {
    let Some(ct) = headers.get(header::CONTENT_TYPE) else { return Ok(()) };
    let ct = ct.to_str().unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match ct.as_str() {
        "application/json" | "" => Ok(()),
        other => Err(ServeError::UnsupportedMediaType(format!(
            "Content-Type `{}` is not read here; send a KServe ForecastRequest as application/json",
            super::error::clip(other)
        ))),
    }
}

/// Decodes the body (bounded), checks its model, and reads its inputs as `/v1/forecast` requests.
fn decode(svc: &Service, ticket: &Ticket, bytes: bytes::Bytes) -> Result<(Dataset, Vec<Meta>), ServeError> {
    let budget = &svc.limits.budget;
    let keys = [
        SeqLimit { key: "inputs", max: budget.max_series, what: "series per request (--max-series)" },
        SeqLimit { key: "columns", max: budget.max_variates, what: "variates per series (--max-variates)" },
        SeqLimit { key: "id_mask", max: budget.max_variates, what: "variates per series (--max-variates)" },
        SeqLimit {
            key: "quantiles",
            max: budget.max_quantiles,
            what: "quantile levels (--max-quantile-levels)",
        },
    ];
    let tally = Tally::new(ticket, &keys);
    let req: wire::Request = bounded::from_json_slice(&bytes, &tally).map_err(|e| {
        ticket.take_refusal().unwrap_or_else(|| {
            ServeError::bad_request(format!(
                "request body: {e}; send a KServe ForecastRequest ({{\"model\", \"inputs\", \"options\"}})"
            ))
        })
    })?;
    svc.check_model(&req.model, None)?;
    let wire_bytes = bytes.len() as u64;
    drop(bytes);
    let t = translate::to_lines(req, ticket, wire_bytes)?;
    let dataset = routes::decode_requests(svc, ticket, &t.lines, Format::JsonLines, SOURCE, &t.opts)?;
    Ok((dataset, t.inputs))
}

/// The `ForecastResponse` of every input's forecast, as JSON text.
fn encode(
    svc: &Service,
    rid: &str,
    dataset: &Dataset,
    inputs: &[Meta],
    responses: &[ForecastResponse],
) -> Result<Vec<u8>, ServeError> {
    let point = svc.engine.info().model.point_forecast();
    let mut content = Vec::with_capacity(inputs.len());
    for ((meta, series), r) in inputs.iter().zip(&dataset.series).zip(responses) {
        // The first forecast step: the request's own, else the series continued (as `/v1/forecast` writes it).
        let first = match (&series.future, &series.time) {
            (Some(given), _) => given.first().copied(),
            (None, Some(axis)) => axis.future(1).and_then(|f| f.first().copied()),
            (None, None) => None,
        };
        let start = first.ok_or_else(|| {
            ServeError::bad_request(format!(
                "{}: the forecast's first step has no timestamp (past the year 9999?)",
                series.at
            ))
        })?;
        let kind = meta.kind;
        content.push(Forecast {
            kind,
            name: &meta.name,
            mean_forecast: Values { rows: r.point(), kind },
            frequency: meta.frequency.name,
            start_timestamp: start.to_text(),
            quantiles: (!r.quantiles.is_empty()).then_some(Levels { levels: &r.quantiles, kind }),
            point_forecast: point,
            columns: (kind == SeriesType::Multivariate).then_some(series.target_names.as_slice()),
            context_truncated: r.context_truncated,
            sampler: r.sampler.as_ref(),
            engine_sha256: r.engine_sha256.as_deref(),
        });
    }
    let created_at = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let answer = wire::Response {
        id: rid,
        created_at,
        status: "completed",
        model: &svc.spec.name,
        outputs: [Output { kind: "forecast", id: rid, status: "completed", content }],
    };
    serde_json::to_vec(&answer).map_err(|e| ServeError::Internal(e.to_string()))
}

/// A refusal as KServe's `ErrorResponse`, with the status and headers (`Retry-After`) the server gives it.
fn error_response(e: ServeError) -> Response {
    let (status, message) = (e.status(), e.client_message());
    let mut resp = e.into_response();
    let body = wire::ErrorResponse {
        error: wire::Error { code: status.as_u16().to_string(), message, kind: error_type(status) },
    };
    *resp.body_mut() = Body::from(serde_json::to_vec(&body).unwrap_or_default());
    resp.headers_mut().remove(header::CONTENT_LENGTH);
    resp
}

/// KServe's error `type` for a status (its `create_error_response` defaults to `BadRequestError`).
fn error_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "BadRequestError",
        401 => "AuthenticationError",
        404 => "NotFoundError",
        408 => "RequestTimeoutError",
        413 => "PayloadTooLargeError",
        415 => "UnsupportedMediaTypeError",
        429 => "RateLimitError",
        503 => "ServiceUnavailableError",
        s if s >= 500 => "InternalServerError",
        _ => "Error",
    }
}
