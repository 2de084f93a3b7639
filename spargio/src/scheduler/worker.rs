//! The shard loop.
//!
//! Each pass of the loop:
//!
//! 1. Drain the inbox (remote wakes of pinned tasks, outside messages).
//! 2. Reap completions without blocking (entering the kernel only when the
//!    ring says that makes progress), and wake `next_event` waiters when
//!    messages are pending.
//! 3. Run up to `steal_budget` tasks. Order: the LIFO slot (the task most
//!    recently woken by a running task, for message-passing locality) for at
//!    most 3 polls in a row, then the pinned queue and the stealable deque in
//!    alternation (neither kind can starve the other), then a batch from
//!    this shard's injector.
//! 4. Send the doorbells the batch produced, and submit queued SQEs if
//!    more work is queued; a shard about to idle leaves them to the park's
//!    `io_uring_enter`, which submits and waits in one call.
//! 5. With nothing to run: try to steal (see `steal.rs`), else go idle:
//!    spin for the adaptive window (`spin.rs`) polling every source, then park
//!    in `io_uring_enter` (see `driver/wake.rs` for the handshake).
//!
//! A doorbell for a parked shard is submitted the moment it is requested,
//! even from inside a task poll: a task that then blocks its thread (or
//! simply runs long) must not hold back the wake.
//!
//! Everything here runs on the shard's own thread. Interior mutability is
//! `Cell`/`RefCell`; no borrow is held across a task poll or a waker call.

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::run_queue::{Origin, RunQueue};
use super::spin::{AdaptiveSpin, SchedstatSlot};
use super::steal::StealState;
#[cfg(feature = "tokio-compat")]
pub(crate) use super::tokio_shard::TokioParts;
use super::{inbox::Command, ShardShared, Shared};
use crate::driver::{DirectMsg, Driver, Reaped, Ring};
use crate::messaging::EventState;
use crate::scheduler::context;
use crate::shard_id::ShardId;
use crate::stats::Counters;
use crate::task::meta::TaskKind;
use crate::task::spawn::Runnable;

/// How long a shard in shutdown sleeps between checks for remaining tasks.
pub(super) const SHUTDOWN_POLL: Duration = Duration::from_millis(1);

/// Longest sleep of an idle shard while another shard is executing (see
/// `Worker::park`).
pub(super) const LIFO_WATCHDOG: Duration = Duration::from_millis(1);

/// One shard's thread-local core. Field order is drop order: the driver
/// (and the kernel memory it guards) goes first, after only the tokio
/// runtime that watches its fd.
/// The task a shard is polling, as `task::roam` sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunningTask {
    pub(crate) kind: TaskKind,
    /// The shard whose thread scheduled this run (`None`: a thread outside
    /// the runtime).
    pub(crate) woken_by: Option<ShardId>,
}

