//! The io_uring backend: one ring per shard.
//!
//! A [`UringDriver`] owns one shard's ring and lives on that shard's thread
//! (`build` creates the ring disabled; the thread enables it, becoming its
//! single issuer). It is the only code
//! that pushes SQEs ([`ring::Ring::push`]) and reaps CQEs.
//!
//! Internal completions it handles itself:
//!
//! * `Doorbell`: another shard rang us; the CQE's arrival already woke us.
//! * `DoorbellSend`: a doorbell we sent failed (success is skipped). The
//!   target is recorded so the worker can ring it through its eventfd
//!   instead: a wake is never dropped.
//! * `EventfdRead`: an outside thread rang us; the read is re-armed.
//!
//! * `Op`: a native operation's final completion, handed to the shard's
//!   [`OpTable`] (see `lifecycle.rs` for what happens next).
//! * `Detached`: cancels and closes whose result nobody needs.
//!
//! Operation SQEs that do not fit in the submission queue (it is full and
//! the kernel will not take more right now, e.g. while completions
//! overflow) wait in a FIFO backlog that is flushed, in order, before
//! anything else is pushed: a submission is never dropped.
//!
//! Kernel-visible memory: operations' memory is kept alive by the op table.
//! The only buffer the driver itself hands the kernel is the 8-byte eventfd
//! read target. It is boxed and owned by the driver, and
//! [`UringDriver::into_ring`], the shard's last step, completes the armed
//! read (by ringing our own eventfd) and reaps it before the buffer is
//! freed. A driver dropped any other way (a thread unwinding) leaks the
//! target while a read may still be in the ring, rather than free it under
//! the kernel.
//!
//! **The ring outlives its shard thread.** `into_ring` hands the quiesced
//! ring back instead of closing it, and the runtime closes every ring after
//! it has joined the shard threads. Unmapping a ring while another thread
//! of the process runs costs a TLB-shootdown IPI per mapping; once the
//! threads are gone, nobody else has to be interrupted. Measured on 2 CPUs
//! (two threads, each enabling a ring created for it; medians of 2,000
//! cycles): 171–176 µs a cycle with each thread closing its own ring,
//! 124–146 µs with the rings closed after the join.

mod faults;
#[cfg(feature = "tokio-compat")]
mod outside;
mod ring;

pub(crate) use ring::{classify_setup, Ring, RingConfig};

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::{opcode, squeue, types};

use super::direct_msg::{self, DirectMsg};
use super::ops_table::{OpKey, OpTable, Reaped};
use super::user_data::{Tag, UserData};
use super::BgidPool;
use super::{audit, wake, Outcome, RingHealth};
use crate::shard_id::ShardId;

/// How long a shard parks at most while its eventfd read cannot be
/// re-armed (the submission queue is full).
const REARM_RETRY: Duration = Duration::from_millis(1);

/// One shard's ring plus the internal operations kept on it.
pub(crate) struct UringDriver {
    ring: Ring,
    eventfd: RawFd,
    eventfd_read: EventfdRead,
    /// Doorbells whose `MSG_RING` failed; to be rung by eventfd instead.
    failed_doorbells: Vec<ShardId>,
    /// Direct messages reaped from this ring, and direct sends of ours that
    /// the kernel refused (see `direct_msg.rs`), for the worker to take.
    direct_in: Vec<DirectMsg>,
    direct_failed: Vec<DirectMsg>,
    /// Operation SQEs waiting for room in the submission queue.
    backlog: VecDeque<squeue::Entry>,
    /// Ring pressure since the worker last took it into its counters.
    health: RingHealth,
    /// Operation completions of the current reap, before they are handed
    /// to the op table under one lock.
    op_cqes: Vec<(OpKey, Outcome)>,
    /// Provided-buffer group ids.
    bgids: BgidPool,
    /// The eventfd a wait outside the ring watches (`outside.rs`).
    #[cfg(feature = "tokio-compat")]
    notify: Option<std::os::fd::OwnedFd>,
}

impl std::fmt::Debug for UringDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UringDriver")
            .field("ring_fd", &self.ring.fd())
            .field("eventfd_armed", &self.eventfd_read.armed)
            .finish()
    }
}

impl UringDriver {
    /// The driver of an enabled `ring`; `eventfd` must outlive it. The eventfd read is armed by the
    /// first `park` (a shard that never parks, say one started after its
    /// runtime began to shut down, has none for `quiesce` to wait out).
    pub(crate) fn new(ring: Ring, eventfd: RawFd) -> UringDriver {
        UringDriver {
            ring,
            eventfd,
            eventfd_read: EventfdRead {
                target: Box::new(0),
                armed: false,
            },
            failed_doorbells: Vec::new(),
            direct_in: Vec::new(),
            direct_failed: Vec::new(),
            backlog: VecDeque::new(),
            health: RingHealth::default(),
            op_cqes: Vec::new(),
            bgids: BgidPool::default(),
            #[cfg(feature = "tokio-compat")]
            notify: None,
        }
    }

