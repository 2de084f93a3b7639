//! The per-shard driver: where operations meet the kernel.
//!
//! Two backends implement one contract, side by side:
//!
//! * [`uring`]: the shard's io_uring ring. Operations are SQEs pushed into
//!   it; completions are CQEs; other shards ring it with `MSG_RING`.
//! * [`epoll`]: where io_uring is refused (seccomp, `io_uring_disabled`,
//!   gVisor). The same SQEs are run by the shard itself: non-blocking
//!   syscalls, epoll readiness on `EAGAIN`, the blocking pool for files.
//!
//! Which one a runtime uses is decided once, at `build()` (see
//! `runtime/backend.rs`), and every shard gets the same. [`Driver`] is the
//! enum the worker holds: one predictable branch per call, no dynamic
//! dispatch, and an operation is described once (its `op/` file builds
//! the SQE; `epoll/exec.rs` says what each opcode is on epoll).
//!
//! The contract, whatever the backend:
//!
//! * `push_op` accepts an operation whose memory stays valid until its
//!   final completion is recorded in the op table; the backend never
//!   touches it after that.
//! * `poll` records what completed without blocking; `park` blocks until
//!   something completes, the shard's eventfd is rung, or the timeout.
//! * `has_completions` is true when `poll` would record something without
//!   asking the kernel (used by the park handshake's re-check).
//! * Dropping the driver after the op table is quiesced leaves no kernel
//!   request referencing freed memory.
//!
//! Shared by both: the op table (`ops_table.rs`, `lifecycle.rs`), the
//! `user_data` tags, the wake handshake (`wake.rs`) and the audit log.

pub mod audit;
mod bgid;
pub(crate) mod direct_msg;
pub(crate) mod epoll;
pub(crate) mod fault_rng;
pub mod faults;
pub(crate) mod lifecycle;
pub(crate) mod ops_table;
pub(crate) mod uring;
mod user_data;
mod wake;

pub(crate) use bgid::BgidPool;
pub(crate) use direct_msg::DirectMsg;
pub(crate) use epoll::{EpollDriver, Poller};
pub(crate) use lifecycle::Outcome;
pub(crate) use ops_table::{OpKey, OpTable, Phase, Reaped};
pub(crate) use uring::{Ring, RingConfig, UringDriver};
pub(crate) use user_data::{Tag, UserData};
pub(crate) use wake::{handshake_fence, Eventfd, Notify, WakeState};

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::squeue;

use crate::shard_id::ShardId;

/// Signs of a ring too small for its load, counted by the driver and taken
/// by the worker into its counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RingHealth {
    /// Reaps that found the completion queue overflowed.
    pub(crate) cq_overflows: u64,
    /// Pushes that found the submission queue full (each entered the
    /// kernel early to make room).
    pub(crate) sq_full: u64,
    /// Operations the kernel would not take at once, queued in the backlog.
    pub(crate) sq_backlogged: u64,
}

/// One shard's driver (module docs).
#[derive(Debug)]
pub(crate) enum Driver {
    Uring(UringDriver),
    Epoll(EpollDriver),
}

impl Driver {
    /// The shard's last step: quiesces the driver and hands back its ring,
    /// if it has one, for the runtime to close after joining the shard
    /// threads (see `uring`'s module doc). The op table must have been
    /// quiesced already.
    pub(crate) fn into_ring(self) -> Option<Ring> {
        match self {
            Driver::Uring(d) => Some(d.into_ring()),
            Driver::Epoll(_) => None,
        }
    }

    /// Queues a `MSG_RING` doorbell (io_uring only: on epoll the runtime
    /// reports no `MSG_RING`, so callers ring the eventfd instead).
    pub(crate) fn push_doorbell(&mut self, target_fd: RawFd, target: ShardId) -> io::Result<()> {
        match self {
            Driver::Uring(d) => d.push_doorbell(target_fd, target),
            Driver::Epoll(_) => Err(io::Error::from(io::ErrorKind::Unsupported)),
        }
    }

    /// True when direct messages were reaped or direct sends failed.
    pub(crate) fn has_direct(&self) -> bool {
        match self {
            Driver::Uring(d) => d.has_direct(),
            Driver::Epoll(_) => false,
        }
    }

    /// Takes the direct messages received and the direct sends refused.
    pub(crate) fn take_direct(
        &mut self,
        received: &mut Vec<DirectMsg>,
        failed: &mut Vec<DirectMsg>,
    ) {
        if let Driver::Uring(d) = self {
            d.take_direct(received, failed);
        }
    }

    /// Starts an operation.
    ///
    /// # Safety
    ///
    /// Every address in `entry` stays valid until its final completion is
    /// reaped (for `Op` entries, the op table holds the memory).
    pub(crate) unsafe fn push_op(&mut self, entry: squeue::Entry, ops: &OpTable) {
        match self {
            // SAFETY: forwarded from this function's contract.
            Driver::Uring(d) => unsafe { d.push_op(entry) },
            // SAFETY: forwarded from this function's contract.
            Driver::Epoll(d) => unsafe { d.push_op(entry, ops) },
        }
    }

