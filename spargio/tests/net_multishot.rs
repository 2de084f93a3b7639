//! Multishot operations on sockets: the multishot-accept `incoming` streams
//! and `recv_multishot_segments` on a provided-buffer ring.
//!
//! The tests in this file count the process's open fds, so they run one at
//! a time (`SERIAL`).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::Mutex;

use spargio::net::{RecvPoolConfig, StreamSessionPolicy, TcpListener, UnixListener, UnixStream};

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
                assert_eq!(
                    s.peer_addr().unwrap(),
                    clients[i as usize].local_addr().unwrap()
                );
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

/// A listener whose `incoming` nobody polls accepts nothing, and one whose
/// reader stops polling accepts only up to a bound; the rest wait in the
/// kernel's listen backlog, and every one of them is still accepted once
/// the reader comes back.
#[test]
fn an_unread_incoming_accepts_only_up_to_its_bound() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let listener = TcpListener::bind_socket_addr(&h, localhost()).unwrap();
            let addr = listener.local_addr().unwrap();
            let mut incoming = listener.incoming().unwrap();
            let base = open_fds();
            let mut clients: Vec<_> = (0..100)
                .map(|_| std::net::TcpStream::connect(addr).unwrap())
                .collect();
            h.sleep(std::time::Duration::from_millis(100)).await;
            assert_eq!(
                open_fds() - base - clients.len(),
                0,
                "accepted before the first poll"
            );
            // The reader takes them all (the burst that armed the accept
            // took every one in the backlog, past the bound: the kernel's
            // way), plus one more (so the accept is armed again), then
            // stops reading while 300 more connections arrive one by one.
            let mut taken = Vec::new();
            while taken.len() < clients.len() {
                taken.push(incoming.accept().await.unwrap());
            }
            clients.push(std::net::TcpStream::connect(addr).unwrap());
            taken.push(incoming.accept().await.unwrap());
            let more = std::thread::spawn(move || {
                (0..300)
                    .map(|_| {
                        std::thread::sleep(std::time::Duration::from_micros(500));
                        std::net::TcpStream::connect(addr).unwrap()
                    })
                    .collect::<Vec<_>>()
            });
            while !more.is_finished() {
                h.sleep(std::time::Duration::from_millis(5)).await;
            }
            clients.extend(more.join().unwrap());
            h.sleep(std::time::Duration::from_millis(100)).await;
            let unread = open_fds() - base - clients.len() - taken.len();
            // The bound is 64; a few more may land between the completion
            // that reaches it and the cancel taking effect.
            assert!(
                (64..=80).contains(&unread),
                "{unread} connections accepted while nobody read"
            );
            // Nothing is lost: all 400 come out, over as many re-arms as
            // it takes.
            while taken.len() < clients.len() {
                taken.push(incoming.accept().await.unwrap());
            }
            drop(taken);
            drop(incoming);
            drop(clients);
            wait_for_fds(&h, base).await;
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

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

#[test]
fn segments_carry_every_byte_in_order_until_eof() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            let data = pattern(1 << 20);
            let sent = data.clone();
            let writer = h
                .spawn_stealable(async move {
                    for chunk in sent.chunks(7000) {
                        client.write_all(chunk).await.unwrap();
                    }
                    client.shutdown(std::net::Shutdown::Write).await.unwrap();
                })
                .unwrap();
            let config = RecvPoolConfig::default().buffers(8).buffer_len(4096);
            let mut segments = server.recv_multishot_segments_with(config).await.unwrap();
            assert_eq!(segments.pool_buffers(), 8);
            let mut got = Vec::new();
            let mut count = 0;
            while let Some(seg) = segments.next_segment().await {
                let seg = seg.unwrap();
                assert!(!seg.is_empty() && seg.len() <= 4096);
                got.extend_from_slice(&seg);
                count += 1;
            }
            assert!(count >= (1 << 20) / 4096, "split into pool-sized pieces");
            assert!(got == data, "bytes differ");
            assert!(segments.next_segment().await.is_none(), "stays ended");
            writer.await.unwrap();
        })
    });
}

