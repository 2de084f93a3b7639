//! `futures_io` and tokio `AsyncRead`/`AsyncWrite` on the stream types:
//! transfers through both trait families (against ourselves, quinn on
//! tokio and the bridge backend), error kinds, zero-length reads, cancel
//! safety, and the bound on waiters a poll-based caller leaves behind.

mod common;
mod support;

use std::future::Future;
use std::io;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use spargio::RuntimeHandle;
use spargio_quic::{
    bridge_runtime_spawn_count, stream_error_code, QuicBackend, QuicConnection, QuicEndpoint,
    QuicEndpointOptions, QuicRecvStream, QuicSendStream,
};

use common::*;
use support::*;

fn native() -> QuicEndpointOptions {
    QuicEndpointOptions::default()
}

/// How many operations wait on `conn` (its driver's view).
fn waiting_ops(ep: &QuicEndpoint, conn: &QuicConnection) -> usize {
    ep.drivers()
        .iter()
        .find_map(|d| d.connection_state(conn.stable_id()).ok())
        .expect("the endpoint's drivers hold the connection")
        .waiting_ops
}

/// A noop context for polling by hand.
fn noop_cx() -> Context<'static> {
    Context::from_waker(Waker::noop())
}

/// Serves each bi stream of `conn` by echoing it through the
/// `futures_io` traits (`futures::io::copy`, then `close`).
fn echo_with_futures_copy(handle: &RuntimeHandle, conn: QuicConnection) {
    handle
        .spawn_stealable(async move {
            while let Ok((mut send, recv)) = conn.accept_bi().await {
                futures_util::io::copy(recv, &mut send).await.expect("copy");
                futures_util::io::AsyncWriteExt::close(&mut send)
                    .await
                    .expect("close");
            }
        })
        .unwrap();
}

/// Writes `data` through `futures_io::AsyncWrite` (`copy` from a cursor),
/// closes twice (idempotent), and returns what was copied.
async fn futures_write(send: &mut QuicSendStream, data: Vec<u8>) -> u64 {
    use futures_util::io::AsyncWriteExt;
    let n = futures_util::io::copy(futures_util::io::Cursor::new(data), send)
        .await
        .expect("copy");
    send.flush().await.expect("flush");
    send.close().await.expect("close");
    send.close().await.expect("second close");
    n
}

async fn futures_read_all(recv: &mut QuicRecvStream) -> Vec<u8> {
    let mut out = Vec::new();
    futures_util::io::AsyncReadExt::read_to_end(recv, &mut out)
        .await
        .expect("read_to_end");
    out
}

async fn tokio_write(send: &mut QuicSendStream, data: &[u8]) {
    use tokio::io::AsyncWriteExt;
    // The inherent `write_all` would win in method syntax: name the trait.
    AsyncWriteExt::write_all(send, data)
        .await
        .expect("write_all");
    send.flush().await.expect("flush");
    send.shutdown().await.expect("shutdown");
    send.shutdown().await.expect("second shutdown");
}

async fn tokio_read_all(recv: &mut QuicRecvStream) -> Vec<u8> {
    let mut out = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(recv, &mut out)
        .await
        .expect("read_to_end");
    out
}

#[spargio::test(shards = 2)]
async fn futures_copy_of_4_mib_through_our_server_and_back(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, native());
    let client = client(&handle, &certs, None, native());
    let (c, s) = pair(&client, &server).await;
    echo_with_futures_copy(&handle, s);

    let data = pattern(4 * MIB, 41);
    let sum = checksum(&data);
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    let (copied, back) = hang(
        "4 MiB echo",
        join(futures_write(&mut send, data), futures_read_all(&mut recv)),
    )
    .await;
    assert_eq!(copied, 4 * MIB as u64);
    assert_eq!(back.len(), 4 * MIB);
    assert_eq!(checksum(&back), sum);
    let m = client.metrics().snapshot();
    assert!(m.bytes_written >= 4 * MIB as u64, "{m:?}");
    assert!(m.bytes_read >= 4 * MIB as u64, "{m:?}");
}

