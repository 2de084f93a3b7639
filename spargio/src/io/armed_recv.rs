//! The receive a [`Compat`](super::Compat) keeps armed between reads: one
//! multishot receive into the session shard's shared buffer pool
//! (`buf/ring.rs`, `shard_pool`).
//!
//! A connection that waits for its next request holds no buffer of its
//! own and costs no submission per request: the kernel's poll stays armed
//! from one request to the next, and each arrival is one completion
//! naming the pool buffer it filled. A read copies the bytes out and gives
//! the buffer back at once, so a pool buffer is held only between a
//! completion and the next read of its connection.
//!
//! Bounds: at most [`QUEUE_LIMIT`] completions wait unread per connection
//! (then the runtime pauses the receive and the bytes wait in the socket);
//! when the pool runs dry the kernel ends the receive with `ENOBUFS`. In
//! both cases the reader sees the receive end ([`ArmedRecv::poll_read`]
//! returns `None`) and goes on with a receive of its own: nothing is lost,
//! and one slow connection cannot starve the others.
//!
//! Linux's multishot receive can miss a reset that follows data and then
//! never complete (`net/segments.rs` has the figures). So on io_uring a
//! connection whose reads arm a receive also gets a hangup [`Watch`], a
//! one-shot `POLLRDHUP` poll, armed with its first armed receive and kept
//! across re-arms (re-arming it with each receive cost 20% more CPU per
//! request at 4,000 connections, where receives end and re-arm often).
//! When it fires, the armed receive is cancelled and no other is armed:
//! the reader goes on with receives of its own, which read the rest and
//! the end at once.

use std::io;
use std::mem::MaybeUninit;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::buf::ring::{BufRing, SHARD_POOL_STEP};
use crate::net::stream::StreamCore;
use crate::op::recv_multi::{HangupWatch, RecvMulti};
use crate::op::{Lane, MultiOp};

/// Unread completions one connection may hold pool buffers with.
pub(super) const QUEUE_LIMIT: usize = 8;

/// Arm only while at least this many pool buffers are free (the pool
/// grows first when it can): below it the pool is nearly dry, and a
/// receive of the connection's own does better than a multishot receive
/// the kernel would end at once.
const MIN_FREE: usize = 16;

/// One connection's hangup watch (module docs).
pub(super) struct Watch {
    /// None where no watch is needed (`HangupWatch::needed`).
    op: Option<MultiOp<HangupWatch>>,
    fired: bool,
}

impl Watch {
    fn new(core: &StreamCore) -> Watch {
        let shared = &core.handle.shared;
        let op = HangupWatch::needed(shared).then(|| {
            MultiOp::submit(
                shared,
                Lane::Shard(core.session),
                HangupWatch {
                    fd: core.fd.clone(),
                },
            )
        });
        Watch { op, fired: false }
    }

    /// Whether its poll holds a clone of the stream's fd.
    pub(super) fn holds_fd(&self) -> bool {
        self.op.is_some()
    }

    /// True once the peer closed, shut down its side or reset (or the
    /// watch could not be armed); until then `cx` is woken when it does.
    fn poll_fired(&mut self, cx: &mut Context<'_>) -> bool {
        if let Some(op) = self.op.as_mut().filter(|_| !self.fired) {
            self.fired = op.poll_next(cx).is_ready();
        }
        self.fired
    }
}

/// A multishot receive in flight on the shard pool (module docs).
pub(super) struct ArmedRecv {
    op: MultiOp<RecvMulti>,
    /// The watch fired and this receive was cancelled for it.
    cancelled: bool,
    pool: Arc<BufRing>,
    /// A pool buffer handed out and not yet copied in full:
    /// `(bid, start, end)`.
    held: Option<(u16, u32, u32)>,
    /// An error that ended the receive after bytes were returned; the
    /// next read reports it.
    failed: Option<io::Error>,
}

