//! `QuicConnection::acknowledged`: a connection closed right after it
//! resolves has delivered everything it sent (a close discards what the
//! peer has not acknowledged), on both backends.

mod common;
mod support;

use spargio::RuntimeHandle;
use spargio_quic::{QuicBackend, QuicEndpointOptions};

use common::*;
use support::*;

const STREAMS: usize = 4;
const LEN: usize = 4 * MIB;

async fn close_after_acknowledged(handle: &RuntimeHandle, backend: QuicBackend) {
    let certs = TestCerts::generate();
    let opts = QuicEndpointOptions::default().with_backend(backend);
    let server = server(handle, &certs, None, opts.clone());
    let client = client(handle, &certs, None, opts);
    let (c, s) = pair(&client, &server).await;
    // The client reads every stream to its end on a task of its own.
    let reader = handle
        .spawn_stealable(async move {
            let mut got = Vec::new();
            for _ in 0..STREAMS {
                let mut recv = c.accept_uni().await.expect("accept");
                got.push(recv_checksum(&mut recv).await);
            }
            got
        })
        .unwrap();
    let mut sent = Vec::new();
    for i in 0..STREAMS {
        let mut send = s.open_uni().await.unwrap();
        sent.push((LEN as u64, send_pattern(&mut send, LEN, i as u64).await));
    }
    // Everything is written and finished, most of it not yet delivered.
    hang("acknowledged", s.acknowledged()).await.unwrap();
    s.close(0, b"done");
    let got = hang("reader", reader).await.unwrap();
    assert_eq!(got, sent, "{backend:?}: every stream arrived whole");
    // Nothing is left to acknowledge after the close either.
    hang("acknowledged after close", s.acknowledged())
        .await
        .unwrap();
}

#[spargio::test(shards = 2)]
async fn a_close_right_after_acknowledged_loses_nothing(handle: RuntimeHandle) {
    for backend in [QuicBackend::Native, QuicBackend::Bridge] {
        close_after_acknowledged(&handle, backend).await;
    }
}
