//! The server: [`serve`] a tower service (an `axum::Router`, tonic's
//! `Routes`, any `tower::Service<Request<Incoming>>`, or a hyper service
//! through [`hyper_service`]) on a spargio [`TcpListener`] or
//! `UnixListener`, or on a stream of connections of the user's own
//! ([`Connections`]); [`Listener`] is what the three have in common.
//!
//! # How it runs
//!
//! * **Accept.** One multishot accept on the listener
//!   ([`TcpListener::incoming_round_robin`]): the kernel keeps accepting
//!   without a submission per connection, and each accepted stream gets
//!   the next shard in rotation as its session shard.
//!   The listener defers each connection until its client has sent
//!   something (`TCP_DEFER_ACCEPT`, [`Serve::defer_accept`]), so it
//!   arrives with its request readable.
//! * **Connections.** Each connection is a task pinned to its session
//!   shard, where its socket's operations run; hyper's auto builder
//!   answers HTTP/1.1 and HTTP/2 on the same port (HTTP/2 by prior
//!   knowledge on plain TCP, by ALPN `h2` over TLS). HTTP/2 streams run
//!   as tasks pinned to the connection's shard
//!   ([`rt::Executor`](crate::rt::Executor)), queued behind each other:
//!   an HTTP/2 connection that a finishing stream wakes goes to the back
//!   of the queue once, so the streams ready with it finish first and
//!   their responses leave in one write (one `send` per batch, not per
//!   response). A handler runs inside its connection's task until its
//!   work comes from another shard ([`spargio::roam`]): a handler
//!   waiting on a database pool shared by every shard, or on a channel
//!   fed elsewhere, then goes on in a stealable task that runs where it
//!   is woken, instead of paying a cross-shard wake per step; one that
//!   answers at once or is woken on its own shard costs nothing more.
//!   A handler with heavy CPU work should move that work to a
//!   stealable task (`spawn_stealable`) or the blocking pool; connections
//!   themselves are spread over the shards.
//! * **Limits, on by default.** At most `max_connections` (10,000)
//!   connections at once: beyond it the server stops accepting (new
//!   connections wait in the listen backlog) until one ends. A connection
//!   that sends no complete request head for `header_read_timeout` (30 s)
//!   while nothing is in flight is closed, whether it dribbles headers or
//!   sits idle (HTTP/1.1 keep-alive, HTTP/2 with no stream open). One
//!   sweeper task per server enforces it, checking every connection four
//!   times per timeout, so no timer is armed per request.
//!   Headers larger than `max_header_bytes` (64 KiB) are refused (431 on
//!   HTTP/1.1, a stream reset on HTTP/2) and the connection closed. TLS
//!   handshakes get `tls_handshake_timeout` (10 s). HTTP/2: at most 200
//!   concurrent streams per connection, and hyper's defences against
//!   rapid reset. Request bodies are the service's to limit: use
//!   `tower_http::limit::RequestBodyLimitLayer` (axum's extractors also
//!   have `DefaultBodyLimit`, 2 MiB).
//! * **gRPC deadlines.** A request with content-type `application/grpc`
//!   (bare, `+codec` or `;params`) and a well-formed `grpc-timeout`
//!   (gRPC's units `H M S m u n`, at most 8 digits; a malformed value is
//!   ignored, as tonic ignores it) is bounded by it, whatever the service
//!   (tonic's routes, an axum router mixing gRPC and REST). When the
//!   deadline passes before the handler's response head, the handler's
//!   future is dropped there and then and the answer is trailers-only:
//!   HTTP 200, `content-type: application/grpc`, `grpc-status: 4`
//!   (DEADLINE_EXCEEDED), `grpc-message: Timeout expired`. When it passes
//!   while the body streams, the body is dropped between two frames and
//!   the response ends with the same status as trailers. Other requests
//!   pay one failed header lookup; no timer is armed for them.
//! * **Graceful shutdown.** [`Serve::with_graceful_shutdown`] takes a
//!   future (a signal, a token); when it completes the listener is closed
//!   (new connections are refused), every connection finishes the
//!   requests it is serving (HTTP/1.1 closes after the current response;
//!   HTTP/2 sends GOAWAY), and the server's future returns once all are
//!   closed, or once `grace_period` (30 s) has passed: then the rest are
//!   closed at once.
//!
//! Accept errors do not end the server: a connection that failed before
//! it was accepted is skipped; running out of fds (`EMFILE`, `ENFILE`) or
//! memory pauses accepting for 50 ms.

