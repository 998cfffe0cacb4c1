//! Connections: one accept loop for both ports (REST over HTTP/1.1 or h2c, gRPC over h2c), on hyper-util's
//! connection builder with a [`TokioTimer`], so that no client can hold the server with connections alone:
//! * `--max-connections-per-peer`: a peer address holding that many connections has its next ones closed at
//!   once (counted as `totoc_rejected_total{reason="peer_connections"}`);
//! * `--header-read-timeout-ms`: an HTTP/1.1 connection that does not send a whole request head in time is
//!   closed (this bounds the wait for the next request of a keep-alive connection too);
//! * `--idle-timeout-ms`: a connection with no request in progress and no answer being written, that has
//!   started no request for that long, is closed (idle keep-alive and HTTP/2 connections). Activity is counted
//!   in requests, not bytes: HTTP/2 PING frames (the client's or the answers to them) keep nothing open, and the
//!   server's own keep-alive pings are sent only after twice the idle timeout (to find dead peers of long
//!   computations);
//! * `--min-read-bytes-per-s`: while an answer is being written, the connection must carry it at that average
//!   rate after [`WRITE_GRACE`], and move some of it at least every `--idle-timeout-ms`, else it is closed (a
//!   reader that stopped reading, or an HTTP/2 client that keeps its flow-control window at zero; counted as
//!   `totoc_rejected_total{reason="slow_reader"}`);
//! * HTTP/2: at most `--grpc-max-concurrent-streams` streams per connection;
//! * on stop (SIGTERM) the listener is closed at once (new connections are refused, not left waiting), and every
//!   connection is asked to finish its requests and close; idle ones close at once.
//!
//! The body-read timeout and the bytes budget are per request ([`super::routes`], [`super::grpc`]).

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::metrics::Metrics;

/// Connection limits and timeouts (`totoc serve` flags).
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    pub max_per_peer: usize,
    pub header_read_timeout: Duration,
    pub idle_timeout: Duration,
    pub max_concurrent_streams: u32,
    /// While an answer is being written, the least average rate it must go out at (bytes per second).
    pub min_read_rate: u64,
}

/// How long an answer may take to start going out before [`ConnLimits::min_read_rate`] applies.
pub const WRITE_GRACE: Duration = Duration::from_secs(2);

/// The client address of a request (a request extension both ports set).
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub IpAddr);

/// Connections held per peer address.
#[derive(Default)]
pub struct Peers(Mutex<HashMap<IpAddr, usize>>);

/// One connection of a peer; gives its place back when dropped.
pub struct PeerSlot {
    peers: Arc<Peers>,
    ip: IpAddr,
}