pub(crate) struct Worker {
    /// The shard's tokio runtime, from the start of `run` to its end
    /// (`tokio_shard.rs`). Before the driver: it watches the driver's fd.
    #[cfg(feature = "tokio-compat")]
    pub(super) tokio: RefCell<Option<super::tokio_shard::ShardTokio>>,
    pub(super) driver: RefCell<Driver>,
    pub(super) queue: RunQueue,
    pub(crate) events: RefCell<EventState>,
    pub(super) doorbells: RefCell<Vec<ShardId>>,
    fired: RefCell<Vec<std::task::Waker>>,
    /// Follow-up of the last reap: wakers to call and orphaned resources to
    /// drop, outside the driver borrow (see `ops.rs`).
    pub(super) reaped: RefCell<Reaped>,
    /// Operation SQEs pushed while the driver was borrowed (see
    /// `Worker::push_sqe`).
    pub(super) staged: RefCell<Vec<io_uring::squeue::Entry>>,
    /// Direct messages taken from the driver: received, refused (see
    /// `direct.rs`); and refused ones waiting for mailbox room.
    pub(super) direct_scratch: RefCell<(Vec<DirectMsg>, Vec<DirectMsg>)>,
    pub(super) direct_retry: RefCell<std::collections::VecDeque<DirectMsg>>,
    /// Sums of coalesced hot tags waiting for mailbox room (`coalesce.rs`).
    pub(super) coalesced_out: RefCell<Vec<super::coalesce::PendingSum>>,
    pub(super) steal: RefCell<StealState>,
    /// The shard's shared receive pool (`buf/ring.rs`, `shard_pool`).
    pub(crate) recv_pool: RefCell<crate::buf::ring::ShardPool>,
    in_poll: Cell<bool>,
    /// Where the idle spin in progress began, carried over a turn of
    /// tokio (`park.rs`).
    pub(super) spin_since: Cell<Option<Instant>>,
    /// The task being polled: its kind and who woke it (`task/roam.rs`).
    pub(crate) running: Cell<Option<RunningTask>>,
    /// Counts polls down to the next timed one (`stats/histogram.rs`).
    poll_sample: Cell<u32>,
    /// The ring-pressure warning went out (once per shard).
    pub(super) ring_warned: Cell<bool>,
    /// The coarse time at the end of the last poll (the next poll's start,
    /// for the stall detector; refreshed at each batch's start).
    pub(super) poll_clock: Cell<u64>,
    /// How long to spin before parking (see `spin.rs`).
    pub(super) spin: AdaptiveSpin,
    /// The last spin found another shard waiting for this CPU: the next
    /// idle gap parks at once (`share_cpu.rs`).
    pub(super) cede: Cell<bool>,
    /// At most this many shards spin at once (half of them, at least one).
    pub(super) max_spinners: usize,
    pub(crate) id: ShardId,
    pub(crate) shared: Arc<Shared>,
    /// What this shard's `ShardCtx`s point at (see `messaging::ShardRef`).
    pub(crate) ctx: Arc<crate::messaging::ShardRef>,
}

impl Worker {
    pub(crate) fn new(
        shared: Arc<Shared>,
        id: ShardId,
        deque: crossbeam_deque::Worker<Runnable>,
        driver: Driver,
        schedstat: SchedstatSlot,
    ) -> Worker {
        let n = shared.shard_count();
        Worker {
            driver: RefCell::new(driver),
            queue: RunQueue::new(deque),
            events: RefCell::new(EventState::new()),
            doorbells: RefCell::new(Vec::with_capacity(n)),
            fired: RefCell::new(Vec::new()),
            reaped: RefCell::new(Reaped::default()),
            staged: RefCell::new(Vec::new()),
            direct_scratch: RefCell::new((Vec::new(), Vec::new())),
            direct_retry: RefCell::new(std::collections::VecDeque::new()),
            coalesced_out: RefCell::new(Vec::new()),
            steal: RefCell::new(StealState::new(id, n)),
            recv_pool: RefCell::new(crate::buf::ring::ShardPool::Untried),
            in_poll: Cell::new(false),
            spin_since: Cell::new(None),
            running: Cell::new(None),
            poll_sample: Cell::new(1),
            ring_warned: Cell::new(false),
            poll_clock: Cell::new(0),
            spin: AdaptiveSpin::new(shared.config.spin_before_park, schedstat),
            cede: Cell::new(false),
            max_spinners: (n / 2).max(1),
            id,
            ctx: crate::messaging::ShardRef::new(shared.clone(), id),
            shared,
            #[cfg(feature = "tokio-compat")]
            tokio: RefCell::new(None),
        }
    }

    pub(crate) fn me(&self) -> &ShardShared {
        &self.shared.shards[self.id]
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.me().counters
    }

