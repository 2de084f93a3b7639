//! The crypto provider every config built here uses, by rustls's own
//! convention: the process-wide default when one is installed
//! (`CryptoProvider::install_default`, as axum-server and other rustls
//! users do at startup), else `ring`, the one this crate builds rustls
//! with. Named explicitly either way, never left to rustls's
//! `builder()`: in a process whose rustls has both `ring` and `aws-lc-rs`
//! compiled in and no default installed, that panics ("Could not
//! automatically determine the process-level CryptoProvider").

use std::io;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// The provider for a config built now (module docs).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()))
}

/// A rustls configuration error as an `io::Error`.
pub(crate) fn config_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}
