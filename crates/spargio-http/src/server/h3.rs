//! HTTP/3: [`serve_h3`] serves the same tower service (an axum `Router`)
//! on a [`QuicEndpoint`] (feature `http3`).
//!
//! * **Connections.** The accept loop takes connections from the
//!   endpoint, which spreads them over the shards by connection id; each
//!   connection is a task pinned to its connection's shard
//!   ([`QuicConnection::shard`]), where its packets are received and
//!   sent, and runs `h3`'s server over [`H3Connection`].
//! * **Requests.** Each request is a task pinned to the same shard: the
//!   request body is an [`H3Body`] (`http_body::Body` of `Bytes`, trailers
//!   included), the response body is streamed frame by frame, trailers
//!   sent as a trailing HEADERS frame. A response future or body dropped
//!   (the handler panicked, the server aborted) resets the stream with
//!   `H3_REQUEST_CANCELLED`; a request the client cancels ends the
//!   handler's future the next time the body or the response is written.
//! * **Limits.** At most `max_connections` (10,000) connections at once:
//!   at the bound the accept loop waits (new handshakes queue in the
//!   endpoint, bounded by its own accept queue). Header sections larger
//!   than `max_header_bytes` (64 KiB, advertised as
//!   `SETTINGS_MAX_FIELD_SECTION_SIZE`) are refused by `h3`. Concurrent
//!   requests per connection are bounded by the QUIC transport's
//!   `max_concurrent_bidi_streams` (the server config's, 100 by default).
//! * **Peer address.** [`PeerAddr`] is in every request's extensions, and
//!   with [`ServeH3::with_connect_info`] axum's `ConnectInfo` too, as
//!   [`serve`](crate::serve) does.
//! * **Graceful shutdown.** [`ServeH3::with_graceful_shutdown`]: when the
//!   signal completes, the endpoint refuses new handshakes, and every
//!   connection sends `GOAWAY` (with the id of the first request it will
//!   not serve: a request at or above it is refused with
//!   `H3_REQUEST_REJECTED`, which a client may safely send elsewhere),
//!   finishes the requests it accepted (an idle one at once), waits until
//!   the client has acknowledged every response (a close discards what is
//!   unacknowledged) and closes with `H3_NO_ERROR`; the server's future
//!   returns when all are closed and their closes sent, or after
//!   `grace_period` (30 s), when the rest are closed at once. A client
//!   that has vanished (nothing from it through three probe timeouts
//!   while it has data to acknowledge; `h3_liveness`) would acknowledge
//!   nothing until then: its connection is closed at once instead. The
//!   endpoint shut down under the server (`accept` fails with
//!   `BrokenPipe`; the shutdown closed every connection) ends it the same
//!   way, once the handlers still running have returned.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::{Request, Response};
use http_body::{Body, Frame};
use spargio::sync::CancellationToken;
use spargio_quic::{H3Connection, H3RecvStream, H3SendStream, QuicConnection, QuicEndpoint};

use super::service::{HttpBody, PeerAddr};
use super::BoxError;
use crate::h3_body::BodyState;

/// `H3_NO_ERROR` (RFC 9114, 8.1): the code of a graceful close.
const H3_NO_ERROR: u64 = 0x100;

/// Serves `service` over HTTP/3 on `endpoint` (module docs); await the
/// result (or configure it first). The endpoint's server config must
/// offer ALPN `h3` ([`spargio_quic::H3_ALPN`]).
///
/// ```no_run
/// use axum::{routing::get, Router};
///
/// # fn demo(endpoint: spargio_quic::QuicEndpoint) {
/// spargio::block_on(spargio::run(|_| async move {
///     let app = Router::new().route("/", get(|| async { "hello over HTTP/3\n" }));
///     spargio_http::serve_h3(endpoint, app).await
/// }));
/// # }
/// ```
pub fn serve_h3<S>(endpoint: QuicEndpoint, service: S) -> ServeH3<S> {
    ServeH3 {
        endpoint,
        service,
        config: Config::default(),
    }
}

#[derive(Clone, Copy, Debug)]
struct Config {
    max_connections: usize,
    max_header_bytes: usize,
    connect_info: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_connections: 10_000,
            max_header_bytes: 64 * 1024,
            connect_info: false,
        }
    }
}

