//! The shard's side of native operations: pushing SQEs submitted here or
//! by other threads, settling completions, and quiescing the op table at
//! shutdown.
//!
//! Submission paths (see `op/mod.rs` for the future's side):
//!
//! * From a task on the owning shard: the SQE goes straight into the ring
//!   (`Worker::push_sqe`); the loop submits it with the batch's doorbells.
//! * From any other thread: the op-table entry is created `Queued`, and a
//!   `Command::Submit` carries the SQE through the owner's inbox; the owner
//!   marks the entry `InRing` and pushes it. A cancel takes the same road,
//!   after the submit, so it can never overtake it.
//!
//! Shutdown (after every task is gone, before the ring closes):
//!
//! 1. Close the op table: new submissions fail with `Shutdown`, queued ones
//!    complete with `Shutdown` (the kernel never saw them).
//! 2. `ASYNC_CANCEL` every operation still in the ring.
//! 3. Reap until no operation is in the ring. Orphaned resources are freed
//!    as their CQEs arrive, which is the only moment it is safe.
//! 4. If the kernel has not finished within `QUIESCE_LIMIT`, leak what is
//!    left rather than free memory it may still write.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue};

use super::worker::Worker;
use super::Shared;
use crate::driver::ops_table::MarkInRing;
use crate::driver::{OpKey, RingHealth, Tag, UserData};
use crate::shard_id::ShardId;
use crate::stats::Counters;
use std::sync::Arc;

/// How long shutdown waits for the kernel to finish cancelled operations.
const QUIESCE_LIMIT: Duration = Duration::from_secs(5);

/// The SQE that cancels the operation `key`.
pub(crate) fn cancel_entry(key: OpKey) -> squeue::Entry {
    opcode::AsyncCancel::new(UserData::new(Tag::Op, key.to_payload()).raw())
        .build()
        .user_data(UserData::new(Tag::Detached, 0).raw())
}

impl Worker {
    /// Queues an SQE in this shard's ring (or, if the driver is borrowed
    /// right now, in a staging list flushed by the loop).
    ///
    /// # Safety
    ///
    /// Every address in `sqe` stays valid until its final CQE is reaped:
    /// for `Op` entries the op table holds the memory.
    pub(crate) unsafe fn push_sqe(&self, sqe: squeue::Entry) {
        match self.driver.try_borrow_mut() {
            Ok(mut driver) => {
                self.flush_staged(&mut driver);
                // SAFETY: forwarded from this function's contract.
                unsafe { driver.push_op(sqe, &self.me().ops) };
            }
            Err(_) => self.staged.borrow_mut().push(sqe),
        }
    }

    pub(super) fn flush_staged(&self, driver: &mut crate::driver::Driver) {
        let mut staged = self.staged.borrow_mut();
        for sqe in staged.drain(..) {
            // SAFETY: staged entries were accepted by `push_sqe` under its
            // contract.
            unsafe { driver.push_op(sqe, &self.me().ops) };
        }
    }

    /// Registers a provided-buffer ring with this shard's ring; returns its
    /// buffer group id.
    ///
    /// # Safety
    ///
    /// As for [`Driver::register_buf_ring`](crate::driver::Driver::register_buf_ring).
    pub(crate) unsafe fn register_buf_ring(
        &self,
        ring_addr: u64,
        entries: u16,
    ) -> std::io::Result<u16> {
        let mut driver = self.driver.try_borrow_mut().map_err(|_| busy())?;
        // SAFETY: forwarded from this function's contract.
        unsafe { driver.register_buf_ring(ring_addr, entries) }
    }

    /// Unregisters buffer group `bgid` from this shard's ring.
    pub(crate) fn unregister_buf_ring(&self, bgid: u16) -> std::io::Result<()> {
        let mut driver = self.driver.try_borrow_mut().map_err(|_| busy())?;
        driver.unregister_buf_ring(bgid)
    }

