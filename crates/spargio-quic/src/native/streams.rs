//! Stream operations of the native backend (called from any shard).
//!
//! Every read and write is one poll function (`poll_write`,
//! `poll_write_chunks`, `poll_read`, `poll_read_chunk`): it locks the
//! connection, calls quinn-proto and returns. The async methods are
//! `poll_fn` over them, and the `AsyncRead`/`AsyncWrite` impls
//! (`io_traits.rs`) call them directly: no task, and nothing allocated
//! here per call (quinn-proto copies a written slice into its send
//! buffer; `poll_write_chunks` moves `Bytes` without a copy).
//!
//! Waiters (a half waits for credit, data, FIN or reset):
//! 1. A poll that must wait registers the task's waker on the connection
//!    under the half's own `key` (allocated on its first wait). Polling
//!    again replaces that entry instead of adding one, so a half holds at
//!    most one waiter however often it is polled, and the waiters count
//!    against `max_inflight_ops` (over it: `WouldBlock`).
//! 2. A poll that completes removes the entry and zeroes the key, so the
//!    common path (credit or data already there) never touches the
//!    waiter list.
//! 3. An async method holds a [`Release`] guard: a future dropped while
//!    waiting removes its entry at once.
//! 4. Dropping the half removes an entry a trait poll left behind (a
//!    caller that got `Pending` and gave up).
//!
//! Cancel safety: data moves (into quinn-proto's send buffer, or out of
//! its receive buffer into the caller's slice) only inside the locked
//! step whose result the poll returns. A poll that returned `Pending`
//! moved nothing; one that returned `Ready` reported all it moved.

use std::future::poll_fn;
use std::io;
use std::task::{Context, Poll};

use bytes::Bytes;
use quinn_proto::{Chunks, FinishError, ReadError, ReadableError, StreamId, VarInt, WriteError};

use super::conn::{ConnRef, ConnState, Step};
use super::waiters::{wake_all, WaitKind};
use crate::error::{from_connection_error, from_read_error, from_write_error};

fn closed_stream(st: &ConnState) -> io::Error {
    match &st.error {
        Some(e) => from_connection_error(e.clone()),
        None => io::Error::new(io::ErrorKind::NotConnected, "spargio-quic: stream closed"),
    }
}

/// Removes the waiter registered under `key`, if any.
fn release(conn: &ConnRef, key: &mut u64) {
    if *key != 0 {
        conn.lock().waiters.remove(*key);
        *key = 0;
    }
}

/// A stream half that may hold a waiter registration.
trait Waiting {
    fn release_waiter(&mut self);
}

/// Held by an async method's future: if the future is dropped while its
/// half waits, the registration goes with it.
struct Release<'a, H: Waiting>(&'a mut H);

impl<H: Waiting> Drop for Release<'_, H> {
    fn drop(&mut self) {
        self.0.release_waiter();
    }
}

/// Where a send half stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SendEnd {
    Open,
    Finished,
    Reset,
}

/// The send half of a native stream.
#[derive(Debug)]
pub(crate) struct NativeSend {
    pub(crate) conn: ConnRef,
    pub(crate) id: StreamId,
    /// Finished or reset: dropping it sends nothing more.
    end: SendEnd,
    /// The waiter key of this half's writes (0: none registered).
    key: u64,
}

impl Waiting for NativeSend {
    fn release_waiter(&mut self) {
        release(&self.conn, &mut self.key);
    }
}

impl NativeSend {
    pub(crate) fn new(conn: ConnRef, id: StreamId) -> NativeSend {
        NativeSend {
            conn,
            id,
            end: SendEnd::Open,
            key: 0,
        }
    }

