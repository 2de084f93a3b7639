//! The shard loop's idle step (step 5): steal, else spin, then park.
//!
//! Spinning is bounded and adaptive (`spin.rs`), yields the CPU on a
//! contended machine, and ends as soon as any source has work; the park
//! is the wake handshake of `driver/wake.rs` (publish parked, fence,
//! re-check every source, block in the ring or in the shard's tokio
//! runtime). With the shard loop inside tokio's `block_on`, the park's
//! wait is handed to the loop (`tokio_shard/shard_loop.rs`) and ended by
//! [`Worker::end_park`].

use std::time::{Duration, Instant};

use super::spin as spinning;
use super::worker::{Worker, LIFO_WATCHDOG, SHUTDOWN_POLL};
use crate::driver::handshake_fence;
use crate::stats::Counters;

impl Worker {
    /// Step 5: steal, else spin, then park. `polled`: every source was
    /// polled since the last task ran (the loop's step 1 and 2 found
    /// nothing to run), so the first look goes to other shards' work.
    /// Returns true when it found work right after polling every source,
    /// so the loop can skip its next step 1 and 2.
    ///
    /// The first `HOT_POLLS` polls stay `RUNNING`: most idle gaps in a
    /// message exchange are shorter than that, and publishing `SPINNING`
    /// costs two shared read-modify-writes each way. Staying `RUNNING` is
    /// safe: producers then skip the doorbell, and we poll every source
    /// anyway before going through the full handshake in `park`.
    pub(super) fn idle(&self, polled: bool) -> bool {
        const HOT_POLLS: u32 = 32;
        // A spin that ended for a turn of tokio that found nothing goes
        // on where it was: restarting the window at each turn would never
        // let it run out (`tokio_shard` module docs, step 3).
        let carry = self.spin_since.take();
        if (!polled && self.poll_sources()) || self.steal_work() {
            return true;
        }
        if self.shared.config.busy_poll {
            return self.busy_poll();
        }
        // The last spin found another shard waiting for this CPU: sleep,
        // so it runs here and the wakeup places this shard anew.
        let cede = self.take_cede();
        let mut spin = self.spin.window();
        #[cfg(feature = "tokio-compat")]
        if self.tokio_hot() {
            spin = Duration::ZERO;
        }
        if !cede && spin.is_zero() && self.spin.contended() && self.yield_for_work() {
            return true;
        }
        if cede || spin.is_zero() {
            // No spin: straight to the park, whose re-check covers every
            // source and whose one `io_uring_enter` submits what the batch
            // queued, runs deferred completions and waits.
            self.me().wake.set_spinning();
            self.shared.idle.spin_begin();
            self.park();
            return false;
        }
        // The spin's clock starts at its first check (`HOT_POLLS` polls
        // in), not here: most gaps end before that and need no clock read.
        let mut start = if polled { carry } else { None };
        // Carried over: its window is checked at every poll.
        let carried = start.is_some();
        let mut published = false;
        let mut polls = 0u32;
        // Past `spinning::BACKOFF_AFTER`: one poll and one offer of the CPU
        // per `spinning::BACKOFF_GAP` (see `spin.rs`).
        let mut backoff = false;
        loop {
            // A full poll each round. (A round of loads only, with a full
            // poll when one saw something, measured slower on a cross-shard
            // round trip: the faster reads of the peer's lines slow the
            // peer's writes to them.)
            std::hint::spin_loop();
            if backoff {
                spinning::pause_for(spinning::BACKOFF_GAP);
            }
            if self.poll_sources() || self.steal_work() {
                if self.queue.is_empty(&self.me().lifo) && self.me().inject.is_empty() {
                    // Only a turn of tokio is due.
                    self.spin_since
                        .set(Some(start.unwrap_or_else(Instant::now)));
                }
                break;
            }
            polls = polls.wrapping_add(1);
            if self.shared.oversubscribed {
                // More shards than CPUs: a spinning shard would take the
                // CPU from one with work to do. Offer it up each round.
                std::thread::yield_now();
            }
            if spin.is_zero() || backoff || carried || polls % HOT_POLLS == 0 {
                if !spin.is_zero() && !self.shared.oversubscribed && self.offer_cpu() {
                    // Another shard waits for this CPU (`share_cpu.rs`).
                    spin = Duration::ZERO;
                }
                if !published {
                    // The searcher bound: with half the shards already
                    // spinning, the others park at once (see `spin.rs`).
                    if !spin.is_zero() && self.shared.idle.spinning() >= self.max_spinners {
                        spin = Duration::ZERO;
                    }
                    self.me().wake.set_spinning();
                    self.shared.idle.spin_begin();
                    published = true;
                }
                let start = *start.get_or_insert_with(Instant::now);
                let spun = start.elapsed();
                backoff = spun >= spinning::BACKOFF_AFTER;
                if spin.is_zero() || spun >= spin {
                    self.park();
                    return false;
                }
            }
        }
        if published {
            self.me().wake.set_running();
            self.shared.idle.spin_end();
        }
        true
    }

