//! Reports on their way from shards and pool threads to the watcher.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use super::slot::PollSlot;
use super::watcher::{State, LAUNCH_AFTER};
use super::StallReport;

/// Reports waiting for the watcher beyond which new ones are dropped
/// (and counted): a shard that stalls in a loop must not grow memory.
const QUEUE_CAP: usize = 64;

/// The detector's shared state (module docs).
#[derive(Debug)]
pub(crate) struct Sink {
    threshold: Duration,
    /// One per shard: the poll running there.
    slots: Box<[PollSlot]>,
    queue: Mutex<VecDeque<StallReport>>,
    /// Reports dropped at `QUEUE_CAP`.
    dropped: AtomicU64,
    /// Blocking-pool jobs reported.
    blocking_stalls: AtomicU64,
    /// When the last blocking job reported was queued (each job once).
    blocking_seen: Mutex<Option<Instant>>,
    /// The watcher: woken when a report is queued, launched by
    /// `launch_due`.
    watcher: OnceLock<Weak<State>>,
    /// The watcher was launched (or its launch attempted).
    launched: AtomicBool,
    /// When the runtime started, on the coarse clock (ns).
    born: u64,
}

impl Sink {
    pub(crate) fn new(threshold: Duration, shards: usize) -> Sink {
        Sink {
            threshold,
            slots: (0..shards).map(|_| PollSlot::default()).collect(),
            queue: Mutex::new(VecDeque::new()),
            dropped: AtomicU64::new(0),
            blocking_stalls: AtomicU64::new(0),
            blocking_seen: Mutex::new(None),
            watcher: OnceLock::new(),
            launched: AtomicBool::new(false),
            born: super::coarse_ns(),
        }
    }

    pub(crate) fn threshold(&self) -> Duration {
        self.threshold
    }

    /// Shard `id`'s poll slot.
    pub(crate) fn slot(&self, id: usize) -> &PollSlot {
        &self.slots[id]
    }

    pub(crate) fn slots(&self) -> &[PollSlot] {
        &self.slots
    }

    pub(crate) fn set_launcher(&self, state: Weak<State>) {
        let _ = self.watcher.set(state);
    }

    /// Called by a shard about to idle: starts the watcher thread once the
    /// runtime has run for `LAUNCH_AFTER` (`watcher.rs`). One load while
    /// launched; a coarse clock read before.
    #[inline]
    pub(crate) fn launch_due(&self) {
        if self.launched.load(Ordering::Relaxed) {
            return;
        }
        self.launch_slow();
    }

    /// How long until the watcher is due to start; `None` once started.
    pub(crate) fn launch_in(&self) -> Option<Duration> {
        if self.launched.load(Ordering::Relaxed) {
            return None;
        }
        let age = super::coarse_ns().saturating_sub(self.born);
        Some(LAUNCH_AFTER.saturating_sub(Duration::from_nanos(age)))
    }

    #[cold]
    fn launch_slow(&self) {
        let age = super::coarse_ns().saturating_sub(self.born);
        if age < LAUNCH_AFTER.as_nanos() as u64 || self.launched.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(state) = self.watcher.get().and_then(Weak::upgrade) {
            state.launch();
        }
    }

    /// Queues `report` for the watcher and wakes it.
    pub(crate) fn push(&self, report: StallReport) {
        {
            let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            if queue.len() >= QUEUE_CAP {
                // Relaxed: a diagnostic counter.
                self.dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            queue.push_back(report);
        }
        if let Some(state) = self.watcher.get().and_then(Weak::upgrade) {
            state.wake();
        }
    }

    /// Moves the queued reports into `out`.
    pub(crate) fn take(&self, out: &mut Vec<StallReport>) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        out.extend(queue.drain(..));
    }

    /// A blocking job queued at `queued_at` has waited `waited` (taken by
    /// a thread now, or still waiting): reported once per job, if that is
    /// over the threshold.
    pub(crate) fn blocking_waited(
        &self,
        queued_at: Instant,
        waited: Duration,
        queued: usize,
        threads: usize,
    ) {
        if waited < self.threshold {
            return;
        }
        {
            let mut seen = self.blocking_seen.lock().unwrap_or_else(|p| p.into_inner());
            if seen.is_some_and(|seen| seen >= queued_at) {
                return;
            }
            *seen = Some(queued_at);
        }
        // Relaxed: a counter read by stats snapshots.
        self.blocking_stalls.fetch_add(1, Ordering::Relaxed);
        self.push(StallReport::BlockingPool {
            waited,
            queued,
            threads,
        });
    }

    /// Blocking-pool jobs reported so far.
    pub(crate) fn blocking_stalls(&self) -> u64 {
        self.blocking_stalls.load(Ordering::Relaxed)
    }

    /// Reports dropped because the watcher fell behind.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}