/// An HTTP/3 server being configured; `.await` it to run (module docs).
#[must_use = "a server does nothing until awaited"]
pub struct ServeH3<S> {
    endpoint: QuicEndpoint,
    service: S,
    config: Config,
}

impl<S> fmt::Debug for ServeH3<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeH3")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S> ServeH3<S> {
    /// At most `n` connections at once (default 10,000; at least 1).
    pub fn max_connections(mut self, n: usize) -> Self {
        self.config.max_connections = n.max(1);
        self
    }

    /// The largest header section accepted (default 64 KiB).
    pub fn max_header_bytes(mut self, n: usize) -> Self {
        self.config.max_header_bytes = n;
        self
    }

    /// Also inserts `axum::extract::ConnectInfo<SocketAddr>` (feature
    /// `axum`; [`PeerAddr`] is always there).
    pub fn with_connect_info(mut self) -> Self {
        self.config.connect_info = true;
        self
    }

    /// Stops accepting when `signal` completes, and drains (module docs).
    pub fn with_graceful_shutdown<F>(self, signal: F) -> H3WithGracefulShutdown<S, F>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        H3WithGracefulShutdown {
            serve: self,
            signal,
            grace_period: Duration::from_secs(30),
        }
    }
}

/// A server with a shutdown signal; `.await` it to run.
#[must_use = "a server does nothing until awaited"]
pub struct H3WithGracefulShutdown<S, F> {
    serve: ServeH3<S>,
    signal: F,
    grace_period: Duration,
}

impl<S, F> fmt::Debug for H3WithGracefulShutdown<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("H3WithGracefulShutdown")
            .field("serve", &self.serve)
            .field("grace_period", &self.grace_period)
            .finish_non_exhaustive()
    }
}

impl<S, F> H3WithGracefulShutdown<S, F> {
    /// How long connections may take to finish after the signal (default
    /// 30 s); then they are closed at once.
    pub fn grace_period(mut self, grace_period: Duration) -> Self {
        self.grace_period = grace_period;
        self
    }
}

/// The bound a service must meet to be served over HTTP/3 (an axum
/// `Router` does).
pub trait H3Service<B>:
    tower_service::Service<
        Request<H3Body>,
        Response = Response<B>,
        Future: Send + 'static,
        Error: Into<BoxError>,
    > + Clone
    + Send
    + 'static
{
}

impl<S, B> H3Service<B> for S
where
    S: tower_service::Service<Request<H3Body>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
}

type BoxFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

impl<S, B> IntoFuture for ServeH3<S>
where
    // The `Response` equality names `B` for the impl.
    S: H3Service<B> + tower_service::Service<Request<H3Body>, Response = Response<B>>,
    B: HttpBody,
{
    type Output = io::Result<()>;
    type IntoFuture = BoxFuture;

    fn into_future(self) -> BoxFuture {
        Box::pin(run(self, None, Duration::ZERO))
    }
}

impl<S, B, F> IntoFuture for H3WithGracefulShutdown<S, F>
where
    // The `Response` equality names `B` for the impl.
    S: H3Service<B> + tower_service::Service<Request<H3Body>, Response = Response<B>>,
    B: HttpBody,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = BoxFuture;

    fn into_future(self) -> BoxFuture {
        let signal: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(self.signal);
        Box::pin(run(self.serve, Some(signal), self.grace_period))
    }
}

/// The live connections: the count for `max_connections`, and the one
/// waiter (the accept loop at the bound, or the drain).
#[derive(Default)]
struct Conns {
    active: AtomicUsize,
    waiter: Mutex<Option<Waker>>,
}

