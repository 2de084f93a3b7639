//! TLS on spargio (spargio-tls) against TLS on tokio (tokio-rustls): both
//! rustls 0.23 with the ring provider and the same configs; 2 shards
//! against a 2-worker multi-thread runtime; client and server in the same
//! process, so both sides' CPU is counted (`cpu::Group`).
//!
//! - `tls_handshake_13_p256`: 32 concurrent full TLS 1.3 handshakes per
//!   iteration (P-256 certificate, client resumption disabled so every
//!   handshake is full); each connection ends with the server writing one
//!   byte the client reads, so both ends finished their handshake.
//! - `tls_echo_16k_records`: 4 MiB per iteration over one connection set
//!   up once: the client writes 16 KiB (one full TLS record) and reads
//!   its echo back, 256 times.
//!
//! Writers flush after each record: a TLS stream may keep encrypted bytes
//! in rustls's buffer when the socket is full until the next write or
//! flush (tokio-rustls and futures-rustls alike), and the echo waits on
//! them.
//!
//! Each side is written the way its runtime is used: spargio with owned
//! buffers (`AsyncRead::read` into a reused boxed slice, `write_all` of a
//! `Slice`), tokio with `AsyncReadExt`/`AsyncWriteExt` on borrowed slices.

#[path = "common/cpu.rs"]
mod cpu;

use std::hint::black_box;
use std::net::SocketAddr;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spargio::buf::IoBuf;
use spargio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use spargio::{Runtime, RuntimeHandle};
use spargio_tls::rustls::client::Resumption;
use spargio_tls::rustls::{ClientConfig, RootCertStore, ServerConfig};

const HANDSHAKES: usize = 32;
const RECORD: usize = 16 * 1024;
const ECHO_BYTES: usize = 4 * 1024 * 1024;

/// Server and client configs shared by both sides: a self-signed P-256
/// certificate for `localhost`; TLS 1.3 (rustls's preference); no
/// resumption.
fn configs() -> (Arc<ServerConfig>, Arc<ClientConfig>) {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let acceptor = spargio_tls::TlsAcceptor::from_pem(
        cert.cert.pem().as_bytes(),
        cert.signing_key.serialize_pem().as_bytes(),
    )
    .unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(cert.cert.der().clone()).unwrap();
    let provider = Arc::new(spargio_tls::rustls::crypto::ring::default_provider());
    let mut client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&spargio_tls::rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.resumption = Resumption::disabled();
    (acceptor.config().clone(), Arc::new(client))
}

// ===== spargio =====

struct SpargioSide {
    _rt: Runtime,
    handle: RuntimeHandle,
    connector: spargio_tls::TlsConnector,
    handshake_addr: SocketAddr,
    echo_addr: SocketAddr,
}

impl SpargioSide {
    fn new(server: Arc<ServerConfig>, client: Arc<ClientConfig>) -> SpargioSide {
        let rt = Runtime::builder()
            .shards(2)
            .build()
            .expect("spargio runtime");
        let handle = rt.handle();
        let acceptor = spargio_tls::TlsAcceptor::new(server);
        let bind = |h: RuntimeHandle| async move {
            spargio::net::TcpListener::bind(&h, "127.0.0.1:0")
                .await
                .unwrap()
        };
        let hs = spargio::block_on(handle.spawn_stealable(bind(handle.clone())).unwrap()).unwrap();
        let echo =
            spargio::block_on(handle.spawn_stealable(bind(handle.clone())).unwrap()).unwrap();
        let (handshake_addr, echo_addr) = (hs.local_addr().unwrap(), echo.local_addr().unwrap());

        // Handshake server: per connection, accept TLS, write one byte.
        let (h, a) = (handle.clone(), acceptor.clone());
        handle
            .spawn_stealable(async move {
                loop {
                    let (tcp, _) = hs.accept_round_robin().await.unwrap();
                    let _ = tcp.set_nodelay(true);
                    let a = a.clone();
                    tcp.clone()
                        .spawn_on_session(&h, async move {
                            let mut tls = a.accept(tcp).await.unwrap();
                            tls.write_all(&b"!"[..]).await.0.unwrap();
                            let _ = tls.shutdown().await;
                        })
                        .unwrap();
                }
            })
            .unwrap();

        // Echo server: owned-buffer reads into one reused record buffer.
        let h = handle.clone();
        handle
            .spawn_stealable(async move {
                loop {
                    let (tcp, _) = echo.accept().await.unwrap();
                    let _ = tcp.set_nodelay(true);
                    let acceptor = acceptor.clone();
                    tcp.clone()
                        .spawn_on_session(&h, async move {
                            let mut tls = acceptor.accept(tcp).await.unwrap();
                            let mut buf = vec![0u8; RECORD].into_boxed_slice();
                            loop {
                                let (res, b) = tls.read(buf).await;
                                let n = match res {
                                    Ok(0) | Err(_) => break,
                                    Ok(n) => n,
                                };
                                let (res, slice) = tls.write_all(b.slice(..n)).await;
                                buf = slice.into_inner();
                                if res.is_err() || tls.flush().await.is_err() {
                                    break;
                                }
                            }
                        })
                        .unwrap();
                }
            })
            .unwrap();

        SpargioSide {
            _rt: rt,
            handle,
            connector: spargio_tls::TlsConnector::new(client),
            handshake_addr,
            echo_addr,
        }
    }