mod conn;
mod deadline;
#[cfg(feature = "http3")]
mod h3;
#[cfg(feature = "http3")]
mod h3_liveness;
mod hub;
mod idle;
mod listener;
mod make;
mod service;

use std::fmt;
use std::future::{poll_fn, Future, IntoFuture};
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::server::conn::auto;
use spargio::net::TcpListener;
use spargio::TaskPlacement;
use spargio_tls::{HandshakeOptions, TlsAcceptor};

#[cfg(feature = "http3")]
pub use self::h3::{serve_h3, H3Body, H3Service, H3WithGracefulShutdown, ServeH3};
pub use listener::{Accepted, Connection, Connections, Listener, Peer, UnixPeerCred};
#[cfg(feature = "axum")]
pub use make::{
    AsMakeService, AsMakeServiceWithConnectInfo, IncomingStream, Made, MadePerConnection,
};
pub use make::{AsService, IntoConnMaker, MakeConn};
pub use service::{hyper_service, HttpBody, HttpService, HyperService, PeerAddr};

use crate::rt::{Executor, Serves, Timer};

/// Errors a service or body may return.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Serves `service` on `listener` (module docs); await the result (or
/// configure it first). `service` is an axum `Router` or any tower
/// service of `Request<Incoming>`, or, as `axum::serve` takes them,
/// `router.into_make_service()` or
/// `router.into_make_service_with_connect_info::<C>()` ([`IntoConnMaker`]).
///
/// ```no_run
/// use axum::{routing::get, Router};
///
/// fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     spargio::block_on(spargio::run(|handle| async move {
///         let app = Router::new().route("/", get(|| async { "hello from spargio\n" }));
///         let listener = spargio::net::TcpListener::bind(&handle, "127.0.0.1:3000").await?;
///         spargio_http::serve(listener, app).await
///     }))??;
///     Ok(())
/// }
/// ```
pub fn serve<L, S, Marker>(listener: L, service: S) -> Serve<S::Maker, L>
where
    L: Listener,
    S: IntoConnMaker<Marker>,
{
    Serve {
        listener,
        service: service.into_maker(),
        config: Config::default(),
        hyper: None,
    }
}

/// A user's settings for hyper's connection builder ([`Serve::hyper_builder`]).
type HyperSettings = Box<dyn FnOnce(&mut auto::Builder<Executor>) + Send>;

#[derive(Clone, Debug)]
struct Config {
    max_connections: usize,
    header_read_timeout: Option<Duration>,
    max_header_bytes: usize,
    tls: Option<TlsAcceptor>,
    tls_handshake_timeout: Option<Duration>,
    protocols: Protocols,
    h2_max_concurrent_streams: u32,
    h2_keep_alive: Option<(Duration, Duration)>,
    connect_info: bool,
    defer_accept: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Protocols {
    Auto,
    Http1,
    Http2,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_connections: 10_000,
            header_read_timeout: Some(Duration::from_secs(30)),
            max_header_bytes: 64 * 1024,
            tls: None,
            tls_handshake_timeout: Some(Duration::from_secs(10)),
            protocols: Protocols::Auto,
            h2_max_concurrent_streams: 200,
            h2_keep_alive: None,
            connect_info: false,
            defer_accept: true,
        }
    }
}

/// A server being configured; `.await` it to run (module docs).
#[must_use = "a server does nothing until awaited"]
pub struct Serve<S, L = TcpListener> {
    listener: L,
    service: S,
    config: Config,
    hyper: Option<HyperSettings>,
}