#[test]
fn held_segments_stall_the_kernel_until_given_back() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            let data = pattern(256 * 1024);
            let sent = data.clone();
            let writer = h
                .spawn_stealable(async move {
                    client.write_all(&sent).await.unwrap();
                    drop(client);
                })
                .unwrap();
            // Two small buffers, and the consumer holds two segments at a
            // time: the kernel runs dry (ENOBUFS) again and again.
            let config = RecvPoolConfig::default().buffers(2).buffer_len(512);
            let mut segments = server.recv_multishot_segments_with(config).await.unwrap();
            let mut got = Vec::new();
            let mut held = Vec::new();
            while let Some(seg) = segments.next_segment().await {
                held.push(seg.unwrap());
                if held.len() == 2 {
                    common::yield_now().await;
                    for seg in held.drain(..) {
                        got.extend_from_slice(&seg);
                    }
                }
            }
            for seg in held.drain(..) {
                got.extend_from_slice(&seg);
            }
            assert_eq!(got.len(), data.len());
            assert!(got == data, "bytes differ");
            writer.await.unwrap();
        })
    });
}

#[test]
fn segments_dropped_on_another_thread_go_back_to_the_pool() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            let data = pattern(64 * 1024);
            let sent = data.clone();
            let writer = h
                .spawn_stealable(async move {
                    client.write_all(&sent).await.unwrap();
                })
                .unwrap();
            let config = RecvPoolConfig::default().buffers(4).buffer_len(1024);
            let mut segments = server.recv_multishot_segments_with(config).await.unwrap();
            let (tx, rx) = std::sync::mpsc::channel::<spargio::net::RecvSegment>();
            let dropper = std::thread::spawn(move || rx.into_iter().for_each(drop));
            let mut got = Vec::new();
            while got.len() < data.len() {
                let seg = segments.next_segment().await.unwrap().unwrap();
                got.extend_from_slice(&seg);
                tx.send(seg).unwrap();
            }
            assert!(got == data);
            writer.await.unwrap();
            // The last references to the pool die off the runtime too.
            drop(segments);
            drop(tx);
            dropper.join().unwrap();
        })
    });
}

#[test]
fn segments_registered_from_another_shard_and_sent_on_as_buffers() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            let other = 1 - server.session_shard();
            // Echo from a task on the other shard: registration and every
            // completion cross shards; each segment is sent back as is.
            let echo = h
                .spawn_pinned(other, async move {
                    let mut segments = server.recv_multishot_segments().await.unwrap();
                    let mut n = 0;
                    while let Some(seg) = segments.next_segment().await {
                        let seg = seg.unwrap();
                        n += seg.len();
                        server.write_all_owned(seg).await.unwrap();
                    }
                    n
                })
                .unwrap();
            let data = pattern(100_000);
            client.write_all(&data).await.unwrap();
            let mut back = vec![0u8; data.len()];
            client.read_exact(&mut back).await.unwrap();
            assert!(back == data);
            client.shutdown(std::net::Shutdown::Write).await.unwrap();
            assert_eq!(echo.await.unwrap(), data.len());
        })
    });
}

#[test]
fn a_reset_peer_ends_the_segments_with_an_error() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let listener = TcpListener::bind_socket_addr(&h, localhost()).unwrap();
            let addr = listener.local_addr().unwrap();
            let client = std::net::TcpStream::connect(addr).unwrap();
            let (server, _) = listener.accept().await.unwrap();
            let mut segments = server.recv_multishot_segments().await.unwrap();
            // Linger 0: close sends RST.
            socket2::SockRef::from(&client)
                .set_linger(Some(std::time::Duration::ZERO))
                .unwrap();
            drop(client);
            let err = segments.next_segment().await.unwrap().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ConnectionReset);
            assert!(segments.next_segment().await.is_none());
        })
    });
}

