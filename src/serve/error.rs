//! [`ServeError`]: every way the server says no, with its HTTP status, gRPC code and `Retry-After`.
//!
//! Handlers only decode, call and map errors; the mapping lives here once. An error answers HTTP with
//! `{"error": "..."}` (the Open Inference Protocol's error object) and gRPC with a status whose message is the
//! same text. Overload (a full queue: 429; not ready, draining, too many requests in flight or a deadline that
//! passed in the queue: 503) carries `Retry-After`, so clients and load balancers back off instead of retrying
//! at once.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

/// A client-given string as errors quote it: at most [`CLIP`] characters (then `…`), control characters
/// escaped, so an error (and a gRPC `grpc-message`) never grows with what the client sent.
pub fn clip(s: &str) -> String {
    let mut out: String = s.chars().take(CLIP).flat_map(char::escape_default).collect();
    if s.chars().nth(CLIP).is_some() {
        out.push('…');
    }
    out
}

/// The status logged and counted for a request whose client left before its answer (nginx's "client closed
/// request"; never sent).
pub const CLIENT_GONE: StatusCode = match StatusCode::from_u16(499) {
    Ok(s) => s,
    Err(_) => StatusCode::BAD_REQUEST,
};

/// Characters of a client string quoted in an error.
pub const CLIP: usize = 64;

/// The most characters an error message sends back (HTTP body, `grpc-message`).
const MESSAGE_MAX: usize = 2048;

impl ServeError {
    /// The text a client gets: an internal error's file paths are replaced by `<path>` (the full text is in the
    /// server log), and every message is cut at [`MESSAGE_MAX`] characters.
    pub fn client_message(&self) -> String {
        let text = self.to_string();
        let text = match self {
            // Internal text (engine errors, the readiness gate's findings) may name the server's files.
            ServeError::Internal(_) | ServeError::Overloaded { kind: Overload::NotReady, .. } => {
                scrub_paths(&text)
            }
            _ => text,
        };
        match text.char_indices().nth(MESSAGE_MAX) {
            Some((at, _)) => format!("{}…", &text[..at]),
            None => text,
        }
    }
}

/// Replaces every absolute path (a word starting with `/`, after any opening quote or bracket) by `<path>`.
fn scrub_paths(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (i, word) in text.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let lead = word.len() - word.trim_start_matches(['(', '`', '\'', '"', '[']).len();
        let (open, rest) = word.split_at(lead);
        if rest.starts_with('/') {
            let end = rest.trim_end_matches([')', '`', '\'', '"', ']', ',', ':', ';', '.']);
            out.push_str(open);
            out.push_str("<path>");
            out.push_str(&rest[end.len()..]);
        } else {
            out.push_str(word);
        }
    }
    out
}

/// Why a request was turned away for load, as the `reason` label of `totoc_rejected_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overload {
    /// The batcher's queue holds as many series as it may (429).
    QueueFull,
    /// The request's deadline passed before the engine got to it (503).
    Deadline,
    /// The readiness gate has not passed (or failed) (503).
    NotReady,
    /// SIGTERM: the server finishes what it has and takes nothing new (503).
    Draining,
    /// More requests are being received or served than `--max-in-flight` (503).
    InFlight,
    /// The bodies being received hold `--max-bytes-in-flight` (503; gRPC RESOURCE_EXHAUSTED).
    BytesInFlight,
    /// The engine's estimated work ahead would make the request miss its deadline (429; gRPC
    /// RESOURCE_EXHAUSTED), see `serve::cost`.
    Backlog,
}

impl Overload {
    pub fn label(self) -> &'static str {
        match self {
            Overload::QueueFull => "queue_full",
            Overload::Deadline => "deadline",
            Overload::NotReady => "not_ready",
            Overload::Draining => "draining",
            Overload::InFlight => "in_flight",
            Overload::BytesInFlight => "bytes_in_flight",
            Overload::Backlog => "engine_backlog",
        }
    }
}

