//! The HTTP front end (axum): the Open Inference Protocol's REST routes, `POST /v1/forecast` and `GET /metrics`.
//! Handlers only decode, call [`Service`] and map errors; two middlewares wrap every route:
//! * `observe`: the request id (the client's `x-request-id` or a fresh one; echoed in the response), a tracing
//!   span carrying it (so every log line of the request names it), the access log line, and
//!   `totoc_http_requests_total` / `totoc_http_request_seconds` by route template and status;
//! * `auth`: with `--token-file`, every route but the health probes needs `Authorization: Bearer <token>`.
//!
//! Bodies are read up to `--max-body-bytes` (413 beyond, checked against `Content-Length` before reading),
//! within `--body-read-timeout-ms` and the minimum upload rate (408 beyond), and within the server's bytes
//! budget, taken as the bytes arrive (never from what `Content-Length` declares; 503 when it is spent). The
//! in-flight slot (`--max-in-flight`) is taken only once the body is in, so clients that trickle their bodies
//! hold no slot. Everything a request holds is in its [`Ticket`], which the decode, the engine's job and the
//! response body share: it is given back when the answer's last frame is written, or when the last work for a
//! client that left ends. `/v1/forecast` bodies are always decoded on the blocking pool (their timestamps and
//! calendars cost more than their bytes), v2 bodies over 256 KiB too; large answers are encoded there.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{MatchedPath, Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use engines::bounded::SeqLimit;
use engines::budget::RequestSize;
use engines::request::Overrides;
use http_body_util::BodyExt;

use tables::{self as data, Format, ReadOptions};
use tracing::Instrument;

use super::conn::Peer;
use super::error::{ServeError, CLIENT_GONE};
use super::hold::{wire_hold, Leaving, Part, Ticket};
use super::kserve::{self, HEADER_LENGTH};
use super::metrics::HttpLabels;
use super::model;
use super::service::{body_deadline, request_id, Service, Timing};

type Svc = State<Arc<Service>>;

/// The request id of the request being handled (set by `observe`).
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// v2 bodies larger than this are decoded on the blocking pool, and answers whose hold (output and encoding,
/// [`Ticket::answer_held`]) is larger than this encoded there: below it, the hop to the pool and back costs more
/// than the encoding (a 120-step candle forecast: about 0.1 ms either way).
pub(super) const INLINE_CODE_BYTES: usize = 256 * 1024;

/// The first hold of a body without `Content-Length` (chunked), before it grows with the bytes that arrive.
const FIRST_CHUNKED: u64 = 64 * 1024;

/// The client's deadline header, in milliseconds (the v2 `timeout` parameter, in µs, also sets one).
pub const TIMEOUT_HEADER: &str = "x-request-timeout-ms";

/// Every route (see the module docs); `more` are another front end's routes (KServe's time-series API,
/// [`super::timeseries`]), behind the same middleware.
pub fn router(svc: Arc<Service>, more: Router<Arc<Service>>) -> Router {
    Router::new()
        .route("/v2", get(server_metadata))
        .route("/v2/health/live", get(live))
        .route("/v2/health/ready", get(ready))
        .route("/v2/models/{name}", get(model_metadata))
        .route("/v2/models/{name}/versions/{version}", get(model_version_metadata))
        .route("/v2/models/{name}/ready", get(model_ready))
        .route("/v2/models/{name}/versions/{version}/ready", get(model_version_ready))
        .route("/v2/models/{name}/infer", post(infer))
        .route("/v2/models/{name}/versions/{version}/infer", post(infer_version))
        .route("/v1/forecast", post(forecast_v1))
        .merge(more)
        .route("/metrics", get(metrics))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(svc.clone(), auth))
        .layer(middleware::from_fn_with_state(svc.clone(), observe))
        .with_state(svc)
}

// --- middleware

async fn observe(State(svc): Svc, mut req: Request, next: Next) -> Response {
    let start = Instant::now();
    let rid = request_id(req.headers().get("x-request-id").and_then(|v| v.to_str().ok()));
    let route = req.extensions().get::<MatchedPath>().map_or("unmatched", |m| m.as_str()).to_string();
    let (method, path) = (req.method().clone(), req.uri().path().to_string());
    req.extensions_mut().insert(RequestId(rid.clone()));
    let span = tracing::info_span!("request", request_id = %rid);
    // A request whose client leaves before the answer (its future is dropped) is still logged and counted.
    let mut access = Access { svc: &svc, start, route, method, path, span: span.clone(), logged: false };
    let mut resp = next.run(req).instrument(span).await;
    access.log(resp.status());
    if let Ok(v) = HeaderValue::from_str(&rid) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp
}

