//! HTTP/3 over spargio-quic: the `h3` crate's QUIC traits (feature `h3`).
//!
//! [`H3Connection`] wraps a [`QuicConnection`] so `h3::server` and
//! `h3::client` run on it, on either backend:
//!
//! ```no_run
//! # async fn demo(conn: spargio_quic::QuicConnection) -> Result<(), Box<dyn std::error::Error>> {
//! let mut h3 = h3::server::Connection::<_, bytes::Bytes>::new(
//!     spargio_quic::H3Connection::new(conn),
//! )
//! .await?;
//! while let Some(resolver) = h3.accept().await? {
//!     let (_req, mut stream) = resolver.resolve_request().await?;
//!     stream
//!         .send_response(http::Response::new(()))
//!         .await?;
//!     stream.send_data(bytes::Bytes::from_static(b"hi")).await?;
//!     stream.finish().await?;
//! }
//! # Ok(()) }
//! ```
//!
//! How it maps:
//!
//! * Streams are the crate's own [`QuicSendStream`] and [`QuicRecvStream`]:
//!   on the native backend every poll locks the connection and calls
//!   quinn-proto on the polling task, wherever it runs (no task per
//!   stream, nothing crosses shards for a stream of a connection served on
//!   its own shard).
//! * Received data is quinn-proto's own chunk, handed to `h3` without a
//!   copy. Sent data is copied once, into quinn-proto's send buffer (as
//!   every write of this crate; `h3` frames headers and payload into one
//!   `WriteBuf`, written chunk by chunk).
//! * Opens and accepts are poll functions over the connection's waiters
//!   (native) or boxed futures (bridge); a dropped [`H3Connection`] or
//!   [`H3OpenStreams`] removes its waiters.
//! * Errors: a peer's reset or stop becomes `StreamTerminated` with its
//!   code; a closed connection `ApplicationClose` with its code, an idle
//!   timeout `Timeout`, anything else `Undefined` with the error inside.
//! * A send half dropped before it was finished or reset (a request or
//!   response future dropped mid-body) resets its stream with
//!   `H3_REQUEST_CANCELLED`, where a plain QUIC stream would be finished:
//!   a truncated message must not look complete. A receive half dropped
//!   before the end stops its stream with `H3_NO_ERROR`.

use std::io;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};

use crate::connection::{PollSlot, StreamPair};
use crate::{QuicConnection, QuicRecvStream, QuicSendStream};

/// A [`QuicConnection`] as `h3` sees it (`h3::quic::Connection`).
#[derive(Debug)]
pub struct H3Connection {
    opener: H3OpenStreams,
    accept_bi: PollSlot<StreamPair>,
    accept_uni: PollSlot<QuicRecvStream>,
}

impl H3Connection {
    /// Wraps `conn` for `h3::server::Connection::new` or
    /// `h3::client::new`. The connection's ALPN should be `h3`
    /// ([`H3_ALPN`]).
    pub fn new(conn: QuicConnection) -> H3Connection {
        H3Connection {
            opener: H3OpenStreams::new(conn),
            accept_bi: PollSlot::default(),
            accept_uni: PollSlot::default(),
        }
    }

    /// The wrapped connection.
    pub fn quic(&self) -> &QuicConnection {
        &self.opener.conn
    }
}

impl Drop for H3Connection {
    fn drop(&mut self) {
        self.opener.conn.release_slot(&mut self.accept_bi);
        self.opener.conn.release_slot(&mut self.accept_uni);
    }
}

/// The ALPN protocol id of HTTP/3, for the TLS configs of both sides.
pub const H3_ALPN: &[u8] = b"h3";

/// Opens streams on an [`H3Connection`] (`h3::quic::OpenStreams`); the
/// client's `SendRequest` holds one.
#[derive(Debug)]
pub struct H3OpenStreams {
    conn: QuicConnection,
    bi: PollSlot<StreamPair>,
    uni: PollSlot<QuicSendStream>,
}

impl H3OpenStreams {
    fn new(conn: QuicConnection) -> H3OpenStreams {
        H3OpenStreams {
            conn,
            bi: PollSlot::default(),
            uni: PollSlot::default(),
        }
    }
}

