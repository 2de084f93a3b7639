//! Latency mode (issue 42): 512 sequential 256 B TCP echoes over loopback,
//! spargio's default and `busy_poll(true)` runtimes beside tokio.
//!
//! The issue measures this against the reference implementation (the
//! published `spargio` 0.5.x, whose shards busy-poll). That crate is not
//! a dependency here (the product must not depend on it, not even a
//! bench): `6822c2a` had it as a renamed dev-dependency with a
//! `reference_busy` variant, and its figures are in `bench/README.md`;
//! check that commit out to measure it again.
//!
//! One iteration = 512 echoes of 256 B on one connection, one in flight:
//! the client sends message `i` (256 B of a fixed pseudo-random pattern,
//! different for every `i`), reads exactly 256 B back, and compares every
//! byte with what it sent before it sends message `i + 1`. The echo server
//! reads up to 64 KiB and writes back what it read. Runtimes, listeners,
//! the connection and the echo server task are set up once per variant,
//! outside the measurement, and torn down (runtime dropped, shards joined)
//! before the next variant starts, so a busy-polling runtime never shares
//! the CPUs with the variant being measured. Every iteration starts on the
//! benchmark thread, which spawns the client loop on the runtime and waits
//! for it (one hand-off and one wake-up per 512 echoes, the same on every
//! side). `TCP_NODELAY` on every socket.
//!
//! Variants, 2 worker threads each:
//! * `spargio_default`: this workspace's runtime,
//!   `Runtime::builder().shards(2)` (an idle shard spins briefly, then
//!   parks in the kernel: zero CPU when idle).
//! * `spargio_busy_poll`: the same with `.busy_poll(true)` (the latency
//!   mode: an idle shard never parks).
//! * `tokio`: `new_multi_thread().worker_threads(2)`; client and server are
//!   plain tasks with `read` / `write_all` / `read_exact` on
//!   `tokio::net::TcpStream`.
//!
//! The spargio sides use the owned-buffer stream API: the client
//! `write_all_owned` then `read_exact_owned`, the server `recv_owned` into
//! a 64 KiB buffer, then `write_all_owned` of the received buffer.
//!
//! Placement, the point of the two groups:
//! * `latency_echo_cross_shard`: the client end of the connection (and the
//!   client loop) on shard 0, the server end (and the echo loop) on shard
//!   1 (`StreamSessionPolicy::Fixed` on connect and accept, loops pinned
//!   with `spawn_on_session`). So
//!   every echo crosses threads twice: the request wakes shard 1, the reply
//!   wakes shard 0. That is where a runtime whose idle shard parks pays a
//!   thread wake-up per hop and a busy-polling one does not, so it is the
//!   group the target is about. tokio cannot pin: its scheduler
//!   places both tasks itself (a task woken by I/O usually runs where the
//!   I/O driver polled it), so its row is "wherever tokio puts them".
//! * `latency_echo_same_shard`: both ends and both loops on shard 0; the
//!   other shard has nothing to do (it idles: parked, or spinning for the
//!   busy variants). An echo then never crosses threads: this measures each
//!   runtime's own submit/complete/poll path without any wake-up. No tokio
//!   row (it has no way to put both tasks on one worker of a multi-thread
//!   runtime).
//!
//! CPU: like the other benches, each variant records the process's CPU
//! time per iteration (`common/cpu.rs`, into `cpu.json`), since busy
//! polling spends cores that the wall time does not show.
//! `LATENCY_ECHO_STATS=1` prints, for this workspace's runtime, the parks
//! per shard per iteration (`busy_poll` should show none).

#[path = "common/cpu.rs"]
mod cpu;

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::OnceLock;

use criterion::{Criterion, Throughput};

/// Worker threads (shards) of every runtime.
const WORKERS: usize = 2;
/// Bytes per echo.
const MSG: usize = 256;
/// Sequential echoes per iteration.
const ECHOES: usize = 512;
/// Read buffer of the echo servers.
const ECHO_BUF: usize = 64 * 1024;
/// Bytes checked per iteration.
const CHECKED: u64 = (MSG * ECHOES) as u64;