    /// An operation another thread submitted to this ring.
    pub(super) fn push_remote_op(&self, key: OpKey, sqe: squeue::Entry) {
        match self.me().ops.mark_in_ring(key) {
            // SAFETY: the entry was inserted `Queued` by the submitter, which
            // built `sqe` from resources the op table now keeps alive until
            // the final CQE (the entry exists, so no CQE has come yet).
            MarkInRing::Push => unsafe { self.push_sqe(sqe) },
            MarkInRing::Skip => {}
            // Dropped before it reached the ring (perhaps on this very
            // shard, whose cancel then found nothing to cancel): it never
            // runs; what it holds is reclaimed as cancelled.
            MarkInRing::Abandoned(keep, outcome) => {
                crate::driver::audit::reaped(UserData::new(Tag::Op, key.to_payload()).raw());
                Counters::bump_local(&self.counters().native_ops_cancelled);
                let mut reaped = self.reaped.borrow_mut();
                reaped.released.push((keep, outcome));
            }
        }
    }

    /// A cancel another thread asked for.
    pub(super) fn cancel_remote_op(&self, key: OpKey) {
        if self.me().ops.wants_cancel(key) {
            Counters::bump_local(&self.counters().native_ops_cancelled);
            // SAFETY: an ASYNC_CANCEL carries no pointers.
            unsafe { self.push_sqe(cancel_entry(key)) };
        }
    }

    /// Wakes the futures and drops the orphaned resources of the last reap.
    pub(super) fn settle_reaped(&self) {
        let mut reaped = std::mem::take(&mut *self.reaped.borrow_mut());
        if !reaped.is_empty() {
            Counters::add_local(&self.counters().native_ops_completed, reaped.completed);
            for key in reaped.cancels.drain(..) {
                // SAFETY: an ASYNC_CANCEL carries no pointers.
                unsafe { self.push_sqe(cancel_entry(key)) };
            }
            reaped.settle();
            if reaped.panicked > 0 {
                Counters::add_local(&self.counters().callbacks_panicked, reaped.panicked);
                reaped.panicked = 0;
            }
        }
        // Hand the (empty) vectors back to keep their capacity.
        *self.reaped.borrow_mut() = reaped;
    }

    /// Blocks in the ring, then settles what was reaped.
    pub(super) fn park_driver(&self, timeout: Option<Duration>) -> std::io::Result<usize> {
        let start = crate::diag::precise_ns();
        self.me().parked_since.store(start, Ordering::Relaxed);
        let in_tokio = self.park_in_tokio(timeout);
        let (res, health) = {
            let mut reaped = self.reaped.borrow_mut();
            let mut driver = self.driver.borrow_mut();
            let res = in_tokio.unwrap_or_else(|| {
                self.flush_staged(&mut driver);
                driver.park(timeout, &self.me().ops, &mut reaped)
            });
            (res, driver.take_health())
        };
        self.me().parked_since.store(0, Ordering::Relaxed);
        let parked = crate::diag::precise_ns().saturating_sub(start);
        Counters::add_local(&self.counters().parked_ns, parked);
        self.note_ring_health(health);
        self.settle_reaped();
        res
    }

    /// Without the shards' tokio runtimes, parks are the driver's own.
    #[cfg(not(feature = "tokio-compat"))]
    fn park_in_tokio(&self, _: Option<Duration>) -> Option<std::io::Result<usize>> {
        None
    }

    /// Counts the ring's signs of pressure, and says once per shard that
    /// the rings are too small (every loop turn calls it: the quiet case
    /// is one test, inlined).
    #[inline]
    pub(super) fn note_ring_health(&self, health: RingHealth) {
        if health.cq_overflows | health.sq_full | health.sq_backlogged != 0 {
            self.count_ring_pressure(health);
        }
    }

