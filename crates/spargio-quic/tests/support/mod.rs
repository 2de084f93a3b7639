//! Helpers for spargio-quic's own tests: endpoints of ours built from the
//! shared test certificates (`common::TestCerts`), a hang guard, and the
//! data exchange the tests repeat.
#![allow(dead_code)]

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use spargio::RuntimeHandle;
use spargio_quic::{
    QuicConnection, QuicEndpoint, QuicEndpointOptions, QuicRecvStream, QuicSendStream,
};

use crate::common::{checksum, Checksum, TestCerts, ALPN, HANG, SERVER_NAME};

pub const MIB: usize = 1024 * 1024;

pub fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Fails the test instead of hanging it (a "must not hang" bound, not a
/// performance assertion).
pub async fn hang<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match spargio::time::timeout(HANG, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: did not finish within {HANG:?}"),
    }
}

/// A server endpoint of ours with `options`.
pub fn server(
    handle: &RuntimeHandle,
    certs: &TestCerts,
    idle: Option<Duration>,
    options: QuicEndpointOptions,
) -> QuicEndpoint {
    QuicEndpoint::server_with_options(
        handle,
        localhost(),
        certs.quinn_server_config(&[ALPN], idle),
        options,
    )
    .expect("server endpoint")
}

/// A client endpoint of ours, configured to trust `certs`.
pub fn client(
    handle: &RuntimeHandle,
    certs: &TestCerts,
    idle: Option<Duration>,
    options: QuicEndpointOptions,
) -> QuicEndpoint {
    let ep = QuicEndpoint::client_with_options(handle, localhost(), options).expect("client");
    ep.set_default_client_config(certs.quinn_client_config(&[ALPN], idle));
    ep
}

/// Connects `client` to `server` and accepts on `server`.
pub async fn pair(
    client: &QuicEndpoint,
    server: &QuicEndpoint,
) -> (QuicConnection, QuicConnection) {
    let addr = server.local_addr().unwrap();
    let (c, s) = hang("connect+accept", async {
        let accept = server.accept();
        let connect = client.connect(addr, SERVER_NAME);
        join(connect, accept).await
    })
    .await;
    (c.expect("connect"), s.expect("accept"))
}

/// Polls two futures to completion on the current task.
pub async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let mut a = std::pin::pin!(a);
    let mut b = std::pin::pin!(b);
    let mut ra = None;
    let mut rb = None;
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            if let std::task::Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let std::task::Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if ra.is_some() && rb.is_some() {
            std::task::Poll::Ready((ra.take().unwrap(), rb.take().unwrap()))
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

/// Writes `pattern(n, seed)` in 64 KiB `Bytes` chunks, then finishes.
pub async fn send_pattern(send: &mut QuicSendStream, n: usize, seed: u64) -> u64 {
    let data = Bytes::from(crate::common::pattern(n, seed));
    for chunk in data.chunks(64 * 1024) {
        send.write_bytes(data.slice_ref(chunk))
            .await
            .expect("write");
    }
    send.finish().expect("finish");
    checksum(&data)
}

/// Reads to the end with `read_chunk`; returns (length, checksum).
pub async fn recv_checksum(recv: &mut QuicRecvStream) -> (u64, u64) {
    let mut c = Checksum::new();
    while let Some(chunk) = recv.read_chunk(64 * 1024).await.expect("read") {
        c.update(&chunk);
    }
    (c.len(), c.value())
}

/// Open file descriptors of this process.
pub fn fd_count() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}
