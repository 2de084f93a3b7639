//! QUIC: `spargio-quic` (native driver, and its quinn bridge backend)
//! against quinn 0.11 on tokio. Client and server in one process over
//! loopback, both sides' CPU counted (`cpu::Group`). Every side runs on
//! 2 threads: a 2-shard spargio runtime, or a 2-worker tokio runtime.
//!
//! Groups (the same workload for every variant):
//! - `quic_bulk_1conn`: one connection set up once; per iteration the
//!   client opens a bi stream, uploads 16 MiB and finishes, the server
//!   reads it to the end and answers the 8-byte byte sum.
//! - `quic_bulk_16conn`: 16 connections set up once; per iteration all 16
//!   upload 1 MiB at once, each answered with its byte sum.
//! - `quic_handshakes`: 32 full handshakes per iteration, in 4 sequential
//!   batches of 8 concurrent connects; the server closes each connection
//!   (code 0) as soon as its handshake completes, and a connect counts
//!   when the client has seen that close, so both ends finished. TLS
//!   session resumption is off, so every handshake is full.
//! - `quic_rtt`: one bi stream set up once; per iteration 1,000 times:
//!   write 64 bytes, read the 64-byte echo.
//!
//! The answer is a byte sum, not FNV: the test suite's FNV-1a is
//! byte-serial and would cost more than the transfer.
//!
//! Variants:
//! - `quinn_tokio`: quinn 0.11 client and server endpoints on one tokio
//!   multi-thread runtime with 2 workers, written as a quinn user would:
//!   endpoints and connections reused across iterations, `Bytes` chunks
//!   written with `write_chunk` and read with `read_chunk` (no copies),
//!   quinn's default transport config.
//! - `spargio_native`: `spargio-quic` with default options (native
//!   quinn-proto driver; the server gets one driver per shard on
//!   `SO_REUSEPORT` sockets, the client one driver) on a 2-shard runtime;
//!   `write_bytes` of the same `Bytes`, `read_chunk`; tasks stealable.
//! - `spargio_bridge`: the same code with `QuicBackend::Bridge`: quinn on
//!   spargio-quic's shared tokio runtime (2 workers of its own, beside the
//!   2 shards the bench code runs on).
//!
//! Every side uses the same quinn `ServerConfig`/`ClientConfig` (so the
//! same transport parameters and flow-control windows: quinn's defaults)
//! and one client endpoint and one server endpoint per group.

#[path = "common/cpu.rs"]
mod cpu;

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::rustls;
use quinn::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use spargio::{Runtime, RuntimeHandle};
use spargio_quic::{
    ConnectionError, QuicBackend, QuicConnection, QuicEndpoint, QuicEndpointOptions,
    QuicRecvStream, QuicSendStream,
};

const BULK_1CONN: usize = 16 << 20;
const BULK_CONNS: usize = 16;
const BULK_PER_CONN: usize = 1 << 20;
const HANDSHAKES: usize = 32;
const HANDSHAKE_BATCH: usize = 8;
const RTT_ROUNDS: usize = 1_000;
const RTT_MSG: usize = 64;
const ALPN: &[u8] = b"spargio-bench";

/// Sum of the bytes: cheap, vectorizes, and any lost or duplicated chunk
/// changes it.
fn byte_sum(data: &[u8]) -> u64 {
    data.iter().map(|&b| u64::from(b)).sum()
}

/// The upload payload: a pattern the sum would notice a shift in.
fn payload(len: usize) -> Bytes {
    Bytes::from(
        (0..len)
            .map(|i| (i % 251) as u8 ^ (i >> 12) as u8)
            .collect::<Vec<u8>>(),
    )
}

/// Certificates and TLS configs every side shares: a self-signed P-256
/// certificate for `localhost`, TLS 1.3, ring, ALPN `spargio-bench`, no
/// client-side resumption.
#[derive(Clone)]
struct Tls {
    server: Arc<rustls::ServerConfig>,
    client: Arc<rustls::ClientConfig>,
}

impl Tls {
    fn new() -> Tls {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        let der = cert.cert.der().clone();
        let key = cert.signing_key.serialize_der();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
            )
            .unwrap();
        server.alpn_protocols = vec![ALPN.to_vec()];
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der).unwrap();
        let mut client = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![ALPN.to_vec()];
        client.resumption = rustls::client::Resumption::disabled();
        Tls {
            server: Arc::new(server),
            client: Arc::new(client),
        }
    }

    fn quinn_server(&self) -> quinn::ServerConfig {
        quinn::ServerConfig::with_crypto(Arc::new(
            QuicServerConfig::try_from(self.server.clone()).unwrap(),
        ))
    }

    fn quinn_client(&self) -> quinn::ClientConfig {
        quinn::ClientConfig::new(Arc::new(
            QuicClientConfig::try_from(self.client.clone()).unwrap(),
        ))
    }
}

