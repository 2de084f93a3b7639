//! Shutdown: dropping every task on the right thread, then exiting.
//!
//! The protocol, per shard, once `Shared::begin_shutdown` has set the
//! closing flag and rung every shard:
//!
//! 1. Close this shard's registry (later spawns homed here fail with
//!    `Shutdown`) and wake every task registered here. Waking a task that
//!    waits on something that will never happen is what gets it scheduled,
//!    so the scheduler can drop it; the registry lock orders this against
//!    concurrent spawns, so no task registers unseen.
//! 2. Repeatedly drop everything queued on this shard: LIFO slot, pinned
//!    queue, deque, injector and inbox. Dropping a runnable drops its future
//!    here, and pinned (possibly `!Send`) tasks only ever reach their own
//!    shard's queues. Dropping one future may wake others, which land in
//!    some queue and are dropped on a later round.
//! 3. Stop when no task is left in any shard's registry, napping in the
//!    kernel between rounds: a shard must keep draining while others may
//!    still route tasks to it. Before each nap, wake again every task
//!    still registered here: a stealable task that another shard (still
//!    finishing its batch) stole and polled after step 1 woke it may have
//!    returned `Pending` holding no waker anywhere (what it waited on was
//!    dropped with another task), and nothing else would ever schedule it
//!    to be dropped. A wake of a task already queued or running is a
//!    no-op, so the extra wakes cost nothing but the registry walk.
//! 4. Drop unconsumed messages; close the op table, cancel and reap every
//!    native operation still in the ring (`ops.rs`); count this shard out
//!    of the exit latch. The driver then completes and reaps its internal
//!    operations before the ring closes (`Driver::drop`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use super::inbox::Command;
use super::worker::Worker;
use crate::stats::Counters;
use crate::task::spawn::Runnable;

impl Worker {
    pub(super) fn shutdown(&self) {
        for entry in self.me().registry.close() {
            entry.wake();
        }
        let mut doomed = Vec::new();
        loop {
            self.queue.take_all(&self.me().lifo, &mut doomed);
            while let Some(r) = self.me().inject.steal().success() {
                doomed.push(r);
            }
            self.drain_inbox_for_shutdown(&mut doomed);
            let dropped_any = !doomed.is_empty();
            for r in doomed.drain(..) {
                if catch_unwind(AssertUnwindSafe(|| drop(r))).is_err() {
                    Counters::bump_local(&self.counters().tasks_panicked);
                }
            }
            if !dropped_any && self.shared.all_tasks_gone() {
                break;
            }
            if !dropped_any {
                for entry in self.me().registry.live() {
                    entry.wake();
                }
                self.nap();
            }
        }
        self.events.borrow_mut().clear(&self.shared, self.id);
        self.quiesce_ops();
        // Unregistered here, on the shard, while the ring is open: the
        // operations that used it are reaped.
        let pool = std::mem::replace(
            &mut *self.recv_pool.borrow_mut(),
            crate::buf::ring::ShardPool::Refused,
        );
        drop(pool);
        self.shared.exit.arrive();
    }
}

impl Worker {
    /// Shutdown when the ring itself failed (`Worker::run`): the same
    /// steps, napping on the thread instead of in the ring, and leaking
    /// (never freeing) what operations still in the ring hold.
    pub(super) fn shutdown_without_ring(&self) {
        for entry in self.me().registry.close() {
            let _ = catch_unwind(AssertUnwindSafe(|| entry.wake()));
        }
        let mut doomed = Vec::new();
        loop {
            self.queue.take_all(&self.me().lifo, &mut doomed);
            while let Some(r) = self.me().inject.steal().success() {
                doomed.push(r);
            }
            self.drain_inbox_for_shutdown(&mut doomed);
            let dropped_any = !doomed.is_empty();
            for r in doomed.drain(..) {
                let _ = catch_unwind(AssertUnwindSafe(|| drop(r)));
            }
            if !dropped_any && self.shared.all_tasks_gone() {
                break;
            }
            if !dropped_any {
                for entry in self.me().registry.live() {
                    let _ = catch_unwind(AssertUnwindSafe(|| entry.wake()));
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        let ops = &self.me().ops;
        let mut reaped = crate::driver::Reaped::default();
        ops.close(&mut reaped);
        ops.leak_in_ring();
        reaped.settle();
        self.shared.exit.arrive();
    }
}

impl Worker {
    pub(super) fn drain_inbox_for_shutdown(&self, out: &mut Vec<Runnable>) {
        while let Some(cmd) = self.me().inbox.pop() {
            match cmd {
                Command::Run(r) => out.push(r),
                Command::Message { .. } => {
                    self.me().external_msgs.fetch_sub(1, Ordering::Relaxed);
                }
                // Operations still go to the ring: the op table fails or
                // cancels them when it closes (see `ops.rs`).
                Command::Submit { key, sqe } => self.push_remote_op(key, sqe),
                Command::Cancel { key } => self.cancel_remote_op(key),
            }
        }
    }
}

/// Counts shards out; lets `Runtime::shutdown` (async) wait for all of
/// them without blocking its executor. (`Drop` simply joins the threads.)
#[derive(Debug)]
pub(crate) struct ExitLatch {
    state: Mutex<LatchState>,
}

#[derive(Debug)]
struct LatchState {
    remaining: usize,
    waiters: Vec<Waker>,
}

impl ExitLatch {
    pub(crate) fn new(shards: usize) -> ExitLatch {
        ExitLatch {
            state: Mutex::new(LatchState {
                remaining: shards,
                waiters: Vec::new(),
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LatchState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn arrive(&self) {
        let waiters = {
            let mut state = self.lock();
            state.remaining = state.remaining.saturating_sub(1);
            if state.remaining > 0 {
                return;
            }
            std::mem::take(&mut state.waiters)
        };
        for waker in waiters {
            // The waiters are `Runtime::shutdown` futures on any executor:
            // a panicking waker must not stop the shard from exiting.
            let _ = catch_unwind(AssertUnwindSafe(|| waker.wake()));
        }
    }

    pub(crate) fn poll_done(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.lock();
        if state.remaining == 0 {
            return Poll::Ready(());
        }
        if !state.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            state.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}