/// The access line and metrics of one request: logged with its status once answered, or as [`CLIENT_GONE`]
/// (499) when dropped before (its client left).
struct Access<'a> {
    svc: &'a Service,
    start: Instant,
    route: String,
    method: Method,
    path: String,
    span: tracing::Span,
    logged: bool,
}

impl Access<'_> {
    fn log(&mut self, status: StatusCode) {
        self.logged = true;
        let elapsed = self.start.elapsed();
        let labels = HttpLabels { route: self.route.clone(), code: status.as_u16() };
        self.svc.metrics.http_requests.get_or_create(&labels).inc();
        self.svc.metrics.http_seconds.get_or_create(&labels).observe(elapsed.as_secs_f64());
        let ms = elapsed.as_secs_f64() * 1e3;
        let (method, path, route) = (&self.method, &self.path, &self.route);
        self.span.in_scope(|| {
            // Probes and scrapes come every few seconds; keep them out of the info log.
            if route.starts_with("/v2/health") || route == "/metrics" {
                tracing::debug!(status = status.as_u16(), ms, "{method} {path}");
            } else if status == CLIENT_GONE {
                tracing::info!(
                    status = status.as_u16(),
                    ms,
                    "{method} {path}: the client left before the answer"
                );
            } else if status.is_server_error() && status != StatusCode::SERVICE_UNAVAILABLE {
                tracing::error!(status = status.as_u16(), ms, "{method} {path}");
            } else {
                tracing::info!(status = status.as_u16(), ms, "{method} {path}");
            }
        });
    }
}

impl Drop for Access<'_> {
    fn drop(&mut self) {
        if !self.logged {
            self.log(CLIENT_GONE);
        }
    }
}

async fn auth(State(svc): Svc, req: Request, next: Next) -> Response {
    let probe = matches!(req.uri().path(), "/v2/health/live" | "/v2/health/ready");
    let given = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    match svc.authorize(given) {
        Err(e) if !probe => e.into_response(),
        _ => next.run(req).await,
    }
}

// --- health and metadata

/// Live while the engine thread runs: a process whose engine thread is gone answers 503, so it is restarted.
async fn live(State(svc): Svc) -> Response {
    match svc.batcher.engine_alive() {
        true => json(StatusCode::OK, &serde_json::json!({ "live": true })),
        false => json(
            StatusCode::SERVICE_UNAVAILABLE,
            &serde_json::json!({ "live": false, "error": "the engine thread is gone" }),
        ),
    }
}

async fn ready(State(svc): Svc) -> Response {
    readiness_response(&svc)
}

/// 200 `{"ready": true}`, or 503 with the reason (any non-200 is "not ready" to the protocol's clients).
fn readiness_response(svc: &Service) -> Response {
    match svc.readiness.check() {
        Ok(()) => json(StatusCode::OK, &serde_json::json!({ "ready": true })),
        Err(e) => {
            let status = e.status();
            // Scrubbed like every message a client gets: probes need no token, and the gate's findings may
            // name the server's files.
            let mut r = json(status, &serde_json::json!({ "ready": false, "error": e.client_message() }));
            if let Some(s) = e.retry_after_s() {
                r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(s));
            }
            r
        }
    }
}

async fn server_metadata() -> Response {
    json(StatusCode::OK, &server_metadata_value())
}

/// `GET /v2`: the server's name, version and protocol extensions.
pub fn server_metadata_value() -> serde_json::Value {
    serde_json::json!({
        "name": "totoc",
        "version": env!("CARGO_PKG_VERSION"),
        "extensions": ["binary_tensor_data"],
    })
}

async fn model_metadata(State(svc): Svc, Path(name): Path<String>) -> Result<Response, ServeError> {
    svc.check_model(&name, None)?;
    Ok(json(StatusCode::OK, &svc.spec.metadata(&svc.readiness.verification())))
}

