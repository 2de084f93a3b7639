//! Interop with OpenSSL's command-line peers: `openssl s_client` against
//! our acceptor (TLS 1.2 and 1.3, ALPN `h2` and `http/1.1`, certificate
//! chain verified by OpenSSL), and our connector against `openssl
//! s_server` (TLS 1.2 and 1.3), with data both ways each time.
//!
//! Nothing can hang: every read of a peer's output has a deadline, the
//! runtime side reports through a channel read with a timeout, and a
//! peer is killed and reaped when its `Peer` drops (also on panic).

mod common;

use std::io::Write;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{free_port, pki, Peer};
use spargio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use spargio_test_peers::require_peer;
use spargio_tls::rustls::ProtocolVersion;
use spargio_tls::{HandshakeOptions, TlsAcceptor, TlsConnector};

const LIMIT: Duration = Duration::from_secs(30);

/// What our server saw of one `s_client` session.
#[derive(Debug)]
struct Seen {
    version: Option<ProtocolVersion>,
    alpn: Option<Vec<u8>>,
    line: Vec<u8>,
}

/// Serves one TLS connection on a runtime thread: reads a line, answers
/// `hello from spargio`, closes with `close_notify`.
fn serve_one(acceptor: TlsAcceptor) -> (u16, mpsc::Receiver<Seen>) {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = std_listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        spargio::block_on(spargio::run(move |handle| async move {
            let listener = spargio::net::TcpListener::from_std(&handle, std_listener);
            let (tcp, _) = listener.accept().await.unwrap();
            let options = HandshakeOptions::default().with_timeout(LIMIT);
            let mut tls = acceptor.accept_with_options(tcp, options).await.unwrap();
            let mut line = Vec::new();
            while !line.ends_with(b"\n") {
                let (res, buf) = tls.read(Vec::with_capacity(256)).await;
                assert!(res.unwrap() > 0, "s_client closed before a full line");
                line.extend_from_slice(&buf);
            }
            tls.write_all(&b"hello from spargio\n"[..]).await.0.unwrap();
            tls.flush().await.unwrap();
            let seen = Seen {
                version: tls.protocol_version(),
                alpn: tls.alpn_protocol().map(<[u8]>::to_vec),
                line,
            };
            // Keep the connection until s_client has printed our line.
            spargio::sleep(Duration::from_millis(200)).await;
            let _ = tls.shutdown().await;
            let _ = tx.send(seen);
        }))
        .unwrap();
    });
    (port, rx)
}

fn s_client_session(version_flag: &str, alpn: &str, want: ProtocolVersion, want_log: &str) {
    // `common::Peer` is the child-process wrapper; this is the peer kind.
    require_peer!(spargio_test_peers::Peer::Openssl);
    let pki = pki(&format!("s_client{version_flag}{alpn}"), false);
    let acceptor = TlsAcceptor::from_pem_files(&pki.leaf_file, &pki.key_file)
        .unwrap()
        .with_alpn_protocols(&[b"h2", b"http/1.1"]);
    let (port, seen) = serve_one(acceptor);
    let mut peer = Peer::spawn(Command::new("openssl").args([
        "s_client",
        "-connect",
        &format!("127.0.0.1:{port}"),
        "-servername",
        "localhost",
        "-CAfile",
        pki.ca_file.to_str().unwrap(),
        "-verify_return_error",
        "-verify_hostname",
        "localhost",
        version_flag,
        "-alpn",
        alpn,
        "-ign_eof",
    ]));
    // Handshake done and verified by OpenSSL.
    peer.wait_for(b"Verify return code: 0 (ok)", LIMIT);
    peer.wait_for(format!("ALPN protocol: {alpn}").as_bytes(), LIMIT);
    peer.stdin().write_all(b"hello from s_client\n").unwrap();
    peer.stdin().flush().unwrap();
    peer.wait_for(b"hello from spargio\n", LIMIT);
    assert!(
        common::contains(&peer.seen, want_log.as_bytes()),
        "s_client did not report {want_log}: {}",
        String::from_utf8_lossy(&peer.seen)
    );

    let seen = seen.recv_timeout(LIMIT).expect("our server finished");
    assert_eq!(seen.line, b"hello from s_client\n");
    assert_eq!(seen.version, Some(want));
    assert_eq!(seen.alpn.as_deref(), Some(alpn.as_bytes()));
}

