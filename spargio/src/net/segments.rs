//! Multishot receive into a provided-buffer pool: `recv_multishot_segments`.
//!
//! One `IORING_OP_RECV` with `IORING_RECV_MULTISHOT` keeps receiving into
//! buffers the kernel takes from the stream's own pool (a [`BufRing`]
//! registered on the session shard's ring). Each completion becomes a
//! [`RecvSegment`]: the received bytes, in the pool buffer the kernel
//! filled, without a copy. Dropping the segment gives the buffer back to
//! the kernel. A pool belongs to one stream, so a slow consumer on one
//! stream cannot starve another.
//!
//! Flow control: when the consumer holds every buffer, the kernel ends the
//! multishot operation with `ENOBUFS` and the data waits in the socket
//! (TCP applies backpressure to the peer). The stream re-arms the
//! operation as soon as a segment is dropped. A consumer that keeps every
//! segment alive while waiting for the next one therefore waits forever:
//! size the pool for how much you hold ([`RecvPoolConfig`]).
//!
//! The end of a stream is watched twice. Linux's multishot receive can
//! miss a reset (RST) that arrives right after data and then never
//! complete, though the socket is closed (measured on 6.18.44 by
//! `scripts/probes/multishot_reset`: about 1 reset in 24,000 as armed
//! here, nearly all of them when armed poll-first). A plain one-shot poll
//! for `POLLRDHUP` on the same socket sees every one of them. So on
//! io_uring each stream keeps such a poll in flight beside its receive
//! (the epoll backend's emulated receive reports resets itself); when it
//! fires (the peer closed, shut down its side, or reset), the receive is
//! cancelled and armed afresh, and a receive armed on a socket that has
//! ended reads what is queued and then the end at once. Cost: one more
//! operation per stream, not per segment.

use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::buf::ring::BufRing;
use crate::buf::IoBuf;
use crate::op::recv_multi::{HangupWatch, RecvMulti};
use crate::op::{Completion, Lane, MultiOp};
use crate::scheduler::context;
use crate::shard_id::ShardId;

use super::stream::StreamCore;

/// The buffer pool of one `recv_multishot_segments` stream.
///
/// ```
/// use spargio::net::RecvPoolConfig;
///
/// let config = RecvPoolConfig::default().buffers(128).buffer_len(4096);
/// assert_eq!(config.memory(), 128 * 4096);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvPoolConfig {
    buffers: u16,
    buffer_len: u32,
}

impl Default for RecvPoolConfig {
    /// 64 buffers of 16 KiB (1 MiB per stream).
    fn default() -> RecvPoolConfig {
        RecvPoolConfig {
            buffers: 64,
            buffer_len: 16 * 1024,
        }
    }
}

impl RecvPoolConfig {
    /// How many buffers: a power of two from 1 to 32768 (else the stream
    /// is refused with `InvalidInput`). At most this many segments can be
    /// held at once.
    pub fn buffers(mut self, buffers: u16) -> RecvPoolConfig {
        self.buffers = buffers;
        self
    }

    /// Bytes per buffer: the largest segment (at least 1).
    pub fn buffer_len(mut self, buffer_len: u32) -> RecvPoolConfig {
        self.buffer_len = buffer_len;
        self
    }

    /// Bytes the pool takes.
    pub fn memory(&self) -> usize {
        usize::from(self.buffers) * self.buffer_len as usize
    }
}

/// Received bytes in a pool buffer; the buffer goes back to the kernel
/// when this is dropped. Dereferences to `[u8]`, and is an [`IoBuf`], so it
/// can be sent on as it is.
///
/// The first segment of a stream may instead hold bytes an abandoned
/// receive on the same socket took before it (`op/carry.rs`): those come
/// first, in a buffer of their own.
pub struct RecvSegment(Held);

enum Held {
    Pool {
        pool: Arc<BufRing>,
        bid: u16,
        len: u32,
    },
    Carried(Box<[u8]>),
}

impl std::fmt::Debug for RecvSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvSegment")
            .field("len", &self.len())
            .finish()
    }
}

impl std::ops::Deref for RecvSegment {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            // SAFETY: this segment holds `bid` (handed out by the
            // completion, recycled only in `Drop`), and the kernel wrote
            // `len` bytes.
            Held::Pool { pool, bid, len } => unsafe { pool.bytes(*bid, *len as usize) },
            Held::Carried(bytes) => bytes,
        }
    }
}