async fn model_version_metadata(
    State(svc): Svc,
    Path((name, version)): Path<(String, String)>,
) -> Result<Response, ServeError> {
    svc.check_model(&name, Some(&version))?;
    Ok(json(StatusCode::OK, &svc.spec.metadata(&svc.readiness.verification())))
}

async fn model_ready(State(svc): Svc, Path(name): Path<String>) -> Result<Response, ServeError> {
    svc.check_model(&name, None)?;
    Ok(readiness_response(&svc))
}

async fn model_version_ready(
    State(svc): Svc,
    Path((name, version)): Path<(String, String)>,
) -> Result<Response, ServeError> {
    svc.check_model(&name, Some(&version))?;
    Ok(readiness_response(&svc))
}

async fn metrics(State(svc): Svc) -> Response {
    let mut r = svc.metrics.render().into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

async fn not_found(method: Method, uri: axum::http::Uri) -> ServeError {
    ServeError::NotFound(format!(
        "no route {method} {}; see /v2 (Open Inference Protocol), /v1/forecast and /metrics",
        uri.path()
    ))
}

async fn method_not_allowed(method: Method, uri: axum::http::Uri) -> ServeError {
    ServeError::MethodNotAllowed(format!("{} does not take {method}", uri.path()))
}

// --- inference

async fn infer(
    State(svc): Svc,
    Path(name): Path<String>,
    Extension(rid): Extension<RequestId>,
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ServeError> {
    infer_v2(svc, name, None, rid, peer_of(peer), headers, body).await
}

async fn infer_version(
    State(svc): Svc,
    Path((name, version)): Path<(String, String)>,
    Extension(rid): Extension<RequestId>,
    peer: Option<Extension<Peer>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ServeError> {
    infer_v2(svc, name, Some(version), rid, peer_of(peer), headers, body).await
}

/// The client address [`super::conn`] put on the request (unspecified when the router is called directly).
pub(super) fn peer_of(peer: Option<Extension<Peer>>) -> std::net::IpAddr {
    peer.map_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), |Extension(Peer(ip))| ip)
}

/// `POST /v2/models/{name}[/versions/{v}]/infer`: JSON or binary-extension tensors in, the same out.
async fn infer_v2(
    svc: Arc<Service>,
    name: String,
    version: Option<String>,
    RequestId(rid): RequestId,
    peer: std::net::IpAddr,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ServeError> {
    svc.check_model(&name, version.as_deref())?;
    let ticket = svc.ticket(peer);
    let leaving = Leaving::new(ticket.clone());
    let bytes = read_body(&svc, &ticket, &headers, body).await?;
    ticket.keep_slot(svc.enter()?);
    let len = bytes.len();
    let header_length = headers.get(HEADER_LENGTH).map(|v| v.to_str().unwrap_or("?").to_string());
    let (svc2, t2) = (svc.clone(), ticket.clone());
    let decode = move || -> Result<_, ServeError> {
        let req = kserve::decode_request(&bytes, header_length.as_deref(), &*t2)
            .map_err(|e| t2.take_refusal().unwrap_or(e))?;
        drop(bytes);
        let mut plan = model::plan_checked(&svc2.spec, req, &|size| svc2.check_size(&[size], "request"))?;
        svc2.admit_plan(&mut plan)?;
        svc2.hold_answer(&t2, &plan.requests, plan.json_outputs())?;
        Ok(plan)
    };
    let mut plan = if len <= INLINE_CODE_BYTES { decode()? } else { svc.off_runtime(decode).await? };
    let timeout = earliest(plan.timeout, header_timeout(&headers)?);
    let requests = std::mem::take(&mut plan.requests);
    let (responses, timing) = svc.forecast(requests, timeout, &rid, &ticket).await?;
    let model_name = svc.spec.name.clone();
    let small = ticket.answer_held() <= INLINE_CODE_BYTES as u64;
    let encode = move || Ok(kserve::encode_response(&plan.respond(&model_name, &responses)));
    let (body, json_len) = if small { encode()? } else { svc.off_runtime(encode).await? };
    leaving.answered();
    let mut r = Response::new(Body::new(Holding::new(body, ticket)));
    let h = r.headers_mut();
    match json_len {
        Some(n) => {
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
            h.insert(HEADER_LENGTH, HeaderValue::from(n));
        }
        None => {
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
    }
    server_timing(h, timing);
    Ok(r)
}

/// `POST /v1/forecast`: the CLI's request format (JSON, or JSON Lines with `Content-Type:
/// application/x-ndjson`) in, the CLI's response format out. As `totoc forecast`, sample paths are left out
/// unless asked for (`?write_samples=true`, the CLI's `--write-samples`).
async fn forecast_v1(
    State(svc): Svc,
    Extension(RequestId(rid)): Extension<RequestId>,
    peer: Option<Extension<Peer>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ServeError> {
    let format = v1_format(&headers)?;
    let write_samples = write_samples(&uri)?;
    let ticket = svc.ticket(peer_of(peer));
    let leaving = Leaving::new(ticket.clone());
    let bytes = read_body(&svc, &ticket, &headers, body).await?;
    ticket.keep_slot(svc.enter()?);
    // (a bad header is refused after the body's own errors, as the decode finds them first)
    let timeout = header_timeout(&headers);
    let (svc2, t2, rid2, span) = (svc.clone(), ticket.clone(), rid.clone(), tracing::Span::current());
    // Always off the async workers: a line's timestamps and calendar cost more than its bytes. The decode queues
    // the requests itself, so the engine thread hears of them without a hop back to the runtime first.
    let (dataset, queued) = svc
        .off_runtime(move || {
            let mut dataset = decode_v1(&svc2, &t2, &bytes, format)?;
            drop(bytes);
            let reqs = take_requests(&mut dataset);
            let timeout = timeout?;
            t2.check_here()?;
            match span.in_scope(|| svc2.submit(reqs, timeout, &rid2, &t2))? {
                Ok(queued) => Ok((dataset, queued)),
                Err(refused) => Err(refused.explain(&svc2.engine)),
            }
        })
        .await?;
    let (mut responses, timing) = svc.answer(queued, &rid).await?;
    if !write_samples {
        responses.iter_mut().for_each(|r| r.samples = None);
    }
    let (point, model) = (svc.engine.info().model.point_forecast(), svc.engine.info().model.as_str());
    let small = ticket.answer_held() <= INLINE_CODE_BYTES as u64;
    let encode = move || {
        data::write::to_bytes(&dataset, &responses, format, point, Some(model))
            .map_err(|e| ServeError::Internal(e.to_string()))
    };
    let text = if small { encode()? } else { svc.off_runtime(encode).await? };
    leaving.answered();
    let mut r = Response::new(Body::new(Holding::new(text, ticket)));
    let ct = if format == Format::JsonLines { "application/x-ndjson" } else { "application/json" };
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
    server_timing(r.headers_mut(), timing);
    Ok(r)
}

/// Decodes a `/v1/forecast` body with the CLI's own reader (the same requests, timestamps included, and the
/// same errors as `totoc forecast`), bounded: its requests are counted against `--max-series` before any is
/// decoded, each is decoded straight into its fields with what it builds charged to `ticket` (which stops it
/// once its client left), `target` and `quantiles` stop at `--max-variates` and `--max-quantile-levels`
/// entries, and the answer's size is held before the engine runs.
fn decode_v1(
    svc: &Service,
    ticket: &Ticket,
    bytes: &[u8],
    format: Format,
) -> Result<data::Dataset, ServeError> {
    decode_requests(svc, ticket, bytes, format, "request body", &ReadOptions::default())
}

/// [`decode_v1`] with the name of the body in errors (`source`) and the reader's options: also the decode of
/// `/v1/timeseries/forecast`, whose inputs are translated into these requests ([`super::timeseries`]).
pub(super) fn decode_requests(
    svc: &Service,
    ticket: &Ticket,
    bytes: &[u8],
    format: Format,
    source: &str,
    opts: &ReadOptions,
) -> Result<data::Dataset, ServeError> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        ServeError::bad_request(format!("{source}: the body is not UTF-8 text; send UTF-8 JSON"))
    })?;
    let count = data::json::count_requests(text, format == Format::JsonLines);
    svc.check_size(&[RequestSize { series: count, ..RequestSize::default() }], source)?;
    let budget = &svc.limits.budget;
    let keys = [
        SeqLimit { key: "target", max: budget.max_variates, what: "variates per series (--max-variates)" },
        SeqLimit { key: "id_mask", max: budget.max_variates, what: "variates per series (--max-variates)" },
        SeqLimit {
            key: "quantiles",
            max: budget.max_quantiles,
            what: "quantile levels (--max-quantile-levels)",
        },
    ];
    let bounds = data::json::Bounds { meter: ticket, limits: &keys };
    let limits = svc.engine.info().request_limits();
    let mut dataset =
        data::parse_json_text(text, format, source, opts, &Overrides::default(), &limits, &bounds).map_err(
            |e| {
                ticket
                    .take_refusal()
                    .unwrap_or_else(|| v1_hint(ServeError::bad_request(e.to_string()), format))
            },
        )?;
    let sizes: Vec<RequestSize> = dataset.series.iter().map(|s| RequestSize::of(&s.request)).collect();
    svc.check_size(&sizes, source)?;
    for s in &mut dataset.series {
        ticket.check_here()?;
        svc.admit(&mut s.request, &s.at)?;
    }
    svc.hold_answer(ticket, dataset.series.iter().map(|s| &s.request), true)?;
    Ok(dataset)
}

/// The `write_samples` query parameter of `/v1/forecast` (`true`/`1` or `false`/`0`; absent: false).
fn write_samples(uri: &axum::http::Uri) -> Result<bool, ServeError> {
    let mut write = false;
    for pair in uri.query().unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("write_samples", "true" | "1") => write = true,
            ("write_samples", "false" | "0") => write = false,
            ("write_samples", v) => {
                return Err(ServeError::bad_request(format!(
                    "query parameter write_samples={v:?}: give true or false"
                )))
            }
            (k, _) => {
                return Err(ServeError::bad_request(format!(
                "unknown query parameter `{k}` of /v1/forecast; the one it takes is write_samples=true|false"
            )))
            }
        }
    }
    Ok(write)
}

