//! Poll-based I/O traits over completion-based streams.
//!
//! [`Compat`] wraps a [`TcpStream`](crate::net::TcpStream) or
//! [`UnixStream`](crate::net::UnixStream) and implements
//! `futures_io::{AsyncRead, AsyncWrite}`, and with the `tokio-io` feature
//! `tokio::io::{AsyncRead, AsyncWrite}`, so libraries written against
//! those traits (hyper, tungstenite, rustls adapters ...) run unchanged.
//!
//! How a poll maps onto an owned-buffer operation:
//!
//! * **Read.** Bytes already queued on the socket are copied at once
//!   (`recv` with `MSG_DONTWAIT`), unless the previous receive came back
//!   short (the socket was drained then: the inline attempt would almost
//!   always fail, one wasted syscall per request under HTTP keep-alive).
//!   Otherwise, on the stream's session shard, the read arms one
//!   multishot receive into the shard's shared buffer pool and keeps it
//!   armed for the next reads (`armed_recv.rs`): a connection waiting for
//!   its next request holds no receive buffer, and a request costs one
//!   completion, no submission and no poll arm. Each completion's bytes
//!   are copied into the caller's slice and its pool buffer given back.
//!   On io_uring a one-shot poll per connection watches for the peer's
//!   hangup or reset, which Linux's multishot receive can miss
//!   (`armed_recv.rs`).
//!   Measured with hyper under `wrk` at 1,000–4,000 connections against
//!   the receive-per-read it replaced (`bench/README.md`, "Scale"):
//!   server CPU per request 4–14% lower on split cores at 4,000
//!   connections, even at 1,000, and on epoll (where the multishot is
//!   emulated) up to 13% higher at 4,000.
//!   Where the pool cannot serve (off the session shard, a pool run dry,
//!   a connection that stopped reading with bytes still arriving), a
//!   receive into the adaptor's own buffer is put in flight instead,
//!   sized like the caller's read; what does not fit the caller's slice
//!   is kept for the next read. Either receive stays in the adaptor
//!   (not in the caller's future), so a read abandoned by `select!` or a
//!   timeout resumes where it was: no byte is lost.
//! * **Write.** What the socket buffer takes right now is sent at once
//!   (`send` with `MSG_DONTWAIT`). Otherwise the bytes are copied into the
//!   adaptor's buffer and a send is put in flight; the write reports them
//!   accepted at once (write-behind). The send carries `MSG_WAITALL`, so
//!   the kernel goes on sending until every byte is taken: bytes a write
//!   accepted leave without any later poll, even when the caller never
//!   writes, flushes or closes again (it reads, waiting for a reply).
//!   On a shard whose CPU is contended
//!   (`scheduler/spin.rs`: something else wants it, such as a load
//!   generator on the same cores) and on the io_uring backend, a
//!   connection's second and later writes from its session shard skip
//!   the immediate send and go to the ring: the sends of one loop turn
//!   then reach the kernel in one `io_uring_enter`, so a peer waiting on
//!   several connections is woken once for the lot instead of once per
//!   response. Measured with hyper under `wrk -c16` on two shared cores:
//!   the server's CPU per request 5.41 → 4.6 µs, wrk's context switches per
//!   request halved, requests/s +5%. A connection's first write stays
//!   immediate: a connection that answers once and closes (`Connection:
//!   close`) would otherwise wait for the send's completion before its
//!   close (−15% connections/s when every write went to the ring).
//! * **A write behind a send in flight** waits for it, and returns
//!   `Pending` only while the socket has no room. A send the batching
//!   queued, which may still wait for the loop turn's submit, is submitted
//!   there and then (the shard enters its ring from inside the poll and
//!   reaps; a send the socket has room for completes inside the enter).
//!   Waiting for the loop turn instead would refuse the write with room in
//!   the socket, and a layer above that buffers may turn that refusal into
//!   "accepted" and keep what it could not pass down: futures-rustls keeps
//!   the TLS records, and a server that then reads without flushing never
//!   sends them (a user's echo server hung so, with 48 KiB of a 64 KiB
//!   echo inside rustls). `flush` and `close` do wait for the loop turn:
//!   that is where the batching saves. One case still waits for it: a
//!   task moved to another shard between two writes (its queued send is
//!   on the session shard's ring, which only that shard can enter).
//!   A send that comes back short all the same (a kernel that does not
//!   retry sends, a connection shut down midway) is resent by the next
//!   write, `flush` or `close`, which report its error, if any.
//! * **Close** flushes, then shuts down the write direction.
//!
//! * **Drop** loses nothing the adaptor took. A send in flight is let
//!   finish (`linger.rs`): bytes a write reported accepted reach the peer
//!   before the end of stream, or the connection is reset. Bytes received
//!   and not yet handed out, and what a receive in flight takes before its
//!   cancel lands, go to the stream's carry (`op/carry.rs`) when anyone
//!   can still read the stream (`into_inner`, or a clone); pool buffers go
//!   back to the pool.