    /// Writes as much of `data` as flow control allows now; `Pending`
    /// (waker registered) while it allows nothing. Empty `data`: `Ok(0)`.
    pub(crate) fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let id = self.id;
        self.poll_send(cx, |st| st.conn.send_stream(id).write(data))
    }

    /// Moves as much of `chunks` as flow control allows into quinn-proto's
    /// send buffer, without a copy; what is left stays in `chunks` (a
    /// partly written chunk is advanced in place).
    pub(crate) fn poll_write_chunks(
        &mut self,
        cx: &mut Context<'_>,
        chunks: &mut [Bytes],
    ) -> Poll<io::Result<()>> {
        let id = self.id;
        self.poll_send(cx, |st| {
            st.conn.send_stream(id).write_chunks(chunks).map(|_| ())
        })
    }

    /// One locked write attempt (`write` is quinn-proto's call).
    fn poll_send<T>(
        &mut self,
        cx: &mut Context<'_>,
        write: impl FnOnce(&mut ConnState) -> Result<T, WriteError>,
    ) -> Poll<io::Result<T>> {
        let id = self.id;
        let res = self.conn.poll_step(&mut self.key, cx, |st, dirty| {
            if let Some(e) = &st.error {
                return Step::Done(Err(from_connection_error(e.clone())));
            }
            match write(st) {
                Ok(v) => {
                    *dirty = true;
                    Step::Done(Ok(v))
                }
                // quinn-proto reports exhausted connection credit as
                // `Blocked` before it looks at the stream's stop, and the
                // credit a peer returns later brings no `Writable` event
                // for a stream whose own credit is used up: without this
                // check a writer blocked on connection credit would miss
                // the stop until the connection idles out.
                Err(WriteError::Blocked) => match st.conn.send_stream(id).stopped() {
                    Ok(Some(code)) => Step::Done(Err(from_write_error(WriteError::Stopped(code)))),
                    _ => Step::Wait(WaitKind::Write(id)),
                },
                Err(WriteError::ClosedStream) => Step::Done(Err(closed_stream(st))),
                Err(e) => Step::Done(Err(from_write_error(e))),
            }
        });
        if res.is_ready() {
            // `poll_step` removed the entry (if any) with the result.
            self.key = 0;
        }
        res
    }

    /// Writes some of `data` (waits for flow-control credit).
    pub(crate) async fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let guard = Release(self);
        poll_fn(|cx| guard.0.poll_write(cx, data)).await
    }

    /// Writes all of `data` (`Bytes` chunks move into quinn-proto's send
    /// buffer without a copy; a partial write keeps the rest).
    pub(crate) async fn write_bytes(&mut self, data: Bytes) -> io::Result<()> {
        let guard = Release(self);
        let mut chunks = [data];
        while !chunks[0].is_empty() {
            poll_fn(|cx| guard.0.poll_write_chunks(cx, &mut chunks)).await?;
        }
        Ok(())
    }

    /// Finishes the stream (FIN after the buffered data).
    pub(crate) fn finish(&mut self) -> io::Result<()> {
        let res = {
            let mut st = self.conn.lock();
            match st.conn.send_stream(self.id).finish() {
                Ok(()) => {
                    st.finished(self.id);
                    Ok(())
                }
                Err(FinishError::Stopped(code)) => Err(from_write_error(WriteError::Stopped(code))),
                Err(FinishError::ClosedStream) => Err(closed_stream(&st)),
            }
        };
        if res.is_ok() {
            self.end = SendEnd::Finished;
            self.conn.mark_dirty();
        }
        res
    }

    /// `poll_close`/`poll_shutdown`: finishes the stream unless it already
    /// is (a second close is `Ok`); after a reset, `NotConnected`.
    pub(crate) fn close(&mut self) -> io::Result<()> {
        match self.end {
            SendEnd::Open => self.finish(),
            SendEnd::Finished => Ok(()),
            SendEnd::Reset => Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "spargio-quic: cannot close a stream that was reset",
            )),
        }
    }

    /// Abandons the stream with `code` (RESET_STREAM).
    pub(crate) fn reset(&mut self, code: VarInt) -> io::Result<()> {
        let res = {
            let mut st = self.conn.lock();
            st.conn
                .send_stream(self.id)
                .reset(code)
                .map_err(|_| closed_stream(&st))
        };
        // A reset after `finish` ends the wait for its acknowledgement.
        let mut wakers = Vec::new();
        self.conn.lock().settled(self.id, &mut wakers);
        wake_all(&mut wakers);
        self.end = SendEnd::Reset;
        self.conn.mark_dirty();
        res
    }

    /// Waits until the peer stops the stream (`Some(code)`) or has
    /// received everything after `finish` (`None`).
    pub(crate) async fn stopped(&mut self) -> io::Result<Option<u64>> {
        let id = self.id;
        self.conn
            .run(|st, _| match st.conn.send_stream(id).stopped() {
                Ok(Some(code)) => Step::Done(Ok(Some(code.into_inner()))),
                Ok(None) => match &st.error {
                    Some(e) => Step::Done(Err(from_connection_error(e.clone()))),
                    None => Step::Wait(WaitKind::Write(id)),
                },
                // The stream state is gone: everything was acknowledged.
                Err(_) => Step::Done(Ok(None)),
            })
            .await
    }
}

