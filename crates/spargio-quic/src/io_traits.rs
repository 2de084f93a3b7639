//! `futures_io::{AsyncRead, AsyncWrite}` and `tokio::io::{AsyncRead,
//! AsyncWrite}` for [`QuicSendStream`] and [`QuicRecvStream`].
//!
//! Each direction has one poll function on the stream type
//! (`poll_write_some`, `close_finish`, `poll_read_some`, in `stream.rs`);
//! the four impls here are thin adapters over them, so both trait
//! families behave the same. On the native backend those functions lock
//! the connection and call quinn-proto on the caller's task: no spawned
//! task, nothing allocated by this layer per call (quinn-proto copies a
//! written slice into its send buffer, as for `write`), and a waiting
//! poll registers at most one waker per stream half (see
//! `native/streams.rs`). On the bridge
//! backend they call quinn's own poll functions on the caller's task
//! (quinn's connection driver keeps running on the bridge runtime and
//! wakes it), so unlike the bridge's async methods they spawn nothing and
//! a dropped operation loses nothing.
//!
//! The endpoint's `operation_timeout` does not apply here: a poll
//! function returns at once, and whoever polls owns the timing (wrap the
//! future in `spargio::time::timeout`, or tokio's).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::stream::{QuicRecvStream, QuicSendStream};

/// Writes through `futures_io` (the `futures::io` extension traits,
/// `futures::io::copy`, codecs...).
///
/// - `poll_write` hands as much of the buffer to the connection as flow
///   control allows now and returns how much; with no credit it returns
///   `Pending` and wakes the task when credit (or a stop, or the
///   connection's end) arrives. Errors are those of
///   [`write`](QuicSendStream::write): stopped by the peer is
///   `ConnectionReset` (code via [`stream_error_code`](crate::stream_error_code)),
///   a closed connection as described in the crate's error table.
/// - `poll_flush` is `Ok` at once: there is nothing to flush at this
///   layer, written data is already the connection's to send.
/// - `poll_close` finishes the stream (FIN after the written data) and
///   returns at once; it does not wait for the peer's acknowledgement
///   (as quinn's own impl; [`stopped`](QuicSendStream::stopped) waits
///   for that). A second close is `Ok`; closing a reset stream is
///   `NotConnected`.
///
/// Not subject to `operation_timeout` (the caller owns the timing).
/// Cancel-safe: a dropped write future loses nothing `poll_write`
/// reported as written, and the stream stays usable.
///
/// Name clash: the inherent [`write`](QuicSendStream::write) and
/// [`write_all`](QuicSendStream::write_all) win over the extension
/// traits' methods of the same name in method syntax (they do the same,
/// plus `operation_timeout`); to get the trait's, write
/// `AsyncWriteExt::write_all(&mut send, buf)`. The same goes for
/// [`QuicRecvStream::read_to_end`] (which takes a size limit).
///
/// ```no_run
/// # async fn demo(conn: spargio_quic::QuicConnection) -> std::io::Result<()> {
/// use futures_util::io::{AsyncReadExt, AsyncWriteExt};
///
/// let (mut send, mut recv) = conn.open_bi().await?;
/// futures_util::io::copy(&b"hello"[..], &mut send).await?;
/// send.close().await?; // FIN
/// let mut answer = Vec::new();
/// // The inherent `read_to_end(limit)` wins in method syntax: name the trait.
/// AsyncReadExt::read_to_end(&mut recv, &mut answer).await?;
/// # Ok(()) }
/// ```
impl futures_io::AsyncWrite for QuicSendStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_some(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.get_mut().close_finish())
    }
}

/// Reads through `futures_io`.
///
/// - `poll_read` copies buffered data into the caller's slice (as much
///   as is there, up to its length) and returns how much; `Ok(0)` means
///   the end of the stream (FIN) — or that the slice was empty: a
///   zero-length read returns `Ok(0)` at once, consumes nothing and says
///   nothing about the end (the usual `AsyncRead` ambiguity). With
///   nothing buffered it returns `Pending` and wakes the task on data,
///   FIN, reset or the connection's end.
/// - Errors are those of [`read_chunk`](QuicRecvStream::read_chunk):
///   reset by the peer is `ConnectionReset` (code via
///   [`stream_error_code`](crate::stream_error_code)), and later reads
///   repeat it; a closed connection as in the crate's error table.
///
/// Not subject to `operation_timeout` (the caller owns the timing).
/// Cancel-safe: data leaves the stream only in the poll that returns it,
/// so a read future dropped before completing loses nothing.
///
/// ```no_run
/// # async fn demo(mut recv: spargio_quic::QuicRecvStream) -> std::io::Result<()> {
/// use futures_util::io::AsyncReadExt;
///
/// // The inherent owned-buffer `read_exact` wins in method syntax.
/// let mut header = [0u8; 4];
/// AsyncReadExt::read_exact(&mut recv, &mut header).await?;
/// # Ok(()) }
/// ```
impl futures_io::AsyncRead for QuicRecvStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_read_some(cx, buf)
    }
}

/// Writes through tokio's traits (`tokio::io::AsyncWriteExt`,
/// `tokio::io::copy`, hyper and tonic adapters...). Same behaviour as the
/// `futures_io` impl; `poll_shutdown` is its `poll_close` (finish, no wait
/// for the acknowledgement; a second shutdown is `Ok`). Works in any
/// executor: no tokio runtime is needed.
///
/// ```no_run
/// # async fn demo(mut send: spargio_quic::QuicSendStream) -> std::io::Result<()> {
/// use tokio::io::AsyncWriteExt;
///
/// AsyncWriteExt::write_all(&mut send, b"GET /\r\n").await?;
/// send.shutdown().await?; // FIN
/// # Ok(()) }
/// ```
impl tokio::io::AsyncWrite for QuicSendStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_some(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.get_mut().close_finish())
    }
}

/// Reads through tokio's traits. Same behaviour as the `futures_io` impl:
/// at the end of the stream nothing is added to the `ReadBuf`; a
/// `ReadBuf` with no room returns at once. The unfilled part of the
/// `ReadBuf` is initialized once (tokio remembers it) before data is
/// copied in.
///
/// ```no_run
/// # async fn demo(mut recv: spargio_quic::QuicRecvStream) -> std::io::Result<()> {
/// use tokio::io::AsyncReadExt;
///
/// let mut body = Vec::new();
/// AsyncReadExt::read_to_end(&mut recv, &mut body).await?;
/// # Ok(()) }
/// ```
impl tokio::io::AsyncRead for QuicRecvStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = match self.get_mut().poll_read_some(cx, buf.initialize_unfilled()) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

/// Reads through spargio's owned-buffer trait, so
/// [`spargio::io::AsyncReadExt`] (`read_to_end`, ...), `spargio::io::copy`
/// and `BufReader` take the stream. The inherent
/// [`read`](QuicRecvStream::read) and
/// [`read_exact`](QuicRecvStream::read_exact) have the same shapes.
///
/// ```no_run
/// # async fn demo(mut recv: spargio_quic::QuicRecvStream) -> std::io::Result<()> {
/// let (n, all) = spargio::io::AsyncReadExt::read_to_end(&mut recv, Vec::new()).await;
/// n?;
/// # let _ = all; Ok(()) }
/// ```
impl spargio::io::AsyncRead for QuicRecvStream {
    async fn read<B: spargio::buf::IoBufMut>(
        &mut self,
        buf: B,
    ) -> spargio::buf::BufResult<usize, B> {
        QuicRecvStream::read(self, buf).await
    }
}
