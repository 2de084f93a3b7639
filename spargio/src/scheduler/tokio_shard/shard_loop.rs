//! The shard loop as the main future of the shard's tokio `block_on`
//! (module docs of `tokio_shard`, "The loop inside `block_on`").
//!
//! The loop runs its turns (maintenance, a batch of tasks, the idle
//! step) inside one poll for as long as it has work and tokio is not due.
//! It returns `Pending` in two ways:
//!
//! * **Yield.** A turn of tokio is due (the gap policy of `ShardTokio`,
//!   or a task just spawned tokio work): the loop registers a deferred
//!   wake (`tokio::task::yield_now`), so tokio runs its ready tasks, polls
//!   its reactor with a zero timeout, and polls the loop again at once.
//! * **Park.** `Worker::park` found nothing to do and asked for a park
//!   (`DeferredPark`): the loop prepares the driver's wait, registers the
//!   wake fds' readiness and a tokio timer for the park's timeout, and
//!   returns. tokio then blocks in its `epoll_wait` for the ring, the
//!   doorbells, tokio's sockets and both runtimes' timers at once; its
//!   `on_thread_park` hook wakes the loop when a tokio task gave the
//!   shard work. The next poll finishes the park (whatever woke it) and
//!   goes on with the loop.

use std::future::Future;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::ShardTokio;
use crate::scheduler::worker::Worker;
use crate::stats::Counters;

/// A park `Worker::park` handed to the loop: the bound of its wait, and
/// what the park step does after it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeferredPark {
    pub(crate) timeout: Option<Duration>,
    pub(crate) watchdog: bool,
    pub(crate) start: Instant,
}

impl Worker {
    /// Runs the shard loop inside the tokio runtime's `block_on` until
    /// shutdown begins. False without a tokio runtime (the caller runs the
    /// plain loop).
    pub(crate) fn run_in_tokio(&self) -> bool {
        let tokio = self.tokio.borrow();
        let Some(t) = tokio.as_ref() else {
            return false;
        };
        t.looping.set(true);
        let mut fresh = false;
        // Unconstrained: tokio's cooperative budget (128 polls of tokio
        // resources per poll of a task) would otherwise be one budget for
        // every spargio task of a loop poll, and tokio sockets would then
        // answer `Pending` to the tasks after the 128th until the loop
        // returned to tokio. spargio tasks are polled outside any tokio
        // task without the shard loop in `block_on`, unconstrained too.
        let shard_loop = std::future::poll_fn(|cx| self.poll_loop(t, cx, &mut fresh));
        t.rt.block_on(tokio::task::unconstrained(shard_loop));
        t.looping.set(false);
        true
    }

    /// One poll of the loop (module docs).
    fn poll_loop(&self, t: &ShardTokio, cx: &mut Context<'_>, fresh: &mut bool) -> Poll<()> {
        self.stretch_to_loop(t);
        if let Some(park) = t.parked.take() {
            self.finish_tokio_park(t, park);
            *fresh = false;
        }
        if t.yielded.replace(false) {
            t.end_turn();
        }
        loop {
            if self.shared.is_closing() {
                return Poll::Ready(());
            }
            if !*fresh {
                self.maintenance();
            }
            let ran = self.run_batch();
            let more = !self.queue.is_empty(&self.me().lifo);
            self.push_doorbells(more);
            if t.want_turn.replace(false) {
                // tokio's turn: its ready tasks, its reactor with a zero
                // timeout, then this future again.
                *fresh = false;
                Counters::bump_local(&self.counters().tokio_turns);
                t.begin_turn();
                t.yielded.set(true);
                let mut y = std::pin::pin!(tokio::task::yield_now());
                let _ = y.as_mut().poll(cx);
                self.stretch_to_tokio(t);
                return Poll::Pending;
            }
            *fresh = !more && self.idle(ran == 0);
            if let Some(park) = t.want_park.take() {
                *fresh = false;
                if self.begin_tokio_park(t, park, cx) {
                    self.stretch_to_tokio(t);
                    return Poll::Pending;
                }
            }
        }
    }

    /// Prepares the driver's wait and registers everything that ends it;
    /// false when the park ended already (finished here).
    fn begin_tokio_park(&self, t: &ShardTokio, park: DeferredPark, cx: &mut Context<'_>) -> bool {
        crate::driver::faults::outside_wait_window(self.id);
        let wait = {
            let mut driver = self.driver.borrow_mut();
            self.flush_staged(&mut driver);
            driver.prepare_wait(park.timeout)
        };
        let timeout = match wait {
            Ok(Some(timeout)) => timeout,
            // Ready already, or the ring failed (the finish reports it).
            Ok(None) | Err(_) => {
                self.finish_tokio_park(t, park);
                return false;
            }
        };
        self.me().parked_since.store(
            crate::diag::precise_ns(),
            std::sync::atomic::Ordering::Relaxed,
        );
        if t.arm_park(cx, timeout, self.me().timers.next_tick()) {
            t.parked.set(Some(park));
            return true;
        }
        self.finish_tokio_park(t, park);
        false
    }

    /// After the loop's park (module docs): reaps what came, then the
    /// park step's own ending (`Worker::park`).
    fn finish_tokio_park(&self, t: &ShardTokio, park: DeferredPark) {
        t.disarm_park();
        let since = self
            .me()
            .parked_since
            .swap(0, std::sync::atomic::Ordering::Relaxed);
        let (res, health) = {
            let mut reaped = self.reaped.borrow_mut();
            let mut driver = self.driver.borrow_mut();
            let res = driver.finish_wait(&self.me().ops, &mut reaped);
            (res, driver.take_health())
        };
        if since != 0 {
            let parked = crate::diag::precise_ns().saturating_sub(since);
            Counters::add_local(&self.counters().parked_ns, parked);
        }
        self.note_ring_health(health);
        self.settle_reaped();
        self.end_park(park, res.map(drop));
    }
}
