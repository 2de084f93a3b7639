//! `WsTransport`: the byte stream a WebSocket runs over.
//!
//! One enum for every transport, not a type parameter, so that `ws://`
//! and `wss://` connections have one type ([`WsStream`](crate::WsStream))
//! and a server can keep both kinds in one collection. The enum costs a
//! branch per poll, which is nothing next to a syscall or a TLS record;
//! the TLS variants are boxed so that a plain connection does not carry
//! a TLS session's size. The plain and TLS variants are `futures_io`
//! streams over [`spargio::io::Compat`] and a ring-backed [`TcpStream`];
//! [`WsTransport::Upgraded`] carries a connection an HTTP server handed
//! over after its own upgrade handshake (spargio-http's axum extractor),
//! behind one virtual call per poll.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_io::{AsyncRead, AsyncWrite};
use spargio::io::Compat;
use spargio::net::TcpStream;
use spargio_tls::{ClientTlsStream, ServerTlsStream};

/// A stream a WebSocket runs over: plain TCP, or TLS over TCP.
#[derive(Debug)]
#[non_exhaustive]
pub enum WsTransport {
    /// `ws://`: the TCP stream through its poll adaptor.
    Plain(Compat<TcpStream>),
    /// `wss://`, client side.
    ClientTls(Box<ClientTlsStream>),
    /// `wss://`, server side.
    ServerTls(Box<ServerTlsStream>),
    /// A connection an HTTP server upgraded (it did the handshake and may
    /// hold the TCP stream inside its own types).
    Upgraded(Box<dyn UpgradedIo>),
}

/// The byte stream of a connection an HTTP server upgraded to WebSocket
/// (implemented for every `futures_io` stream that is `Send + Debug`):
/// see [`WsAcceptor::upgraded`](crate::WsAcceptor::upgraded).
pub trait UpgradedIo: AsyncRead + AsyncWrite + Send + Unpin + fmt::Debug + 'static {}

impl<T: AsyncRead + AsyncWrite + Send + Unpin + fmt::Debug + 'static> UpgradedIo for T {}

impl WsTransport {
    /// The TCP stream underneath (for its addresses and socket options);
    /// `None` for an [`Upgraded`](WsTransport::Upgraded) connection,
    /// whose stream its HTTP server keeps.
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            WsTransport::Plain(s) => Some(s.get_ref()),
            WsTransport::ClientTls(s) => Some(s.get_ref()),
            WsTransport::ServerTls(s) => Some(s.get_ref()),
            WsTransport::Upgraded(_) => None,
        }
    }

    /// Whether the bytes go through TLS.
    pub fn is_tls(&self) -> bool {
        !matches!(self, WsTransport::Plain(_))
    }
}

impl From<TcpStream> for WsTransport {
    fn from(stream: TcpStream) -> WsTransport {
        WsTransport::Plain(Compat::new(stream))
    }
}

impl From<Compat<TcpStream>> for WsTransport {
    fn from(stream: Compat<TcpStream>) -> WsTransport {
        WsTransport::Plain(stream)
    }
}

impl From<ClientTlsStream> for WsTransport {
    fn from(stream: ClientTlsStream) -> WsTransport {
        WsTransport::ClientTls(Box::new(stream))
    }
}

impl From<ServerTlsStream> for WsTransport {
    fn from(stream: ServerTlsStream) -> WsTransport {
        WsTransport::ServerTls(Box::new(stream))
    }
}

impl AsyncRead for WsTransport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WsTransport::Plain(s) => Pin::new(s).poll_read(cx, buf),
            WsTransport::ClientTls(s) => Pin::new(&mut **s).poll_read(cx, buf),
            WsTransport::ServerTls(s) => Pin::new(&mut **s).poll_read(cx, buf),
            WsTransport::Upgraded(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for WsTransport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            WsTransport::Plain(s) => Pin::new(s).poll_write(cx, buf),
            WsTransport::ClientTls(s) => Pin::new(&mut **s).poll_write(cx, buf),
            WsTransport::ServerTls(s) => Pin::new(&mut **s).poll_write(cx, buf),
            WsTransport::Upgraded(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WsTransport::Plain(s) => Pin::new(s).poll_flush(cx),
            WsTransport::ClientTls(s) => Pin::new(&mut **s).poll_flush(cx),
            WsTransport::ServerTls(s) => Pin::new(&mut **s).poll_flush(cx),
            WsTransport::Upgraded(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            WsTransport::Plain(s) => Pin::new(s).poll_close(cx),
            WsTransport::ClientTls(s) => Pin::new(&mut **s).poll_close(cx),
            WsTransport::ServerTls(s) => Pin::new(&mut **s).poll_close(cx),
            WsTransport::Upgraded(s) => Pin::new(&mut **s).poll_close(cx),
        }
    }
}