    fn arm_eventfd(&mut self) -> io::Result<()> {
        let buf: *mut u64 = &mut *self.eventfd_read.target;
        let entry = opcode::Read::new(types::Fd(self.eventfd), buf.cast(), 8)
            .build()
            .user_data(UserData::new(Tag::EventfdRead, 0).raw());
        // SAFETY: the 8-byte target is a heap allocation owned by this driver
        // and is freed only once `armed` is false, which only the reap of
        // this read's CQE makes it (`EventfdRead`'s drop leaks it otherwise).
        unsafe { self.ring.push(&entry)? };
        self.eventfd_read.armed = true;
        Ok(())
    }

    /// Queues a `MSG_RING` doorbell to `target`. Submitted by the next
    /// [`UringDriver::submit`].
    pub(crate) fn push_doorbell(&mut self, target_fd: RawFd, target: ShardId) -> io::Result<()> {
        let entry = wake::doorbell_entry(target_fd, target);
        // SAFETY: MSG_RING data carries no pointers; nothing to keep alive.
        unsafe { self.ring.push(&entry) }
    }

    /// True when direct messages were reaped or direct sends failed.
    pub(crate) fn has_direct(&self) -> bool {
        !self.direct_in.is_empty() || !self.direct_failed.is_empty()
    }

    /// Takes the direct messages received and the direct sends refused.
    pub(crate) fn take_direct(
        &mut self,
        received: &mut Vec<DirectMsg>,
        failed: &mut Vec<DirectMsg>,
    ) {
        received.append(&mut self.direct_in);
        failed.append(&mut self.direct_failed);
    }

    /// Queues an operation's SQE (behind any backlog, so order is kept).
    ///
    /// # Safety
    ///
    /// As for [`Ring::push`]: every address in `entry` stays valid until its
    /// final CQE is reaped (the op table's job for `Op` entries).
    pub(crate) unsafe fn push_op(&mut self, entry: squeue::Entry) {
        if self.backlog.is_empty() {
            // SAFETY: forwarded from this function's contract.
            if unsafe { self.ring.push(&entry) }.is_ok() {
                return;
            }
        }
        self.health.sq_backlogged += 1;
        self.backlog.push_back(entry);
    }

    /// Moves backlogged SQEs into the ring while it has room.
    fn flush_backlog(&mut self) {
        while let Some(entry) = self.backlog.front() {
            // SAFETY: backlog entries were accepted by `push_op` under its
            // contract; their memory is still owned by the op table.
            if unsafe { self.ring.push(entry) }.is_err() {
                return;
            }
            self.backlog.pop_front();
        }
    }

    /// Hands queued SQEs to the kernel and runs deferred task work.
    pub(crate) fn submit(&mut self) -> io::Result<()> {
        self.flush_backlog();
        self.ring.submit().map(drop)
    }

    pub(crate) fn has_unsubmitted(&mut self) -> bool {
        self.ring.unsubmitted() > 0 || !self.backlog.is_empty()
    }

    /// Non-blocking: enters the kernel only when that makes progress, then
    /// reaps. Returns the number of CQEs reaped.
    pub(crate) fn poll(&mut self, ops: &OpTable, out: &mut Reaped) -> io::Result<usize> {
        self.flush_backlog();
        if self.ring.needs_enter() {
            self.ring.submit()?;
        }
        self.reap(ops, out)
    }

    /// True when a CQE (a doorbell, a completion) is waiting to be reaped.
    pub(crate) fn has_completions(&mut self) -> bool {
        self.ring.has_completions()
    }

    /// Blocks in the kernel until a CQE arrives or `timeout` passes, then
    /// reaps. Returns the number of CQEs reaped.
    pub(crate) fn park(
        &mut self,
        mut timeout: Option<Duration>,
        ops: &OpTable,
        out: &mut Reaped,
    ) -> io::Result<usize> {
        self.flush_backlog();
        if !self.eventfd_read.armed && self.arm_eventfd().is_err() {
            // No room to re-arm the eventfd read, so an outside thread's
            // doorbell could not wake us: nap briefly instead of blocking.
            timeout = Some(timeout.map_or(REARM_RETRY, |t| t.min(REARM_RETRY)));
        }
        self.ring.wait(timeout)?;
        self.reap(ops, out)
    }

