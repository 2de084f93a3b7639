//! The watcher thread (module docs).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use super::{precise_ns, StallCallback, StallReport};
use crate::scheduler::Shared;
use crate::stats::Counters;

/// The longest the watcher sleeps while every shard rests.
const MAX_NAP: Duration = Duration::from_secs(1);

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
        let Some(sink) = shared.stall.as_ref() else {
            return Ok(None);
        };
        let threshold = sink.threshold();
        let stop = Arc::new(AtomicBool::new(false));
        let state = State {
            shared: shared.clone(),
            threshold,
            ongoing_after: (threshold * 10).max(MAX_NAP),
            callback: shared.config.stall.callback.clone(),
            stop: stop.clone(),
        };
        let name = format!("{}-watch", shared.config.thread_name);
        let thread = thread::Builder::new()
            .name(name)
            .spawn(move || state.run())?;
        sink.set_watcher(thread.thread().clone());
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
    stop: Arc<AtomicBool>,
}

impl State {
    fn run(self) {
        let Some(sink) = self.shared.stall.clone() else {
            return;
        };
        let mut nap = self.threshold;
        let mut reports = Vec::new();
        loop {
            thread::park_timeout(nap);
            // A round after the stop too: what the shards queued last.
            let stopping = self.stop.load(Ordering::Acquire);
            let busy = self.check_running();
            self.check_blocking(&sink);
            sink.take(&mut reports);
            for report in reports.drain(..) {
                self.report(&report);
            }
            if stopping {
                break;
            }
            // Nothing running: nothing can stall until a shard wakes, and
            // a stall that starts meanwhile reports itself when it ends;
            // only a poll that never ends waits for this round.
            nap = if busy {
                self.threshold
            } else {
                (nap * 2).min(MAX_NAP)
            };
        }
    }

    /// Reports polls running for `ongoing_after` (once each); true when a
    /// shard is in a poll or the blocking pool has a queue.
    fn check_running(&self) -> bool {
        let now = precise_ns();
        let mut busy = false;
        for (id, shard) in self.shared.shards.iter().enumerate() {
            let Some(poll) = shard.poll.running() else {
                continue;
            };
            busy = true;
            let ran = Duration::from_nanos(now.saturating_sub(poll.start));
            if ran >= self.ongoing_after && shard.poll.claim(poll.start) {
                Counters::bump_shared(&shard.counters.stalls);
                self.report(&StallReport::Shard {
                    shard: id,
                    duration: ran,
                    spawned_at: poll.location,
                    ongoing: true,
                });
            }
        }
        busy || self.shared.blocking.oldest().is_some()
    }

    /// A job still waiting (every pool thread stuck) is reported here; one
    /// that gets a thread is reported by that thread.
    fn check_blocking(&self, sink: &super::Sink) {
        if let Some((queued_at, queued, threads)) = self.shared.blocking.oldest() {
            sink.blocking_waited(queued_at, queued_at.elapsed(), queued, threads);
        }
    }

    fn report(&self, report: &StallReport) {
        match &self.callback {
            // A panicking callback costs that report, never the watcher.
            Some(f) => drop(catch_unwind(AssertUnwindSafe(|| f(report)))),
            None => log::warn!(target: "spargio::stall", "{report}"),
        }
    }
}