    /// On a contended CPU, instead of spinning: gives the CPU away a few
    /// times (whoever is runnable here, often the peer that produces our
    /// work, runs at once), looking for work after each. True when some
    /// turned up. A park costs a kernel wakeup and, on a VM, an exit from
    /// halt; measured under hyper + wrk on two shared cores, this took the
    /// server's parks from 0.04–0.07 per request to none and its CPU per
    /// request down by about a tenth.
    fn yield_for_work(&self) -> bool {
        const YIELDS: u32 = 2;
        for _ in 0..YIELDS {
            std::thread::yield_now();
            if self.poll_sources() || self.steal_work() {
                return true;
            }
        }
        false
    }

    /// This shard's CPU is contended (the last idle gap's sample said so).
    pub(crate) fn contended(&self) -> bool {
        self.spin.contended() || crate::driver::faults::contended()
    }

    /// One idle poll of every source; true when there is something to run.
    /// `RuntimeBuilder::busy_poll`: polls every source until one has
    /// work (or the runtime closes), never parking. Published as spinning
    /// for the whole time, so wakers skip this shard's doorbell.
    fn busy_poll(&self) -> bool {
        self.me().wake.set_spinning();
        self.shared.idle.spin_begin();
        while !self.poll_sources() && !self.steal_work() {
            std::hint::spin_loop();
        }
        self.me().wake.set_running();
        self.shared.idle.spin_end();
        true
    }

    fn poll_sources(&self) -> bool {
        self.maintenance();
        let tokio_due = {
            #[cfg(feature = "tokio-compat")]
            {
                self.tokio_turn_wanted()
            }
            #[cfg(not(feature = "tokio-compat"))]
            {
                false
            }
        };
        !self.queue.is_empty(&self.me().lifo)
            || !self.me().inject.is_empty()
            || self.shared.is_closing()
            || tokio_due
    }

