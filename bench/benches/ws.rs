//! WebSocket echo: `spargio-ws` against `tokio-tungstenite`.
//!
//! Client and server in one process over loopback, [`CONNECTIONS`]
//! connections opened once. Each iteration sends [`MESSAGES`] binary
//! messages, spread over the connections (one client task each), and
//! waits for every echo before sending the next message on that
//! connection: a request/response exchange, so this measures what each
//! stack costs per message (framing, masking, the poll adaptor, wakeups),
//! not how much a socket buffer can hold.
//!
//! Sizes: 256 B (cost per message dominates) and 64 KiB (copies and
//! masking dominate).
//!
//! Variants: `spargio` (2 shards; `spargio_ws::connect`/`accept` with
//! `WsStreamExt::send_message`/`recv`, async-tungstenite over
//! `spargio::io::Compat<TcpStream>`; connections spread over the shards
//! with round-robin sessions, each connection's loop, client and server,
//! on its session shard, as the guide advises for long-lived streams) and `tokio_mt_2` (a multi-thread
//! runtime with 2 workers; `tokio_tungstenite::client_async`/
//! `accept_async` over `tokio::net::TcpStream` with `TCP_NODELAY`, as
//! spargio-ws sets by default, and `SinkExt::send`/`StreamExt::next`).
//! Both run tungstenite 0.30.

#[path = "common/cpu.rs"]
mod cpu;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use futures_util::{SinkExt, StreamExt};
use spargio::net::{StreamSessionPolicy, TcpListener};
use spargio::{Runtime, RuntimeHandle};
use spargio_ws::{Message, WsOptions, WsStream, WsStreamExt};

/// Messages per iteration (all connections together).
const MESSAGES: usize = 1_000;
/// Connections, each with its own client task.
const CONNECTIONS: usize = 4;
const SIZES: &[(usize, &str)] = &[(256, "256B"), (64 << 10, "64KiB")];

// ---------------------------------------------------------------- spargio

struct SpargioSide {
    _rt: Runtime,
    handle: RuntimeHandle,
    clients: Vec<WsStream>,
}

impl SpargioSide {
    fn new() -> SpargioSide {
        let rt = Runtime::builder()
            .shards(2)
            .build()
            .expect("spargio runtime");
        let handle = rt.handle();
        let h = handle.clone();
        let setup = handle
            .spawn_stealable(async move {
                let listener = TcpListener::bind(&h, "127.0.0.1:0").await.expect("bind");
                let url = format!("ws://{}/", listener.local_addr().expect("addr"));
                let h2 = h.clone();
                h.spawn_stealable(async move {
                    loop {
                        let Ok((tcp, _)) = listener.accept_round_robin().await else {
                            return;
                        };
                        tcp.clone()
                            .spawn_on_session(&h2, async move {
                                let mut ws = spargio_ws::accept(tcp).await.expect("accept");
                                while let Ok(Some(msg)) = ws.recv().await {
                                    if msg.is_binary() && ws.send_message(msg).await.is_err() {
                                        break;
                                    }
                                }
                            })
                            .expect("spawn");
                    }
                })
                .expect("spawn");
                let options =
                    WsOptions::default().with_session_policy(StreamSessionPolicy::RoundRobin);
                let mut clients = Vec::new();
                for _ in 0..CONNECTIONS {
                    let (ws, _) = spargio_ws::connect_with_options(&h, url.as_str(), options)
                        .await
                        .expect("connect");
                    clients.push(ws);
                }
                clients
            })
            .expect("spawn");
        let clients = spargio::block_on(setup).expect("setup");
        SpargioSide {
            _rt: rt,
            handle,
            clients,
        }
    }