/// JSON for `application/json` (or no content type), JSON Lines for the NDJSON / JSON Lines types.
fn v1_format(headers: &HeaderMap) -> Result<Format, ServeError> {
    let Some(ct) = headers.get(header::CONTENT_TYPE) else { return Ok(Format::Json) };
    let ct = ct.to_str().unwrap_or("").split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    match ct.as_str() {
        "application/json" | "" => Ok(Format::Json),
        "application/x-ndjson" | "application/jsonl" | "application/json-lines" | "application/jsonlines" => {
            Ok(Format::JsonLines)
        }
        other => Err(ServeError::UnsupportedMediaType(format!(
            "Content-Type `{other}` is not read here; send one request as application/json or several as \
             application/x-ndjson (JSON Lines)"
        ))),
    }
}

/// Several JSON objects sent as one JSON document: say how to send JSON Lines.
fn v1_hint(e: ServeError, format: Format) -> ServeError {
    match e {
        ServeError::BadRequest(m) if format == Format::Json && m.contains("trailing characters") => {
            ServeError::BadRequest(format!(
                "{m}; to send several requests, one per line, use Content-Type: application/x-ndjson"
            ))
        }
        e => e,
    }
}

/// Reads the body within `--max-body-bytes`, `--body-read-timeout-ms` and the minimum upload rate, holding
/// its bytes in `ticket` as they arrive (a first hold of what `Content-Length` declares, at most
/// [`super::hold::FIRST_HOLD`], grown with the buffer as bytes arrive); compressed bodies are refused (no
/// decoder runs on input).
pub(super) async fn read_body(
    svc: &Service,
    ticket: &Ticket,
    headers: &HeaderMap,
    body: Body,
) -> Result<bytes::Bytes, ServeError> {
    if let Some(enc) = headers.get(header::CONTENT_ENCODING) {
        let enc = enc.to_str().unwrap_or("?");
        if !enc.eq_ignore_ascii_case("identity") {
            return Err(ServeError::UnsupportedMediaType(format!(
                "Content-Encoding `{enc}` is not accepted; send the body uncompressed"
            )));
        }
    }
    let limit = svc.limits.max_body_bytes;
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        svc.metrics.reject("body_too_large");
        return Err(ServeError::PayloadTooLarge { limit });
    }
    let first = declared.map_or(FIRST_CHUNKED, |d| wire_hold(Some(d), 0));
    ticket.hold(Part::Wire, first)?;
    let start = Instant::now();
    let mut body = body;
    let mut buf: Vec<u8> = Vec::with_capacity(first as usize);
    loop {
        let deadline = body_deadline(&svc.limits, start, buf.len() as u64);
        let frame = match tokio::time::timeout_at(deadline.into(), body.frame()).await {
            Err(_) => {
                svc.metrics.reject("body_timeout");
                return Err(ServeError::BodyTimeout { ms: (deadline - start).as_millis() });
            }
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                return Err(ServeError::bad_request(format!("could not read the request body: {e}")))
            }
            Ok(Some(Ok(f))) => f,
        };
        let Ok(data) = frame.into_data() else { continue };
        let total = buf.len().saturating_add(data.len());
        if total > limit {
            svc.metrics.reject("body_too_large");
            return Err(ServeError::PayloadTooLarge { limit });
        }
        if total > buf.capacity() {
            // Grow by doubling (up to what is declared, when it is), holding the old buffer and the new one
            // (both are alive while one is copied into the other) before allocating.
            let cap = total.max(buf.capacity() * 2).min(declared.map_or(limit, |d| d as usize).max(total));
            ticket.hold(Part::Wire, (cap + buf.capacity()) as u64)?;
            buf.reserve_exact(cap - buf.len());
        }
        buf.extend_from_slice(&data);
    }
    Ok(bytes::Bytes::from(buf))
}