impl ArmedRecv {
    /// Arms a receive on `core`'s socket, found empty just now; `None`
    /// off the session shard, when its pool is (nearly) dry, or once the
    /// connection's `watch` (made here with the first receive) fired.
    pub(super) fn arm(core: &StreamCore, watch: &mut Option<Box<Watch>>) -> Option<ArmedRecv> {
        if watch.as_ref().is_some_and(|w| w.fired) {
            return None;
        }
        let shared = &core.handle.shared;
        let pool = crate::buf::ring::shard_pool(shared, core.session)?;
        if pool.is_dry() || (pool.available() < MIN_FREE && !pool.grow(SHARD_POOL_STEP)) {
            return None;
        }
        // Not poll-first, though the socket was just found empty (one
        // `EAGAIN` in the kernel per arm, not per request): armed
        // poll-first, the kernel loses nearly every reset that follows
        // data (module docs), and the watch would have to end each one.
        let op = MultiOp::submit(
            shared,
            Lane::Shard(core.session),
            // Carried only when its reader hands it on (`hand_on`).
            RecvMulti::new(core.fd.clone(), pool.clone(), QUEUE_LIMIT, false),
        );
        if watch.is_none() {
            *watch = Some(Box::new(Watch::new(core)));
        }
        Some(ArmedRecv {
            op,
            cancelled: false,
            pool,
            held: None,
            failed: None,
        })
    }

    /// Copies what has arrived into `out` (not empty): `Some(Ok(n))` with
    /// `n > 0`, `Some(Ok(0))` at end of stream, `Some(Err(_))` for the
    /// socket's error, `None` once the receive has ended otherwise (out of
    /// buffers, paused, refused): the caller receives on its own then.
    pub(super) fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        out: &mut [MaybeUninit<u8>],
        watch: &mut Watch,
    ) -> Poll<Option<io::Result<usize>>> {
        let mut n = 0;
        loop {
            if let Some((bid, start, end)) = self.held {
                let take = (out.len() - n).min((end - start) as usize);
                // SAFETY: this value holds `bid` (a completion handed it out,
                // it is recycled only below or on drop) and the kernel wrote
                // `end` bytes into it.
                let src = unsafe { self.pool.bytes(bid, end as usize) };
                let src = &src[start as usize..start as usize + take];
                // SAFETY: `src` and `out[n..n + take]` are `take` bytes each,
                // and distinct (the pool's, the caller's).
                unsafe {
                    std::ptr::copy_nonoverlapping(src.as_ptr(), out[n..].as_mut_ptr().cast(), take)
                };
                n += take;
                let start = start + take as u32;
                if start == end {
                    self.held = None;
                    self.pool.recycle(bid);
                } else {
                    self.held = Some((bid, start, end));
                }
                if n == out.len() {
                    return Poll::Ready(Some(Ok(n)));
                }
            }
            if n == 0 {
                if let Some(err) = self.failed.take() {
                    return Poll::Ready(Some(Err(err)));
                }
            }
            if !self.cancelled && watch.poll_fired(cx) {
                // End the receive; its `ECANCELED` sends the reader to a
                // receive of its own.
                self.cancelled = true;
                self.op.cancel();
            }
            let done = match self.op.poll_next(cx) {
                // What arrived so far; the waker stays registered.
                Poll::Pending if n > 0 => return Poll::Ready(Some(Ok(n))),
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready((n > 0).then_some(Ok(n))),
                Poll::Ready(Some(done)) => done,
            };
            let bid = io_uring::cqueue::buffer_select(done.flags);
            if let Some(bid) = bid {
                self.pool.take(bid);
            }
            match (done.result, bid) {
                (Ok(len), Some(bid)) if len > 0 => self.held = Some((bid, 0, len)),
                (res, bid) => {
                    if let Some(bid) = bid {
                        self.pool.recycle(bid);
                    }
                    match res {
                        // End of stream (it ended the receive too).
                        Ok(0) => return Poll::Ready(Some(Ok(n))),
                        Ok(_) => {
                            let err =
                                io::Error::other("multishot receive completed without a buffer");
                            if n > 0 {
                                self.failed = Some(err);
                                return Poll::Ready(Some(Ok(n)));
                            }
                            return Poll::Ready(Some(Err(err)));
                        }
                        // Out of buffers, or cancelled: the bytes wait in
                        // the socket for the caller's own receive. A pool
                        // that ran dry grows for the next arrivals.
                        Err(err)
                            if matches!(
                                err.raw_os_error(),
                                Some(libc::ENOBUFS) | Some(libc::ECANCELED)
                            ) =>
                        {
                            if err.raw_os_error() == Some(libc::ENOBUFS)
                                && !self.pool.grow(SHARD_POOL_STEP)
                            {
                                self.pool.mark_dry();
                            }
                            return Poll::Ready((n > 0).then_some(Ok(n)));
                        }
                        Err(err) if n > 0 => {
                            self.failed = Some(err);
                            return Poll::Ready(Some(Ok(n)));
                        }
                        Err(err) => return Poll::Ready(Some(Err(err))),
                    }
                }
            }
        }
    }
}

