//! The server `scripts/soak.sh` soaks: one process serving, on loopback,
//! HTTP/1.1 and h2c, HTTPS (HTTP/2 or HTTP/1.1 by ALPN), WebSocket (plain
//! and over TLS), and the gRPC greeter (h2c and TLS), each on a port of
//! its own, and counting every connection it accepts and closes.
//!
//! ```text
//! cargo build --release -p spargio-http --example soak_server
//! target/release/examples/soak_server DIR   # writes DIR/ca.pem, serves until SIGTERM
//! ```
//!
//! Prints `soak_server: backend ...`, then one `soak_server: ready ...`
//! line with the ports. The admin port (plain HTTP, not counted) answers
//! `GET /stats` with one line: `open= accepted= closed= ws_open=
//! live_tasks=` over all the counted servers, then each server's
//! `accepted/closed`. On SIGTERM or SIGINT every server shuts down
//! gracefully (5 s grace period), and the server prints `soak_server:
//! final ...` with the same counts and how long the shutdown took.
//!
//! Routes of the HTTP servers: `GET /` (a short body), `GET /big/{n}` (`n`
//! bytes of `x` in 16 KiB chunks, streamed), `POST /echo` (the body
//! back, up to 2 MiB), `GET /ws` (a WebSocket echo). The gRPC servers
//! serve `helloworld.Greeter` (`examples/greeter/`).
//!
//! # Counting connections
//!
//! `serve` clones its service once per accepted connection, in its accept
//! loop, and nowhere else; hyper clones the connection's copy once per
//! request. [`Counted`] tells the two apart: a clone of the copy `serve`
//! holds (no connection token) counts an accepted connection and makes a
//! token; a clone of a connection's copy shares its token. The token's
//! last copy drops when the connection's task and every request future
//! of it have ended: that counts it closed. A WebSocket leaves the
//! connection at the upgrade; its session is counted apart (`ws_open`).

#[path = "greeter/mod.rs"]
mod greeter;

use std::convert::Infallible;
use std::fmt::Write as _;
use std::future::IntoFuture;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use greeter::server::GreeterServer;
use http_body::{Frame, SizeHint};
use spargio::net::TcpListener;
use spargio::{CancellationToken, RuntimeHandle};
use spargio_http::ws::WebSocketUpgrade;
use spargio_ws::WsStreamExt;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How long the servers drain at shutdown before closing what is left.
const GRACE: Duration = Duration::from_secs(5);
/// `header_read_timeout`: shorter than the default 30 s, so the soak's
/// stalled clients see it enforced within their own deadline.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest `/big/{n}`.
const MAX_BIG: u64 = 64 << 20;

// ===== connection counting =====

/// Accepted and closed connections of one server (module docs).
#[derive(Debug, Default)]
struct Counts {
    accepted: AtomicU64,
    closed: AtomicU64,
}

impl Counts {
    /// `(accepted, closed)`; closed first, so a connection closing
    /// between the two loads never reads as closed but not accepted.
    fn read(&self) -> (u64, u64) {
        let closed = self.closed.load(Ordering::Acquire);
        (self.accepted.load(Ordering::Acquire), closed)
    }
}

/// One accepted connection; its last copy counts it closed.
#[derive(Debug)]
struct ConnToken(Arc<Counts>);

impl Drop for ConnToken {
    fn drop(&mut self) {
        // Release pairs with the Acquire loads in `Counts::read`.
        self.0.closed.fetch_add(1, Ordering::Release);
    }
}

/// A service that counts the connections it is cloned for (module docs).
#[derive(Debug)]
struct Counted<S> {
    inner: S,
    counts: Arc<Counts>,
    conn: Option<Arc<ConnToken>>,
}

impl<S> Counted<S> {
    fn new(inner: S, counts: &Arc<Counts>) -> Counted<S> {
        Counted {
            inner,
            counts: counts.clone(),
            conn: None,
        }
    }
}

impl<S: Clone> Clone for Counted<S> {
    fn clone(&self) -> Self {
        let conn = match &self.conn {
            Some(token) => token.clone(),
            None => {
                self.counts.accepted.fetch_add(1, Ordering::Release);
                Arc::new(ConnToken(self.counts.clone()))
            }
        };
        Counted {
            inner: self.inner.clone(),
            counts: self.counts.clone(),
            conn: Some(conn),
        }
    }
}

