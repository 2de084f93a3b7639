//! The bridge's connection and stream handles.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use quinn_proto::{ConnectionError, VarInt};

use crate::error::{from_connection_error, stream_reset, stream_stopped};

fn write_error(e: quinn::WriteError) -> io::Error {
    match e {
        quinn::WriteError::ConnectionLost(c) => from_connection_error(c),
        quinn::WriteError::Stopped(code) => stream_stopped(code),
        e => io::Error::new(io::ErrorKind::NotConnected, e),
    }
}

fn read_error(e: quinn::ReadError) -> io::Error {
    match e {
        quinn::ReadError::ConnectionLost(c) => from_connection_error(c),
        quinn::ReadError::Reset(code) => stream_reset(code),
        e => io::Error::new(io::ErrorKind::NotConnected, e),
    }
}

#[derive(Clone, Debug)]
pub(crate) struct BridgeConn {
    conn: quinn::Connection,
}

impl BridgeConn {
    pub(crate) fn new(conn: quinn::Connection) -> Self {
        BridgeConn { conn }
    }

    pub(crate) fn quinn(&self) -> &quinn::Connection {
        &self.conn
    }

    pub(crate) async fn open_bi(&self) -> io::Result<(BridgeSend, BridgeRecv)> {
        let (s, r) = self.conn.open_bi().await.map_err(from_connection_error)?;
        Ok((BridgeSend::new(s), BridgeRecv::new(r)))
    }

    pub(crate) async fn open_uni(&self) -> io::Result<BridgeSend> {
        let s = self.conn.open_uni().await.map_err(from_connection_error)?;
        Ok(BridgeSend::new(s))
    }

    pub(crate) async fn accept_bi(&self) -> io::Result<(BridgeSend, BridgeRecv)> {
        let (s, r) = self.conn.accept_bi().await.map_err(from_connection_error)?;
        Ok((BridgeSend::new(s), BridgeRecv::new(r)))
    }

    pub(crate) async fn accept_uni(&self) -> io::Result<BridgeRecv> {
        let r = self
            .conn
            .accept_uni()
            .await
            .map_err(from_connection_error)?;
        Ok(BridgeRecv::new(r))
    }

    pub(crate) fn send_datagram(&self, data: Bytes) -> io::Result<()> {
        self.conn.send_datagram(data).map_err(|e| match e {
            quinn::SendDatagramError::ConnectionLost(c) => from_connection_error(c),
            e => io::Error::new(io::ErrorKind::InvalidInput, e),
        })
    }

    pub(crate) async fn read_datagram(&self) -> io::Result<Bytes> {
        self.conn
            .read_datagram()
            .await
            .map_err(from_connection_error)
    }

    pub(crate) async fn closed(&self) -> ConnectionError {
        self.conn.closed().await
    }

    pub(crate) fn peer_cert_chain_der(&self) -> io::Result<Vec<Vec<u8>>> {
        self.conn
            .peer_identity()
            .and_then(|any| {
                any.downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>()
                    .ok()
            })
            .map(|certs| certs.iter().map(|c| c.as_ref().to_vec()).collect())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotConnected,
                    "spargio-quic: the peer presented no certificate chain",
                )
            })
    }
}

/// quinn's `SendStream::stopped()` future, polled beside a write that
/// waits for credit.
struct StopWatch(
    Pin<Box<dyn Future<Output = Result<Option<VarInt>, quinn::StoppedError>> + Send + Sync>>,
);

impl std::fmt::Debug for StopWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopWatch")
    }
}

