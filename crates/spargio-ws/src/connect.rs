//! `WsConnector`: the client side (`ws://`, and `wss://` with TLS).
//!
//! A connection is, all under the handshake timeout:
//!
//! 1. the request (a URL or an `http::Request`) is parsed when the call
//!    is made, so a bad URL fails before any socket exists;
//! 2. a TCP connect to the URL's host and port (80 or 443 by default,
//!    resolved on the runtime's blocking pool), or to the address given to
//!    the `*_socket_addr` forms, which keep the URL for the `Host` header;
//! 3. for `wss://`, a TLS handshake naming the URL's host, with the
//!    connector's [`TlsConnector`] (by default one trusting Mozilla's
//!    root certificates, built once per process);
//! 4. the HTTP upgrade, by tungstenite.
//!
//! The returned futures own everything they need (`Send + 'static`): they
//! can be spawned.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::OnceLock;

use async_tungstenite::tungstenite::client::IntoClientRequest;
use async_tungstenite::tungstenite::error::UrlError;
use async_tungstenite::tungstenite::handshake::client::Request;
use async_tungstenite::tungstenite::Error as WsError;
use spargio::net::TcpStream;
use spargio::RuntimeHandle;
use spargio_tls::TlsConnector;

use crate::error::io_error;
use crate::{with_timeout, WsOptions, WsResponse, WsStream, WsTransport};

/// Opens WebSocket connections with one set of [`WsOptions`].
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use std::time::Duration;
/// use spargio_ws::{WsConnector, WsOptions};
///
/// // A listener that never answers the upgrade.
/// let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
/// let url = format!("ws://{}/", silent.local_addr().unwrap());
/// let connector = WsConnector::new()
///     .with_options(WsOptions::default().with_handshake_timeout(Some(Duration::from_millis(50))));
/// let err = connector.connect(&handle, url.as_str()).await.unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
/// # })).unwrap();
/// ```
#[derive(Clone, Debug, Default)]
pub struct WsConnector {
    options: WsOptions,
    tls: Option<TlsConnector>,
}

impl WsConnector {
    /// A connector with the default options.
    pub fn new() -> WsConnector {
        WsConnector::default()
    }

    /// This connector with `options`.
    pub fn with_options(mut self, options: WsOptions) -> WsConnector {
        self.options = options;
        self
    }

    /// This connector with `tls` for `wss://` URLs (for a private CA, a
    /// client certificate, ...). Without one, `wss://` trusts Mozilla's
    /// root certificates (`TlsConnector::with_webpki_roots`).
    pub fn with_tls(mut self, tls: TlsConnector) -> WsConnector {
        self.tls = Some(tls);
        self
    }

    /// The options.
    pub fn options(&self) -> &WsOptions {
        &self.options
    }

    /// Connects to `request`'s URL (`ws://host[:port]/path`) and performs
    /// the WebSocket handshake.
    pub fn connect<R>(
        &self,
        handle: impl AsRef<RuntimeHandle>,
        request: R,
    ) -> impl Future<Output = io::Result<(WsStream, WsResponse)>> + Send + 'static
    where
        R: IntoClientRequest,
    {
        self.start(handle.as_ref().clone(), None, request)
    }

    /// Connects to `addr` (no name resolution) and performs the handshake
    /// for `request`'s URL, whose host goes in the `Host` header (and names
    /// the server for TLS).
    pub fn connect_socket_addr<R>(
        &self,
        handle: impl AsRef<RuntimeHandle>,
        addr: SocketAddr,
        request: R,
    ) -> impl Future<Output = io::Result<(WsStream, WsResponse)>> + Send + 'static
    where
        R: IntoClientRequest,
    {
        self.start(handle.as_ref().clone(), Some(addr), request)
    }

    /// Performs the client handshake for `request` over a connected
    /// `stream` (bounded by the handshake timeout; the URL's scheme is not
    /// checked against the stream).
    pub fn handshake<R>(
        &self,
        stream: impl Into<WsTransport>,
        request: R,
    ) -> impl Future<Output = io::Result<(WsStream, WsResponse)>> + Send + 'static
    where
        R: IntoClientRequest,
    {
        let options = self.options;
        let transport = stream.into();
        let request = request.into_client_request();
        with_timeout(options.handshake_timeout(), async move {
            let request = request.map_err(io_error)?;
            upgrade(request, transport, &options).await
        })
    }

    fn start<R>(
        &self,
        handle: RuntimeHandle,
        addr: Option<SocketAddr>,
        request: R,
    ) -> impl Future<Output = io::Result<(WsStream, WsResponse)>> + Send + 'static
    where
        R: IntoClientRequest,
    {
        let options = self.options;
        let tls = self.tls.clone();
        let session = options.session_policy();
        let request = request.into_client_request();
        with_timeout(options.handshake_timeout(), async move {
            let request = request.map_err(io_error)?;
            let target = Target::of(&request)?;
            let tcp = match addr {
                Some(addr) => {
                    TcpStream::connect_socket_addr_with_session_policy(&handle, addr, session)
                        .await?
                }
                None => {
                    let addr = (target.host.clone(), target.port);
                    TcpStream::connect_with_session_policy(&handle, addr, session).await?
                }
            };
            if options.nodelay() {
                tcp.set_nodelay(true)?;
            }
            let transport = match target.scheme {
                Scheme::Ws => WsTransport::from(tcp),
                Scheme::Wss => {
                    let tls = tls.as_ref().unwrap_or_else(|| webpki_connector());
                    WsTransport::from(tls.connect_stream(&target.host, tcp).await?)
                }
            };
            upgrade(request, transport, &options).await
        })
    }
}

async fn upgrade(
    request: Request,
    transport: WsTransport,
    options: &WsOptions,
) -> io::Result<(WsStream, WsResponse)> {
    async_tungstenite::client_async_with_config(request, transport, Some(*options.config()))
        .await
        .map_err(io_error)
}

/// The default TLS connector: building a root store per connection would
/// cost more than the handshake's key exchange.
fn webpki_connector() -> &'static TlsConnector {
    static CONNECTOR: OnceLock<TlsConnector> = OnceLock::new();
    CONNECTOR.get_or_init(TlsConnector::with_webpki_roots)
}

enum Scheme {
    Ws,
    Wss,
}

/// Where a request goes.
struct Target {
    scheme: Scheme,
    /// The host as `ToSocketAddrs` and TLS want it: an IPv6 literal
    /// without its brackets.
    host: String,
    port: u16,
}

impl Target {
    fn of(request: &Request) -> io::Result<Target> {
        let uri = request.uri();
        let scheme = match uri.scheme_str() {
            Some("ws") => Scheme::Ws,
            Some("wss") => Scheme::Wss,
            _ => return Err(io_error(WsError::Url(UrlError::UnsupportedUrlScheme))),
        };
        let host = match uri.host() {
            Some(host) if !host.is_empty() => host.trim_start_matches('[').trim_end_matches(']'),
            _ => return Err(io_error(WsError::Url(UrlError::NoHostName))),
        };
        let port = uri.port_u16().unwrap_or(match scheme {
            Scheme::Ws => 80,
            Scheme::Wss => 443,
        });
        Ok(Target {
            scheme,
            host: host.to_owned(),
            port,
        })
    }
}
