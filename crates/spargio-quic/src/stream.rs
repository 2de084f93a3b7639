//! [`QuicSendStream`] and [`QuicRecvStream`].

use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use spargio::buf::{BufResult, IoBufMut};

use crate::bridge::{BridgeRecv, BridgeSend};
use crate::native::streams::{NativeRecv, NativeSend};
use crate::util::with_timeout;
use crate::util::OpCtx;

#[derive(Debug)]
pub(crate) enum SendKind {
    Native(NativeSend),
    Bridge(BridgeSend),
}

#[derive(Debug)]
pub(crate) enum RecvKind {
    Native(NativeRecv),
    Bridge(BridgeRecv),
}

/// The sending half of a QUIC stream. Usable from any shard.
///
/// Dropping it without [`finish`](Self::finish) or [`reset`](Self::reset)
/// finishes it (as quinn does): the data written so far is delivered. If
/// the peer stopped it, dropping it resets it with the stop's code (as
/// quinn does), so the peer can free the stream.
///
/// It implements `futures_io::AsyncWrite` and `tokio::io::AsyncWrite`
/// (see the impls for flush, close and timeout semantics).
#[derive(Debug)]
pub struct QuicSendStream {
    pub(crate) kind: SendKind,
    pub(crate) ctx: Arc<OpCtx>,
}

impl QuicSendStream {
    /// The stream id.
    pub fn id(&self) -> u64 {
        match &self.kind {
            SendKind::Native(s) => s.id.into(),
            SendKind::Bridge(s) => s.id(),
        }
    }

    /// Writes some of `data`; returns how much was taken. Waits for
    /// flow-control credit (that wait is the stream's backpressure); a
    /// peer's stop ends the wait with `ConnectionReset` carrying its code
    /// (see [`stream_error_code`](crate::stream_error_code)), also while
    /// it waits for connection-level credit.
    pub async fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = with_timeout(&self.ctx, async {
            match &mut self.kind {
                SendKind::Native(s) => s.write(data).await,
                SendKind::Bridge(s) => s.write(data).await,
            }
        })
        .await?;
        self.count(n);
        Ok(n)
    }

    /// Writes all of `data`.
    pub async fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.write(data).await?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Writes all of `data`, an owned chunk: the native backend moves it
    /// into quinn-proto's send buffer without copying (a partial write
    /// keeps the rest as a slice of the same allocation).
    pub async fn write_bytes(&mut self, data: Bytes) -> io::Result<()> {
        let n = data.len();
        with_timeout(&self.ctx, async {
            match &mut self.kind {
                SendKind::Native(s) => s.write_bytes(data).await,
                SendKind::Bridge(s) => s.write_bytes(data).await,
            }
        })
        .await?;
        self.count(n);
        Ok(())
    }

    fn count(&self, n: usize) {
        self.ctx.metrics.add(|m| &m.bytes_written, n as u64);
        self.ctx.metrics.add(
            |m| match self.kind {
                SendKind::Native(_) => &m.native_ops_dispatched,
                SendKind::Bridge(_) => &m.bridge_ops_dispatched,
            },
            1,
        );
    }

    /// Finishes the stream: the peer reads everything written, then the
    /// end. `ConnectionReset` if the peer stopped it.
    pub fn finish(&mut self) -> io::Result<()> {
        match &mut self.kind {
            SendKind::Native(s) => s.finish(),
            SendKind::Bridge(s) => s.finish(),
        }
    }

    /// Abandons the stream: the peer's reads fail with `ConnectionReset`
    /// carrying `code` (see [`stream_error_code`](crate::stream_error_code)).
    /// A `code` of 2^62 or more (QUIC codes are 62-bit) is `InvalidInput`.
    pub fn reset(&mut self, code: u64) -> io::Result<()> {
        let code = crate::error::app_code(code)?;
        match &mut self.kind {
            SendKind::Native(s) => s.reset(code),
            SendKind::Bridge(s) => s.reset(code),
        }
    }

    /// The write behind both `AsyncWrite` impls: as much of `data` as flow
    /// control allows now, or `Pending` with the waker registered.
    pub(crate) fn poll_write_some(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let res = match &mut self.kind {
            SendKind::Native(s) => s.poll_write(cx, data),
            SendKind::Bridge(s) => s.poll_write(cx, data),
        };
        match &res {
            Poll::Ready(Ok(n)) => self.ctx.metrics.add(|m| &m.bytes_written, *n as u64),
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                self.ctx.metrics.add(|m| &m.backpressure_hits, 1)
            }
            _ => {}
        }
        res
    }

    /// The close behind both `AsyncWrite` impls: finishes the stream
    /// unless it already is (a second close is `Ok`).
    pub(crate) fn close_finish(&mut self) -> io::Result<()> {
        match &mut self.kind {
            SendKind::Native(s) => s.close(),
            SendKind::Bridge(s) => s.close(),
        }
    }

    /// Waits until the peer stops the stream (`Some(code)`) or, after
    /// [`finish`](Self::finish), has received all of it (`None`).
    pub async fn stopped(&mut self) -> io::Result<Option<u64>> {
        match &mut self.kind {
            SendKind::Native(s) => s.stopped().await,
            SendKind::Bridge(s) => s.stopped().await,
        }
    }
}

