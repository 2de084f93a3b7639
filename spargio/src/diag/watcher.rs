//! The watcher thread (module docs).
//!
//! Started late, by the first shard to go idle once the runtime has run
//! for `LAUNCH_AFTER`: a runtime that lives shorter (a test, a CLI call)
//! never pays for the thread, and in its first second nothing the watcher
//! alone catches can be due (a poll is reported as ongoing after a second
//! at the earliest; every stall that ends reports itself). The spawn runs
//! on an idle shard, so no task waits for it.
//!
//! The thread holds only weak references to the sink and the blocking
//! pool: a runtime's drop does not join it. The drop stops it, waits for
//! a batch of reports it is delivering, and delivers whatever is still
//! queued on the dropping thread, so every report is out when the drop
//! returns (a callback that never returns holds the drop too); the thread
//! ends on its own moments later.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::Duration;

use super::sink::Sink;
use super::{precise_ns, StallCallback, StallReport};
use crate::scheduler::Shared;
use crate::task::blocking::WeakBlockingPool;

/// The longest the watcher sleeps while every shard rests.
const MAX_NAP: Duration = Duration::from_secs(1);

/// How long a runtime runs before its watcher thread starts.
pub(crate) const LAUNCH_AFTER: Duration = Duration::from_secs(1);

/// The runtime's end of the detector: stops the thread and delivers the
/// last reports on drop.
#[derive(Debug)]
pub(crate) struct Watcher {
    state: Arc<State>,
}

impl Watcher {
    /// The detector of `shared`, if its config asks for one; its thread
    /// starts later ([`Sink::launch_due`]).
    pub(crate) fn new(shared: &Shared) -> Option<Watcher> {
        let sink = shared.stall.as_ref()?;
        let threshold = sink.threshold();
        let state = Arc::new(State {
            sink: Arc::downgrade(sink),
            blocking: shared.blocking.downgrade(),
            threshold,
            ongoing_after: (threshold * 10).max(MAX_NAP),
            callback: shared.config.stall.callback.clone(),
            stop: AtomicBool::new(false),
            thread: Mutex::new(None),
            name: format!("{}-watch", shared.config.thread_name),
            delivering: Mutex::new(()),
        });
        sink.set_launcher(Arc::downgrade(&state));
        Some(Watcher { state })
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::Release);
        if let Some(t) = &*self.state.thread.lock().unwrap_or_else(|p| p.into_inner()) {
            t.unpark();
        }
        // What the shards queued last goes out before the runtime's drop
        // returns (the watcher may be delivering some of it concurrently:
        // each report is taken once).
        self.state.deliver();
    }
}

pub(crate) struct State {
    sink: Weak<Sink>,
    blocking: WeakBlockingPool,
    threshold: Duration,
    ongoing_after: Duration,
    callback: Option<StallCallback>,
    stop: AtomicBool,
    thread: Mutex<Option<thread::Thread>>,
    name: String,
    /// Held while reports are delivered: the runtime's drop waits for a
    /// batch the thread is delivering before it delivers the rest.
    delivering: Mutex<()>,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("threshold", &self.threshold)
            .finish_non_exhaustive()
    }
}

impl State {
    /// Starts the thread (once; called by the sink). Without a thread the
    /// runtime still runs: it only loses what the thread catches, which
    /// it says.
    pub(crate) fn launch(self: Arc<State>) {
        let mut slot = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_some() || self.stop.load(Ordering::Acquire) {
            return;
        }
        let runs = self.clone();
        match thread::Builder::new()
            .name(self.name.clone())
            .spawn(move || runs.run())
        {
            Ok(t) => *slot = Some(t.thread().clone()),
            Err(err) => super::event::no_watcher(&err),
        }
    }

    /// Wakes the thread (a report was queued).
    pub(crate) fn wake(&self) {
        if let Some(t) = &*self.thread.lock().unwrap_or_else(|p| p.into_inner()) {
            t.unpark();
        }
    }

    fn run(&self) {
        let mut nap = self.threshold;
        while !self.stop.load(Ordering::Acquire) {
            // Deliver first: reports queued before the thread started.
            self.deliver();
            let Some(sink) = self.sink.upgrade() else {
                return;
            };
            let busy = self.check_running(&sink);
            self.check_blocking(&sink);
            drop(sink);
            // Nothing running: nothing can stall until a shard wakes, and
            // a stall that starts meanwhile reports itself when it ends;
            // only a poll that never ends waits for this round.
            nap = if busy {
                self.threshold
            } else {
                (nap * 2).min(MAX_NAP)
            };
            thread::park_timeout(nap);
        }
    }

    /// Reports polls running for `ongoing_after` (once each); true when a
    /// shard is in a poll or the blocking pool has a queue.
    fn check_running(&self, sink: &Sink) -> bool {
        let now = precise_ns();
        let mut busy = false;
        for (id, slot) in sink.slots().iter().enumerate() {
            let Some(poll) = slot.running() else {
                continue;
            };
            busy = true;
            let ran = Duration::from_nanos(now.saturating_sub(poll.start));
            if ran >= self.ongoing_after && slot.claim(poll.start) {
                self.report(&poll.report(id, ran, true));
            }
        }
        busy || self.blocking.oldest().is_some()
    }

    /// A job still waiting (every pool thread stuck) is reported here; one
    /// that gets a thread is reported by that thread.
    fn check_blocking(&self, sink: &Sink) {
        if let Some((queued_at, queued, threads)) = self.blocking.oldest() {
            sink.blocking_waited(queued_at, queued_at.elapsed(), queued, threads);
        }
    }

    /// Delivers the queued reports.
    fn deliver(&self) {
        let _one_at_a_time = self.delivering.lock().unwrap_or_else(|p| p.into_inner());
        let Some(sink) = self.sink.upgrade() else {
            return;
        };
        let mut reports = Vec::new();
        sink.take(&mut reports);
        drop(sink);
        for report in &reports {
            self.report(report);
        }
    }

    fn report(&self, report: &StallReport) {
        match &self.callback {
            // A panicking callback costs that report, never the watcher.
            Some(f) => drop(catch_unwind(AssertUnwindSafe(|| f(report)))),
            None => super::event::stall(report),
        }
    }
}
