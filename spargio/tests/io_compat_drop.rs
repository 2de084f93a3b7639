//! Dropping a `Compat` loses nothing it took: bytes a write reported
//! accepted reach the peer, bytes it received and did not hand out go to
//! the stream's next receive. Both backends.

mod common;

use std::io::{Read, Write};
use std::pin::Pin;
use std::sync::mpsc;
use std::task::Poll;
use std::time::Duration;

use futures_util::io::AsyncReadExt;
use spargio::io::Compat;
use spargio::net::{TcpStream, UnixStream};

/// The byte at stream position `i`.
fn at(i: usize) -> u8 {
    (i % 251) as u8
}

/// Writes through `c` until a write is refused (the socket is full and a
/// write-behind send is in flight); returns the bytes reported accepted.
async fn write_until_full(c: &mut Compat<TcpStream>) -> usize {
    let mut accepted = 0;
    loop {
        let chunk: Vec<u8> = (accepted..accepted + 48 * 1024).map(at).collect();
        let res = std::future::poll_fn(|cx| {
            Poll::Ready(futures_io::AsyncWrite::poll_write(
                Pin::new(&mut *c),
                cx,
                &chunk,
            ))
        })
        .await;
        match res {
            Poll::Ready(Ok(n)) => accepted += n,
            Poll::Ready(Err(e)) => panic!("write failed after {accepted} bytes: {e}"),
            Poll::Pending => return accepted,
        }
    }
}

/// A peer that accepts one connection and reads nothing until told (the
/// sender), then everything to end of stream (the thread's result).
fn held_reader() -> (
    std::net::SocketAddr,
    mpsc::Sender<()>,
    std::thread::JoinHandle<std::io::Result<Vec<u8>>>,
) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (go, wait) = mpsc::channel::<()>();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        wait.recv().unwrap();
        let mut got = Vec::new();
        s.read_to_end(&mut got).map(|_| got)
    });
    (addr, go, peer)
}

#[test]
fn a_compat_dropped_with_its_write_behind_in_flight_delivers_every_accepted_byte() {
    common::on_each_backend(2, |h| async move {
        for round in 0..3 {
            let (addr, go, peer) = held_reader();
            let mut c = Compat::new(TcpStream::connect_socket_addr(&h, addr).await.unwrap());
            let accepted = write_until_full(&mut c).await;
            // Dropped without flush or close, as `write_all(..).await;
            // drop(stream)` drops it.
            drop(c);
            go.send(()).unwrap();
            // Joined off the shards, which must go on running meanwhile.
            let peer = h.spawn_blocking(move || peer.join().unwrap()).unwrap();
            let got = peer.await.unwrap().unwrap_or_else(|e| {
                panic!(
                    "round {round}: the peer's read failed ({e}); {accepted} bytes were accepted"
                )
            });
            assert_eq!(
                got.len(),
                accepted,
                "round {round}: bytes accepted and lost"
            );
            let first_bad = got.iter().enumerate().position(|(i, &b)| b != at(i));
            assert_eq!(first_bad, None, "round {round}");
        }
    });
}

#[test]
fn bytes_received_into_a_compat_go_to_the_stream_after_it() {
    common::on_each_backend(2, |h| async move {
        for round in 0..4u8 {
            let (a, b) = UnixStream::pair(&h).unwrap();
            let session = a.session_shard();
            let keep = a.clone();
            // On the session shard a read arms the shard pool's receive:
            // the arrival lands in a pool buffer larger than the read.
            let rest = h
                .spawn_pinned(session, async move {
                    let mut c = Compat::new(a);
                    let mut first = [0u8; 3];
                    let read = c.read(&mut first);
                    let write = async {
                        spargio::time::sleep(Duration::from_millis(5)).await;
                        b.write_all(&[round, b'a', b'b', b'c', b'd', b'e', b'f'])
                            .await
                            .unwrap();
                    };
                    let (n, ()) = futures_util::future::join(read, write).await;
                    assert_eq!(n.unwrap(), 3, "the arrival came at once");
                    assert_eq!(first, [round, b'a', b'b']);
                    // Half the bytes: into_inner; the other half: a clone
                    // kept beside the adaptor.
                    let stream = if round % 2 == 0 {
                        Some(c.into_inner())
                    } else {
                        drop(c);
                        None
                    };
                    b.write_all(b"gh").await.unwrap();
                    stream
                })
                .unwrap()
                .await
                .unwrap();
            let reader = rest.unwrap_or(keep);
            let mut got = vec![0u8; 6];
            spargio::time::timeout(common::HANG, reader.read_exact(&mut got))
                .await
                .expect("bytes were lost: the read never ended")
                .unwrap();
            assert_eq!(got, b"cdefgh", "round {round}");
        }
    });
}