    /// Spinning to parked, re-check, block (see `driver/wake.rs`).
    ///
    /// While another shard is executing tasks, the block is bounded by
    /// `LIFO_WATCHDOG`: that shard could get stuck in one poll with a task
    /// waiting in its LIFO slot, and only an idle shard can notice (see
    /// `steal.rs`). A watchdog wakeup checks the slots and parks again
    /// without spinning. With every shard idle, the block is unbounded.
    fn park(&self) {
        let me = self.me();
        let mut slept_since = None;
        loop {
            // Starts the stall watcher when due (see `park`'s timeout).
            if let Some(sink) = self.shared.stall.as_deref() {
                sink.launch_due();
            }
            // Doorbells are submitted now; other queued SQEs go in with
            // the wait below (one `io_uring_enter` for both).
            self.push_doorbells(false);
            me.wake.set_parked();
            self.shared.idle.park_begin();
            // Pairs with the fence in `WakeState::notify` / `Idle::wake_one`.
            handshake_fence();
            if self.work_visible() {
                me.wake.set_running();
                self.shared.idle.park_end();
                return;
            }
            Counters::bump_local(&self.counters().parks);
            let watchdog = !self.shared.is_closing() && self.others_running();
            let bound = if self.shared.is_closing()
                || self.direct_retries_pending()
                || self.coalesced_pending()
            {
                Some(SHUTDOWN_POLL)
            } else {
                watchdog.then_some(LIFO_WATCHDOG)
            };
            // Read after the handshake fence: a timer armed from another
            // thread either shows up here or rings us (see time/timers.rs).
            let timer = self
                .me()
                .timers
                .next_tick()
                .map(|t| self.shared.clock.until_tick(t));
            let timeout = crate::time::earliest(bound, timer);
            // Until the stall watcher runs, wake when it is due to start:
            // once per shard, a second after build.
            let timeout = crate::time::earliest(
                timeout,
                self.shared.stall.as_deref().and_then(|s| s.launch_in()),
            );
            if watchdog {
                self.shared.idle.watch_begin();
            }
            let start = *slept_since.get_or_insert_with(Instant::now);
            #[cfg(feature = "tokio-compat")]
            if self.defer_park(super::tokio_shard::DeferredPark {
                timeout,
                watchdog,
                start,
            }) {
                // The loop waits in tokio, then ends the park (`end_park`).
                return;
            }
            let res = self.park_driver(timeout);
            if watchdog {
                self.shared.idle.watch_end();
            }
            let reaped = res.as_ref().map_or(0, |n| *n);
            self.check_ring(res.map(drop));
            me.wake.set_running();
            self.shared.idle.park_end();
            self.retry_failed_doorbells();
            if !watchdog || reaped > 0 || self.work_visible() || self.rescue_stuck_lifo_now() {
                self.spin.parked(start.elapsed());
                return;
            }
            // A quiet watchdog wakeup: straight back to sleep.
            me.wake.set_spinning();
            self.shared.idle.spin_begin();
        }
    }

    /// The end of a park the loop waited for in tokio (`park`'s steps
    /// after its wait; a quiet watchdog wakeup parks again through the
    /// loop).
    #[cfg(feature = "tokio-compat")]
    pub(super) fn end_park(
        &self,
        park: super::tokio_shard::DeferredPark,
        res: std::io::Result<()>,
    ) {
        if park.watchdog {
            self.shared.idle.watch_end();
        }
        self.check_ring(res);
        self.me().wake.set_running();
        self.shared.idle.park_end();
        self.retry_failed_doorbells();
        if park.watchdog {
            self.rescue_stuck_lifo_now();
        }
        self.spin.parked(park.start.elapsed());
    }

    fn others_running(&self) -> bool {
        self.shared
            .shards
            .iter()
            .enumerate()
            .any(|(i, s)| i != self.id && s.wake.is_running())
    }

    /// The re-check of step 2 of the handshake: any reason not to sleep.
    fn work_visible(&self) -> bool {
        let me = self.me();
        self.shared.is_closing()
            || !me.inbox.is_empty()
            || !me.inject.is_empty()
            || !self.queue.is_empty(&self.me().lifo)
            || self.events_pending()
            || self.timer_due()
            || self.driver.borrow_mut().has_completions()
            || self.stealable_elsewhere()
    }

    /// True when another shard has more stealable backlog than the
    /// locality margin, i.e. a steal would be attempted.
    pub(super) fn stealable_elsewhere(&self) -> bool {
        let margin = self.shared.config.steal.locality_margin;
        self.shared
            .shards
            .iter()
            .enumerate()
            .any(|(i, s)| i != self.id && s.stealable_backlog() > margin)
    }

    /// Shutdown support: parks briefly (used while waiting for other shards
    /// to drop their tasks).
    pub(super) fn nap(&self) {
        self.flush_doorbells();
        let res = self.park_driver(Some(SHUTDOWN_POLL));
        self.check_ring(res.map(drop));
        self.retry_failed_doorbells();
    }
}
