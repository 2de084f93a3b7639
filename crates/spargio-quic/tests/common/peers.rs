//! quinn 0.11 peers on their own tokio runtime, for interop tests: a
//! server with one behaviour per test ([`Behaviour`]) that records what it
//! saw ([`Observed`]), and a client ([`QuinnClient`], in `client.rs`).
//!
//! Each peer owns a 2-worker tokio multi-thread runtime, so a spargio test
//! runtime is never blocked by it; the async helpers spawn their work on
//! that runtime and await the `JoinHandle` (awaitable from any executor).
//!
//! Wire conventions the behaviours use (the spargio side of a test
//! follows the same ones):
//! - checksums ([`checksum`](super::checksum)) are 8 little-endian bytes;
//! - a `Source` request is a bi stream carrying the seed as 8
//!   little-endian bytes, then FIN; the answer is `pattern(n, seed)`, FIN.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quinn::{Connection, ReadError, RecvStream, SendStream, VarInt};
use tokio::runtime::Runtime;
use tokio::sync::watch;

use super::mute::{MutableSocket, Mute};
use super::{pattern, Checksum, TestCerts, ALPN, HANG};

/// What a [`QuinnServer`] does with each connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Behaviour {
    /// Echo every bi stream back as it arrives, then finish; echo every
    /// uni stream back on a new uni stream.
    Echo,
    /// Read every stream to its end; on bi streams answer with the
    /// checksum of what arrived (8 bytes LE), then finish.
    Sink,
    /// On each bi stream, read the 8-byte LE seed, answer with
    /// `pattern(n, seed)` and finish.
    Source(usize),
    /// Echo every datagram back; streams as in `Echo`.
    DatagramEcho,
    /// Close the connection with this code and reason as soon as the
    /// handshake completes.
    CloseWith(u32, String),
    /// Reset the first stream of each connection with this code (bi:
    /// RESET_STREAM on our half and STOP_SENDING on theirs; uni:
    /// STOP_SENDING); later streams are echoed.
    ResetStream(u32),
    /// Complete the handshake, then fall silent: send nothing, read
    /// nothing (see [`QuinnServer::mute`]).
    Silent,
}

/// How a connection ended, as one side saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Closed {
    /// The peer's application closed it (CONNECTION_CLOSE 0x1d).
    Application { code: u64, reason: String },
    /// The peer's QUIC stack closed it (CONNECTION_CLOSE 0x1c).
    Transport { code: u64, reason: String },
    /// No packet from the peer within the idle timeout.
    TimedOut,
    /// This side closed it.
    Locally,
    /// A stateless reset from the peer.
    Reset,
    /// Anything else (version mismatch, CIDs exhausted, handshake errors).
    Other(String),
}

impl From<quinn::ConnectionError> for Closed {
    fn from(e: quinn::ConnectionError) -> Closed {
        use quinn::ConnectionError as E;
        match e {
            E::ApplicationClosed(c) => Closed::Application {
                code: c.error_code.into_inner(),
                reason: String::from_utf8_lossy(&c.reason).into_owned(),
            },
            E::ConnectionClosed(c) => Closed::Transport {
                code: u64::from(c.error_code),
                reason: String::from_utf8_lossy(&c.reason).into_owned(),
            },
            E::TimedOut => Closed::TimedOut,
            E::LocallyClosed => Closed::Locally,
            E::Reset => Closed::Reset,
            other => Closed::Other(other.to_string()),
        }
    }
}

/// Which kind of stream a [`StreamRecord`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// Opened by the peer as a bidirectional stream.
    Bi,
    /// Opened by the peer as a unidirectional stream.
    Uni,
}

/// How the peer's half of a stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEnd {
    /// FIN: every byte arrived.
    Finished,
    /// RESET_STREAM with this code.
    Reset(u64),
    /// This server stopped it (`ResetStream` behaviour).
    Stopped,
    /// The connection ended first.
    ConnectionLost,
}

/// One stream the server read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamRecord {
    pub kind: StreamKind,
    /// Bytes received.
    pub bytes: u64,
    /// FNV-1a 64 of the bytes received.
    pub checksum: u64,
    pub end: StreamEnd,
}

