//! rustls' convention for the crypto provider (issue 50, item 5): a
//! process that installed a default provider (as axum-server and other
//! rustls users do at startup) gets it in every config this crate builds,
//! acceptor and connector alike, and a handshake between them runs on
//! it; `ring` is used only where none is installed. A test binary of its
//! own: the default is process-wide.

mod common;

use std::time::Duration;

use common::pki;
use spargio_tls::rustls::crypto::{ring, CryptoProvider};
use spargio_tls::{TlsAcceptor, TlsConnector};

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
        let (_client, server) = common::echoed_handshake(h, acceptor, connector).await;
        assert_eq!(
            server.negotiated_cipher_suite().map(|s| s.suite()),
            Some(spargio_tls::rustls::CipherSuite::TLS13_CHACHA20_POLY1305_SHA256)
        );
    });
}
