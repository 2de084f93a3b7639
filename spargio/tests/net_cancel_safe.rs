//! Stream receives are cancel safe: a receive whose future is dropped
//! (by a timeout, a `select!` whose other branch won, a task cancelled)
//! loses no byte and reorders none. Whatever it took from the socket goes
//! to the stream's next receive, whether its data came before the drop,
//! after it, or while a cancel crossed shards. Both backends.

mod common;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use spargio::net::TcpStream;
use spargio::{RuntimeBuilder, RuntimeHandle};

/// A missing byte shows as a read that never ends: bounded, so it fails.
const LOST: Duration = Duration::from_secs(10);

/// Runs `body` as a stealable task of a 2-shard runtime on each backend.
fn on_each_backend<F, Fut>(body: F)
where
    F: Fn(RuntimeHandle) -> Fut + Send + Clone + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    for backend in common::backends() {
        let body = body.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let builder = RuntimeBuilder::new().shards(2).backend(backend);
            let out = spargio::block_on(spargio::run_with(builder, body));
            let _ = tx.send(out.map_err(|e| e.to_string()));
        });
        match rx.recv_timeout(common::HANG) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{backend:?}: {e}"),
            Err(_) => panic!("{backend:?}: no answer within {:?}", common::HANG),
        }
    }
}

/// Sets a flag when woken.
struct Flag(AtomicBool);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
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
            let flag = Arc::new(Flag(AtomicBool::new(false)));
            let waker = Waker::from(flag.clone());
            let mut recv = Box::pin(a.recv(16));
            let first = recv.as_mut().poll(&mut Context::from_waker(&waker));
            assert!(first.is_pending(), "nothing was sent yet");
            b.write_all(&[round, b'a', b'b', b'c']).await.unwrap();
            // Its completion is in: the future was woken. Dropped unpolled,
            // as a `select!` drops the branch that lost.
            while !flag.0.load(Ordering::SeqCst) {
                spargio::time::sleep(Duration::from_millis(1)).await;
            }
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
            let waker = Waker::from(Arc::new(Flag(AtomicBool::new(false))));
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
