//! `WsAcceptor`: the server side, over a stream the caller accepted.
//!
//! The caller owns the listener (and, for `wss://`, the TLS handshake):
//! the acceptor only performs the HTTP upgrade on the stream, bounded by
//! the handshake timeout. A peer that connects and sends nothing is
//! dropped when the timeout passes, and the call returns `TimedOut`: the
//! stream, and so the socket, go with the dropped handshake future.

use std::future::Future;
use std::io;

use async_tungstenite::tungstenite::handshake::server::Callback;
use async_tungstenite::tungstenite::protocol::Role;

use crate::error::io_error;
use crate::transport::UpgradedIo;
use crate::{with_timeout, WsOptions, WsStream, WsTransport};

/// Accepts WebSocket connections with one set of [`WsOptions`].
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use std::io::Write;
/// use std::time::Duration;
/// use spargio::net::TcpListener;
/// use spargio_ws::{WsAcceptor, WsOptions};
///
/// let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
/// let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
/// client.write_all(b"GET / HTTP/1.1\r\n").unwrap(); // ... and nothing more
/// let (tcp, _) = listener.accept().await.unwrap();
/// let acceptor = WsAcceptor::new()
///     .with_options(WsOptions::default().with_handshake_timeout(Some(Duration::from_millis(50))));
/// let err = acceptor.accept(tcp).await.unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
/// # })).unwrap();
/// ```
#[derive(Clone, Debug, Default)]
pub struct WsAcceptor {
    options: WsOptions,
}

impl WsAcceptor {
    /// An acceptor with the default options.
    pub fn new() -> WsAcceptor {
        WsAcceptor::default()
    }

    /// This acceptor with `options`.
    pub fn with_options(mut self, options: WsOptions) -> WsAcceptor {
        self.options = options;
        self
    }

    /// The options.
    pub fn options(&self) -> &WsOptions {
        &self.options
    }

    /// Performs the server handshake on `stream` (a `TcpStream`, its
    /// `Compat` adaptor, or a TLS stream).
    pub fn accept(
        &self,
        stream: impl Into<WsTransport>,
    ) -> impl Future<Output = io::Result<WsStream>> + Send + 'static {
        let options = self.options;
        let transport = stream.into();
        with_timeout(options.handshake_timeout(), async move {
            set_nodelay(&transport, &options)?;
            async_tungstenite::accept_async_with_config(transport, Some(*options.config()))
                .await
                .map_err(io_error)
        })
    }

    /// The server side of a connection whose upgrade handshake an HTTP
    /// server already answered (`101 Switching Protocols`): no handshake
    /// here, the options' limits apply from the first frame. This is how
    /// spargio-http's axum extractor hands over its connections.
    pub fn upgraded(&self, io: impl UpgradedIo) -> impl Future<Output = WsStream> + Send + 'static {
        let config = *self.options.config();
        let transport = WsTransport::Upgraded(Box::new(io));
        WsStream::from_raw_socket(transport, Role::Server, Some(config))
    }

    /// [`accept`](WsAcceptor::accept) with a callback that sees the
    /// upgrade request (path, headers) and may add headers to the
    /// response or refuse with an HTTP error response.
    pub fn accept_with_callback<C>(
        &self,
        stream: impl Into<WsTransport>,
        callback: C,
    ) -> impl Future<Output = io::Result<WsStream>> + Send + 'static
    where
        C: Callback + Unpin + Send + 'static,
    {
        let options = self.options;
        let transport = stream.into();
        with_timeout(options.handshake_timeout(), async move {
            set_nodelay(&transport, &options)?;
            async_tungstenite::accept_hdr_async_with_config(
                transport,
                callback,
                Some(*options.config()),
            )
            .await
            .map_err(io_error)
        })
    }
}

fn set_nodelay(transport: &WsTransport, options: &WsOptions) -> io::Result<()> {
    if let Some(tcp) = transport.tcp().filter(|_| options.nodelay()) {
        tcp.set_nodelay(true)?;
    }
    Ok(())
}
