//! The interop peers checked against each other before any test of ours
//! relies on them: quinn client against the quinn server behaviours,
//! aioquic client against the quinn server, quinn client against the
//! aioquic server. Nothing from `spargio_quic` is used here; the futures
//! are driven by `spargio::block_on` to show they need no tokio context
//! on the caller's side.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::aioquic::stdout_lines;
use common::*;
use spargio_test_peers::{require_peer, Peer};

const MIB: usize = 1024 * 1024;

fn block_on<F: std::future::Future>(fut: F) -> F::Output {
    spargio::block_on(fut)
}

async fn client(server: &QuinnServer, certs: &TestCerts) -> QuinnClient {
    QuinnClient::connect(server.addr, certs, ALPN)
        .await
        .expect("quinn client connects to quinn server")
}

// ===== data =====

#[test]
fn checksum_is_fnv1a_64() {
    assert_eq!(checksum(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(checksum(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(checksum(b"foobar"), 0x8594_4171_f739_67e8);
    let mut c = Checksum::new();
    c.update(b"foo");
    c.update(b"bar");
    assert_eq!((c.value(), c.len()), (checksum(b"foobar"), 6));
}

#[test]
fn pattern_is_splitmix64_le() {
    // splitmix64 seeded with 0: first output 0xe220a8397b1dcdaf.
    assert_eq!(pattern(8, 0), 0xe220_a839_7b1d_cdafu64.to_le_bytes());
    assert_eq!(pattern(13, 5), pattern(20, 5)[..13]);
    assert_ne!(pattern(64, 1), pattern(64, 2));
}

#[test]
fn python_data_matches_rust() {
    require_peer!(Peer::Python);
    let out = std::process::Command::new("python3")
        .current_dir(common::aioquic::py_script(""))
        .args([
            "-c",
            "from quic_data import pattern, checksum; \
             print(checksum(pattern(100003, 7)), checksum(pattern(5, 0)))",
        ])
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
    let want = format!(
        "{} {}",
        checksum(&pattern(100_003, 7)),
        checksum(&pattern(5, 0))
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), want);
}

// ===== quinn client against quinn server =====

#[test]
fn echo_bi_10mib() {
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::Echo);
    block_on(async {
        let c = client(&server, &certs).await;
        assert_eq!(c.alpn().as_deref(), Some(ALPN));
        let data = pattern(10 * MIB, 11);
        let back = c.bi_roundtrip(data.clone()).await.unwrap();
        assert_eq!((back.len(), checksum(&back)), (data.len(), checksum(&data)));
        let o = server.wait_until(|o| !o.streams.is_empty()).await.unwrap();
        assert_eq!(
            o.streams[0],
            StreamRecord {
                kind: StreamKind::Bi,
                bytes: (10 * MIB) as u64,
                checksum: checksum(&data),
                end: StreamEnd::Finished,
            }
        );
    });
}

#[test]
fn sink_answers_checksum_of_10mib_upload() {
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::Sink);
    block_on(async {
        let c = client(&server, &certs).await;
        let sum = c.upload(10 * MIB, 3).await.unwrap();
        assert_eq!(sum, checksum(&pattern(10 * MIB, 3)));
    });
}

#[test]
fn sink_records_uni_streams() {
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::Sink);
    block_on(async {
        let c = client(&server, &certs).await;
        c.send_uni(MIB, 4).await.unwrap();
        c.send_uni(1000, 5).await.unwrap();
        let o = server.wait_until(|o| o.streams.len() == 2).await.unwrap();
        let mut got: Vec<_> = o
            .streams
            .iter()
            .map(|s| (s.kind, s.bytes, s.checksum))
            .collect();
        got.sort_by_key(|s| s.1);
        assert_eq!(
            got,
            vec![
                (StreamKind::Uni, 1000, checksum(&pattern(1000, 5))),
                (StreamKind::Uni, MIB as u64, checksum(&pattern(MIB, 4))),
            ]
        );
    });
}

#[test]
fn echo_uni_comes_back_on_a_server_uni_stream() {
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::Echo);
    block_on(async {
        let c = client(&server, &certs).await;
        c.send_uni(300_000, 6).await.unwrap();
        let back = c.accept_uni().await.unwrap();
        assert_eq!(checksum(&back), checksum(&pattern(300_000, 6)));
    });
}