impl AsRef<[u8]> for RecvSegment {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl Drop for RecvSegment {
    fn drop(&mut self) {
        if let Held::Pool { pool, bid, .. } = &self.0 {
            pool.recycle(*bid);
        }
    }
}

// SAFETY: the bytes live in the pool's heap allocation, which the segment
// keeps alive (`pool`) and which does not move, or in the segment's own
// boxed slice (moving the segment does not move it); nobody writes to a
// held buffer.
unsafe impl IoBuf for RecvSegment {
    fn stable_ptr(&self) -> *const u8 {
        self.as_ptr()
    }

    fn bytes_init(&self) -> usize {
        self.len()
    }

    fn bytes_total(&self) -> usize {
        self.len()
    }
}

/// The segments a stream receives on one multishot receive (module docs);
/// from `recv_multishot_segments` on [`TcpStream`](super::TcpStream) and
/// [`UnixStream`](super::UnixStream).
///
/// A `Stream` of `io::Result<RecvSegment>` that ends at end of stream, or
/// after yielding an error.
///
/// To stop receiving, call [`stop`](Self::stop): it cancels the receive
/// and returns what the kernel had already received. Merely dropping the
/// stream also cancels it and loses nothing: segments it received and
/// did not yield, and those the kernel fills before the cancel takes
/// effect, go to the socket's next receive (`op/carry.rs`), as for any
/// abandoned receive.
///
/// Linux's multishot receive can miss a reset (RST) that arrives right
/// after data; each stream therefore also watches its socket with a plain
/// poll, which sees the reset, and then ends the receive itself (module
/// docs). The stream ends with the reset's `ConnectionReset` error either
/// way.
#[derive(Debug)]
pub struct RecvSegments {
    /// What abandoned receives on the socket took before this stream was
    /// made (`op/carry.rs`): yielded first, then the error, if any.
    carried: Option<Box<[u8]>>,
    carried_error: Option<io::Error>,
    op: MultiOp<RecvMulti>,
    /// The hangup watch (module docs; io_uring only); `watched` once it
    /// fired.
    watch: Option<MultiOp<HangupWatch>>,
    watched: bool,
    /// The receive was cancelled because the watch fired: its
    /// `ECANCELED` means "arm again", not the end.
    cancelled_for_watch: bool,
    pool: Arc<BufRing>,
    session: ShardId,
    /// The kernel ran out of buffers: re-arm once one comes back.
    starved: bool,
    finished: bool,
}

impl RecvSegments {
    pub(crate) async fn new(core: &StreamCore, config: RecvPoolConfig) -> io::Result<RecvSegments> {
        // Bytes an abandoned receive took come before anything the kernel
        // still holds: wait until they are all in, and take them.
        let (carried, carried_error) = match core.fd.carry() {
            Some(carry) => {
                std::future::poll_fn(|cx| carry.poll_settled(cx)).await;
                carry.take_all()
            }
            None => (Vec::new(), None),
        };
        let shared = core.handle.shared.clone();
        let session = core.session;
        let (buffers, len) = (config.buffers, config.buffer_len);
        let pool = if context::current_shard(&shared) == Some(session) {
            BufRing::register(&shared, session, buffers, len)?
        } else {
            // Registration is a call on the session shard's ring, made from
            // its own thread.
            let on_shard = shared.clone();
            core.handle
                .spawn_pinned(session, async move {
                    BufRing::register(&on_shard, session, buffers, len)
                })
                .map_err(io::Error::other)?
                .await
                .map_err(io::Error::other)??
        };
        let op = MultiOp::submit(
            &shared,
            Lane::Shard(session),
            RecvMulti::new(
                core.fd.clone(),
                pool.clone(),
                crate::driver::lifecycle::MULTISHOT_QUEUE_LIMIT,
                true,
            ),
        );
        let watch = HangupWatch::needed(&shared).then(|| {
            MultiOp::submit(
                &shared,
                Lane::Shard(session),
                HangupWatch {
                    fd: core.fd.clone(),
                },
            )
        });
        Ok(RecvSegments {
            carried: (!carried.is_empty()).then(|| carried.into_boxed_slice()),
            carried_error,
            op,
            watch,
            watched: false,
            cancelled_for_watch: false,
            pool,
            session,
            starved: false,
            finished: false,
        })
    }