impl<S, L: fmt::Debug> fmt::Debug for Serve<S, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Serve")
            .field("listener", &self.listener)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S, L> Serve<S, L> {
    /// At most `n` connections open at once (default 10,000; at least 1).
    /// At the bound the server stops accepting until a connection ends;
    /// clients wait in the listen backlog.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.config.max_connections = n.max(1);
        self
    }

    /// How long a connection may go without a complete request head while
    /// nothing is in flight: a client dribbling its headers (slowloris) and
    /// an idle keep-alive connection are both closed between 1 and 1.25
    /// times this after they went quiet (HTTP/2: GOAWAY first). A request
    /// being served, or its response being written, never counts. Default
    /// 30 s; `None`: no limit. Costs no timer per request (see the
    /// `idle` notes in the module docs).
    pub fn header_read_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.config.header_read_timeout = timeout;
        self
    }

    /// The largest request head accepted (default 64 KiB, at least 8 KiB):
    /// HTTP/1.1 buffer size for the request line and headers, HTTP/2
    /// header list size.
    pub fn max_header_bytes(mut self, n: usize) -> Self {
        self.config.max_header_bytes = n.max(8 * 1024);
        self
    }

    /// Whether the listener defers accepting a connection until its
    /// client has sent something (`TCP_DEFER_ACCEPT`, up to one second;
    /// default on). HTTP and TLS clients speak first, so a connection then
    /// reaches the server with its request, or its ClientHello, already
    /// readable: one wakeup per connection instead of two, and a client
    /// that connects and stays silent costs no task until the kernel lets
    /// it through (after a second; then `header_read_timeout` applies).
    /// Under `Connection: close` churn from 512 clients it cut the
    /// server's CPU per connection by a third with the server on one core
    /// (by 6% on two shared cores; from 32 clients, where the core never
    /// idles either way, by 3%). Its one measured cost: one core saturated by 4,000
    /// or more keep-alive clients at once, where each waits a 40 ms round,
    /// served 2–22% fewer requests per second, the sockets taking more
    /// delayed ACKs (`bench/README.md`, "Deferred accepts"). Turn it off
    /// for that, or if something in front of the server expects to be
    /// accepted before it speaks. See [`TcpListener::set_defer_accept`].
    pub fn defer_accept(mut self, on: bool) -> Self {
        self.config.defer_accept = on;
        self
    }

    /// Serves HTTP/1.1 only: over TLS, ALPN offers only `http/1.1`; a
    /// connection that opens with HTTP/2's preface (h2c by prior
    /// knowledge) is closed unserved.
    pub fn http1_only(mut self) -> Self {
        self.config.protocols = Protocols::Http1;
        self
    }

    /// Serves HTTP/2 only, as gRPC needs: h2c by prior knowledge on plain
    /// TCP; over TLS, ALPN offers only `h2`. A connection that opens in
    /// HTTP/1.1 is closed unserved.
    pub fn http2_only(mut self) -> Self {
        self.config.protocols = Protocols::Http2;
        self
    }

    /// Changes hyper's connection builder (hyper-util's `auto::Builder`,
    /// HTTP/1.1 and HTTP/2 settings alike), as a tokio server built on
    /// hyper-util can: `settings` runs once, when the server starts, after
    /// this server's own settings (`max_header_bytes`, the HTTP/2 limits
    /// and keep-alive, the timers), so what it sets wins.
    ///
    /// ```no_run
    /// # async fn demo(listener: spargio::net::TcpListener, app: axum::Router) -> std::io::Result<()> {
    /// spargio_http::serve(listener, app)
    ///     .hyper_builder(|b| {
    ///         // A proxy that must answer header names as its upstream wrote them.
    ///         b.http1().preserve_header_case(true).title_case_headers(true);
    ///         b.http2().initial_stream_window_size(1 << 20);
    ///     })
    ///     .await
    /// # }
    /// ```
    pub fn hyper_builder(
        mut self,
        settings: impl FnOnce(&mut auto::Builder<Executor>) + Send + 'static,
    ) -> Self {
        self.hyper = Some(Box::new(settings));
        self
    }

    /// HTTP/2: at most `n` concurrent streams per connection (default 200).
    pub fn http2_max_concurrent_streams(mut self, n: u32) -> Self {
        self.config.h2_max_concurrent_streams = n;
        self
    }

    /// HTTP/2: ping an idle connection every `interval` and close it when
    /// a ping is not answered within `timeout` (default: off).
    pub fn http2_keep_alive(mut self, interval: Duration, timeout: Duration) -> Self {
        self.config.h2_keep_alive = Some((interval, timeout));
        self
    }

    /// Puts the peer address into every request's extensions: as
    /// [`PeerAddr`], and with the `axum` feature as
    /// `axum::extract::ConnectInfo<SocketAddr>` (what axum's `ConnectInfo`
    /// extractor reads).
    pub fn with_connect_info(mut self) -> Self {
        self.config.connect_info = true;
        self
    }

    /// Runs until `signal` completes, then shuts down gracefully (module
    /// docs).
    pub fn with_graceful_shutdown<F>(self, signal: F) -> WithGracefulShutdown<S, F, L>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        WithGracefulShutdown {
            serve: self,
            signal,
            grace_period: Duration::from_secs(30),
        }
    }
}

