//! `QuicRecvStream::read` and `read_exact` into owned buffers (spargio's
//! `AsyncRead`/`AsyncReadExt` shapes), on both backends: a fixed-size
//! header then a body, the end of the stream, and `UnexpectedEof` when
//! the stream finishes inside a `read_exact`.

mod common;
mod support;

use std::io;

use spargio::RuntimeHandle;
use spargio_quic::{QuicBackend, QuicEndpointOptions};

use common::*;
use support::*;

async fn header_then_body(handle: &RuntimeHandle, options: QuicEndpointOptions) {
    let certs = TestCerts::generate();
    let server = server(handle, &certs, None, options.clone());
    let client = client(handle, &certs, None, options);
    let (c, s) = pair(&client, &server).await;

    let body = pattern(100_000, 7);
    let mut send = c.open_uni().await.unwrap();
    send.write_all(&(body.len() as u64).to_le_bytes())
        .await
        .unwrap();
    send.write_all(&body).await.unwrap();
    send.finish().unwrap();

    let mut recv = hang("accept", s.accept_uni()).await.unwrap();
    let (res, header) = hang("header", recv.read_exact(vec![0u8; 8].into_boxed_slice())).await;
    res.unwrap();
    let len = u64::from_le_bytes(header[..].try_into().unwrap()) as usize;
    assert_eq!(len, body.len());
    let (res, got) = hang("body", recv.read_exact(vec![0u8; len])).await;
    res.unwrap();
    assert_eq!(got, body);
    // The end: `read` gives 0 and the buffer back.
    let (res, buf) = hang("eof", recv.read(Vec::with_capacity(16))).await;
    assert_eq!(res.unwrap(), 0);
    assert!(buf.is_empty());

    // A stream that ends inside the header.
    let mut send = c.open_uni().await.unwrap();
    send.write_all(b"abc").await.unwrap();
    send.finish().unwrap();
    let mut recv = hang("accept", s.accept_uni()).await.unwrap();
    let (res, header) = hang("short", recv.read_exact(vec![0u8; 8].into_boxed_slice())).await;
    assert_eq!(res.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    assert_eq!(&header[..3], b"abc");

    // `read` into a `Vec` fills from its start up to its capacity.
    let mut send = c.open_uni().await.unwrap();
    send.write_all(b"hello").await.unwrap();
    send.finish().unwrap();
    let mut recv = hang("accept", s.accept_uni()).await.unwrap();
    let mut all = Vec::new();
    loop {
        let (res, buf) = hang("read", recv.read(Vec::with_capacity(2))).await;
        match res.unwrap() {
            0 => break,
            n => all.extend_from_slice(&buf[..n]),
        }
    }
    assert_eq!(all, b"hello");
    c.close(0, b"done");
}

#[spargio::test(shards = 2)]
async fn native_read_exact_header_then_body(handle: RuntimeHandle) {
    header_then_body(&handle, QuicEndpointOptions::default()).await;
}

#[spargio::test(shards = 2)]
async fn bridge_read_exact_header_then_body(handle: RuntimeHandle) {
    header_then_body(
        &handle,
        QuicEndpointOptions::default().with_backend(QuicBackend::Bridge),
    )
    .await;
}

/// `spargio::io::AsyncReadExt` works on the stream too (its `read_to_end`
/// through the `AsyncRead` impl).
#[spargio::test(shards = 2)]
async fn spargio_async_read_ext(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, QuicEndpointOptions::default());
    let client = client(&handle, &certs, None, QuicEndpointOptions::default());
    let (c, s) = pair(&client, &server).await;
    let data = pattern(50_000, 9);
    let mut send = c.open_uni().await.unwrap();
    send.write_all(&data).await.unwrap();
    send.finish().unwrap();
    let mut recv = hang("accept", s.accept_uni()).await.unwrap();
    let (res, got) = hang(
        "read_to_end",
        spargio::io::AsyncReadExt::read_to_end(&mut recv, Vec::new()),
    )
    .await;
    assert_eq!(res.unwrap(), data.len());
    assert_eq!(got, data);
    c.close(0, b"done");
}
