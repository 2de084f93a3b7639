//! `spargio::net` TCP: round trips, session shards, and every error path.

mod common;

use std::io::ErrorKind;
use std::net::{Shutdown, SocketAddr};

use spargio::net::{StreamSessionPolicy, TcpListener, TcpStream};

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[test]
fn echo_round_trips_bytes_across_sessions() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let listener = TcpListener::bind_socket_addr(&h, localhost()).unwrap();
            let addr = listener.local_addr().unwrap();
            let h2 = h.clone();
            let server = h
                .spawn_stealable(async move {
                    for _ in 0..4 {
                        let (s, peer) = listener.accept_round_robin().await.unwrap();
                        assert!(peer.ip().is_loopback());
                        let conn = s.clone();
                        conn.spawn_on_session(&h2, async move {
                            assert_eq!(
                                spargio::ShardCtx::current().unwrap().shard_id(),
                                s.session_shard()
                            );
                            loop {
                                let (n, buf) =
                                    s.recv_owned(Vec::with_capacity(4096)).await.unwrap();
                                if n == 0 {
                                    break;
                                }
                                s.write_all_owned(buf).await.unwrap();
                            }
                        })
                        .unwrap();
                    }
                })
                .unwrap();
            let clients = TcpStream::connect_many_socket_addr_round_robin(&h, addr, 4)
                .await
                .unwrap();
            let sessions: std::collections::HashSet<_> =
                clients.iter().map(|c| c.session_shard()).collect();
            assert_eq!(sessions.len(), 2, "round-robin spreads over both shards");
            for (i, c) in clients.iter().enumerate() {
                c.set_nodelay(true).unwrap();
                assert!(c.nodelay().unwrap());
                let msg: Vec<u8> = (0..100_000u32)
                    .map(|x| (x as usize * (i + 1)) as u8)
                    .collect();
                // A clone sends while the original receives.
                let tx = c.clone();
                let m2 = msg.clone();
                let sender = h
                    .spawn_stealable(async move { tx.write_all(&m2).await.unwrap() })
                    .unwrap();
                let got = c.read_exact_owned(vec![0u8; msg.len()]).await.unwrap();
                sender.await.unwrap();
                assert_eq!(got, msg);
                assert_eq!(c.peer_addr().unwrap(), addr);
                c.shutdown(Shutdown::Write).await.unwrap();
            }
            server.await.unwrap();
        })
    });
}

#[test]
fn hostname_connect_and_fixed_session() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let listener = TcpListener::bind(&h, "localhost:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let accept = h
                .spawn_stealable(async move { listener.accept().await.unwrap().0 })
                .unwrap();
            let c = TcpStream::connect_with_session_policy(
                &h,
                ("localhost", port),
                StreamSessionPolicy::Fixed(1),
            )
            .await
            .unwrap();
            assert_eq!(c.session_shard(), 1);
            let s = accept.await.unwrap();
            c.send(b"hi").await.unwrap();
            assert_eq!(s.recv(16).await.unwrap(), b"hi");
            let bad = TcpStream::connect_socket_addr_with_session_policy(
                &h,
                s.local_addr().unwrap(),
                StreamSessionPolicy::Fixed(9),
            )
            .await
            .unwrap_err();
            assert_eq!(bad.kind(), ErrorKind::InvalidInput);
        })
    });
}

#[test]
fn error_paths_have_the_right_kind() {
    common::on_runtime(|h| {
        Box::pin(async move {
            // Refused: a port nothing listens on.
            let closed = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap()
            };
            let e = TcpStream::connect_socket_addr(&h, closed)
                .await
                .unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ConnectionRefused);

            // Address in use.
            let l = TcpListener::bind_socket_addr(&h, localhost()).unwrap();
            let addr = l.local_addr().unwrap();
            let e = TcpListener::bind_socket_addr(&h, addr).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::AddrInUse);

            // Peer closes mid-read: UnexpectedEof, buffer back.
            let accept = h
                .spawn_stealable(async move { l.accept().await.unwrap().0 })
                .unwrap();
            let c = TcpStream::connect_socket_addr(&h, addr).await.unwrap();
            let s = accept.await.unwrap();
            s.write_all(b"abc").await.unwrap();
            s.shutdown(Shutdown::Write).await.unwrap();
            let (res, buf) = c.read_exact_buf(vec![0u8; 10]).await;
            assert_eq!(res.unwrap_err().kind(), ErrorKind::UnexpectedEof);
            assert_eq!(buf.len(), 10);

            // Writes after our own shutdown: BrokenPipe, no SIGPIPE.
            c.shutdown(Shutdown::Write).await.unwrap();
            let e = c.write_all(b"late").await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BrokenPipe);

            // Reset: the peer closes with unread data (RST).
            let l = TcpListener::bind_socket_addr(&h, localhost()).unwrap();
            let addr = l.local_addr().unwrap();
            let accept = h
                .spawn_stealable(async move { l.accept().await.unwrap().0 })
                .unwrap();
            let c = TcpStream::connect_socket_addr(&h, addr).await.unwrap();
            let s = accept.await.unwrap();
            c.write_all(b"unread").await.unwrap();
            spargio::sleep(std::time::Duration::from_millis(20)).await;
            drop(s);
            spargio::sleep(std::time::Duration::from_millis(20)).await;
            let e = c.recv(16).await.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::ConnectionReset);
        })
    });
}

