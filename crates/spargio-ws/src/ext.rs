//! `WsStreamExt`: the WebSocket calls with `io::Error`s, and refusals
//! answered with a close frame.
//!
//! async-tungstenite's own `Stream`/`Sink` report tungstenite errors and,
//! when a message breaks a limit or the protocol, just stop: the peer sees
//! the connection drop with no reason. [`WsStreamExt::recv`] tells it why
//! first:
//!
//! 1. the frame is refused: at its header when its announced length is
//!    over the frame limit (which [`WsOptions`](crate::WsOptions) caps by
//!    the message limit), before any payload is read; or, for a message
//!    sent in several frames, at the frame that takes it over the message
//!    limit;
//! 2. a close frame goes out with the RFC 6455 code: 1009 "message too
//!    big" for a size limit, 1007 for text that is not UTF-8, 1002 for any
//!    other protocol violation; bounded by [`REFUSAL_LINGER`], since a peer
//!    that does not read could otherwise hold the call;
//! 3. the write side is shut down, and what the peer still sends is read
//!    and discarded until it closes (within the same bound: closing with
//!    unread input would send RST, and a peer still sending would lose our
//!    close frame unread); then the error is returned (`InvalidData`). The
//!    stream is finished: drop it.
//!
//! [`WsStreamExt::close_with`] flushes before it queues its close frame:
//! a pong owed to a ping read before sits queued in tungstenite, which
//! writes a close frame ahead of what it has queued, so the pong would
//! follow the close, and a peer that fails a connection on any frame after
//! a close (tungstenite does) would see a protocol error, not the close
//! handshake.
//!
//! When the peer ends the connection, `recv` returns `Ok(None)` after
//! flushing our close reply and shutting down the write side, so the reply
//! is on the wire before the stream is dropped (the poll adaptor writes
//! behind: dropping it with a send in flight would abandon the send).

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::time::Duration;

use async_tungstenite::tungstenite::error::ProtocolError;
use async_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use async_tungstenite::tungstenite::protocol::CloseFrame;
use async_tungstenite::tungstenite::{Error as WsError, Message};
use async_tungstenite::WebSocketStream;
use futures_core::Stream;
use futures_io::{AsyncRead, AsyncWrite};
use futures_sink::Sink;

use crate::error::io_error;

/// How long a refusal may take: its close frame going out, then the
/// peer's remaining input read until it closes.
pub const REFUSAL_LINGER: Duration = Duration::from_secs(1);

/// WebSocket calls with `io::Error`s, for [`WsStream`](crate::WsStream)
/// (any `async_tungstenite::WebSocketStream` over a `futures_io` stream).
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use spargio::net::TcpListener;
/// use spargio_ws::{Message, WsStreamExt};
///
/// let listener = TcpListener::bind(&handle, "127.0.0.1:0").await.unwrap();
/// let url = format!("ws://{}/", listener.local_addr().unwrap());
/// let server = handle.spawn_stealable(async move {
///     let (tcp, _) = listener.accept().await.unwrap();
///     let mut ws = spargio_ws::accept(tcp).await.unwrap();
///     while let Some(msg) = ws.recv().await.unwrap() {
///         if msg.is_text() || msg.is_binary() {
///             ws.send_message(msg).await.unwrap();
///         }
///     }
/// }).unwrap();
///
/// let (mut ws, _) = spargio_ws::connect(&handle, url.as_str()).await.unwrap();
/// ws.send_message(Message::text("hello")).await.unwrap();
/// assert_eq!(ws.recv().await.unwrap(), Some(Message::text("hello")));
/// ws.ping(b"are you there").await.unwrap();
/// assert_eq!(ws.recv().await.unwrap(), Some(Message::Pong(b"are you there"[..].into())));
/// let reply = ws.close_with(spargio_ws::CloseCode::Normal, "bye").await.unwrap();
/// assert_eq!(reply.unwrap().reason.as_str(), "bye");
/// server.await.unwrap();
/// # })).unwrap();
/// ```
pub trait WsStreamExt: sealed::Sealed {
    /// The next message: text, binary, ping (the pong reply is queued
    /// and goes out with the next read or write), pong, or the peer's
    /// close frame. `Ok(None)` once the connection has ended (module
    /// docs: our close reply is flushed first). A message over a limit,
    /// or a protocol violation, is answered with a close frame (1009,
    /// 1007 or 1002) and returned as `InvalidData`.
    fn recv(&mut self) -> impl Future<Output = io::Result<Option<Message>>> + Send + '_;

    /// Sends `msg` and flushes it.
    fn send_message(&mut self, msg: Message) -> impl Future<Output = io::Result<()>> + Send + '_;

