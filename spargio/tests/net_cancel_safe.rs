//! Stream receives are cancel safe: a receive whose future is dropped
//! (by a timeout, a `select!` whose other branch won, a task cancelled)
//! loses no byte and reorders none. Whatever it took from the socket goes
//! to the stream's next receive, whether its data came before the drop,
//! after it, or while a cancel crossed shards. Both backends.

mod common;

use std::future::Future;
use std::os::fd::AsRawFd;
use std::task::{Context, Waker};
use std::time::Duration;

use common::WokenFlag;
use spargio::net::TcpStream;
use spargio::RuntimeHandle;

/// A missing byte shows as a read that never ends: bounded, so it fails.
const LOST: Duration = Duration::from_secs(10);

fn on_each_backend<F, Fut>(body: F)
where
    F: Fn(RuntimeHandle) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    common::on_each_backend(2, body)
}

async fn read_exactly(s: &TcpStream, n: usize) -> Vec<u8> {
    let mut out = vec![0u8; n];
    spargio::time::timeout(LOST, s.read_exact(&mut out))
        .await
        .expect("bytes were lost: the read never ended")
        .unwrap();
    out
}

#[test]
fn a_receive_dropped_after_its_data_arrived_hands_it_to_the_next_read() {
    on_each_backend(|h| async move {
        let (a, b) = common::tcp_pair(&h).await;
        for round in 0..20u8 {
            let flag = WokenFlag::new();
            let waker = Waker::from(flag.clone());
            let mut recv = Box::pin(a.recv(16));
            let first = recv.as_mut().poll(&mut Context::from_waker(&waker));
            assert!(first.is_pending(), "nothing was sent yet");
            b.write_all(&[round, b'a', b'b', b'c']).await.unwrap();
            // Its completion is in: the future was woken. Dropped unpolled,
            // as a `select!` drops the branch that lost.
            flag.wait().await;
            drop(recv);
            b.write_all(b"def").await.unwrap();
            assert_eq!(
                read_exactly(&a, 7).await,
                [round, b'a', b'b', b'c', b'd', b'e', b'f']
            );
        }
    });
}