impl Clone for H3OpenStreams {
    fn clone(&self) -> Self {
        H3OpenStreams::new(self.conn.clone())
    }
}

impl Drop for H3OpenStreams {
    fn drop(&mut self) {
        self.conn.release_slot(&mut self.bi);
        self.conn.release_slot(&mut self.uni);
    }
}

fn conn_error(e: io::Error) -> ConnectionErrorIncoming {
    use quinn_proto::ConnectionError as C;
    match crate::connection_error(&e) {
        Some(C::ApplicationClosed(close)) => ConnectionErrorIncoming::ApplicationClose {
            error_code: close.error_code.into_inner(),
        },
        Some(C::TimedOut) => ConnectionErrorIncoming::Timeout,
        _ => ConnectionErrorIncoming::Undefined(Arc::new(e)),
    }
}

fn stream_error(e: io::Error) -> StreamErrorIncoming {
    if let Some(code) = crate::stream_error_code(&e) {
        return StreamErrorIncoming::StreamTerminated { error_code: code };
    }
    if crate::connection_error(&e).is_some() {
        return StreamErrorIncoming::ConnectionErrorIncoming {
            connection_error: conn_error(e),
        };
    }
    StreamErrorIncoming::Unknown(Box::new(e))
}

fn stream_id(id: u64) -> StreamId {
    // QUIC stream ids are varints (below 2^62), which `h3` takes.
    StreamId::try_from(id).expect("a QUIC stream id is a varint")
}

impl<B: Buf> quic::Connection<B> for H3Connection {
    type RecvStream = H3RecvStream;
    type OpenStreams = H3OpenStreams;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<H3RecvStream, ConnectionErrorIncoming>> {
        let recv = ready!(self.opener.conn.poll_accept_uni(&mut self.accept_uni, cx));
        Poll::Ready(recv.map(H3RecvStream::new).map_err(conn_error))
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<H3BidiStream<B>, ConnectionErrorIncoming>> {
        let pair = ready!(self.opener.conn.poll_accept_bi(&mut self.accept_bi, cx));
        Poll::Ready(pair.map(H3BidiStream::new).map_err(conn_error))
    }

    fn opener(&self) -> H3OpenStreams {
        self.opener.clone()
    }
}

impl<B: Buf> quic::OpenStreams<B> for H3Connection {
    type BidiStream = H3BidiStream<B>;
    type SendStream = H3SendStream<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<H3BidiStream<B>, StreamErrorIncoming>> {
        quic::OpenStreams::<B>::poll_open_bidi(&mut self.opener, cx)
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<H3SendStream<B>, StreamErrorIncoming>> {
        quic::OpenStreams::<B>::poll_open_send(&mut self.opener, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<B>::close(&mut self.opener, code, reason)
    }
}

impl<B: Buf> quic::OpenStreams<B> for H3OpenStreams {
    type BidiStream = H3BidiStream<B>;
    type SendStream = H3SendStream<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<H3BidiStream<B>, StreamErrorIncoming>> {
        let pair = ready!(self.conn.poll_open_bi(&mut self.bi, cx));
        Poll::Ready(pair.map(H3BidiStream::new).map_err(stream_error))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<H3SendStream<B>, StreamErrorIncoming>> {
        let send = ready!(self.conn.poll_open_uni(&mut self.uni, cx));
        Poll::Ready(send.map(H3SendStream::new).map_err(stream_error))
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        self.conn.close(code.value(), reason);
    }
}

/// `H3_NO_ERROR` and `H3_REQUEST_CANCELLED` (RFC 9114, 8.1).
const H3_NO_ERROR: u64 = 0x100;
const H3_REQUEST_CANCELLED: u64 = 0x10c;

/// The sending half of an HTTP/3 stream (`h3::quic::SendStream`).
///
/// Dropped before it was finished or reset (a request or response whose
/// future was dropped mid-body), it resets the stream with
/// `H3_REQUEST_CANCELLED`: the peer sees a cancelled message, never a
/// truncated one that looks complete.
pub struct H3SendStream<B: Buf> {
    stream: QuicSendStream,
    /// What `send_data` handed over, written by `poll_ready`.
    writing: Option<WriteBuf<B>>,
    /// Finished or reset: dropping it sends nothing.
    ended: bool,
}

impl<B: Buf> Drop for H3SendStream<B> {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.stream.reset(H3_REQUEST_CANCELLED);
        }
    }
}

impl<B: Buf> std::fmt::Debug for H3SendStream<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("H3SendStream")
            .field("stream", &self.stream)
            .field("writing", &self.writing.as_ref().map(Buf::remaining))
            .finish()
    }
}