#[test]
fn s_client_tls13_alpn_h2() {
    s_client_session("-tls1_3", "h2", ProtocolVersion::TLSv1_3, "TLSv1.3");
}

#[test]
fn s_client_tls13_alpn_http11() {
    s_client_session("-tls1_3", "http/1.1", ProtocolVersion::TLSv1_3, "TLSv1.3");
}

#[test]
fn s_client_tls12_alpn_h2() {
    s_client_session("-tls1_2", "h2", ProtocolVersion::TLSv1_2, "TLSv1.2");
}

#[test]
fn s_client_tls12_alpn_http11() {
    s_client_session("-tls1_2", "http/1.1", ProtocolVersion::TLSv1_2, "TLSv1.2");
}

fn s_server_session(version_flag: &str, want: ProtocolVersion) {
    require_peer!(spargio_test_peers::Peer::Openssl);
    let pki = pki(&format!("s_server{version_flag}"), false);
    let port = free_port();
    let mut peer = Peer::spawn(Command::new("openssl").args([
        "s_server",
        "-accept",
        &format!("127.0.0.1:{port}"),
        "-cert",
        pki.leaf_file.to_str().unwrap(),
        "-key",
        pki.key_file.to_str().unwrap(),
        version_flag,
        "-alpn",
        "http/1.1",
        "-naccept",
        "1",
    ]));
    // Printed once it listens (no probe connection: `-naccept 1` would
    // spend its one accept on it).
    peer.wait_for(b"ACCEPT", LIMIT);

    let connector = TlsConnector::with_root_ca_pem(pki.ca_pem.as_bytes())
        .unwrap()
        .with_alpn_protocols(&[b"http/1.1"]);
    let (tx, rx) = mpsc::channel();
    let go = Arc::new(AtomicBool::new(false));
    let go_client = go.clone();
    std::thread::spawn(move || {
        spargio::block_on(spargio::run(move |handle| async move {
            let options = HandshakeOptions::default().with_timeout(LIMIT);
            let addr = ([127, 0, 0, 1], port).into();
            let mut tls = connector
                .connect_socket_addr_with_options(&handle, addr, "localhost", options)
                .await
                .unwrap();
            let version = tls.protocol_version();
            let alpn = tls.alpn_protocol().map(<[u8]>::to_vec);
            tls.write_all(&b"ping from spargio\n"[..]).await.0.unwrap();
            tls.flush().await.unwrap();
            let _ = tx.send((version, alpn, Vec::new()));
            // The test writes s_server's answer once it saw our line.
            wait_for_flag(&go_client).await;
            let mut got = Vec::new();
            while !got.ends_with(b"\n") {
                let (res, buf) = tls.read(Vec::with_capacity(256)).await;
                assert!(res.unwrap() > 0, "s_server closed before a full line");
                got.extend_from_slice(&buf);
            }
            let _ = tx.send((None, None, got));
        }))
        .unwrap();
    });
    let (version, alpn, _) = rx.recv_timeout(LIMIT).expect("connected");
    assert_eq!(version, Some(want));
    assert_eq!(alpn.as_deref(), Some(&b"http/1.1"[..]));
    peer.wait_for(b"ping from spargio\n", LIMIT);
    peer.stdin().write_all(b"pong from s_server\n").unwrap();
    peer.stdin().flush().unwrap();
    go.store(true, Ordering::Release);
    let (_, _, got) = rx.recv_timeout(LIMIT).expect("read s_server's line");
    assert_eq!(got, b"pong from s_server\n");
}

/// Waits (up to `LIMIT`) for the test thread's go-ahead without
/// blocking a shard.
async fn wait_for_flag(flag: &AtomicBool) {
    let deadline = std::time::Instant::now() + LIMIT;
    // Acquire pairs with the test thread's Release store.
    while !flag.load(Ordering::Acquire) && std::time::Instant::now() < deadline {
        spargio::sleep(Duration::from_millis(5)).await;
    }
}

#[test]
fn s_server_tls13() {
    s_server_session("-tls1_3", ProtocolVersion::TLSv1_3);
}

#[test]
fn s_server_tls12() {
    s_server_session("-tls1_2", ProtocolVersion::TLSv1_2);
}
