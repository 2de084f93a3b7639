//! The subscribers, the wait on the ring, and the fan-out.
//!
//! The handler (`handler.rs`) records which signals arrived; this module
//! hands them out. There is no reader thread and no reader task:
//!
//! 1. A `recv` whose queue is empty first takes what the handler recorded
//!    ([`hand_out`]) and queues each signal for every subscriber whose set
//!    holds it.
//! 2. If that gave it nothing, it puts one `IORING_OP_READ` of the
//!    handler's eventfd in flight on its own runtime's ring ([`wait`]); on
//!    the epoll backend the runtime waits for the eventfd to be readable.
//!    A waiting subscriber costs one pending operation, no thread and no
//!    CPU.
//! 3. The read's decoder, which the runtime runs on the completion even if
//!    the `recv` was dropped meanwhile, hands out again (step 1). One
//!    handler write completes one read (reading an eventfd resets it), so
//!    a read that took the count must hand out for every subscriber: it
//!    does, whoever issued it, and each subscriber woken finds its signal
//!    queued and drops its own read.
//!
//! A new subscription starts after a hand-out, under the same lock: what
//! arrived before it goes to the subscribers that existed then, and an
//! arrival nobody subscribes to any more is dropped.
//!
//! Each subscriber's queue is bounded: it holds a signal kind at most once,
//! in arrival order, as the kernel itself coalesces a standard signal that
//! is already pending. A subscriber that does not read sees each kind once,
//! never a growing backlog.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Waker;

use spargio::extension::io_uring::{opcode, types};
use spargio::RuntimeHandle;

use crate::disposition::Dispositions;
use crate::handler;
use crate::set::SignalSet;

/// One subscriber's pending signals and its waiting task.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    state: Mutex<QueueState>,
}

#[derive(Debug, Default)]
struct QueueState {
    /// Each kind at most once, oldest first.
    pending: VecDeque<i32>,
    waker: Option<Waker>,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // No user code runs under this lock: poisoning cannot leave it
        // inconsistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the oldest pending signal that `matches` accepts, leaving the
    /// others queued; registers `waker` when there is none.
    pub(crate) fn take(
        &self,
        mut matches: impl FnMut(i32) -> bool,
        waker: Option<&Waker>,
    ) -> Option<i32> {
        let mut state = self.lock();
        if let Some(i) = state.pending.iter().position(|&s| matches(s)) {
            return state.pending.remove(i);
        }
        if let Some(w) = waker {
            match &state.waker {
                Some(old) if old.will_wake(w) => {}
                _ => state.waker = Some(w.clone()),
            }
        }
        None
    }

    /// Queues `sig` unless it is already pending; returns the waker to call.
    fn push(&self, sig: i32) -> Option<Waker> {
        let mut state = self.lock();
        if !state.pending.contains(&sig) {
            state.pending.push_back(sig);
        }
        state.waker.take()
    }
}

/// A subscriber as the source sees it.
#[derive(Debug)]
struct Subscriber {
    set: SignalSet,
    queue: Weak<Queue>,
}

struct Source {
    subscribers: Vec<Subscriber>,
    dispositions: Dispositions,
}

static SOURCE: Mutex<Source> = Mutex::new(Source {
    subscribers: Vec::new(),
    dispositions: Dispositions::new(),
});

fn source() -> MutexGuard<'static, Source> {
    // Only libc calls and Vec edits run under it: a poisoned lock still
    // guards consistent data.
    SOURCE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Registers a subscriber for `set` (installing the handler for the
/// signals nobody held yet) and returns its queue.
pub(crate) fn subscribe(set: SignalSet) -> io::Result<Arc<Queue>> {
    let mut src = source();
    let wakers = take_and_queue(&src);
    let acquired = src.dispositions.acquire(set);
    let queue = Arc::new(Queue::default());
    if acquired.is_ok() {
        src.subscribers.retain(|s| s.queue.strong_count() > 0);
        src.subscribers.push(Subscriber {
            set,
            queue: Arc::downgrade(&queue),
        });
    }
    drop(src);
    wake_all(wakers);
    acquired.map(|()| queue)
}

/// Ends a subscription made by [`subscribe`]. Signals it had not received
/// are dropped with it; the last subscription to a signal gives the
/// signal back its previous action (`disposition.rs`).
pub(crate) fn unsubscribe(set: SignalSet, queue: &Arc<Queue>) {
    let mut src = source();
    let me = Arc::downgrade(queue);
    if let Some(i) = src.subscribers.iter().position(|s| s.queue.ptr_eq(&me)) {
        src.subscribers.swap_remove(i);
    }
    src.dispositions.release(set);
}

/// Step 1 of the module docs: queues what the handler recorded for the
/// subscribers and wakes them.
pub(crate) fn hand_out() {
    let wakers = take_and_queue(&source());
    wake_all(wakers);
}

/// Step 2 of the module docs: a read of the eventfd on `handle`'s runtime,
/// which completes once the handler wrote to it and then hands out
/// (step 3).
pub(crate) fn wait(
    handle: &RuntimeHandle,
) -> io::Result<impl Future<Output = io::Result<()>> + Send + 'static> {
    let fd = handler::wake_fd()?;
    let native = handle.uring_native_unbound();
    // SAFETY: the SQE names the 8-byte buffer in the Box (its heap memory
    // does not move with the Box), the runtime holds the Box until READ's
    // one completion and `decode` is the first to look at it; `fd` is the
    // handler's eventfd, which is never closed (`handler.rs`).
    let fut = unsafe {
        native.submit_unsafe(
            Box::new([0u8; 8]),
            move |buf| {
                opcode::Read::new(types::Fd(fd), buf.as_mut_ptr(), 8)
                    .offset(u64::MAX)
                    .build()
            },
            |cqe, _buf| {
                let res = cqe?.result;
                hand_out();
                if res < 0 {
                    return Err(io::Error::from_raw_os_error(-res));
                }
                Ok(())
            },
        )
    };
    Ok(fut)
}

/// Takes what the handler recorded and queues each signal for every
/// subscriber of `src` whose set holds it; returns the wakers to call once
/// `src` is unlocked (one per queue that got something).
fn take_and_queue(src: &Source) -> Vec<Waker> {
    let mut wakers = Vec::new();
    for sig in handler::take_arrived().iter() {
        for queue in src
            .subscribers
            .iter()
            .filter(|s| s.set.contains(sig))
            .filter_map(|s| s.queue.upgrade())
        {
            if let Some(w) = queue.push(sig) {
                wakers.push(w);
            }
        }
    }
    wakers
}

/// Wakes each under its own `catch_unwind`: a panicking waker costs only
/// its own wake.
fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        let _ = catch_unwind(AssertUnwindSafe(|| w.wake()));
    }
}
