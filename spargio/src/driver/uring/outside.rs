//! Waiting outside the ring: the shard parks in another poller (its tokio
//! runtime's reactor, `scheduler/tokio_shard.rs`) instead of in
//! `io_uring_enter`.
//!
//! The ring's fd cannot be that poller's wake source: with
//! `DEFER_TASKRUN` completions are task work that only the shard's own
//! `io_uring_enter` turns into CQEs, and nothing wakes a poller of the
//! ring fd when such work arrives. The kernel's answer is a registered
//! eventfd, which it signals when deferred work arrives on an empty list.
//! Signalling costs the completion path a wakeup, so notification is off
//! (`IORING_CQ_EVENTFD_DISABLED`, one store in the shared CQ flags) except
//! between [`UringDriver::prepare_wait`] and [`UringDriver::finish_wait`].
//!
//! No completion is missed: `prepare_wait` runs the deferred work, turns
//! notification on, then (after a full fence) looks at the CQ and the
//! `IORING_SQ_TASKRUN` flag. The kernel queues work, sets that flag, then
//! reads the CQ flags to decide whether to signal. Either our look sees
//! the flag, and we do not wait, or the kernel's read sees notification
//! on, and signals. (Work the kernel leaves over after an enter keeps the
//! flag set.)
//!
//! Except for one kernel bug this design steers around: a completion
//! queued from inside an eventfd's wakeup (the shard's own doorbell read,
//! completed by an outside thread's write) cannot signal at once and
//! defers the signal to an RCU callback (`io_eventfd_do_signal`), which
//! never clears its "pending" bit, so every later deferred signal of the
//! ring is dropped (in the kernel sources we read; reproduced on 6.18).
//! So while the shard waits outside the ring, it keeps no read on the
//! doorbell eventfd: the poller watches that eventfd itself
//! ([`UringDriver::doorbell_fd`]). An application's own ring reads of an
//! eventfd would still hit the bug; the book's tokio chapter says so.
//!
//! The eventfd is never read: the poller is edge-triggered, so each
//! signal is a new edge whatever its count.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

use super::UringDriver;
use crate::driver::ops_table::{OpTable, Reaped};

impl UringDriver {
    /// The fd that turns readable when this ring has something to reap
    /// while notification is on: `notify`, registered with the ring on
    /// the first call (later calls return it and ignore their argument).
    pub(crate) fn wait_fd(&mut self, notify: Option<OwnedFd>) -> io::Result<RawFd> {
        if let Some(fd) = &self.notify {
            return Ok(fd.as_raw_fd());
        }
        let fd = notify.ok_or_else(|| io::Error::other("no eventfd for the ring to signal"))?;
        self.ring.completion_notify(false);
        self.ring.submitter().register_eventfd(fd.as_raw_fd())?;
        let raw = fd.as_raw_fd();
        self.notify = Some(fd);
        Ok(raw)
    }

    /// The doorbell eventfd, for the poller to watch beside
    /// [`UringDriver::wait_fd`] (see the module doc).
    pub(crate) fn doorbell_fd(&self) -> Option<RawFd> {
        Some(self.eventfd)
    }

    /// Everything [`UringDriver::park`] does before it blocks but arm the
    /// doorbell read (see the module doc): queued SQEs submitted, deferred
    /// work run. Then notification goes on. `None`: something is ready now, do not
    /// wait (notification is off again). `Some(t)`: wait on
    /// [`UringDriver::wait_fd`] for at most `t`, then call
    /// [`UringDriver::finish_wait`].
    pub(crate) fn prepare_wait(
        &mut self,
        timeout: Option<Duration>,
    ) -> io::Result<Option<Option<Duration>>> {
        self.flush_backlog();
        self.ring.submit()?;
        self.ring.completion_notify(true);
        // Pairs with the kernel's queueing of task work before its read of
        // the CQ flags (see the module doc).
        fence(Ordering::SeqCst);
        if self.ring.has_completions() || self.ring.needs_enter() {
            self.ring.completion_notify(false);
            return Ok(None);
        }
        Ok(Some(timeout))
    }

    /// After a wait on [`UringDriver::wait_fd`]: notification off, then a
    /// non-blocking reap. Returns the number of CQEs reaped.
    pub(crate) fn finish_wait(&mut self, ops: &OpTable, out: &mut Reaped) -> io::Result<usize> {
        self.ring.completion_notify(false);
        self.poll(ops, out)
    }
}