/// What a server does with each connection.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Serve {
    /// Each bi stream: read to the end, answer the byte sum, finish.
    Sum,
    /// Each bi stream: echo as it arrives.
    Echo,
    /// Close (code 0) once the handshake completes.
    Close,
}

// ===== quinn on tokio =====

struct QuinnSide {
    rt: tokio::runtime::Runtime,
    client: quinn::Endpoint,
    addr: SocketAddr,
    _server: quinn::Endpoint,
}

impl QuinnSide {
    fn new(tls: &Tls, serve: Serve) -> QuinnSide {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let (server, client) = rt.block_on(async {
            let server =
                quinn::Endpoint::server(tls.quinn_server(), "127.0.0.1:0".parse().unwrap())
                    .unwrap();
            let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
            client.set_default_client_config(tls.quinn_client());
            (server, client)
        });
        let addr = server.local_addr().unwrap();
        let ep = server.clone();
        rt.spawn(async move {
            while let Some(incoming) = ep.accept().await {
                tokio::spawn(quinn_serve(incoming, serve));
            }
        });
        QuinnSide {
            rt,
            client,
            addr,
            _server: server,
        }
    }

    fn connect(&self) -> quinn::Connection {
        let (ep, addr) = (self.client.clone(), self.addr);
        self.rt
            .block_on(async move { ep.connect(addr, "localhost").unwrap().await.unwrap() })
    }

    /// Uploads `data` on a new bi stream of each connection at once;
    /// returns the bytes the server confirmed.
    fn bulk(&self, conns: &[quinn::Connection], data: &Bytes, want: u64) -> usize {
        let tasks: Vec<_> = conns
            .iter()
            .map(|conn| {
                let (conn, data) = (conn.clone(), data.clone());
                self.rt.spawn(async move {
                    let (mut send, mut recv) = conn.open_bi().await.unwrap();
                    let len = data.len();
                    send.write_chunk(data).await.unwrap();
                    send.finish().unwrap();
                    let mut answer = [0u8; 8];
                    recv.read_exact(&mut answer).await.unwrap();
                    assert_eq!(u64::from_le_bytes(answer), want);
                    len
                })
            })
            .collect();
        self.rt.block_on(async move {
            let mut total = 0;
            for t in tasks {
                total += t.await.unwrap();
            }
            total
        })
    }

    fn handshakes(&self) -> usize {
        let (ep, addr) = (self.client.clone(), self.addr);
        self.rt.block_on(async move {
            tokio::spawn(async move {
                let mut done = 0;
                for _ in 0..HANDSHAKES / HANDSHAKE_BATCH {
                    let batch: Vec<_> = (0..HANDSHAKE_BATCH)
                        .map(|_| {
                            let ep = ep.clone();
                            tokio::spawn(async move {
                                let conn = ep.connect(addr, "localhost").unwrap().await.unwrap();
                                let closed = conn.closed().await;
                                if stats_enabled() {
                                    HANDSHAKE_STATS.add(&conn.stats());
                                }
                                matches!(closed, quinn::ConnectionError::ApplicationClosed(_))
                            })
                        })
                        .collect();
                    for t in batch {
                        done += usize::from(t.await.unwrap());
                    }
                }
                done
            })
            .await
            .unwrap()
        })
    }

    fn rtt_stream(&self, conn: &quinn::Connection) -> (quinn::SendStream, quinn::RecvStream) {
        let conn = conn.clone();
        self.rt
            .block_on(async move { conn.open_bi().await.unwrap() })
    }

    fn rtt(&self, stream: &mut Option<(quinn::SendStream, quinn::RecvStream)>) -> usize {
        let (mut send, mut recv) = stream.take().unwrap();
        let (rounds, pair) = self.rt.block_on(async move {
            tokio::spawn(async move {
                let msg = Bytes::from_static(&[7u8; RTT_MSG]);
                let mut back = [0u8; RTT_MSG];
                for _ in 0..RTT_ROUNDS {
                    send.write_chunk(msg.clone()).await.unwrap();
                    recv.read_exact(&mut back).await.unwrap();
                }
                (RTT_ROUNDS, (send, recv))
            })
            .await
            .unwrap()
        });
        *stream = Some(pair);
        rounds
    }
}