    /// Sends a ping with `payload` (at most 125 bytes); the pong comes
    /// back through [`recv`](WsStreamExt::recv).
    fn ping<'a>(&'a mut self, payload: &[u8]) -> impl Future<Output = io::Result<()>> + Send + 'a;

    /// Closes with `code` and `reason`, then reads until the peer's close
    /// frame and the end of the connection; returns the peer's close frame
    /// (`None` if it sent one with no code). Messages that arrive in
    /// between are dropped. Wrap it in `spargio::timeout` to bound the
    /// wait for a peer that never answers.
    fn close_with<'a>(
        &'a mut self,
        code: CloseCode,
        reason: &str,
    ) -> impl Future<Output = io::Result<Option<CloseFrame>>> + Send + 'a;
}

mod sealed {
    pub trait Sealed {}
    impl<S> Sealed for async_tungstenite::WebSocketStream<S> {}
}

impl<S> WsStreamExt for WebSocketStream<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    fn recv(&mut self) -> impl Future<Output = io::Result<Option<Message>>> + Send + '_ {
        recv(self)
    }

    async fn send_message(&mut self, msg: Message) -> io::Result<()> {
        self.send(msg).await.map_err(io_error)
    }

    fn ping<'a>(&'a mut self, payload: &[u8]) -> impl Future<Output = io::Result<()>> + Send + 'a {
        let msg = Message::Ping(payload.to_vec().into());
        self.send_message(msg)
    }

    fn close_with<'a>(
        &'a mut self,
        code: CloseCode,
        reason: &str,
    ) -> impl Future<Output = io::Result<Option<CloseFrame>>> + Send + 'a {
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        async move {
            // An owed pong goes out ahead of the close frame (module docs).
            poll_fn(|cx| Sink::poll_flush(Pin::new(&mut *self), cx))
                .await
                .map_err(io_error)?;
            match self.close(Some(frame)).await {
                Ok(()) | Err(WsError::ConnectionClosed) => {}
                Err(err) => return Err(io_error(err)),
            }
            let mut reply = None;
            while let Some(msg) = recv(self).await? {
                if let Message::Close(frame) = msg {
                    reply = frame;
                }
            }
            Ok(reply)
        }
    }
}

async fn recv<S>(ws: &mut WebSocketStream<S>) -> io::Result<Option<Message>>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    match poll_fn(|cx| Pin::new(&mut *ws).poll_next(cx)).await {
        Some(Ok(msg)) => Ok(Some(msg)),
        None => {
            // Best effort: the connection is over either way.
            let _ = shut_down(ws).await;
            Ok(None)
        }
        Some(Err(err)) => {
            if let Some(code) = refusal_code(&err) {
                let frame = CloseFrame {
                    code,
                    reason: refusal_reason(code).into(),
                };
                let _ = spargio::timeout(REFUSAL_LINGER, async {
                    let _ = ws.close(Some(frame)).await;
                    shut_down(ws).await?;
                    discard_until_closed(ws).await
                })
                .await;
            }
            Err(io_error(err))
        }
    }
}

/// Flushes what the transport holds and shuts down its write side.
async fn shut_down<S>(ws: &mut WebSocketStream<S>) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    poll_fn(|cx| Pin::new(ws.get_mut()).poll_close(cx)).await
}

/// Reads and discards what the peer still sends until it closes. Closing
/// a socket with unread input sends RST, and a peer that gets RST while
/// still sending the rest of a refused message drops our close frame
/// unread: it would never learn why.
async fn discard_until_closed<S>(ws: &mut WebSocketStream<S>) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    // Cold path: allocated only for a refusal.
    let mut scratch = vec![0u8; 16 * 1024];
    loop {
        let n = poll_fn(|cx| Pin::new(ws.get_mut()).poll_read(cx, &mut scratch)).await?;
        if n == 0 {
            return Ok(());
        }
    }
}

/// The close code that answers a refused frame, if the error is one.
pub(crate) fn refusal_code(err: &WsError) -> Option<CloseCode> {
    match err {
        WsError::Capacity(_) => Some(CloseCode::Size),
        WsError::Utf8(_) => Some(CloseCode::Invalid),
        WsError::Protocol(
            ProtocolError::ResetWithoutClosingHandshake
            | ProtocolError::SendAfterClosing
            | ProtocolError::HandshakeIncomplete,
        ) => None,
        WsError::Protocol(_) => Some(CloseCode::Protocol),
        _ => None,
    }
}

pub(crate) fn refusal_reason(code: CloseCode) -> &'static str {
    match code {
        CloseCode::Size => "message too big",
        CloseCode::Invalid => "invalid UTF-8",
        _ => "protocol error",
    }
}