    /// Runs the shard until shutdown, then drains it.
    ///
    /// Fail-stop: task polls and foreign callbacks are caught where they
    /// run, so a panic reaching this far is the runtime's own (a ring the
    /// kernel stopped accepting). The shard cannot go on, and a runtime
    /// with a dead shard would strand the tasks homed there, so it shuts
    /// the whole runtime down: every task is dropped (their `JoinHandle`s
    /// report cancellation) and `Runtime::drop` returns instead of hanging.
    pub(crate) fn run(&self, #[cfg(feature = "tokio-compat")] tokio: Option<TokioParts>) {
        let _enter = context::enter(self);
        #[cfg(feature = "tokio-compat")]
        let tokio = self.start_tokio(tokio);
        #[cfg(feature = "tokio-compat")]
        let tokio_entered = tokio.as_ref().map(tokio::runtime::Handle::enter);
        let ran = catch_unwind(AssertUnwindSafe(|| {
            // With a tokio runtime, the same loop as its `block_on`'s main
            // future (`tokio_shard/shard_loop.rs`).
            #[cfg(feature = "tokio-compat")]
            if self.run_in_tokio() {
                return;
            }
            // Every source was polled since the last task ran: the idle
            // loop that found work has just done step 1 and 2.
            let mut fresh = false;
            while !self.shared.is_closing() {
                if !fresh {
                    self.maintenance();
                }
                let ran = self.run_batch();
                let more = !self.queue.is_empty(&self.me().lifo);
                // About to idle: leave the batch's SQEs for the park's
                // `io_uring_enter`, which submits and waits in one call.
                // Doorbells still go out now (another shard waits on them).
                self.push_doorbells(more);
                fresh = !more && self.idle(ran == 0);
            }
        }));
        if ran.is_err() {
            // Also on stderr: an application without a logger would
            // otherwise see its runtime stop without a word.
            eprintln!(
                "spargio shard {}: the shard loop panicked; shutting the runtime down",
                self.id
            );
            crate::diag::event::shard_failed(self.id);
            self.shared.begin_shutdown();
        }
        if catch_unwind(AssertUnwindSafe(|| self.shutdown())).is_err() {
            self.shutdown_without_ring();
        }
        #[cfg(feature = "tokio-compat")]
        {
            drop(tokio_entered);
            self.stop_tokio();
        }
    }

    /// After [`Worker::run`]: the shard's ring, quiesced, for the runtime to
    /// close once the shard threads are joined (`driver::uring`'s module
    /// doc says why).
    pub(crate) fn into_ring(self) -> Option<Ring> {
        self.driver.into_inner().into_ring()
    }

    /// Steps 1 and 2: inbox, completions, timers, message waiters.
    pub(super) fn maintenance(&self) {
        // Where this shard runs, for `IncomingCpu` stream placement: a
        // read of the kernel's per-thread rseq area (glibc 2.35+), and a
        // store only when the kernel has moved us.
        self.publish_cpu();
        self.drain_inbox();
        self.poll_driver();
        self.fire_timers();
        #[cfg(feature = "tokio-compat")]
        self.turn_tokio();
        self.deliver_events();
    }

    /// Wakes the tasks whose timers are due (reads the clock only when a
    /// timer is armed).
    fn fire_timers(&self) {
        let timers = &self.me().timers;
        let Some(now) = timers
            .next_tick()
            .and_then(|next| self.shared.clock.due(next))
        else {
            return;
        };
        let mut fired = std::mem::take(&mut *self.fired.borrow_mut());
        timers.fire_due(now, &mut fired);
        for waker in fired.drain(..) {
            self.wake_foreign(waker);
        }
        *self.fired.borrow_mut() = fired;
    }

    /// Calls a waker the shard did not create (a timer's, an event
    /// waiter's): a panic in it costs that wake only, never the shard.
    pub(crate) fn wake_foreign(&self, waker: std::task::Waker) {
        if catch_unwind(AssertUnwindSafe(|| waker.wake())).is_err() {
            Counters::bump_local(&self.counters().callbacks_panicked);
        }
    }

    pub(super) fn timer_due(&self) -> bool {
        self.me()
            .timers
            .next_tick()
            .is_some_and(|next| self.shared.clock.due(next).is_some())
    }

    fn drain_inbox(&self) {
        let inbox = &self.me().inbox;
        if inbox.is_empty() {
            return;
        }
        // Bounded by the length seen on entry so producers cannot livelock us.
        for _ in 0..inbox.len() {
            match inbox.pop() {
                Some(Command::Run(r)) => {
                    self.queue.push_back(r);
                }
                Some(Command::Message { tag, val }) => {
                    self.events.borrow_mut().push_external(tag, val);
                }
                Some(Command::Submit { key, sqe }) => self.push_remote_op(key, sqe),
                Some(Command::Cancel { key }) => self.cancel_remote_op(key),
                None => break,
            }
        }
    }

    /// Non-blocking submit-and-reap, then retries failed doorbells.
    fn poll_driver(&self) {
        let (res, health) = {
            let mut reaped = self.reaped.borrow_mut();
            let mut driver = self.driver.borrow_mut();
            let res = driver.poll(&self.me().ops, &mut reaped);
            (res, driver.take_health())
        };
        self.note_ring_health(health);
        self.check_ring(res.map(drop));
        self.settle_reaped();
        self.take_direct();
        self.flush_coalesced();
        self.retry_failed_doorbells();
    }