#[spargio::test(shards = 2)]
async fn tokio_traits_against_a_quinn_echo_server(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let peer = QuinnServer::with(&certs, Behaviour::Echo);
    let ep = client(&handle, &certs, None, native());
    let conn = hang("connect", ep.connect(peer.addr, SERVER_NAME))
        .await
        .expect("connect to quinn");
    let data = pattern(MIB, 42);
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let ((), back) = hang(
        "1 MiB echo",
        join(tokio_write(&mut send, &data), tokio_read_all(&mut recv)),
    )
    .await;
    assert_eq!(back.len(), MIB);
    assert_eq!(checksum(&back), checksum(&data));
    let seen = peer
        .wait_until(|o| !o.streams.is_empty())
        .await
        .expect("quinn saw the stream");
    assert_eq!(seen.streams[0].bytes, MIB as u64);
    assert_eq!(seen.streams[0].checksum, checksum(&data));
    assert_eq!(seen.streams[0].end, StreamEnd::Finished);
}

#[spargio::test(shards = 2)]
async fn a_reset_by_the_peer_is_connection_reset_from_poll_read_and_poll_write(
    handle: RuntimeHandle,
) {
    let certs = TestCerts::generate();
    let peer = QuinnServer::with(&certs, Behaviour::ResetStream(31));
    let ep = client(&handle, &certs, None, native());
    let conn = hang("connect", ep.connect(peer.addr, SERVER_NAME))
        .await
        .expect("connect to quinn");
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    futures_util::io::AsyncWriteExt::write_all(&mut send, b"first")
        .await
        .unwrap();

    let err = hang("reset", async {
        let mut buf = [0u8; 1024];
        loop {
            match futures_util::io::AsyncReadExt::read(&mut recv, &mut buf).await {
                Ok(0) => panic!("EOF instead of a reset"),
                Ok(_) => continue,
                Err(e) => break e,
            }
        }
    })
    .await;
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(stream_error_code(&err), Some(31));
    // The reset sticks (it is not turned into an EOF), through either trait.
    let mut buf = [0u8; 16];
    let again = tokio::io::AsyncReadExt::read(&mut recv, &mut buf)
        .await
        .unwrap_err();
    assert_eq!(again.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(stream_error_code(&again), Some(31));

    // The peer also stopped our half: writes fail the same way.
    let err = hang("stopped", async {
        let chunk = [7u8; 1024];
        loop {
            if let Err(e) = futures_util::io::AsyncWriteExt::write(&mut send, &chunk).await {
                break e;
            }
        }
    })
    .await;
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(stream_error_code(&err), Some(31));
}

#[spargio::test(shards = 2)]
async fn a_zero_length_read_returns_zero_and_consumes_nothing(handle: RuntimeHandle) {
    use futures_util::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, native());
    let client = client(&handle, &certs, None, native());
    let (c, s) = pair(&client, &server).await;
    let (mut cs, _cr) = c.open_bi().await.unwrap();
    cs.write_all(b"hello").await.unwrap();
    let (_ss, mut sr) = hang("accept", s.accept_bi()).await.unwrap();

    let mut one = [0u8; 1];
    hang("first byte", AsyncReadExt::read_exact(&mut sr, &mut one))
        .await
        .unwrap();
    assert_eq!(&one, b"h");
    let before = waiting_ops(&server, &s);
    // With data buffered: Ok(0) at once, nothing taken, no waiter left.
    let mut cx = noop_cx();
    for _ in 0..3 {
        match Pin::new(&mut sr).poll_read(&mut cx, &mut []) {
            Poll::Ready(Ok(0)) => {}
            other => panic!("zero-length read gave {other:?}"),
        }
        match tokio::io::AsyncRead::poll_read(
            Pin::new(&mut sr),
            &mut cx,
            &mut tokio::io::ReadBuf::new(&mut []),
        ) {
            Poll::Ready(Ok(())) => {}
            other => panic!("zero-length tokio read gave {other:?}"),
        }
    }
    assert_eq!(waiting_ops(&server, &s), before);
    // Ok(0) from an empty buffer is not an EOF: the rest is still there.
    let mut rest = [0u8; 4];
    hang("rest", AsyncReadExt::read_exact(&mut sr, &mut rest))
        .await
        .unwrap();
    assert_eq!(&rest, b"ello");
    // With nothing buffered a zero-length read still does not wait.
    assert!(matches!(
        Pin::new(&mut sr).poll_read(&mut cx, &mut []),
        Poll::Ready(Ok(0))
    ));
    // The real end: a non-empty buffer gets 0 after the FIN.
    cs.close().await.unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(
        hang("eof", AsyncReadExt::read(&mut sr, &mut buf))
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        hang("eof again", AsyncReadExt::read(&mut sr, &mut buf))
            .await
            .unwrap(),
        0
    );
}

