//! The gRPC front end: the Open Inference Protocol's `inference.GRPCInferenceService` (tonic + prost, generated
//! at build time from `proto/grpc_predict_v2.proto` by protox and tonic-prost-build) over the same [`Service`]
//! and the same model ([`super::model`]) as REST, so a request gives the same numbers on either port.
//!
//! Tensors arrive as typed `contents` or as `raw_input_contents` (what `tritonclient[grpc]` sends by default);
//! outputs always go back as `raw_output_contents` (little-endian, row-major), as Triton does. The deadline is
//! the sooner of the call's `grpc-timeout` and the `timeout` parameter (µs). The request id comes from the
//! `x-request-id` metadata (or is minted) and is echoed in the response metadata; `--token-file` applies to every
//! RPC but `ServerLive` and `ServerReady` (the health probes, open as on REST).
//!
//! [`Front`] stands before tonic: it checks the token from the headers, before a byte of the message is read,
//! opens the call's [`Ticket`] ([`super::hold`]) and gives tonic the message body through [`Guarded`], which
//! holds every byte it lets through from the bytes budget as it arrives (RESOURCE_EXHAUSTED when it is spent;
//! of what the message's length prefix declares, at most a first 1 MiB) and ends a message that is not in within
//! `--body-read-timeout-ms`, or slower than `--min-upload-bytes-per-s` after its first seconds
//! (DEADLINE_EXCEEDED). Messages over `--max-body-bytes` are RESOURCE_EXHAUSTED; the health probes' messages
//! over [`PROBE_MESSAGE_MAX`] too (they are never charged to the budget, so that a full budget never fails a
//! probe). The codec (codec.rs) counts the message before prost builds it and holds what its decode
//! builds; the answer is held before the engine runs (its encoded size within `--max-response-bytes`), and the
//! ticket lives in the response body until its last frame is written.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Request, Response, Status};
use tracing::Instrument;

use super::error::{Overload, ServeError};
use super::hold::{wire_hold, Leaving, Part, Ticket};
use super::kserve::{self, InferRequest, InputTensor, Param, RequestedOutput, TensorData};
use super::metrics::GrpcLabels;
use super::model::{self, TensorMeta, VERSION};
use super::service::{body_deadline, request_id, Service};

/// The largest message of a health probe (`ServerLive`, `ServerReady`: empty messages).
pub const PROBE_MESSAGE_MAX: usize = 4096;

/// A call's ticket, as a request extension for its handler.
#[derive(Clone)]
struct CallTicket(Arc<Ticket>);

/// The generated protocol types and service trait.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("inference");
}

use pb::grpc_inference_service_server::{GrpcInferenceService, GrpcInferenceServiceServer};
use pb::infer_parameter::ParameterChoice;

/// The gRPC service over the shared core.
pub struct Grpc {
    svc: Arc<Service>,
}

/// The tonic service, with message size limits from `--max-body-bytes` and `--max-response-bytes`.
pub fn server(svc: Arc<Service>) -> GrpcInferenceServiceServer<Grpc> {
    let limit = svc.limits.max_body_bytes;
    let answer = usize::try_from(svc.limits.max_response_bytes).unwrap_or(usize::MAX);
    GrpcInferenceServiceServer::new(Grpc { svc })
        .max_decoding_message_size(limit)
        .max_encoding_message_size(answer)
}

/// The gRPC port's handler for [`super::conn`]: the token, then tonic with a [`Guarded`] body.
#[derive(Clone)]
pub struct Front {
    svc: Arc<Service>,
    inner: GrpcInferenceServiceServer<Grpc>,
}

impl Front {
    pub fn new(svc: Arc<Service>) -> Self {
        Front { inner: server(svc.clone()), svc }
    }
}

impl super::conn::Handler for Front {
    type Body = tonic::body::Body;

