//! A shard's current poll, as the watcher sees it (module docs).

use std::panic::Location;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use super::{coarse_ns, precise_ns};

/// The shard writes, the watcher reads (and writes `flagged`).
#[derive(Debug)]
pub(crate) struct PollSlot {
    /// Coarse ns when the current poll began; 0 between polls.
    start: AtomicU64,
    /// The polled task's spawn location (valid while `start` is the
    /// value read with it).
    location: AtomicPtr<Location<'static>>,
    /// The `start` the watcher flagged as a stall.
    flagged: AtomicU64,
    /// Precise ns when the flagged poll ended.
    end: AtomicU64,
}

impl Default for PollSlot {
    fn default() -> PollSlot {
        PollSlot {
            start: AtomicU64::new(0),
            location: AtomicPtr::new(std::ptr::null_mut()),
            flagged: AtomicU64::new(0),
            end: AtomicU64::new(0),
        }
    }
}

/// A poll the watcher saw running: its start and task.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Running {
    pub(crate) start: u64,
    pub(crate) location: &'static Location<'static>,
}

impl PollSlot {
    /// The shard is about to poll a task spawned at `location`.
    #[inline]
    pub(crate) fn begin(&self, location: &'static Location<'static>) {
        self.location.store(
            location as *const Location<'static> as *mut _,
            Ordering::Relaxed,
        );
        // Release: a watcher that reads this start reads the location
        // stored above (or a later one, which it detects).
        self.start.store(coarse_ns(), Ordering::Release);
    }

    /// The poll returned.
    #[inline]
    pub(crate) fn end(&self) {
        let start = self.start.load(Ordering::Relaxed);
        self.start.store(0, Ordering::Release);
        if self.flagged.load(Ordering::Acquire) == start {
            self.end.store(precise_ns(), Ordering::Release);
        }
    }

    /// The poll running now, if any (watcher side).
    pub(crate) fn running(&self) -> Option<Running> {
        let start = self.start.load(Ordering::Acquire);
        if start == 0 {
            return None;
        }
        let location = self.location.load(Ordering::Relaxed);
        // The same start after the location read: the location is that
        // poll's (a later poll stores a later start: starts only repeat
        // within one coarse tick, and the watcher asks about old polls).
        if self.start.load(Ordering::Acquire) != start || location.is_null() {
            return None;
        }
        // SAFETY: every stored pointer came from a `&'static Location`.
        let location = unsafe { &*location };
        Some(Running { start, location })
    }

    /// The poll that started at `start` is a stall: its end is recorded.
    pub(crate) fn flag(&self, start: u64) {
        self.flagged.store(start, Ordering::Release);
    }

    /// Whether the poll that started at `start` is still running.
    pub(crate) fn still(&self, start: u64) -> bool {
        self.start.load(Ordering::Acquire) == start
    }

    /// The precise end of the flagged poll that started at `start`, if
    /// the shard recorded it.
    pub(crate) fn end_of(&self, start: u64) -> Option<u64> {
        let end = self.end.load(Ordering::Acquire);
        (end >= start).then_some(end)
    }
}