/// The receiving half of a QUIC stream. Usable from any shard.
///
/// Dropping it before the end stops the stream with code 0 (as quinn
/// does).
///
/// It implements `futures_io::AsyncRead` and `tokio::io::AsyncRead` (see
/// the impls for end-of-stream, error and timeout semantics).
#[derive(Debug)]
pub struct QuicRecvStream {
    pub(crate) kind: RecvKind,
    pub(crate) ctx: Arc<OpCtx>,
}

impl QuicRecvStream {
    /// The stream id.
    pub fn id(&self) -> u64 {
        match &self.kind {
            RecvKind::Native(s) => s.id.into(),
            RecvKind::Bridge(s) => s.id(),
        }
    }

    /// The next chunk of at most `max_bytes`, in order; `Ok(None)` at the
    /// end of the stream. A reset by the peer gives `ConnectionReset`
    /// (its code via [`stream_error_code`](crate::stream_error_code)).
    ///
    /// Cancel-safe: dropping the future before it completes leaves the
    /// data in the stream.
    pub async fn read_chunk(&mut self, max_bytes: usize) -> io::Result<Option<Bytes>> {
        let chunk = with_timeout(&self.ctx, async {
            match &mut self.kind {
                RecvKind::Native(s) => s.read_chunk(max_bytes).await,
                RecvKind::Bridge(s) => s.read_chunk(max_bytes).await,
            }
        })
        .await?;
        if let Some(c) = &chunk {
            self.ctx.metrics.add(|m| &m.bytes_read, c.len() as u64);
        }
        self.ctx.metrics.add(
            |m| match self.kind {
                RecvKind::Native(_) => &m.native_ops_dispatched,
                RecvKind::Bridge(_) => &m.bridge_ops_dispatched,
            },
            1,
        );
        Ok(chunk)
    }