#[spargio::test(shards = 2)]
async fn a_read_cancelled_by_a_timeout_loses_nothing(handle: RuntimeHandle) {
    use futures_util::io::{AsyncReadExt, AsyncWriteExt};
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, native());
    let client = client(&handle, &certs, None, native());
    let (c, s) = pair(&client, &server).await;
    let (mut cs, mut cr) = c.open_bi().await.unwrap();
    cs.write_all(b"x").await.unwrap();
    let (mut ss, _sr) = hang("accept", s.accept_bi()).await.unwrap();

    // Nothing was sent yet: each read is cut off by its timeout (the
    // server writes only after these returned, so they cannot complete).
    for _ in 0..3 {
        let mut buf = vec![0u8; 64 * 1024];
        let cut = spargio::time::timeout(
            Duration::from_millis(20),
            AsyncReadExt::read(&mut cr, &mut buf),
        )
        .await;
        assert!(cut.is_err(), "a read completed with nothing sent");
        // Also through tokio's trait.
        let cut = spargio::time::timeout(
            Duration::from_millis(20),
            tokio::io::AsyncReadExt::read(&mut cr, &mut buf),
        )
        .await;
        assert!(cut.is_err(), "a read completed with nothing sent");
    }
    let data = pattern(256 * 1024, 43);
    ss.write_all(&data).await.unwrap();
    ss.close().await.unwrap();
    let mut got = Vec::new();
    hang(
        "read after cancel",
        AsyncReadExt::read_to_end(&mut cr, &mut got),
    )
    .await
    .unwrap();
    assert_eq!(got.len(), data.len());
    assert_eq!(checksum(&got), checksum(&data));
}

#[spargio::test(shards = 2)]
async fn a_write_cancelled_by_a_timeout_loses_nothing_it_reported(handle: RuntimeHandle) {
    use futures_util::io::{AsyncReadExt, AsyncWriteExt};
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, native());
    let client = client(&handle, &certs, None, native());
    let (c, s) = pair(&client, &server).await;
    let data = pattern(4 * MIB, 44);
    let (mut cs, _cr) = c.open_bi().await.unwrap();
    cs.write_all(&data[..1]).await.unwrap();
    let mut off = 1;
    let (_ss, mut sr) = hang("accept", s.accept_bi()).await.unwrap();

    // The server does not read yet: flow control blocks the writer, and
    // the blocked write is dropped by its timeout.
    let mut cancelled = 0;
    while off < data.len() && cancelled < 3 {
        let write = AsyncWriteExt::write(&mut cs, &data[off..]);
        match spargio::time::timeout(Duration::from_millis(20), write).await {
            Ok(Ok(n)) => off += n,
            Ok(Err(e)) => panic!("write failed: {e}"),
            Err(_) => cancelled += 1,
        }
    }
    assert_eq!(cancelled, 3, "flow control never blocked a 4 MiB write");
    assert!(off < data.len());

    // The rest through fresh writes; the reader gets exactly `data`.
    let rest = data[off..].to_vec();
    let writer = async {
        AsyncWriteExt::write_all(&mut cs, &rest)
            .await
            .expect("write after cancel");
        cs.close().await.expect("close");
    };
    let reader = async {
        let mut got = Vec::new();
        AsyncReadExt::read_to_end(&mut sr, &mut got)
            .await
            .expect("read");
        got
    };
    let ((), got) = hang("transfer after cancel", join(writer, reader)).await;
    assert_eq!(got.len(), data.len());
    assert_eq!(checksum(&got), checksum(&data));
}