    #[cold]
    fn count_ring_pressure(&self, health: RingHealth) {
        let counters = self.counters();
        Counters::add_local(&counters.cq_overflows, health.cq_overflows);
        Counters::add_local(&counters.sq_full, health.sq_full);
        Counters::add_local(&counters.sq_backlogged, health.sq_backlogged);
        if !self.ring_warned.replace(true) {
            let (sq, cq) = self
                .me()
                .features
                .get()
                .map_or((0, 0), |f| (f.sq_entries, f.cq_entries));
            let what = if health.cq_overflows > 0 {
                format!("the completion queue ({cq} entries) overflowed; the kernel keeps what did not fit until the next enter")
            } else {
                format!("the submission queue ({sq} entries) filled; operations waited for room")
            };
            crate::diag::event::ring_pressure(self.id, &what);
        }
    }

    /// Shutdown steps 1–4 (module docs).
    pub(super) fn quiesce_ops(&self) {
        let ops = &self.me().ops;
        let in_ring = {
            let mut reaped = self.reaped.borrow_mut();
            ops.close(&mut reaped)
        };
        self.settle_reaped();
        for key in in_ring {
            Counters::bump_local(&self.counters().native_ops_cancelled);
            // SAFETY: an ASYNC_CANCEL carries no pointers.
            unsafe { self.push_sqe(cancel_entry(key)) };
        }
        let start = Instant::now();
        while ops.in_ring() > 0 {
            if start.elapsed() > QUIESCE_LIMIT {
                ops.leak_in_ring();
                return;
            }
            let res = self.park_driver(Some(Duration::from_millis(10)));
            self.check_ring(res.map(drop));
        }
        // What else is queued goes to the kernel now: the closes of the
        // fds of streams and files dropped with their tasks above. The
        // ring is torn down next, and a close never submitted would leave
        // its fd open (`rt_reclaim`).
        self.flush_doorbells();
    }
}

/// The driver is borrowed: only possible if called from inside the
/// driver's own reap, which never runs user code.
fn busy() -> std::io::Error {
    debug_assert!(false, "ring registration while the driver is borrowed");
    std::io::Error::other("the shard's ring is busy")
}

impl Shared {
    /// Hands an operation's SQE to `shard`'s ring: directly when called on
    /// that shard, else through its inbox (the entry must have been inserted
    /// with phase `Queued` then).
    ///
    /// # Safety
    ///
    /// The op table entry `key` holds (or the caller's future owns, and
    /// orphans into it on drop) every resource `sqe` points into.
    pub(crate) unsafe fn submit_op(
        self: &Arc<Shared>,
        shard: ShardId,
        key: OpKey,
        sqe: squeue::Entry,
        local: bool,
    ) {
        let user_data = UserData::new(Tag::Op, key.to_payload()).raw();
        let sqe = sqe.user_data(user_data);
        crate::driver::audit::lend(user_data, &sqe);
        let counters = &self.shards[shard].counters;
        Counters::bump_shared(&counters.native_ops_submitted);
        Counters::bump_shared(if local {
            &counters.native_any_local_fastpath_submitted
        } else {
            &counters.native_any_envelope_submitted
        });
        if local {
            crate::scheduler::context::with_worker(|w| {
                let w = w.expect("local submission off its shard");
                debug_assert_eq!(w.id, shard);
                // SAFETY: forwarded from this function's contract.
                unsafe { w.push_sqe(sqe) };
            });
        } else {
            self.shards[shard]
                .inbox
                .push(super::inbox::Command::Submit { key, sqe });
            self.notify(shard);
        }
    }

    /// Asks `shard` to cancel operation `key` (a no-op if it completed).
    pub(crate) fn cancel_op(self: &Arc<Shared>, shard: ShardId, key: OpKey) {
        let local = crate::scheduler::context::current_shard(self) == Some(shard);
        if local {
            crate::scheduler::context::with_worker(|w| {
                if let Some(w) = w {
                    w.cancel_remote_op(key);
                }
            });
        } else {
            self.shards[shard]
                .inbox
                .push(super::inbox::Command::Cancel { key });
            self.notify(shard);
        }
    }
}
