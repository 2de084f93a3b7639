//! Stream reset, stop and connection close all have the kind
//! `ConnectionReset`; the `QuicError` inside the `io::Error` says which,
//! with its code (issue 26), on both backends. Codes are QUIC's 62-bit
//! varints: the largest one round-trips, one past it is refused.

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

/// The largest QUIC application error code (2^62 - 1) and codes above
/// 32 bits: all must reach the peer unchanged.
const RESET: u64 = (1 << 62) - 1;
const STOP: u64 = (1 << 40) | 6;
const CLOSE: u64 = (1 << 33) | 9;

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
    let refused = send.reset(1 << 62).unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{refused}");
    send.reset(RESET).unwrap();
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
        Some(&QuicError::Reset { code: RESET }),
        "{err}"
    );
    assert_eq!(stream_error_code(&err), Some(RESET));

    // Stopped by the peer: the writer (the client) sees `Stopped` with the code.
    let mut send = c.open_uni().await.unwrap();
    send.write_all(b"x").await.unwrap();
    let mut recv = hang("accept", s.accept_uni()).await.unwrap();
    let refused = recv.stop(u64::MAX).unwrap_err();
    assert_eq!(refused.kind(), io::ErrorKind::InvalidInput, "{refused}");
    recv.stop(STOP).unwrap();
    assert_eq!(hang("stopped", send.stopped()).await.unwrap(), Some(STOP));
    let err = hang("write", send.write_all(b"more")).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    assert_eq!(
        quic_error(&err),
        Some(&QuicError::Stopped { code: STOP }),
        "{err}"
    );
    assert_eq!(stream_error_code(&err), Some(STOP));

    // The peer closes the connection: `Connection` with its close code.
    let (_send, mut recv) = c.open_bi().await.unwrap();
    s.close(CLOSE, b"bye");
    let err = hang("read", recv.read_chunk(1024)).await.unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::ConnectionReset);
    match quic_error(&err) {
        Some(QuicError::Connection(ConnectionError::ApplicationClosed(close))) => {
            assert_eq!(close.error_code.into_inner(), CLOSE);
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