/// Everything a [`QuinnServer`] saw, in arrival order. A stream is
/// recorded before the server answers it (echo FIN, checksum, reset), so a
/// client that got the answer finds the record in the next snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Observed {
    /// Handshakes completed.
    pub connections: usize,
    /// Negotiated ALPN of each connection.
    pub alpn: Vec<Option<Vec<u8>>>,
    /// Handshakes that failed, as text.
    pub handshake_errors: Vec<String>,
    /// Streams read to their end (or reset, or cut off).
    pub streams: Vec<StreamRecord>,
    /// RESET_STREAM codes received from the peer (also in `streams`).
    pub resets_received: Vec<u64>,
    /// Datagrams received.
    pub datagrams: usize,
    /// How each connection ended.
    pub closes: Vec<Closed>,
}

/// A [`QuinnServer`]'s settings.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    pub certs: TestCerts,
    pub behaviour: Behaviour,
    /// ALPN protocols offered (default: [`ALPN`]).
    pub alpn: Vec<Vec<u8>>,
    /// The server's idle timeout (default 30 s; `None`: none).
    pub idle_timeout: Option<Duration>,
}

impl ServerOptions {
    /// `behaviour` with the defaults above.
    pub fn new(certs: &TestCerts, behaviour: Behaviour) -> ServerOptions {
        ServerOptions {
            certs: certs.clone(),
            behaviour,
            alpn: vec![ALPN.to_vec()],
            idle_timeout: Some(Duration::from_secs(30)),
        }
    }

    /// Offers these ALPN protocols instead.
    pub fn alpn(mut self, alpn: &[&[u8]]) -> ServerOptions {
        self.alpn = alpn.iter().map(|p| p.to_vec()).collect();
        self
    }

    /// Uses this idle timeout instead.
    pub fn idle_timeout(mut self, idle: Option<Duration>) -> ServerOptions {
        self.idle_timeout = idle;
        self
    }
}

/// A 2-worker tokio runtime for one peer.
pub fn peer_runtime(name: &str) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name(name)
        .build()
        .expect("peer tokio runtime")
}

/// A quinn server on 127.0.0.1 with one [`Behaviour`]. Dropping it closes
/// the endpoint and stops its runtime.
pub struct QuinnServer {
    /// Where it listens.
    pub addr: SocketAddr,
    endpoint: quinn::Endpoint,
    observed: Arc<watch::Sender<Observed>>,
    mute: Mute,
    rt: Option<Runtime>,
}

impl QuinnServer {
    /// Binds 127.0.0.1:0 and serves `opts.behaviour` until dropped.
    pub fn start(opts: ServerOptions) -> QuinnServer {
        let rt = peer_runtime("quinn-server");
        let alpn: Vec<&[u8]> = opts.alpn.iter().map(|p| p.as_slice()).collect();
        let config = opts.certs.quinn_server_config(&alpn, opts.idle_timeout);
        let mute = Mute::default();
        let endpoint = {
            let _enter = rt.enter();
            let socket = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind server socket");
            let runtime: Arc<dyn quinn::Runtime> = Arc::new(quinn::TokioRuntime);
            let inner = runtime.wrap_udp_socket(socket).expect("wrap socket");
            let socket = Arc::new(MutableSocket::new(inner, mute.clone()));
            quinn::Endpoint::new_with_abstract_socket(
                quinn::EndpointConfig::default(),
                Some(config),
                socket,
                runtime,
            )
            .expect("quinn server endpoint")
        };
        let addr = endpoint.local_addr().expect("server addr");
        let observed = Arc::new(watch::Sender::new(Observed::default()));
        let (ep, obs, m, behaviour) = (
            endpoint.clone(),
            observed.clone(),
            mute.clone(),
            opts.behaviour,
        );
        rt.spawn(async move {
            while let Some(incoming) = ep.accept().await {
                let conn = ConnCtx {
                    observed: obs.clone(),
                    mute: m.clone(),
                    behaviour: behaviour.clone(),
                    first: AtomicBool::new(true),
                };
                tokio::spawn(conn.serve(incoming));
            }
        });
        QuinnServer {
            addr,
            endpoint,
            observed,
            mute,
            rt: Some(rt),
        }
    }

    /// `Behaviour` with default options.
    pub fn with(certs: &TestCerts, behaviour: Behaviour) -> QuinnServer {
        QuinnServer::start(ServerOptions::new(certs, behaviour))
    }