/// The bytes of every message: `ECHOES * MSG` pseudo-random bytes
/// (xorshift), message `i` at `i * MSG`.
fn pattern() -> &'static [u8] {
    static PATTERN: OnceLock<Vec<u8>> = OnceLock::new();
    PATTERN.get_or_init(|| {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        (0..ECHOES * MSG)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect()
    })
}

/// Message `i` of an iteration.
fn message(i: usize) -> &'static [u8] {
    &pattern()[i * MSG..(i + 1) * MSG]
}

/// Checks echo `i` byte for byte; returns the bytes checked.
fn check(i: usize, got: &[u8]) -> u64 {
    assert!(got == message(i), "echo {i} came back wrong");
    got.len() as u64
}

fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

/// Shards of the two ends of the connection.
#[derive(Clone, Copy)]
struct Placement {
    client: usize,
    server: usize,
}

const CROSS: Placement = Placement {
    client: 0,
    server: 1,
};
const SAME: Placement = Placement {
    client: 0,
    server: 0,
};

// --------------------------------------------- this workspace's spargio

mod ours {
    use super::*;
    use spargio::net::{StreamSessionPolicy, TcpListener, TcpStream};

    async fn echo_server(stream: TcpStream) {
        let mut buf = Vec::with_capacity(ECHO_BUF);
        loop {
            buf.clear();
            let (n, got) = match stream.recv_owned(buf).await {
                Ok(r) => r,
                Err(_) => return,
            };
            if n == 0 {
                return;
            }
            buf = match stream.write_all_owned(got).await {
                Ok(b) => b,
                Err(_) => return,
            };
        }
    }

    struct Client {
        stream: TcpStream,
        back: Box<[u8]>,
    }

    async fn echoes(mut c: Client) -> (Client, u64) {
        let mut checked = 0;
        for i in 0..ECHOES {
            c.stream
                .write_all_owned(message(i))
                .await
                .expect("spargio send");
            c.back = c
                .stream
                .read_exact_owned(c.back)
                .await
                .expect("spargio recv");
            checked += check(i, &c.back);
        }
        (c, checked)
    }

    pub(super) struct Side {
        client: Option<Client>,
        handle: spargio::RuntimeHandle,
        iterations: u64,
        /// Last: the connection closes before the shards are joined.
        _rt: spargio::Runtime,
    }

    impl Side {
        pub(super) fn new(busy_poll: bool, placement: Placement) -> Side {
            let mut builder = spargio::Runtime::builder().shards(WORKERS);
            if busy_poll {
                builder = builder.busy_poll(true);
            }
            let rt = builder.build().expect("spargio runtime");
            let handle = rt.handle();
            let h = handle.clone();
            let setup = handle
                .spawn_stealable(async move {
                    let listener = TcpListener::bind_socket_addr(&h, loopback())?;
                    let addr = listener.local_addr()?;
                    let stream = TcpStream::connect_socket_addr_with_session_policy(
                        &h,
                        addr,
                        StreamSessionPolicy::Fixed(placement.client),
                    )
                    .await?;
                    let (server, _) = listener
                        .accept_with_session_policy(StreamSessionPolicy::Fixed(placement.server))
                        .await?;
                    stream.set_nodelay(true)?;
                    server.set_nodelay(true)?;
                    server
                        .spawn_on_session(&h, echo_server(server.clone()))
                        .expect("spawn echo server");
                    std::io::Result::Ok(stream)
                })
                .expect("spawn setup");
            let stream = spargio::block_on(setup)
                .expect("setup task")
                .expect("spargio connection");
            assert_eq!(stream.session_shard(), placement.client);
            Side {
                client: Some(Client {
                    stream,
                    back: vec![0u8; MSG].into_boxed_slice(),
                }),
                handle,
                iterations: 0,
                _rt: rt,
            }
        }

