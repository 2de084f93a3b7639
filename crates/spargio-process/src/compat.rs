//! Poll-based reads and writes on the stdio pipes.
//!
//! `futures_io` (and tokio) traits lend the caller's slice for one poll,
//! but a ring operation writes into memory it was handed at submission,
//! maybe after that poll returned `Pending` and the caller went away. So,
//! as `spargio::io::Compat` does for sockets:
//!
//! * **Read.** A read into the stream's own buffer, sized like the
//!   caller's (4 KiB to 64 KiB, a pipe's default capacity), is put in
//!   flight and kept *in the stream*, not in the caller's future. Its
//!   bytes are copied into the caller's slice; what does not fit waits for
//!   the next read. A read abandoned by `select!` or a timeout resumes on
//!   the next poll: no byte is lost.
//! * **Write.** Up to 64 KiB of the caller's bytes are copied into the
//!   stream's buffer, a write of them is put in flight and the poll
//!   reports them accepted at once (write-behind). The next write, `flush`
//!   or `close` first waits for it (rewriting the rest after a short
//!   write) and reports its error, if any.
//! * **Close** flushes, then closes the pipe.
//!
//! Dropping the stream drops the operation in flight, which cancels it;
//! the fd is closed once the kernel is done with it.

use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use spargio::buf::{BufResult, IoBuf};

use crate::stdio::{ChildStderr, ChildStdin, ChildStdout, Pipe};

/// The most a write accepts at once, and the largest read put in flight.
const CHUNK: usize = 64 * 1024;

/// The smallest read put in flight.
const MIN_READ: usize = 4 * 1024;

type ReadOp = Pin<Box<dyn Future<Output = BufResult<usize, Vec<u8>>> + Send + Sync>>;
type WriteOp = Pin<Box<dyn Future<Output = BufResult<(), Vec<u8>>> + Send + Sync>>;

// ===== impl PollReader =====

/// The read side's state (module docs).
pub(crate) struct PollReader {
    state: ReadState,
}

enum ReadState {
    /// `buf[pos..]` was read and not yet handed out.
    Ready {
        buf: Vec<u8>,
        pos: usize,
    },
    InFlight(ReadOp),
}

impl std::fmt::Debug for PollReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            ReadState::Ready { buf, pos } => format!("{} bytes buffered", buf.len() - pos),
            ReadState::InFlight(_) => "read in flight".to_string(),
        };
        f.debug_struct("PollReader").field("state", &state).finish()
    }
}

impl PollReader {
    pub(crate) fn new() -> PollReader {
        PollReader {
            state: ReadState::Ready {
                buf: Vec::new(),
                pos: 0,
            },
        }
    }

    /// Nothing buffered and nothing in flight: an owned-buffer read may go
    /// straight to the pipe.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(&self.state, ReadState::Ready { buf, pos } if *pos >= buf.len())
    }

    /// Copies read bytes into `out`, reading first if none are held. On
    /// `Ok(n)` the first `n` bytes of `out` are initialized.
    pub(crate) fn poll_read_uninit(
        &mut self,
        cx: &mut Context<'_>,
        pipe: &Pipe,
        out: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        loop {
            match &mut self.state {
                ReadState::Ready { buf, pos } if *pos < buf.len() => {
                    let n = out.len().min(buf.len() - *pos);
                    for (dst, &src) in out[..n].iter_mut().zip(&buf[*pos..*pos + n]) {
                        dst.write(src);
                    }
                    *pos += n;
                    return Poll::Ready(Ok(n));
                }
                ReadState::InFlight(op) => {
                    let (res, buf) = ready!(op.as_mut().poll(cx));
                    self.state = ReadState::Ready { buf, pos: 0 };
                    match res {
                        Ok(0) => return Poll::Ready(Ok(0)),
                        Ok(_) => {}
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
                ReadState::Ready { buf, .. } => {
                    if out.is_empty() {
                        return Poll::Ready(Ok(0));
                    }
                    let mut buf = std::mem::take(buf);
                    let want = out.len().clamp(MIN_READ, CHUNK);
                    if buf.capacity() > 2 * want {
                        // A big earlier read must not pin its buffer to a
                        // stream asking for little now.
                        buf = Vec::new();
                    }
                    buf.clear();
                    buf.reserve(want);
                    let pipe = pipe.clone();
                    self.state = ReadState::InFlight(Box::pin(async move {
                        pipe.native.read_at_into(&pipe.fd, 0, buf).await
                    }));
                }
            }
        }
    }

    fn poll_read_slice(
        &mut self,
        cx: &mut Context<'_>,
        pipe: &Pipe,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        // SAFETY: an initialized byte slice is a valid `[MaybeUninit<u8>]`,
        // and `poll_read_uninit` only stores initialized bytes into it.
        let out = unsafe { &mut *(out as *mut [u8] as *mut [MaybeUninit<u8>]) };
        self.poll_read_uninit(cx, pipe, out)
    }
}

// ===== impl PollWriter =====

/// The write side's state (module docs).
pub(crate) struct PollWriter {
    state: WriteState,
}

enum WriteState {
    Idle(Vec<u8>),
    /// Writing all of the buffer's bytes.
    InFlight(WriteOp),
}

impl std::fmt::Debug for PollWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let busy = matches!(self.state, WriteState::InFlight(_));
        f.debug_struct("PollWriter")
            .field("write_in_flight", &busy)
            .finish()
    }
}