    fn handle(
        &self,
        peer: std::net::IpAddr,
        req: hyper::Request<hyper::body::Incoming>,
    ) -> super::conn::Reply<tonic::body::Body> {
        use tonic::codegen::Service as _;
        // Label values come from a fixed set, never from the request.
        let method = match req.uri().path().rsplit('/').next().unwrap_or("") {
            m @ ("ServerLive" | "ServerReady" | "ModelReady" | "ServerMetadata" | "ModelMetadata"
            | "ModelInfer") => m,
            _ => "unknown",
        }
        .to_string();
        let open = matches!(method.as_str(), "ServerLive" | "ServerReady");
        if !open {
            let given = req.headers().get("authorization").and_then(|v| v.to_str().ok());
            if let Err(e) = self.svc.authorize(given) {
                let labels = GrpcLabels { method, code: format!("{:?}", tonic::Code::Unauthenticated) };
                self.svc.metrics.grpc_requests.get_or_create(&labels).inc();
                return Box::pin(async move { Ok(Status::from(e).into_http()) });
            }
        }
        let (mut parts, body) = req.into_parts();
        let ticket = self.svc.ticket(peer);
        let start = Instant::now();
        let body = Guarded {
            inner: body,
            svc: self.svc.clone(),
            // Probes are never charged (a full budget must not fail them), and their messages are tiny.
            ticket: (!open).then(|| ticket.clone()),
            limit: if open { PROBE_MESSAGE_MAX } else { self.svc.limits.max_body_bytes },
            received: 0,
            prefix: Vec::new(),
            declared: None,
            start,
            deadline: Box::pin(tokio::time::sleep_until(body_deadline(&self.svc.limits, start, 0).into())),
        };
        parts.extensions.insert(CallTicket(ticket.clone()));
        let mut inner = self.inner.clone();
        let call = async move { inner.call(hyper::Request::from_parts(parts, body)).await };
        // The codec holds what the message's decode builds from this ticket (never a probe's).
        let scoped = super::hold::CALL.scope((!open).then(|| ticket.clone()), call);
        Box::pin(async move {
            // The answer's body keeps the ticket until its last frame is written.
            let resp = scoped.await?;
            Ok(resp.map(|body| tonic::body::Body::new(HoldingBody { inner: body, _ticket: ticket })))
        })
    }
}

/// A response body that keeps its call's [`Ticket`] until the body is done or dropped.
struct HoldingBody {
    inner: tonic::body::Body,
    _ticket: Arc<Ticket>,
}