impl ArmedRecv {
    /// Its reader is going, and the stream may be read after it: the
    /// bytes it holds and its error go to `carry` (counted unsettled by
    /// the caller), then, once dropped, what it received unread and
    /// receives until its cancel lands (`op/carry.rs`).
    pub(super) fn hand_on(mut self, carry: &crate::op::carry::Carry) {
        if let Some((bid, start, end)) = self.held.take() {
            // SAFETY: this value holds `bid` (handed out by a completion,
            // recycled only here or on drop); the kernel wrote `end` bytes.
            let bytes = unsafe { self.pool.bytes(bid, end as usize) };
            carry.append(&bytes[start as usize..]);
            self.pool.recycle(bid);
        }
        if let Some(err) = self.failed.take() {
            carry.fail(err);
        }
        self.op.kind_mut().carry = true;
    }
}

impl Drop for ArmedRecv {
    fn drop(&mut self) {
        // Completions still queued, or still to come, go to the op's
        // discard hook, which gives their buffers back.
        if let Some((bid, _, _)) = self.held.take() {
            self.pool.recycle(bid);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::pin::Pin;
    use std::task::{Context, Waker};
    use std::time::Duration;

    use futures_io::AsyncRead;

    use crate::buf::ring::shard_pool;
    use crate::io::Compat;
    use crate::net::UnixStream;
    use crate::scheduler::context;

    #[test]
    fn dropped_readers_give_every_pool_buffer_back() {
        crate::block_on(crate::run(|handle| async move {
            let shard = context::current_shard(&handle.shared).expect("on a shard");
            let mut readers = Vec::new();
            let mut peers = Vec::new();
            for _ in 0..16 {
                let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
                let mut a = crate::io::Compat::new(UnixStream::from_std(&handle, a).unwrap());
                // A read that finds nothing arms the pool's receive.
                assert!(Pin::new(&mut a)
                    .poll_read(&mut Context::from_waker(Waker::noop()), &mut [0u8; 8])
                    .is_pending());
                assert!(a.armed.is_some());
                readers.push(a);
                peers.push(b);
            }
            for b in &mut peers {
                for _ in 0..3 {
                    b.write_all(b"0123456789").unwrap();
                    crate::time::sleep(Duration::from_millis(1)).await;
                }
            }
            crate::time::sleep(Duration::from_millis(20)).await;
            // One reader takes a byte: the rest of its buffer is held.
            let mut one = [0u8; 1];
            let first: &mut Compat<UnixStream> = &mut readers[0];
            assert!(Pin::new(first)
                .poll_read(&mut Context::from_waker(Waker::noop()), &mut one)
                .is_ready());
            let pool = shard_pool(&handle.shared, shard).expect("registered");
            let free = usize::from(pool.provided());
            assert!(pool.available() < free, "the arrivals hold pool buffers");
            drop(readers);
            crate::time::sleep(Duration::from_millis(20)).await;
            assert_eq!(pool.available(), free, "every buffer came back");
        }))
        .unwrap();
    }

    #[test]
    fn a_pool_starts_small_and_grows_to_its_bound() {
        crate::block_on(crate::run(|handle| async move {
            let shard = context::current_shard(&handle.shared).expect("on a shard");
            let pool =
                crate::buf::ring::BufRing::register_with(&handle.shared, shard, 8, 64, 2).unwrap();
            assert_eq!((pool.provided(), pool.available()), (2, 2));
            assert!(pool.grow(3));
            assert_eq!((pool.provided(), pool.available()), (5, 5));
            assert!(pool.grow(100));
            assert_eq!((pool.provided(), pool.available()), (8, 8));
            assert!(!pool.grow(1), "every buffer was given");
        }))
        .unwrap();
    }

    /// Raises the soft fd limit to at least `want` where the hard one
    /// allows; false if it cannot.
    fn fd_limit_at_least(want: u64) -> bool {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit on a local struct.
        unsafe {
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
            if lim.rlim_cur < want && lim.rlim_max >= want {
                lim.rlim_cur = want;
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
        lim.rlim_cur >= want
    }

    #[test]
    fn a_read_on_a_dry_pool_waits_instead_of_spinning() {
        // Every pool buffer holds an arrival nobody has read yet; the
        // pool cannot grow. A read on an empty socket then arms a receive
        // the kernel (or the epoll backend, which has no poll-first) ends
        // at once for want of a buffer; it must fall back to a receive of
        // its own and wait, not arm again and again inside one poll (which
        // held its shard for ever: the other connections' arrivals were
        // never read, so no buffer ever came back).
        let hogs = usize::from(crate::buf::ring::SHARD_POOL_BUFFERS);
        assert!(
            fd_limit_at_least(2 * hogs as u64 + 256),
            "needs {} fds",
            2 * hogs + 256
        );
        for backend in [crate::BackendKind::Epoll, crate::BackendKind::IoUring] {
            if backend == crate::BackendKind::IoUring && crate::probe_io_uring().is_err() {
                continue;
            }
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let builder = crate::RuntimeBuilder::new().shards(1).backend(backend);
                let out = crate::block_on(crate::run_with(builder, move |handle| async move {
                    let shard = context::current_shard(&handle.shared).expect("on a shard");
                    let pool = shard_pool(&handle.shared, shard).expect("registered");
                    while pool.grow(crate::buf::ring::SHARD_POOL_STEP) {}
                    let mut readers = Vec::new();
                    let mut peers = Vec::new();
                    for _ in 0..hogs {
                        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
                        let mut a = Compat::new(UnixStream::from_std(&handle, a).unwrap());
                        let mut one = [0u8; 1];
                        let waker = Waker::noop();
                        assert!(Pin::new(&mut a)
                            .poll_read(&mut Context::from_waker(waker), &mut one)
                            .is_pending());
                        readers.push(a);
                        peers.push(b);
                    }
                    for b in &mut peers {
                        b.write_all(b"x").unwrap();
                    }
                    // The arrivals land in the pool, unread.
                    crate::time::sleep(Duration::from_millis(50)).await;
                    let (a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
                    let mut probe = Compat::new(UnixStream::from_std(&handle, a).unwrap());
                    let mut got = [0u8; 8];
                    let first = Pin::new(&mut probe)
                        .poll_read(&mut Context::from_waker(Waker::noop()), &mut got);
                    assert!(first.is_pending(), "nothing was sent to the probe");
                    b.write_all(b"probe").unwrap();
                    let n = std::future::poll_fn(|cx| Pin::new(&mut probe).poll_read(cx, &mut got))
                        .await
                        .unwrap();
                    assert_eq!(&got[..n], b"probe");
                    drop(readers);
                }));
                let _ = tx.send(out.map_err(|e| e.to_string()));
            });
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(res) => res.unwrap(),
                Err(_) => panic!("{backend:?}: the probe's read never came back (a shard held by a spinning poll?)"),
            }
        }
    }
}
