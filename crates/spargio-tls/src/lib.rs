//! # spargio-tls
//!
//! TLS for [spargio]: [rustls] over the runtime's io_uring TCP streams.
//!
//! * **Crypto provider, as rustls chooses one.** Every config built here
//!   uses the process default provider when one is installed
//!   (`CryptoProvider::install_default`), else the one a feature selects:
//!   `ring` (default) or `aws-lc-rs` (post-quantum key exchange
//!   preferred, as in rustls' defaults); with both, `ring`. A process
//!   that has both compiled in (axum-server brings `aws-lc-rs`) works
//!   without installing anything.
//! * **Connect and accept.** [`TlsConnector`] opens a TCP connection and
//!   runs the client handshake; [`TlsAcceptor`] runs the server handshake
//!   on an accepted stream. Both wrap a shared `rustls` config, built by
//!   the caller or by a convenience constructor (webpki roots, a root CA
//!   in PEM, a certificate chain and key in PEM).
//! * **One stream, every I/O trait.** [`ClientTlsStream`] and
//!   [`ServerTlsStream`] implement spargio's owned-buffer
//!   [`AsyncRead`](spargio::io::AsyncRead)/[`AsyncWrite`](spargio::io::AsyncWrite),
//!   `futures_io`'s traits and, with the `tokio-io` feature, tokio's (so
//!   hyper runs over them through `hyper_util::rt::TokioIo`).
//! * **Read and write at once.** `split()` turns a stream into a
//!   [`TlsReadHalf`] and a [`TlsWriteHalf`], each driven by its own task:
//!   a read waiting for the peer never holds up a write, nor the other way
//!   round (a proxy, a full-duplex protocol).
//! * **Errors to match on.** A certificate rustls rejects (unknown CA,
//!   wrong name, expired) is `InvalidData`; a [`HandshakeOptions`]
//!   timeout is `TimedOut`; a bad server name is `InvalidInput`.
//!
//! ```
//! # spargio::block_on(spargio::run(|handle| async move {
//! use spargio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt};
//! use spargio::net::TcpListener;
//! use spargio_tls::{TlsAcceptor, TlsConnector};
//!
//! // A self-signed certificate for `localhost` (rcgen, for the example).
//! let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
//! let (cert_pem, key_pem) = (cert.cert.pem(), cert.signing_key.serialize_pem());
//!
//! let acceptor = TlsAcceptor::from_pem(cert_pem.as_bytes(), key_pem.as_bytes())?;
//! let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
//! let addr = listener.local_addr()?;
//! let server = handle.spawn_stealable(async move {
//!     let (tcp, _) = listener.accept().await?;
//!     let mut tls = acceptor.accept(tcp).await?;
//!     let (res, buf) = tls.read_exact(vec![0u8; 5].into_boxed_slice()).await;
//!     res?;
//!     tls.write_all(buf).await.0?;
//!     tls.shutdown().await
//! }).unwrap();
//!
//! let connector = TlsConnector::with_root_ca_pem(cert_pem.as_bytes())?;
//! let mut tls = connector.connect_socket_addr(&handle, addr, "localhost").await?;
//! tls.write_all(&b"hello"[..]).await.0?;
//! let (res, echoed) = tls.read_to_end(Vec::new()).await;
//! res?;
//! assert_eq!(echoed, b"hello");
//! assert!(tls.peer_certificates().is_some());
//! server.await.unwrap()?;
//! # std::io::Result::Ok(())
//! # })).unwrap().unwrap();
//! ```
//!
//! # Calls
//!
//! Methods: [`TlsConnector::connect`], [`TlsConnector::connect_socket_addr`],
//! [`TlsConnector::connect_stream`] (a TCP stream the caller connected),
//! [`TlsAcceptor::accept`], each with a `*_with_options` twin. The free
//! functions [`connect`], [`connect_with_options`], [`connect_socket_addr`],
//! [`connect_socket_addr_with_options`], [`accept`], [`accept_with_options`]
//! are the same calls with the connector or acceptor as first argument.
//!
//! # Caveats
//!
//! * Linux only, like spargio.
//! * A handshake without a timeout waits as long as the peer does: set
//!   one on servers facing the network.
//! * Dropping a stream without `shutdown` sends no `close_notify`; peers
//!   that insist on one see a truncation error.
//! * A stream buffers writes like a `BufWriter`, as futures-rustls and
//!   tokio-rustls do: when the socket is full, a write can accept bytes
//!   and leave their records inside rustls, and only a later write,
//!   `flush` or `shutdown` passes them on. A read does not (it would take
//!   over the waker of a write waiting in another task, the one
//!   `tokio::io::split` or `futures::io::split` gave it). Flush before
//!   waiting for the peer's reply.
//!
//! [spargio]: https://docs.rs/spargio
//! [rustls]: https://docs.rs/rustls

