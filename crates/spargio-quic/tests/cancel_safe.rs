//! A timeout (or `select!`) around a stream operation costs that
//! operation only: the stream, and every byte already written or not yet
//! read, stays usable, on both backends (issue 26: the bridge moved the
//! stream into a task on its Tokio runtime and lost it when the awaiting
//! future was dropped).

mod common;
mod support;

use std::time::Duration;

use spargio::RuntimeHandle;
use spargio_quic::{QuicBackend, QuicEndpointOptions};

use common::*;
use support::*;

/// Long enough for nothing to arrive: no peer action is pending.
const SHORT: Duration = Duration::from_millis(50);

async fn timeouts_lose_nothing(handle: &RuntimeHandle, options: QuicEndpointOptions) {
    let certs = TestCerts::generate();
    let server = server(handle, &certs, None, QuicEndpointOptions::default());
    let client = client(handle, &certs, None, options);
    let (c, s) = pair(&client, &server).await;

    // Accept with nothing to accept: times out; the stream opened after
    // it is accepted by the next call.
    assert!(spargio::time::timeout(SHORT, c.accept_bi()).await.is_err());
    let (mut s_send, mut s_recv) = s.open_bi().await.unwrap();
    s_send.write_all(b"opened").await.unwrap();
    let (mut c_send, mut c_recv) = hang("accept", c.accept_bi()).await.unwrap();

    // A read with nothing to read: times out; the bytes behind it arrive
    // in order on the same stream.
    assert_eq!(
        hang("read", c_recv.read_chunk(64))
            .await
            .unwrap()
            .as_deref(),
        Some(&b"opened"[..])
    );
    assert!(spargio::time::timeout(SHORT, c_recv.read_chunk(64))
        .await
        .is_err());
    s_send.write_all(b" and more").await.unwrap();
    s_send.finish().unwrap();
    let rest = hang("read", c_recv.read_to_end(1024)).await.unwrap();
    assert_eq!(rest, b" and more");

    // A write blocked on the peer's flow control (the peer reads nothing):
    // times out; the stream still takes writes, and the peer receives a
    // prefix of the first write followed by the second, complete.
    let big = pattern(32 * MIB, 7);
    if let Ok(res) = spargio::time::timeout(SHORT, c_send.write_all(&big)).await {
        panic!("32 MiB fit in the peer's window: {res:?}");
    }
    // The peer's window is full: it reads while the tail goes out.
    let (wrote, got) = hang(
        "write after the timeout",
        join(
            async {
                c_send.write_all(b"tail").await?;
                c_send.finish()
            },
            s_recv.read_to_end(64 * MIB),
        ),
    )
    .await;
    wrote.expect("the stream survives a timed-out write");
    let got = got.unwrap();
    assert!(got.len() > 4, "the timed-out write sent nothing");
    let (head, tail) = got.split_at(got.len() - 4);
    assert_eq!(tail, b"tail");
    assert!(
        big.starts_with(head),
        "the bytes before the tail are a prefix of the first write"
    );

    // `stopped` with no stop coming: times out; the stop sent later is
    // seen by the next call.
    let mut c_send = c.open_uni().await.unwrap();
    c_send.write_all(b"x").await.unwrap();
    let mut s_recv = hang("accept", s.accept_uni()).await.unwrap();
    assert!(spargio::time::timeout(SHORT, c_send.stopped())
        .await
        .is_err());
    s_recv.stop(3).unwrap();
    assert_eq!(hang("stopped", c_send.stopped()).await.unwrap(), Some(3));
}

#[spargio::test(shards = 2)]
async fn native_stream_operations_survive_timeouts(handle: RuntimeHandle) {
    timeouts_lose_nothing(&handle, QuicEndpointOptions::default()).await;
}

#[spargio::test(shards = 2)]
async fn bridge_stream_operations_survive_timeouts(handle: RuntimeHandle) {
    timeouts_lose_nothing(
        &handle,
        QuicEndpointOptions::default().with_backend(QuicBackend::Bridge),
    )
    .await;
}