impl hyper::body::Body for HoldingBody {
    type Data = bytes::Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Status>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// A gRPC request body that holds its bytes from the budget as they arrive, and must be in within the body
/// timeout and the minimum upload rate (see the module docs).
pub struct Guarded {
    inner: hyper::body::Incoming,
    svc: Arc<Service>,
    /// Where the bytes are held (`None`: a probe, never charged).
    ticket: Option<Arc<Ticket>>,
    /// The largest message taken.
    limit: usize,
    received: u64,
    /// The first message's 5-byte prefix (compression flag, length), as it arrives.
    prefix: Vec<u8>,
    /// The first message's length with its prefix, once the prefix is in.
    declared: Option<u64>,
    start: Instant,
    deadline: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl hyper::body::Body for Guarded {
    type Data = bytes::Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Status>>> {
        use std::task::Poll;
        let this = &mut *self;
        match std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received = this.received.saturating_add(data.len() as u64);
                    if this.prefix.len() < 5 {
                        let take = (5 - this.prefix.len()).min(data.len());
                        this.prefix.extend_from_slice(&data[..take]);
                        if this.prefix.len() == 5 {
                            // Refused at once when too large; else it is held up to a first 1 MiB.
                            let len = u32::from_be_bytes([
                                this.prefix[1],
                                this.prefix[2],
                                this.prefix[3],
                                this.prefix[4],
                            ]);
                            let limit = this.limit;
                            this.declared = Some(5 + u64::from(len));
                            if len as usize > limit {
                                this.svc.metrics.reject("body_too_large");
                                return Poll::Ready(Some(Err(Status::resource_exhausted(format!(
                                    "the message of {len} bytes exceeds the server's limit of {limit} bytes; send \
                                     fewer series per request or raise --max-body-bytes"
                                )))));
                            }
                        }
                    }
                    if this.received > this.limit as u64 + 5 {
                        this.svc.metrics.reject("body_too_large");
                        return Poll::Ready(Some(Err(Status::resource_exhausted(format!(
                            "the call sends more than the server's limit of {} bytes; send one message of at most \
                             that",
                            this.limit
                        )))));
                    }
                    if let Some(t) = &this.ticket {
                        if let Err(e) = t.hold(Part::Wire, wire_hold(this.declared, this.received)) {
                            return Poll::Ready(Some(Err(Status::from(e))));
                        }
                    }
                    // Every byte earns time at the minimum upload rate; a message that keeps arriving is still
                    // held to it.
                    let deadline = body_deadline(&this.svc.limits, this.start, this.received);
                    if Instant::now() > deadline {
                        this.svc.metrics.reject("body_timeout");
                        let ms = (deadline - this.start).as_millis();
                        return Poll::Ready(Some(Err(Status::from(ServeError::BodyTimeout { ms }))));
                    }
                    this.deadline.as_mut().reset(deadline.into());
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                Poll::Ready(Some(Err(Status::cancelled(format!("reading the message: {e}")))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.svc.metrics.reject("body_timeout");
                    let ms = (this.deadline.deadline().into_std() - this.start).as_millis();
                    Poll::Ready(Some(Err(Status::from(ServeError::BodyTimeout { ms }))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// The `grpc-timeout` header (gRPC over HTTP/2: up to 8 digits and a unit H, M, S, m, u or n).
pub fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    if value.len() < 2 || value.len() > 9 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

fn bad(msg: impl Into<String>) -> ServeError {
    ServeError::BadRequest(msg.into())
}

fn param_from_pb(key: &str, p: &pb::InferParameter) -> Result<Param, ServeError> {
    match &p.parameter_choice {
        Some(ParameterChoice::BoolParam(b)) => Ok(Param::Bool(*b)),
        Some(ParameterChoice::Int64Param(i)) => Ok(Param::Int(*i)),
        Some(ParameterChoice::Uint64Param(u)) => {
            Ok(i64::try_from(*u).map(Param::Int).unwrap_or(Param::Float(*u as f64)))
        }
        Some(ParameterChoice::DoubleParam(x)) => Ok(Param::Float(*x)),
        Some(ParameterChoice::StringParam(s)) => Ok(Param::Str(s.clone())),
        None => Err(bad(format!("parameter `{key}` has no value"))),
    }
}

fn param_to_pb(p: &Param) -> pb::InferParameter {
    let choice = match p {
        Param::Bool(b) => ParameterChoice::BoolParam(*b),
        Param::Int(i) => ParameterChoice::Int64Param(*i),
        Param::Float(x) => ParameterChoice::DoubleParam(*x),
        Param::Str(s) => ParameterChoice::StringParam(s.clone()),
    };
    pb::InferParameter { parameter_choice: Some(choice) }
}

/// A `ModelInferRequest` as the protocol-neutral [`InferRequest`] (tensors decoded and size-checked).
pub fn decode_infer(req: pb::ModelInferRequest) -> Result<InferRequest, ServeError> {
    let raw = req.raw_input_contents;
    if !raw.is_empty() && raw.len() != req.inputs.len() {
        return Err(bad(format!(
            "raw_input_contents has {} entries for {} inputs; give one per input, in order",
            raw.len(),
            req.inputs.len()
        )));
    }
    let mut inputs = Vec::with_capacity(req.inputs.len());
    for (i, t) in req.inputs.into_iter().enumerate() {
        kserve::check_datatype(&t.name, &t.datatype)?;
        let (shape, count) = kserve::element_count(&t.name, &t.shape)?;
        if let Some(k) = t.parameters.keys().next() {
            return Err(bad(format!(
                "input `{}`: parameter `{k}` is not taken; inputs take no parameters",
                t.name
            )));
        }
        let data = if let Some(bytes) = raw.get(i) {
            if t.contents.is_some() {
                return Err(bad(format!(
                    "input `{}` has both `contents` and raw_input_contents; send one",
                    t.name
                )));
            }
            let want = kserve::byte_size(&t.name, &shape, count, &t.datatype)?;
            if bytes.len() != want {
                return Err(bad(format!(
                    "input `{}`: raw_input_contents has {} bytes but shape {shape:?} of {} takes {want}",
                    t.name,
                    bytes.len(),
                    t.datatype
                )));
            }
            kserve::typed_from_bytes(&t.datatype, bytes)
        } else {
            let c = t.contents.ok_or_else(|| {
                bad(format!("input `{}` has no data: give `contents` or raw_input_contents", t.name))
            })?;
            let data = if t.datatype == "INT64" {
                TensorData::Int64(c.int64_contents)
            } else {
                TensorData::Fp32(c.fp32_contents)
            };
            if data.count() != count {
                return Err(bad(format!(
                    "input `{}`: shape {shape:?} holds {count} elements but its {} contents have {}",
                    t.name,
                    t.datatype,
                    data.count()
                )));
            }
            data
        };
        inputs.push(InputTensor { name: t.name, shape, data });
    }
    let mut parameters = BTreeMap::new();
    for (k, v) in &req.parameters {
        parameters.insert(k.clone(), param_from_pb(k, v)?);
    }
    // REST's output encoding switch; gRPC outputs are always raw.
    parameters.remove("binary_data_output");
    let outputs = if req.outputs.is_empty() {
        None
    } else {
        let mut v = Vec::with_capacity(req.outputs.len());
        for o in req.outputs {
            for (k, p) in &o.parameters {
                match (k.as_str(), param_from_pb(k, p)?) {
                    ("binary_data", Param::Bool(_)) | ("classification", Param::Int(0)) => {}
                    (k, p) => {
                        return Err(bad(format!("output `{}`: parameter `{k}` = {p} is not taken", o.name)));
                    }
                }
            }
            v.push(RequestedOutput { name: o.name, binary: Some(true) });
        }
        Some(v)
    };
    let id = (!req.id.is_empty()).then_some(req.id);
    Ok(InferRequest { id, parameters, inputs, outputs, binary_data_output: true })
}

/// An [`kserve::InferResponse`] as a `ModelInferResponse` with raw output contents.
pub fn encode_infer(resp: kserve::InferResponse) -> pb::ModelInferResponse {
    let mut outputs = Vec::with_capacity(resp.outputs.len());
    let mut raw = Vec::with_capacity(resp.outputs.len());
    for o in resp.outputs {
        raw.push(o.data.iter().flat_map(|x| x.to_le_bytes()).collect());
        outputs.push(pb::model_infer_response::InferOutputTensor {
            name: o.name,
            datatype: "FP32".into(),
            shape: o.shape.iter().map(|&d| d as i64).collect(),
            parameters: HashMap::new(),
            contents: None,
        });
    }
    pb::ModelInferResponse {
        model_name: resp.model_name,
        model_version: resp.model_version,
        id: resp.id.unwrap_or_default(),
        parameters: resp.parameters.iter().map(|(k, v)| (k.clone(), param_to_pb(v))).collect(),
        outputs,
        raw_output_contents: raw,
    }
}

fn tensor_meta(t: TensorMeta) -> pb::model_metadata_response::TensorMetadata {
    pb::model_metadata_response::TensorMetadata {
        name: t.name.into(),
        datatype: t.datatype.into(),
        shape: t.shape,
    }
}

impl Grpc {
    /// Runs one RPC: request id and span, the token check (unless `open`), metrics and the access log line.
    async fn call<T, Fut>(
        &self,
        method: &'static str,
        meta: &MetadataMap,
        open: bool,
        f: impl FnOnce(String) -> Fut,
    ) -> Result<Response<T>, Status>
    where
        Fut: Future<Output = Result<T, ServeError>>,
    {
        let start = Instant::now();
        let rid = request_id(meta.get("x-request-id").and_then(|v| v.to_str().ok()));
        let span = tracing::info_span!("request", request_id = %rid);
        // A call the client cancels (or whose connection drops) is dropped mid-way: still counted and logged.
        let mut unanswered =
            Unanswered { method, start, svc: &self.svc, span: span.clone(), answered: false };
        let auth = if open {
            Ok(())
        } else {
            self.svc.authorize(meta.get("authorization").and_then(|v| v.to_str().ok()))
        };
        let result = match auth {
            Ok(()) => f(rid.clone()).instrument(span.clone()).await,
            Err(e) => Err(e),
        };
        unanswered.answered = true;
        let code = result.as_ref().map_or_else(|e| e.grpc_code(), |_| tonic::Code::Ok);
        let labels = GrpcLabels { method: method.to_string(), code: format!("{code:?}") };
        self.svc.metrics.grpc_requests.get_or_create(&labels).inc();
        let ms = start.elapsed().as_secs_f64() * 1e3;
        span.in_scope(|| match &result {
            Err(e) if e.is_server_fault() => tracing::error!(code = ?code, ms, "gRPC {method}: {e}"),
            _ if matches!(method, "ServerLive" | "ServerReady") => {
                tracing::debug!(code = ?code, ms, "gRPC {method}")
            }
            _ => tracing::info!(code = ?code, ms, "gRPC {method}"),
        });
        let rid_value = MetadataValue::try_from(rid.as_str()).ok();
        match result {
            Ok(v) => {
                let mut r = Response::new(v);
                if let Some(v) = rid_value {
                    r.metadata_mut().insert("x-request-id", v);
                }
                Ok(r)
            }
            Err(e) => {
                let mut s = Status::from(e);
                if let Some(v) = rid_value {
                    s.metadata_mut().insert("x-request-id", v);
                }
                Err(s)
            }
        }
    }
}

#[tonic::async_trait]
impl GrpcInferenceService for Grpc {
    async fn server_live(
        &self,
        req: Request<pb::ServerLiveRequest>,
    ) -> Result<Response<pb::ServerLiveResponse>, Status> {
        let live = self.svc.batcher.engine_alive();
        self.call("ServerLive", req.metadata(), true, |_| async move { Ok(pb::ServerLiveResponse { live }) })
            .await
    }

    async fn server_ready(
        &self,
        req: Request<pb::ServerReadyRequest>,
    ) -> Result<Response<pb::ServerReadyResponse>, Status> {
        let ready = self.svc.readiness.is_ready();
        self.call(
            "ServerReady",
            req.metadata(),
            true,
            |_| async move { Ok(pb::ServerReadyResponse { ready }) },
        )
        .await
    }

    async fn model_ready(
        &self,
        req: Request<pb::ModelReadyRequest>,
    ) -> Result<Response<pb::ModelReadyResponse>, Status> {
        let (meta, r) = (req.metadata().clone(), req.into_inner());
        self.call("ModelReady", &meta, false, |_| async move {
            self.svc.check_model(&r.name, Some(&r.version))?;
            Ok(pb::ModelReadyResponse { ready: self.svc.readiness.is_ready() })
        })
        .await
    }

    async fn server_metadata(
        &self,
        req: Request<pb::ServerMetadataRequest>,
    ) -> Result<Response<pb::ServerMetadataResponse>, Status> {
        self.call("ServerMetadata", req.metadata(), false, |_| async {
            Ok(pb::ServerMetadataResponse {
                name: "totoc".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                extensions: vec!["binary_tensor_data".into()],
            })
        })
        .await
    }

    async fn model_metadata(
        &self,
        req: Request<pb::ModelMetadataRequest>,
    ) -> Result<Response<pb::ModelMetadataResponse>, Status> {
        let (meta, r) = (req.metadata().clone(), req.into_inner());
        self.call("ModelMetadata", &meta, false, |_| async move {
            self.svc.check_model(&r.name, Some(&r.version))?;
            let spec = &self.svc.spec;
            Ok(pb::ModelMetadataResponse {
                name: spec.name.clone(),
                versions: vec![VERSION.into()],
                platform: model::PLATFORM.into(),
                inputs: spec.inputs().into_iter().map(tensor_meta).collect(),
                outputs: spec.outputs().into_iter().map(tensor_meta).collect(),
            })
        })
        .await
    }

    async fn model_infer(
        &self,
        req: Request<pb::ModelInferRequest>,
    ) -> Result<Response<pb::ModelInferResponse>, Status> {
        let meta = req.metadata().clone();
        let ticket = match req.extensions().get::<CallTicket>() {
            Some(CallTicket(t)) => t.clone(),
            None => self.svc.ticket(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
        };
        // The client's deadline counts from when it sent the call; answer a little before it, so the client gets
        // the server's DEADLINE_EXCEEDED (counted and logged) rather than giving up on its own.
        let arrived = Instant::now();
        let grpc_timeout = meta
            .get("grpc-timeout")
            .and_then(|v| v.to_str().ok())
            .and_then(parse_grpc_timeout)
            .map(|t| t.saturating_sub(t / 20 + Duration::from_millis(5)));
        let r = req.into_inner();
        self.call("ModelInfer", &meta, false, |rid| async move {
            let work = self.infer(r, grpc_timeout, arrived, rid, ticket);
            match grpc_timeout {
                None => work.await,
                Some(t) => tokio::time::timeout_at((arrived + t).into(), work).await.unwrap_or_else(|_| {
                    self.svc.metrics.reject(Overload::Deadline.label());
                    Err(ServeError::overloaded(
                        Overload::Deadline,
                        format!(
                            "the call's deadline ({} ms, grpc-timeout) passed before it was answered",
                            t.as_millis()
                        ),
                    ))
                }),
            }
        })
        .await
    }
}

/// Counts and logs a call dropped before it was answered (the client cancelled, its deadline passed on its side, or
/// its connection closed), as `code="Cancelled"`.
struct Unanswered<'a> {
    method: &'static str,
    start: Instant,
    svc: &'a Service,
    span: tracing::Span,
    answered: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let labels =
            GrpcLabels { method: self.method.to_string(), code: format!("{:?}", tonic::Code::Cancelled) };
        self.svc.metrics.grpc_requests.get_or_create(&labels).inc();
        let ms = self.start.elapsed().as_secs_f64() * 1e3;
        let method = self.method;
        self.span.in_scope(|| {
            tracing::info!(code = "Cancelled", ms, "gRPC {method}: the client left before the answer")
        });
    }
}

impl Grpc {
    /// ModelInfer's work: decode, admit, hold the answer, forecast (by the sooner of the `timeout` parameter and
    /// what is left of `grpc_timeout` since `arrived`), encode; everything held in `ticket`.
    async fn infer(
        &self,
        r: pb::ModelInferRequest,
        grpc_timeout: Option<Duration>,
        arrived: Instant,
        rid: String,
        ticket: Arc<Ticket>,
    ) -> Result<pb::ModelInferResponse, ServeError> {
        let svc = &self.svc;
        let leaving = Leaving::new(ticket.clone());
        svc.check_model(&r.model_name, Some(&r.model_version))?;
        ticket.keep_slot(svc.enter()?);
        // Turning tensors into series is CPU work: off the runtime's workers, holding the ticket while it runs.
        let (svc2, t2) = (svc.clone(), ticket.clone());
        let mut plan = svc
            .off_runtime(move || {
                let req = decode_infer(r)?;
                t2.check_here()?;
                let mut plan =
                    model::plan_checked(&svc2.spec, req, &|size| svc2.check_size(&[size], "request"))?;
                svc2.admit_plan(&mut plan)?;
                svc2.hold_answer(&t2, &plan.requests, false)?;
                Ok(plan)
            })
            .await?;
        let left = grpc_timeout.map(|t| t.saturating_sub(arrived.elapsed()));
        let timeout = match (plan.timeout, left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let requests = std::mem::take(&mut plan.requests);
        let (responses, _timing) = svc.forecast(requests, timeout, &rid, &ticket).await?;
        let name = svc.spec.name.clone();
        let t3 = ticket.clone();
        let answer = svc
            .off_runtime(move || {
                let _held = t3;
                Ok(encode_infer(plan.respond(&name, &responses)))
            })
            .await?;
        leaving.answered();
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pb::model_infer_request::InferInputTensor;

    #[test]
    fn grpc_timeouts_parse_every_unit() {
        assert_eq!(parse_grpc_timeout("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_grpc_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(parse_grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_grpc_timeout("5u"), Some(Duration::from_micros(5)));
        assert_eq!(parse_grpc_timeout("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "m", "1x", "-1m", "123456789m", "1.5S"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad}");
        }
    }

    fn input(
        name: &str,
        datatype: &str,
        shape: Vec<i64>,
        contents: Option<pb::InferTensorContents>,
    ) -> InferInputTensor {
        InferInputTensor {
            name: name.into(),
            datatype: datatype.into(),
            shape,
            parameters: HashMap::new(),
            contents,
        }
    }

    #[test]
    fn raw_and_typed_contents_decode_alike() {
        let typed = pb::ModelInferRequest {
            inputs: vec![input(
                "target",
                "FP32",
                vec![1, 2],
                Some(pb::InferTensorContents { fp32_contents: vec![1.0, f32::NAN], ..Default::default() }),
            )],
            parameters: HashMap::from([(
                "horizon".to_string(),
                pb::InferParameter { parameter_choice: Some(ParameterChoice::Int64Param(3)) },
            )]),
            ..Default::default()
        };
        let raw = pb::ModelInferRequest {
            inputs: vec![input("target", "FP32", vec![1, 2], None)],
            raw_input_contents: vec![[1.0f32, f32::NAN].iter().flat_map(|x| x.to_le_bytes()).collect()],
            ..typed.clone()
        };
        let (a, b) = (decode_infer(typed).unwrap(), decode_infer(raw).unwrap());
        assert_eq!(a.parameters["horizon"], Param::Int(3));
        for r in [&a, &b] {
            let TensorData::Fp32(d) = &r.inputs[0].data else { panic!() };
            assert!(d[0] == 1.0 && d[1].is_nan());
        }
    }

    #[test]
    fn malformed_messages_are_invalid_arguments() {
        let cases = [
            (
                pb::ModelInferRequest {
                    inputs: vec![input("target", "FP32", vec![1, 2], None)],
                    raw_input_contents: vec![vec![0; 4]],
                    ..Default::default()
                },
                "has 4 bytes but shape [1, 2] of FP32 takes 8",
            ),
            (
                pb::ModelInferRequest {
                    inputs: vec![input("target", "FP32", vec![1], None)],
                    ..Default::default()
                },
                "has no data",
            ),
            (
                pb::ModelInferRequest {
                    inputs: vec![input("target", "BYTES", vec![1], None)],
                    ..Default::default()
                },
                "datatype BYTES is not taken",
            ),
            (
                pb::ModelInferRequest {
                    inputs: vec![input("target", "FP32", vec![1], None)],
                    raw_input_contents: vec![vec![0; 4], vec![0; 4]],
                    ..Default::default()
                },
                "2 entries for 1 inputs",
            ),
        ];
        for (req, want) in cases {
            let e = decode_infer(req).unwrap_err();
            assert_eq!(e.grpc_code(), tonic::Code::InvalidArgument);
            assert!(e.to_string().contains(want), "{e}");
        }
    }
}