/// A failed request.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ServeError {
    /// The request is malformed or asks for what the engine cannot do (400).
    #[error("{0}")]
    BadRequest(String),
    /// No or a wrong bearer token (401).
    #[error(
        "missing or wrong bearer token; send `Authorization: Bearer <token>` with the token of --token-file"
    )]
    Unauthorized,
    /// Unknown model, version or route (404).
    #[error("{0}")]
    NotFound(String),
    /// A method the route does not take (405).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The body is larger than `--max-body-bytes` (413).
    #[error("the request body exceeds the server's limit of {limit} bytes; send fewer series per request or raise --max-body-bytes")]
    PayloadTooLarge { limit: usize },
    /// A content type or encoding the route does not read (415).
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The client did not send its body within `--body-read-timeout-ms` (408; gRPC DEADLINE_EXCEEDED).
    #[error(
        "the request body did not arrive within {ms} ms (the body timeout, or the time its bytes so far earn at \
         --min-upload-bytes-per-s); send it faster, or raise --body-read-timeout-ms"
    )]
    BodyTimeout { ms: u128 },
    /// Overloaded or not serving (429 for a full queue or engine backlog, else 503), with the seconds to wait
    /// before retrying.
    #[error("{message}")]
    Overloaded { kind: Overload, message: String, retry_after_s: u64 },
    /// The request's estimated engine time exceeds what it may take (429; gRPC RESOURCE_EXHAUSTED; no
    /// `Retry-After`: only a smaller request fits), see `serve::cost`.
    #[error("{0}")]
    TooCostly(String),
    /// The request needs more of the server's memory than one client may hold, or an answer larger than
    /// `--max-response-bytes` (413; gRPC RESOURCE_EXHAUSTED); the message names the limit.
    #[error("{0}")]
    TooLarge(String),
    /// The client left before its answer (no answer goes out; logged and counted as 499 / CANCELLED).
    #[error("the client left before the answer")]
    ClientGone,
    /// The engine failed on a valid request (500).
    #[error("{0}")]
    Internal(String),
}

impl ServeError {
    pub fn bad_request(msg: impl Into<String>) -> Self {
        ServeError::BadRequest(msg.into())
    }

    pub fn overloaded(kind: Overload, message: impl Into<String>) -> Self {
        let retry_after_s = match kind {
            Overload::QueueFull
            | Overload::Deadline
            | Overload::InFlight
            | Overload::BytesInFlight
            | Overload::Backlog => 1,
            Overload::NotReady => 5,
            Overload::Draining => 10,
        };
        ServeError::Overloaded { kind, message: message.into(), retry_after_s }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ServeError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ServeError::Unauthorized => StatusCode::UNAUTHORIZED,
            ServeError::NotFound(_) => StatusCode::NOT_FOUND,
            ServeError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ServeError::PayloadTooLarge { .. } | ServeError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ServeError::ClientGone => CLIENT_GONE,
            ServeError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ServeError::BodyTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            ServeError::Overloaded { kind: Overload::QueueFull | Overload::Backlog, .. }
            | ServeError::TooCostly(_) => StatusCode::TOO_MANY_REQUESTS,
            ServeError::Overloaded { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ServeError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            ServeError::Overloaded { retry_after_s, .. } => Some(*retry_after_s),
            _ => None,
        }
    }

    /// The gRPC status code of the same failure.
    pub fn grpc_code(&self) -> tonic::Code {
        match self {
            ServeError::BadRequest(_) | ServeError::UnsupportedMediaType(_) => tonic::Code::InvalidArgument,
            ServeError::Unauthorized => tonic::Code::Unauthenticated,
            ServeError::NotFound(_) => tonic::Code::NotFound,
            ServeError::MethodNotAllowed(_) => tonic::Code::Unimplemented,
            ServeError::ClientGone => tonic::Code::Cancelled,
            ServeError::PayloadTooLarge { .. }
            | ServeError::TooCostly(_)
            | ServeError::TooLarge(_)
            | ServeError::Overloaded {
                kind: Overload::QueueFull | Overload::BytesInFlight | Overload::Backlog,
                ..
            } => tonic::Code::ResourceExhausted,
            ServeError::BodyTimeout { .. } => tonic::Code::DeadlineExceeded,
            ServeError::Overloaded { kind: Overload::Deadline, .. } => tonic::Code::DeadlineExceeded,
            ServeError::Overloaded { .. } => tonic::Code::Unavailable,
            ServeError::Internal(_) => tonic::Code::Internal,
        }
    }

    /// Whether the failure is the engine's or the server's rather than the client's (logged at `error`).
    pub fn is_server_fault(&self) -> bool {
        matches!(self, ServeError::Internal(_))
    }
}