        pub(super) fn run(&mut self) -> u64 {
            let client = self.client.take().expect("client home");
            let task = client
                .stream
                .clone()
                .spawn_on_session(&self.handle, echoes(client))
                .expect("spawn client");
            let (client, checked) = spargio::block_on(task).expect("client task");
            self.client = Some(client);
            self.iterations += 1;
            checked
        }

        /// Parks of each shard so far.
        pub(super) fn parks(&self) -> Vec<u64> {
            self.handle
                .stats_snapshot()
                .shards
                .iter()
                .map(|s| s.counters.parks)
                .collect()
        }

        pub(super) fn iterations(&self) -> u64 {
            self.iterations
        }
    }
}

// ------------------------------------------------------------------ tokio

mod tokio_side {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    async fn echo_server(mut stream: TcpStream) {
        let mut buf = vec![0u8; ECHO_BUF];
        loop {
            let n = match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if stream.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    }

    struct Client {
        stream: TcpStream,
        back: [u8; MSG],
    }

    async fn echoes(mut c: Client) -> (Client, u64) {
        let mut checked = 0;
        for i in 0..ECHOES {
            c.stream.write_all(message(i)).await.expect("tokio send");
            c.stream.read_exact(&mut c.back).await.expect("tokio recv");
            checked += check(i, &c.back);
        }
        (c, checked)
    }

    pub(super) struct Side {
        client: Option<Client>,
        rt: tokio::runtime::Runtime,
    }

    impl Side {
        pub(super) fn new() -> Side {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(WORKERS)
                .enable_all()
                .build()
                .expect("tokio multi-thread runtime");
            let setup = rt.spawn(async move {
                let listener = TcpListener::bind(loopback()).await?;
                let addr = listener.local_addr()?;
                let stream = TcpStream::connect(addr).await?;
                let (server, _) = listener.accept().await?;
                stream.set_nodelay(true)?;
                server.set_nodelay(true)?;
                tokio::spawn(echo_server(server));
                std::io::Result::Ok(stream)
            });
            let stream = rt
                .block_on(setup)
                .expect("setup task")
                .expect("tokio connection");
            Side {
                client: Some(Client {
                    stream,
                    back: [0u8; MSG],
                }),
                rt,
            }
        }

        pub(super) fn run(&mut self) -> u64 {
            let client = self.client.take().expect("client home");
            let task = self.rt.spawn(echoes(client));
            let (client, checked) = self.rt.block_on(task).expect("client task");
            self.client = Some(client);
            checked
        }
    }
}

// ------------------------------------------------------------- benchmarks

fn bench_ours(g: &mut cpu::Group, name: &str, busy_poll: bool, placement: Placement, stats: bool) {
    let mut side = ours::Side::new(busy_poll, placement);
    let before = side.parks();
    g.bench(name, || assert_eq!(black_box(side.run()), CHECKED));
    if stats && side.iterations() > 0 {
        let per: Vec<String> = side
            .parks()
            .iter()
            .zip(&before)
            .map(|(a, b)| format!("{:.2}", (a - b) as f64 / side.iterations() as f64))
            .collect();
        eprintln!(
            "{name}: {} iterations, parks per shard per iteration: [{}]",
            side.iterations(),
            per.join(", ")
        );
    }
}

fn run_group(c: &mut Criterion, name: &str, placement: Placement, with_tokio: bool, stats: bool) {
    let mut g = cpu::Group::new(c, name);
    g.throughput(Throughput::Elements(ECHOES as u64));
    bench_ours(&mut g, "spargio_default", false, placement, stats);
    bench_ours(&mut g, "spargio_busy_poll", true, placement, stats);
    if with_tokio {
        let mut side = tokio_side::Side::new();
        g.bench("tokio", || assert_eq!(black_box(side.run()), CHECKED));
    }
    g.finish();
}

fn main() {
    let stats = std::env::var_os("LATENCY_ECHO_STATS").is_some_and(|v| v == "1");
    let mut c = Criterion::default().configure_from_args();
    run_group(&mut c, "latency_echo_cross_shard", CROSS, true, stats);
    run_group(&mut c, "latency_echo_same_shard", SAME, false, stats);
    c.final_summary();
}
