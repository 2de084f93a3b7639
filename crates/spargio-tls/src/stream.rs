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

use crate::split::{split, TlsReadHalf, TlsWriteHalf};

/// The transport under the TLS streams.
pub(crate) type Transport = Compat<TcpStream>;

/// The client side of a TLS connection (from [`TlsConnector`](crate::TlsConnector)).
///
/// Reads and writes through [`spargio::io::AsyncRead`]/[`AsyncWrite`](spargio::io::AsyncWrite)
/// (owned buffers), `futures_io::{AsyncRead, AsyncWrite}` and, with the
/// `tokio-io` feature, `tokio::io::{AsyncRead, AsyncWrite}`. `close` /
/// `shutdown` sends TLS `close_notify`, then shuts down the TCP write
/// direction. [`split`](ClientTlsStream::split) gives a read half and a
/// write half for two tasks to drive at once.
pub struct ClientTlsStream {
    pub(crate) inner: futures_rustls::client::TlsStream<Transport>,
}

/// The server side of a TLS connection (from [`TlsAcceptor`](crate::TlsAcceptor)).
///
/// The same I/O traits as [`ClientTlsStream`], and the same
/// [`split`](ServerTlsStream::split) into halves for two tasks.
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

    /// The cipher suite agreed.
    pub fn negotiated_cipher_suite(&self) -> Option<rustls::SupportedCipherSuite> {
        self.connection().negotiated_cipher_suite()
    }

    /// The key exchange group agreed (`X25519MLKEM768` where both sides
    /// prefer post-quantum key exchange, as `aws-lc-rs` does here).
    pub fn negotiated_key_exchange_group(&self) -> Option<rustls::NamedGroup> {
        key_exchange_group(self.connection())
    }

    /// Splits the stream into a read half and a write half, each usable
    /// from its own task at the same time; [`TlsReadHalf::reunite`] puts
    /// them back together.
    ///
    /// The halves share the rustls session behind a lock held for one
    /// poll, never across a wait: a read pending on the socket does not
    /// hold up a write, and a write waiting for the socket to drain does
    /// not hold up a read (see [`TlsReadHalf`] for how neither half's
    /// wakeup is lost).
    ///
    /// ```
    /// # spargio::block_on(spargio::run(|handle| async move {
    /// use spargio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
    /// use spargio::net::TcpListener;
    /// use spargio_tls::{TlsAcceptor, TlsConnector};
    ///
    /// let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    /// let (cert_pem, key_pem) = (cert.cert.pem(), cert.signing_key.serialize_pem());
    /// let acceptor = TlsAcceptor::from_pem(cert_pem.as_bytes(), key_pem.as_bytes())?;
    /// let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
    /// let addr = listener.local_addr()?;
    ///
    /// // Server: one task writes while this one reads.
    /// let spawner = handle.clone();
    /// let server = handle.spawn_stealable(async move {
    ///     let (tcp, _) = listener.accept().await?;
    ///     let (mut reader, mut writer) = acceptor.accept(tcp).await?.split();
    ///     let greeter = spawner.spawn_stealable(async move {
    ///         writer.write_all(&b"hello from the server"[..]).await.0?;
    ///         writer.shutdown().await?; // close_notify
    ///         std::io::Result::Ok(writer)
    ///     }).unwrap();
    ///     let (res, heard) = reader.read_to_end(Vec::new()).await;
    ///     res?;
    ///     let writer = greeter.await.unwrap()?;
    ///     let _stream = reader.reunite(writer).unwrap();
    ///     std::io::Result::Ok(heard)
    /// }).unwrap();
    ///
    /// // Client: the halves from one task, one after the other.
    /// let connector = TlsConnector::with_root_ca_pem(cert_pem.as_bytes())?;
    /// let tls = connector.connect_socket_addr(&handle, addr, "localhost").await?;
    /// let (mut reader, mut writer) = tls.split();
    /// writer.write_all(&b"hello from the client"[..]).await.0?;
    /// writer.shutdown().await?;
    /// let (res, heard) = reader.read_to_end(Vec::new()).await;
    /// res?;
    /// assert_eq!(heard, b"hello from the server");
    /// assert_eq!(server.await.unwrap()?, b"hello from the client");
    /// # std::io::Result::Ok(())
    /// # })).unwrap().unwrap();
    /// ```
    pub fn split(self) -> (TlsReadHalf<ClientTlsStream>, TlsWriteHalf<ClientTlsStream>) {
        split(self)
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

    /// The cipher suite agreed.
    pub fn negotiated_cipher_suite(&self) -> Option<rustls::SupportedCipherSuite> {
        self.connection().negotiated_cipher_suite()
    }

    /// The key exchange group agreed (`X25519MLKEM768` where both sides
    /// prefer post-quantum key exchange, as `aws-lc-rs` does here).
    pub fn negotiated_key_exchange_group(&self) -> Option<rustls::NamedGroup> {
        key_exchange_group(self.connection())
    }

    /// The host name the client sent (SNI), if any.
    pub fn server_name(&self) -> Option<&str> {
        self.connection().server_name()
    }

    /// Splits the stream into a read half and a write half, each usable
    /// from its own task at the same time: as
    /// [`ClientTlsStream::split`], whose example splits both sides.
    pub fn split(self) -> (TlsReadHalf<ServerTlsStream>, TlsWriteHalf<ServerTlsStream>) {
        split(self)
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

/// The named group a session agreed on, for both sides' accessors.
fn key_exchange_group(session: &rustls::CommonState) -> Option<rustls::NamedGroup> {
    session.negotiated_key_exchange_group().map(|g| g.name())
}
