//! The process's signalfd, its reads through the ring, and the fan-out.
//!
//! One signalfd serves the whole process: a signal is consumed by whichever
//! read takes it, so two descriptors for one signal would split its
//! deliveries. Its mask is the union of the subscribed signals
//! (`mask.rs`).
//!
//! There is no reader thread and no reader task. Every `recv` that finds
//! its queue empty puts one `IORING_OP_READ` of the signalfd in flight on
//! its own runtime's ring. The operation's decoder (which the runtime runs
//! on the final completion even if the `recv` was dropped meanwhile) hands
//! each record it read to every subscriber whose set holds that signal,
//! then wakes them. So no signal a read took can be lost to a cancelled
//! `recv`, and subscribers on different runtimes share one source.
//!
//! Each subscriber's queue is bounded: it holds a signal kind at most once,
//! in arrival order, as the kernel itself coalesces a standard signal that
//! is already pending. A subscriber that does not read sees each kind once,
//! never a growing backlog.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::Waker;

use spargio::extension::io_uring::{opcode, types};
use spargio::RuntimeHandle;

use crate::mask::{self, SignalSet};

/// Records read at once (128 bytes each).
const BATCH: usize = 16;

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
    /// The signalfd; `None` until the first subscription.
    fd: Option<Arc<OwnedFd>>,
    subscribers: Vec<Subscriber>,
}

static SOURCE: Mutex<Source> = Mutex::new(Source {
    fd: None,
    subscribers: Vec::new(),
});

fn source() -> MutexGuard<'static, Source> {
    // Only libc calls and Vec edits run under it.
    SOURCE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Registers a subscriber for `set` (blocking and forwarding its signals)
/// and returns its queue.
pub(crate) fn subscribe(set: SignalSet) -> io::Result<Arc<Queue>> {
    let mut src = source();
    mask::acquire(set)?;
    if let Err(err) = update_fd(&mut src) {
        mask::release(set);
        return Err(err);
    }
    let queue = Arc::new(Queue::default());
    src.subscribers.retain(|s| s.queue.strong_count() > 0);
    src.subscribers.push(Subscriber {
        set,
        queue: Arc::downgrade(&queue),
    });
    Ok(queue)
}

/// Ends a subscription made by [`subscribe`].
pub(crate) fn unsubscribe(set: SignalSet, queue: &Arc<Queue>) {
    let mut src = source();
    let me = Arc::downgrade(queue);
    if let Some(i) = src.subscribers.iter().position(|s| s.queue.ptr_eq(&me)) {
        src.subscribers.swap_remove(i);
    }
    // A signal that arrived while subscribed but was not read yet belongs
    // to the subscription: take it now (the remaining subscribers get what
    // is theirs), or restoring the old disposition below would hand it to
    // that (for most signals, the default action ends the process).
    let wakers = drain(&src);
    // The fd's mask drops the signal before its disposition comes back:
    // between the two, a signal stays pending rather than hitting the old
    // handler twice.
    mask::release(set);
    let _ = update_fd(&mut src);
    drop(src);
    wake_all(wakers);
}

/// Creates the signalfd, or sets its mask to what is subscribed now.
fn update_fd(src: &mut Source) -> io::Result<()> {
    let set = mask::subscribed().to_sigset();
    let current = src.fd.as_ref().map_or(-1, |fd| fd.as_raw_fd());
    // SAFETY: `set` is an initialized sigset; `current` is -1 (create) or
    // the signalfd this module owns, open for as long as `src.fd` holds it.
    let fd = unsafe { libc::signalfd(current, &set, libc::SFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    if src.fd.is_none() {
        // SAFETY: signalfd returned a new descriptor nobody else owns.
        src.fd = Some(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }));
    }
    Ok(())
}

/// Reads what the signalfd holds (waiting on the ring until it holds
/// something) and hands it to the subscribers. Returns how many records it
/// read.
pub(crate) async fn read(handle: &RuntimeHandle) -> io::Result<usize> {
    let Some(fd) = source().fd.clone() else {
        return Err(io::Error::other("no signal is subscribed to"));
    };
    let native = handle.uring_native_unbound();
    let state = (fd, Box::new([0u8; 128 * BATCH]));
    // `decode` runs even if this future is dropped, so a read record is
    // never lost.
    // SAFETY: the SQE names the buffer in `state.1` (a Box: its heap memory
    // does not move with `state`), `state.0` keeps the fd open, the runtime
    // holds `state` until READ's one completion, and `decode` looks first.
    let fut = unsafe {
        native.submit_unsafe(
            state,
            |(fd, buf)| {
                opcode::Read::new(
                    types::Fd(fd.as_raw_fd()),
                    buf.as_mut_ptr(),
                    buf.len() as u32,
                )
                .build()
            },
            |cqe, (_fd, buf)| {
                let res = cqe?.result;
                if res < 0 {
                    return Err(io::Error::from_raw_os_error(-res));
                }
                let records = res as usize / 128;
                for rec in buf.chunks_exact(128).take(records) {
                    deliver(signo(rec));
                }
                Ok(records)
            },
        )
    };
    fut.await
}

/// Reads what the signalfd holds right now without waiting and hands it to
/// the subscribers.
pub(crate) fn read_now() {
    let wakers = drain(&source());
    wake_all(wakers);
}

/// Reads the signalfd without waiting (`preadv2` with `RWF_NOWAIT`: the
/// descriptor itself stays blocking, which lets the ring's reads wait on
/// it) until it is empty, queues each record for its subscribers, and
/// returns the wakers to call once `src` is unlocked.
fn drain(src: &Source) -> Vec<Waker> {
    let mut wakers = Vec::new();
    let Some(fd) = src.fd.as_ref() else {
        return wakers;
    };
    let mut buf = [0u8; 128 * BATCH];
    loop {
        let iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        // SAFETY: one iovec over `buf`, which outlives the call; `fd` is
        // open while `src` (locked by the caller) holds it.
        let n = unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, -1, libc::RWF_NOWAIT) };
        if n <= 0 {
            return wakers;
        }
        for rec in buf.chunks_exact(128).take(n as usize / 128) {
            queue_for(src, signo(rec), &mut wakers);
        }
    }
}

/// The signal number of one `signalfd_siginfo` record: its first field,
/// `ssi_signo`, a `u32`.
fn signo(record: &[u8]) -> i32 {
    u32::from_ne_bytes([record[0], record[1], record[2], record[3]]) as i32
}

/// Queues `sig` for every subscriber whose set holds it, then wakes them
/// outside every lock.
fn deliver(sig: i32) {
    let mut wakers = Vec::new();
    queue_for(&source(), sig, &mut wakers);
    wake_all(wakers);
}

/// Queues `sig` for every subscriber of `src` whose set holds it; collects
/// the wakers to call.
fn queue_for(src: &Source, sig: i32, wakers: &mut Vec<Waker>) {
    wakers.extend(
        src.subscribers
            .iter()
            .filter(|s| s.set.contains(sig))
            .filter_map(|s| s.queue.upgrade())
            .filter_map(|q| q.push(sig)),
    );
}

/// Wakes each under its own `catch_unwind`: a panicking waker costs only
/// its own wake.
fn wake_all(wakers: Vec<Waker>) {
    for w in wakers {
        let _ = catch_unwind(AssertUnwindSafe(|| w.wake()));
    }
}