    /// Step 2's submit-and-reap, from inside a task's poll: for a send
    /// that must not wait for the end of the loop turn (`io::Compat`'s
    /// write behind its own queued send). Completions settle as the
    /// loop's would: the tasks they wake queue behind the others, not in
    /// the LIFO slot. False when the ring is busy or the enter failed
    /// (the loop's own poll then meets the failure and handles it).
    pub(crate) fn submit_and_reap(&self) -> bool {
        let (res, health) = {
            let Ok(mut reaped) = self.reaped.try_borrow_mut() else {
                return false;
            };
            let Ok(mut driver) = self.driver.try_borrow_mut() else {
                return false;
            };
            self.flush_staged(&mut driver);
            let res = driver.poll(&self.me().ops, &mut reaped);
            (res, driver.take_health())
        };
        self.note_ring_health(health);
        let in_poll = self.in_poll.replace(false);
        self.settle_reaped();
        self.in_poll.set(in_poll);
        res.is_ok()
    }

    pub(super) fn check_ring(&self, res: std::io::Result<()>) {
        if let Err(err) = res {
            // The ring is our own and its fd valid for our whole life: an
            // error here means the kernel refused a well-formed request.
            panic!("spargio shard {}: io_uring_enter failed: {err}", self.id);
        }
    }

    pub(super) fn retry_failed_doorbells(&self) {
        let mut failed = Vec::new();
        {
            let mut driver = self.driver.borrow_mut();
            if !driver.has_failed_doorbells() {
                return;
            }
            driver.take_failed_doorbells(&mut failed);
        }
        for target in failed {
            // The MSG_RING could not be posted (target CQ full or ring
            // closing): ring the eventfd instead, which cannot fail.
            crate::diag::event::doorbell_refused(self.id, target);
            self.shared.shards[target].eventfd.ring();
        }
    }

    /// Step 3.
    pub(super) fn run_batch(&self) -> usize {
        let budget = self.shared.config.steal.budget;
        let mut ran = 0;
        if self.shared.stall.is_some() {
            self.poll_clock.set(crate::diag::coarse_ns());
        }
        while ran < budget {
            let Some((r, origin)) = self.next_task() else {
                break;
            };
            self.run_task(r, origin);
            ran += 1;
        }
        // For the stats: what is left queued after the pass. Relaxed: a
        // gauge, and this thread its only writer. Stored only when it
        // changed: the line is shared with fields other shards read on
        // every idle round, and a store would take it from them.
        let depth = self.queue.local_len(&self.me().lifo);
        let gauge = &self.me().local_depth;
        if gauge.load(Ordering::Relaxed) != depth {
            gauge.store(depth, Ordering::Relaxed);
        }
        ran
    }

    fn next_task(&self) -> Option<(Runnable, Origin)> {
        self.queue.pop(&self.me().lifo).or_else(|| {
            let limit = self.shared.config.steal.batch_size;
            self.me()
                .inject
                .steal_batch_with_limit_and_pop(self.queue.deque(), limit)
                .success()
                .map(|r| (r, Origin::Deque))
        })
    }

