//! # spargio-ws
//!
//! WebSocket on [spargio]: [async-tungstenite] (its `futures_io` flavour,
//! no tokio) over the runtime's ring-backed TCP streams.
//!
//! * **Client**: [`connect`] (`ws://` URLs) and [`connect_socket_addr`]
//!   (an address, no name resolution), or a [`WsConnector`].
//! * **Server**: [`accept`] on a stream your listener accepted, or a
//!   [`WsAcceptor`].
//! * **Limits**: [`WsOptions`] bounds the handshake in time
//!   (`TimedOut`) and frames and messages in size. The message limit caps
//!   the frame limit, so a frame announcing more than the message limit is
//!   refused at its header, before any payload is read; a message sent in
//!   several frames is refused at the frame that takes it over. Either way
//!   a connection holds at most about twice the message limit, and the
//!   peer gets close code 1009 ([`WsStreamExt::recv`]).
//! * **Errors** are `io::Error`s with a kind to match ([`io_error`]).
//!
//! The stream is async-tungstenite's [`WebSocketStream`] over a
//! [`WsTransport`]: its `Stream` and `Sink` work as usual, and
//! [`WsStreamExt`] adds `recv`, `send_message`, `ping` and `close_with`
//! with `io::Error`s.
//!
//! * **Receiving and sending at once**: `ws.split()` gives a [`WsSender`]
//!   and a [`WsReceiver`], each `Send` and driven by its own task (a
//!   receive waiting for the peer never holds up a send, nor the other
//!   way round); [`WsSenderExt`] and [`WsReceiverExt`] add the calls with
//!   `io::Error`s, and `WsStream::reunite` puts the halves back.
//!
//! ```
//! # spargio::block_on(spargio::run(|handle| async move {
//! use spargio::net::TcpListener;
//! use spargio_ws::{CloseCode, Message, WsStreamExt};
//!
//! let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
//! let url = format!("ws://{}/chat", listener.local_addr().unwrap());
//!
//! // Server: echo text and binary messages until the client closes.
//! let server = handle.spawn_stealable(async move {
//!     let (tcp, _) = listener.accept().await.unwrap();
//!     let mut ws = spargio_ws::accept(tcp).await.unwrap();
//!     while let Some(msg) = ws.recv().await.unwrap() {
//!         if msg.is_text() || msg.is_binary() {
//!             ws.send_message(msg).await.unwrap();
//!         }
//!     }
//! }).unwrap();
//!
//! // Client.
//! let (mut ws, response) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
//! assert_eq!(response.status(), 101);
//! ws.send_message(Message::text("hello")).await.unwrap();
//! assert_eq!(ws.recv().await.unwrap(), Some(Message::text("hello")));
//! ws.send_message(Message::binary(vec![1, 2, 3])).await.unwrap();
//! assert_eq!(ws.recv().await.unwrap(), Some(Message::binary(vec![1, 2, 3])));
//! ws.close_with(CloseCode::Normal, "done").await.unwrap();
//! server.await.unwrap();
//! # })).unwrap();
//! ```
//!
//! [spargio]: https://docs.rs/spargio
//! [async-tungstenite]: https://docs.rs/async-tungstenite

#![warn(
    missing_docs,
    unreachable_pub,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks
)]

#[cfg(not(target_os = "linux"))]
compile_error!("spargio-ws runs on Linux only: it is built on spargio's io_uring streams");

mod accept;
mod connect;
mod error;
mod ext;
mod halves;
mod options;
mod transport;

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use spargio::RuntimeHandle;

pub use accept::WsAcceptor;
pub use async_tungstenite::tungstenite;
pub use async_tungstenite::tungstenite::client::IntoClientRequest;
pub use async_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
pub use async_tungstenite::tungstenite::protocol::CloseFrame;
pub use async_tungstenite::tungstenite::Message;
pub use async_tungstenite::WebSocketStream;
pub use connect::WsConnector;
pub use error::io_error;
pub use ext::{WsStreamExt, REFUSAL_LINGER};
pub use halves::{refusal_close_frame, WsReceiver, WsReceiverExt, WsSender, WsSenderExt};
pub use options::{WsOptions, DEFAULT_HANDSHAKE_TIMEOUT};
pub use transport::{UpgradedIo, WsTransport};

