//! Cancel-safe stream receives: bytes an abandoned receive took from the
//! socket go to the stream's next receive.
//!
//! On a readiness runtime a receive that is dropped took nothing: the bytes
//! stay in the socket. On a ring the kernel may complete a receive at any
//! moment until its cancel is processed, and that cancel is asynchronous:
//! it waits for the next enter, or crosses to the stream's session shard
//! when the future was dropped elsewhere. A `timeout` around a receive, or
//! a `select!` whose other branch won, would then lose the bytes the
//! receive took. So every stream receive is carried:
//!
//! * Its future's drop, before handing the operation to the op table,
//!   counts it in its fd's [`Carry`] as *unsettled* ([`Carry::abandon`]).
//! * When its final completion is reaped (data, `ECANCELED`, shutdown),
//!   the reclaim appends what it received to the carry and settles it
//!   ([`Carry::settle`]); the last one to settle wakes the receives that
//!   waited for it.
//! * A new receive on the stream first waits until no abandoned receive
//!   is unsettled (one in flight could still take bytes that came before
//!   the new one's), then takes carried bytes before asking the kernel.
//!
//! * An error an abandoned receive ended with (a reset, say) is the
//!   socket's, reported once: it is carried too, and handed out after the
//!   carried bytes. Cancellation and a pool running dry are the runtime's
//!   own doing and are not carried.
//!
//! Every stream receive goes through [`Carry::poll_take`] (one place:
//! `recv_owned`, `Compat`'s read, multishot segments), and every abandoned
//! stream receive, one-shot or multishot, feeds the carry: a segments
//! stream or a `Compat` dropped with bytes received and not handed out
//! leaves them there too.
//!
//! Nothing is paid until a receive on the fd is first abandoned: the carry
//! is made then (one allocation), and after it each receive checks one
//! atomic flag while the carry is empty and settled. The carry holds at
//! most what the abandoned receives' buffers (and a dropped reader's
//! unread bytes) could hold.

use std::collections::VecDeque;
use std::io;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use crate::buf::IoBufMut;

/// One stream's carried bytes and unsettled abandoned receives.
#[derive(Debug, Default)]
pub(crate) struct Carry {
    /// True while nothing is carried and nothing is unsettled: the
    /// receive's fast path. Written under `state`'s lock.
    quiet: AtomicBool,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    unsettled: usize,
    bytes: VecDeque<u8>,
    /// The error an abandoned receive ended with, handed out after
    /// `bytes`.
    error: Option<io::Error>,
    /// Receives waiting for `unsettled` to reach 0 (one per waiting task:
    /// a task re-polling replaces nothing, see `poll_settled`).
    waiters: Vec<Waker>,
}

impl Carry {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Nothing foreign runs under the lock: a poisoned one is whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// True when receives may go straight to the kernel.
    pub(crate) fn is_quiet(&self) -> bool {
        self.quiet.load(Ordering::Acquire)
    }

    /// A receive on this fd is being abandoned with its operation in
    /// flight: one more to settle.
    pub(crate) fn abandon(&self) {
        let mut s = self.lock();
        s.unsettled += 1;
        self.quiet.store(false, Ordering::Release);
    }

    /// An abandoned receive's final outcome: `got` is what it received
    /// (empty when it was cancelled or failed).
    pub(crate) fn settle(&self, got: &[u8]) {
        wake_all(self.settle_deferred(got));
    }

    /// [`Carry::settle`], handing back the wakers to call (for callers
    /// under a lock that must not run foreign code).
    #[must_use]
    pub(crate) fn settle_deferred(&self, got: &[u8]) -> Vec<Waker> {
        let mut s = self.lock();
        s.bytes.extend(got);
        s.unsettled -= 1;
        if s.unsettled > 0 {
            return Vec::new();
        }
        if s.bytes.is_empty() && s.error.is_none() {
            self.quiet.store(true, Ordering::Release);
        }
        std::mem::take(&mut s.waiters)
    }

    /// Bytes an abandoned receive got, before it settles (a multishot
    /// receive's completions arrive one by one).
    pub(crate) fn append(&self, got: &[u8]) {
        self.lock().bytes.extend(got);
    }

    /// The error an abandoned receive ended with, if it is the socket's
    /// (module docs): kept for the next receive. A second one is dropped
    /// (the kernel reports a socket's error once).
    pub(crate) fn fail(&self, err: io::Error) {
        if is_carried(&err) {
            self.fail_with(err);
        }
    }

    /// Carries `err` whatever it is (the runtime lost what an abandoned
    /// receive took: the stream must fail, not wait or skip bytes).
    pub(crate) fn fail_with(&self, err: io::Error) {
        let mut s = self.lock();
        if s.error.is_none() {
            s.error = Some(err);
            self.quiet.store(false, Ordering::Release);
        }
    }

