//! A task's run state for task dumps: scheduled, running or idle.
//!
//! Two counters, written without read-modify-write: the schedule function
//! counts the times the task was queued, and each poll stores, on entry,
//! that count with a "running" bit and, on exit, the count alone. A task
//! whose last poll saw fewer queuings than have happened since is waiting
//! in a queue; one whose poll is in progress is running; else it waits
//! for a waker (idle). A poll pays one load and two relaxed stores on a
//! cache line it already owns.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::diag::TaskState;

/// Set in `polled` while a poll is in progress.
const RUNNING: u32 = 1 << 31;

/// The two counters (module docs).
#[derive(Debug)]
pub(crate) struct RunState {
    /// Times the task was queued, modulo 2^31.
    scheduled: AtomicU32,
    /// `scheduled` as the current or last poll saw it, with `RUNNING`
    /// while that poll runs.
    polled: AtomicU32,
}

impl Default for RunState {
    /// A new task: queued once (spawning queues it), never polled.
    fn default() -> RunState {
        RunState {
            scheduled: AtomicU32::new(1),
            polled: AtomicU32::new(0),
        }
    }
}

impl RunState {
    /// The task was queued (its schedule function ran).
    pub(crate) fn scheduled(&self) {
        // A load and a store, not an RMW: async-task calls the schedule
        // function once per transition into its SCHEDULED state, and those
        // transitions are ordered by its own atomic state word, so two
        // calls for one task never overlap. Relaxed: a diagnostic value
        // that publishes no memory.
        let n = self.scheduled.load(Ordering::Relaxed);
        self.scheduled
            .store(n.wrapping_add(1) & !RUNNING, Ordering::Relaxed);
    }

    /// A poll begins; returns what [`RunState::poll_ended`] takes.
    pub(crate) fn poll_started(&self) -> u32 {
        let seen = self.scheduled.load(Ordering::Relaxed);
        self.polled.store(seen | RUNNING, Ordering::Relaxed);
        seen
    }

    /// The poll that began with `seen` returned.
    pub(crate) fn poll_ended(&self, seen: u32) {
        self.polled.store(seen, Ordering::Relaxed);
    }

    /// The state now (the two loads are not one instant: a task that
    /// changes state meanwhile shows either).
    pub(crate) fn get(&self) -> TaskState {
        let polled = self.polled.load(Ordering::Relaxed);
        if polled & RUNNING != 0 {
            TaskState::Running
        } else if self.scheduled.load(Ordering::Relaxed) != polled {
            TaskState::Scheduled
        } else {
            TaskState::Idle
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_poll_wake_and_a_wake_during_a_poll() {
        let s = RunState::default();
        assert_eq!(s.get(), TaskState::Scheduled, "queued at spawn");
        let seen = s.poll_started();
        assert_eq!(s.get(), TaskState::Running);
        s.poll_ended(seen);
        assert_eq!(s.get(), TaskState::Idle);
        s.scheduled();
        assert_eq!(s.get(), TaskState::Scheduled, "woken");
        let seen = s.poll_started();
        s.scheduled();
        assert_eq!(s.get(), TaskState::Running, "woken while running");
        s.poll_ended(seen);
        assert_eq!(s.get(), TaskState::Scheduled, "queued again");
    }

    #[test]
    fn the_count_wraps_without_touching_the_running_bit() {
        let s = RunState::default();
        s.scheduled.store(RUNNING - 1, Ordering::Relaxed);
        let seen = s.poll_started();
        s.poll_ended(seen);
        s.scheduled();
        assert_eq!(s.scheduled.load(Ordering::Relaxed), 0);
        assert_eq!(s.get(), TaskState::Scheduled);
        let seen = s.poll_started();
        s.poll_ended(seen);
        assert_eq!(s.get(), TaskState::Idle);
    }
}
