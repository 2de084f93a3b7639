//! `io::Compat` writes that no later poll follows up: what a write
//! accepted reaches the peer even when the caller goes on to read without
//! flushing, and a write is not refused (`Pending`) while the socket has
//! room. Both hold on a contended shard too, where a connection's later
//! writes are queued on the ring to go out with the loop turn's other
//! sends (forced here by a fault hook).
//!
//! The fault hook is process-wide, so this binary's tests run one at a
//! time.

mod common;

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::{mpsc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::Duration;

use futures_util::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
use spargio::__private::faults;
use spargio::io::Compat;
use spargio::net::UnixStream;

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

/// Runs `f` as a task pinned to shard 0 of a fresh 1-shard runtime, so
/// its connection's sends go to the ring it polls on.
fn on_shard<T: Send + 'static>(
    f: impl FnOnce(spargio::RuntimeHandle) -> common::Body<T> + Send + 'static,
) -> T {
    common::within_hang_bound(move || {
        let rt = common::runtime(1);
        let h = rt.handle();
        let join = h.spawn_pinned(0, f(h.clone())).unwrap();
        spargio::block_on(join).unwrap()
    })
}

/// Four 100-byte writes polled once each, one after the other, with a
/// socket that has room for all: each must be accepted there and then.
fn back_to_back_writes_are_accepted() {
    on_shard(|h| {
        Box::pin(async move {
            let (client, server) = common::tcp_pair(&h).await;
            let mut w = Compat::new(client);
            for i in 1..=4u8 {
                let frame = [i; 100];
                let polled =
                    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut w).poll_write(cx, &frame)))
                        .await;
                match polled {
                    Poll::Ready(Ok(100)) => {}
                    Poll::Ready(other) => panic!("write {i}: {other:?}, wanted Ok(100)"),
                    Poll::Pending => panic!(
                        "write {i} was refused (Pending) with room in the socket: only the \
                         adaptor's own queued send was in the way"
                    ),
                }
            }
            w.flush().await.unwrap();
            let mut got = vec![0u8; 400];
            Compat::new(server).read_exact(&mut got).await.unwrap();
            let want: Vec<u8> = (1..=4u8).flat_map(|i| [i; 100]).collect();
            assert_eq!(got, want, "bytes lost or reordered");
        })
    });
}

#[test]
fn back_to_back_writes_with_room_in_the_socket_are_accepted_at_once() {
    let _serial = serial();
    back_to_back_writes_are_accepted();
}

#[test]
fn back_to_back_writes_on_a_contended_shard_are_accepted_at_once() {
    let _serial = serial();
    let _contended = Contended::force();
    back_to_back_writes_are_accepted();
}

/// Bytes sent, checked by the peer.
const LEN: usize = 4 << 20;

fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 13) as u8)
        .collect()
}

/// Sets a socket buffer size (`SO_SNDBUF` or `SO_RCVBUF`).
fn set_buf(fd: std::os::fd::RawFd, opt: libc::c_int, size: libc::c_int) {
    // SAFETY: a valid socket fd; `size` outlives the call and its length
    // is passed with it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

/// `LEN` bytes through `write_all` into a Unix stream with a small send
/// buffer, to a peer that reads slowly (so a send waiting for room takes
/// only part of its bytes and completes short), then a read of the peer's
/// reply with no flush in between: every byte must reach the peer with
/// nothing but the read polled after the last write.
fn write_then_read_without_flush() {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    // 16 KiB (Linux doubles it): far less than one write's chunk.
    set_buf(ours.as_raw_fd(), libc::SO_SNDBUF, 16 * 1024);
    let (got_tx, got_rx) = mpsc::channel();
    let peer = std::thread::spawn(move || {
        let mut s = theirs;
        // Bounded: a tail that never comes fails the test, not hangs it.
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = Vec::with_capacity(LEN);
        let mut buf = vec![0u8; 4096];
        while got.len() < LEN {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
            // Slow: the writer's buffer stays full, its sends short.
            std::thread::sleep(Duration::from_micros(50));
        }
        if got.len() == LEN {
            s.write_all(b"ok").unwrap();
        }
        got_tx.send(got).unwrap();
    });
    on_shard(move |h| {
        Box::pin(async move {
            let mut c = Compat::new(UnixStream::from_std(&h, ours).unwrap());
            c.write_all(&pattern(LEN)).await.unwrap();
            // No flush: the read is all that is polled from here on.
            let mut reply = Vec::new();
            c.read_to_end(&mut reply).await.unwrap();
            reply
        })
    });
    let got = got_rx.recv().unwrap();
    peer.join().unwrap();
    assert_eq!(
        got.len(),
        LEN,
        "the peer got {} of {LEN} bytes: the tail of a send that came back short was never sent",
        got.len()
    );
    assert!(got == pattern(LEN), "bytes reordered or corrupted");
}

#[test]
fn bytes_written_before_a_read_reach_the_peer_without_a_flush() {
    let _serial = serial();
    write_then_read_without_flush();
}

#[test]
fn bytes_written_before_a_read_on_a_contended_shard_reach_the_peer_without_a_flush() {
    let _serial = serial();
    let _contended = Contended::force();
    write_then_read_without_flush();
}
