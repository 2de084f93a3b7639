//! Config helpers: quinn server and client configs from PEM or DER, with
//! rustls's ring provider, TLS 1.3 (QUIC's only version) and ALPN, in the
//! shape of `spargio-tls` (`TlsAcceptor::from_pem`,
//! `TlsConnector::with_root_ca_pem`, `with_webpki_roots`). Errors are
//! `io::Error`s: `InvalidData` for content that is not what was asked for,
//! the file's own error for a file that cannot be read.
//!
//! The results are plain [`quinn::ServerConfig`]/[`quinn::ClientConfig`]
//! values with quinn's default transport: adjust them (for example
//! `transport_config`) before handing them to an endpoint.

use std::io;
use std::path::Path;
use std::sync::Arc;

use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::crypto::CryptoProvider;
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

fn ring() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

fn alpn_list(alpn: &[&[u8]]) -> Vec<Vec<u8>> {
    alpn.iter().map(|p| p.to_vec()).collect()
}

/// Reads `path`, naming it in the error.
fn read(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display())))
}

/// Every `CERTIFICATE` block in `pem`, in order; at least one.
fn certs(pem: &[u8]) -> io::Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("bad PEM certificate: {e}")))?;
    if certs.is_empty() {
        return Err(invalid("no PEM certificate found".to_string()));
    }
    Ok(certs)
}

/// A server config presenting the certificate chain in `cert_chain_pem`
/// (leaf first) with the private key in `key_pem` (PKCS#8, PKCS#1 or
/// SEC1), choosing among the `alpn` protocols (most preferred first; a
/// client offering none of them fails the handshake). `InvalidData` if
/// either does not parse or the key does not match the leaf.
///
/// ```
/// let key = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
/// let config = spargio_quic::server_config_from_pem(
///     key.cert.pem().as_bytes(),
///     key.signing_key.serialize_pem().as_bytes(),
///     &[b"my-protocol"],
/// )?;
/// # let _ = config; Ok::<(), std::io::Error>(())
/// ```
pub fn server_config_from_pem(
    cert_chain_pem: &[u8],
    key_pem: &[u8],
    alpn: &[&[u8]],
) -> io::Result<quinn::ServerConfig> {
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|e| invalid(format!("bad PEM private key: {e}")))?;
    server_config_from_der(certs(cert_chain_pem)?, key, alpn)
}

/// [`server_config_from_pem`] from files.
pub fn server_config_from_pem_files(
    cert_chain_path: impl AsRef<Path>,
    key_path: impl AsRef<Path>,
    alpn: &[&[u8]],
) -> io::Result<quinn::ServerConfig> {
    server_config_from_pem(
        &read(cert_chain_path.as_ref())?,
        &read(key_path.as_ref())?,
        alpn,
    )
}

/// [`server_config_from_pem`] from DER (the types are
/// `quinn::rustls::pki_types`'s).
pub fn server_config_from_der(
    cert_chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    alpn: &[&[u8]],
) -> io::Result<quinn::ServerConfig> {
    let mut tls = rustls::ServerConfig::builder_with_provider(ring())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| invalid(format!("TLS config: {e}")))?
        .with_no_client_auth()
        .with_single_cert(cert_chain, key)
        .map_err(|e| invalid(format!("certificate and key rejected: {e}")))?;
    tls.alpn_protocols = alpn_list(alpn);
    let crypto =
        QuicServerConfig::try_from(tls).map_err(|e| invalid(format!("QUIC TLS config: {e}")))?;
    Ok(quinn::ServerConfig::with_crypto(Arc::new(crypto)))
}

/// A client config that trusts exactly the CA certificates in `ca_pem`
/// and offers the `alpn` protocols (most preferred first). `InvalidData`
/// if `ca_pem` holds no certificate, or one that does not parse.
///
/// ```
/// let ca = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
/// let config =
///     spargio_quic::client_config_with_root_ca_pem(ca.cert.pem().as_bytes(), &[b"my-protocol"])?;
/// # let _ = config; Ok::<(), std::io::Error>(())
/// ```
pub fn client_config_with_root_ca_pem(
    ca_pem: &[u8],
    alpn: &[&[u8]],
) -> io::Result<quinn::ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in certs(ca_pem)? {
        roots
            .add(cert)
            .map_err(|e| invalid(format!("bad root certificate: {e}")))?;
    }
    client_config_with_root_store(roots, alpn)
}

/// [`client_config_with_root_ca_pem`] from a file.
pub fn client_config_with_root_ca_pem_file(
    path: impl AsRef<Path>,
    alpn: &[&[u8]],
) -> io::Result<quinn::ClientConfig> {
    client_config_with_root_ca_pem(&read(path.as_ref())?, alpn)
}

/// A client config that trusts the roots of Mozilla's CA program
/// (`webpki-roots`) and offers the `alpn` protocols.
///
/// ```
/// let config = spargio_quic::client_config_with_webpki_roots(&[b"h3"]);
/// # let _ = config;
/// ```
pub fn client_config_with_webpki_roots(alpn: &[&[u8]]) -> quinn::ClientConfig {
    let roots = RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    client_config_with_root_store(roots, alpn)
        .expect("the ring provider supports TLS 1.3 and QUIC's initial suite")
}

/// A client config that trusts `roots` and offers the `alpn` protocols.
pub fn client_config_with_root_store(
    roots: RootCertStore,
    alpn: &[&[u8]],
) -> io::Result<quinn::ClientConfig> {
    let mut tls = rustls::ClientConfig::builder_with_provider(ring())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| invalid(format!("TLS config: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = alpn_list(alpn);
    let crypto =
        QuicClientConfig::try_from(tls).map_err(|e| invalid(format!("QUIC TLS config: {e}")))?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}
