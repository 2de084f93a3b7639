//! The halves of a split [`WsStream`](crate::WsStream): receiving in one
//! task while another sends.
//!
//! `WsStream::split` is async-tungstenite's: a [`WsSender`] (its `Sink`,
//! `send`, `close`) and a [`WsReceiver`] (its `Stream`), sharing the
//! stream behind a lock held for one poll, never across a wait. Neither
//! half's wakeup is lost: async-tungstenite hands the transport a proxy
//! waker per direction that wakes both halves' tasks (a receive can write
//! a pong or a close reply; a send can only write), and the TLS transport
//! under `wss://` is polled with those proxies alone. The extension traits
//! here add the calls of [`WsStreamExt`](crate::WsStreamExt) with
//! `io::Error`s.
//!
//! A receiver cannot send, so [`WsReceiverExt::recv`] returns a refusal
//! (a message over the limit, a protocol violation) without answering it;
//! [`refusal_close_frame`] gives the close frame for the sender to send.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;

use async_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use async_tungstenite::tungstenite::protocol::CloseFrame;
use async_tungstenite::tungstenite::{Error as WsError, Message};
use async_tungstenite::{WebSocketReceiver, WebSocketSender};
use futures_core::Stream;
use futures_io::{AsyncRead, AsyncWrite};
use futures_sink::Sink;

use crate::error::io_error;
use crate::ext::{refusal_code, refusal_reason};
use crate::WsTransport;

/// The sending half of a split [`WsStream`](crate::WsStream).
pub type WsSender<S = WsTransport> = WebSocketSender<S>;

/// The receiving half of a split [`WsStream`](crate::WsStream).
///
/// The halves share the stream behind a lock held for the duration of one
/// poll, never across a wait: a receive waiting for the peer does not hold
/// up a send, nor a send waiting for socket room a receive. Neither half's
/// wakeup is lost: the transport is only ever polled with
/// async-tungstenite's proxy wakers, one per direction, each of which
/// wakes both halves' tasks (a receive can write: pongs, close replies;
/// so the send in flight under the stream may be polled from either
/// half, and it keeps one waker). That holds for `wss://` too: the TLS
/// stream under it is polled with the same proxies.
pub type WsReceiver<S = WsTransport> = WebSocketReceiver<S>;

/// [`WsStreamExt::recv`](crate::WsStreamExt::recv) for a [`WsReceiver`].
pub trait WsReceiverExt: sealed::Receiver {
    /// The next message (text, binary, ping, pong, or the peer's close
    /// frame; the replies to pings and closes go out by themselves), or
    /// `Ok(None)` once the connection has ended. A message over a limit,
    /// or a protocol violation, is `InvalidData`: answer it with
    /// [`refusal_close_frame`] through the sender.
    fn recv(&mut self) -> impl Future<Output = io::Result<Option<Message>>> + Send + '_;
}

/// The sending calls of [`WsStreamExt`](crate::WsStreamExt) for a
/// [`WsSender`].
pub trait WsSenderExt: sealed::Sender {
    /// Sends `msg` and flushes it.
    fn send_message(&mut self, msg: Message) -> impl Future<Output = io::Result<()>> + Send + '_;

    /// Sends a ping with `payload` (at most 125 bytes); the pong comes
    /// back through the receiver.
    fn ping<'a>(&'a mut self, payload: &[u8]) -> impl Future<Output = io::Result<()>> + Send + 'a;

    /// Sends a close frame with `code` and `reason` and flushes it. The
    /// peer's close frame, and then the end, come through the receiver.
    ///
    /// What was queued before goes out first, a pong owed to a ping the
    /// receiver read included (a pong after the close frame fails the
    /// connection at a tungstenite peer:
    /// [`WsStreamExt::close_with`](crate::WsStreamExt::close_with)); a ping
    /// the receiver reads between that flush and the close frame still
    /// gets its pong after it.
    fn close_with<'a>(
        &'a mut self,
        code: CloseCode,
        reason: &str,
    ) -> impl Future<Output = io::Result<()>> + Send + 'a;
}

mod sealed {
    pub trait Receiver {}
    pub trait Sender {}
    impl<S> Receiver for async_tungstenite::WebSocketReceiver<S> {}
    impl<S> Sender for async_tungstenite::WebSocketSender<S> {}
}

impl<S> WsReceiverExt for WebSocketReceiver<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    async fn recv(&mut self) -> io::Result<Option<Message>> {
        match poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await {
            Some(Ok(msg)) => Ok(Some(msg)),
            None => Ok(None),
            Some(Err(err)) => Err(io_error(err)),
        }
    }
}

impl<S> WsSenderExt for WebSocketSender<S>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
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
    ) -> impl Future<Output = io::Result<()>> + Send + 'a {
        let frame = CloseFrame {
            code,
            reason: reason.into(),
        };
        async move {
            poll_fn(|cx| Sink::poll_flush(Pin::new(&mut *self), cx))
                .await
                .map_err(io_error)?;
            match self.close(Some(frame)).await {
                Ok(()) | Err(WsError::ConnectionClosed) => Ok(()),
                Err(err) => Err(io_error(err)),
            }
        }
    }
}

/// The close frame that answers `err` from [`WsReceiverExt::recv`], if it
/// is a refusal: code 1009 for a size limit, 1007 for text that is not
/// UTF-8, 1002 for another protocol violation (what
/// [`WsStreamExt::recv`](crate::WsStreamExt::recv) sends by itself).
///
/// ```
/// use spargio_ws::tungstenite::error::{CapacityError, Error};
/// use spargio_ws::{io_error, refusal_close_frame, CloseCode};
///
/// let big = io_error(Error::Capacity(CapacityError::MessageTooLong { size: 9, max_size: 8 }));
/// assert_eq!(refusal_close_frame(&big).unwrap().code, CloseCode::Size);
/// assert!(refusal_close_frame(&std::io::ErrorKind::ConnectionReset.into()).is_none());
/// ```
pub fn refusal_close_frame(err: &io::Error) -> Option<CloseFrame> {
    let ws = err.get_ref()?.downcast_ref::<WsError>()?;
    let code = refusal_code(ws)?;
    Some(CloseFrame {
        code,
        reason: refusal_reason(code).into(),
    })
}