impl<B: Buf> H3SendStream<B> {
    fn new(stream: QuicSendStream) -> Self {
        H3SendStream {
            stream,
            writing: None,
            ended: false,
        }
    }
}

impl<B: Buf> quic::SendStream<B> for H3SendStream<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        if let Some(data) = &mut self.writing {
            while data.has_remaining() {
                let n =
                    ready!(self.stream.poll_write_some(cx, data.chunk())).map_err(stream_error)?;
                data.advance(n);
            }
            self.writing = None;
        }
        Poll::Ready(Ok(()))
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.writing.is_some() {
            // `h3` polls `poll_ready` before each `send_data`: this is a
            // misuse of the trait, not a peer's doing.
            return Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: ConnectionErrorIncoming::InternalError(
                    "send_data before the previous data was written".into(),
                ),
            });
        }
        self.writing = Some(data.into());
        Ok(())
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        if !self.ended {
            ready!(quic::SendStream::<B>::poll_ready(self, cx))?;
            let res = self.stream.close_finish().map_err(stream_error);
            self.ended = true;
            res?;
        }
        Poll::Ready(Ok(()))
    }

    fn reset(&mut self, reset_code: u64) {
        self.writing = None;
        self.ended = true;
        // Codes from `h3` are its own (below 2^62); a closed stream has
        // nothing left to reset.
        let _ = self.stream.reset(reset_code.min((1 << 62) - 1));
    }

    fn send_id(&self) -> StreamId {
        stream_id(self.stream.id())
    }
}

/// The receiving half of an HTTP/3 stream (`h3::quic::RecvStream`).
///
/// Dropped before the end, it stops the stream with `H3_NO_ERROR` (a
/// server that answered without reading the whole request body, RFC 9114
/// 4.1.2).
#[derive(Debug)]
pub struct H3RecvStream {
    stream: QuicRecvStream,
    /// The end (or an error) was read, or the stream was stopped.
    ended: bool,
}

impl H3RecvStream {
    fn new(stream: QuicRecvStream) -> Self {
        H3RecvStream {
            stream,
            ended: false,
        }
    }
}

impl Drop for H3RecvStream {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.stream.stop(H3_NO_ERROR);
        }
    }
}

impl quic::RecvStream for H3RecvStream {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let res = ready!(self.stream.poll_read_chunk(cx, usize::MAX));
        if !matches!(res, Ok(Some(_))) {
            self.ended = true;
        }
        Poll::Ready(res.map_err(stream_error))
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.ended = true;
        let _ = self.stream.stop(error_code.min((1 << 62) - 1));
    }

    fn recv_id(&self) -> StreamId {
        stream_id(self.stream.id())
    }
}

/// Both halves of an HTTP/3 request stream (`h3::quic::BidiStream`).
#[derive(Debug)]
pub struct H3BidiStream<B: Buf> {
    send: H3SendStream<B>,
    recv: H3RecvStream,
}

impl<B: Buf> H3BidiStream<B> {
    fn new((send, recv): StreamPair) -> Self {
        H3BidiStream {
            send: H3SendStream::new(send),
            recv: H3RecvStream::new(recv),
        }
    }
}

impl<B: Buf> quic::BidiStream<B> for H3BidiStream<B> {
    type SendStream = H3SendStream<B>;
    type RecvStream = H3RecvStream;

    fn split(self) -> (H3SendStream<B>, H3RecvStream) {
        (self.send, self.recv)
    }
}

impl<B: Buf> quic::SendStream<B> for H3BidiStream<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }

    fn reset(&mut self, reset_code: u64) {
        self.send.reset(reset_code)
    }

    fn send_id(&self) -> StreamId {
        self.send.send_id()
    }
}

impl<B: Buf> quic::RecvStream for H3BidiStream<B> {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.recv.recv_id()
    }
}