#[test]
fn a_receive_dropped_in_flight_then_a_new_one_at_once_keep_the_order() {
    on_each_backend(|h| async move {
        let (a, b) = common::tcp_pair(&h).await;
        for round in 0..50u8 {
            let mut recv = Box::pin(a.recv(16));
            let waker = Waker::from(WokenFlag::new());
            assert!(recv
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
            // The cancel and the data race; the next receive must see the
            // bytes in order whichever wins.
            drop(recv);
            b.write_all(&[round, 1, 2]).await.unwrap();
            let next = a.recv(16);
            b.write_all(&[3, 4]).await.unwrap();
            let mut got = spargio::time::timeout(LOST, next)
                .await
                .expect("bytes were lost")
                .unwrap();
            got.extend(read_exactly(&a, 5 - got.len()).await);
            assert_eq!(got, [round, 1, 2, 3, 4]);
        }
    });
}

/// A reader on one shard times its receives out at random while a writer
/// on the stream's session shard sends a numbered sequence: every
/// abandoned receive's cancel crosses shards and races the data.
#[test]
fn receives_timed_out_across_shards_lose_and_reorder_nothing() {
    const TOTAL: usize = 200_000;
    on_each_backend(|h| async move {
        let (a, b) = common::tcp_pair(&h).await;
        let session = a.session_shard();
        let other = (session + 1) % h.shard_count();
        let writer = b
            .spawn_on_session(&h, {
                let b = b.clone();
                async move {
                    let mut seq = 0usize;
                    let mut rng = 0x9e37_79b9u32;
                    while seq < TOTAL {
                        rng ^= rng << 13;
                        rng ^= rng >> 17;
                        rng ^= rng << 5;
                        let n = (1 + rng as usize % 200).min(TOTAL - seq);
                        let chunk: Vec<u8> = (seq..seq + n).map(|i| (i % 251) as u8).collect();
                        b.write_all(&chunk).await.unwrap();
                        seq += n;
                        if rng % 4 == 0 {
                            spargio::time::sleep(Duration::from_micros(50)).await;
                        }
                    }
                }
            })
            .unwrap();
        let reader = h
            .spawn_pinned(other, async move {
                let mut got = Vec::with_capacity(TOTAL);
                let mut rng = 0x1234_5678u32;
                let mut timed_out = 0usize;
                while got.len() < TOTAL {
                    rng ^= rng << 13;
                    rng ^= rng >> 17;
                    rng ^= rng << 5;
                    let wait = Duration::from_micros(u64::from(rng % 300));
                    match spargio::time::timeout(wait, a.recv(97)).await {
                        Ok(bytes) => got.extend(bytes.unwrap()),
                        Err(_) => timed_out += 1,
                    }
                }
                (got, timed_out)
            })
            .unwrap();
        writer.await.unwrap();
        let (got, timed_out) = spargio::time::timeout(LOST * 3, reader)
            .await
            .expect("bytes were lost: the reader never got them all")
            .unwrap();
        let want: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
        let first_bad = got.iter().zip(&want).position(|(g, w)| g != w);
        assert_eq!(first_bad, None, "{timed_out} receives timed out");
        assert_eq!(got.len(), TOTAL);
    });
}

/// Polls `recv` once, lets `send` arrive, waits for the completion and
/// drops the receive unread: what it took is now the stream's carry.
async fn abandon_after_arrival<F: Future>(recv: F, arrive: impl Future<Output = ()>) {
    let mut recv = Box::pin(recv);
    let flag = WokenFlag::new();
    let waker = Waker::from(flag.clone());
    let first = recv.as_mut().poll(&mut Context::from_waker(&waker));
    assert!(first.is_pending(), "nothing was sent yet");
    arrive.await;
    flag.wait().await;
    drop(recv);
}

/// Reads `n` bytes through a multishot segments stream.
async fn segments_exactly(s: &TcpStream, n: usize) -> Vec<u8> {
    let mut segments = s.recv_multishot_segments().await.unwrap();
    let mut got = Vec::new();
    while got.len() < n {
        let seg = spargio::time::timeout(LOST, segments.next_segment())
            .await
            .expect("bytes were lost: the segments never came")
            .expect("the stream ended early")
            .unwrap();
        got.extend_from_slice(&seg);
    }
    got
}

#[test]
fn segments_after_an_abandoned_receive_start_with_its_bytes() {
    on_each_backend(|h| async move {
        let (a, b) = common::tcp_pair(&h).await;
        for round in 0..5u8 {
            abandon_after_arrival(a.recv(16), async {
                b.write_all(&[round, b'f', b'i', b'r', b's', b't'])
                    .await
                    .unwrap();
            })
            .await;
            b.write_all(b"second").await.unwrap();
            assert_eq!(
                segments_exactly(&a, 12).await,
                [&[round][..], b"firstsecond"].concat()
            );
        }
    });
}

#[test]
fn a_dropped_segments_stream_hands_what_it_received_to_the_next_receive() {
    on_each_backend(|h| async move {
        let (a, b) = common::tcp_pair(&h).await;
        for round in 0..5u8 {
            let mut segments = a.recv_multishot_segments().await.unwrap();
            // Two arrivals: completions the stream queued and never read.
            abandon_after_arrival(segments.next_segment(), async {
                b.write_all(&[round, b'a', b'b']).await.unwrap();
            })
            .await;
            b.write_all(b"cd").await.unwrap();
            spargio::time::sleep(Duration::from_millis(5)).await;
            drop(segments);
            b.write_all(b"ef").await.unwrap();
            assert_eq!(
                read_exactly(&a, 7).await,
                [round, b'a', b'b', b'c', b'd', b'e', b'f']
            );
        }
    });
}

#[test]
fn a_reset_an_abandoned_receive_saw_is_reported_by_the_next_receive() {
    on_each_backend(|h| async move {
        for _ in 0..5 {
            let (a, b) = common::tcp_pair(&h).await;
            // Its only completion is the reset itself.
            abandon_after_arrival(a.recv(16), async {
                // SO_LINGER 0: the close resets the connection.
                let linger = libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                };
                // SAFETY: a plain setsockopt on an open socket with a
                // local struct of the size passed.
                let rc = unsafe {
                    libc::setsockopt(
                        b.as_raw_fd(),
                        libc::SOL_SOCKET,
                        libc::SO_LINGER,
                        (&linger as *const libc::linger).cast(),
                        std::mem::size_of::<libc::linger>() as libc::socklen_t,
                    )
                };
                assert_eq!(rc, 0);
                drop(b);
                spargio::time::sleep(Duration::from_millis(20)).await;
            })
            .await;
            let err = match spargio::time::timeout(LOST, a.recv(16))
                .await
                .expect("hung")
            {
                Ok(bytes) => panic!("{bytes:?} instead of the reset: it was lost"),
                Err(err) => err,
            };
            assert_eq!(err.kind(), std::io::ErrorKind::ConnectionReset, "{err}");
        }
    });
}
