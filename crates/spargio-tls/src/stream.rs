//! The TLS streams handed out by connects and accepts.
//!
//! Each is a rustls connection driven by `futures-rustls` over
//! [`spargio::io::Compat`]`<TcpStream>` (the type
//! `spargio_protocols::io_compat::FuturesTcpStream` names). Compat's read
//! copies bytes already queued on the socket straight into rustls's
//! record buffer (`recv` with `MSG_DONTWAIT`), and its write sends
//! rustls's encrypted records straight from rustls's buffer while the
//! socket has room; only when the socket must be waited on does a ring
//! operation, with Compat's own buffer, take over. The TLS layer thus
//! adds no copy of its own beyond decryption and encryption (measured:
//! see the crate README, "Performance").
//!
//! The poll impls (`futures_io` here, tokio's in `tokio_io.rs`) and the
//! owned-buffer impls (`owned_io.rs`) all drive the same `inner`, so they
//! can be mixed on one stream.

use std::fmt;

use rustls::pki_types::CertificateDer;
use rustls::{ClientConnection, ProtocolVersion, ServerConnection};
use spargio::io::Compat;
use spargio::net::TcpStream;

/// The transport under the TLS streams.
pub(crate) type Transport = Compat<TcpStream>;

/// The client side of a TLS connection (from [`TlsConnector`](crate::TlsConnector)).
///
/// Reads and writes through [`spargio::io::AsyncRead`]/[`AsyncWrite`](spargio::io::AsyncWrite)
/// (owned buffers), `futures_io::{AsyncRead, AsyncWrite}` and, with the
/// `tokio-io` feature, `tokio::io::{AsyncRead, AsyncWrite}`. `close` /
/// `shutdown` sends TLS `close_notify`, then shuts down the TCP write
/// direction.
pub struct ClientTlsStream {
    pub(crate) inner: futures_rustls::client::TlsStream<Transport>,
}

/// The server side of a TLS connection (from [`TlsAcceptor`](crate::TlsAcceptor)).
///
/// The same I/O traits as [`ClientTlsStream`].
pub struct ServerTlsStream {
    pub(crate) inner: futures_rustls::server::TlsStream<Transport>,
}

// ===== impl ClientTlsStream =====

impl ClientTlsStream {
    /// The TCP stream under the TLS layer.
    pub fn get_ref(&self) -> &TcpStream {
        self.inner.get_ref().0.get_ref()
    }

    /// The rustls connection (state, cipher suite, exporters ...).
    pub fn connection(&self) -> &ClientConnection {
        self.inner.get_ref().1
    }

    /// The server's certificate chain (DER, leaf first).
    pub fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        self.connection().peer_certificates()
    }

    /// The application protocol agreed by ALPN, if any.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.connection().alpn_protocol()
    }

    /// The TLS version agreed.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.connection().protocol_version()
    }
}

impl fmt::Debug for ClientTlsStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug(
            f,
            "ClientTlsStream",
            self.get_ref(),
            self.protocol_version(),
            self.alpn_protocol(),
        )
    }
}

// ===== impl ServerTlsStream =====

impl ServerTlsStream {
    /// The TCP stream under the TLS layer.
    pub fn get_ref(&self) -> &TcpStream {
        self.inner.get_ref().0.get_ref()
    }

    /// The rustls connection (state, cipher suite, exporters ...).
    pub fn connection(&self) -> &ServerConnection {
        self.inner.get_ref().1
    }

    /// The client's certificate chain (DER, leaf first), when the
    /// acceptor's config asked for client certificates.
    pub fn peer_certificates(&self) -> Option<&[CertificateDer<'static>]> {
        self.connection().peer_certificates()
    }

    /// The application protocol agreed by ALPN, if any.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.connection().alpn_protocol()
    }

    /// The TLS version agreed.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.connection().protocol_version()
    }

    /// The host name the client sent (SNI), if any.
    pub fn server_name(&self) -> Option<&str> {
        self.connection().server_name()
    }
}

impl fmt::Debug for ServerTlsStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug(
            f,
            "ServerTlsStream",
            self.get_ref(),
            self.protocol_version(),
            self.alpn_protocol(),
        )
    }
}

fn debug(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    tcp: &TcpStream,
    version: Option<ProtocolVersion>,
    alpn: Option<&[u8]>,
) -> fmt::Result {
    f.debug_struct(name)
        .field("tcp", tcp)
        .field("version", &version)
        .field("alpn", &alpn.map(String::from_utf8_lossy))
        .finish_non_exhaustive()
}