use std::future::Future;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use super::armed_recv::{ArmedRecv, Watch};
use crate::buf::IoBuf;
use crate::net::stream::StreamCore;
use crate::net::{TcpStream, UnixStream};
use crate::op::recv::{recv_now, Recv};
use crate::op::send::{send_now, Send as SendOp, SendAll};
use crate::op::{Lane, Op};

/// How much a write accepts at once; four of these bound a read.
const CHUNK: usize = 64 * 1024;

/// The first size of a receive put in flight. A receive is put in flight
/// only when the socket was found empty, and its buffer is held for as
/// long as the connection stays idle: a server with thousands of idle
/// keep-alive connections pays this per connection. What arrives first on
/// such a connection is usually small (a request head).
const WAIT_READ_MIN: usize = 1024;

/// The most a receive put in flight grows to (see `Compat::wait_read`).
const WAIT_READ_MAX: usize = 64 * 1024;

/// Streams [`Compat`] can wrap.
pub trait CompatStream: sealed::Sealed + Unpin {}

// The sealed trait hands out a crate-private type: no one outside the
// crate can name or implement it, which is the point.
#[allow(private_interfaces)]
mod sealed {
    pub trait Sealed {
        fn core(&self) -> &crate::net::stream::StreamCore;
    }
}

#[allow(private_interfaces)]
impl sealed::Sealed for TcpStream {
    fn core(&self) -> &StreamCore {
        self.core()
    }
}
impl CompatStream for TcpStream {}

#[allow(private_interfaces)]
impl sealed::Sealed for UnixStream {
    fn core(&self) -> &StreamCore {
        self.core()
    }
}
impl CompatStream for UnixStream {}

enum ReadState {
    /// `buf[pos..]` is received and not yet handed out.
    Ready {
        buf: Vec<u8>,
        pos: usize,
    },
    InFlight(Op<Recv<Vec<u8>>>),
    /// A previous receive's buffer was lost with its error; start afresh.
    Empty,
}

enum WriteState {
    Idle(Vec<u8>),
    /// A send of `buf[..]` from `sent` on.
    InFlight {
        op: Op<SendAll<crate::buf::Slice<Vec<u8>>>>,
    },
    /// The write direction is shut down; closing again is a no-op.
    Closed,
}

/// A poll-based view of a stream (module docs).
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use futures_io::AsyncWrite;
/// use spargio::io::Compat;
/// use spargio::net::UnixStream;
///
/// let (a, b) = UnixStream::pair(&handle).unwrap();
/// let mut a = Compat::new(a);
/// let n = std::future::poll_fn(|cx| std::pin::Pin::new(&mut a).poll_write(cx, b"compat")).await.unwrap();
/// std::future::poll_fn(|cx| std::pin::Pin::new(&mut a).poll_flush(cx)).await.unwrap();
/// assert_eq!(b.recv(16).await.unwrap(), &b"compat"[..n]);
/// # })).unwrap();
/// ```
pub struct Compat<T: CompatStream> {
    /// Dropped by `Drop` unless `into_inner` took it (`taken`).
    inner: std::mem::ManuallyDrop<T>,
    taken: bool,
    read: ReadState,
    /// The receive kept armed between reads (`armed_recv.rs`); boxed,
    /// as it is armed once per connection and would double the adaptor.
    pub(super) armed: Option<Box<ArmedRecv>>,
    /// The connection's hangup watch, made with its first armed receive
    /// (`armed_recv.rs`).
    watch: Option<Box<Watch>>,
    /// The last receive returned less than it asked for.
    drained: bool,
    /// The armed receive just ended (its pool ran dry, it was paused): the
    /// next wait takes a receive of its own instead of arming again. A
    /// pool can look less dry to us than it is (arrivals not yet read hold
    /// buffers we do not count), and a receive armed on an empty pool may
    /// end at once: arming again in the same poll could go on for ever.
    skip_arm: bool,
    /// The size of the next receive put in flight: it doubles when one
    /// comes back full (more was queued behind it: a client reading
    /// responses larger than a request head would otherwise pay a second
    /// read for each) and halves when one comes back a quarter full or
    /// less, between `WAIT_READ_MIN` and `WAIT_READ_MAX`.
    wait_read: usize,
    write: WriteState,
    /// A write has been done on this stream (see the module docs).
    wrote: bool,
    /// The send in flight was queued on the ring by a batched write and
    /// may not have reached the kernel yet (see `poll_write_slice`).
    queued: bool,
}