impl<S> Serve<S, TcpListener> {
    /// Serves HTTPS: every accepted connection runs `acceptor`'s TLS
    /// handshake first. Unless the acceptor already sets ALPN protocols,
    /// ALPN offers what the server serves: `h2` and `http/1.1`, or only
    /// one of them with [`http2_only`](Self::http2_only) (gRPC) or
    /// [`http1_only`](Self::http1_only), called before or after this.
    /// The connection is served in the protocol the client picks.
    pub fn tls(mut self, acceptor: TlsAcceptor) -> Self {
        self.config.tls = Some(acceptor);
        self
    }

    /// How long a TLS handshake may take (default 10 s; `None`: no limit).
    pub fn tls_handshake_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.config.tls_handshake_timeout = timeout;
        self
    }
}

/// A server that shuts down gracefully when its signal completes; `.await`
/// it to run.
#[must_use = "a server does nothing until awaited"]
pub struct WithGracefulShutdown<S, F, L = TcpListener> {
    serve: Serve<S, L>,
    signal: F,
    grace_period: Duration,
}

impl<S, F, L: fmt::Debug> fmt::Debug for WithGracefulShutdown<S, F, L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithGracefulShutdown")
            .field("serve", &self.serve)
            .field("grace_period", &self.grace_period)
            .finish_non_exhaustive()
    }
}

impl<S, F, L> WithGracefulShutdown<S, F, L> {
    /// How long in-flight requests may take to finish once the signal has
    /// completed (default 30 s); then the remaining connections are closed.
    pub fn grace_period(mut self, grace_period: Duration) -> Self {
        self.grace_period = grace_period;
        self
    }
}

type ServeFuture = Pin<Box<dyn Future<Output = io::Result<()>> + Send>>;

impl<M, S, B, L> IntoFuture for Serve<M, L>
where
    L: Listener,
    M: MakeConn<L::Stream, Service = S>,
    // The `Response` equality names `B` for the impl.
    S: HttpService<B> + tower_service::Service<Request<Incoming>, Response = Response<B>>,
    B: HttpBody,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    fn into_future(self) -> ServeFuture {
        Box::pin(run(self, std::future::pending(), Duration::ZERO))
    }
}

impl<M, S, B, F, L> IntoFuture for WithGracefulShutdown<M, F, L>
where
    L: Listener,
    M: MakeConn<L::Stream, Service = S>,
    // The `Response` equality names `B` for the impl.
    S: HttpService<B> + tower_service::Service<Request<Incoming>, Response = Response<B>>,
    B: HttpBody,
    F: Future<Output = ()> + Send + 'static,
{
    type Output = io::Result<()>;
    type IntoFuture = ServeFuture;

    fn into_future(self) -> ServeFuture {
        Box::pin(run(self.serve, self.signal, self.grace_period))
    }
}

fn builders(
    config: &Config,
    hyper: Option<HyperSettings>,
    executor: &Executor,
    timer: &Timer,
) -> conn::Shared {
    let builder = {
        let mut b = auto::Builder::new(executor.clone());
        // hyper's own header timeout arms a timer per request; the
        // server's sweeper enforces `header_read_timeout` instead (idle.rs).
        b.http1()
            .timer(timer.clone())
            .header_read_timeout(None)
            .max_buf_size(config.max_header_bytes);
        let mut h2 = b.http2();
        h2.timer(timer.clone())
            .max_concurrent_streams(config.h2_max_concurrent_streams)
            .max_header_list_size(config.max_header_bytes as u32)
            .enable_connect_protocol();
        if let Some((interval, timeout)) = config.h2_keep_alive {
            // Capped: hyper adds both to an `Instant` unchecked.
            h2.keep_alive_interval(crate::timeout::saturate(interval))
                .keep_alive_timeout(crate::timeout::saturate(timeout));
        }
        // Not `http1_only()` / `http2_only()`: serving with upgrades
        // ignores them. The connection's `Io` refuses what is not served.
        if let Some(settings) = hyper {
            settings(&mut b);
        }
        b
    };
    let tls = config.tls.as_ref().map(|acceptor| {
        let options = HandshakeOptions {
            timeout: config.tls_handshake_timeout,
        };
        (with_default_alpn(acceptor, config.protocols), options)
    });
    conn::Shared {
        builder,
        serves: Serves {
            http1: config.protocols != Protocols::Http2,
            http2: config.protocols != Protocols::Http1,
        },
        tls,
        connect_info: config.connect_info,
        idle_timeout: config.header_read_timeout.is_some(),
    }
}

