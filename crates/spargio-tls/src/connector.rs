//! The client side: [`TlsConnector`], a `rustls::ClientConfig` plus the
//! calls that open a TCP connection and run the handshake over it.
//!
//! The server name is checked before anything is opened (a bad one is
//! `InvalidInput`, no socket made). A certificate rustls rejects (unknown
//! issuer, wrong name, expired ...) fails the handshake with
//! `InvalidData`, the `rustls::Error` inside (`get_ref().downcast_ref()`).

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use spargio::io::Compat;
use spargio::net::TcpStream;
use spargio::RuntimeHandle;

use crate::options::{with_timeout, HandshakeOptions};
use crate::provider::{config_error, provider};
use crate::{pem, ClientTlsStream};

/// Opens TLS client connections with one `rustls::ClientConfig`.
///
/// Cloning is cheap (the config is shared).
///
/// ```no_run
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::io::{AsyncReadExt, AsyncWriteExt};
/// use spargio_tls::TlsConnector;
///
/// let connector = TlsConnector::with_webpki_roots().with_alpn_protocols(&[b"http/1.1"]);
/// let mut tls = connector.connect(&handle, ("example.com", 443), "example.com").await?;
/// tls.write_all(&b"GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n"[..]).await.0?;
/// let (res, page) = tls.read_to_end(Vec::new()).await;
/// res?;
/// assert!(page.starts_with(b"HTTP/1.1"));
/// # std::io::Result::Ok(())
/// # })).unwrap().unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct TlsConnector {
    config: Arc<ClientConfig>,
}

impl TlsConnector {
    /// A connector with `config`.
    pub fn new(config: Arc<ClientConfig>) -> TlsConnector {
        TlsConnector { config }
    }

    /// A connector that trusts the roots of Mozilla's CA program
    /// (`webpki-roots`), with rustls's safe defaults (TLS 1.2 and 1.3) and
    /// no client certificate.
    ///
    /// # Panics
    ///
    /// In a build with neither provider feature (`ring`, `aws-lc-rs`)
    /// when no process default provider is installed: the message names
    /// the fix ([`with_root_store`](TlsConnector::with_root_store) returns
    /// that as an error instead).
    pub fn with_webpki_roots() -> TlsConnector {
        let roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        TlsConnector::with_root_store(roots).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A connector that trusts exactly the CA certificates in `pem`
    /// (`InvalidData` if it holds none, or one that does not parse).
    pub fn with_root_ca_pem(pem: &[u8]) -> io::Result<TlsConnector> {
        TlsConnector::with_root_store(pem::root_store(pem)?)
    }

    /// [`with_root_ca_pem`](TlsConnector::with_root_ca_pem) from a file.
    pub fn with_root_ca_pem_file(path: impl AsRef<Path>) -> io::Result<TlsConnector> {
        TlsConnector::with_root_ca_pem(&pem::read(path.as_ref())?)
    }

    /// A connector that trusts `roots`.
    pub fn with_root_store(roots: RootCertStore) -> io::Result<TlsConnector> {
        let config = ClientConfig::builder_with_provider(provider()?)
            .with_safe_default_protocol_versions()
            .map_err(config_error)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(TlsConnector::new(Arc::new(config)))
    }

    /// This connector offering `protocols` by ALPN, most preferred first
    /// (e.g. `&[b"h2", b"http/1.1"]`). The config is copied if shared.
    pub fn with_alpn_protocols(mut self, protocols: &[&[u8]]) -> TlsConnector {
        Arc::make_mut(&mut self.config).alpn_protocols =
            protocols.iter().map(|p| p.to_vec()).collect();
        self
    }

    /// The rustls config.
    pub fn config(&self) -> &Arc<ClientConfig> {
        &self.config
    }

    /// Connects to `addr` (a literal or a host name, resolved on the
    /// blocking pool) and runs the handshake, checking the server's
    /// certificate against `server_name` (a DNS name or an IP address).
    pub async fn connect<A>(
        &self,
        handle: impl AsRef<RuntimeHandle>,
        addr: A,
        server_name: &str,
    ) -> io::Result<ClientTlsStream>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        self.connect_with_options(handle, addr, server_name, HandshakeOptions::default())
            .await
    }

    /// [`connect`](TlsConnector::connect) with options; a timeout covers
    /// resolution, TCP connect and handshake.
    pub async fn connect_with_options<A>(
        &self,
        handle: impl AsRef<RuntimeHandle>,
        addr: A,
        server_name: &str,
        options: HandshakeOptions,
    ) -> io::Result<ClientTlsStream>
    where
        A: ToSocketAddrs + Send + 'static,
        A::Iter: Send,
    {
        let name = server_name_of(server_name)?;
        with_timeout(options, async {
            let tcp = TcpStream::connect(handle, addr).await?;
            self.handshake(name, tcp).await
        })
        .await
    }

    /// Connects to `addr` (no name resolution) and runs the handshake.
    pub async fn connect_socket_addr(
        &self,
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
        server_name: &str,
    ) -> io::Result<ClientTlsStream> {
        self.connect_socket_addr_with_options(
            handle,
            addr,
            server_name,
            HandshakeOptions::default(),
        )
        .await
    }

    /// [`connect_socket_addr`](TlsConnector::connect_socket_addr) with
    /// options; a timeout covers TCP connect and handshake.
    pub async fn connect_socket_addr_with_options(
        &self,
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
        server_name: &str,
        options: HandshakeOptions,
    ) -> io::Result<ClientTlsStream> {
        let name = server_name_of(server_name)?;
        with_timeout(options, async {
            let tcp = TcpStream::connect_socket_addr(handle, addr).await?;
            self.handshake(name, tcp).await
        })
        .await
    }

    /// Runs the handshake over a TCP stream the caller connected (e.g.
    /// through a proxy, or with socket options of its own).
    pub async fn connect_stream(
        &self,
        server_name: &str,
        stream: TcpStream,
    ) -> io::Result<ClientTlsStream> {
        self.connect_stream_with_options(server_name, stream, HandshakeOptions::default())
            .await
    }

    /// [`connect_stream`](TlsConnector::connect_stream) with options.
    pub async fn connect_stream_with_options(
        &self,
        server_name: &str,
        stream: TcpStream,
        options: HandshakeOptions,
    ) -> io::Result<ClientTlsStream> {
        let name = server_name_of(server_name)?;
        with_timeout(options, self.handshake(name, stream)).await
    }

    async fn handshake(
        &self,
        name: ServerName<'static>,
        tcp: TcpStream,
    ) -> io::Result<ClientTlsStream> {
        let inner = futures_rustls::TlsConnector::from(self.config.clone())
            .connect(name, Compat::new(tcp))
            .await?;
        Ok(ClientTlsStream { inner })
    }
}

impl From<Arc<ClientConfig>> for TlsConnector {
    fn from(config: Arc<ClientConfig>) -> TlsConnector {
        TlsConnector::new(config)
    }
}

fn server_name_of(name: &str) -> io::Result<ServerName<'static>> {
    ServerName::try_from(name.to_owned()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid TLS server name {name:?}: {e}"),
        )
    })
}