/// A WebSocket connection: async-tungstenite's stream over a
/// [`WsTransport`] (plain TCP or TLS).
///
/// `split()` gives a [`WsSender`] and a [`WsReceiver`] for two tasks to
/// drive at once (the halves share the stream behind a lock held for one
/// poll, and a wakeup meant for either reaches it: see [`WsReceiver`]),
/// and `WsStream::reunite(sender, receiver)` puts them back together.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::net::TcpListener;
/// use spargio_ws::{CloseCode, Message, WsReceiverExt, WsSenderExt, WsStream, WsStreamExt};
///
/// let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
/// let url = format!("ws://{}/", listener.local_addr().unwrap());
/// let server = handle.spawn_stealable(async move {
///     let (tcp, _) = listener.accept().await.unwrap();
///     let mut ws = spargio_ws::accept(tcp).await.unwrap();
///     while let Some(msg) = ws.recv().await.unwrap() {
///         if msg.is_text() {
///             ws.send_message(msg).await.unwrap();
///         }
///     }
/// }).unwrap();
///
/// let (ws, _) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
/// let (mut sender, mut receiver) = ws.split();
/// // One task sends while this one receives.
/// let sending = handle.spawn_stealable(async move {
///     for i in 0..3 {
///         sender.send_message(Message::text(format!("tick {i}"))).await.unwrap();
///     }
///     sender
/// }).unwrap();
/// for i in 0..3 {
///     assert_eq!(receiver.recv().await.unwrap(), Some(Message::text(format!("tick {i}"))));
/// }
/// let sender = sending.await.unwrap();
/// let mut ws = WsStream::reunite(sender, receiver).unwrap();
/// ws.close_with(CloseCode::Normal, "done").await.unwrap();
/// server.await.unwrap();
/// # })).unwrap();
/// ```
pub type WsStream<S = WsTransport> = WebSocketStream<S>;

/// The server's answer to a client's upgrade request.
pub type WsResponse = tungstenite::handshake::client::Response;

/// The README's code blocks, run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// Connects to `request`'s URL and performs the handshake, with the
/// default [`WsOptions`] (a 10 s handshake timeout).
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// // No one listens on port 1: the connect is refused.
/// let err = spargio_ws::connect(&handle, "ws://127.0.0.1:1/").await.unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
/// let err = spargio_ws::connect(&handle, "http://127.0.0.1:1/").await.unwrap_err();
/// assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
/// # })).unwrap();
/// ```
pub fn connect<R: IntoClientRequest>(
    handle: impl AsRef<RuntimeHandle>,
    request: R,
) -> impl Future<Output = io::Result<(WsStream, WsResponse)>> + Send + 'static {
    WsConnector::new().connect(handle, request)
}

/// [`connect`] with `options`.
pub fn connect_with_options<R: IntoClientRequest>(
    handle: impl AsRef<RuntimeHandle>,
    request: R,
    options: WsOptions,
) -> impl Future<Output = io::Result<(WsStream, WsResponse)>> + Send + 'static {
    WsConnector::new()
        .with_options(options)
        .connect(handle, request)
}

/// Connects to `addr` (no name resolution) and performs the handshake for
/// `request`'s URL, with the default [`WsOptions`].
pub fn connect_socket_addr<R: IntoClientRequest>(
    handle: impl AsRef<RuntimeHandle>,
    addr: SocketAddr,
    request: R,
) -> impl Future<Output = io::Result<(WsStream, WsResponse)>> + Send + 'static {
    WsConnector::new().connect_socket_addr(handle, addr, request)
}

/// [`connect_socket_addr`] with `options`.
pub fn connect_socket_addr_with_options<R: IntoClientRequest>(
    handle: impl AsRef<RuntimeHandle>,
    addr: SocketAddr,
    request: R,
    options: WsOptions,
) -> impl Future<Output = io::Result<(WsStream, WsResponse)>> + Send + 'static {
    WsConnector::new()
        .with_options(options)
        .connect_socket_addr(handle, addr, request)
}

/// Performs the server handshake on `stream`, with the default
/// [`WsOptions`].
pub fn accept(
    stream: impl Into<WsTransport>,
) -> impl Future<Output = io::Result<WsStream>> + Send + 'static {
    WsAcceptor::new().accept(stream)
}

/// [`accept`] with `options`: a handshake that takes longer than their
/// timeout returns `TimedOut` (and the stream is closed).
pub fn accept_with_options(
    stream: impl Into<WsTransport>,
    options: WsOptions,
) -> impl Future<Output = io::Result<WsStream>> + Send + 'static {
    WsAcceptor::new().with_options(options).accept(stream)
}

/// Runs `fut` under `timeout` (if any); a timeout is `TimedOut`.
async fn with_timeout<T>(
    timeout: Option<Duration>,
    fut: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match timeout {
        Some(limit) => spargio::timeout(limit, fut).await?,
        None => fut.await,
    }
}