/// `acceptor`, offering by ALPN the protocols served unless it already
/// offers its own. Decided when the server starts, so `http1_only` and
/// `http2_only` count whether they were called before or after `tls`.
fn with_default_alpn(acceptor: &TlsAcceptor, protocols: Protocols) -> TlsAcceptor {
    if !acceptor.config().alpn_protocols.is_empty() {
        return acceptor.clone();
    }
    let alpn: &[&[u8]] = match protocols {
        Protocols::Http1 => &[b"http/1.1"],
        Protocols::Http2 => &[b"h2"],
        Protocols::Auto => &[b"h2", b"http/1.1"],
    };
    acceptor.clone().with_alpn_protocols(alpn)
}

enum Event<T> {
    Accepted(io::Result<T>),
    /// The shutdown signal, or the end of a listener's connections (a
    /// listener of the user's own, `Connections`; spargio's never end).
    Shutdown,
}

async fn run<M, S, B, F, L>(serve: Serve<M, L>, signal: F, grace_period: Duration) -> io::Result<()>
where
    L: Listener,
    M: MakeConn<L::Stream, Service = S>,
    S: HttpService<B>,
    B: HttpBody,
    F: Future<Output = ()> + Send + 'static,
{
    let Serve {
        listener,
        service,
        config,
        hyper,
    } = serve;
    let handle = listener.runtime().clone();
    // One second: the shortest deferral the kernel has (one SYN-ACK
    // retransmission), as nginx's `deferred` sets it. Off sets zero, so a
    // listener that had it set by its owner is served as told. A listener
    // that refuses the option is served undeferred.
    let defer = Duration::from_secs(u64::from(config.defer_accept));
    listener.defer_accept(defer);
    let shared = Arc::new(builders(
        &config,
        hyper,
        &Executor::new(&handle),
        &Timer::new(&handle),
    ));
    let hub = Arc::new(hub::Hub::default());
    let sweeper = match config.header_read_timeout {
        Some(timeout) => {
            let (hub, every) = (hub.clone(), timeout / idle::STRIKES);
            let h = handle.clone();
            let sweep = async move {
                loop {
                    h.sleep(every).await;
                    hub.sweep();
                }
            };
            handle.spawn_stealable(sweep).ok().map(AbortOnDrop)
        }
        None => None,
    };
    let mut incoming = listener.accepting()?;
    let mut signal = std::pin::pin!(signal);
    loop {
        let event = poll_fn(|cx| {
            if signal.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Event::Shutdown);
            }
            if hub.poll_below(config.max_connections, cx).is_pending() {
                return Poll::Pending;
            }
            incoming
                .as_mut()
                .poll_next(cx)
                .map(|next| next.map_or(Event::Shutdown, Event::Accepted))
        })
        .await;
        match event {
            Event::Shutdown => break,
            Event::Accepted(Ok(stream)) => {
                // Fails when the peer is gone already (connect info).
                let Ok(service) = service.make(&stream) else {
                    continue;
                };
                let state = shared.idle_timeout.then(Arc::default);
                let guard = hub.enter(state.clone());
                let placement = TaskPlacement::Pinned(stream.session() % handle.shard_count());
                let task = conn::serve_connection(shared.clone(), stream, service, state, guard);
                // Fails only when the runtime is shutting down; the task
                // (and with it the stream and the guard) is dropped.
                if handle.spawn_with_placement(placement, task).is_err() {
                    return Ok(());
                }
            }
            Event::Accepted(Err(e)) => {
                if !is_per_connection(&e) {
                    handle.sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }
    // Stop accepting: cancel the multishot accept and close the listening
    // socket, so new connections are refused rather than queued.
    drop(incoming);
    drop(listener);
    hub.drain();
    let drained = crate::timeout::timeout(
        &handle,
        grace_period,
        poll_fn(|cx| hub::poll_idle(&hub, cx)),
    )
    .await;
    if drained.is_none() {
        hub.abort();
        poll_fn(|cx| hub::poll_idle(&hub, cx)).await;
    }
    drop(sweeper);
    Ok(())
}

/// Stops the sweeper however the serve future ends (returned or dropped).
struct AbortOnDrop(spargio::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Errors that concern one connection that failed before it was accepted.
fn is_per_connection(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNABORTED | libc::ECONNRESET | libc::EPERM | libc::EPROTO | libc::ETIMEDOUT)
    )
}