    /// Ready once no abandoned receive is unsettled.
    pub(crate) fn poll_settled(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.lock();
        if s.unsettled == 0 {
            return Poll::Ready(());
        }
        if !s.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            s.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// What every stream receive does first (module docs): waits until
    /// no abandoned receive is unsettled, then moves carried bytes into
    /// `out` (as many as fit, from its first byte) or hands out the
    /// carried error. `Ready(None)` when nothing is carried: receive from
    /// the kernel. On `Ready(Some(Ok(n)))` the first `n` bytes of `out`
    /// are initialized.
    pub(crate) fn poll_take(
        &self,
        cx: &mut Context<'_>,
        out: &mut [MaybeUninit<u8>],
    ) -> Poll<Option<io::Result<usize>>> {
        if self.is_quiet() {
            return Poll::Ready(None);
        }
        std::task::ready!(self.poll_settled(cx));
        Poll::Ready(self.take_into(out))
    }

    /// Everything carried, at once (for a reader that takes no slice):
    /// the bytes, then the error. Call once settled.
    pub(crate) fn take_all(&self) -> (Vec<u8>, Option<io::Error>) {
        let mut s = self.lock();
        let bytes = s.bytes.drain(..).collect();
        let err = s.error.take();
        if s.unsettled == 0 {
            self.quiet.store(true, Ordering::Release);
        }
        (bytes, err)
    }

    /// Moves carried bytes into `out`, or takes the carried error once
    /// the bytes are out; `None` when nothing is carried. Call once
    /// settled.
    fn take_into(&self, out: &mut [MaybeUninit<u8>]) -> Option<io::Result<usize>> {
        let mut s = self.lock();
        let res = if !s.bytes.is_empty() {
            let n = out.len().min(s.bytes.len());
            for (dst, b) in out.iter_mut().zip(s.bytes.drain(..n)) {
                dst.write(b);
            }
            Ok(n)
        } else {
            Err(s.error.take()?)
        };
        if s.bytes.is_empty() && s.error.is_none() && s.unsettled == 0 {
            self.quiet.store(true, Ordering::Release);
        }
        Some(res)
    }

    /// [`Carry::poll_take`] for an owned buffer, filled from its first
    /// byte as a receive fills it.
    pub(crate) fn poll_take_buf<B: IoBufMut>(
        &self,
        cx: &mut Context<'_>,
        buf: &mut B,
    ) -> Poll<Option<io::Result<usize>>> {
        let total = buf.bytes_total();
        let ptr = buf.stable_mut_ptr().cast::<MaybeUninit<u8>>();
        // SAFETY: `IoBufMut` makes `stable_mut_ptr` valid for writes of
        // `bytes_total` bytes, and `buf` is borrowed exclusively here.
        let out = unsafe { std::slice::from_raw_parts_mut(ptr, total) };
        let res = std::task::ready!(self.poll_take(cx, out));
        if let Some(Ok(n)) = res {
            // SAFETY: `poll_take` initialized the first `n <= total` bytes.
            unsafe { buf.set_init(n) };
        }
        Poll::Ready(res)
    }
}

/// Whether an abandoned receive's error is the socket's (carried) rather
/// than the runtime's (module docs).
fn is_carried(err: &io::Error) -> bool {
    match err.raw_os_error() {
        Some(errno) => !matches!(
            errno,
            libc::ECANCELED | libc::ENOBUFS | libc::EAGAIN | libc::EINTR
        ),
        // The runtime's own (shutting down): not the socket's.
        None => false,
    }
}

/// Calls each waker; a panicking one costs its own wake only.
pub(crate) fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        // Foreign code: a panicking waker costs its own wake only.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wake()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::MaybeUninit;
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(std::sync::atomic::AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn waits_for_every_abandoned_receive_then_hands_their_bytes_in_order() {
        let c = Carry::default();
        c.abandon();
        c.abandon();
        assert!(!c.is_quiet());
        let count = Arc::new(Count(Default::default()));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(c.poll_settled(&mut cx).is_pending());
        assert!(c.poll_settled(&mut cx).is_pending(), "one waker per task");
        c.settle(b"ab");
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "one still unsettled");
        c.settle(b"cde");
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(c.poll_settled(&mut cx).is_ready());
        let mut out = [MaybeUninit::new(0u8); 4];
        assert!(matches!(
            c.poll_take(&mut cx, &mut out),
            Poll::Ready(Some(Ok(4)))
        ));
        // SAFETY: `take_into` wrote all 4 bytes (it returned 4).
        assert_eq!(out.map(|b| unsafe { b.assume_init() }), *b"abcd");
        assert!(!c.is_quiet());
        let mut buf = Vec::with_capacity(8);
        assert!(matches!(
            c.poll_take_buf(&mut cx, &mut buf),
            Poll::Ready(Some(Ok(1)))
        ));
        assert_eq!(buf, b"e");
        assert!(c.is_quiet());
        assert!(matches!(c.poll_take(&mut cx, &mut out), Poll::Ready(None)));
    }

    #[test]
    fn the_sockets_error_is_carried_after_the_bytes_and_handed_out_once() {
        let c = Carry::default();
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        c.abandon();
        c.append(b"xy");
        c.fail(io::Error::from_raw_os_error(libc::ECONNRESET));
        c.fail(io::Error::from_raw_os_error(libc::EPIPE));
        c.settle(b"z");
        let mut out = [MaybeUninit::new(0u8); 8];
        assert!(matches!(
            c.poll_take(&mut cx, &mut out),
            Poll::Ready(Some(Ok(3)))
        ));
        match c.poll_take(&mut cx, &mut out) {
            Poll::Ready(Some(Err(e))) => assert_eq!(e.raw_os_error(), Some(libc::ECONNRESET)),
            _ => panic!("the reset was not carried"),
        }
        assert!(c.is_quiet());
        assert!(matches!(c.poll_take(&mut cx, &mut out), Poll::Ready(None)));
    }

    #[test]
    fn the_runtimes_own_errors_are_not_carried() {
        let c = Carry::default();
        c.abandon();
        c.fail(io::Error::from_raw_os_error(libc::ECANCELED));
        c.fail(io::Error::from_raw_os_error(libc::ENOBUFS));
        c.fail(io::Error::other("shutting down"));
        c.settle(&[]);
        assert!(c.is_quiet());
    }

    #[test]
    fn a_cancelled_receive_settles_with_nothing_carried() {
        let c = Carry::default();
        c.abandon();
        c.settle(&[]);
        assert!(c.is_quiet());
    }
}
