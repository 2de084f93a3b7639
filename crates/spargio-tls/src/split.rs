//! `split`: a TLS stream as a read half and a write half, each driven by
//! its own task at the same time.
//!
//! rustls keeps one session for both directions (a read may need to send
//! an alert, a write encrypts with state a read updates), so the halves
//! share the stream behind a mutex held for one poll at a time, as
//! `tokio::io::split` does. No poll waits while holding it: a read
//! pending on the socket returns `Pending` and releases the lock, so it
//! never holds up a write, and the other way round (the transport,
//! [`spargio::io::Compat`], keeps a receive and a send in flight
//! independently).
//!
//! The wakers are the crux. Each operation in flight under the stream
//! (Compat's receive, Compat's send) remembers one waker: the one it was
//! last polled with. Both halves can poll the send (a write flushes it; a
//! read that fails sends a last-gasp alert through it), and futures-rustls
//! wakes a read's waker by hand when it wants to be polled again. Were
//! each half to poll with its own task's waker, the second poll of an
//! operation would replace the first's waker, and that task would never
//! be woken. So:
//!
//! 1. Each half stores its task's waker in its own slot of [`Wakers`]
//!    (`read` or `write`) *before* polling the stream, so that an event
//!    firing during or after the poll finds it.
//! 2. It locks the stream and polls it with the shared proxy waker, never
//!    with its own: every operation under the stream then holds the same
//!    waker, and replacing it with itself loses nothing.
//! 3. The proxy, woken, takes the wakers out of both slots and wakes them.
//!    The half an event was not for polls once for nothing (a lock and a
//!    `Pending`): the price of not knowing which operation's event it was.
//! 4. A half whose poll completed clears its slot: it is not waiting, and
//!    need not be woken by the other half's events.
//!
//! A half woken in step 3 while its own poll is still running is polled
//! again by its executor (a wake during a poll counts), and registers
//! afresh in step 1.

use std::error::Error;
use std::fmt;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use spargio::buf::{BufResult, IoBuf, IoBufMut};

use crate::owned_io::whole;

/// The two halves' task wakers, and the proxy waker built on them (module
/// docs, steps 1-4).
#[derive(Debug, Default)]
struct Wakers {
    read: Mutex<Option<Waker>>,
    write: Mutex<Option<Waker>>,
}

impl Wake for Wakers {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Taken under each slot's lock, woken after it is released: a
        // waker may run arbitrary code.
        let read = lock(&self.read).take();
        let write = lock(&self.write).take();
        if let Some(waker) = read {
            waker.wake();
        }
        if let Some(waker) = write {
            waker.wake();
        }
    }
}

/// A lock that a panic elsewhere does not make unusable: the slots hold a
/// waker or nothing, valid either way.
fn lock<T>(slot: &Mutex<T>) -> MutexGuard<'_, T> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Clone, Copy)]
enum Direction {
    Read,
    Write,
}

/// What the halves share.
struct Shared<S> {
    stream: Mutex<S>,
    wakers: Arc<Wakers>,
    /// `wakers` as a waker, built once.
    proxy: Waker,
}

impl<S: Unpin> Shared<S> {
    /// One poll of the stream for the half reading or writing (module docs).
    fn poll<T>(
        &self,
        direction: Direction,
        cx: &mut Context<'_>,
        f: impl FnOnce(Pin<&mut S>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        let slot = match direction {
            Direction::Read => &self.wakers.read,
            Direction::Write => &self.wakers.write,
        };
        // Step 1: before the poll.
        {
            let mut slot = lock(slot);
            if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *slot = Some(cx.waker().clone());
            }
        }
        // Step 2.
        let res = {
            let Ok(mut stream) = self.stream.lock() else {
                return Poll::Ready(Err(io::Error::other(
                    "the TLS stream's other half panicked in a poll",
                )));
            };
            let mut proxy_cx = Context::from_waker(&self.proxy);
            f(Pin::new(&mut *stream), &mut proxy_cx)
        };
        // Step 4.
        if res.is_ready() {
            *lock(slot) = None;
        }
        res
    }
}

/// Splits `stream`; see [`ClientTlsStream::split`](crate::ClientTlsStream::split).
pub(crate) fn split<S>(stream: S) -> (TlsReadHalf<S>, TlsWriteHalf<S>) {
    let wakers = Arc::new(Wakers::default());
    let shared = Arc::new(Shared {
        stream: Mutex::new(stream),
        proxy: Waker::from(wakers.clone()),
        wakers,
    });
    (
        TlsReadHalf {
            shared: shared.clone(),
        },
        TlsWriteHalf { shared },
    )
}

/// The reading half of a TLS stream, from
/// [`ClientTlsStream::split`](crate::ClientTlsStream::split) or
/// [`ServerTlsStream::split`](crate::ServerTlsStream::split).
///
/// Reads through spargio's owned-buffer [`AsyncRead`](spargio::io::AsyncRead)
/// and `futures_io::AsyncRead`, from its own task while the
/// [`TlsWriteHalf`] writes from another. It is `Send`, not `Clone`: one
/// reader, one order of bytes.
///
/// # How the halves share one session
///
/// rustls has one session for both directions, so the halves share the
/// stream behind a lock held for the duration of one poll, never across a
/// wait: a read pending on the socket releases it, and does not hold up a
/// write (nor a write waiting for socket room a read).
///
/// Each half keeps its task's waker in a slot of its own, and both poll
/// the stream with one proxy waker that wakes both slots. The operations
/// under the stream remember one waker each, and the send in flight can be
/// polled by either half (a write flushes it; a read that fails sends an
/// alert through it): with each half's own waker, the later poll would
/// replace the earlier's, and that task would never be woken. A half whose
/// poll completed empties its slot, so only a waiting half is woken, at
/// worst once for the other half's event.
pub struct TlsReadHalf<S> {
    shared: Arc<Shared<S>>,
}