    /// Reads to the end of the stream; `InvalidData` if it holds more
    /// than `limit` bytes.
    pub async fn read_to_end(&mut self, limit: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        while let Some(chunk) = self.read_chunk(usize::MAX).await? {
            if out.len() + chunk.len() > limit {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("spargio-quic: stream longer than the {limit}-byte limit"),
                ));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    /// Reads once into `buf`, an owned buffer (spargio's
    /// [`AsyncRead`](spargio::io::AsyncRead) shape): fills it from its
    /// first byte, up to its [`bytes_total`](spargio::buf::IoBuf::bytes_total) (a
    /// `Vec`'s capacity), and returns the count with the buffer (which
    /// comes back on error too). `Ok(0)` at the end of the stream, or at
    /// once for a buffer with no room. Errors as
    /// [`read_chunk`](Self::read_chunk), and cancel-safe like it on the
    /// native backend.
    ///
    /// ```no_run
    /// # async fn demo(mut recv: spargio_quic::QuicRecvStream) -> std::io::Result<()> {
    /// let (n, buf) = recv.read(Vec::with_capacity(4096)).await;
    /// println!("got {:?}", &buf[..n?]);
    /// # Ok(()) }
    /// ```
    pub async fn read<B: IoBufMut>(&mut self, mut buf: B) -> BufResult<usize, B> {
        let total = buf.bytes_total();
        if total == 0 {
            return (Ok(0), buf);
        }
        match self.read_chunk(total).await {
            Ok(Some(chunk)) => {
                // Both backends cap a chunk at the `max` asked for.
                debug_assert!(chunk.len() <= total);
                let n = chunk.len().min(total);
                // `IoBufMut` promises `stable_mut_ptr` is valid for writes
                // of `bytes_total` bytes while `buf` is borrowed (here,
                // mutably); the chunk is quinn's own allocation.
                // SAFETY: `n <= total` bytes into `buf`'s valid range, no
                // overlap; afterwards the first `n` bytes are initialized,
                // as `set_init` needs.
                unsafe {
                    std::ptr::copy_nonoverlapping(chunk.as_ptr(), buf.stable_mut_ptr(), n);
                    buf.set_init(n);
                }
                (Ok(n), buf)
            }
            Ok(None) => (Ok(0), buf),
            Err(e) => (Err(e), buf),
        }
    }

    /// Fills `buf` to its [`bytes_total`](spargio::buf::IoBuf::bytes_total) (spargio's
    /// [`AsyncReadExt::read_exact`](spargio::io::AsyncReadExt::read_exact)
    /// shape), so a fixed-size header is one call. `UnexpectedEof` if the
    /// stream ends first (the bytes read so far are in the returned
    /// buffer). A `Vec`'s total is its capacity: to read exactly `n` bytes
    /// pass `vec![0; n].into_boxed_slice()` or `buf.slice(..n)`.
    ///
    /// ```no_run
    /// # async fn demo(mut recv: spargio_quic::QuicRecvStream) -> std::io::Result<()> {
    /// let (res, header) = recv.read_exact(vec![0u8; 8].into_boxed_slice()).await;
    /// res?;
    /// let len = u64::from_le_bytes(header[..].try_into().unwrap()) as usize;
    /// let (res, body) = recv.read_exact(vec![0u8; len]).await;
    /// res?;
    /// # let _ = body; Ok(()) }
    /// ```
    pub async fn read_exact<B: IoBufMut>(&mut self, mut buf: B) -> BufResult<(), B> {
        let total = buf.bytes_total();
        let mut done = 0;
        while done < total {
            let (res, slice) = self.read(buf.slice(done..total)).await;
            buf = slice.into_inner();
            match res {
                Ok(0) => {
                    return (
                        Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "spargio-quic: the stream ended before the buffer was full",
                        )),
                        buf,
                    )
                }
                Ok(n) => done += n,
                Err(e) => return (Err(e), buf),
            }
        }
        (Ok(()), buf)
    }

    /// The read behind both `AsyncRead` impls: copies buffered data into
    /// `buf` (`Ok(0)` at the end, or at once for an empty `buf`), or
    /// `Pending` with the waker registered.
    pub(crate) fn poll_read_some(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let res = match &mut self.kind {
            RecvKind::Native(s) => s.poll_read(cx, buf),
            RecvKind::Bridge(s) => s.poll_read(cx, buf),
        };
        match &res {
            Poll::Ready(Ok(n)) => self.ctx.metrics.add(|m| &m.bytes_read, *n as u64),
            Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::WouldBlock => {
                self.ctx.metrics.add(|m| &m.backpressure_hits, 1)
            }
            _ => {}
        }
        res
    }

    /// The next chunk of at most `max` bytes (`None` at the end), or
    /// `Pending` with the waker registered; no operation timeout. The
    /// native backend hands quinn-proto's own chunk over; the bridge
    /// copies at most 64 KiB into a buffer it reuses once the chunks it
    /// handed out are dropped.
    pub(crate) fn poll_read_chunk(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<io::Result<Option<Bytes>>> {
        let res = match &mut self.kind {
            RecvKind::Native(s) => s.poll_read_chunk(cx, max),
            RecvKind::Bridge(s) => s.poll_read_chunk(cx, max),
        };
        if let Poll::Ready(Ok(Some(c))) = &res {
            self.ctx.metrics.add(|m| &m.bytes_read, c.len() as u64);
        }
        res
    }

    /// Stops receiving: the peer's writes fail with `code`. A `code` of
    /// 2^62 or more (QUIC codes are 62-bit) is `InvalidInput`.
    pub fn stop(&mut self, code: u64) -> io::Result<()> {
        let code = crate::error::app_code(code)?;
        match &mut self.kind {
            RecvKind::Native(s) => s.stop(code),
            RecvKind::Bridge(s) => s.stop(code),
        }
    }
}
