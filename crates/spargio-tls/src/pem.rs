//! PEM loading for the convenience constructors: certificate chains,
//! private keys and root stores, from bytes or files, with errors as
//! `io::Error`s (`InvalidData` for content that is not what was asked
//! for, the file's own error for a file that cannot be read).

use std::io;
use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::RootCertStore;

/// Every `CERTIFICATE` block in `pem`, in order; at least one.
pub(crate) fn certs(pem: &[u8]) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("bad PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("no PEM certificate found".to_string()));
    }
    Ok(certs)
}

/// The first private key in `pem` (PKCS#8, PKCS#1 or SEC1).
pub(crate) fn private_key(pem: &[u8]) -> io::Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| invalid(format!("bad PEM private key: {e}")))
}

/// A root store holding every certificate in `pem`.
pub(crate) fn root_store(pem: &[u8]) -> io::Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in certs(pem)? {
        roots
            .add(cert)
            .map_err(|e| invalid(format!("bad root certificate: {e}")))?;
    }
    Ok(roots)
}

/// Reads `path`, naming it in the error.
pub(crate) fn read(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display())))
}

pub(crate) fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}