#[test]
fn a_write_through_the_stream_after_into_inner_waits_for_the_adaptors_send() {
    common::on_each_backend(2, |h| async move {
        for round in 0..3 {
            let (addr, go, peer) = held_reader();
            let mut c = Compat::new(TcpStream::connect_socket_addr(&h, addr).await.unwrap());
            let accepted = write_until_full(&mut c).await;
            // Unwrapped with the write-behind send in flight, not flushed.
            let stream = c.into_inner();
            let tail: Vec<u8> = (accepted..accepted + 10_000).map(at).collect();
            let write = async {
                stream.write_all(&tail).await.unwrap();
                drop(stream);
            };
            let release = async {
                spargio::time::sleep(Duration::from_millis(20)).await;
                go.send(()).unwrap();
            };
            futures_util::future::join(write, release).await;
            let peer = h.spawn_blocking(move || peer.join().unwrap()).unwrap();
            let got = peer.await.unwrap().unwrap();
            assert_eq!(got.len(), accepted + tail.len(), "round {round}");
            let first_bad = got.iter().enumerate().position(|(i, &b)| b != at(i));
            assert_eq!(first_bad, None, "round {round}: out of order");
        }
    });
}

#[test]
fn a_compat_dropped_off_its_session_shard_delivers_a_send_still_queued_there() {
    // The adaptor writes from the other shard while its session shard is
    // busy: its send waits in the session shard's inbox when the adaptor
    // is dropped, and must still go out.
    common::on_each_backend(2, |h| async move {
        for round in 0..3 {
            let (addr, go, peer) = held_reader();
            let stream = TcpStream::connect_socket_addr(&h, addr).await.unwrap();
            let session = stream.session_shard();
            let other = (session + 1) % 2;
            let (unblock, blocked) = mpsc::channel::<()>();
            let (busy_tx, busy_rx) = tokio::sync::oneshot::channel::<()>();
            // Holds the session shard's thread until the adaptor is gone.
            let blocker = h
                .spawn_pinned(session, async move {
                    let _ = busy_tx.send(());
                    blocked.recv().unwrap();
                })
                .unwrap();
            busy_rx.await.unwrap();
            let accepted = h
                .spawn_pinned(other, async move {
                    let mut c = Compat::new(stream);
                    let accepted = write_until_full(&mut c).await;
                    drop(c);
                    unblock.send(()).unwrap();
                    accepted
                })
                .unwrap()
                .await
                .unwrap();
            blocker.await.unwrap();
            go.send(()).unwrap();
            let peer = h.spawn_blocking(move || peer.join().unwrap()).unwrap();
            let got = peer.await.unwrap().unwrap_or_else(|e| {
                panic!(
                    "round {round}: the peer's read failed ({e}); {accepted} bytes were accepted"
                )
            });
            assert_eq!(
                got.len(),
                accepted,
                "round {round}: bytes accepted and lost"
            );
            let first_bad = got.iter().enumerate().position(|(i, &b)| b != at(i));
            assert_eq!(first_bad, None, "round {round}");
        }
    });
}

#[test]
fn bytes_an_adaptor_received_survive_its_drop_after_its_last_send_completed() {
    // The adaptor's send ends (the peer drained the socket) before the
    // adaptor is dropped, unpolled: dropping it hands the send to linger,
    // which finishes it at once. What its armed receive got must still
    // go to the clone of the stream that reads next.
    common::on_each_backend(2, |h| async move {
        for round in 0..3u8 {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let stream = TcpStream::connect_socket_addr(&h, addr).await.unwrap();
            let (mut peer, _) = listener.accept().unwrap();
            let session = stream.session_shard();
            let reader = stream.clone();
            let h2 = h.clone();
            let drained = h
                .spawn_pinned(session, async move {
                    let mut c = Compat::new(stream);
                    let accepted = write_until_full(&mut c).await;
                    // A read finding nothing arms the adaptor's receive.
                    let mut one = [0u8; 1];
                    let read = std::future::poll_fn(|cx| {
                        Poll::Ready(futures_io::AsyncRead::poll_read(
                            Pin::new(&mut c),
                            cx,
                            &mut one,
                        ))
                    })
                    .await;
                    assert!(read.is_pending(), "nothing was sent yet");
                    // The peer sends, then drains all the adaptor sent.
                    let drained = h2
                        .spawn_blocking(move || {
                            peer.write_all(&[round, 1, 2, 3]).unwrap();
                            let mut got = vec![0u8; accepted];
                            peer.read_exact(&mut got).map(|_| (peer, got))
                        })
                        .unwrap()
                        .await
                        .unwrap()
                        .unwrap();
                    // The send's completion and the bytes' arrive.
                    spargio::time::sleep(Duration::from_millis(50)).await;
                    drop(c);
                    drained
                })
                .unwrap()
                .await
                .unwrap();
            let (_peer, got) = drained;
            assert!(
                got.iter().enumerate().all(|(i, &b)| b == at(i)),
                "round {round}"
            );
            let mut four = [0u8; 4];
            spargio::time::timeout(Duration::from_secs(10), reader.read_exact(&mut four))
                .await
                .expect("bytes were lost: the read never ended")
                .unwrap();
            assert_eq!(four, [round, 1, 2, 3], "round {round}");
        }
    });
}
