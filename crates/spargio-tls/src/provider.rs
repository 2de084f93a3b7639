//! The crypto provider every config built here uses, by rustls's own
//! convention: the process-wide default when one is installed
//! (`CryptoProvider::install_default`, as axum-server and other rustls
//! users do at startup), else the one this crate's features select:
//! `ring` (the default), else `aws-lc-rs`. Named explicitly either way,
//! never left to rustls's `builder()`: in a process whose rustls has
//! both `ring` and `aws-lc-rs` compiled in and no default installed, that
//! panics ("Could not automatically determine the process-level
//! CryptoProvider"), and a partial migration from tokio often has both
//! (axum-server and rustls' defaults bring `aws-lc-rs`).

use std::io;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// The provider for a config built now (module docs); an error naming the
/// fix when no default is installed and no provider feature is on.
pub(crate) fn provider() -> io::Result<Arc<CryptoProvider>> {
    if let Some(installed) = CryptoProvider::get_default() {
        return Ok(installed.clone());
    }
    #[cfg(feature = "ring")]
    return Ok(Arc::new(rustls::crypto::ring::default_provider()));
    #[cfg(all(feature = "aws-lc-rs", not(feature = "ring")))]
    return Ok(Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    #[cfg(not(any(feature = "ring", feature = "aws-lc-rs")))]
    return Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "spargio-tls: no crypto provider: enable the feature `ring` or `aws-lc-rs`, or install \
         a process default with rustls::crypto::CryptoProvider::install_default first",
    ));
}

/// A rustls configuration error as an `io::Error`.
pub(crate) fn config_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}
