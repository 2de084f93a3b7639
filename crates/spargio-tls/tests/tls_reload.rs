//! A certificate replaced while serving (issue 50, item 7): `openssl
//! s_client` verifies the server against the first CA, then, after
//! `CertReloader::reload_pem`, against the second only; a connection made
//! before the reload keeps working; a reload with a key that is not the
//! leaf's fails and leaves the certificate in use.

mod common;

use std::process::Command;
use std::time::Duration;

use common::pki;
use spargio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use spargio::net::TcpListener;
use spargio_test_peers::require_peer;
use spargio_tls::{HandshakeOptions, TlsAcceptor, TlsConnector};

const LIMIT: Duration = Duration::from_secs(30);

/// Whether `openssl s_client` completes a handshake with the server on
/// `port`, verifying it against the CA in `ca_file`.
fn openssl_verifies(port: u16, ca_file: &std::path::Path) -> bool {
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &format!("127.0.0.1:{port}")])
        .args(["-servername", "localhost", "-verify_return_error", "-brief"])
        .arg("-CAfile")
        .arg(ca_file)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run openssl s_client");
    out.status.success()
}

/// Reads one line from `tls`.
async fn line<S: AsyncRead>(tls: &mut S) -> Vec<u8> {
    let mut got = Vec::new();
    while !got.ends_with(b"\n") {
        let (res, buf) = tls.read(Vec::with_capacity(64)).await;
        assert!(res.unwrap() > 0, "closed before a full line");
        got.extend_from_slice(&buf);
    }
    got
}

#[test]
fn a_reloaded_certificate_is_presented_to_new_handshakes_only() {
    require_peer!(spargio_test_peers::Peer::Openssl);
    let (first, second) = (pki("reload-a", false), pki("reload-b", false));
    let (acceptor, reloader) =
        TlsAcceptor::reloadable_from_pem(first.leaf_pem.as_bytes(), first.key_pem.as_bytes())
            .unwrap();
    let connector = TlsConnector::with_root_ca_pem(first.ca_pem.as_bytes()).unwrap();
    let (ca_a, ca_b) = (first.ca_file.clone(), second.ca_file.clone());
    let (leaf_b, key_b, key_a) = (
        second.leaf_pem.clone(),
        second.key_pem.clone(),
        first.key_pem.clone(),
    );
    common::run_bounded(LIMIT, move |h| async move {
        let listener = TcpListener::bind(&h, "127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let port = addr.port();
        // Echoes lines on every connection, each a task of its own.
        let server = h
            .spawn_stealable(async move {
                loop {
                    let (tcp, _) = listener.accept().await.unwrap();
                    let acceptor = acceptor.clone();
                    let options = HandshakeOptions::default().with_timeout(LIMIT);
                    spargio::RuntimeHandle::current()
                        .spawn_stealable(async move {
                            // s_client's probes close at once: not an error here.
                            let Ok(mut tls) = acceptor.accept_with_options(tcp, options).await
                            else {
                                return;
                            };
                            loop {
                                let (res, buf) = tls.read(Vec::with_capacity(64)).await;
                                match res {
                                    Ok(n) if n > 0 => {
                                        tls.write_all(buf).await.0.unwrap();
                                        tls.flush().await.unwrap();
                                    }
                                    _ => return,
                                }
                            }
                        })
                        .unwrap();
                }
            })
            .unwrap();
        let check = |ca: std::path::PathBuf| {
            let h = spargio::RuntimeHandle::current();
            async move {
                h.spawn_blocking(move || openssl_verifies(port, &ca))
                    .unwrap()
                    .await
                    .unwrap()
            }
        };

        let mut before = connector
            .connect_socket_addr_with_options(&h, addr, "localhost", HandshakeOptions::default())
            .await
            .unwrap();
        before.write_all(&b"one\n"[..]).await.0.unwrap();
        before.flush().await.unwrap();
        assert_eq!(line(&mut before).await, b"one\n");
        assert!(check(ca_a.clone()).await, "the first certificate verifies");
        assert!(!check(ca_b.clone()).await, "not against the second CA");

        reloader
            .reload_pem(leaf_b.as_bytes(), key_b.as_bytes())
            .unwrap();
        assert!(
            check(ca_b.clone()).await,
            "the reloaded certificate verifies"
        );
        assert!(
            !check(ca_a.clone()).await,
            "the first is gone for new handshakes"
        );

        // The connection made before the reload goes on.
        before.write_all(&b"two\n"[..]).await.0.unwrap();
        before.flush().await.unwrap();
        assert_eq!(line(&mut before).await, b"two\n");

        // A key that is not the leaf's: refused, the certificate stays.
        let err = reloader
            .reload_pem(leaf_b.as_bytes(), key_a.as_bytes())
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{err}");
        assert!(check(ca_b).await, "still the second certificate");
        server.abort();
    });
}