#[test]
fn source_sends_seeded_pattern() {
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::Source(10 * MIB));
    block_on(async {
        let c = client(&server, &certs).await;
        let got = c.fetch(10 * MIB, 99).await.unwrap();
        assert_eq!(got.len(), 10 * MIB);
        // A wrong expectation is caught, not passed through.
        let err = c.fetch(10 * MIB, 98).await.map(|_| ());
        assert!(err.is_ok(), "seed 98 is served too: {err:?}");
        let err = c.fetch(MIB, 98).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    });
}

#[test]
fn datagram_echo() {
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::DatagramEcho);
    block_on(async {
        let c = client(&server, &certs).await;
        let payload = Bytes::from(pattern(1000, 8));
        let back = c.datagram_roundtrip(payload.clone()).await.unwrap();
        assert_eq!(back, payload);
        assert!(server.observed().datagrams >= 1);
    });
}

#[test]
fn server_close_reason_reaches_client() {
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::CloseWith(7, "go away".into()));
    block_on(async {
        let c = client(&server, &certs).await;
        assert_eq!(
            c.closed_reason().await,
            Closed::Application {
                code: 7,
                reason: "go away".into()
            }
        );
    });
}

#[test]
fn client_close_reason_reaches_server() {
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::Echo);
    block_on(async {
        let c = client(&server, &certs).await;
        c.close(3, "bye now").await;
        assert_eq!(c.closed_reason().await, Closed::Locally);
        let o = server.wait_until(|o| !o.closes.is_empty()).await.unwrap();
        assert_eq!(
            o.closes,
            vec![Closed::Application {
                code: 3,
                reason: "bye now".into()
            }]
        );
    });
}

#[test]
fn server_resets_first_stream_only() {
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::ResetStream(9));
    block_on(async {
        let c = client(&server, &certs).await;
        assert_eq!(c.expect_reset(pattern(5000, 1)).await.unwrap(), 9);
        let data = pattern(5000, 2);
        assert_eq!(c.bi_roundtrip(data.clone()).await.unwrap(), data);
        // A stream that finishes is reported as such by expect_reset.
        let err = c.expect_reset(pattern(10, 3)).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    });
}

#[test]
fn client_reset_is_observed_with_its_code() {
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::Sink);
    block_on(async {
        let c = client(&server, &certs).await;
        c.send_then_reset(100_000, 1, 5).await.unwrap();
        let o = server
            .wait_until(|o| !o.resets_received.is_empty())
            .await
            .unwrap();
        assert_eq!(o.resets_received, vec![5]);
        assert_eq!(o.streams.len(), 1);
        assert_eq!(o.streams[0].end, StreamEnd::Reset(5));
    });
}

#[test]
fn silent_server_times_the_client_out() {
    let certs = TestCerts::generate();
    let server =
        QuinnServer::start(ServerOptions::new(&certs, Behaviour::Silent).idle_timeout(None));
    block_on(async {
        let opts = ClientOptions::new(&certs).idle_timeout(Some(Duration::from_millis(500)));
        let c = QuinnClient::connect_with(server.addr, opts).await.unwrap();
        assert_eq!(c.closed_reason().await, Closed::TimedOut);
    });
}

#[test]
fn muted_server_mid_transfer_times_the_client_out() {
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::Echo);
    block_on(async {
        let opts = ClientOptions::new(&certs).idle_timeout(Some(Duration::from_millis(500)));
        let c = QuinnClient::connect_with(server.addr, opts).await.unwrap();
        assert_eq!(c.bi_roundtrip(vec![1; 10]).await.unwrap(), vec![1; 10]);
        server.mute();
        let err = c.bi_roundtrip(pattern(MIB, 1)).await.unwrap_err();
        assert_eq!(c.closed_reason().await, Closed::TimedOut, "{err}");
    });
}

#[test]
fn alpn_is_negotiated_and_enforced() {
    let certs = TestCerts::generate();
    let server =
        QuinnServer::start(ServerOptions::new(&certs, Behaviour::Echo).alpn(&[b"other", ALPN]));
    block_on(async {
        let c = client(&server, &certs).await;
        assert_eq!(c.alpn().as_deref(), Some(ALPN));
        let o = server.wait_until(|o| o.connections == 1).await.unwrap();
        assert_eq!(o.alpn, vec![Some(ALPN.to_vec())]);
        let err = QuinnClient::connect(server.addr, &certs, b"nope").await;
        assert!(
            err.is_err(),
            "a client offering only an unknown ALPN connected"
        );
    });
}

