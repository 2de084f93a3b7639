//! The watcher thread (module docs).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use super::slot::Running;
use super::{precise_ns, StallCallback, StallReport};
use crate::scheduler::Shared;
use crate::stats::Counters;

/// The shortest threshold: the coarse clock moves in ticks of a few ms.
const MIN_THRESHOLD: Duration = Duration::from_millis(10);

/// A stall being watched.
#[derive(Clone, Copy, Debug)]
struct Pending {
    poll: Running,
    /// Already reported as ongoing.
    reported: bool,
}

/// The running watcher; stops (and is joined) on drop.
#[derive(Debug)]
pub(crate) struct Watcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watcher {
    /// Starts watching `shared`'s shards and blocking pool, if its config
    /// asks for it.
    pub(crate) fn start(shared: &Arc<Shared>) -> std::io::Result<Option<Watcher>> {
        let Some(threshold) = shared.config.stall.threshold else {
            return Ok(None);
        };
        let threshold = threshold.max(MIN_THRESHOLD);
        let stop = Arc::new(AtomicBool::new(false));
        let state = State {
            shared: shared.clone(),
            threshold,
            ongoing_after: (threshold * 10).max(Duration::from_secs(1)),
            callback: shared.config.stall.callback.clone(),
            pending: vec![None; shared.shard_count()],
            blocking_seen: None,
            stop: stop.clone(),
        };
        let name = format!("{}-watch", shared.config.thread_name);
        let thread = thread::Builder::new()
            .name(name)
            .spawn(move || state.run())?;
        Ok(Some(Watcher {
            stop,
            thread: Some(thread),
        }))
    }

    /// Stops the watcher without waiting for it (a runtime dropped on its
    /// own shard cannot wait).
    pub(crate) fn detach(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

struct State {
    shared: Arc<Shared>,
    threshold: Duration,
    ongoing_after: Duration,
    callback: Option<StallCallback>,
    pending: Vec<Option<Pending>>,
    /// When the blocking job last reported was queued.
    blocking_seen: Option<Instant>,
    stop: Arc<AtomicBool>,
}

impl State {
    fn run(mut self) {
        let period = self.threshold / 4;
        while !self.stop.load(Ordering::Acquire) {
            thread::park_timeout(period);
            self.check_shards();
            self.check_blocking();
        }
    }

    fn check_shards(&mut self) {
        let now = precise_ns();
        let threshold = self.threshold.as_nanos() as u64;
        for id in 0..self.pending.len() {
            let slot = &self.shared.shards[id].poll;
            match self.pending[id] {
                Some(p) if !slot.still(p.poll.start) => {
                    self.pending[id] = None;
                    if !p.reported {
                        let end = slot.end_of(p.poll.start).unwrap_or(now);
                        self.report_shard(id, p.poll, end, false);
                    }
                }
                Some(ref mut p) => {
                    let ran = Duration::from_nanos(now.saturating_sub(p.poll.start));
                    if !p.reported && ran >= self.ongoing_after {
                        p.reported = true;
                        let poll = p.poll;
                        self.report_shard(id, poll, now, true);
                    }
                }
                None => {
                    let Some(poll) = slot.running() else { continue };
                    if now.saturating_sub(poll.start) >= threshold {
                        slot.flag(poll.start);
                        self.pending[id] = Some(Pending {
                            poll,
                            reported: false,
                        });
                    }
                }
            }
        }
    }

    fn report_shard(&self, id: usize, poll: Running, end: u64, ongoing: bool) {
        Counters::bump_shared(&self.shared.shards[id].counters.stalls);
        self.report(&StallReport::Shard {
            shard: id,
            duration: Duration::from_nanos(end.saturating_sub(poll.start)),
            spawned_at: poll.location,
            ongoing,
        });
    }

    fn check_blocking(&mut self) {
        let Some((queued_at, queued, threads)) = self.shared.blocking.oldest() else {
            return;
        };
        let waited = queued_at.elapsed();
        if waited < self.threshold || self.blocking_seen.is_some_and(|seen| seen >= queued_at) {
            return;
        }
        self.blocking_seen = Some(queued_at);
        Counters::bump_shared(&self.shared.shards[0].counters.blocking_stalls);
        self.report(&StallReport::BlockingPool {
            waited,
            queued,
            threads,
        });
    }

    fn report(&self, report: &StallReport) {
        match &self.callback {
            // A panicking callback costs that report, never the watcher.
            Some(f) => drop(catch_unwind(AssertUnwindSafe(|| f(report)))),
            None => log::warn!(target: "spargio::stall", "{report}"),
        }
    }
}