/// Engine errors by kind ([`engines::Error::is_request_error`]): anything about the request (its values, its
/// size against the engine's limits, the context policy, what the model family refuses) is the client's to fix
/// (400); the rest is the engine's (500).
impl From<engines::Error> for ServeError {
    fn from(e: engines::Error) -> Self {
        match e.is_request_error() {
            true => ServeError::BadRequest(e.to_string()),
            false => ServeError::Internal(e.to_string()),
        }
    }
}

impl IntoResponse for ServeError {
    fn into_response(self) -> Response {
        if self.is_server_fault() {
            tracing::error!("internal error: {self}");
        }
        let body = serde_json::json!({ "error": self.client_message() }).to_string();
        let mut resp = (self.status(), body).into_response();
        let headers = resp.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(s) = self.retry_after_s() {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(s));
        }
        if matches!(self, ServeError::Unauthorized) {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        resp
    }
}

impl From<ServeError> for tonic::Status {
    fn from(e: ServeError) -> Self {
        tonic::Status::new(e.grpc_code(), e.client_message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_carries_retry_after_and_the_right_status() {
        let full = ServeError::overloaded(Overload::QueueFull, "queue full");
        assert_eq!(full.status(), StatusCode::TOO_MANY_REQUESTS);
        let resp = full.into_response();
        assert_eq!(resp.headers()[header::RETRY_AFTER], "1");
        for kind in [
            Overload::Deadline,
            Overload::NotReady,
            Overload::Draining,
            Overload::InFlight,
            Overload::BytesInFlight,
        ] {
            let e = ServeError::overloaded(kind, "x");
            assert_eq!(e.status(), StatusCode::SERVICE_UNAVAILABLE, "{kind:?}");
            assert!(e.into_response().headers().contains_key(header::RETRY_AFTER));
        }
        let backlog = ServeError::overloaded(Overload::Backlog, "busy");
        assert_eq!(backlog.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(backlog.grpc_code(), tonic::Code::ResourceExhausted);
        assert!(backlog.into_response().headers().contains_key(header::RETRY_AFTER));
        let costly = ServeError::TooCostly("too slow".into());
        assert_eq!(costly.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(costly.grpc_code(), tonic::Code::ResourceExhausted);
        assert!(!costly.into_response().headers().contains_key(header::RETRY_AFTER), "retrying cannot help");
        let bad = ServeError::bad_request("no").into_response();
        assert!(!bad.headers().contains_key(header::RETRY_AFTER));
        assert_eq!(bad.headers()[header::CONTENT_TYPE], "application/json");
    }

    #[test]
    fn client_strings_are_clipped_and_internal_paths_hidden() {
        let long = "x".repeat(10_000);
        assert_eq!(clip(&long).chars().count(), CLIP + 1);
        assert_eq!(clip("a\nb"), "a\\nb");
        let e = ServeError::Internal(
            "engine /work/models/engine/graphs/a.onnx (`/tmp/x`): failed at ./src/x.rs".into(),
        );
        let m = e.client_message();
        assert!(!m.contains("/work") && !m.contains("/tmp"), "{m}");
        assert_eq!(m, "engine <path> (`<path>`): failed at ./src/x.rs");
        let e = ServeError::BadRequest(long);
        assert_eq!(tonic::Status::from(e).message().chars().count(), MESSAGE_MAX + 1);
        // The readiness answer goes to probes without a token: the gate's findings lose their paths too.
        let e = ServeError::overloaded(
            Overload::NotReady,
            "not ready: the readiness gate failed (warm-up: graph /srv/engine/graphs/a.onnx: bad)",
        );
        assert_eq!(e.client_message(), "not ready: the readiness gate failed (warm-up: graph <path>: bad)");
        // Client-facing routes in other messages are kept.
        let e = ServeError::NotFound("no route GET /v3; see /v2".into());
        assert!(e.client_message().contains("/v3") && e.client_message().contains("/v2"));
    }

    #[test]
    fn request_errors_are_the_clients_and_the_rest_the_servers() {
        let e: ServeError = engines::Error::ZeroHorizon { at: "request".into() }.into();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert!(e.to_string().contains("`horizon` is 0"));
        let e: ServeError = engines::Error::Session { graph: "g".into(), message: "boom".into() }.into();
        assert_eq!(e.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(tonic::Status::from(e).code(), tonic::Code::Internal);
    }
}
