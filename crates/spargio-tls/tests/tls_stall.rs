//! A client that connects and stalls mid-handshake: `accept_with_options`
//! gives `TimedOut`, the server side of the socket is closed, and neither
//! an fd nor a ring operation is left behind (counted over 20 rounds).
//! A test binary of its own: it counts this process's open fds.

mod common;

use std::io;
use std::time::{Duration, Instant};

use common::{pki, run_bounded};
use spargio::io::AsyncRead;
use spargio::net::{TcpListener, TcpStream};
use spargio_tls::{HandshakeOptions, TlsAcceptor};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

/// Waits (up to 5 s) for the fd count to come down to `want`: a dropped
/// stream's fd may be closed by the ring a moment later.
async fn expect_fds(want: usize, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while open_fds() != want {
        assert!(
            Instant::now() < deadline,
            "{what}: {} fds open, expected {want}",
            open_fds()
        );
        spargio::sleep(Duration::from_millis(5)).await;
    }
}

#[test]
fn stalled_handshakes_time_out_without_leaks() {
    let pki = pki("stall", false);
    let acceptor = TlsAcceptor::from_pem(pki.leaf_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap();
    run_bounded(Duration::from_secs(60), move |handle| async move {
        let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let options = HandshakeOptions::default().with_timeout(Duration::from_millis(100));
        let mut baseline = None;
        for round in 0..20 {
            let acceptor = acceptor.clone();
            let mut client = TcpStream::connect_socket_addr(&handle, addr).await.unwrap();
            let (tcp, _) = listener.accept().await.unwrap();
            // The first 5 bytes of a ClientHello record, then nothing.
            client
                .write_all(&[0x16, 0x03, 0x01, 0x02, 0x00])
                .await
                .unwrap();
            if round == 0 {
                // Both ends open now; every later round must come back here.
                baseline = Some(open_fds());
            }

            let start = Instant::now();
            let server = handle
                .spawn_stealable(async move {
                    spargio_tls::accept_with_options(&acceptor, tcp, options).await
                })
                .unwrap();
            let err = server.await.unwrap().unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::TimedOut, "{err}");
            let took = start.elapsed();
            assert!(
                took >= Duration::from_millis(90),
                "timed out early: {took:?}"
            );
            assert!(took < Duration::from_secs(5), "timed out late: {took:?}");

            // The server's socket is closed: the client reads end of stream
            // (or a reset).
            let (res, _) = client.read(vec![0u8; 64]).await;
            match res {
                Ok(0) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
                other => panic!("expected EOF from the closed server side, got {other:?}"),
            }
            expect_fds(baseline.unwrap() - 1, &format!("round {round}: server fd")).await;
            drop(client);
        }
        expect_fds(baseline.unwrap() - 2, "client fd").await;

        // No receive left in flight on any ring, no timer left armed.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let stats = handle.stats_snapshot();
            let ops: usize = stats.shards.iter().map(|s| s.pending_native_ops).sum();
            let timers: usize = stats.shards.iter().map(|s| s.timers_armed).sum();
            if ops == 0 && timers == 0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "left behind: {ops} ring operations, {timers} timers"
            );
            spargio::sleep(Duration::from_millis(10)).await;
        }
    });
}