async fn quinn_serve(incoming: quinn::Incoming, serve: Serve) {
    let Ok(conn) = incoming.await else { return };
    if serve == Serve::Close {
        conn.close(0u32.into(), b"");
        return;
    }
    while let Ok((mut send, mut recv)) = conn.accept_bi().await {
        tokio::spawn(async move {
            let mut sum = 0u64;
            while let Ok(Some(chunk)) = recv.read_chunk(usize::MAX, true).await {
                if serve == Serve::Echo {
                    if send.write_chunk(chunk.bytes).await.is_err() {
                        return;
                    }
                } else {
                    sum += byte_sum(&chunk.bytes);
                }
            }
            if serve == Serve::Sum {
                let _ = send.write_all(&sum.to_le_bytes()).await;
            }
            let _ = send.finish();
        });
    }
}

// ===== spargio-quic (native or bridge) =====

struct SpargioSide {
    _rt: Runtime,
    handle: RuntimeHandle,
    client: QuicEndpoint,
    addr: SocketAddr,
    _server: QuicEndpoint,
}

type SpargioStream = (QuicSendStream, QuicRecvStream);

impl SpargioSide {
    fn new(tls: &Tls, serve: Serve, backend: QuicBackend) -> SpargioSide {
        let mut b = Runtime::builder().shards(2);
        if let Ok(v) = std::env::var("QB_SPIN") {
            b = b.spin_before_park(std::time::Duration::from_micros(v.parse().unwrap()));
        }
        let rt = b.build().expect("spargio runtime");
        let handle = rt.handle();
        let options = QuicEndpointOptions::default().with_backend(backend);
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let server =
            QuicEndpoint::server_with_options(&handle, any, tls.quinn_server(), options.clone())
                .unwrap();
        let client = QuicEndpoint::client_with_options(&handle, any, options).unwrap();
        client.set_default_client_config(tls.quinn_client());
        let addr = server.local_addr().unwrap();
        let (ep, h) = (server.clone(), handle.clone());
        handle
            .spawn_stealable(async move {
                while let Ok(conn) = ep.accept().await {
                    // Err: the runtime is shutting down (the side is
                    // being dropped); nothing left to serve.
                    if h.spawn_stealable(spargio_serve(h.clone(), conn, serve))
                        .is_err()
                    {
                        break;
                    }
                }
            })
            .unwrap();
        SpargioSide {
            _rt: rt,
            handle,
            client,
            addr,
            _server: server,
        }
    }

    fn block_on<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = T> + Send + 'static,
    ) -> T {
        spargio::block_on(self.handle.spawn_stealable(fut).unwrap()).unwrap()
    }

    fn connect(&self) -> QuicConnection {
        let (ep, addr) = (self.client.clone(), self.addr);
        self.block_on(async move { ep.connect(addr, "localhost").await.unwrap() })
    }

    fn bulk(&self, conns: &[QuicConnection], data: &Bytes, want: u64) -> usize {
        let tasks: Vec<_> = conns
            .iter()
            .map(|conn| {
                let (conn, data) = (conn.clone(), data.clone());
                self.handle
                    .spawn_stealable(async move {
                        let (mut send, mut recv) = conn.open_bi().await.unwrap();
                        let len = data.len();
                        send.write_bytes(data).await.unwrap();
                        send.finish().unwrap();
                        let answer = read_exact(&mut recv, 8).await;
                        assert_eq!(u64::from_le_bytes(answer.try_into().unwrap()), want);
                        len
                    })
                    .unwrap()
            })
            .collect();
        spargio::block_on(async move {
            let mut total = 0;
            for t in tasks {
                total += t.await.unwrap();
            }
            total
        })
    }

    fn handshakes(&self) -> usize {
        let (ep, addr, h) = (self.client.clone(), self.addr, self.handle.clone());
        self.block_on(async move {
            let mut done = 0;
            for _ in 0..HANDSHAKES / HANDSHAKE_BATCH {
                let batch: Vec<_> = (0..HANDSHAKE_BATCH)
                    .map(|_| {
                        let ep = ep.clone();
                        h.spawn_stealable(async move {
                            let conn = ep.connect(addr, "localhost").await.unwrap();
                            let closed = conn.closed().await;
                            if stats_enabled() {
                                HANDSHAKE_STATS.add(&conn.stats());
                            }
                            matches!(closed, ConnectionError::ApplicationClosed(_))
                        })
                        .unwrap()
                    })
                    .collect();
                for t in batch {
                    done += usize::from(t.await.unwrap());
                }
            }
            done
        })
    }

    fn rtt_stream(&self, conn: &QuicConnection) -> SpargioStream {
        let conn = conn.clone();
        self.block_on(async move { conn.open_bi().await.unwrap() })
    }

    fn rtt(&self, stream: &mut Option<SpargioStream>) -> usize {
        let (mut send, mut recv) = stream.take().unwrap();
        let (rounds, pair) = self.block_on(async move {
            let msg = Bytes::from_static(&[7u8; RTT_MSG]);
            for _ in 0..RTT_ROUNDS {
                send.write_bytes(msg.clone()).await.unwrap();
                let back = read_exact(&mut recv, RTT_MSG).await;
                assert_eq!(back.len(), RTT_MSG);
            }
            (RTT_ROUNDS, (send, recv))
        });
        *stream = Some(pair);
        rounds
    }
}