impl Drop for NativeSend {
    fn drop(&mut self) {
        let key = std::mem::take(&mut self.key);
        let open = self.end == SendEnd::Open;
        if key == 0 && !open {
            return;
        }
        {
            let mut st = self.conn.lock();
            if key != 0 {
                st.waiters.remove(key);
            }
            if open {
                // As quinn: an unfinished, unreset stream is finished on
                // drop, and one the peer stopped is reset with the stop's
                // code (RFC 9000 3.5 asks for the reset). Without it the
                // peer keeps its stopped half, and with it the stream's
                // credit, for as long as the connection lives.
                let mut stream = st.conn.send_stream(self.id);
                match stream.finish() {
                    Ok(()) => st.finished(self.id),
                    Err(FinishError::Stopped(code)) => {
                        let _ = stream.reset(code);
                    }
                    Err(FinishError::ClosedStream) => {}
                }
            }
        }
        if open {
            self.conn.mark_dirty();
        }
    }
}

/// How a locked read attempt ended, besides the data it took.
#[derive(Clone, Copy, Debug)]
enum ReadEnd {
    /// The caller's buffer is full; the stream may hold more.
    Open,
    /// FIN: everything was read.
    Fin,
    /// Nothing more buffered now.
    Blocked,
    /// The peer reset the stream.
    Reset(VarInt),
}

/// The receive half of a native stream.
#[derive(Debug)]
pub(crate) struct NativeRecv {
    pub(crate) conn: ConnRef,
    pub(crate) id: StreamId,
    /// FIN or reset seen, or stopped: nothing more to read or stop.
    done: bool,
    /// The reset code, once a reset was seen (later reads repeat it).
    reset: Option<VarInt>,
    /// The waiter key of this half's reads (0: none registered).
    key: u64,
}

impl Waiting for NativeRecv {
    fn release_waiter(&mut self) {
        release(&self.conn, &mut self.key);
    }
}

impl NativeRecv {
    pub(crate) fn new(conn: ConnRef, id: StreamId) -> NativeRecv {
        NativeRecv {
            conn,
            id,
            done: false,
            reset: None,
            key: 0,
        }
    }