impl<T: CompatStream + std::fmt::Debug> std::fmt::Debug for Compat<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compat")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl<T: CompatStream> Compat<T> {
    /// Wraps `inner`.
    pub fn new(inner: T) -> Compat<T> {
        Compat {
            inner: std::mem::ManuallyDrop::new(inner),
            taken: false,
            armed: None,
            watch: None,
            drained: false,
            skip_arm: false,
            wait_read: WAIT_READ_MIN,
            read: ReadState::Ready {
                buf: Vec::new(),
                pos: 0,
            },
            write: WriteState::Idle(Vec::new()),
            wrote: false,
            queued: false,
        }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &T {
        &self.inner
    }

    /// The wrapped stream. Nothing the adaptor holds is lost: bytes it
    /// received and did not hand out go to the stream's next receive, and
    /// a send of accepted bytes still in flight goes on in the background
    /// (as when the adaptor is dropped, below); a write through the stream
    /// waits for it, so bytes stay in order.
    ///
    /// Dropping the adaptor loses nothing either: its send in flight is
    /// let finish (bounded: `io/linger.rs` in the source; a send that
    /// cannot finish resets the connection, so the peer never sees a clean
    /// end with bytes missing), and received bytes not handed out go to the
    /// next receive of any clone of the stream.
    ///
    /// Should that send fail (the peer read nothing for a minute, or
    /// went away), every later send on the stream fails with
    /// [`BrokenPipe`](std::io::ErrorKind::BrokenPipe) rather than put its
    /// bytes after a gap.
    pub fn into_inner(mut self) -> T {
        self.release(true);
        self.taken = true;
        // SAFETY: `taken` is set, so `Drop` neither releases nor drops
        // `inner` again, and nothing else reads it after this.
        unsafe { std::mem::ManuallyDrop::take(&mut self.inner) }
    }

    fn core(&self) -> &StreamCore {
        core_of(&*self.inner)
    }

    /// Hands what the adaptor holds on (see `into_inner`): the send in
    /// flight lingers; received bytes go to the stream's carry when
    /// anyone may still read the stream (`keep`, or a clone holds it).
    fn release(&mut self, keep: bool) {
        if let WriteState::InFlight { op } = std::mem::replace(&mut self.write, WriteState::Closed)
        {
            super::linger::linger(core_of(&*self.inner), op);
        }
        let fd = core_of(&*self.inner).fd.clone();
        // Our own holders of the fd: the stream, the clone above, and each
        // receive in flight. Counted after the send went to linger: it may
        // have ended (and let its holds go) already, and a hold it still
        // has only makes the count say "someone else", which costs a copy
        // at most; counting one that is gone would lose bytes.
        let ours = 2
            + usize::from(self.armed.is_some())
            + usize::from(self.watch.as_ref().is_some_and(|w| w.holds_fd()))
            + usize::from(matches!(self.read, ReadState::InFlight(_)));
        if !keep && fd.holders() <= ours {
            // Nobody can read the stream after us: nothing to hand on.
            return;
        }
        let held = match &mut self.read {
            ReadState::Ready { buf, pos } if *pos < buf.len() => {
                let held = buf.split_off(*pos);
                *pos = buf.len();
                held
            }
            _ => Vec::new(),
        };
        let carry = fd.carry_or_make();
        carry.abandon();
        carry.append(&held);
        if let Some(armed) = self.armed.take() {
            // Its held bytes, then what it received unread and receives
            // until its cancel lands.
            armed.hand_on(carry);
        }
        // A receive of our own in flight carries itself when dropped.
        carry.settle(&[]);
    }
    /// Copies received bytes into `out`, receiving first if none are held.
    pub(crate) fn poll_read_slice(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        // SAFETY: an initialized byte slice is a valid `[MaybeUninit<u8>]`,
        // and `poll_read_uninit` only stores initialized bytes into it.
        let out = unsafe { &mut *(out as *mut [u8] as *mut [MaybeUninit<u8>]) };
        self.poll_read_uninit(cx, out)
    }

    /// A poll-based read into memory that may be uninitialized (tokio's
    /// `ReadBuf`, hyper's `ReadBufCursor`, which would otherwise be zeroed
    /// on every read): on `Ok(n)` the first `n` bytes of `out` are
    /// initialized and hold the bytes read; `Ok(0)` with a non-empty
    /// `out` is end of stream. Same semantics as the `futures_io` read
    /// (module docs).
    pub fn poll_read_uninit(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut [MaybeUninit<u8>],
    ) -> Poll<io::Result<usize>> {
        loop {
            match &mut self.read {
                ReadState::Ready { buf, pos } if *pos < buf.len() => {
                    let n = out.len().min(buf.len() - *pos);
                    let src = &buf[*pos..*pos + n];
                    // SAFETY: `src` and `out[..n]` are `n` bytes each, and
                    // distinct (one is the adaptor's, one the caller's).
                    unsafe {
                        std::ptr::copy_nonoverlapping(src.as_ptr(), out.as_mut_ptr().cast(), n)
                    };
                    *pos += n;
                    return Poll::Ready(Ok(n));
                }
                ReadState::InFlight(op) => {
                    let (res, buf) = ready!(Pin::new(op).poll(cx));
                    self.drained = buf.len() < buf.capacity();
                    // Adapt only on receives that asked for the full size
                    // (a caller asking for less says nothing about it).
                    if buf.capacity() >= self.wait_read {
                        if buf.len() >= self.wait_read {
                            self.wait_read = (self.wait_read * 2).min(WAIT_READ_MAX);
                        } else if buf.len() <= self.wait_read / 4 {
                            self.wait_read = (self.wait_read / 2).max(WAIT_READ_MIN);
                        }
                    }
                    self.read = ReadState::Ready { buf, pos: 0 };
                    match res {
                        Ok(0) => return Poll::Ready(Ok(0)),
                        Ok(_) => {}
                        Err(e) => return Poll::Ready(Err(e)),
                    }
                }
                state => {
                    if out.is_empty() {
                        return Poll::Ready(Ok(0));
                    }
                    if let Some(armed) = &mut self.armed {
                        let watch = self
                            .watch
                            .as_deref_mut()
                            .expect("made with the first armed receive");
                        match armed.poll_read(cx, out, watch) {
                            Poll::Ready(Some(res)) => return Poll::Ready(res),
                            Poll::Pending => return Poll::Pending,
                            // It ended (out of pool buffers, paused): what
                            // follows waits in the socket.
                            Poll::Ready(None) => {
                                self.armed = None;
                                self.drained = false;
                                self.skip_arm = true;
                                continue;
                            }
                        }
                    }
                    // Bytes already queued on the socket: copy them now.
                    // Unless the last receive came back short: the socket
                    // was empty then, and most likely still is, so the
                    // inline attempt would be a wasted syscall.
                    // Bytes an abandoned receive took come first
                    // (`op/carry.rs`).
                    let fd = &core_of(&*self.inner).fd;
                    if let Some(res) = ready!(fd.poll_carried(cx, out)) {
                        return Poll::Ready(res);
                    }
                    if !std::mem::take(&mut self.drained) {
                        if let Some(res) = recv_now(fd, out) {
                            self.drained = res.as_ref().is_ok_and(|&n| n < out.len());
                            return Poll::Ready(res);
                        }
                    }
                    // The socket was empty a moment ago: the last receive
                    // came back short, or the inline one found nothing.
                    // Arm the shard pool's receive and keep it armed; only
                    // where it cannot be had, a receive of our own.
                    let arm = !std::mem::take(&mut self.skip_arm);
                    if let Some(armed) = arm
                        .then(|| ArmedRecv::arm(core_of(&*self.inner), &mut self.watch))
                        .flatten()
                    {
                        self.armed = Some(Box::new(armed));
                        *state = ReadState::Ready {
                            buf: Vec::new(),
                            pos: 0,
                        };
                        continue;
                    }
                    let mut buf = match std::mem::replace(state, ReadState::Empty) {
                        ReadState::Ready { buf, .. } => buf,
                        _ => Vec::new(),
                    };
                    let want = out.len().min(self.wait_read);
                    if buf.capacity() > 2 * want {
                        // A big earlier read must not pin its buffer to an
                        // idle connection asking for little now.
                        buf = Vec::new();
                    }
                    buf.clear();
                    buf.reserve(want);
                    let core = core_of(&*self.inner);
                    let op = Recv {
                        fd: core.fd.clone(),
                        buf,
                        carry: true,
                        poll_first: true,
                    };
                    self.read = ReadState::InFlight(Op::submit(
                        &core.handle.shared,
                        Lane::Shard(core.session),
                        op,
                    ));
                }
            }
        }
    }

    /// Waits for the send in flight (resending after short sends).
    pub(crate) fn poll_flush_inner(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match &mut self.write {
                WriteState::Idle(_) | WriteState::Closed => return Poll::Ready(Ok(())),
                WriteState::InFlight { op } => {
                    let (res, slice) = ready!(Pin::new(op).poll(cx));
                    let (begin, end) = (slice.begin(), slice.end());
                    let buf = slice.into_inner();
                    match res {
                        Ok(n) if begin + n < end => {
                            let rest = buf.slice(begin + n..end);
                            self.write = WriteState::InFlight {
                                op: self.send(rest),
                            };
                        }
                        Ok(0) if begin < end => {
                            self.write = WriteState::Idle(buf);
                            return Poll::Ready(Err(io::Error::new(
                                io::ErrorKind::WriteZero,
                                "the peer accepted no bytes",
                            )));
                        }
                        Ok(_) => self.write = WriteState::Idle(buf),
                        Err(e) => {
                            self.write = WriteState::Idle(buf);
                            return Poll::Ready(Err(e));
                        }
                    }
                }
            }
        }
    }

    fn send(&self, slice: crate::buf::Slice<Vec<u8>>) -> Op<SendAll<crate::buf::Slice<Vec<u8>>>> {
        let core = self.core();
        Op::submit(
            &core.handle.shared,
            Lane::Shard(core.session),
            SendAll(SendOp {
                fd: core.fd.clone(),
                buf: slice,
            }),
        )
    }

    /// Accepts up to `CHUNK` bytes of `data` and starts sending them.
    pub(crate) fn poll_write_slice(
        &mut self,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        if std::mem::take(&mut self.queued) && matches!(self.write, WriteState::InFlight { .. }) {
            // The send in the way was queued by the previous write and may
            // still wait for the loop turn's submit: were this write to
            // wait for it, the caller would see `Pending` with room in the
            // socket, and a caller that then stops writing (a TLS layer
            // keeps the records it could not pass down, and its caller
            // goes on to read) would leave bytes behind for good. So the
            // shard submits it now, and reaps: a send the socket has room
            // for completes inside the submit.
            let core = self.core();
            crate::scheduler::submit_and_reap(&core.handle.shared, core.session);
        }
        ready!(self.poll_flush_inner(cx))?;
        // A send another adaptor on the stream left to finish goes first
        // (`linger.rs`).
        ready!(self.core().fd.poll_sends_behind(cx))?;
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        // A later write on a contended shard goes to the ring, batched with
        // the loop turn's other sends (module docs).
        let batch = std::mem::replace(&mut self.wrote, true) && {
            let core = self.core();
            crate::scheduler::batch_sends(&core.handle.shared, core.session)
        };
        if !batch && matches!(self.write, WriteState::Idle(_)) {
            // Room in the socket buffer: send now, nothing left in flight.
            if let Some(res) = send_now(&self.core().fd, data) {
                return Poll::Ready(res);
            }
        }
        let buf = match std::mem::replace(&mut self.write, WriteState::Idle(Vec::new())) {
            WriteState::Idle(buf) => buf,
            _ => {
                self.write = WriteState::Closed;
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "write after the stream was closed",
                )));
            }
        };
        let mut buf = buf;
        buf.clear();
        let n = data.len().min(CHUNK);
        buf.extend_from_slice(&data[..n]);
        let op = self.send(buf.slice(..n));
        self.write = WriteState::InFlight { op };
        self.queued = batch;
        Poll::Ready(Ok(n))
    }

    /// Flushes, then shuts down the write direction.
    pub(crate) fn poll_close_inner(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if matches!(self.write, WriteState::Closed) {
            return Poll::Ready(Ok(()));
        }
        ready!(self.poll_flush_inner(cx))?;
        // After a send another adaptor left to finish (`linger.rs`).
        ready!(self.core().fd.poll_sends_behind(cx))?;
        self.write = WriteState::Closed;
        Poll::Ready(self.core().shutdown_now(std::net::Shutdown::Write))
    }
}