#[test]
fn a_bad_pool_shape_is_refused() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let (_client, server) = common::tcp_pair(&h).await;
            for config in [
                RecvPoolConfig::default().buffers(3),
                RecvPoolConfig::default().buffers(0),
                RecvPoolConfig::default().buffer_len(0),
            ] {
                let err = server
                    .recv_multishot_segments_with(config)
                    .await
                    .unwrap_err();
                assert_eq!(err.kind(), ErrorKind::InvalidInput, "{config:?}");
            }
        })
    });
}

#[test]
fn dropping_segment_streams_mid_flow_keeps_the_socket_usable() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            // Many short-lived segment streams over one connection while the
            // peer keeps writing: each drop cancels a live multishot receive
            // whose pool the kernel may be filling. Bytes already in a
            // dropped pool are gone (as with any dropped read); the rest
            // still arrives, and end of stream is seen.
            let writer = h
                .spawn_stealable(async move {
                    let chunk = pattern(4096);
                    for _ in 0..256 {
                        client.write_all(&chunk).await.unwrap();
                    }
                    client.shutdown(std::net::Shutdown::Write).await.unwrap();
                })
                .unwrap();
            let mut total = 0;
            let mut streams = 0;
            loop {
                let config = RecvPoolConfig::default().buffers(4).buffer_len(2048);
                let mut segments = server.recv_multishot_segments_with(config).await.unwrap();
                streams += 1;
                match segments.next_segment().await {
                    Some(seg) => total += seg.unwrap().len(),
                    None => break,
                }
                drop(segments);
                if streams % 3 == 0 {
                    // The plain receive path in between.
                    let (n, _) = server.recv_owned(Vec::with_capacity(1000)).await.unwrap();
                    if n == 0 {
                        break;
                    }
                }
            }
            assert!(total <= 256 * 4096);
            assert!(streams > 1);
            writer.await.unwrap();
        })
    });
}

#[test]
fn pools_are_unregistered_when_their_last_reference_goes() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            let session = server.clone();
            let config = RecvPoolConfig::default().buffers(1).buffer_len(1);
            // More pools than there are buffer group ids (65535): only
            // possible if each one is unregistered once dropped.
            let server = session
                .spawn_on_session(&h, async move {
                    for _ in 0..66_000 {
                        let segments = server.recv_multishot_segments_with(config).await.unwrap();
                        assert!(segments.stop().await.unwrap().is_empty());
                    }
                    server
                })
                .unwrap()
                .await
                .unwrap();
            client.write_all(b"z").await.unwrap();
            let mut last = server.recv_multishot_segments_with(config).await.unwrap();
            assert_eq!(&*last.next_segment().await.unwrap().unwrap(), b"z");
        })
    });
}

#[test]
fn stop_hands_back_what_was_received_and_leaves_the_rest_in_the_socket() {
    let _serial = serial();
    common::on_runtime(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            let data = pattern(300_000);
            let sent = data.clone();
            let writer = h
                .spawn_stealable(async move {
                    for chunk in sent.chunks(10_000) {
                        client.write_all(chunk).await.unwrap();
                        common::yield_now().await;
                    }
                })
                .unwrap();
            let mut got = Vec::new();
            let mut rounds = 0;
            while got.len() < data.len() {
                // Alternate: a short-lived segment stream stopped after one
                // segment, then a plain receive.
                let config = RecvPoolConfig::default().buffers(8).buffer_len(4096);
                let mut segments = server.recv_multishot_segments_with(config).await.unwrap();
                let first = segments.next_segment().await.unwrap().unwrap();
                got.extend_from_slice(&first);
                for seg in segments.stop().await.unwrap() {
                    got.extend_from_slice(&seg);
                }
                if got.len() < data.len() {
                    let (_, buf) = server.recv_owned(Vec::with_capacity(777)).await.unwrap();
                    got.extend_from_slice(&buf);
                }
                rounds += 1;
            }
            assert!(rounds > 1);
            assert_eq!(got.len(), data.len());
            assert!(got == data, "bytes lost or reordered");
            writer.await.unwrap();
        })
    });
}