    /// A snapshot of what the server saw so far.
    pub fn observed(&self) -> Observed {
        self.observed.borrow().clone()
    }

    /// Waits (up to [`HANG`]) until `pred` holds for what the server saw;
    /// `Err` carries the last snapshot if it never did.
    pub async fn wait_until(
        &self,
        pred: impl Fn(&Observed) -> bool + Send + Sync + 'static,
    ) -> Result<Observed, Observed> {
        let mut rx = self.observed.subscribe();
        let task = self.handle().spawn(async move {
            let waited = tokio::time::timeout(HANG, async {
                rx.wait_for(|o| pred(o)).await.map(|o| o.clone())
            })
            .await;
            match waited {
                Ok(Ok(o)) => Ok(o),
                _ => Err(rx.borrow().clone()),
            }
        });
        task.await.expect("wait_until task")
    }

    /// From now on the server sends nothing and drops everything it
    /// receives, like a host that vanished (no CONNECTION_CLOSE).
    pub fn mute(&self) {
        self.mute.mute();
    }

    /// The runtime the server runs on.
    pub fn handle(&self) -> &tokio::runtime::Handle {
        self.rt.as_ref().expect("runtime").handle()
    }

    /// The quinn endpoint itself, for anything the behaviours don't cover.
    pub fn endpoint(&self) -> &quinn::Endpoint {
        &self.endpoint
    }
}

impl Drop for QuinnServer {
    fn drop(&mut self) {
        self.endpoint.close(VarInt::from_u32(0), b"server dropped");
        if let Some(rt) = self.rt.take() {
            // Never blocks, so dropping the server inside any executor is fine.
            rt.shutdown_background();
        }
    }
}

// ===== per connection =====

struct ConnCtx {
    observed: Arc<watch::Sender<Observed>>,
    mute: Mute,
    behaviour: Behaviour,
    /// No stream of this connection accepted yet (`ResetStream`).
    first: AtomicBool,
}

impl ConnCtx {
    async fn serve(self, incoming: quinn::Incoming) {
        let conn = match incoming.await {
            Ok(conn) => conn,
            Err(e) => {
                let text = e.to_string();
                self.observed.send_modify(|o| o.handshake_errors.push(text));
                return;
            }
        };
        let alpn = conn
            .handshake_data()
            .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
            .and_then(|d| d.protocol);
        self.observed.send_modify(|o| {
            o.connections += 1;
            o.alpn.push(alpn);
        });
        match &self.behaviour {
            Behaviour::CloseWith(code, reason) => {
                conn.close(VarInt::from_u32(*code), reason.as_bytes());
            }
            Behaviour::Silent => self.mute.mute(),
            _ => {
                let ctx = Arc::new(self);
                tokio::spawn(ctx.clone().accept_bi(conn.clone()));
                tokio::spawn(ctx.clone().accept_uni(conn.clone()));
                tokio::spawn(ctx.clone().datagrams(conn.clone()));
                let closed = Closed::from(conn.closed().await);
                ctx.observed.send_modify(|o| o.closes.push(closed));
                return;
            }
        }
        let closed = Closed::from(conn.closed().await);
        self.observed.send_modify(|o| o.closes.push(closed));
    }

    /// Whether this stream is the one `ResetStream` resets (the first of
    /// the connection).
    fn reset_code(&self) -> Option<u32> {
        // Relaxed: only which caller flips it matters.
        let was_first = self.first.swap(false, Ordering::Relaxed);
        match self.behaviour {
            Behaviour::ResetStream(code) if was_first => Some(code),
            _ => None,
        }
    }

    async fn accept_bi(self: Arc<Self>, conn: Connection) {
        while let Ok((send, recv)) = conn.accept_bi().await {
            let reset = self.reset_code();
            tokio::spawn(self.clone().bi(send, recv, reset));
        }
    }

    async fn accept_uni(self: Arc<Self>, conn: Connection) {
        while let Ok(mut recv) = conn.accept_uni().await {
            if let Some(code) = self.reset_code() {
                self.record(StreamKind::Uni, Checksum::new(), StreamEnd::Stopped);
                let _ = recv.stop(VarInt::from_u32(code));
                continue;
            }
            let ctx = self.clone();
            let conn = conn.clone();
            tokio::spawn(async move {
                let mut echo = match ctx.behaviour {
                    Behaviour::Echo | Behaviour::DatagramEcho | Behaviour::ResetStream(_) => {
                        conn.open_uni().await.ok()
                    }
                    _ => None,
                };
                let (sum, end) = copy(&mut recv, echo.as_mut()).await;
                ctx.record(StreamKind::Uni, sum, end);
                if let Some(mut send) = echo {
                    finish_like(&mut send, end);
                    let _ = send.stopped().await;
                }
            });
        }
    }

