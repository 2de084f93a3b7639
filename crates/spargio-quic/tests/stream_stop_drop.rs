//! A send stream the peer stopped, then dropped, is reset with the stop's
//! code, as quinn's `SendStream` does on drop. Without the reset the
//! peer keeps its half of the stream (quinn-proto holds a stopped receive
//! stream until it is finished or reset, to account for flow control), so
//! it never grants the stream's credit back: under a limit of one stream,
//! the next `open_bi` waited until the connection idled out. Found by the
//! QUIC torture (`tests/quic_torture.rs`, seed 17620701320672039782:
//! `open_bi` hung under a stream limit of 1).
//!
//! On the way: `finish` after the stop is an error on both backends, as
//! its rustdoc says (quinn's own `finish` returns `Ok` for a stopped
//! stream and sends nothing; the bridge passed that on).

mod common;
mod support;

use std::sync::Arc;
use std::time::Duration;

use quinn::VarInt;
use spargio::RuntimeHandle;
use spargio_quic::{stream_error_code, QuicBackend, QuicEndpoint, QuicEndpointOptions};

use common::certs::transport;
use common::*;
use support::*;

/// The server's stop code.
const STOP: u64 = 9;
/// Far below the 30 s idle timeout the open waited for before the fix; a
/// hang bound, not a performance assertion.
const PROMPT: Duration = Duration::from_secs(10);

/// A server granting one bidirectional stream at a time.
fn one_stream_server(handle: &RuntimeHandle, certs: &TestCerts) -> QuicEndpoint {
    let mut config = certs.quinn_server_config(&[ALPN], Some(Duration::from_secs(30)));
    let mut t = transport(Some(Duration::from_secs(30)));
    t.max_concurrent_bidi_streams(VarInt::from_u32(1));
    config.transport_config(Arc::new(t));
    QuicEndpoint::server_with_options(handle, localhost(), config, QuicEndpointOptions::default())
        .expect("server endpoint")
}

async fn stopped_stream_dropped_frees_its_credit(
    handle: &RuntimeHandle,
    options: QuicEndpointOptions,
) {
    let certs = TestCerts::generate();
    let server = one_stream_server(handle, &certs);
    let client = client(handle, &certs, Some(Duration::from_secs(30)), options);
    let (c, s) = pair(&client, &server).await;

    let (mut send, mut recv) = c.open_bi().await.expect("open the only stream");
    send.write_all(b"first").await.expect("write");
    let (mut s_send, mut s_recv) = hang("accept", s.accept_bi()).await.expect("accept");
    s_recv.stop(STOP).expect("stop");
    s_send.finish().expect("finish the server's half");
    // The stop reaches the writer; it gives up on the stream.
    let err = hang("write until stopped", async {
        loop {
            if let Err(e) = send.write(&[0u8; 1024]).await {
                break e;
            }
        }
    })
    .await;
    assert_eq!(stream_error_code(&err), Some(STOP), "{err:?}");
    assert!(send.finish().is_err(), "finish after a stop");
    drop(send);
    assert_eq!(
        hang("read the server's FIN", recv.read_to_end(64))
            .await
            .unwrap(),
        b""
    );
    drop(recv);
    drop((s_send, s_recv));

    let second = spargio::time::timeout(PROMPT, c.open_bi()).await;
    let (mut send, _recv) = second
        .expect("the second open waited: the stopped stream was never reset")
        .expect("open the second stream");
    send.write_all(b"second").await.expect("write");
    send.finish().expect("finish");
    let (_s_send, mut s_recv) = hang("accept the second", s.accept_bi())
        .await
        .expect("accept");
    assert_eq!(
        hang("read", s_recv.read_to_end(64)).await.unwrap(),
        b"second"
    );
}

#[spargio::test(shards = 2)]
async fn native_stopped_stream_dropped_frees_its_credit(handle: RuntimeHandle) {
    stopped_stream_dropped_frees_its_credit(&handle, QuicEndpointOptions::default()).await;
}

#[spargio::test(shards = 2)]
async fn bridge_stopped_stream_dropped_frees_its_credit(handle: RuntimeHandle) {
    let options = QuicEndpointOptions::default().with_backend(QuicBackend::Bridge);
    stopped_stream_dropped_frees_its_credit(&handle, options).await;
}