    /// One iteration; returns the bytes echoed.
    fn echo(&mut self, payload: &Message) -> usize {
        let clients = std::mem::take(&mut self.clients);
        let h = self.handle.clone();
        let payload = payload.clone();
        let task = self
            .handle
            .spawn_stealable(async move {
                let tasks: Vec<_> = clients
                    .into_iter()
                    .map(|mut ws| {
                        let payload = payload.clone();
                        let tcp = ws
                            .get_ref()
                            .tcp()
                            .expect("a client stream has its TCP stream")
                            .clone();
                        tcp.spawn_on_session(&h, async move {
                            let mut bytes = 0;
                            for _ in 0..MESSAGES / CONNECTIONS {
                                ws.send_message(payload.clone()).await.expect("send");
                                let back = ws.recv().await.expect("recv").expect("echo");
                                bytes += back.len();
                            }
                            (ws, bytes)
                        })
                        .expect("spawn")
                    })
                    .collect();
                let mut out = (Vec::new(), 0);
                for task in tasks {
                    let (ws, bytes) = task.await.expect("client task");
                    out.0.push(ws);
                    out.1 += bytes;
                }
                out
            })
            .expect("spawn");
        let (clients, bytes) = spargio::block_on(task).expect("driver task");
        self.clients = clients;
        bytes
    }
}

// ------------------------------------------------------------------ tokio

type TokioWs = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

struct TokioSide {
    rt: tokio::runtime::Runtime,
    clients: Vec<TokioWs>,
}

impl TokioSide {
    fn new() -> TokioSide {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("tokio multi-thread runtime");
        let clients = rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr");
            tokio::spawn(async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    tokio::spawn(async move {
                        tcp.set_nodelay(true).expect("nodelay");
                        let mut ws = tokio_tungstenite::accept_async(tcp).await.expect("accept");
                        while let Some(Ok(msg)) = ws.next().await {
                            if msg.is_binary() && ws.send(msg).await.is_err() {
                                break;
                            }
                        }
                    });
                }
            });
            let mut clients = Vec::new();
            for _ in 0..CONNECTIONS {
                let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
                tcp.set_nodelay(true).expect("nodelay");
                let (ws, _) = tokio_tungstenite::client_async(format!("ws://{addr}/"), tcp)
                    .await
                    .expect("handshake");
                clients.push(ws);
            }
            clients
        });
        TokioSide { rt, clients }
    }

    fn echo(&mut self, payload: &Message) -> usize {
        let clients = std::mem::take(&mut self.clients);
        let payload = payload.clone();
        let (clients, bytes) = self.rt.block_on(async move {
            tokio::spawn(async move {
                let tasks: Vec<_> = clients
                    .into_iter()
                    .map(|mut ws| {
                        let payload = payload.clone();
                        tokio::spawn(async move {
                            let mut bytes = 0;
                            for _ in 0..MESSAGES / CONNECTIONS {
                                ws.send(payload.clone()).await.expect("send");
                                let back = ws.next().await.expect("echo").expect("recv");
                                bytes += back.len();
                            }
                            (ws, bytes)
                        })
                    })
                    .collect();
                let mut out = (Vec::new(), 0);
                for task in tasks {
                    let (ws, bytes) = task.await.expect("client task");
                    out.0.push(ws);
                    out.1 += bytes;
                }
                out
            })
            .await
            .expect("driver task")
        });
        self.clients = clients;
        bytes
    }
}

// ------------------------------------------------------------- benchmarks

fn ws_echo(c: &mut Criterion) {
    let mut group = cpu::Group::new(c, "ws_echo");
    group.throughput(Throughput::Elements(MESSAGES as u64));
    group.inner().sample_size(10);
    for &(size, label) in SIZES {
        let payload = Message::binary(vec![0x5a; size]);
        let expected = size * (MESSAGES / CONNECTIONS) * CONNECTIONS;
        {
            let mut side = SpargioSide::new();
            group.bench(format!("spargio_{label}"), || {
                let bytes = side.echo(&payload);
                assert_eq!(bytes, expected);
                black_box(bytes)
            });
        }
        {
            let mut side = TokioSide::new();
            group.bench(format!("tokio_mt_2_{label}"), || {
                let bytes = side.echo(&payload);
                assert_eq!(bytes, expected);
                black_box(bytes)
            });
        }
    }
    group.finish();
}

criterion_group!(benches, ws_echo);
criterion_main!(benches);