    fn handshakes(&self) -> usize {
        let (h, c, addr) = (
            self.handle.clone(),
            self.connector.clone(),
            self.handshake_addr,
        );
        let task = self
            .handle
            .spawn_stealable(async move {
                let tasks: Vec<_> = (0..HANDSHAKES)
                    .map(|_| {
                        let (h2, c) = (h.clone(), c.clone());
                        h.spawn_stealable(async move {
                            let tcp =
                                spargio::net::TcpStream::connect_socket_addr_round_robin(&h2, addr)
                                    .await
                                    .unwrap();
                            let _ = tcp.set_nodelay(true);
                            let mut tls = c.connect_stream("localhost", tcp).await.unwrap();
                            let (res, byte) = tls.read(vec![0u8; 1]).await;
                            assert_eq!(res.unwrap(), 1);
                            byte[0] as usize
                        })
                        .unwrap()
                    })
                    .collect();
                let mut done = 0;
                for t in tasks {
                    done += usize::from(t.await.unwrap() == usize::from(b'!'));
                }
                done
            })
            .unwrap();
        spargio::block_on(task).unwrap()
    }

    fn echo_stream(&self) -> spargio_tls::ClientTlsStream {
        let (h, c, addr) = (self.handle.clone(), self.connector.clone(), self.echo_addr);
        let task = self
            .handle
            .spawn_stealable(async move {
                let tcp = spargio::net::TcpStream::connect_socket_addr(&h, addr)
                    .await
                    .unwrap();
                let _ = tcp.set_nodelay(true);
                c.connect_stream("localhost", tcp).await.unwrap()
            })
            .unwrap();
        spargio::block_on(task).unwrap()
    }

    /// Runs one echo iteration on `tls`, handing the stream back.
    fn echo(&self, mut tls: spargio_tls::ClientTlsStream) -> (usize, spargio_tls::ClientTlsStream) {
        let task = self
            .handle
            .spawn_stealable(async move {
                let mut out = vec![7u8; RECORD].into_boxed_slice();
                let mut back = vec![0u8; RECORD].into_boxed_slice();
                let mut total = 0;
                for _ in 0..ECHO_BYTES / RECORD {
                    let (res, o) = tls.write_all(out).await;
                    res.unwrap();
                    out = o;
                    tls.flush().await.unwrap();
                    let (res, b) = tls.read_exact(back).await;
                    res.unwrap();
                    back = b;
                    total += RECORD;
                }
                (total, tls)
            })
            .unwrap();
        spargio::block_on(task).unwrap()
    }
}

// ===== tokio =====

struct TokioSide {
    rt: tokio::runtime::Runtime,
    connector: tokio_rustls::TlsConnector,
    handshake_addr: SocketAddr,
    echo_addr: SocketAddr,
}

type TokioClient = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

