//! Stream reset, stop and connection close all have the kind
//! `ConnectionReset`; the `QuicError` inside the `io::Error` says which,
//! with its code (issue 26), on both backends.

mod common;
mod support;

use std::io;

use spargio::RuntimeHandle;
use spargio_quic::{
    connection_error, quic_error, stream_error_code, ConnectionError, QuicBackend,
    QuicEndpointOptions, QuicError,
};

use common::*;
use support::*;

async fn reset_stop_close(handle: &RuntimeHandle, options: QuicEndpointOptions) {
    let certs = TestCerts::generate();
    let server = server(handle, &certs, None, QuicEndpointOptions::default());
    let client = client(handle, &certs, None, options);
    let (c, s) = pair(&client, &server).await;

    // Reset by the peer: the reader (the client) sees `Reset` with the
    // code.
    let mut send = s.open_uni().await.unwrap();
    send.write_all(b"x").await.unwrap();
    let mut recv = hang("accept", c.accept_uni()).await.unwrap();
    send.reset(5).unwrap();
    let err = loop {
        match hang("read", recv.read_chunk(1024)).await {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("a reset stream ended cleanly"),
            Err(e) => break e,
        }
    };
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(
        quic_error(&err),
        Some(&QuicError::Reset { code: 5 }),
        "{err}"
    );
    assert_eq!(stream_error_code(&err), Some(5));

    // Stopped by the peer: the writer (the client) sees `Stopped` with the code.
    let mut send = c.open_uni().await.unwrap();
    send.write_all(b"x").await.unwrap();
    let mut recv = hang("accept", s.accept_uni()).await.unwrap();
    recv.stop(6).unwrap();
    assert_eq!(hang("stopped", send.stopped()).await.unwrap(), Some(6));
    let err = hang("write", send.write_all(b"more")).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(
        quic_error(&err),
        Some(&QuicError::Stopped { code: 6 }),
        "{err}"
    );
    assert_eq!(stream_error_code(&err), Some(6));

    // The peer closes the connection: `Connection` with its close code.
    let (_send, mut recv) = c.open_bi().await.unwrap();
    s.close(9, b"bye");
    let err = hang("read", recv.read_chunk(1024)).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    match quic_error(&err) {
        Some(QuicError::Connection(ConnectionError::ApplicationClosed(close))) => {
            assert_eq!(close.error_code.into_inner(), 9);
            assert_eq!(&close.reason[..], b"bye");
        }
        other => panic!("not a connection close: {other:?} ({err})"),
    }
    assert!(matches!(
        connection_error(&err),
        Some(ConnectionError::ApplicationClosed(_))
    ));
    assert_eq!(stream_error_code(&err), None);
}

#[spargio::test(shards = 2)]
async fn native_reset_stop_and_close_are_told_apart(handle: RuntimeHandle) {
    reset_stop_close(&handle, QuicEndpointOptions::default()).await;
}

#[spargio::test(shards = 2)]
async fn bridge_reset_stop_and_close_are_told_apart(handle: RuntimeHandle) {
    reset_stop_close(
        &handle,
        QuicEndpointOptions::default().with_backend(QuicBackend::Bridge),
    )
    .await;
}
