//! The provider the crate's features select where no process default is
//! installed (issue 50, item 5), read back from a handshake between our
//! acceptor and connector: `ring` agrees on X25519; `aws-lc-rs` (rustls'
//! own default, post-quantum preferred) on X25519MLKEM768. The default
//! build runs the `ring` case. `.ci/run` also runs this file with
//! `--features aws-lc-rs` (both providers compiled in, as a partial
//! migration whose axum-server brings `aws-lc-rs` has them: rustls'
//! `builder()` would panic there, ours picks `ring`) and with
//! `--no-default-features --features aws-lc-rs`, and with
//! `--no-default-features` (no provider: an error naming the fix). A test binary of its own:
//! nothing here may install a process default.

mod common;

#[cfg(any(feature = "ring", feature = "aws-lc-rs"))]
mod selected {
    use crate::common;
    use std::time::Duration;

    use common::pki;
    use spargio_tls::rustls::crypto::CryptoProvider;
    use spargio_tls::rustls::NamedGroup;
    use spargio_tls::{TlsAcceptor, TlsConnector};

    /// The group a feature set's provider agrees on with itself.
    fn expected_group() -> NamedGroup {
        if cfg!(feature = "ring") {
            NamedGroup::X25519
        } else {
            NamedGroup::X25519MLKEM768
        }
    }

    #[test]
    fn with_no_default_installed_the_feature_selected_provider_is_used() {
        assert!(
            CryptoProvider::get_default().is_none(),
            "nothing in this binary installs a default"
        );
        let pki = pki("features", false);
        let acceptor =
            TlsAcceptor::from_pem(pki.leaf_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap();
        let connector = TlsConnector::with_root_ca_pem(pki.ca_pem.as_bytes()).unwrap();
        // Both the crate's own provider, and still no process default: a
        // later rustls user in this process decides that for itself.
        assert!(CryptoProvider::get_default().is_none());
        common::run_bounded(Duration::from_secs(30), move |h| async move {
            let (client, server) = common::echoed_handshake(h, acceptor, connector).await;
            assert_eq!(
                client.negotiated_key_exchange_group(),
                Some(expected_group())
            );
            assert_eq!(
                server.negotiated_key_exchange_group(),
                Some(expected_group())
            );
        });
    }
}

#[cfg(not(any(feature = "ring", feature = "aws-lc-rs")))]
mod none {
    use crate::common::pki;
    use spargio_tls::{TlsAcceptor, TlsConnector};

    /// With neither provider feature and nothing installed, building a config
    /// is an error that names the fix, not rustls' panic.
    #[test]
    fn with_no_provider_at_all_a_config_is_an_error_naming_the_fix() {
        let pki = pki("no-provider", false);
        for err in [
            TlsAcceptor::from_pem(pki.leaf_pem.as_bytes(), pki.key_pem.as_bytes()).unwrap_err(),
            TlsConnector::with_root_ca_pem(pki.ca_pem.as_bytes()).unwrap_err(),
            TlsAcceptor::reloadable_from_pem(pki.leaf_pem.as_bytes(), pki.key_pem.as_bytes())
                .map(|_| ())
                .unwrap_err(),
        ] {
            assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
            let text = err.to_string();
            assert!(text.contains("`ring` or `aws-lc-rs`"), "{text}");
            assert!(text.contains("install_default"), "{text}");
        }
    }
}