impl TokioSide {
    fn new(server: Arc<ServerConfig>, client: Arc<ClientConfig>) -> TokioSide {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let acceptor = tokio_rustls::TlsAcceptor::from(server);
        let (hs, echo) = rt.block_on(async {
            (
                tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
                tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
            )
        });
        let (handshake_addr, echo_addr) = (hs.local_addr().unwrap(), echo.local_addr().unwrap());
        let a = acceptor.clone();
        rt.spawn(async move {
            loop {
                let (tcp, _) = hs.accept().await.unwrap();
                let _ = tcp.set_nodelay(true);
                let a = a.clone();
                tokio::spawn(async move {
                    let mut tls = a.accept(tcp).await.unwrap();
                    tls.write_all(b"!").await.unwrap();
                    let _ = tls.shutdown().await;
                });
            }
        });
        rt.spawn(async move {
            loop {
                let (tcp, _) = echo.accept().await.unwrap();
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let mut tls = acceptor.accept(tcp).await.unwrap();
                    let mut buf = vec![0u8; RECORD];
                    loop {
                        let n = match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if tls.write_all(&buf[..n]).await.is_err() || tls.flush().await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        TokioSide {
            rt,
            connector: tokio_rustls::TlsConnector::from(client),
            handshake_addr,
            echo_addr,
        }
    }

    fn handshakes(&self) -> usize {
        use tokio::io::AsyncReadExt as _;
        let (c, addr) = (self.connector.clone(), self.handshake_addr);
        self.rt.block_on(async move {
            tokio::spawn(async move {
                let tasks: Vec<_> = (0..HANDSHAKES)
                    .map(|_| {
                        let c = c.clone();
                        tokio::spawn(async move {
                            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                            let _ = tcp.set_nodelay(true);
                            let name = "localhost".try_into().unwrap();
                            let mut tls = c.connect(name, tcp).await.unwrap();
                            let mut byte = [0u8; 1];
                            tls.read_exact(&mut byte).await.unwrap();
                            byte[0] as usize
                        })
                    })
                    .collect();
                let mut done = 0;
                for t in tasks {
                    done += usize::from(t.await.unwrap() == usize::from(b'!'));
                }
                done
            })
            .await
            .unwrap()
        })
    }

    fn echo_stream(&self) -> TokioClient {
        let (c, addr) = (self.connector.clone(), self.echo_addr);
        self.rt.block_on(async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let _ = tcp.set_nodelay(true);
            c.connect("localhost".try_into().unwrap(), tcp)
                .await
                .unwrap()
        })
    }

    fn echo(&self, mut tls: TokioClient) -> (usize, TokioClient) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        self.rt.block_on(async move {
            tokio::spawn(async move {
                let out = vec![7u8; RECORD];
                let mut back = vec![0u8; RECORD];
                let mut total = 0;
                for _ in 0..ECHO_BYTES / RECORD {
                    tls.write_all(&out).await.unwrap();
                    tls.flush().await.unwrap();
                    tls.read_exact(&mut back).await.unwrap();
                    total += RECORD;
                }
                (total, tls)
            })
            .await
            .unwrap()
        })
    }
}

// ===== groups =====

fn tls_handshake(c: &mut Criterion) {
    let (server, client) = configs();
    let mut group = cpu::Group::new(c, "tls_handshake_13_p256");
    group.throughput(Throughput::Elements(HANDSHAKES as u64));
    group.inner().sample_size(20);
    {
        let side = SpargioSide::new(server.clone(), client.clone());
        group.bench("spargio_tls", || {
            let done = side.handshakes();
            assert_eq!(done, HANDSHAKES);
            black_box(done)
        });
    }
    {
        let side = TokioSide::new(server, client);
        group.bench("tokio_rustls_mt_2", || {
            let done = side.handshakes();
            assert_eq!(done, HANDSHAKES);
            black_box(done)
        });
    }
    group.finish();
}

fn tls_echo(c: &mut Criterion) {
    let (server, client) = configs();
    let mut group = cpu::Group::new(c, "tls_echo_16k_records");
    group.throughput(Throughput::Bytes(ECHO_BYTES as u64));
    group.inner().sample_size(20);
    {
        let side = SpargioSide::new(server.clone(), client.clone());
        let mut stream = Some(side.echo_stream());
        group.bench("spargio_tls", || {
            let (n, tls) = side.echo(stream.take().unwrap());
            stream = Some(tls);
            assert_eq!(n, ECHO_BYTES);
            black_box(n)
        });
    }
    {
        let side = TokioSide::new(server, client);
        let mut stream = Some(side.echo_stream());
        group.bench("tokio_rustls_mt_2", || {
            let (n, tls) = side.echo(stream.take().unwrap());
            stream = Some(tls);
            assert_eq!(n, ECHO_BYTES);
            black_box(n)
        });
    }
    group.finish();
}

criterion_group!(benches, tls_handshake, tls_echo);
criterion_main!(benches);