    /// Hands queued requests to the kernel.
    pub(crate) fn submit(&mut self) -> io::Result<()> {
        match self {
            Driver::Uring(d) => d.submit(),
            Driver::Epoll(_) => Ok(()),
        }
    }

    pub(crate) fn has_unsubmitted(&mut self) -> bool {
        match self {
            Driver::Uring(d) => d.has_unsubmitted(),
            Driver::Epoll(_) => false,
        }
    }

    /// Records completions without blocking; returns how many.
    pub(crate) fn poll(&mut self, ops: &OpTable, out: &mut Reaped) -> io::Result<usize> {
        match self {
            Driver::Uring(d) => d.poll(ops, out),
            Driver::Epoll(d) => d.poll(ops, out),
        }
    }

    /// True when a completion (a doorbell, an operation) waits.
    pub(crate) fn has_completions(&mut self) -> bool {
        match self {
            Driver::Uring(d) => d.has_completions(),
            Driver::Epoll(d) => d.has_completions(),
        }
    }

    /// Blocks until something completes or `timeout` passes, then records.
    pub(crate) fn park(
        &mut self,
        timeout: Option<Duration>,
        ops: &OpTable,
        out: &mut Reaped,
    ) -> io::Result<usize> {
        match self {
            Driver::Uring(d) => d.park(timeout, ops, out),
            Driver::Epoll(d) => d.park(timeout, ops, out),
        }
    }

    /// The fd a poller other than the driver waits on for it (see
    /// `uring/outside.rs`, `epoll/outside.rs`).
    #[cfg(feature = "tokio-compat")]
    pub(crate) fn wait_fd(
        &mut self,
        notify: Option<std::os::fd::OwnedFd>,
    ) -> io::Result<std::os::fd::RawFd> {
        match self {
            Driver::Uring(d) => d.wait_fd(notify),
            Driver::Epoll(d) => d.wait_fd(notify),
        }
    }

    /// A second fd that poller watches, if the driver needs one.
    #[cfg(feature = "tokio-compat")]
    pub(crate) fn doorbell_fd(&self) -> Option<std::os::fd::RawFd> {
        match self {
            Driver::Uring(d) => d.doorbell_fd(),
            Driver::Epoll(d) => d.doorbell_fd(),
        }
    }

    /// [`Driver::park`] up to its block: `None` when something is ready
    /// (do not wait), else the longest wait on [`Driver::wait_fd`].
    #[cfg(feature = "tokio-compat")]
    pub(crate) fn prepare_wait(
        &mut self,
        timeout: Option<Duration>,
    ) -> io::Result<Option<Option<Duration>>> {
        match self {
            Driver::Uring(d) => d.prepare_wait(timeout),
            Driver::Epoll(d) => d.prepare_wait(timeout),
        }
    }

    /// [`Driver::park`] after its block: records what is ready.
    #[cfg(feature = "tokio-compat")]
    pub(crate) fn finish_wait(&mut self, ops: &OpTable, out: &mut Reaped) -> io::Result<usize> {
        match self {
            Driver::Uring(d) => d.finish_wait(ops, out),
            Driver::Epoll(d) => d.finish_wait(ops, out),
        }
    }

    /// Registers a provided-buffer ring under a fresh buffer group id.
    ///
    /// # Safety
    ///
    /// `ring_addr` is page-aligned memory for `entries` descriptors that
    /// stays allocated until [`Driver::unregister_buf_ring`] succeeds.
    pub(crate) unsafe fn register_buf_ring(
        &mut self,
        ring_addr: u64,
        entries: u16,
    ) -> io::Result<u16> {
        match self {
            // SAFETY: forwarded from this function's contract.
            Driver::Uring(d) => unsafe { d.register_buf_ring(ring_addr, entries) },
            // SAFETY: forwarded from this function's contract.
            Driver::Epoll(d) => unsafe { d.register_buf_ring(ring_addr, entries) },
        }
    }

    /// Unregisters buffer group `bgid`.
    pub(crate) fn unregister_buf_ring(&mut self, bgid: u16) -> io::Result<()> {
        match self {
            Driver::Uring(d) => d.unregister_buf_ring(bgid),
            Driver::Epoll(d) => d.unregister_buf_ring(bgid),
        }
    }

    /// Ring pressure since the last call (io_uring only: the epoll
    /// backend has no queues of fixed size).
    pub(crate) fn take_health(&mut self) -> RingHealth {
        match self {
            Driver::Uring(d) => d.take_health(),
            Driver::Epoll(_) => RingHealth::default(),
        }
    }

    pub(crate) fn has_failed_doorbells(&self) -> bool {
        match self {
            Driver::Uring(d) => d.has_failed_doorbells(),
            Driver::Epoll(_) => false,
        }
    }

    /// Takes the targets whose doorbell `MSG_RING` failed.
    pub(crate) fn take_failed_doorbells(&mut self, out: &mut Vec<ShardId>) {
        if let Driver::Uring(d) = self {
            d.take_failed_doorbells(out);
        }
    }
}