#[spargio::test(shards = 2)]
async fn pending_polls_keep_one_waiter_per_stream_direction(handle: RuntimeHandle) {
    use futures_util::io::{AsyncRead, AsyncWrite};
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, native());
    // A small bound: a poll that registered a new waiter each time would
    // hit it (WouldBlock) long before the loops end.
    let client = client(&handle, &certs, None, native().with_max_inflight_ops(4));
    let (c, s) = pair(&client, &server).await;
    let (mut cs, mut cr) = c.open_bi().await.unwrap();
    cs.write_all(b"x").await.unwrap();
    let (_ss, _sr) = hang("accept", s.accept_bi()).await.unwrap();
    let base = waiting_ops(&client, &c);
    let mut cx = noop_cx();

    // Read side: the server sends nothing, so every poll waits.
    let mut buf = [0u8; 64];
    for _ in 0..1000 {
        match Pin::new(&mut cr).poll_read(&mut cx, &mut buf) {
            Poll::Pending => {}
            other => panic!("poll_read gave {other:?}"),
        }
        let mut rb = tokio::io::ReadBuf::new(&mut buf);
        match tokio::io::AsyncRead::poll_read(Pin::new(&mut cr), &mut cx, &mut rb) {
            Poll::Pending => {}
            other => panic!("tokio poll_read gave {other:?}"),
        }
    }
    assert_eq!(waiting_ops(&client, &c), base + 1);
    // Inherent reads dropped mid-wait take their registration with them.
    for _ in 0..1000 {
        let mut fut = pin!(cr.read_chunk(64));
        assert!(fut.as_mut().poll(&mut cx).is_pending());
    }
    assert_eq!(waiting_ops(&client, &c), base);
    assert!(Pin::new(&mut cr).poll_read(&mut cx, &mut buf).is_pending());
    assert_eq!(waiting_ops(&client, &c), base + 1);

    // Write side: fill the stream's flow-control window (the server
    // does not read), then keep polling.
    let chunk = vec![1u8; 64 * 1024];
    let mut written = 0usize;
    loop {
        match Pin::new(&mut cs).poll_write(&mut cx, &chunk) {
            Poll::Ready(Ok(n)) => written += n,
            Poll::Pending => break,
            Poll::Ready(Err(e)) => panic!("poll_write: {e}"),
        }
        assert!(written < 64 * MIB, "flow control never blocked");
    }
    let mut pending = true;
    for _ in 0..1000 {
        // Credit may arrive in between (`Ready`); that is no new waiter.
        let futures_poll = Pin::new(&mut cs).poll_write(&mut cx, &chunk);
        let tokio_poll = tokio::io::AsyncWrite::poll_write(Pin::new(&mut cs), &mut cx, &chunk);
        for p in [futures_poll, tokio_poll] {
            match p {
                Poll::Pending => pending = true,
                Poll::Ready(Ok(n)) => {
                    written += n;
                    pending = false;
                }
                Poll::Ready(Err(e)) => panic!("poll_write: {e}"),
            }
        }
    }
    assert!(written > 0);
    assert_eq!(waiting_ops(&client, &c), base + 1 + usize::from(pending));
    // Inherent writes dropped mid-wait release the write registration.
    for _ in 0..1000 {
        let mut fut = pin!(cs.write(&chunk));
        if let Poll::Ready(r) = fut.as_mut().poll(&mut cx) {
            r.expect("write");
        }
    }
    assert_eq!(waiting_ops(&client, &c), base + 1);

    // Dropping a stream releases a registration a trait poll left.
    let pending = Pin::new(&mut cs).poll_write(&mut cx, &chunk).is_pending();
    assert_eq!(waiting_ops(&client, &c), base + 1 + usize::from(pending));
    drop(cr);
    assert_eq!(waiting_ops(&client, &c), base + usize::from(pending));
    drop(cs);
    assert_eq!(waiting_ops(&client, &c), base);
}

#[spargio::test(shards = 2)]
async fn the_bridge_backend_round_trips_through_both_traits(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, native());
    let bridge = native().with_backend(QuicBackend::Bridge);
    let client = client(&handle, &certs, None, bridge);
    assert_eq!(client.backend(), QuicBackend::Bridge);
    let (c, s) = pair(&client, &server).await;
    echo_with_futures_copy(&handle, s);

    // futures_io out, tokio in.
    let a = pattern(300_000, 45);
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    // Poll-based I/O calls quinn's poll functions on this task: no task
    // is spawned on the bridge runtime for it (no other test in this
    // binary uses the bridge).
    let spawns = bridge_runtime_spawn_count();
    let (n, back) = hang(
        "bridge futures -> tokio",
        join(
            futures_write(&mut send, a.clone()),
            tokio_read_all(&mut recv),
        ),
    )
    .await;
    assert_eq!(n, a.len() as u64);
    assert_eq!(checksum(&back), checksum(&a));
    assert_eq!(bridge_runtime_spawn_count(), spawns);

    // tokio out, futures_io in.
    let b = pattern(300_000, 46);
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    let ((), back) = hang(
        "bridge tokio -> futures",
        join(tokio_write(&mut send, &b), futures_read_all(&mut recv)),
    )
    .await;
    assert_eq!(back.len(), b.len());
    assert_eq!(checksum(&back), checksum(&b));
}
