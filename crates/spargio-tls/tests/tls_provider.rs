//! rustls' convention for the crypto provider (issue 50, item 5): a
//! process that installed a default provider (as axum-server and other
//! rustls users do at startup) gets it in every config this crate builds,
//! acceptor and connector alike, and a handshake between them runs on
//! it; `ring` is used only where none is installed. A test binary of its
//! own: the default is process-wide.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::pki;
use spargio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use spargio_tls::rustls::crypto::{ring, CryptoProvider};
use spargio_tls::{HandshakeOptions, TlsAcceptor, TlsConnector};

#[test]
fn an_installed_default_provider_is_used_by_acceptor_and_connector() {
    let only_chacha = CryptoProvider {
        cipher_suites: vec![ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256],
        ..ring::default_provider()
    };
    only_chacha
        .install_default()
        .expect("no default installed yet in this process");
    let pki = pki("provider", false);
    let acceptor = TlsAcceptor::from_pem(pki.leaf_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap();
    let connector = TlsConnector::with_root_ca_pem(pki.ca_pem.as_bytes()).unwrap();
    for suites in [
        &acceptor.config().crypto_provider().cipher_suites,
        &connector.config().crypto_provider().cipher_suites,
    ] {
        let names: Vec<_> = suites.iter().map(|s| s.suite()).collect();
        assert_eq!(
            names,
            vec![spargio_tls::rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256]
        );
    }
    let (reloadable, _reloader) =
        TlsAcceptor::reloadable_from_pem(pki.leaf_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap();
    assert_eq!(reloadable.config().crypto_provider().cipher_suites.len(), 1);

    // And a handshake between them agrees on it.
    common::run_bounded(Duration::from_secs(30), move |h| async move {
        let listener = spargio::net::TcpListener::bind(&h, "127.0.0.1:0")
            .await
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let server = h
            .spawn_stealable(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let mut tls = acceptor.accept(tcp).await.unwrap();
                let (res, buf) = tls.read(Vec::with_capacity(16)).await;
                res.unwrap();
                tls.write_all(buf).await.0.unwrap();
                tls.flush().await.unwrap();
                tls.negotiated_cipher_suite()
            })
            .unwrap();
        let mut tls = connector
            .connect_socket_addr_with_options(&h, addr, "localhost", HandshakeOptions::default())
            .await
            .unwrap();
        tls.write_all(&b"hi"[..]).await.0.unwrap();
        tls.flush().await.unwrap();
        let (res, echo) = tls.read(Vec::with_capacity(16)).await;
        res.unwrap();
        assert_eq!(echo, b"hi");
        let suite = server.await.unwrap().map(|s| s.suite());
        assert_eq!(
            suite,
            Some(spargio_tls::rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256)
        );
        let _ = Arc::new(());
    });
}