#![warn(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

#[cfg(not(target_os = "linux"))]
compile_error!("spargio-tls runs on Linux only: it is built on spargio's io_uring streams");

mod acceptor;
mod connector;
mod options;
mod owned_io;
mod pem;
mod poll_io;
mod provider;
mod reload;
mod split;
mod stream;
#[cfg(feature = "tokio-io")]
mod tokio_io;

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

use spargio::net::TcpStream;
use spargio::RuntimeHandle;

pub use acceptor::TlsAcceptor;
pub use connector::TlsConnector;
pub use options::HandshakeOptions;
pub use reload::CertReloader;
pub use split::{TlsReadHalf, TlsReuniteError, TlsWriteHalf};
pub use stream::{ClientTlsStream, ServerTlsStream};

/// The rustls this crate is built on, for building configs by hand.
pub use rustls;

/// The README's code blocks, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// [`TlsConnector::connect`]: connects to `addr` and runs the handshake,
/// checking the certificate against `server_name`.
pub async fn connect<A>(
    connector: &TlsConnector,
    handle: impl AsRef<RuntimeHandle>,
    addr: A,
    server_name: &str,
) -> io::Result<ClientTlsStream>
where
    A: ToSocketAddrs + Send + 'static,
    A::Iter: Send,
{
    connector.connect(handle, addr, server_name).await
}

/// [`TlsConnector::connect_with_options`]: [`connect`] with a timeout
/// over resolution, TCP connect and handshake (`TimedOut`).
pub async fn connect_with_options<A>(
    connector: &TlsConnector,
    handle: impl AsRef<RuntimeHandle>,
    addr: A,
    server_name: &str,
    options: HandshakeOptions,
) -> io::Result<ClientTlsStream>
where
    A: ToSocketAddrs + Send + 'static,
    A::Iter: Send,
{
    connector
        .connect_with_options(handle, addr, server_name, options)
        .await
}

/// [`TlsConnector::connect_socket_addr`]: connects to `addr` (no name
/// resolution) and runs the handshake.
pub async fn connect_socket_addr(
    connector: &TlsConnector,
    handle: impl AsRef<RuntimeHandle>,
    addr: SocketAddr,
    server_name: &str,
) -> io::Result<ClientTlsStream> {
    connector
        .connect_socket_addr(handle, addr, server_name)
        .await
}

/// [`TlsConnector::connect_socket_addr_with_options`]:
/// [`connect_socket_addr`] with a timeout (`TimedOut`).
pub async fn connect_socket_addr_with_options(
    connector: &TlsConnector,
    handle: impl AsRef<RuntimeHandle>,
    addr: SocketAddr,
    server_name: &str,
    options: HandshakeOptions,
) -> io::Result<ClientTlsStream> {
    connector
        .connect_socket_addr_with_options(handle, addr, server_name, options)
        .await
}

/// [`TlsAcceptor::accept`]: runs the server handshake on `stream`.
pub async fn accept(acceptor: &TlsAcceptor, stream: TcpStream) -> io::Result<ServerTlsStream> {
    acceptor.accept(stream).await
}

/// [`TlsAcceptor::accept_with_options`]: [`accept`] with a timeout; past
/// it the stream is closed and the call returns `TimedOut`.
pub async fn accept_with_options(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    options: HandshakeOptions,
) -> io::Result<ServerTlsStream> {
    acceptor.accept_with_options(stream, options).await
}