    /// Copies buffered data into `buf`: `Ok(n)` with `n > 0`, `Ok(0)` at
    /// the end of the stream, `Pending` (waker registered) while nothing
    /// is buffered. An empty `buf` gives `Ok(0)` at once and touches
    /// nothing (so `Ok(0)` means the end only for a non-empty `buf`).
    pub(crate) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        self.poll_chunks(cx, |chunks| {
            let mut filled = 0;
            let end = loop {
                if filled == buf.len() {
                    break ReadEnd::Open;
                }
                match chunks.next(buf.len() - filled) {
                    Ok(Some(chunk)) => {
                        let n = chunk.bytes.len();
                        buf[filled..filled + n].copy_from_slice(&chunk.bytes);
                        filled += n;
                    }
                    Ok(None) => break ReadEnd::Fin,
                    Err(ReadError::Blocked) => break ReadEnd::Blocked,
                    Err(ReadError::Reset(code)) => break ReadEnd::Reset(code),
                }
            };
            ((filled > 0).then_some(filled), end)
        })
        .map_ok(|n| n.unwrap_or(0))
    }

    /// The next chunk of at most `max` bytes, in order; `None` at the end;
    /// `Pending` (waker registered) while nothing is buffered.
    pub(crate) fn poll_read_chunk(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<io::Result<Option<Bytes>>> {
        self.poll_chunks(cx, |chunks| match chunks.next(max.max(1)) {
            Ok(Some(chunk)) => (Some(chunk.bytes), ReadEnd::Open),
            Ok(None) => (None, ReadEnd::Fin),
            Err(ReadError::Blocked) => (None, ReadEnd::Blocked),
            Err(ReadError::Reset(code)) => (None, ReadEnd::Reset(code)),
        })
    }

    /// One locked read attempt: `read` takes what it wants from the
    /// stream's chunks and says how it ended. `Ok(None)` is the end of the
    /// stream; a FIN or reset seen with data is reported by the next call
    /// (quinn-proto has freed the stream by then, so it is remembered
    /// here).
    fn poll_chunks<T>(
        &mut self,
        cx: &mut Context<'_>,
        read: impl FnOnce(&mut Chunks<'_>) -> (Option<T>, ReadEnd),
    ) -> Poll<io::Result<Option<T>>> {
        if let Some(code) = self.reset {
            return Poll::Ready(Err(from_read_error(ReadError::Reset(code))));
        }
        if self.done {
            return Poll::Ready(Ok(None));
        }
        let id = self.id;
        let res = self.conn.poll_step(&mut self.key, cx, |st, dirty| {
            let attempt = {
                let mut stream = st.conn.recv_stream(id);
                // Bound to a local so the `Chunks` temporary ends before
                // `stream` does.
                let attempt = match stream.read(true) {
                    Ok(mut chunks) => {
                        let out = read(&mut chunks);
                        *dirty |= chunks.finalize().should_transmit();
                        Ok(out)
                    }
                    Err(e) => Err(e),
                };
                attempt
            };
            match attempt {
                Err(ReadableError::ClosedStream) => Step::Done(Err(closed_stream(st))),
                Err(e @ ReadableError::IllegalOrderedRead) => Step::Done(Err(io::Error::other(e))),
                Ok((None, ReadEnd::Blocked)) => match &st.error {
                    Some(e) => Step::Done(Err(from_connection_error(e.clone()))),
                    None => Step::Wait(WaitKind::Read(id)),
                },
                Ok(out) => Step::Done(Ok(out)),
            }
        });
        let Poll::Ready(res) = res else {
            return Poll::Pending;
        };
        // `poll_step` removed the entry (if any) with the result.
        self.key = 0;
        let (data, end) = res?;
        match end {
            ReadEnd::Fin => self.done = true,
            ReadEnd::Reset(code) => {
                self.done = true;
                self.reset = Some(code);
            }
            ReadEnd::Open | ReadEnd::Blocked => {}
        }
        Poll::Ready(match (data, end) {
            (Some(data), _) => Ok(Some(data)),
            (None, ReadEnd::Reset(code)) => Err(from_read_error(ReadError::Reset(code))),
            // `Open` and `Blocked` come with data (an empty read is not
            // attempted and a blocked one waits): this is `Fin`.
            (None, _) => Ok(None),
        })
    }

    /// The next chunk of at most `max` bytes, in order; `None` at the end.
    /// If the future is dropped before it completes, no data is lost (a
    /// chunk leaves quinn-proto only in the same locked step that returns
    /// it).
    pub(crate) async fn read_chunk(&mut self, max: usize) -> io::Result<Option<Bytes>> {
        let guard = Release(self);
        poll_fn(|cx| guard.0.poll_read_chunk(cx, max)).await
    }

    /// Stops receiving (STOP_SENDING with `code`).
    pub(crate) fn stop(&mut self, code: VarInt) -> io::Result<()> {
        if self.done {
            return Ok(());
        }
        let res = {
            let mut st = self.conn.lock();
            st.conn
                .recv_stream(self.id)
                .stop(code)
                .map_err(|_| closed_stream(&st))
        };
        self.done = true;
        self.conn.mark_dirty();
        res
    }
}

impl Drop for NativeRecv {
    fn drop(&mut self) {
        self.release_waiter();
        if !self.done {
            // As quinn: a stream dropped before its end is stopped (0).
            let _ = self.stop(VarInt::from_u32(0));
        }
    }
}
