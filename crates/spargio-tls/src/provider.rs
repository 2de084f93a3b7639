//! The crypto provider every config built here uses: `ring`, named
//! explicitly rather than taken from rustls's process-wide default, so a
//! process that also links `aws-lc-rs` (or installs another default)
//! still gets the same handshakes from this crate.

use std::io;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// The `ring` provider.
pub(crate) fn ring() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A rustls configuration error as an `io::Error`.
pub(crate) fn config_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, e)
}