/// Writes all of `buf`, retrying short writes.
async fn write_all(pipe: Pipe, mut buf: Vec<u8>) -> BufResult<(), Vec<u8>> {
    let total = buf.len();
    let mut done = 0;
    while done < total {
        let (res, slice) = pipe
            .native
            .write_at(&pipe.fd, 0, buf.slice(done..total))
            .await;
        buf = slice.into_inner();
        match res {
            Ok(0) => {
                let err = io::Error::new(io::ErrorKind::WriteZero, "the pipe accepted no bytes");
                return (Err(err), buf);
            }
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (Err(e), buf),
        }
    }
    (Ok(()), buf)
}

impl PollWriter {
    pub(crate) fn new() -> PollWriter {
        PollWriter {
            state: WriteState::Idle(Vec::new()),
        }
    }

    /// No write in flight.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.state, WriteState::Idle(_))
    }

    /// Waits for the write in flight, if any.
    pub(crate) fn poll_flush(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.state {
            WriteState::Idle(_) => Poll::Ready(Ok(())),
            WriteState::InFlight(op) => {
                let (res, buf) = ready!(op.as_mut().poll(cx));
                self.state = WriteState::Idle(buf);
                Poll::Ready(res)
            }
        }
    }

    /// Accepts up to `CHUNK` bytes of `data` and starts writing them.
    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        pipe: &Pipe,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_flush(cx))?;
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let WriteState::Idle(buf) = &mut self.state else {
            unreachable!("flushed above");
        };
        let mut buf = std::mem::take(buf);
        buf.clear();
        let n = data.len().min(CHUNK);
        buf.extend_from_slice(&data[..n]);
        self.state = WriteState::InFlight(Box::pin(write_all(pipe.clone(), buf)));
        Poll::Ready(Ok(n))
    }
}

// ===== poll entry points on the streams =====

impl ChildStdin {
    pub(crate) fn poll_flush_inner(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.poll.poll_flush(cx)
    }

    pub(crate) fn poll_write_inner(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let pipe = match self.pipe() {
            Ok(pipe) => pipe.clone(),
            Err(e) => return Poll::Ready(Err(e)),
        };
        self.poll.poll_write(cx, &pipe, data)
    }

    pub(crate) fn poll_close_inner(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.pipe().is_err() {
            return Poll::Ready(Ok(()));
        }
        let flushed = ready!(self.poll.poll_flush(cx));
        self.close();
        Poll::Ready(flushed)
    }
}

impl futures_io::AsyncWrite for ChildStdin {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_inner(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush_inner(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_close_inner(cx)
    }
}

impl futures_io::AsyncRead for ChildStdout {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.poll.poll_read_slice(cx, &this.pipe, buf)
    }
}

impl futures_io::AsyncRead for ChildStderr {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.poll.poll_read_slice(cx, &this.pipe, buf)
    }
}