    fn run_task(&self, r: Runnable, origin: Origin) {
        let counters = self.counters();
        if r.metadata().is_aborted() {
            // Cancels the task: its future is dropped here, on a thread it
            // may run on.
            if catch_unwind(AssertUnwindSafe(|| drop(r))).is_err() {
                Counters::bump_local(&counters.tasks_panicked);
            }
            return;
        }
        Counters::bump_local(&counters.tasks_polled);
        if r.metadata().kind == TaskKind::Stealable {
            Counters::bump_local(&counters.stealable_executed);
            if origin != Origin::Lifo {
                Counters::bump_local(&counters.stealable_local_hits);
            }
        }
        self.in_poll.set(true);
        let meta = r.metadata();
        let outer = self.running.replace(Some(RunningTask {
            kind: meta.kind,
            woken_by: meta.woken_by(),
        }));
        let stall = self.shared.stall.as_deref();
        if let Some(sink) = stall {
            let meta = r.metadata();
            let task = crate::diag::task_id(meta.home, meta.key);
            sink.slot(self.id)
                .begin(meta.location, task, self.poll_clock.get());
        }
        let sample = self.poll_sample.get() - 1;
        self.poll_sample.set(if sample == 0 {
            crate::stats::SAMPLE_EVERY
        } else {
            sample
        });
        let timed = (sample == 0).then(Instant::now);
        // The harness turns a panic in `poll` into the task's output; this
        // catches one from a destructor run by the poll.
        let res = catch_unwind(AssertUnwindSafe(|| r.run()));
        if let Some(t) = timed {
            self.me().poll_times.record(t.elapsed());
        }
        if let Some(sink) = stall {
            let (stalled, now) = sink.slot(self.id).end(self.id, sink);
            self.poll_clock.set(now);
            if stalled {
                Counters::bump_local(&counters.stalls);
            }
        }
        self.in_poll.set(false);
        self.running.set(outer);
        if res.is_err() {
            Counters::bump_local(&counters.tasks_panicked);
        }
        #[cfg(feature = "tokio-compat")]
        self.run_spawned_tokio_tasks();
    }

    /// Queues a woken task on this shard.
    pub(crate) fn schedule(&self, r: Runnable, yielded: bool) {
        match r.metadata().kind {
            TaskKind::Pinned(owner) if owner != self.id => {
                self.shared.schedule_remote(r, TaskKind::Pinned(owner));
            }
            TaskKind::Blocking => self.shared.blocking.schedule(r),
            _ => self.enqueue_local(r, !yielded),
        }
    }

    /// Queues a new task on this shard. New tasks never take the LIFO slot:
    /// the slot is invisible to stealers, and a spawner that then blocks its
    /// thread would strand the child there.
    pub(crate) fn schedule_new(&self, r: Runnable) {
        self.enqueue_local(r, false);
    }

    fn enqueue_local(&self, r: Runnable, lifo: bool) {
        #[cfg(feature = "tokio-compat")]
        self.count_wake();
        let to_deque = if lifo && self.in_poll.get() {
            if r.metadata().kind == TaskKind::Stealable && self.shared.shard_count() > 1 {
                self.shared.idle.ensure_watcher(&self.shared, self.id);
            }
            match self.queue.push_lifo(&self.me().lifo, r) {
                Some(prev) => self.queue.push_back(prev),
                None => false,
            }
        } else {
            self.queue.push_back(r)
        };
        // Outside a poll (a completion or timer woke the task), this shard
        // is about to run its queue: a sibling is worth waking only when
        // more than this one task waits.
        if to_deque && (self.in_poll.get() || self.queue.deque().len() > 1) {
            self.shared.idle.wake_one(&self.shared, self.id);
        }
    }

    /// Rings `target` now: a parked shard must not wait for the current
    /// poll to return (it may never return, if the task blocks its thread).
    /// Only when the driver is busy (we are inside its reap) is the doorbell
    /// left for the loop's next flush, moments later.
    pub(crate) fn request_doorbell(&self, target: ShardId) {
        self.doorbells.borrow_mut().push(target);
        if self.driver.try_borrow_mut().is_ok() {
            self.flush_doorbells();
        }
    }

    /// Step 4: pushes requested doorbells as `MSG_RING` SQEs and submits
    /// everything queued.
    pub(crate) fn flush_doorbells(&self) {
        self.push_doorbells(true);
    }

    /// Pushes requested doorbells as `MSG_RING` SQEs; submits what is
    /// queued when `submit` is set or a doorbell was pushed.
    pub(super) fn push_doorbells(&self, submit: bool) {
        let mut doorbells = self.doorbells.borrow_mut();
        let submit = submit || !doorbells.is_empty();
        let mut driver = self.driver.borrow_mut();
        self.flush_staged(&mut driver);
        for target in doorbells.drain(..) {
            let shard = &self.shared.shards[target];
            Counters::bump_shared(&shard.counters.doorbells_sent);
            let pushed = shard
                .msg_ring_fd()
                .is_some_and(|fd| driver.push_doorbell(fd, target).is_ok());
            if !pushed {
                shard.eventfd.ring();
            }
        }
        drop(doorbells);
        if submit && driver.has_unsubmitted() {
            let res = driver.submit();
            drop(driver);
            self.check_ring(res);
        }
    }
}