impl<T: CompatStream> Drop for Compat<T> {
    fn drop(&mut self) {
        if self.taken {
            return;
        }
        self.release(false);
        // SAFETY: not taken (checked above), and never used after this.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.inner) };
    }
}

/// The stream under an adaptor (a free function: callers hold other
/// fields of the adaptor borrowed).
fn core_of<T: CompatStream>(inner: &T) -> &StreamCore {
    sealed::Sealed::core(inner)
}

impl<T: CompatStream> futures_io::AsyncRead for Compat<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_read_slice(cx, buf)
    }
}

impl<T: CompatStream> futures_io::AsyncWrite for Compat<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_slice(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush_inner(cx)
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_close_inner(cx)
    }
}

#[cfg(feature = "tokio-io")]
impl<T: CompatStream> tokio::io::AsyncRead for Compat<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        // SAFETY: `poll_read_uninit` only stores bytes into the unfilled
        // part, never de-initializes it.
        let unfilled = unsafe { buf.unfilled_mut() };
        let n = ready!(self.get_mut().poll_read_uninit(cx, unfilled))?;
        // SAFETY: on `Ok(n)` the first `n` unfilled bytes were written.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

#[cfg(feature = "tokio-io")]
impl<T: CompatStream> tokio::io::AsyncWrite for Compat<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_write_slice(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flush_inner(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_close_inner(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use super::*;

    /// Reads once into `out`.
    async fn read_once(c: &mut Compat<UnixStream>, out: &mut [u8]) -> usize {
        poll_fn(|cx| c.poll_read_slice(cx, out)).await.unwrap()
    }

    #[test]
    fn a_waiting_receive_grows_when_it_comes_back_full_and_shrinks_back() {
        // Read from outside the shards: no shard pool to arm a receive on,
        // so each waiting read puts a receive of its own in flight.
        let rt = crate::RuntimeBuilder::new().shards(1).build().unwrap();
        let handle = rt.handle();
        crate::block_on(async move {
            let (a, b) = UnixStream::pair(&handle).unwrap();
            let mut a = Compat::new(a);
            let mut out = vec![0u8; 8192];
            assert_eq!(a.wait_read, WAIT_READ_MIN);
            // Messages larger than the receive put in flight: it comes back
            // full (the rest is read inline) and grows, up to what they need.
            for round in 0..4u8 {
                b.write_all(&[round; 3000]).await.unwrap();
                a.drained = true; // as after a short read: put a receive in flight
                let mut got = read_once(&mut a, &mut out).await;
                while got < 3000 {
                    got += read_once(&mut a, &mut out[got..]).await;
                }
                assert!(out[..3000].iter().all(|&x| x == round));
            }
            assert_eq!(a.wait_read, 4096, "grew to fit 3000-byte messages");
            // Small messages: it shrinks back (idle connections stay cheap).
            for _ in 0..4 {
                b.write_all(b"ping").await.unwrap();
                a.drained = true;
                assert_eq!(read_once(&mut a, &mut out).await, 4);
            }
            assert_eq!(a.wait_read, WAIT_READ_MIN);
            assert!(a.armed.is_none());
        });
    }
}