impl Conns {
    fn wake(&self) {
        let w = self.waiter.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Ready once fewer than `n` connections are live.
    async fn below(&self, n: usize) {
        std::future::poll_fn(|cx| {
            if self.active.load(Ordering::Acquire) < n {
                return Poll::Ready(());
            }
            *self.waiter.lock().unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
            if self.active.load(Ordering::Acquire) < n {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

/// Uncounts a connection when its task ends (or is dropped).
struct ConnGuard(Arc<Conns>);

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::AcqRel);
        self.0.wake();
    }
}

async fn run<S, B>(
    serve: ServeH3<S>,
    signal: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    grace: Duration,
) -> io::Result<()>
where
    S: H3Service<B>,
    B: HttpBody,
{
    let ServeH3 {
        endpoint,
        service,
        config,
    } = serve;
    let handle = spargio::ShardCtx::current()
        .map(|c| c.handle())
        .ok_or_else(|| io::Error::other("spargio_http::serve_h3 runs on a spargio shard"))?;
    let drain = CancellationToken::new();
    let abort = CancellationToken::new();
    let conns = Arc::new(Conns::default());
    let mut signal = signal;
    loop {
        let accepted = {
            let accept = async {
                conns.below(config.max_connections).await;
                Some(endpoint.accept().await)
            };
            match signal.as_mut() {
                Some(sig) => {
                    race(accept, async {
                        sig.await;
                        None
                    })
                    .await
                }
                None => accept.await,
            }
        };
        let conn = match accepted {
            None => break,
            Some(Ok(conn)) => conn,
            // A handshake that failed ends that connection, not the server;
            // the endpoint shut down (no more connections) ends it, once
            // its connections have ended as in a drain: the shutdown
            // closed them, but their handlers may still run.
            Some(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => break,
            Some(Err(_)) => continue,
        };
        conns.active.fetch_add(1, Ordering::AcqRel);
        let guard = ConnGuard(conns.clone());
        let task = serve_connection(
            conn.clone(),
            service.clone(),
            config,
            drain.clone(),
            abort.clone(),
            guard,
        );
        let spawned = match conn.shard() {
            Some(shard) => handle.spawn_pinned(shard, task).map(drop),
            None => handle.spawn_stealable(task).map(drop),
        };
        if spawned.is_err() {
            // The runtime is shutting down.
            return Ok(());
        }
    }
    // Drain: new handshakes are refused, and every connection sends GOAWAY
    // and finishes what it accepted.
    endpoint.set_server_config(None);
    drain.cancel();
    // `None`: a grace period too long to add (`Duration::MAX`) is no
    // deadline at all.
    let deadline = std::time::Instant::now().checked_add(grace);
    let all_closed = conns.below(1);
    if spargio::time::timeout(grace, all_closed).await.is_err() {
        abort.cancel();
        conns.below(1).await;
    }
    // The connections' CONNECTION_CLOSE packets go out from the endpoint:
    // returning (and dropping it) first could leave a client to find out
    // at its idle timeout. Within what is left of the grace period.
    let left = deadline.map_or(Duration::MAX, |at| {
        at.saturating_duration_since(std::time::Instant::now())
    });
    let _ = spargio::time::timeout(left, endpoint.wait_idle()).await;
    Ok(())
}

/// Polls both; the first to finish wins (the other is dropped).
async fn race<T>(a: impl Future<Output = T>, b: impl Future<Output = T>) -> T {
    let mut a = std::pin::pin!(a);
    let mut b = std::pin::pin!(b);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(v) = a.as_mut().poll(cx) {
            return Poll::Ready(v);
        }
        b.as_mut().poll(cx)
    })
    .await
}

async fn serve_connection<S, B>(
    conn: QuicConnection,
    service: S,
    config: Config,
    drain: CancellationToken,
    abort: CancellationToken,
    _guard: ConnGuard,
) where
    S: H3Service<B>,
    B: HttpBody,
{
    // This connection's abort: the server's (the grace period ran out),
    // or, once draining, its client gone (it would hold the drain until
    // the grace period ends, acknowledging nothing).
    let halt = CancellationToken::new();
    let watch = async {
        race(abort.cancelled(), async {
            drain.cancelled().await;
            super::h3_liveness::peer_gone(&conn).await;
        })
        .await;
        halt.cancel();
        std::future::pending::<()>().await
    };
    race(
        drive_connection(conn.clone(), service, config, drain.clone(), halt.clone()),
        watch,
    )
    .await;
}

/// Serves `conn` until it closes; `abort` closes it at once.
async fn drive_connection<S, B>(
    conn: QuicConnection,
    service: S,
    config: Config,
    drain: CancellationToken,
    abort: CancellationToken,
) where
    S: H3Service<B>,
    B: HttpBody,
{
    let peer = conn.remote_address();
    let built = h3::server::builder()
        .max_field_section_size(config.max_header_bytes as u64)
        .build::<_, Bytes>(H3Connection::new(conn.clone()))
        .await;
    let Ok(mut h3conn) = built else {
        return;
    };
    let Some(ctx) = spargio::ShardCtx::current() else {
        return;
    };
    let requests = spargio::sync::TaskGroup::new(ctx.handle());
    let mut draining = false;
    // When this connection sent its GOAWAY.
    let mut goaway_at = None;
    loop {
        enum Next<R> {
            Request(R),
            Drain,
            Idle,
            Abort,
        }
        let next = race(async { Next::Request(h3conn.accept().await) }, async {
            if draining {
                // Draining: close once the accepted requests are done (an
                // idle connection at once), or when the grace runs out.
                race(
                    async {
                        requests.wait().await;
                        Next::Idle
                    },
                    async {
                        abort.cancelled().await;
                        Next::Abort
                    },
                )
                .await
            } else {
                race(
                    async {
                        drain.cancelled().await;
                        Next::Drain
                    },
                    async {
                        abort.cancelled().await;
                        Next::Abort
                    },
                )
                .await
            }
        })
        .await;
        match next {
            Next::Drain => {
                draining = true;
                goaway_at = Some(std::time::Instant::now());
                // GOAWAY with the first request stream id that will not be
                // served (RFC 9114, 5.2): one past the last accepted. Every
                // request accepted so far is served; h3 refuses the ones
                // above that id, and the one *at* it, which h3 would still
                // let through, is refused below.
                if h3conn.shutdown(1).await.is_err() {
                    break;
                }
            }
            Next::Request(Ok(Some(resolver))) if draining => {
                // Accepted after the GOAWAY: at or above its id, so the
                // client counts it as not processed (and may send it
                // elsewhere). It must not run here.
                let _ = requests.spawn_with_placement(
                    spargio::TaskPlacement::Pinned(ctx.shard_id()),
                    async move {
                        if let Ok((_, mut stream)) = resolver.resolve_request().await {
                            stream.stop_sending(h3::error::Code::H3_REQUEST_REJECTED);
                            stream.stop_stream(h3::error::Code::H3_REQUEST_REJECTED);
                        }
                    },
                );
            }
            Next::Abort => {
                requests.cancel();
                break;
            }
            Next::Idle => break,
            Next::Request(Ok(Some(resolver))) => {
                let mut service = service.clone();
                let placement = spargio::TaskPlacement::Pinned(ctx.shard_id());
                let connect_info = config.connect_info;
                let _ = requests.spawn_with_placement(placement, async move {
                    let Ok((req, stream)) = resolver.resolve_request().await else {
                        return;
                    };
                    let (send, recv) = stream.split();
                    // The request's receive half outlives a body the handler
                    // drops unread (a GET's), until the response is sent:
                    // dropping it stops the stream, and a client whose FIN
                    // is still on its way takes that as a failed request.
                    let parked = Parked::default();
                    let mut req = req.map(|()| H3Body::new(recv, parked.clone()));
                    req.extensions_mut().insert(PeerAddr(peer));
                    #[cfg(feature = "axum")]
                    if connect_info {
                        req.extensions_mut()
                            .insert(axum::extract::ConnectInfo(peer));
                    }
                    #[cfg(not(feature = "axum"))]
                    let _ = connect_info;
                    if std::future::poll_fn(|cx| service.poll_ready(cx))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    let Ok(resp) = service.call(req).await else {
                        // The service failed: the send half's drop resets
                        // the stream (H3_REQUEST_CANCELLED).
                        return;
                    };
                    respond(send, resp).await;
                    parked.linger().await;
                });
            }
            // The peer closed, or (after GOAWAY) every request is in.
            Next::Request(Ok(None)) | Next::Request(Err(_)) => break,
        }
    }
    let done = race(
        async {
            requests.wait().await;
            true
        },
        async {
            abort.cancelled().await;
            false
        },
    )
    .await;
    if done && conn.close_reason().is_none() {
        // A close discards stream data the peer has not acknowledged yet:
        // the tail of the last responses (a request task ends once its
        // response is handed to QUIC, not once the peer has it). Wait
        // until the peer has everything, unless the grace period ends
        // first.
        // The GOAWAY itself (on the control stream, which never finishes)
        // and the resets of refused requests are not covered by that: give
        // them what a delivery and one repaired loss take (3 RTT + 50 ms
        // after the GOAWAY, at most a second), or a client whose copy was
        // lost sees the close with a request outstanding and cannot tell
        // it was not processed.
        let rtt = conn.stats().path.rtt;
        let linger = (rtt * 3 + Duration::from_millis(50)).min(Duration::from_secs(1));
        let _ = race(
            async {
                let _ = conn.acknowledged().await;
                if let Some(at) = goaway_at {
                    spargio::time::sleep(linger.saturating_sub(at.elapsed())).await;
                }
            },
            abort.cancelled(),
        )
        .await;
    }
    conn.close(H3_NO_ERROR, b"");
}

type SendHalf = h3::server::RequestStream<H3SendStream<Bytes>, Bytes>;

/// Sends `resp`: the head, every data frame, trailers, then the end.
async fn respond<B>(mut send: SendHalf, resp: Response<B>)
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let (parts, body) = resp.into_parts();
    if send
        .send_response(Response::from_parts(parts, ()))
        .await
        .is_err()
    {
        return;
    }
    let mut body = std::pin::pin!(body);
    loop {
        let frame = match std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            None => break,
            Some(Ok(frame)) => frame,
            // The body failed mid-way: dropping `send` resets the stream.
            Some(Err(_)) => return,
        };
        match frame.into_data() {
            Ok(mut data) => {
                let bytes = data.copy_to_bytes(data.remaining());
                if !bytes.is_empty() && send.send_data(bytes).await.is_err() {
                    return;
                }
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    // Trailers end the message.
                    if send.send_trailers(trailers).await.is_ok() {
                        let _ = send.finish().await;
                    }
                    return;
                }
            }
        }
    }
    let _ = send.finish().await;
}