    async fn bi(self: Arc<Self>, mut send: SendStream, mut recv: RecvStream, reset: Option<u32>) {
        if let Some(code) = reset {
            self.record(StreamKind::Bi, Checksum::new(), StreamEnd::Stopped);
            let _ = send.reset(VarInt::from_u32(code));
            let _ = recv.stop(VarInt::from_u32(code));
            return;
        }
        match self.behaviour {
            Behaviour::Sink => {
                let (sum, end) = copy(&mut recv, None).await;
                self.record(StreamKind::Bi, sum, end);
                if end == StreamEnd::Finished {
                    let _ = send.write_all(&sum.value().to_le_bytes()).await;
                }
                finish_like(&mut send, end);
            }
            Behaviour::Source(n) => {
                let mut seed = [0u8; 8];
                let mut got = Vec::new();
                let end = loop {
                    match recv.read_chunk(64, true).await {
                        Ok(Some(chunk)) => got.extend_from_slice(&chunk.bytes),
                        Ok(None) => break StreamEnd::Finished,
                        Err(e) => break read_end(&e),
                    }
                };
                let mut sum = Checksum::new();
                sum.update(&got);
                self.record(StreamKind::Bi, sum, end);
                if end == StreamEnd::Finished && got.len() == 8 {
                    seed.copy_from_slice(&got);
                    let _ = send.write_all(&pattern(n, u64::from_le_bytes(seed))).await;
                    let _ = send.finish();
                } else {
                    // Not a seed: refuse with code 1 so the client sees why.
                    let _ = send.reset(VarInt::from_u32(1));
                }
            }
            _ => {
                let (sum, end) = copy(&mut recv, Some(&mut send)).await;
                self.record(StreamKind::Bi, sum, end);
                finish_like(&mut send, end);
            }
        }
        // Keep the stream until the peer has everything, so a dropped
        // handle never cuts the answer short.
        let _ = send.stopped().await;
    }

    async fn datagrams(self: Arc<Self>, conn: Connection) {
        while let Ok(d) = conn.read_datagram().await {
            self.observed.send_modify(|o| o.datagrams += 1);
            if self.behaviour == Behaviour::DatagramEcho {
                let _ = conn.send_datagram(d);
            }
        }
    }

    fn record(&self, kind: StreamKind, sum: Checksum, end: StreamEnd) {
        self.observed.send_modify(|o| {
            if let StreamEnd::Reset(code) = end {
                o.resets_received.push(code);
            }
            o.streams.push(StreamRecord {
                kind,
                bytes: sum.len(),
                checksum: sum.value(),
                end,
            });
        });
    }
}

/// Reads `recv` to its end, writing each chunk to `echo` if given; the
/// checksum of what arrived and how the stream ended.
async fn copy(recv: &mut RecvStream, mut echo: Option<&mut SendStream>) -> (Checksum, StreamEnd) {
    let mut sum = Checksum::new();
    loop {
        match recv.read_chunk(64 * 1024, true).await {
            Ok(Some(chunk)) => {
                sum.update(&chunk.bytes);
                if let Some(send) = echo.as_deref_mut() {
                    if send.write_chunk(chunk.bytes).await.is_err() {
                        echo = None;
                    }
                }
            }
            Ok(None) => return (sum, StreamEnd::Finished),
            Err(e) => return (sum, read_end(&e)),
        }
    }
}

fn read_end(e: &ReadError) -> StreamEnd {
    match e {
        ReadError::Reset(code) => StreamEnd::Reset(code.into_inner()),
        _ => StreamEnd::ConnectionLost,
    }
}

/// Ends our half the way the peer ended theirs: FIN after FIN, the same
/// reset code after a reset.
fn finish_like(send: &mut SendStream, end: StreamEnd) {
    let _ = match end {
        StreamEnd::Reset(code) => send.reset(VarInt::from_u64(code).unwrap_or(VarInt::MAX)),
        _ => send.finish(),
    };
}
