//! Connections: one accept loop for both ports (REST over HTTP/1.1 or h2c, gRPC over h2c), on hyper-util's
//! connection builder with a [`TokioTimer`], so that no client can hold the server with connections alone:
//! * `--max-connections-per-peer`: a peer address holding that many connections has its next ones closed at
//!   once (counted as `totoc_rejected_total{reason="peer_connections"}`);
//! * `--header-read-timeout-ms`: an HTTP/1.1 connection that does not send a whole request head in time is
//!   closed (this bounds the wait for the next request of a keep-alive connection too);
//! * `--idle-timeout-ms`: a connection that moves no byte in either direction for that long while no request
//!   of it is being computed is closed (idle keep-alive and HTTP/2 connections, and slow readers that stopped
//!   reading their response);
//! * HTTP/2: at most `--grpc-max-concurrent-streams` streams per connection;
//! * on stop (SIGTERM) every connection is asked to finish its requests and close; idle ones close at once.
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
}

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

/// What the idle watchdog of one connection sees: when a byte last moved, and how many requests are being
/// computed.
#[derive(Default)]
struct Activity {
    /// Milliseconds since `epoch` of the last read or write that moved bytes.
    last_ms: AtomicU64,
    busy: AtomicUsize,
}

/// The socket, recording activity.
struct Watched<T> {
    inner: TokioIo<T>,
    activity: Arc<Activity>,
    epoch: Instant,
}

impl<T> Watched<T> {
    fn touch(&self) {
        self.activity.last_ms.store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
}

impl<T: tokio::io::AsyncRead + Unpin> Read for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if r.is_ready() {
            self.touch();
        }
        r
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> Write for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
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
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            self.touch();
        }
        r
    }
}

/// Counts a request of a connection as being computed until its response head is ready.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a [`Handler`] answers.
pub type Reply<B> =
    Pin<Box<dyn Future<Output = Result<hyper::Response<B>, std::convert::Infallible>> + Send>>;

/// A service of one connection: what both ports serve (axum's router, the guarded tonic service).
pub trait Handler: Clone + Send + Sync + 'static {
    type Body: hyper::body::Body<Data = bytes::Bytes> + Send + 'static;
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
        .keep_alive_interval(Some(limits.idle_timeout.max(Duration::from_secs(1))))
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
        conns.spawn(async move {
            let _slot = slot;
            connection(&builder, tcp, ip, handler, limits.idle_timeout, stop).await;
        });
    }
    while conns.join_next().await.is_some() {}
}

async fn connection<H>(
    builder: &auto::Builder<TokioExecutor>,
    tcp: tokio::net::TcpStream,
    ip: IpAddr,
    handler: H,
    idle: Duration,
    mut stop: watch::Receiver<bool>,
) where
    H: Handler,
    <H::Body as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let activity = Arc::new(Activity::default());
    let epoch = Instant::now();
    let io = Watched { inner: TokioIo::new(tcp), activity: activity.clone(), epoch };
    let act = activity.clone();
    let service = hyper::service::service_fn(move |req| {
        act.busy.fetch_add(1, Ordering::Relaxed);
        let busy = Busy(act.clone());
        let fut = handler.handle(ip, req);
        async move {
            let r = fut.await;
            drop(busy);
            r
        }
    });
    let conn = builder.serve_connection(io, service);
    tokio::pin!(conn);
    let tick = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
    let mut stopping = false;
    loop {
        tokio::select! {
            _ = conn.as_mut() => return,
            _ = until_stopped(&mut stop), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = tokio::time::sleep(tick) => {
                let quiet = (epoch.elapsed().as_millis() as u64).saturating_sub(activity.last_ms.load(Ordering::Relaxed));
                if activity.busy.load(Ordering::Relaxed) == 0 && quiet >= idle.as_millis() as u64 {
                    // Idle, or a reader that stopped reading: close (dropping the connection closes the socket).
                    return;
                }
            }
        }
    }
}

/// Resolves once `stop` is true (the guard of the value is dropped at once, so the future stays `Send`).
async fn until_stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await.map(|_| ());
}
