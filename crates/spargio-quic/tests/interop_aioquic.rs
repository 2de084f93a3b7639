//! Interop with Python aioquic (PyPI), an implementation no one here
//! wrote: aioquic client against our server, our client against the
//! aioquic server (C's scripts in `tests/py/`). Each test checks for
//! aioquic before building its runtime: skipped where it is missing,
//! failed there under `SPARGIO_REQUIRE_PEERS=1` (`.ci/run` installs it
//! and sets that).

mod common;
mod support;

use bytes::Bytes;
use spargio::{RuntimeBuilder, RuntimeHandle};
use spargio_quic::{ConnectionError, QuicConnection, QuicEndpointOptions};
use spargio_test_peers::{require_peer, Peer};

use common::aioquic::stdout_lines;
use common::*;
use support::*;

/// Runs `test` on shard 0 of a fresh 2-shard runtime, as
/// `#[spargio::test(shards = 2)]` does; the tests call it after their peer
/// check, so a skip builds no runtime.
fn on_runtime<F, Fut>(test: F)
where
    F: FnOnce(RuntimeHandle) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let builder = RuntimeBuilder::new().shards(2);
    spargio::block_on(spargio::run_local_on(builder, 0, |ctx| test(ctx.handle())))
        .expect("spargio runtime failed to start");
}

fn opts() -> QuicEndpointOptions {
    QuicEndpointOptions::default()
}

/// Our server side of one connection: answer each bi stream per `mode`
/// ("echo", "sink", or "close": close 42 "bye" after the first stream),
/// then report how the connection ended.
fn serve(handle: &RuntimeHandle, conn: QuicConnection, mode: &'static str) {
    handle
        .spawn_stealable(async move {
            while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                let Ok(data) = recv.read_to_end(16 * MIB).await else {
                    continue;
                };
                match mode {
                    "echo" => {
                        let _ = send.write_all(&data).await;
                    }
                    "sink" => {
                        let _ = send.write_all(&checksum(&data).to_le_bytes()).await;
                    }
                    _ => {
                        conn.close(42, b"bye");
                        break;
                    }
                }
                let _ = send.finish();
            }
        })
        .unwrap();
}

#[test]
fn aioquic_client_echo_and_close_reason_against_our_server() {
    require_peer!(Peer::PythonAioquic);
    on_runtime(|handle| async move {
        let certs = TestCerts::generate();
        let server = server(&handle, &certs, None, opts());
        let addr = server.local_addr().unwrap();
        let (out, conn) = join(
            run_aioquic_client(
                addr,
                &certs,
                "spargio-test",
                &["--mode", "echo", "--bytes", "300000", "--seed", "4"],
            ),
            async {
                let conn = server.accept().await.unwrap();
                serve(&handle, conn.clone(), "echo");
                conn
            },
        )
        .await;
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            stdout_lines(&out),
            vec![
                "ALPN spargio-test".to_string(),
                format!("OK echo 300000 {}", checksum(&pattern(300_000, 4)))
            ]
        );
        assert_eq!(conn.alpn().as_deref(), Some(ALPN));
        // The aioquic client closed with code 0, reason "done".
        match hang("closed()", conn.closed()).await {
            ConnectionError::ApplicationClosed(c) => {
                assert_eq!(c.error_code.into_inner(), 0);
                assert_eq!(&c.reason[..], b"done");
            }
            other => panic!("unexpected close {other:?}"),
        }
    });
}

#[test]
fn aioquic_client_uploads_to_our_server() {
    require_peer!(Peer::PythonAioquic);
    on_runtime(|handle| async move {
        let certs = TestCerts::generate();
        let server = server(&handle, &certs, None, opts());
        let addr = server.local_addr().unwrap();
        let (out, _conn) = join(
            run_aioquic_client(
                addr,
                &certs,
                "spargio-test",
                &["--mode", "upload", "4194304"],
            ),
            async {
                let conn = server.accept().await.unwrap();
                serve(&handle, conn.clone(), "sink");
                conn
            },
        )
        .await;
        assert!(out.status.success(), "{out:?}");
        let want = checksum(&pattern(4 * MIB, 1));
        assert_eq!(stdout_lines(&out)[1], format!("OK upload 4194304 {want}"));
    });
}

