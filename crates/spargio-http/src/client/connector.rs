//! The connector: TCP (and TLS for `https`) to the URI's authority.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection as HyperConnection};
use spargio::io::Compat;
use spargio::net::TcpStream;
use spargio::RuntimeHandle;
use spargio_tls::{ClientTlsStream, HandshakeOptions, TlsConnector};

use crate::rt::Io;

/// Opens connections for the [`Client`](super::Client): `http://` over
/// TCP, `https://` over TCP and TLS (ALPN `h2` and `http/1.1`). Names are
/// resolved on spargio's blocking pool, never on a shard; the connect
/// (and TLS handshake) is bounded by the connect timeout.
#[derive(Clone, Debug)]
pub struct Connector {
    handle: RuntimeHandle,
    tls: Option<TlsConnector>,
    connect_timeout: Option<Duration>,
}

impl Connector {
    pub(crate) fn new(
        handle: RuntimeHandle,
        tls: Option<TlsConnector>,
        connect_timeout: Option<Duration>,
    ) -> Connector {
        Connector {
            handle,
            tls,
            connect_timeout,
        }
    }
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl tower_service::Service<Uri> for Connector {
    type Response = Connection;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Connection>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let https = match uri.scheme_str() {
                Some("https") => true,
                Some("http") | None => false,
                Some(_) => return Err(invalid("unsupported URI scheme (http and https only)")),
            };
            let host = uri.host().ok_or_else(|| invalid("URI has no host"))?;
            // `[::1]` in a URI is `::1` to the resolver.
            let host = host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned();
            let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
            let connect = async {
                let tcp = TcpStream::connect(&this.handle, (host.clone(), port)).await?;
                tcp.set_nodelay(true)?;
                if !https {
                    return Ok(Connection(Inner::Tcp(Io::new(Compat::new(tcp)))));
                }
                let tls = this
                    .tls
                    .as_ref()
                    .ok_or_else(|| invalid("https URI on a client built without TLS"))?;
                let tls = tls
                    .connect_stream_with_options(&host, tcp, HandshakeOptions::default())
                    .await?;
                Ok(Connection(Inner::Tls(Box::new(Io::new(tls)))))
            };
            match this.connect_timeout {
                None => connect.await,
                Some(limit) => crate::timeout::timeout(&this.handle, limit, connect)
                    .await
                    .unwrap_or_else(|| {
                        Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))
                    }),
            }
        })
    }
}

/// A connection the [`Connector`] opened: plain TCP or TLS.
#[derive(Debug)]
pub struct Connection(Inner);

// Plain TCP, the common case, stays inline (the TLS stream is boxed): a
// pooled connection is one value for its whole life, and boxing the TCP
// side would add an allocation to every connection to save 200 bytes.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Inner {
    Tcp(Io<Compat<TcpStream>>),
    Tls(Box<Io<ClientTlsStream>>),
}

impl Connection {
    /// True for an `https://` connection.
    pub fn is_tls(&self) -> bool {
        matches!(self.0, Inner::Tls(_))
    }
}

impl HyperConnection for Connection {
    fn connected(&self) -> Connected {
        match &self.0 {
            Inner::Tls(io) if io.get_ref().alpn_protocol() == Some(b"h2") => {
                Connected::new().negotiated_h2()
            }
            _ => Connected::new(),
        }
    }
}

macro_rules! both {
    ($self:ident, $io:ident => $e:expr) => {
        match &mut $self.get_mut().0 {
            Inner::Tcp($io) => $e,
            Inner::Tls($io) => {
                let $io = &mut **$io;
                $e
            }
        }
    };
}

impl hyper::rt::Read for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        both!(self, io => Pin::new(io).poll_read(cx, buf))
    }
}

impl hyper::rt::Write for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        both!(self, io => Pin::new(io).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        both!(self, io => Pin::new(io).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match &self.0 {
            Inner::Tcp(io) => hyper::rt::Write::is_write_vectored(io),
            Inner::Tls(io) => hyper::rt::Write::is_write_vectored(&**io),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        both!(self, io => Pin::new(io).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        both!(self, io => Pin::new(io).poll_shutdown(cx))
    }
}
