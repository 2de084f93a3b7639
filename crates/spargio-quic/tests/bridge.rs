//! The bridge backend (quinn on the shared Tokio runtime) behind the same
//! types, against a native peer.

mod common;
mod support;

use std::io;

use bytes::Bytes;
use spargio::RuntimeHandle;
use spargio_quic::{
    bridge_runtime_spawn_count, stream_error_code, ConnectionError, QuicBackend,
    QuicEndpointOptions,
};

use common::*;
use support::*;

fn bridge() -> QuicEndpointOptions {
    QuicEndpointOptions::default().with_backend(QuicBackend::Bridge)
}

fn native() -> QuicEndpointOptions {
    QuicEndpointOptions::default()
}

#[spargio::test(shards = 2)]
async fn bridge_client_against_native_server(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, native());
    let client = client(&handle, &certs, None, bridge());
    assert_eq!(client.backend(), QuicBackend::Bridge);
    assert!(client.drivers().is_empty());
    let spawns_before = bridge_runtime_spawn_count();
    let (c, s) = pair(&client, &server).await;

    // bi: the native server echoes.
    let echo = handle
        .spawn_stealable(async move {
            let (mut send, mut recv) = s.accept_bi().await.unwrap();
            let data = recv.read_to_end(1 << 20).await.unwrap();
            send.write_all(&data).await.unwrap();
            send.finish().unwrap();
            let mut uni = s.accept_uni().await.unwrap();
            let got = uni.read_to_end(1 << 20).await.unwrap();
            let d = s.read_datagram().await.unwrap();
            s.send_datagram(d).unwrap();
            (checksum(&got), s.closed().await)
        })
        .unwrap();
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    let msg = pattern(100_000, 1);
    send.write_bytes(Bytes::from(msg.clone())).await.unwrap();
    send.finish().unwrap();
    assert_eq!(hang("echo", recv.read_to_end(1 << 20)).await.unwrap(), msg);

    let mut uni = c.open_uni().await.unwrap();
    uni.write_all(&pattern(10_000, 2)).await.unwrap();
    uni.finish().unwrap();
    // Wait until the server has the whole uni stream before the datagram.
    assert_eq!(hang("uni acked", uni.stopped()).await.unwrap(), None);
    c.send_datagram(Bytes::from_static(b"dgram")).unwrap();
    assert_eq!(
        &hang("datagram", c.read_datagram()).await.unwrap()[..],
        b"dgram"
    );

    c.close(12, b"bridge bye");
    let (uni_sum, closed) = hang("server", echo).await.unwrap();
    assert_eq!(uni_sum, checksum(&pattern(10_000, 2)));
    match closed {
        ConnectionError::ApplicationClosed(a) => {
            assert_eq!(a.error_code.into_inner(), 12);
            assert_eq!(&a.reason[..], b"bridge bye");
        }
        other => panic!("unexpected close {other:?}"),
    }
    assert!(bridge_runtime_spawn_count() > spawns_before);
    assert!(client.metrics().snapshot().bridge_ops_dispatched > 0);
}

#[spargio::test(shards = 2)]
async fn bridge_server_against_native_client(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    let server = server(&handle, &certs, None, bridge());
    let client = client(&handle, &certs, None, native());
    let (c, s) = pair(&client, &server).await;

    // 10 MiB with checksum, native client -> bridge server.
    let sink = handle
        .spawn_stealable(async move {
            let (mut send, mut recv) = s.accept_bi().await.unwrap();
            let (len, sum) = recv_checksum(&mut recv).await;
            send.write_all(&sum.to_le_bytes()).await.unwrap();
            send.finish().unwrap();
            // Then reset the next stream the client opens.
            let (mut send, mut recv) = s.accept_bi().await.unwrap();
            let _ = recv.read_chunk(1024).await;
            send.reset(17).unwrap();
            s.closed().await;
            len
        })
        .unwrap();
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    let sent = hang("upload", send_pattern(&mut send, 10 * MIB, 3)).await;
    assert_eq!(
        hang("checksum", recv.read_to_end(8)).await.unwrap(),
        sent.to_le_bytes()
    );
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    send.write_all(b"reset me").await.unwrap();
    let err = hang("reset", async {
        loop {
            match recv.read_chunk(1024).await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("FIN instead of reset"),
                Err(e) => break e,
            }
        }
    })
    .await;
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(stream_error_code(&err), Some(17));
    c.close(0, b"");
    assert_eq!(hang("sink", sink).await.unwrap(), (10 * MIB) as u64);
}

#[test]
fn legacy_run_executes_on_the_bridge_runtime() {
    let out = spargio::block_on(spargio_quic::run(async {
        tokio::runtime::Handle::current().runtime_flavor()
    }))
    .unwrap();
    assert_eq!(out, tokio::runtime::RuntimeFlavor::MultiThread);
    let slow = spargio_quic::run_with_options(
        spargio_quic::QuicOptions {
            timeout: Some(std::time::Duration::from_millis(10)),
        },
        std::future::pending::<()>(),
    );
    assert_eq!(
        spargio::block_on(slow).unwrap_err().kind(),
        io::ErrorKind::TimedOut
    );
}