/// Reads exactly `n` bytes (chunks are not message boundaries).
async fn read_exact(recv: &mut QuicRecvStream, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let chunk = recv
            .read_chunk(n - out.len())
            .await
            .unwrap()
            .expect("early end");
        out.extend_from_slice(&chunk);
    }
    out
}

async fn spargio_serve(h: RuntimeHandle, conn: QuicConnection, serve: Serve) {
    if serve == Serve::Close {
        conn.close(0, b"");
        return;
    }
    while let Ok((mut send, mut recv)) = conn.accept_bi().await {
        let spawned = h.spawn_stealable(async move {
            let mut sum = 0u64;
            while let Ok(Some(chunk)) = recv.read_chunk(usize::MAX).await {
                if serve == Serve::Echo {
                    if send.write_bytes(chunk).await.is_err() {
                        return;
                    }
                } else {
                    sum += byte_sum(&chunk);
                }
            }
            if serve == Serve::Sum {
                let _ = send.write_all(&sum.to_le_bytes()).await;
            }
            let _ = send.finish();
        });
        if spawned.is_err() {
            // The runtime is shutting down.
            break;
        }
    }
}

const SPARGIO: [(&str, QuicBackend); 2] = [
    ("spargio_native", QuicBackend::Native),
    ("spargio_bridge", QuicBackend::Bridge),
];

/// With `QUIC_BENCH_STATS=1`, prints the client connection's loss and
/// congestion counters after a group (why a variant is slow: loss and
/// recovery, or the stack itself).
fn report_stats(group: &str, variant: &str, stats: quinn::ConnectionStats) {
    if !stats_enabled() {
        return;
    }
    let p = &stats.path;
    eprintln!(
        "{group}/{variant}: sent {} packets, lost {} ({} bytes), {} congestion events, \
         cwnd {}, rtt {:?}; udp tx {} datagrams in {} ios, rx {} datagrams in {} ios",
        p.sent_packets,
        p.lost_packets,
        p.lost_bytes,
        p.congestion_events,
        p.cwnd,
        p.rtt,
        stats.udp_tx.datagrams,
        stats.udp_tx.ios,
        stats.udp_rx.datagrams,
        stats.udp_rx.ios,
    );
}

/// The client connections' datagram counts over a handshake group (with
/// `QUIC_BENCH_STATS=1`): a client that answers the server's datagrams
/// one at a time sends more acknowledgements, and keeps probing the path
/// MTU until the server's close arrives.
struct HandshakeStats {
    conns: AtomicU64,
    tx: AtomicU64,
    rx: AtomicU64,
    probes: AtomicU64,
}

static HANDSHAKE_STATS: HandshakeStats = HandshakeStats {
    conns: AtomicU64::new(0),
    tx: AtomicU64::new(0),
    rx: AtomicU64::new(0),
    probes: AtomicU64::new(0),
};

impl HandshakeStats {
    fn add(&self, stats: &quinn::ConnectionStats) {
        let add = |c: &AtomicU64, v: u64| c.fetch_add(v, Ordering::Relaxed);
        add(&self.conns, 1);
        add(&self.tx, stats.udp_tx.datagrams);
        add(&self.rx, stats.udp_rx.datagrams);
        add(&self.probes, stats.path.sent_plpmtud_probes);
    }

    /// Prints the counts per connection since the last report.
    fn report(&self, variant: &str) {
        let take = |c: &AtomicU64| c.swap(0, Ordering::Relaxed) as f64;
        let n = take(&self.conns);
        let (tx, rx, probes) = (take(&self.tx), take(&self.rx), take(&self.probes));
        if n > 0.0 {
            eprintln!(
                "quic_handshakes/{variant}: per connection, the client sent {:.2} datagrams \
                 ({:.2} of them path MTU probes) and received {:.2}",
                tx / n,
                probes / n,
                rx / n,
            );
        }
    }
}