impl<S: tower_service::Service<R>, R> tower_service::Service<R> for Counted<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> S::Future {
        self.inner.call(req)
    }
}

/// WebSocket sessions opened and closed (after the upgrade).
#[derive(Debug, Default)]
struct WsCounts {
    opened: AtomicU64,
    closed: AtomicU64,
}

/// Counts one WebSocket session closed when dropped.
struct WsSession(Arc<WsCounts>);

impl WsSession {
    fn open(counts: &Arc<WsCounts>) -> WsSession {
        counts.opened.fetch_add(1, Ordering::Release);
        WsSession(counts.clone())
    }
}

impl Drop for WsSession {
    fn drop(&mut self) {
        self.0.closed.fetch_add(1, Ordering::Release);
    }
}

/// Every counter the soak reads.
#[derive(Debug, Default)]
struct Stats {
    servers: Vec<(&'static str, Arc<Counts>)>,
    ws: Arc<WsCounts>,
}

impl Stats {
    /// `open= accepted= closed= ws_open= live_tasks=`, then each server's
    /// `name=accepted/closed`.
    fn line(&self, handle: &RuntimeHandle) -> String {
        let (mut accepted, mut closed, mut each) = (0, 0, String::new());
        for (name, counts) in &self.servers {
            let (a, c) = counts.read();
            accepted += a;
            closed += c;
            let _ = write!(each, " {name}={a}/{c}");
        }
        let ws_closed = self.ws.closed.load(Ordering::Acquire);
        let ws_opened = self.ws.opened.load(Ordering::Acquire);
        format!(
            "open={} accepted={accepted} closed={closed} ws_open={} ws_sessions={ws_opened} live_tasks={}{each}",
            accepted.saturating_sub(closed),
            ws_opened.saturating_sub(ws_closed),
            handle.stats_snapshot().live_tasks(),
        )
    }

    fn open(&self) -> u64 {
        let conns: u64 = self
            .servers
            .iter()
            .map(|(_, c)| {
                let (a, c) = c.read();
                a.saturating_sub(c)
            })
            .sum();
        let ws_closed = self.ws.closed.load(Ordering::Acquire);
        let ws_opened = self.ws.opened.load(Ordering::Acquire);
        conns + ws_opened.saturating_sub(ws_closed)
    }
}

// ===== routes =====

/// 16 KiB of `x`: the chunk `/big/{n}` streams.
static CHUNK: [u8; 16 * 1024] = [b'x'; 16 * 1024];

/// `left` bytes of `x`, one chunk per poll, with an exact size (so the
/// response has a `Content-Length`).
struct Pattern {
    left: u64,
}

impl http_body::Body for Pattern {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(CHUNK.len() as u64);
        self.left -= n;
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
            &CHUNK[..n as usize],
        )))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

async fn big(Path(n): Path<u64>) -> Response {
    Response::new(Body::new(Pattern {
        left: n.min(MAX_BIG),
    }))
}

/// Echoes text and binary messages until the client closes or fails.
async fn ws_echo(State(ws_counts): State<Arc<WsCounts>>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |mut socket| async move {
        let _session = WsSession::open(&ws_counts);
        while let Ok(Some(msg)) = socket.recv().await {
            if (msg.is_text() || msg.is_binary()) && socket.send_message(msg).await.is_err() {
                break;
            }
        }
    })
}

fn app(ws: Arc<WsCounts>) -> Router {
    Router::new()
        .route("/", get(|| async { "hello from the soak server\n" }))
        .route("/big/{n}", get(big))
        .route("/echo", post(|body: Bytes| async move { body }))
        .route("/ws", get(ws_echo))
        .with_state(ws)
}

// ===== main =====