    fn reap(&mut self, ops: &OpTable, out: &mut Reaped) -> io::Result<usize> {
        if self.ring.cq_overflowed() {
            self.health.cq_overflows += 1;
        }
        let mut rearm = false;
        let failed = &mut self.failed_doorbells;
        let (direct_in, direct_failed) = (&mut self.direct_in, &mut self.direct_failed);
        let op_cqes = &mut self.op_cqes;
        let n = self.ring.reap(|raw, res, flags| {
            let ud = UserData::from_raw(raw);
            match ud.tag() {
                Some(Tag::Op) => {
                    audit::reaped(raw);
                    op_cqes.push((
                        OpKey::from_payload(ud.payload()),
                        Outcome::Kernel { result: res, flags },
                    ));
                }
                Some(Tag::DoorbellSend) if res < 0 => failed.push(ud.payload() as ShardId),
                Some(Tag::DirectMsg) => direct_in.push(direct_msg::received(ud.payload(), res)),
                Some(Tag::DirectMsgSend) if res < 0 => {
                    direct_failed.push(direct_msg::failed(ud.payload()));
                }
                Some(Tag::Detached | Tag::Doorbell | Tag::DoorbellSend | Tag::DirectMsgSend) => {}
                Some(Tag::EventfdRead) => rearm = true,
                // Not ours (a `user_data` no runtime SQE carries): nothing
                // in the runtime belongs to it, so it is dropped.
                None => {}
            }
        });
        if !self.op_cqes.is_empty() {
            ops.complete_batch(self.op_cqes.drain(..), out);
        }
        if rearm {
            // Re-armed by the next `park`, the only wait it must end: a
            // doorbell rung meanwhile stays counted in the eventfd and
            // completes that read at once. Re-arming here instead made the
            // last wake of a shutdown (the runtime's drop rings every
            // shard's eventfd) leave a read armed for `quiesce` to ring and
            // wait out: a write and an enter more on every shard's exit.
            self.eventfd_read.armed = false;
        }
        Ok(n)
    }

    /// Registers a provided-buffer ring under a fresh buffer group id.
    ///
    /// # Safety
    ///
    /// `ring_addr` is page-aligned memory for `entries` descriptors that
    /// stays allocated until [`UringDriver::unregister_buf_ring`] succeeds.
    pub(crate) unsafe fn register_buf_ring(
        &mut self,
        ring_addr: u64,
        entries: u16,
    ) -> io::Result<u16> {
        let bgid = self.bgids.take()?;
        // SAFETY: forwarded from this function's contract.
        match unsafe {
            self.ring
                .submitter()
                .register_buf_ring_with_flags(ring_addr, entries, bgid, 0)
        } {
            Ok(()) => Ok(bgid),
            Err(err) => {
                self.bgids.give_back(bgid);
                Err(err)
            }
        }
    }

    /// Unregisters buffer group `bgid`; the kernel no longer touches its
    /// ring afterwards.
    pub(crate) fn unregister_buf_ring(&mut self, bgid: u16) -> io::Result<()> {
        self.ring.submitter().unregister_buf_ring(bgid)?;
        self.bgids.give_back(bgid);
        Ok(())
    }

    /// Ring pressure since the last call.
    pub(crate) fn take_health(&mut self) -> RingHealth {
        self.health.sq_full += self.ring.take_sq_full();
        std::mem::take(&mut self.health)
    }

    pub(crate) fn has_failed_doorbells(&self) -> bool {
        !self.failed_doorbells.is_empty()
    }

    /// Takes the targets whose doorbell `MSG_RING` failed.
    pub(crate) fn take_failed_doorbells(&mut self, out: &mut Vec<ShardId>) {
        out.append(&mut self.failed_doorbells);
    }

    /// The shard's last step: completes the internal operations (see
    /// `quiesce`) and hands the ring back, for the runtime to close once
    /// the shard threads are joined (see the module doc). The op table must
    /// have been quiesced already.
    pub(crate) fn into_ring(mut self) -> Ring {
        // On error the ring refused to wait: we cannot prove the kernel is
        // done with the read target, and `EventfdRead` leaks it (8 bytes).
        let _ = self.quiesce();
        self.ring
    }

    /// Completes and reaps every internal operation so that no kernel-visible
    /// memory is in use: rings our own eventfd to finish the armed read, and
    /// waits for its CQE without re-arming.
    fn quiesce(&mut self) -> io::Result<()> {
        // Anything still queued (a close, a cancel) is submitted, not
        // dropped with the ring.
        if self.has_unsubmitted() {
            self.submit()?;
        }
        while self.eventfd_read.armed {
            wake::ring_eventfd(self.eventfd);
            self.ring.wait(Some(Duration::from_millis(10)))?;
            let mut done = false;
            self.ring.reap(|raw, _res, _flags| {
                // Only internal operations remain: the op table was quiesced
                // by the shard's shutdown before the driver is dropped.
                if UserData::from_raw(raw).tag() == Some(Tag::EventfdRead) {
                    done = true;
                }
            });
            if done {
                self.eventfd_read.armed = false;
            }
        }
        Ok(())
    }
}

/// The eventfd read's 8-byte target, and whether a read into it may be in
/// the ring. Dropped while armed, it leaks the target instead of freeing
/// it under the kernel.
struct EventfdRead {
    target: Box<u64>,
    armed: bool,
}

impl Drop for EventfdRead {
    fn drop(&mut self) {
        if self.armed {
            std::mem::forget(std::mem::take(&mut self.target));
        }
    }
}
