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
//! Nothing is paid until a receive on the fd is first abandoned: the carry
//! is made then (one allocation), and after it each receive checks one
//! atomic flag while the carry is empty and settled. The carry holds at
//! most what the abandoned receives' buffers could hold.

use std::collections::VecDeque;
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
        let waiters = {
            let mut s = self.lock();
            s.bytes.extend(got);
            s.unsettled -= 1;
            if s.unsettled > 0 {
                return;
            }
            if s.bytes.is_empty() {
                self.quiet.store(true, Ordering::Release);
            }
            std::mem::take(&mut s.waiters)
        };
        for w in waiters {
            // Foreign code: a panicking waker costs its own wake only.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.wake()));
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

    /// Waits until settled (see [`Carry::poll_settled`]).
    pub(crate) async fn settled(&self) {
        std::future::poll_fn(|cx| self.poll_settled(cx)).await
    }

    /// Moves carried bytes into `out` (as many as fit, from its first
    /// byte); the count, or `None` when nothing is carried. Call once
    /// settled.
    pub(crate) fn take_into(&self, out: &mut [std::mem::MaybeUninit<u8>]) -> Option<usize> {
        let mut s = self.lock();
        if s.bytes.is_empty() {
            return None;
        }
        let n = out.len().min(s.bytes.len());
        for (dst, b) in out.iter_mut().zip(s.bytes.drain(..n)) {
            dst.write(b);
        }
        if s.bytes.is_empty() && s.unsettled == 0 {
            self.quiet.store(true, Ordering::Release);
        }
        Some(n)
    }

    /// [`Carry::take_into`] for an owned buffer, filled from its first
    /// byte as a receive fills it.
    pub(crate) fn take_into_buf<B: IoBufMut>(&self, buf: &mut B) -> Option<usize> {
        let total = buf.bytes_total();
        let ptr = buf.stable_mut_ptr().cast::<std::mem::MaybeUninit<u8>>();
        // SAFETY: `IoBufMut` makes `stable_mut_ptr` valid for writes of
        // `bytes_total` bytes, and `buf` is borrowed exclusively here.
        let out = unsafe { std::slice::from_raw_parts_mut(ptr, total) };
        let n = self.take_into(out)?;
        // SAFETY: `take_into` initialized the first `n <= total` bytes.
        unsafe { buf.set_init(n) };
        Some(n)
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
        assert_eq!(c.take_into(&mut out), Some(4));
        // SAFETY: `take_into` wrote all 4 bytes (it returned 4).
        assert_eq!(out.map(|b| unsafe { b.assume_init() }), *b"abcd");
        assert!(!c.is_quiet());
        let mut buf = Vec::with_capacity(8);
        assert_eq!(c.take_into_buf(&mut buf), Some(1));
        assert_eq!(buf, b"e");
        assert!(c.is_quiet());
        assert_eq!(c.take_into(&mut out), None);
    }

    #[test]
    fn a_cancelled_receive_settles_with_nothing_carried() {
        let c = Carry::default();
        c.abandon();
        c.settle(&[]);
        assert!(c.is_quiet());
    }
}
