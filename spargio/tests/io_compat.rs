//! `io::Compat`: the futures-io traits over TCP and Unix streams.

mod common;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::io::{AsyncReadExt, AsyncWriteExt};
use spargio::io::Compat;
use spargio::net::{TcpListener, TcpStream, UnixStream};

#[test]
fn futures_io_echo_over_tcp() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let listener = TcpListener::bind(&h, "127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let server = h
                .spawn_stealable(async move {
                    let (s, _) = listener.accept().await.unwrap();
                    let (mut r, mut w) = Compat::new(s).split();
                    futures_util::io::copy(&mut r, &mut w).await.unwrap();
                    w.close().await.unwrap();
                })
                .unwrap();
            let c = Compat::new(TcpStream::connect_socket_addr(&h, addr).await.unwrap());
            let msg: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
            let (mut r, mut w) = c.split();
            let m = msg.clone();
            let writer = h
                .spawn_stealable(async move {
                    w.write_all(&m).await.unwrap();
                    w.close().await.unwrap();
                })
                .unwrap();
            let mut got = Vec::new();
            r.read_to_end(&mut got).await.unwrap();
            writer.await.unwrap();
            server.await.unwrap();
            assert_eq!(got, msg);
        })
    });
}

/// Polls `fut` once and drops it.
struct PollOnce<F>(Option<Pin<Box<F>>>);
impl<F: Future> Future for PollOnce<F> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut f = self.0.take().unwrap();
        let _ = f.as_mut().poll(cx);
        Poll::Ready(())
    }
}

#[test]
fn an_abandoned_read_loses_no_bytes() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (a, b) = UnixStream::pair(&h).unwrap();
            let mut b = Compat::new(b);
            // A read is started (nothing to read yet) and abandoned, as a
            // `select!` or a timeout would.
            let mut small = [0u8; 4];
            PollOnce(Some(Box::pin(b.read(&mut small)))).await;
            a.write_all(b"0123456789").await.unwrap();
            let mut out = [0u8; 10];
            b.read_exact(&mut out).await.unwrap();
            assert_eq!(&out, b"0123456789");
            // End of stream.
            drop(a);
            let mut rest = Vec::new();
            assert_eq!(b.read_to_end(&mut rest).await.unwrap(), 0);
        })
    });
}

#[test]
fn write_errors_surface_on_the_next_write_or_flush() {
    common::on_runtime(|h| {
        Box::pin(async move {
            // The peer is closed synchronously (a std socket).
            let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
            drop(b);
            let mut a = Compat::new(UnixStream::from_std(&h, a).unwrap());
            // Write-behind: the first write is accepted, its failure
            // reported by the flush.
            let first = a.write(b"lost").await;
            let flushed = a.flush().await;
            let err = first
                .err()
                .or(flushed.err())
                .expect("a closed peer fails the write");
            assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
        })
    });
}

#[test]
fn reads_after_a_short_read_go_to_the_ring_and_lose_nothing() {
    common::on_runtime(|h| {
        Box::pin(async move {
            let (a, b) = UnixStream::pair(&h).unwrap();
            let mut a = Compat::new(a);
            let mut buf = [0u8; 16];
            // A short read (3 of 16 bytes): the socket is drained.
            b.write_all_owned(b"abc".to_vec()).await.unwrap();
            assert_eq!(a.read(&mut buf).await.unwrap(), 3);
            assert_eq!(&buf[..3], b"abc");
            // Bytes that arrive before the next read are not skipped: the
            // read goes to the ring, whose receive finds them queued.
            b.write_all_owned(b"defgh".to_vec()).await.unwrap();
            let before = h.stats_snapshot().native_ops_submitted;
            assert_eq!(a.read(&mut buf).await.unwrap(), 5);
            assert_eq!(&buf[..5], b"defgh");
            assert!(
                h.stats_snapshot().native_ops_submitted > before,
                "the read after a short one went to the ring"
            );
            // 20 bytes in one receive: 16 fill the caller's buffer, the 4
            // left are served from the adaptor without another receive.
            b.write_all_owned(vec![7u8; 20]).await.unwrap();
            assert_eq!(a.read(&mut buf).await.unwrap(), 16);
            let before = h.stats_snapshot().native_ops_submitted;
            assert_eq!(a.read(&mut buf).await.unwrap(), 4);
            assert_eq!(h.stats_snapshot().native_ops_submitted, before);
            // And the end of the stream still reads as 0.
            drop(b);
            assert_eq!(a.read(&mut buf).await.unwrap(), 0);
        })
    });
}