/// Waits for `write`, or fails it with the stop code if `stopped` reports
/// one first. quinn's write reports exhausted connection credit as
/// blocked before it looks at the stream's stop (and the credit a peer
/// returns later wakes no writer whose stream credit is used up), so a
/// writer waiting on connection credit would otherwise miss a peer's
/// STOP_SENDING until the connection idles out.
async fn write_or_stop<T>(
    write: impl Future<Output = Result<T, quinn::WriteError>>,
    stopped: impl Future<Output = Result<Option<VarInt>, quinn::StoppedError>>,
) -> Result<T, quinn::WriteError> {
    let mut write = pin!(write);
    let mut stopped = pin!(stopped);
    let mut watching = true;
    poll_fn(|cx| {
        if let Poll::Ready(r) = write.as_mut().poll(cx) {
            return Poll::Ready(r);
        }
        if watching {
            match stopped.as_mut().poll(cx) {
                Poll::Ready(Ok(Some(code))) => {
                    return Poll::Ready(Err(quinn::WriteError::Stopped(code)))
                }
                // Finished, gone or the connection lost: the write sees it.
                Poll::Ready(_) => watching = false,
                Poll::Pending => {}
            }
        }
        Poll::Pending
    })
    .await
}

#[derive(Debug)]
pub(crate) struct BridgeSend {
    stream: quinn::SendStream,
    id: u64,
    /// `finish` succeeded: a later close is a no-op.
    finished: bool,
    /// Armed while `poll_write` waits for credit (see [`write_or_stop`]).
    stop_watch: Option<StopWatch>,
}

impl BridgeSend {
    fn new(s: quinn::SendStream) -> Self {
        BridgeSend {
            id: s.id().into(),
            stream: s,
            finished: false,
            stop_watch: None,
        }
    }

    /// quinn's own poll-based write, called on the caller's task (it
    /// locks quinn's connection state and registers the waker there; the
    /// connection's driver, on the bridge runtime, wakes it).
    pub(crate) fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let s = &mut self.stream;
        match Pin::new(&mut *s).poll_write(cx, data) {
            Poll::Pending => {
                // Waiting for credit: also watch for a stop (see
                // `write_or_stop`).
                let watch = self
                    .stop_watch
                    .get_or_insert_with(|| StopWatch(Box::pin(s.stopped())));
                match watch.0.as_mut().poll(cx) {
                    Poll::Ready(Ok(Some(code))) => {
                        self.stop_watch = None;
                        Poll::Ready(Err(write_error(quinn::WriteError::Stopped(code))))
                    }
                    Poll::Ready(_) => {
                        self.stop_watch = None;
                        Poll::Pending
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
            done => {
                self.stop_watch = None;
                done.map_err(write_error)
            }
        }
    }

    /// Finishes the stream unless an earlier `finish` or close did.
    pub(crate) fn close(&mut self) -> io::Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finish()
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) async fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let s = &mut self.stream;
        let stopped = s.stopped();
        write_or_stop(s.write(data), stopped)
            .await
            .map_err(write_error)
    }

    pub(crate) async fn write_bytes(&mut self, data: Bytes) -> io::Result<()> {
        let s = &mut self.stream;
        let stopped = s.stopped();
        write_or_stop(s.write_chunk(data), stopped)
            .await
            .map_err(write_error)
    }

    pub(crate) fn finish(&mut self) -> io::Result<()> {
        // quinn's `finish` takes a stream the peer stopped as finished
        // (`Ok`, nothing sent); ours reports the stop, as its rustdoc and
        // the native backend do.
        if let Some(code) = self.known_stop() {
            return Err(write_error(quinn::WriteError::Stopped(code)));
        }
        let s = &mut self.stream;
        s.finish()
            .map_err(|e| io::Error::new(io::ErrorKind::NotConnected, e))?;
        self.finished = true;
        Ok(())
    }

    /// The peer's stop code if quinn has seen one: the first poll of
    /// `stopped()` answers from the connection's state at once.
    fn known_stop(&self) -> Option<VarInt> {
        let mut stopped = pin!(self.stream.stopped());
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match stopped.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(Some(code))) => Some(code),
            _ => None,
        }
    }

    pub(crate) fn reset(&mut self, code: VarInt) -> io::Result<()> {
        let s = &mut self.stream;
        s.reset(code)
            .map_err(|e| io::Error::new(io::ErrorKind::NotConnected, e))
    }

    pub(crate) async fn stopped(&mut self) -> io::Result<Option<u64>> {
        let s = &mut self.stream;
        match s.stopped().await {
            Ok(code) => Ok(code.map(VarInt::into_inner)),
            Err(quinn::StoppedError::ConnectionLost(c)) => Err(from_connection_error(c)),
            Err(e) => Err(io::Error::other(e)),
        }
    }
}

