//! The server side: [`TlsAcceptor`], a `rustls::ServerConfig` plus the
//! call that runs the handshake on an accepted TCP stream.
//!
//! A client that stalls mid-handshake holds the accept until the
//! [`HandshakeOptions`] timeout, if any: set one for streams from the
//! network. On timeout or error the stream is dropped, which closes it.

use std::io;
use std::path::Path;
use std::sync::Arc;

use rustls::ServerConfig;
use spargio::io::Compat;
use spargio::net::TcpStream;

use crate::options::{with_timeout, HandshakeOptions};
use crate::provider::{config_error, provider};
use crate::{pem, ServerTlsStream};

/// Runs server handshakes with one `rustls::ServerConfig`.
///
/// Cloning is cheap (the config is shared).
///
/// ```no_run
/// # spargio::block_on(spargio::run(|handle| async move {
/// use std::time::Duration;
/// use spargio::net::TcpListener;
/// use spargio_tls::{HandshakeOptions, TlsAcceptor};
///
/// let acceptor = TlsAcceptor::from_pem_files("cert.pem", "key.pem")?
///     .with_alpn_protocols(&[b"http/1.1"]);
/// let listener = TcpListener::bind(&handle, "0.0.0.0:8443").await?;
/// let options = HandshakeOptions::default().with_timeout(Duration::from_secs(10));
/// loop {
///     let (tcp, _) = listener.accept().await?;
///     let acceptor = acceptor.clone();
///     handle.spawn_stealable(async move {
///         if let Ok(tls) = acceptor.accept_with_options(tcp, options).await {
///             // serve `tls`
///             drop(tls);
///         }
///     })
///     .unwrap();
/// }
/// # #[allow(unreachable_code)]
/// # std::io::Result::Ok(())
/// # })).unwrap().unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct TlsAcceptor {
    config: Arc<ServerConfig>,
}

impl TlsAcceptor {
    /// An acceptor with `config`.
    pub fn new(config: Arc<ServerConfig>) -> TlsAcceptor {
        TlsAcceptor { config }
    }

    /// An acceptor presenting the certificate chain in `cert_chain_pem`
    /// (leaf first) with the private key in `key_pem` (PKCS#8, PKCS#1 or
    /// SEC1), rustls's safe defaults (TLS 1.2 and 1.3), no client
    /// certificates. `InvalidData` if either does not parse or the key
    /// does not match the leaf.
    pub fn from_pem(cert_chain_pem: &[u8], key_pem: &[u8]) -> io::Result<TlsAcceptor> {
        let certs = pem::certs(cert_chain_pem)?;
        let key = pem::private_key(key_pem)?;
        let config = ServerConfig::builder_with_provider(provider()?)
            .with_safe_default_protocol_versions()
            .map_err(config_error)?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .map_err(|e| pem::invalid(format!("certificate and key rejected: {e}")))?;
        Ok(TlsAcceptor::new(Arc::new(config)))
    }

    /// [`from_pem`](TlsAcceptor::from_pem) from files.
    pub fn from_pem_files(
        cert_chain_path: impl AsRef<Path>,
        key_path: impl AsRef<Path>,
    ) -> io::Result<TlsAcceptor> {
        TlsAcceptor::from_pem(
            &pem::read(cert_chain_path.as_ref())?,
            &pem::read(key_path.as_ref())?,
        )
    }

    /// This acceptor choosing among `protocols` by ALPN, most preferred
    /// first. A client offering none of them fails the handshake
    /// (`InvalidData`); one offering no ALPN at all is accepted. The
    /// config is copied if shared.
    pub fn with_alpn_protocols(mut self, protocols: &[&[u8]]) -> TlsAcceptor {
        Arc::make_mut(&mut self.config).alpn_protocols =
            protocols.iter().map(|p| p.to_vec()).collect();
        self
    }

    /// The rustls config.
    pub fn config(&self) -> &Arc<ServerConfig> {
        &self.config
    }

    /// Runs the server handshake on `stream`.
    pub async fn accept(&self, stream: TcpStream) -> io::Result<ServerTlsStream> {
        self.accept_with_options(stream, HandshakeOptions::default())
            .await
    }

    /// [`accept`](TlsAcceptor::accept) with options: past the timeout the
    /// stream is closed and the call returns `TimedOut`.
    pub async fn accept_with_options(
        &self,
        stream: TcpStream,
        options: HandshakeOptions,
    ) -> io::Result<ServerTlsStream> {
        let accept =
            futures_rustls::TlsAcceptor::from(self.config.clone()).accept(Compat::new(stream));
        let inner = with_timeout(options, accept).await?;
        Ok(ServerTlsStream { inner })
    }
}

impl From<Arc<ServerConfig>> for TlsAcceptor {
    fn from(config: Arc<ServerConfig>) -> TlsAcceptor {
        TlsAcceptor::new(config)
    }
}