/// A response body that keeps its request's [`Ticket`] (its bytes, its slot) until its last frame is taken
/// for writing, or the connection drops it.
pub struct Holding {
    body: Option<bytes::Bytes>,
    _ticket: Arc<Ticket>,
}

impl Holding {
    pub fn new(body: Vec<u8>, ticket: Arc<Ticket>) -> Self {
        Holding { body: Some(bytes::Bytes::from(body)), _ticket: ticket }
    }
}

impl hyper::body::Body for Holding {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        std::task::Poll::Ready(
            self.body.take().filter(|b| !b.is_empty()).map(|b| Ok(hyper::body::Frame::data(b))),
        )
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(|b| b.is_empty())
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.body.as_ref().map_or(0, |b| b.len() as u64))
    }
}

/// The `x-request-timeout-ms` header.
pub(super) fn header_timeout(headers: &HeaderMap) -> Result<Option<Duration>, ServeError> {
    match headers.get(TIMEOUT_HEADER) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(|ms| Some(Duration::from_millis(ms)))
            .ok_or_else(|| {
                ServeError::bad_request(format!("header {TIMEOUT_HEADER} must be whole milliseconds"))
            }),
    }
}

fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// `Server-Timing: queue;dur=…, compute;dur=…` (ms): where the request's time went on the server.
pub(super) fn server_timing(h: &mut HeaderMap, t: Timing) {
    let v = format!(
        "queue;dur={:.3}, compute;dur={:.3};desc=\"engine call, {} series\"",
        t.queue.as_secs_f64() * 1e3,
        t.compute.as_secs_f64() * 1e3,
        t.batch_series
    );
    if let Ok(v) = HeaderValue::from_str(&v) {
        h.insert("server-timing", v);
    }
}

fn json(status: StatusCode, value: &impl serde::Serialize) -> Response {
    let body = serde_json::to_vec(value).expect("metadata serialises");
    let mut r = (status, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// The REST port's handler for [`super::conn`]: axum's router.
#[derive(Clone)]
pub struct Rest(pub Router);

impl super::conn::Handler for Rest {
    type Body = Body;

    fn handle(
        &self,
        _peer: std::net::IpAddr,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> super::conn::Reply<Body> {
        use tonic::codegen::Service as _;
        let mut router = self.0.clone();
        Box::pin(async move { router.call(req.map(Body::new)).await })
    }
}

/// The engine's requests of a decoded `dataset`: each takes its series' values (moved, not copied); the dataset
/// keeps the rest, which the answer is written with (`/v1/forecast` and KServe's time-series route).
pub(super) fn take_requests(dataset: &mut tables::Dataset) -> Vec<engines::request::ForecastRequest> {
    dataset
        .series
        .iter_mut()
        .map(|s| {
            let target = std::mem::take(&mut s.request.target);
            let mut r = s.request.clone();
            r.target = target;
            r
        })
        .collect()
}