#[test]
fn from_std_wraps_and_outside_threads_work() {
    let rt = common::runtime(2);
    let h = rt.handle();
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    let listener = TcpListener::from_std(&h, std_listener);
    let std_client = std::net::TcpStream::connect(addr).unwrap();
    // Awaited on this plain thread: ops cross to a shard's inbox.
    let (server, _) = spargio::block_on(listener.accept()).unwrap();
    let client = TcpStream::from_std(&h, std_client).unwrap();
    spargio::block_on(client.write_all(b"outside")).unwrap();
    let mut buf = [0u8; 7];
    spargio::block_on(server.read_exact(&mut buf)).unwrap();
    assert_eq!(&buf, b"outside");
}

#[test]
fn session_spawns_take_the_runtime_handle() {
    let other = common::runtime(1);
    let foreign = other.handle();
    common::on_runtime_with(3, move |h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            let session = server.session_shard();
            // Pinned to the session shard: every receive stays on its ring.
            let s = server.clone();
            let echo = server
                .spawn_on_session(&h, async move {
                    let shard = spargio::ShardCtx::current().unwrap().shard_id();
                    let mut buf = [0u8; 5];
                    s.read_exact(&mut buf).await.unwrap();
                    s.write_all(&buf).await.unwrap();
                    shard
                })
                .unwrap();
            client.write_all(b"hello").await.unwrap();
            let mut back = [0u8; 5];
            client.read_exact(&mut back).await.unwrap();
            assert_eq!(&back, b"hello");
            assert_eq!(echo.await.unwrap(), session);

            // Stealable, preferring the session shard; the handle may be
            // passed by value too.
            let s = server.clone();
            let stealable = server
                .spawn_stealable_on_session(h.clone(), async move {
                    s.write_all(b"from a stealable task").await.unwrap();
                })
                .unwrap();
            let mut got = vec![0u8; 21];
            client.read_exact(&mut got).await.unwrap();
            assert_eq!(got, b"from a stealable task");
            stealable.await.unwrap();

            // A handle of another runtime is refused: the stream's session
            // shard is a shard of its own runtime.
            let err = server
                .spawn_on_session(foreign.clone(), async {})
                .unwrap_err();
            assert!(
                matches!(err, spargio::RuntimeError::ForeignHandle),
                "{err:?}"
            );
            let err = server
                .spawn_stealable_on_session(&foreign, async {})
                .unwrap_err();
            assert!(
                matches!(err, spargio::RuntimeError::ForeignHandle),
                "{err:?}"
            );
        })
    });
}

#[test]
fn a_deferred_accept_takes_talking_clients_first_and_loses_none() {
    common::on_runtime(|h| {
        Box::pin(async move {
            use std::io::{Read, Write};
            use std::time::Duration;

            let listener = TcpListener::bind_socket_addr(&h, localhost()).unwrap();
            let addr = listener.local_addr().unwrap();
            assert_eq!(listener.defer_accept().unwrap(), Duration::ZERO);
            // Long enough that the silent client below is never let
            // through by the kernel's timer while the test runs.
            listener.set_defer_accept(Duration::from_secs(30)).unwrap();
            assert!(listener.defer_accept().unwrap() >= Duration::from_secs(30));

            // `silent` completes its handshake first but sends nothing;
            // `talker` sends at once. Without the deferral the accept
            // queue would hand over `silent` first.
            let mut silent = std::net::TcpStream::connect(addr).unwrap();
            let mut talker = std::net::TcpStream::connect(addr).unwrap();
            talker.write_all(b"talker").unwrap();
            let (first, _) = listener.accept().await.unwrap();
            assert_eq!(first.peer_addr().unwrap(), talker.local_addr().unwrap());
            let mut buf = [0u8; 6];
            first.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"talker");

            silent.write_all(b"silent").unwrap();
            let (second, _) = listener.accept().await.unwrap();
            second.read_exact(&mut buf).await.unwrap();
            assert_eq!(&buf, b"silent");
            second.write_all(b"ok").await.unwrap();
            let mut ok = [0u8; 2];
            silent.read_exact(&mut ok).unwrap();
            assert_eq!(&ok, b"ok");
            drop((first, talker));

            // Off again: the queue order is the handshakes' order.
            listener.set_defer_accept(Duration::ZERO).unwrap();
            assert_eq!(listener.defer_accept().unwrap(), Duration::ZERO);
            let quiet = std::net::TcpStream::connect(addr).unwrap();
            let mut loud = std::net::TcpStream::connect(addr).unwrap();
            loud.write_all(b"x").unwrap();
            let (s, _) = listener.accept().await.unwrap();
            assert_eq!(
                s.peer_addr().unwrap(),
                quiet.local_addr().unwrap(),
                "undeferred, the first handshake is the first accepted"
            );
        })
    });
}

#[test]
fn a_client_silent_past_the_deferral_is_still_accepted() {
    common::on_runtime(|h| {
        Box::pin(async move {
            use std::io::{Read, Write};
            use std::time::Duration;

            let listener = TcpListener::bind_socket_addr(&h, localhost()).unwrap();
            let addr = listener.local_addr().unwrap();
            listener.set_defer_accept(Duration::from_secs(1)).unwrap();
            // Past the deferral the kernel retransmits its SYN-ACK and
            // queues the connection on the client's next ACK.
            let client = std::thread::spawn(move || {
                let mut c = std::net::TcpStream::connect(addr).unwrap();
                std::thread::sleep(Duration::from_millis(1500));
                c.write_all(b"late").unwrap();
                let mut back = [0u8; 4];
                c.read_exact(&mut back).unwrap();
                back
            });
            let (s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
            assert_eq!(&client.join().unwrap(), b"late");
        })
    });
}