#[derive(Debug)]
pub(crate) struct BridgeRecv {
    stream: quinn::RecvStream,
    id: u64,
    /// The reset code, once `poll_read` saw a reset (quinn reports it
    /// once, then end-of-stream; later reads repeat it, as on the native
    /// backend).
    reset: Option<VarInt>,
    /// Where `poll_read_chunk` reads to: chunks are split off its front,
    /// and its allocation is reused once they are all dropped.
    scratch: BytesMut,
}

/// The most one `poll_read_chunk` takes (and the scratch it reserves).
const CHUNK_MAX: usize = 64 * 1024;

impl BridgeRecv {
    fn new(r: quinn::RecvStream) -> Self {
        BridgeRecv {
            id: r.id().into(),
            stream: r,
            reset: None,
            scratch: BytesMut::new(),
        }
    }

    /// A chunk of at most `max` (and 64 KiB) bytes; `None` at the end.
    /// quinn's own chunk reads are futures borrowing the stream, so this
    /// copies, through `poll_read_buf`, into `scratch`: one allocation
    /// per 64 KiB while the chunks handed out are still held, none while
    /// they are dropped before the next read (`BytesMut::reserve` takes
    /// the allocation back).
    pub(crate) fn poll_read_chunk(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<io::Result<Option<Bytes>>> {
        if let Some(code) = self.reset {
            return Poll::Ready(Err(read_error(quinn::ReadError::Reset(code))));
        }
        let want = max.clamp(1, CHUNK_MAX);
        self.scratch.clear();
        self.scratch.reserve(CHUNK_MAX);
        let spare = &mut self.scratch.spare_capacity_mut()[..want];
        let mut buf = tokio::io::ReadBuf::uninit(spare);
        match self.stream.poll_read_buf(cx, &mut buf) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => {
                if let quinn::ReadError::Reset(code) = e {
                    self.reset = Some(code);
                }
                Poll::Ready(Err(read_error(e)))
            }
            Poll::Ready(Ok(())) => {
                let n = buf.filled().len();
                if n == 0 {
                    return Poll::Ready(Ok(None));
                }
                // SAFETY: `ReadBuf` counts as filled only bytes written
                // through it (quinn's `put_slice`), and they are the first
                // `n` bytes of `scratch`'s spare capacity, which is empty
                // (cleared above): so its first `n` bytes are initialized.
                unsafe { self.scratch.set_len(n) };
                Poll::Ready(Ok(Some(self.scratch.split().freeze())))
            }
        }
    }

    /// quinn's own poll-based read, called on the caller's task (see
    /// [`BridgeSend::poll_write`]).
    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(code) = self.reset {
            return Poll::Ready(Err(read_error(quinn::ReadError::Reset(code))));
        }
        let r = &mut self.stream;
        r.poll_read(cx, buf).map_err(|e| {
            if let quinn::ReadError::Reset(code) = e {
                self.reset = Some(code);
            }
            read_error(e)
        })
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) async fn read_chunk(&mut self, max: usize) -> io::Result<Option<Bytes>> {
        if let Some(code) = self.reset {
            return Err(read_error(quinn::ReadError::Reset(code)));
        }
        let r = &mut self.stream;
        match r.read_chunk(max, true).await {
            Ok(chunk) => Ok(chunk.map(|c| c.bytes)),
            Err(e) => {
                if let quinn::ReadError::Reset(code) = e {
                    self.reset = Some(code);
                }
                Err(read_error(e))
            }
        }
    }

    pub(crate) fn stop(&mut self, code: VarInt) -> io::Result<()> {
        let r = &mut self.stream;
        r.stop(code)
            .map_err(|e| io::Error::new(io::ErrorKind::NotConnected, e))
    }
}