    /// The next segment; `None` at end of stream.
    pub async fn next_segment(&mut self) -> Option<io::Result<RecvSegment>> {
        std::future::poll_fn(|cx| self.poll_segment(cx)).await
    }

    /// Ends the multishot receive and returns the segments the kernel
    /// received before it stopped (the bytes that follow stay in the
    /// socket for the next receive). An error that ended the stream first
    /// is returned instead.
    pub async fn stop(mut self) -> io::Result<Vec<RecvSegment>> {
        self.op.cancel();
        // Nothing re-arms from here on.
        self.starved = false;
        let mut rest = Vec::new();
        std::future::poll_fn(|cx| loop {
            if self.finished {
                return Poll::Ready(Ok(()));
            }
            match self.op.poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(Ok(())),
                Poll::Ready(Some(done)) => match self.segment(done) {
                    Some(Ok(seg)) => rest.push(seg),
                    Some(Err(err)) if is_end_of_multishot(&err) => {}
                    Some(Err(err)) => return Poll::Ready(Err(err)),
                    None => {}
                },
            }
        })
        .await?;
        Ok(rest)
    }

    /// Buffers in this stream's pool.
    pub fn pool_buffers(&self) -> u16 {
        self.pool.entries()
    }

    fn poll_segment(&mut self, cx: &mut Context<'_>) -> Poll<Option<io::Result<RecvSegment>>> {
        if let Some(bytes) = self.carried.take() {
            return Poll::Ready(Some(Ok(RecvSegment(Held::Carried(bytes)))));
        }
        if let Some(err) = self.carried_error.take() {
            self.finished = true;
            return Poll::Ready(Some(Err(err)));
        }
        loop {
            if self.finished {
                return Poll::Ready(None);
            }
            if self.starved {
                // Register first, then look: a buffer recycled in between
                // is seen by the check or wakes us.
                self.pool.wait_for_buffer(cx.waker());
                if self.pool.available() == 0 {
                    return Poll::Pending;
                }
                self.starved = false;
                self.op.rearm(Lane::Shard(self.session));
            }
            let fired = |w: &mut MultiOp<HangupWatch>| w.poll_next(cx).is_ready();
            if !self.watched && self.watch.as_mut().is_some_and(fired) {
                // The peer is done (or the watch could not be armed):
                // from here a fresh receive reads the rest and the end.
                self.watched = true;
                self.cancelled_for_watch = true;
                self.op.cancel();
            }
            match self.op.poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => self.op.rearm(Lane::Shard(self.session)),
                Poll::Ready(Some(done)) => {
                    if let Some(item) = self.segment(done) {
                        return Poll::Ready(Some(item));
                    }
                }
            }
        }
    }

    /// Turns one completion into a segment, an error, or nothing (end of
    /// stream sets `finished`; running out of buffers sets `starved`).
    fn segment(&mut self, done: Completion) -> Option<io::Result<RecvSegment>> {
        let bid = io_uring::cqueue::buffer_select(done.flags);
        if let Some(bid) = bid {
            self.pool.take(bid);
        }
        match (done.result, bid) {
            (Ok(len), Some(bid)) if len > 0 => Some(Ok(RecvSegment(Held::Pool {
                pool: self.pool.clone(),
                bid,
                len,
            }))),
            (Err(err), None) if err.raw_os_error() == Some(libc::ENOBUFS) => {
                self.starved = true;
                None
            }
            (Err(err), None)
                if self.cancelled_for_watch && err.raw_os_error() == Some(libc::ECANCELED) =>
            {
                self.cancelled_for_watch = false;
                None
            }
            (res, bid) => {
                if let Some(bid) = bid {
                    self.pool.recycle(bid);
                }
                self.finished = true;
                match res {
                    Ok(0) => None,
                    Ok(_) => Some(Err(io::Error::other(
                        "multishot receive completed without a buffer",
                    ))),
                    Err(err) => Some(Err(err)),
                }
            }
        }
    }
}

/// How a cancelled multishot receive reports its end.
fn is_end_of_multishot(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error(),
        Some(libc::ECANCELED) | Some(libc::ENOBUFS)
    )
}

impl futures_core::Stream for RecvSegments {
    type Item = io::Result<RecvSegment>;

    fn poll_next(
        self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<RecvSegment>>> {
        self.get_mut().poll_segment(cx)
    }
}
