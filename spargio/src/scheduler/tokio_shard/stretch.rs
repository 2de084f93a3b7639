//! The stall detector's view of the shard's tokio tasks (module docs of
//! `tokio_shard`, step 6): while the loop has handed the thread to tokio
//! and tokio is not blocked in its reactor, the tokio tasks it polls hold
//! the shard, and the poll slot says so.

use std::panic::Location;

use super::ShardTokio;
use crate::diag::{coarse_ns, TOKIO};
use crate::scheduler::worker::Worker;
use crate::stats::Counters;

/// Who has the shard's thread, as the stall detector counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Stretch {
    /// The shard loop (its polls are timed one by one), or no loop.
    #[default]
    Loop,
    /// tokio, running its tasks: one stretch in the poll slot.
    Tokio,
    /// tokio, blocked in its reactor (the shard's park): not a stall.
    Parked,
}

impl Worker {
    /// The loop returns to tokio (for a turn or a park).
    pub(super) fn stretch_to_tokio(&self, t: &ShardTokio) {
        t.stretch.set(Stretch::Tokio);
        self.stretch_begin();
    }

    /// The loop runs again.
    pub(super) fn stretch_to_loop(&self, t: &ShardTokio) {
        if t.stretch.replace(Stretch::Loop) == Stretch::Tokio {
            self.stretch_end();
        }
    }

    /// tokio is about to block in its reactor (`on_thread_park`).
    pub(super) fn stretch_to_park(&self, t: &ShardTokio) {
        if t.stretch.get() == Stretch::Tokio {
            t.stretch.set(Stretch::Parked);
            self.stretch_end();
        }
    }

    /// tokio woke from its reactor (`on_thread_unpark`).
    pub(super) fn stretch_from_park(&self, t: &ShardTokio) {
        if t.stretch.get() == Stretch::Parked {
            t.stretch.set(Stretch::Tokio);
            self.stretch_begin();
        }
    }

    /// Without tokio's task hooks, the whole stretch is one entry: its
    /// task unknown ([`TOKIO`] alone).
    #[cfg(not(tokio_unstable))]
    fn stretch_begin(&self) {
        if let Some(sink) = self.shared.stall.as_deref() {
            sink.slot(self.id)
                .begin(Location::caller(), TOKIO, coarse_ns());
        }
    }

    #[cfg(not(tokio_unstable))]
    fn stretch_end(&self) {
        self.tokio_poll_end();
    }

    /// With tokio's task hooks each tokio task's poll is timed instead
    /// (`tokio_poll_begin`), with its spawn site.
    #[cfg(tokio_unstable)]
    fn stretch_begin(&self) {}

    #[cfg(tokio_unstable)]
    fn stretch_end(&self) {}

    /// tokio is about to poll a task spawned at `at` (its
    /// `on_before_task_poll` hook, `--cfg tokio_unstable`).
    #[cfg(tokio_unstable)]
    pub(super) fn tokio_poll_begin(&self, at: &'static Location<'static>) {
        if let Some(sink) = self.shared.stall.as_deref() {
            sink.slot(self.id).begin(at, TOKIO | 1, coarse_ns());
        }
    }

    /// The stretch, or the tokio task's poll, ended.
    pub(super) fn tokio_poll_end(&self) {
        if let Some(sink) = self.shared.stall.as_deref() {
            let (stalled, now) = sink.slot(self.id).end(self.id, sink);
            self.poll_clock.set(now);
            if stalled {
                Counters::bump_local(&self.counters().stalls);
            }
        }
    }
}
