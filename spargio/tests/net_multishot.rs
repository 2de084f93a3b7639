//! Multishot operations on sockets: the multishot-accept `incoming` streams
//! and `recv_multishot_segments` on a provided-buffer ring.
//!
//! The tests in this file count the process's open fds, so they run one at
//! a time (`SERIAL`).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::Mutex;

use spargio::net::{StreamSessionPolicy, TcpListener, UnixListener, UnixStream};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Polls (with short sleeps; bounded by the test's hang bound) until the
/// process has `n` open fds.
async fn wait_for_fds(h: &spargio::RuntimeHandle, n: usize) {
    while open_fds() != n {
        h.sleep(std::time::Duration::from_millis(2)).await;
    }
}

#[test]
fn incoming_accepts_every_connection_on_one_submission() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let listener = TcpListener::bind_socket_addr(&h, localhost()).unwrap();
            let addr = listener.local_addr().unwrap();
            let before = h.stats_snapshot().totals.native_ops_submitted;
            let mut incoming = listener.incoming().unwrap();
            let mut clients = Vec::new();
            let mut servers = Vec::new();
            for i in 0..16u8 {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                c.write_all(&[i]).unwrap();
                clients.push(c);
                let s = incoming.accept().await.unwrap();
                assert_eq!(s.peer_addr().unwrap(), clients[i as usize].local_addr().unwrap());
                servers.push(s);
            }
            let after = h.stats_snapshot().totals.native_ops_submitted;
            assert_eq!(after - before, 1, "one multishot accept for 16 connections");
            for (i, s) in servers.iter().enumerate() {
                let mut b = [0u8; 1];
                s.read_exact(&mut b).await.unwrap();
                assert_eq!(b[0], i as u8, "each stream is its own connection");
                s.write_all(b"ok").await.unwrap();
            }
            for c in &mut clients {
                let mut b = [0u8; 2];
                c.read_exact(&mut b).unwrap();
                assert_eq!(&b, b"ok");
            }
        })
    });
}

#[test]
fn incoming_is_a_stream_usable_from_another_shard() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            use futures_util::StreamExt;
            let listener = TcpListener::bind_socket_addr(&h, localhost()).unwrap();
            let addr = listener.local_addr().unwrap();
            let incoming = listener.incoming_round_robin().unwrap();
            // Taken by a task pinned elsewhere: completions cross shards.
            let taker = h
                .spawn_pinned(1, async move {
                    let streams: Vec<_> = incoming.take(4).collect().await;
                    streams
                        .into_iter()
                        .map(|s| s.unwrap().session_shard())
                        .collect::<Vec<_>>()
                })
                .unwrap();
            let _clients: Vec<_> = (0..4)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();
            let mut sessions = taker.await.unwrap();
            sessions.sort_unstable();
            assert_eq!(sessions, vec![0, 0, 1, 1], "round-robin sessions");
        })
    });
}

#[test]
fn dropping_incoming_closes_connections_accepted_but_not_taken() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let listener = TcpListener::bind_socket_addr(&h, localhost()).unwrap();
            let addr = listener.local_addr().unwrap();
            let mut incoming = listener.incoming().unwrap();
            // One taken, so the multishot accept is known to be armed.
            let first = std::net::TcpStream::connect(addr).unwrap();
            let taken = incoming.accept().await.unwrap();
            let base = open_fds();
            let mut clients: Vec<_> = (0..5)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();
            // 5 client fds plus 5 accepted by the kernel, queued unread.
            wait_for_fds(&h, base + 10).await;
            drop(incoming);
            // The queued ones are closed (client fds stay).
            wait_for_fds(&h, base + 5).await;
            for c in &mut clients {
                let mut b = [0u8; 1];
                match c.read(&mut b) {
                    Ok(0) => {}
                    Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
                    other => panic!("expected EOF or reset, got {other:?}"),
                }
            }
            // The stream taken before the drop is unaffected.
            drop(first);
            assert!(taken.recv(1).await.unwrap().is_empty());
            // And the listener still accepts.
            let _again = std::net::TcpStream::connect(addr).unwrap();
            listener.accept().await.unwrap();
        })
    });
}

#[test]
fn incoming_with_an_invalid_fixed_shard_is_refused() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let listener = TcpListener::bind_socket_addr(&h, localhost()).unwrap();
            let err = listener
                .incoming_with_session_policy(StreamSessionPolicy::Fixed(9))
                .unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
        })
    });
}

#[test]
fn unix_incoming_accepts_and_round_trips() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let dir = std::env::temp_dir().join(format!("spargio-inc-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let path = dir.join("sock");
            let listener = UnixListener::bind(&h, &path).unwrap();
            let mut incoming = listener
                .incoming_with_session_policy(StreamSessionPolicy::Fixed(1))
                .unwrap();
            for i in 0..3u8 {
                let client = UnixStream::connect(&h, &path).await.unwrap();
                let server = incoming.accept().await.unwrap();
                assert_eq!(server.session_shard(), 1);
                client.write_all(&[i, i]).await.unwrap();
                let mut b = [0u8; 2];
                server.read_exact(&mut b).await.unwrap();
                assert_eq!(b, [i, i]);
            }
            std::fs::remove_dir_all(&dir).unwrap();
        })
    });
}
