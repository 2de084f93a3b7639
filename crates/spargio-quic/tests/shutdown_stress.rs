//! Dropping a runtime while QUIC endpoints are mid-transfer on it (their
//! handles still alive, as a benchmark or a careless `main` does) ends:
//! every driver, connection and stream task is dropped, and the runtime's
//! drop returns. Repeated, because the interleavings differ each time.

mod common;
mod support;

use std::time::Duration;

use bytes::Bytes;
use spargio::Runtime;
use spargio_quic::{QuicEndpoint, QuicEndpointOptions};

use common::{TestCerts, ALPN, SERVER_NAME};

fn round(certs: &TestCerts, conns: usize, settle: Duration) {
    let rt = Runtime::builder().shards(2).build().unwrap();
    let h = rt.handle();
    let any = "127.0.0.1:0".parse().unwrap();
    let server = QuicEndpoint::server_with_options(
        &h,
        any,
        certs.quinn_server_config(&[ALPN], None),
        QuicEndpointOptions::default(),
    )
    .unwrap();
    let client =
        QuicEndpoint::client_with_options(&h, any, QuicEndpointOptions::default()).unwrap();
    client.set_default_client_config(certs.quinn_client_config(&[ALPN], None));
    let addr = server.local_addr().unwrap();
    let (ep, h2) = (server.clone(), h.clone());
    h.spawn_stealable(async move {
        while let Ok(conn) = ep.accept().await {
            let spawned = h2.spawn_stealable(async move {
                while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                    while let Ok(Some(chunk)) = recv.read_chunk(usize::MAX).await {
                        if send.write_bytes(chunk).await.is_err() {
                            break;
                        }
                    }
                }
            });
            if spawned.is_err() {
                break;
            }
        }
    })
    .unwrap();
    let data = Bytes::from(vec![7u8; 1 << 20]);
    for _ in 0..conns {
        let (ep, data) = (client.clone(), data.clone());
        let _ = h.spawn_stealable(async move {
            let Ok(conn) = ep.connect(addr, SERVER_NAME).await else {
                return;
            };
            loop {
                let Ok((mut send, mut recv)) = conn.open_bi().await else {
                    return;
                };
                if send.write_bytes(data.clone()).await.is_err() {
                    return;
                }
                let _ = send.finish();
                while let Ok(Some(_)) = recv.read_chunk(usize::MAX).await {}
            }
        });
    }
    std::thread::sleep(settle);
    // The runtime goes first; the endpoints and the server outlive it.
    drop(rt);
    drop((client, server));
}

#[test]
#[ignore = "stress: run with --ignored (about a minute)"]
fn dropping_the_runtime_mid_transfer_always_returns() {
    let certs = TestCerts::generate();
    for i in 0..200u64 {
        let settle = Duration::from_millis(5 + (i * 7) % 60);
        round(&certs, 1 + (i as usize % 16), settle);
    }
}
