//! A shard's current poll, as the watcher sees it (module docs).

use std::panic::Location;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::time::Duration;

use super::sink::Sink;
use super::{coarse_ns, precise_ns, StallReport};
use crate::shard_id::ShardId;

/// Written by the shard; read by the watcher, which also writes
/// `flagged`.
#[derive(Debug)]
pub(crate) struct PollSlot {
    /// Coarse ns when the current poll began; 0 between polls.
    start: AtomicU64,
    /// The polled task's spawn location (valid while `start` is the
    /// value read with it).
    location: AtomicPtr<Location<'static>>,
    /// The polled task's id (`diag::task_id`; meaningful only while
    /// `start` is not 0).
    task: AtomicU64,
    /// The `start` of the last poll reported (by the shard when it ended,
    /// or by the watcher while it ran): whoever swaps a start in first
    /// reports that poll, so it is reported exactly once.
    reported: AtomicU64,
}

impl Default for PollSlot {
    fn default() -> PollSlot {
        PollSlot {
            start: AtomicU64::new(0),
            location: AtomicPtr::new(std::ptr::null_mut()),
            task: AtomicU64::new(0),
            reported: AtomicU64::new(0),
        }
    }
}

/// The `task` of a stretch of tokio tasks (feature `tokio-compat`): not a
/// spargio task id (those keep the top bit clear). Exactly this value: a
/// stretch of the shard's tokio turn, whose task is unknown; with the bit
/// and more: one tokio task's poll, timed by tokio's task hooks (a build
/// with `--cfg tokio_unstable`), spawned at the slot's location.
pub(crate) const TOKIO: u64 = 1 << 63;

/// A poll the watcher saw running: its start and task.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Running {
    pub(crate) start: u64,
    pub(crate) location: &'static Location<'static>,
    pub(crate) task: u64,
}

impl Running {
    /// Its report, after it ran for `duration`.
    pub(crate) fn report(&self, shard: ShardId, duration: Duration, ongoing: bool) -> StallReport {
        if self.task & TOKIO == 0 {
            return StallReport::Shard {
                shard,
                duration,
                spawned_at: self.location,
                ongoing,
            };
        }
        StallReport::Tokio {
            shard,
            duration,
            spawned_at: (self.task != TOKIO).then_some(self.location),
            ongoing,
        }
    }
}

impl PollSlot {
    /// The shard is about to poll a task spawned at `location`; `now` is
    /// a coarse clock reading taken at or before this moment (the end of
    /// the previous poll in the batch: one clock read per poll).
    #[inline]
    pub(crate) fn begin(&self, location: &'static Location<'static>, task: u64, now: u64) {
        self.task.store(task, Ordering::Relaxed);
        self.location.store(
            location as *const Location<'static> as *mut _,
            Ordering::Relaxed,
        );
        // Release: a watcher that reads this start reads the location
        // stored above (or a later one, which it detects).
        self.start.store(now.max(1), Ordering::Release);
    }

    /// The poll returned: whether it ran longer than the threshold (a
    /// stall, counted by the shard; reported to `sink` unless the watcher
    /// already reported it as ongoing), and the coarse time now.
    #[inline]
    pub(crate) fn end(&self, shard: ShardId, sink: &Sink) -> (bool, u64) {
        let start = self.start.load(Ordering::Relaxed);
        self.start.store(0, Ordering::Release);
        let now = coarse_ns();
        if now.saturating_sub(start) < sink.threshold().as_nanos() as u64 {
            return (false, now);
        }
        (self.stalled(shard, start, sink), now)
    }

    #[cold]
    fn stalled(&self, shard: ShardId, start: u64, sink: &Sink) -> bool {
        if !self.claim(start) {
            return true;
        }
        let location = self.location.load(Ordering::Relaxed);
        // SAFETY: the shard itself stored it, from a `&'static Location`,
        // before this poll began (never null once a poll began).
        let location = unsafe { &*location };
        let poll = Running {
            start,
            location,
            task: self.task.load(Ordering::Relaxed),
        };
        // From the coarse start (at or before the real one) to a precise
        // end: never shorter than the stall.
        let duration = Duration::from_nanos(precise_ns().saturating_sub(start));
        sink.push(poll.report(shard, duration, false));
        true
    }

    /// The poll running now, if any (watcher side).
    pub(crate) fn running(&self) -> Option<Running> {
        let start = self.start.load(Ordering::Acquire);
        if start == 0 {
            return None;
        }
        let location = self.location.load(Ordering::Relaxed);
        let task = self.task.load(Ordering::Relaxed);
        // The same start after the location and task reads: they are that
        // poll's (a later poll stores a later start: starts only repeat
        // within one coarse tick, and the watcher asks about old polls).
        if self.start.load(Ordering::Acquire) != start || location.is_null() {
            return None;
        }
        // SAFETY: every stored pointer came from a `&'static Location`.
        let location = unsafe { &*location };
        Some(Running {
            start,
            location,
            task,
        })
    }

    /// The id of the task being polled now, if any (for task dumps; may
    /// be a moment stale).
    pub(crate) fn running_task(&self) -> Option<u64> {
        if self.start.load(Ordering::Acquire) == 0 {
            return None;
        }
        let task = self.task.load(Ordering::Relaxed);
        (self.start.load(Ordering::Acquire) != 0).then_some(task)
    }

    /// Claims the report of the poll that started at `start`: true for
    /// the first caller only.
    pub(crate) fn claim(&self, start: u64) -> bool {
        self.reported.swap(start, Ordering::AcqRel) != start
    }
}
