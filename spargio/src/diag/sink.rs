//! Reports on their way from shards and pool threads to the watcher.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::StallReport;

/// Reports waiting for the watcher beyond which new ones are dropped
/// (and counted): a shard that stalls in a loop must not grow memory.
const QUEUE_CAP: usize = 64;

/// The detector's shared state (module docs).
#[derive(Debug)]
pub(crate) struct Sink {
    threshold: Duration,
    queue: Mutex<VecDeque<StallReport>>,
    /// Reports dropped at `QUEUE_CAP`.
    dropped: AtomicU64,
    /// Blocking-pool jobs reported.
    blocking_stalls: AtomicU64,
    /// When the last blocking job reported was queued (each job once).
    blocking_seen: Mutex<Option<Instant>>,
    /// Unparked when a report is queued.
    watcher: OnceLock<Thread>,
}

impl Sink {
    pub(crate) fn new(threshold: Duration) -> Sink {
        Sink {
            threshold,
            queue: Mutex::new(VecDeque::new()),
            dropped: AtomicU64::new(0),
            blocking_stalls: AtomicU64::new(0),
            blocking_seen: Mutex::new(None),
            watcher: OnceLock::new(),
        }
    }

    pub(crate) fn threshold(&self) -> Duration {
        self.threshold
    }

    pub(crate) fn set_watcher(&self, thread: Thread) {
        let _ = self.watcher.set(thread);
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
        if let Some(t) = self.watcher.get() {
            t.unpark();
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