// ===== aioquic client against quinn server =====

#[test]
fn aioquic_client_echo_against_quinn() {
    require_peer!(Peer::PythonAioquic);
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::Echo);
    let out = block_on(run_aioquic_client(
        server.addr,
        &certs,
        "spargio-test",
        &["--mode", "echo", "--bytes", "300000", "--seed", "4"],
    ));
    let lines = stdout_lines(&out);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        lines,
        vec![
            "ALPN spargio-test".to_string(),
            format!("OK echo 300000 {}", checksum(&pattern(300_000, 4)))
        ]
    );
    let o = block_on(server.wait_until(|o| !o.closes.is_empty())).unwrap();
    assert_eq!(
        o.closes,
        vec![Closed::Application {
            code: 0,
            reason: "done".into()
        }]
    );
}

#[test]
fn aioquic_client_upload_against_quinn_sink() {
    require_peer!(Peer::PythonAioquic);
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::Sink);
    let out = block_on(run_aioquic_client(
        server.addr,
        &certs,
        "spargio-test",
        &["--mode", "upload", "1048576"],
    ));
    assert!(out.status.success(), "{out:?}");
    let want = checksum(&pattern(MIB, 1));
    assert_eq!(stdout_lines(&out)[1], format!("OK upload 1048576 {want}"));
    let o = server.observed();
    assert_eq!(
        (o.streams[0].bytes, o.streams[0].checksum),
        (MIB as u64, want)
    );
}

#[test]
fn aioquic_client_sees_quinn_close_reason() {
    require_peer!(Peer::PythonAioquic);
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::CloseWith(42, "bye".into()));
    let out = block_on(run_aioquic_client(
        server.addr,
        &certs,
        "spargio-test",
        &["--mode", "close"],
    ));
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout_lines(&out).contains(&"CLOSED 42 bye".to_string()),
        "{out:?}"
    );
}

#[test]
fn aioquic_client_fails_on_wrong_alpn() {
    require_peer!(Peer::PythonAioquic);
    let certs = TestCerts::generate();
    let server = QuinnServer::with(&certs, Behaviour::Echo);
    let out = block_on(run_aioquic_client(
        server.addr,
        &certs,
        "not-offered",
        &["--mode", "echo", "--timeout", "10"],
    ));
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(server.observed().connections, 0);
}

// ===== quinn client against aioquic server =====

#[test]
fn quinn_client_echo_against_aioquic() {
    require_peer!(Peer::PythonAioquic);
    let certs = TestCerts::generate();
    let server = AioquicServer::start(&certs, AioquicMode::Echo);
    block_on(async {
        let c = QuinnClient::connect(server.addr(), &certs, ALPN)
            .await
            .unwrap();
        assert_eq!(c.alpn().as_deref(), Some(ALPN));
        let data = pattern(MIB, 12);
        assert_eq!(
            checksum(&c.bi_roundtrip(data.clone()).await.unwrap()),
            checksum(&data)
        );
        c.send_uni(50_000, 13).await.unwrap();
        assert_eq!(c.accept_uni().await.unwrap(), pattern(50_000, 13));
        let d = Bytes::from_static(b"datagram to aioquic");
        assert_eq!(c.datagram_roundtrip(d.clone()).await.unwrap(), d);
    });
}

#[test]
fn quinn_client_upload_against_aioquic_sink() {
    require_peer!(Peer::PythonAioquic);
    let certs = TestCerts::generate();
    let server = AioquicServer::start(&certs, AioquicMode::Sink);
    block_on(async {
        let c = QuinnClient::connect(server.addr(), &certs, ALPN)
            .await
            .unwrap();
        assert_eq!(
            c.upload(MIB, 21).await.unwrap(),
            checksum(&pattern(MIB, 21))
        );
    });
}

#[test]
fn quinn_client_sees_aioquic_close_reason() {
    require_peer!(Peer::PythonAioquic);
    let certs = TestCerts::generate();
    let server = AioquicServer::start(&certs, AioquicMode::Close);
    block_on(async {
        let c = QuinnClient::connect(server.addr(), &certs, ALPN)
            .await
            .unwrap();
        assert!(c.bi_roundtrip(b"hello".to_vec()).await.is_err());
        assert_eq!(
            c.closed_reason().await,
            Closed::Application {
                code: 42,
                reason: "bye".into()
            }
        );
    });
}