/// The writing half of a TLS stream (see [`TlsReadHalf`]).
///
/// Writes through spargio's owned-buffer [`AsyncWrite`](spargio::io::AsyncWrite)
/// and `futures_io::AsyncWrite`. `shutdown` / `close` sends TLS
/// `close_notify`, then shuts down the TCP write direction; dropping the
/// half sends nothing (there is no async drop), so shut it down for the
/// peer to see a clean end of stream.
pub struct TlsWriteHalf<S> {
    shared: Arc<Shared<S>>,
}

// ===== impl TlsReadHalf =====

impl<S> TlsReadHalf<S> {
    /// True when `other` came from the same `split` call.
    pub fn is_pair_of(&self, other: &TlsWriteHalf<S>) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Puts the halves back together; an error holding both if they came
    /// from different splits.
    pub fn reunite(self, other: TlsWriteHalf<S>) -> Result<S, TlsReuniteError<S>> {
        if !self.is_pair_of(&other) {
            return Err(TlsReuniteError(self, other));
        }
        drop(other);
        let shared = Arc::into_inner(self.shared).expect("the pair holds the only references");
        Ok(shared
            .stream
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner))
    }
}

impl<S> fmt::Debug for TlsReadHalf<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsReadHalf").finish_non_exhaustive()
    }
}

impl<S: futures_io::AsyncRead + Unpin> futures_io::AsyncRead for TlsReadHalf<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        self.shared
            .poll(Direction::Read, cx, |s, cx| s.poll_read(cx, buf))
    }
}

impl<S: futures_io::AsyncRead + Unpin + Send> spargio::io::AsyncRead for TlsReadHalf<S> {
    async fn read<B: IoBufMut>(&mut self, mut buf: B) -> BufResult<usize, B> {
        let res = {
            let out = &mut buf;
            poll_fn(|cx| futures_io::AsyncRead::poll_read(Pin::new(&mut *self), cx, whole(out)))
                .await
        };
        if let Ok(n) = res {
            // SAFETY: the read wrote (and `whole` zeroed, so initialized)
            // the first `n <= bytes_total` bytes.
            unsafe { buf.set_init(n) };
        }
        (res, buf)
    }
}

// ===== impl TlsWriteHalf =====

impl<S> TlsWriteHalf<S> {
    /// True when `other` came from the same `split` call.
    pub fn is_pair_of(&self, other: &TlsReadHalf<S>) -> bool {
        other.is_pair_of(self)
    }

    /// [`TlsReadHalf::reunite`] from this side.
    pub fn reunite(self, other: TlsReadHalf<S>) -> Result<S, TlsReuniteError<S>> {
        other.reunite(self)
    }
}

impl<S> fmt::Debug for TlsWriteHalf<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsWriteHalf").finish_non_exhaustive()
    }
}

impl<S: futures_io::AsyncWrite + Unpin> futures_io::AsyncWrite for TlsWriteHalf<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.shared
            .poll(Direction::Write, cx, |s, cx| s.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.shared.poll(Direction::Write, cx, |s, cx| {
            s.poll_write_vectored(cx, bufs)
        })
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.shared
            .poll(Direction::Write, cx, |s, cx| s.poll_flush(cx))
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.shared
            .poll(Direction::Write, cx, |s, cx| s.poll_close(cx))
    }
}

impl<S: futures_io::AsyncWrite + Unpin + Send> spargio::io::AsyncWrite for TlsWriteHalf<S> {
    async fn write<B: IoBuf>(&mut self, mut buf: B) -> BufResult<usize, B> {
        let res = {
            // Moved in as `&mut` (not borrowed as `&`): the future stays
            // `Send` for a `B` that is `Send` but not `Sync`.
            let (this, data) = (&mut *self, &mut buf);
            poll_fn(move |cx| {
                futures_io::AsyncWrite::poll_write(Pin::new(&mut *this), cx, data.as_init_slice())
            })
            .await
        };
        (res, buf)
    }

    async fn flush(&mut self) -> io::Result<()> {
        poll_fn(|cx| futures_io::AsyncWrite::poll_flush(Pin::new(&mut *self), cx)).await
    }

    async fn shutdown(&mut self) -> io::Result<()> {
        poll_fn(|cx| futures_io::AsyncWrite::poll_close(Pin::new(&mut *self), cx)).await
    }
}

// ===== impl TlsReuniteError =====

/// Halves from different `split` calls, handed back unchanged.
pub struct TlsReuniteError<S>(pub TlsReadHalf<S>, pub TlsWriteHalf<S>);

impl<S> fmt::Debug for TlsReuniteError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TlsReuniteError")
            .field(&self.0)
            .field(&self.1)
            .finish()
    }
}

impl<S> fmt::Display for TlsReuniteError<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tried to reunite halves of different TLS streams")
    }
}

impl<S> Error for TlsReuniteError<S> {}
