//! An echo server against Node's `tls.connect`.
//!
//! The server reads into a 64 KiB buffer and `write_all`s what it read
//! back, until end of stream. Without `flush`, it is the shape of a
//! user's server that hung (spargio sent the handshake and the first
//! 16 KiB record of a 64 KiB echo, then nothing: `io::Compat` refused a
//! write with `Pending` while its own queued send waited for the loop
//! turn, futures-rustls kept the records it could not pass down, and the
//! server went on to read). Each test runs twice: as is, and with every
//! shard's CPU counted as contended (a fault hook), where Compat queues a
//! connection's later writes on the ring, batched with the loop turn's
//! other sends: the path that hung.
//!
//! Megabytes are echoed with a `flush` after each `write_all`: a TLS
//! stream buffers like a `BufWriter` (futures-rustls and tokio-rustls
//! alike), so an echo that never flushes may keep the records of its
//! last write when the socket is really full, on any runtime (seen here
//! once in 400 rounds of 4 MiB on epoll: 48 KiB left in rustls).
//!
//! Node connects once per round, writes the payload in one `write`,
//! reads until the whole echo is back (checking every byte) and ends the
//! connection. A stalled round fails with the bytes echoed so far; no
//! test asserts timing.

mod common;

use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures_util::{AsyncReadExt as _, AsyncWriteExt as _};
use spargio::__private::faults;
use spargio::net::TcpListener;
use spargio::Runtime;
use spargio_test_peers::{require_peer, Peer};
use spargio_tls::TlsAcceptor;

/// A round that moves no byte for this long has stalled.
const ROUND_LIMIT: Duration = Duration::from_secs(20);

/// The fault hook is process-wide: this binary's tests run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    faults::reset();
    guard
}

/// Contention forced until dropped.
struct Contended;

impl Contended {
    fn force() -> Contended {
        faults::assume_contended(true);
        Contended
    }
}

impl Drop for Contended {
    fn drop(&mut self) {
        faults::reset();
    }
}

/// Serves the echo on a default runtime until dropped; `flush`: after
/// each `write_all`.
struct EchoServer {
    rt: Option<Runtime>,
    port: u16,
}

impl EchoServer {
    fn start(acceptor: TlsAcceptor, flush: bool) -> EchoServer {
        let rt = Runtime::builder().build().expect("runtime");
        let h = rt.handle();
        let listener = spargio::block_on(
            h.spawn_stealable({
                let h = h.clone();
                async move { TcpListener::bind(&h, "127.0.0.1:0").await }
            })
            .unwrap(),
        )
        .unwrap()
        .unwrap();
        let port = listener.local_addr().unwrap().port();
        let spawner = h.clone();
        h.spawn_stealable(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let acceptor = acceptor.clone();
                let _ = spawner.spawn_stealable(async move {
                    // Not part of the shape: without it each round's
                    // last small record waits out Node's delayed ACK
                    // (Nagle), 40 ms a round.
                    tcp.set_nodelay(true).unwrap();
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => {
                                if tls.write_all(&buf[..n]).await.is_err()
                                    || (flush && tls.flush().await.is_err())
                                {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        })
        .unwrap();
        EchoServer { rt: Some(rt), port }
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        drop(self.rt.take());
    }
}

/// How a run is set up: whether the server flushes, whether contention
/// is forced (for the failure message).
#[derive(Clone, Copy)]
struct Setup {
    flush: bool,
    forced: bool,
}

/// Runs Node's echo client for `rounds` connections of `size` bytes each
/// against a fresh server; panics with Node's account of a stall.
fn node_echo(size: usize, rounds: usize, setup: Setup) {
    let pki = common::pki("node-echo", false);
    let acceptor = TlsAcceptor::from_pem(pki.leaf_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap();
    let server = EchoServer::start(acceptor, setup.flush);
    let script = common::crate_path("tests/js/echo_client.js");
    let mut child = Command::new("node")
        .arg(script)
        .arg(server.port.to_string())
        .arg(&pki.ca_file)
        .arg(size.to_string())
        .arg(rounds.to_string())
        .arg(ROUND_LIMIT.as_millis().to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    // Node bounds each round; this bounds Node itself (a stuck process,
    // not a stalled round), with room for every round to be slow.
    let deadline = Instant::now() + ROUND_LIMIT * 2 + Duration::from_secs(rounds as u64);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    drop(server);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let want = format!("ok {rounds} {}", size * rounds);
    assert!(
        stdout.contains(&want),
        "{size} bytes x {rounds} rounds (flush: {}, contention forced: {}): node said {stdout:?} \
         (wanted {want:?}), stderr {:?}",
        setup.flush,
        setup.forced,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Both runs of one size: as is, then with contention forced.
fn both(size: usize, rounds: usize, flush: bool) {
    let _serial = serial();
    node_echo(
        size,
        rounds,
        Setup {
            flush,
            forced: false,
        },
    );
    let _contended = Contended::force();
    node_echo(
        size,
        rounds,
        Setup {
            flush,
            forced: true,
        },
    );
}

#[test]
fn echo_of_64_kib_without_flush() {
    require_peer!(Peer::Node);
    both(64 * 1024, 200, false);
}

#[test]
fn echo_of_4_mib() {
    require_peer!(Peer::Node);
    both(4 << 20, 20, true);
}

/// The full count of big rounds (1.6 GB through TLS each way).
#[test]
#[ignore]
fn echo_of_4_mib_200_rounds() {
    require_peer!(Peer::Node);
    both(4 << 20, 200, true);
}