impl Peers {
    pub fn enter(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<PeerSlot> {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(PeerSlot { peers: self.clone(), ip })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut m = self.peers.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

/// What the watchdog of one connection sees: when a request last started or ended, how many are in progress,
/// how many answers are being written, and the bytes written to the socket.
#[derive(Default)]
struct Activity {
    /// Milliseconds since `epoch` of the last request start or end (never of a byte: PINGs are not activity).
    last_ms: AtomicU64,
    busy: AtomicUsize,
    sending: AtomicUsize,
    written: AtomicU64,
}

impl Activity {
    fn touch(&self, epoch: Instant) {
        self.last_ms.store(epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

/// The socket, counting the bytes written.
struct Watched<T> {
    inner: TokioIo<T>,
    activity: Arc<Activity>,
}

impl<T: tokio::io::AsyncRead + Unpin> Read for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> Watched<T> {
    fn count(&self, r: &Poll<std::io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = r {
            self.activity.written.fetch_add(*n as u64, Ordering::Relaxed);
        }
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> Write for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.count(&r);
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.count(&r);
        r
    }
}

/// Counts a request of a connection as in progress until its response head is ready.
struct Busy {
    activity: Arc<Activity>,
    epoch: Instant,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.activity.busy.fetch_sub(1, Ordering::Relaxed);
        self.activity.touch(self.epoch);
    }
}

/// A response body being written: counted as sending until its last frame is out (or it is dropped).
pub struct Sending<B> {
    inner: B,
    activity: Arc<Activity>,
    epoch: Instant,
    done: bool,
}

impl<B> Sending<B> {
    fn new(inner: B, activity: Arc<Activity>, epoch: Instant) -> Self {
        activity.sending.fetch_add(1, Ordering::Relaxed);
        Sending { inner, activity, epoch, done: false }
    }

    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            self.activity.sending.fetch_sub(1, Ordering::Relaxed);
            self.activity.touch(self.epoch);
        }
    }
}

impl<B> Drop for Sending<B> {
    fn drop(&mut self) {
        self.finish();
    }
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for Sending<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<B::Data>, B::Error>>> {
        let r = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(r, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.finish();
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// What a [`Handler`] answers.
pub type Reply<B> =
    Pin<Box<dyn Future<Output = Result<hyper::Response<B>, std::convert::Infallible>> + Send>>;

/// A service of one connection: what both ports serve (axum's router, the guarded tonic service).
pub trait Handler: Clone + Send + Sync + 'static {
    type Body: hyper::body::Body<Data = bytes::Bytes> + Send + Unpin + 'static;
    fn handle(&self, peer: IpAddr, req: hyper::Request<Incoming>) -> Reply<Self::Body>;
}

/// Accepts connections on `listener` until `stop` turns true, then waits for every connection to finish (the
/// caller bounds that wait with `--shutdown-timeout-s`). `http2_only`: the gRPC port.
pub async fn serve<H>(
    listener: TcpListener,
    handler: H,
    limits: ConnLimits,
    http2_only: bool,
    metrics: Arc<Metrics>,
    mut stop: watch::Receiver<bool>,
) where
    H: Handler,
    <H::Body as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let peers = Arc::new(Peers::default());
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout).keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_concurrent_streams)
        .max_pending_accept_reset_streams(Some(64))
        // Longer than the idle timeout: an idle connection is closed before a ping is due, so pings only test
        // the peers of connections with work in progress.
        .keep_alive_interval(Some((limits.idle_timeout * 2).max(Duration::from_secs(2))))
        .keep_alive_timeout(limits.idle_timeout.max(Duration::from_secs(1)));
    if http2_only {
        builder = builder.http2_only();
    }
    let builder = Arc::new(builder);
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let (tcp, peer) = tokio::select! {
            _ = until_stopped(&mut stop) => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little rather than spin.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let ip = peer.ip();
        let Some(slot) = peers.enter(ip, limits.max_per_peer) else {
            metrics.reject("peer_connections");
            drop(tcp);
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let (builder, handler, stop) = (builder.clone(), handler.clone(), stop.clone());
        let metrics = metrics.clone();
        conns.spawn(async move {
            let _slot = slot;
            connection(&builder, tcp, ip, handler, limits, stop, &metrics).await;
        });
    }
    // Closed at once: new connections are refused while the accepted ones drain.
    drop(listener);
    while conns.join_next().await.is_some() {}
}

async fn connection<H>(
    builder: &auto::Builder<TokioExecutor>,
    tcp: tokio::net::TcpStream,
    ip: IpAddr,
    handler: H,
    limits: ConnLimits,
    mut stop: watch::Receiver<bool>,
    metrics: &Metrics,
) where
    H: Handler,
    <H::Body as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let activity = Arc::new(Activity::default());
    let epoch = Instant::now();
    let io = Watched { inner: TokioIo::new(tcp), activity: activity.clone() };
    let act = activity.clone();
    let service = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        act.busy.fetch_add(1, Ordering::Relaxed);
        act.touch(epoch);
        let busy = Busy { activity: act.clone(), epoch };
        req.extensions_mut().insert(Peer(ip));
        let fut = handler.handle(ip, req);
        let act = act.clone();
        async move {
            let r = fut.await;
            drop(busy);
            r.map(|resp| resp.map(|body| Sending::new(body, act, epoch)))
        }
    });
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let idle = limits.idle_timeout;
    let tick = (idle / 4).clamp(Duration::from_millis(50), Duration::from_millis(500));
    let mut stopping = false;
    let mut writing = Writing::default();
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = until_stopped(&mut stop), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = tokio::time::sleep(tick) => {
                let written = activity.written.load(Ordering::Relaxed);
                if activity.sending.load(Ordering::Relaxed) > 0 {
                    if writing.too_slow(written, limits.min_read_rate, idle) {
                        // A reader that does not take its answer: close (dropping the connection closes it).
                        metrics.reject("slow_reader");
                        tracing::debug!(peer = %ip, "closing a connection whose answer goes out too slowly");
                        return;
                    }
                } else {
                    writing = Writing::default();
                }
                let quiet = (epoch.elapsed().as_millis() as u64).saturating_sub(activity.last_ms.load(Ordering::Relaxed));
                let pending = activity.busy.load(Ordering::Relaxed) + activity.sending.load(Ordering::Relaxed);
                if pending == 0 && quiet >= idle.as_millis() as u64 {
                    // Idle: close.
                    return;
                }
            }
        }
    }
}

/// The write checks of a connection while answers are being written (see the module docs).
#[derive(Default)]
struct Writing {
    /// When answers began going out, and the bytes written then.
    since: Option<(Instant, u64)>,
    /// When a byte last went out, and the bytes written by then.
    progress: Option<(Instant, u64)>,
}

impl Writing {
    /// Whether the answers have gone out slower than `min_rate` on average since they began (after the grace),
    /// or not at all for `stall` (a reader that stopped reading once the kernel's buffers were full).
    fn too_slow(&mut self, written: u64, min_rate: u64, stall: Duration) -> bool {
        let now = Instant::now();
        let (start, base) = *self.since.get_or_insert((now, written));
        let (moved, before) = *self.progress.get_or_insert((now, written));
        if written > before {
            self.progress = Some((now, written));
        } else if now.duration_since(moved) > stall.max(WRITE_GRACE) {
            return true;
        }
        let earned = Duration::from_secs_f64(written.saturating_sub(base) as f64 / min_rate.max(1) as f64);
        start.elapsed() > WRITE_GRACE + earned
    }
}

/// Resolves once `stop` is true (the guard of the value is dropped at once, so the future stays `Send`).
async fn until_stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}