/// Whether `QUIC_BENCH_STATS` is set (read once).
fn stats_enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("QUIC_BENCH_STATS").is_some())
}

// ===== groups =====

fn bulk_1conn(c: &mut Criterion) {
    let tls = Tls::new();
    let data = payload(BULK_1CONN);
    // The answer every iteration must get (summed once, outside the
    // timed loop: 16 MiB summed on the bench thread would add a serial
    // stretch to every variant's iteration).
    let want = byte_sum(&data);
    let mut group = cpu::Group::new(c, "quic_bulk_1conn");
    group.throughput(Throughput::Bytes(BULK_1CONN as u64));
    group.inner().sample_size(10);
    {
        let side = QuinnSide::new(&tls, Serve::Sum);
        let conns = vec![side.connect()];
        group.bench("quinn_tokio", || black_box(side.bulk(&conns, &data, want)));
        report_stats("quic_bulk_1conn", "quinn_tokio", conns[0].stats());
    }
    for (name, backend) in SPARGIO {
        let side = SpargioSide::new(&tls, Serve::Sum, backend);
        let conns = vec![side.connect()];
        group.bench(name, || black_box(side.bulk(&conns, &data, want)));
        report_stats("quic_bulk_1conn", name, conns[0].stats());
    }
    group.finish();
}

fn bulk_16conn(c: &mut Criterion) {
    let tls = Tls::new();
    let data = payload(BULK_PER_CONN);
    let want = byte_sum(&data);
    let mut group = cpu::Group::new(c, "quic_bulk_16conn");
    group.throughput(Throughput::Bytes((BULK_CONNS * BULK_PER_CONN) as u64));
    group.inner().sample_size(10);
    {
        let side = QuinnSide::new(&tls, Serve::Sum);
        let conns: Vec<_> = (0..BULK_CONNS).map(|_| side.connect()).collect();
        group.bench("quinn_tokio", || black_box(side.bulk(&conns, &data, want)));
        report_stats("quic_bulk_16conn", "quinn_tokio", conns[0].stats());
    }
    for (name, backend) in SPARGIO {
        let side = SpargioSide::new(&tls, Serve::Sum, backend);
        let conns: Vec<_> = (0..BULK_CONNS).map(|_| side.connect()).collect();
        group.bench(name, || black_box(side.bulk(&conns, &data, want)));
        report_stats("quic_bulk_16conn", name, conns[0].stats());
    }
    group.finish();
}

fn handshakes(c: &mut Criterion) {
    let tls = Tls::new();
    let mut group = cpu::Group::new(c, "quic_handshakes");
    group.throughput(Throughput::Elements(HANDSHAKES as u64));
    group.inner().sample_size(10);
    {
        let side = QuinnSide::new(&tls, Serve::Close);
        group.bench("quinn_tokio", || {
            let done = side.handshakes();
            assert_eq!(done, HANDSHAKES);
            black_box(done)
        });
        HANDSHAKE_STATS.report("quinn_tokio");
    }
    for (name, backend) in SPARGIO {
        let side = SpargioSide::new(&tls, Serve::Close, backend);
        group.bench(name, || {
            let done = side.handshakes();
            assert_eq!(done, HANDSHAKES);
            black_box(done)
        });
        HANDSHAKE_STATS.report(name);
    }
    group.finish();
}

fn rtt(c: &mut Criterion) {
    let tls = Tls::new();
    let mut group = cpu::Group::new(c, "quic_rtt");
    group.throughput(Throughput::Elements(RTT_ROUNDS as u64));
    group.inner().sample_size(10);
    {
        let side = QuinnSide::new(&tls, Serve::Echo);
        let conn = side.connect();
        let mut stream = Some(side.rtt_stream(&conn));
        group.bench("quinn_tokio", || black_box(side.rtt(&mut stream)));
        report_stats("quic_rtt", "quinn_tokio", conn.stats());
    }
    for (name, backend) in SPARGIO {
        let side = SpargioSide::new(&tls, Serve::Echo, backend);
        let conn = side.connect();
        let mut stream = Some(side.rtt_stream(&conn));
        group.bench(name, || black_box(side.rtt(&mut stream)));
        report_stats("quic_rtt", name, conn.stats());
    }
    group.finish();
}

criterion_group!(benches, bulk_1conn, bulk_16conn, handshakes, rtt);
criterion_main!(benches);