/// A request body received over HTTP/3: its DATA frames, then its
/// trailers, as an `http_body::Body`.
pub struct H3Body {
    /// `None` once parked (dropped unfinished).
    recv: Option<RecvHalf>,
    state: BodyState,
    park: Parked,
}

type RecvHalf = h3::server::RequestStream<H3RecvStream, Bytes>;

/// Where an unfinished body leaves its receive half for the request task
/// to drop once the response is out.
#[derive(Clone, Default)]
struct Parked(Arc<Mutex<Option<RecvHalf>>>);

impl Parked {
    /// After the response: reads what is left of a request body the
    /// handler did not read (a GET's end of stream, usually there
    /// already), for at most a second and 64 KiB, so the stream ends
    /// without a STOP_SENDING that a client whose FIN is still on its way
    /// would take as a failed request; then drops it.
    async fn linger(self) {
        let recv = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(mut recv) = recv else {
            return;
        };
        let drain = async {
            let mut left = 64 * 1024usize;
            while let Ok(Some(chunk)) = recv.recv_data().await {
                left = left.saturating_sub(chunk.remaining());
                if left == 0 {
                    break;
                }
            }
        };
        let _ = spargio::time::timeout(Duration::from_secs(1), drain).await;
    }
}

impl Drop for H3Body {
    fn drop(&mut self) {
        if self.state != BodyState::Done {
            if let Some(recv) = self.recv.take() {
                *self.park.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(recv);
            }
        }
    }
}

impl fmt::Debug for H3Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("H3Body")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl H3Body {
    fn new(recv: RecvHalf, park: Parked) -> H3Body {
        H3Body {
            recv: Some(recv),
            state: BodyState::Data,
            park,
        }
    }
}

impl Body for H3Body {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let recv = this.recv.as_mut().expect("a live body holds its stream");
        crate::h3_body::poll_frame(&mut this.state, recv, cx)
    }

    fn is_end_stream(&self) -> bool {
        self.state == BodyState::Done
    }
}