#[test]
fn aioquic_client_sees_our_close_reason() {
    require_peer!(Peer::PythonAioquic);
    on_runtime(|handle| async move {
        let certs = TestCerts::generate();
        let server = server(&handle, &certs, None, opts());
        let addr = server.local_addr().unwrap();
        let (out, _conn) = join(
            run_aioquic_client(addr, &certs, "spargio-test", &["--mode", "close"]),
            async {
                let conn = server.accept().await.unwrap();
                serve(&handle, conn.clone(), "close");
                conn
            },
        )
        .await;
        assert!(out.status.success(), "{out:?}");
        assert!(
            stdout_lines(&out).contains(&"CLOSED 42 bye".to_string()),
            "{out:?}"
        );
    });
}

#[test]
fn our_client_streams_and_datagrams_against_aioquic_echo() {
    require_peer!(Peer::PythonAioquic);
    on_runtime(|handle| async move {
        let certs = TestCerts::generate();
        let peer = AioquicServer::start(&certs, AioquicMode::Echo);
        let ep = client(&handle, &certs, None, opts());
        let conn = hang("connect", ep.connect(peer.addr(), SERVER_NAME))
            .await
            .unwrap();
        assert_eq!(conn.alpn().as_deref(), Some(ALPN));

        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let data = pattern(MIB, 12);
        send.write_bytes(Bytes::from(data.clone())).await.unwrap();
        send.finish().unwrap();
        let back = hang("bi echo", recv.read_to_end(2 * MIB)).await.unwrap();
        assert_eq!(checksum(&back), checksum(&data));

        let mut uni = conn.open_uni().await.unwrap();
        uni.write_all(&pattern(50_000, 13)).await.unwrap();
        uni.finish().unwrap();
        let mut back = hang("uni echo", conn.accept_uni()).await.unwrap();
        assert_eq!(back.read_to_end(MIB).await.unwrap(), pattern(50_000, 13));

        let d = Bytes::from_static(b"datagram to aioquic");
        conn.send_datagram(d.clone()).unwrap();
        assert_eq!(hang("datagram", conn.read_datagram()).await.unwrap(), d);
        conn.close(0, b"done");
    });
}

#[test]
fn our_client_uploads_to_aioquic_and_sees_its_close() {
    require_peer!(Peer::PythonAioquic);
    on_runtime(|handle| async move {
        let certs = TestCerts::generate();
        let sink = AioquicServer::start(&certs, AioquicMode::Sink);
        let ep = client(&handle, &certs, None, opts());
        let conn = hang("connect", ep.connect(sink.addr(), SERVER_NAME))
            .await
            .unwrap();
        let (mut send, mut recv) = conn.open_bi().await.unwrap();
        let sent = hang("upload", send_pattern(&mut send, 4 * MIB, 21)).await;
        assert_eq!(
            hang("checksum", recv.read_to_end(8)).await.unwrap(),
            sent.to_le_bytes()
        );

        let closer = AioquicServer::start(&certs, AioquicMode::Close);
        let conn = hang("connect", ep.connect(closer.addr(), SERVER_NAME))
            .await
            .unwrap();
        let (mut send, _recv) = conn.open_bi().await.unwrap();
        send.write_all(b"hello").await.unwrap();
        send.finish().unwrap();
        match hang("closed()", conn.closed()).await {
            ConnectionError::ApplicationClosed(c) => {
                assert_eq!(c.error_code.into_inner(), 42);
                assert_eq!(&c.reason[..], b"bye");
            }
            other => panic!("unexpected close {other:?}"),
        }
    });
}
