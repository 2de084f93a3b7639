//! Dropping the last endpoint handle frees its socket (its own test
//! binary: other tests' sockets would move the count).

mod common;
mod support;

use std::time::Duration;

use spargio::RuntimeHandle;
use spargio_quic::QuicEndpointOptions;

use common::TestCerts;
use support::*;

#[spargio::test(shards = 2)]
async fn dropping_the_endpoints_returns_the_fd_count_to_baseline(handle: RuntimeHandle) {
    let certs = TestCerts::generate();
    // Warm up anything lazily created (the runtime's blocking pool, rustls
    // providers) so the baseline is stable.
    {
        let server = server(&handle, &certs, None, QuicEndpointOptions::default());
        let client = client(&handle, &certs, None, QuicEndpointOptions::default());
        let (c, _s) = pair(&client, &server).await;
        c.close(0, b"");
    }
    wait_for_fds(None).await;
    let baseline = fd_count();

    let server = server(&handle, &certs, None, QuicEndpointOptions::default());
    let client = client(&handle, &certs, None, QuicEndpointOptions::default());
    // Two server sockets (one per shard) and one client socket.
    assert!(fd_count() >= baseline + 3);
    let (c, s) = pair(&client, &server).await;
    let (mut send, mut recv) = c.open_bi().await.unwrap();
    send.write_all(b"ping").await.unwrap();
    send.finish().unwrap();
    let (mut s_send, mut s_recv) = s.accept_bi().await.unwrap();
    assert_eq!(s_recv.read_to_end(16).await.unwrap(), b"ping");
    s_send.write_all(b"pong").await.unwrap();
    s_send.finish().unwrap();
    assert_eq!(recv.read_to_end(16).await.unwrap(), b"pong");

    drop((send, recv, s_send, s_recv, c, s));
    drop(client);
    drop(server);
    wait_for_fds(Some(baseline)).await;
    assert_eq!(fd_count(), baseline);
}

/// Waits (bounded) for the count to reach `target`, or to stop changing.
async fn wait_for_fds(target: Option<usize>) {
    let mut last = fd_count();
    for _ in 0..500 {
        spargio::time::sleep(Duration::from_millis(10)).await;
        let now = fd_count();
        match target {
            Some(t) if now == t => return,
            None if now == last => return,
            _ => last = now,
        }
    }
}