/// Serves `service` on a fresh loopback port until `stop`; the port and
/// the server's task.
async fn start<S, B>(
    handle: &RuntimeHandle,
    serve: impl FnOnce(spargio_http::Serve<S>) -> spargio_http::Serve<S>,
    service: S,
    stop: &CancellationToken,
) -> Result<(u16, spargio::JoinHandle<std::io::Result<()>>), BoxError>
where
    S: spargio_http::server::HttpService<B>
        + tower_service::Service<http::Request<hyper::body::Incoming>, Response = http::Response<B>>,
    B: spargio_http::server::HttpBody,
{
    let listener = TcpListener::bind(handle, "127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let stop = stop.clone();
    let server = serve(
        spargio_http::serve(listener, service).header_read_timeout(Some(HEADER_READ_TIMEOUT)),
    )
    .with_graceful_shutdown(async move { stop.cancelled().await })
    .grace_period(GRACE)
    .into_future();
    Ok((port, handle.spawn_stealable(server)?))
}

fn main() -> Result<(), BoxError> {
    let dir = PathBuf::from(std::env::args().nth(1).ok_or("usage: soak_server DIR")?);
    let names = vec!["localhost".into(), "127.0.0.1".into()];
    let cert = rcgen::generate_simple_self_signed(names)?;
    let (cert_pem, key_pem) = (cert.cert.pem(), cert.signing_key.serialize_pem());
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &cert_pem)?;
    let acceptor = spargio_tls::TlsAcceptor::from_pem(cert_pem.as_bytes(), key_pem.as_bytes())?;

    spargio::block_on(spargio::run(move |handle| async move {
        let refusal = handle
            .io_uring_refusal()
            .map_or(String::new(), |r| format!(" (io_uring refused: {r:?})"));
        println!(
            "soak_server: backend {} shards {} pid {}{refusal}",
            handle.backend(),
            handle.shard_count(),
            std::process::id(),
        );
        let mut term = spargio_signal::signal(&handle, &[libc::SIGTERM, libc::SIGINT])?;
        let stop = CancellationToken::new();
        let mut stats = Stats::default();
        let mut counts = |name| {
            let c = Arc::new(Counts::default());
            stats.servers.push((name, c.clone()));
            c
        };
        let (http, https, grpc, grpcs) = (
            counts("http"),
            counts("https"),
            counts("grpc"),
            counts("grpcs"),
        );
        let ws = stats.ws.clone();
        let tls = acceptor.clone();
        let (http_port, http) =
            start(&handle, |s| s, Counted::new(app(ws.clone()), &http), &stop).await?;
        let (https_port, https) = start(
            &handle,
            |s| s.tls(tls),
            Counted::new(app(ws), &https),
            &stop,
        )
        .await?;
        let (grpc_port, grpc) = start(
            &handle,
            |s| s.http2_only(),
            Counted::new(GreeterServer, &grpc),
            &stop,
        )
        .await?;
        let (grpcs_port, grpcs) = start(
            &handle,
            |s| s.http2_only().tls(acceptor),
            Counted::new(GreeterServer, &grpcs),
            &stop,
        )
        .await?;
        let stats = Arc::new(stats);
        let admin_stats = stats.clone();
        let admin_handle = handle.clone();
        let admin_app = Router::new().route(
            "/stats",
            get(move || {
                let line = admin_stats.line(&admin_handle);
                async move { line + "\n" }
            }),
        );
        let (admin_port, admin) = start(&handle, |s| s, admin_app, &stop).await?;
        println!(
            "soak_server: ready http={http_port} https={https_port} grpc={grpc_port} \
             grpcs={grpcs_port} admin={admin_port} ca={}",
            ca.display()
        );

        let sig = term.recv().await?;
        let began = Instant::now();
        println!(
            "soak_server: signal {sig}, shutting down: {}",
            stats.line(&handle)
        );
        stop.cancel();
        for server in [http, https, grpc, grpcs, admin] {
            server.await??;
        }
        // An HTTP/2 stream's task may end just after its connection's.
        let settle = Instant::now();
        while stats.open() > 0 && settle.elapsed() < Duration::from_secs(1) {
            handle.sleep(Duration::from_millis(10)).await;
        }
        println!(
            "soak_server: final {} shutdown_ms={}",
            stats.line(&handle),
            began.elapsed().as_millis()
        );
        Ok::<_, BoxError>(())
    }))?
}
