//! A file descriptor shared by a handle and its operations in flight.
//!
//! Every operation on an fd holds a clone, so the fd is closed only after
//! the last operation that used it has completed (a dropped future's
//! operation keeps its clone in the op table until the final CQE). Closing
//! an fd with an operation in flight would let the number be reused under
//! it.
//!
//! The close itself: on a shard, an `IORING_OP_CLOSE` pushed into that
//! shard's ring (a close can block, e.g. on NFS, and must not stall the
//! shard); on any other thread, `close(2)`.

use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, OnceLock};

use io_uring::{opcode, types};

use super::carry::Carry;
use crate::driver::{Tag, UserData};
use crate::scheduler::context;

/// A reference-counted fd (module docs).
#[derive(Clone, Debug)]
pub(crate) struct SharedFd {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    fd: RawFd,
    /// The fd's lane lease for unbound native ops (see `native/lease.rs`).
    lease: AtomicU64,
    /// Made when a receive on the fd is first abandoned (`op/carry.rs`).
    carry: OnceLock<Box<Carry>>,
    /// Made when a send on the fd is first left to linger
    /// (`io/linger.rs`): later sends wait for it, so none overtakes it.
    behind: OnceLock<Box<SendGate>>,
}

/// Sends left running after their writer went (`io/linger.rs`), and the
/// sends waiting for them.
#[derive(Debug, Default)]
pub(crate) struct SendGate {
    state: std::sync::Mutex<GateState>,
}

#[derive(Debug, Default)]
struct GateState {
    /// Lingering sends still running.
    held: usize,
    waiters: Vec<std::task::Waker>,
    /// A lingering send ended without every byte taken: a later send
    /// would leave a gap in the stream, so every later send fails.
    broken: bool,
}

impl SendGate {
    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        // Nothing foreign runs under the lock: a poisoned one is whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// One more send to wait for.
    pub(crate) fn hold(&self) {
        self.lock().held += 1;
    }

    /// A held send ended (`broken`: with bytes it never sent); the last
    /// one lets the waiting sends go.
    pub(crate) fn release(&self, broken: bool) {
        let waiters = {
            let mut s = self.lock();
            s.held -= 1;
            s.broken |= broken;
            if s.held > 0 {
                return;
            }
            std::mem::take(&mut s.waiters)
        };
        super::carry::wake_all(waiters);
    }

    fn poll_clear(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        let mut s = self.lock();
        if s.broken {
            return std::task::Poll::Ready(Err(broken_error()));
        }
        if s.held == 0 {
            return std::task::Poll::Ready(Ok(()));
        }
        if !s.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            s.waiters.push(cx.waker().clone());
        }
        std::task::Poll::Pending
    }
}

/// Why a send fails after a lingering send could not finish.
fn broken_error() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::BrokenPipe,
        "a send left to finish after its writer went (a dropped or unwrapped Compat) \
         could not send every byte; the connection is reset so the peer never \
         sees a gap, and nothing more can be sent on it",
    )
}

impl SharedFd {
    pub(crate) fn new(fd: OwnedFd) -> SharedFd {
        crate::driver::epoll::adopt(fd.as_raw_fd());
        SharedFd {
            inner: Arc::new(Inner {
                fd: fd.into_raw_fd(),
                lease: AtomicU64::new(0),
                carry: OnceLock::new(),
                behind: OnceLock::new(),
            }),
        }
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.inner.fd
    }

    pub(crate) fn lease_word(&self) -> &AtomicU64 {
        &self.inner.lease
    }

    /// How many handles and operations hold the fd.
    pub(crate) fn holders(&self) -> usize {
        Arc::strong_count(&self.inner)
    }

    /// The bytes abandoned receives took, if one ever was (`op/carry.rs`).
    pub(crate) fn carry(&self) -> Option<&Carry> {
        self.inner.carry.get().map(|c| &**c)
    }

    /// What every stream receive asks first: bytes (or an error) that
    /// abandoned receives left for it (`Carry::poll_take`); `Ready(None)`
    /// when there are none, at the cost of one atomic load.
    pub(crate) fn poll_carried(
        &self,
        cx: &mut std::task::Context<'_>,
        out: &mut [std::mem::MaybeUninit<u8>],
    ) -> std::task::Poll<Option<std::io::Result<usize>>> {
        match self.carry() {
            Some(carry) => carry.poll_take(cx, out),
            None => std::task::Poll::Ready(None),
        }
    }

    /// What every stream send asks first: whether a send left to linger
    /// (`io/linger.rs`) is still going; `Pending` until it ends, an error
    /// for good if it could not send every byte (a later send would leave
    /// a gap in the stream). One atomic load when none ever was.
    pub(crate) fn poll_sends_behind(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        match self.inner.behind.get() {
            Some(gate) => gate.poll_clear(cx),
            None => std::task::Poll::Ready(Ok(())),
        }
    }

    /// The send gate, made on first use.
    pub(crate) fn send_gate(&self) -> &SendGate {
        self.inner.behind.get_or_init(Box::default)
    }

    /// The carry, made on first use.
    pub(crate) fn carry_or_make(&self) -> &Carry {
        self.inner.carry.get_or_init(Box::default)
    }

    /// The fd itself when this is the last reference, for an awaited close.
    pub(crate) fn try_unwrap(self) -> Result<OwnedFd, SharedFd> {
        match Arc::try_unwrap(self.inner) {
            Ok(mut inner) => {
                let fd = std::mem::replace(&mut inner.fd, -1);
                crate::driver::epoll::release(fd);
                // SAFETY: `fd` was owned by `inner`, whose drop now sees -1
                // and closes nothing; ownership moves to the `OwnedFd`.
                Ok(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
            }
            Err(inner) => Err(SharedFd { inner }),
        }
    }
}

impl AsRawFd for SharedFd {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.fd
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.fd < 0 {
            return;
        }
        let fd = self.fd;
        // Before the close: the number may be reused at once.
        crate::driver::epoll::release(fd);
        let queued = context::with_worker(|w| match w {
            Some(w) if !w.me().ops.is_closed() => {
                let sqe = opcode::Close::new(types::Fd(fd))
                    .build()
                    .user_data(UserData::new(Tag::Detached, 0).raw());
                // SAFETY: a close carries no pointers.
                unsafe { w.push_sqe(sqe) };
                true
            }
            _ => false,
        });
        if !queued {
            // SAFETY: we own `fd` and nothing uses it any more (every
            // operation on it held a reference to this `Inner`).
            unsafe { libc::close(fd) };
        }
    }
}
