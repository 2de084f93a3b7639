//! Each shard's tokio runtime (feature `tokio-compat`): tokio's runtime
//! APIs inside spargio tasks.
//!
//! A crate built on tokio (sqlx, redis, reqwest, tower-http's timeouts)
//! calls `tokio::spawn`, `tokio::time::sleep` or registers a
//! `tokio::net::TcpStream`, each of which needs a tokio runtime entered on
//! the calling thread. So every shard thread owns a current-thread tokio
//! runtime and drives it itself: nothing crosses threads, and the shard
//! still waits in one place. The protocol:
//!
//! 1. **The loop inside `block_on`.** The shard's whole loop (maintenance,
//!    task batches, the idle step) is the main future of one
//!    `block_on` on its tokio runtime (`shard_loop.rs`). Inside it, tokio
//!    sees its own runtime running on this thread, as in a tokio task:
//!    `tokio::spawn` and the wake of a tokio task by a spargio task go
//!    straight to the runtime's local queue (no cross-thread queue, no
//!    eventfd write, no extra `epoll_wait`), and `Handle::block_on`
//!    inside a spargio task panics as it does inside a tokio task, instead
//!    of blocking the only thread that could drive it.
//! 2. **Turns.** While busy, the loop returns to tokio for one turn
//!    (a deferred wake, as `tokio::task::yield_now`: up to 61 ready tokio
//!    tasks, then one `epoll_wait` with a zero timeout for tokio's sockets
//!    and timers, then the loop again) when one is due. Due: right after a
//!    spargio task's poll that spawned a tokio task (more tokio tasks
//!    alive than before it: the spawned task runs right after its
//!    spawner, as on tokio; sqlx returns a connection to its pool this
//!    way), when tokio work was queued from another thread, or on the gap
//!    policy: a turn that woke nothing doubles the gap to the next (up to
//!    `MAX_GAP` loop turns, or `MAX_GAP_WITH_TASKS` while tokio tasks are
//!    alive); one that woke a task brings it back to every turn. At the
//!    longest gap turns are also at least a millisecond apart. So a shard
//!    that does not use tokio pays about one `epoll_wait` per millisecond
//!    while busy, and nothing while parked.
//! 3. **No spin while in use.** A shard whose tokio runtime is in use does
//!    not spin before it parks: each spin poll would cost an `epoll_wait`,
//!    and the spin would take the CPU from the database or peer whose
//!    answer it waits for. Measured on the TechEmpower rows with sqlx
//!    (2 shards, wrk and PostgreSQL on the same 2 CPUs): spinning made
//!    9.5 `epoll_wait`s and 5 `sched_yield`s per `/queries` request.
//!    A spin that sees a turn due ends (tokio's work is work), and a spin
//!    that ended only for a turn that found nothing goes on with its
//!    window where it was (`Worker::spin_since`): restarted at each turn,
//!    with tokio tasks alive (the gap then stops at `MAX_GAP_WITH_TASKS`)
//!    the window never ran out and an idle shard never parked (1M
//!    `epoll_wait`s a second on one core; sqlx's pool keeps a maintenance
//!    task alive, asleep). On a core of its own, the spin is what keeps
//!    the database's answers cheap to take: parking there instead cost
//!    the split `/fortunes` row 12% of its throughput.
//! 4. **Parks.** An idle shard's park step hands its wait to the loop,
//!    which prepares the driver's wait, registers its driver's wake fd
//!    (`driver/uring/outside.rs`, `driver/epoll/outside.rs`) with tokio's
//!    reactor and a tokio timer for the park's bound, and returns to
//!    tokio. tokio's `epoll_wait` then waits for the ring, the doorbells,
//!    tokio's sockets and both runtimes' timers at once, and tokio tasks
//!    run while the shard would otherwise sleep. The next poll of the loop
//!    ends the park (reaps, counts it) whatever woke it.
//! 5. **A tokio task that gives the shard work** (wakes a spargio task,
//!    queues an SQE, arms an earlier spargio timer) must end the park:
//!    tokio calls the `on_thread_park` hook before each block, and the
//!    hook wakes the loop when the shard has such work.
//! 6. **The stall detector sees tokio tasks.** From the loop's return to
//!    tokio until its next poll, except while tokio blocks in its reactor
//!    (between the `on_thread_park` and `on_thread_unpark` hooks), the
//!    shard's thread belongs to tokio tasks: that stretch takes the poll
//!    slot like a spargio task's poll (`stretch.rs`), and one that runs
//!    past the threshold is a `StallReport::Tokio`. A build with
//!    `--cfg tokio_unstable` times each tokio task's poll instead
//!    (tokio's task hooks), and the report names its spawn site.
//! 7. **Shutdown** runs after the loop's `block_on` returns; its waits
//!    (`nap`, the quiesce of the ring) park in a `block_on` of their own
//!    (`ShardTokio::park`), as does every park when the loop is not in
//!    `block_on`.
//!
//! `tokio::spawn` from a shard puts the task on that shard's tokio
//! runtime; it stays there (tokio tasks are not stolen) and runs during
//! the shard's turns and parks. A tokio resource (a socket, a timer)
//! registered on one shard's runtime keeps working when the spargio task
//! that owns it is stolen: that runtime's reactor wakes the task wherever
//! it now runs.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

mod shard_loop;
mod stretch;
#[cfg(tokio_unstable)]
mod tasks;

pub(crate) use shard_loop::DeferredPark;
use stretch::Stretch;
#[cfg(tokio_unstable)]
pub(crate) use tasks::TokioTasks;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

use super::context;
use super::worker::Worker;
use crate::stats::Counters;

/// Longest gap, in loop turns, between two turns of an unused tokio
/// runtime while the shard is busy.
const MAX_GAP: u32 = 64;
/// The same while tokio tasks are alive (they may be waiting for events
/// only tokio's reactor sees).
const MAX_GAP_WITH_TASKS: u32 = 8;
/// At `MAX_GAP`, also at least this long between turns (coarse clock):
/// an idle shard's spin polls its sources thousands of times a
/// millisecond, and each turn costs an `epoll_wait` and, for `block_on`'s
/// fresh context, one small allocation.
const QUIET_GAP_NS: u64 = 1_000_000;

/// The driver's wake fd, borrowed: the driver owns it and outlives this.
struct WaitFd(RawFd);

impl AsRawFd for WaitFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// What `build` makes for a shard's tokio runtime on its own thread, so
/// every fd the runtime holds is open when `build` returns: the tokio
/// runtime (its epoll and waker), and on io_uring the eventfd the ring
/// will signal (`driver/uring/outside.rs`).
pub(crate) struct TokioParts {
    rt: tokio::runtime::Runtime,
    notify: Option<OwnedFd>,
    /// Its live tasks, recorded by tokio's hooks (`tasks.rs`).
    #[cfg(tokio_unstable)]
    pub(crate) tasks: std::sync::Arc<TokioTasks>,
}

impl TokioParts {
    /// The parts for shard `shard`; `ring`: it runs on io_uring.
    pub(crate) fn new(shard: usize, ring: bool) -> io::Result<TokioParts> {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        builder
            .enable_all()
            .thread_name(format!("spargio-tokio-blocking-{shard}"))
            .on_thread_park(|| context::with_worker(|w| w.map_or((), Worker::tokio_before_park)))
            .on_thread_unpark(|| context::with_worker(|w| w.map_or((), Worker::tokio_after_park)));
        // Each live task's spawn site, for task dumps (`tasks.rs`).
        #[cfg(tokio_unstable)]
        let tasks = std::sync::Arc::new(TokioTasks::default());
        #[cfg(tokio_unstable)]
        {
            let (spawned, ended) = (tasks.clone(), tasks.clone());
            builder
                .on_task_spawn(move |meta| spawned.spawned(meta.id(), meta.spawned_at()))
                .on_task_terminate(move |meta| ended.ended(meta.id()));
        }
        // Step 6: each tokio task's poll timed, with its spawn site.
        #[cfg(tokio_unstable)]
        builder
            .on_before_task_poll(|meta| {
                let at = meta.spawned_at();
                context::with_worker(|w| w.map_or((), |w| w.tokio_poll_begin(at)));
            })
            .on_after_task_poll(|_| context::with_worker(|w| w.map_or((), Worker::tokio_poll_end)));
        let rt = builder.build()?;
        let notify = if ring {
            // SAFETY: plain eventfd creation; the result is checked.
            let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: a fresh fd nothing else owns.
            Some(unsafe { OwnedFd::from_raw_fd(raw) })
        } else {
            None
        };
        Ok(TokioParts {
            rt,
            notify,
            #[cfg(tokio_unstable)]
            tasks,
        })
    }
}

/// One shard's tokio runtime and the state of its turns and parks.
pub(crate) struct ShardTokio {
    /// Dropped before `rt`: deregister from its reactor.
    wake: AsyncFd<WaitFd>,
    doorbell: Option<AsyncFd<WaitFd>>,
    metrics: tokio::runtime::RuntimeMetrics,
    rt: tokio::runtime::Runtime,
    /// Loop turns to the next turn, and the current gap.
    countdown: Cell<u32>,
    gap: Cell<u32>,
    last_turn_ns: Cell<u64>,
    /// Tasks woken on this shard, counted to tell a turn that did something.
    pub(super) wakes: Cell<u64>,
    /// Inside a park: its future's waker, whether the hook cut it short,
    /// and the spargio timer deadline the park's timeout was made for.
    parking: Cell<bool>,
    cut: Cell<bool>,
    waker: RefCell<Option<Waker>>,
    timer: Cell<Option<u64>>,
    /// Where the turn in progress began: wakes counted, and whether tokio
    /// work was queued from outside.
    turn_start: Cell<(u64, bool)>,
    /// The shard loop runs inside `block_on` (`shard_loop.rs`); then a
    /// turn or a park is asked of the loop, never nested.
    pub(super) looping: Cell<bool>,
    /// The loop is asked for a turn of tokio; it yielded for one.
    pub(super) want_turn: Cell<bool>,
    pub(super) yielded: Cell<bool>,
    /// A park `Worker::park` asked the loop for; the loop's park in
    /// progress.
    pub(super) want_park: Cell<Option<shard_loop::DeferredPark>>,
    pub(super) parked: Cell<Option<shard_loop::DeferredPark>>,
    /// tokio tasks alive when last looked at: more after a task's poll
    /// means it spawned one, which runs right after it (a turn).
    alive_seen: Cell<usize>,
    /// The loop's park timeout, reset for each park (made once: a tokio
    /// timer is an allocation).
    sleep: RefCell<Pin<Box<tokio::time::Sleep>>>,
    /// Who has the thread, for the stall detector (step 6).
    stretch: Cell<Stretch>,
}

impl ShardTokio {
    /// Shard `shard`'s tokio runtime from `rt`, watching its driver's
    /// `wait_fd` (and `doorbell_fd`, see `driver/uring/outside.rs`). On the
    /// shard's thread.
    fn new(
        rt: tokio::runtime::Runtime,
        wait_fd: RawFd,
        doorbell_fd: Option<RawFd>,
    ) -> io::Result<ShardTokio> {
        let watch = |fd: RawFd| {
            let _in = rt.enter();
            // The fd outlives the registration: it is the driver's wake fd
            // or the shard's doorbell eventfd (`ShardShared`), and a
            // `ShardTokio` is dropped before the driver (`stop_tokio`, and
            // the `tokio` field comes before `driver` in `Worker`).
            // SAFETY: `fd` stays open and names the same file for this
            // `AsyncFd`'s life (above); `WaitFd` always returns that fd.
            let registered =
                unsafe { AsyncFd::register_with_interest(WaitFd(fd), Interest::READABLE) };
            registered.map_err(|e| e.into_parts().1)
        };
        let wake = watch(wait_fd)?;
        let doorbell = doorbell_fd.map(watch).transpose()?;
        let sleep = {
            let _in = rt.enter();
            Box::pin(tokio::time::sleep(Duration::from_secs(86_400)))
        };
        Ok(ShardTokio {
            wake,
            doorbell,
            metrics: rt.metrics(),
            rt,
            countdown: Cell::new(1),
            gap: Cell::new(1),
            last_turn_ns: Cell::new(0),
            wakes: Cell::new(0),
            parking: Cell::new(false),
            cut: Cell::new(false),
            waker: RefCell::new(None),
            timer: Cell::new(None),
            turn_start: Cell::new((0, false)),
            looping: Cell::new(false),
            want_turn: Cell::new(false),
            yielded: Cell::new(false),
            want_park: Cell::new(None),
            parked: Cell::new(None),
            alive_seen: Cell::new(0),
            sleep: RefCell::new(sleep),
            stretch: Cell::new(Stretch::Loop),
        })
    }

    /// The last turns found tokio work: its sockets and timers are in
    /// use on this shard.
    pub(super) fn hot(&self) -> bool {
        self.gap.get() <= 2
    }

    /// Whether this loop turn should turn the runtime.
    pub(super) fn turn_due(&self) -> bool {
        if self.metrics.global_queue_depth() > 0 {
            return true;
        }
        let left = self.countdown.get();
        if left > 1 {
            self.countdown.set(left - 1);
            return false;
        }
        self.gap.get() < MAX_GAP
            || crate::diag::coarse_ns().saturating_sub(self.last_turn_ns.get()) >= QUIET_GAP_NS
    }

    /// One non-blocking turn: ready tokio tasks, then tokio's reactor and
    /// timers with a zero timeout. Then the next gap.
    pub(super) fn turn(&self) {
        debug_assert!(!self.looping.get(), "a nested block_on");
        self.begin_turn();
        self.rt.block_on(tokio::task::yield_now());
        self.end_turn();
    }

    fn begin_turn(&self) {
        let queued = self.metrics.global_queue_depth() > 0;
        self.turn_start.set((self.wakes.get(), queued));
    }

    /// After a turn: the gap to the next one.
    fn end_turn(&self) {
        let (wakes, queued) = self.turn_start.get();
        self.alive_seen.set(self.metrics.num_alive_tasks());
        if self.gap.get() >= MAX_GAP {
            self.last_turn_ns.set(crate::diag::coarse_ns());
        }
        let gap = if queued || self.wakes.get() != wakes {
            1
        } else if self.metrics.num_alive_tasks() > 0 {
            (self.gap.get() * 2).min(MAX_GAP_WITH_TASKS)
        } else {
            (self.gap.get() * 2).min(MAX_GAP)
        };
        self.gap.set(gap);
        self.countdown.set(gap);
    }

    /// Parks in the runtime until the driver's wake fd reports, `timeout`
    /// passes, or the shard gets work from a tokio task or event (the
    /// `on_thread_park` hook). `timer`: the spargio timer deadline
    /// `timeout` covers.
    pub(super) fn park(&self, timeout: Option<Duration>, timer: Option<u64>) {
        debug_assert!(!self.looping.get(), "a nested block_on");
        self.cut.set(false);
        self.timer.set(timer);
        self.parking.set(true);
        self.rt.block_on(async {
            let wait = WaitReadable {
                tokio: self,
                stale: true,
            };
            match timeout {
                Some(t) => drop(tokio::time::timeout(t, wait).await),
                None => wait.await,
            }
        });
        self.parking.set(false);
        // The park was a turn: the next one is a gap away.
        self.countdown.set(self.gap.get());
    }

    /// The loop's park (`shard_loop.rs`): registers `cx` with the wake
    /// fds, `timeout`'s timer and the `on_thread_park` hook. False when
    /// it is over already (a wake fd is readable, the timeout passed).
    /// `timer`: the spargio timer deadline `timeout` covers.
    fn arm_park(
        &self,
        cx: &mut Context<'_>,
        timeout: Option<Duration>,
        timer: Option<u64>,
    ) -> bool {
        self.cut.set(false);
        self.timer.set(timer);
        self.parking.set(true);
        {
            let mut waker = self.waker.borrow_mut();
            if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *waker = Some(cx.waker().clone());
            }
        }
        for fd in std::iter::once(&self.wake).chain(self.doorbell.as_ref()) {
            // Readiness cached before the park is stale (`WaitReadable`).
            let mut stale = true;
            loop {
                match fd.poll_read_ready(cx) {
                    Poll::Ready(Ok(mut guard)) if stale => {
                        guard.clear_ready();
                        stale = false;
                    }
                    Poll::Ready(_) => return false,
                    Poll::Pending => break,
                }
            }
        }
        if let Some(t) = timeout {
            let mut sleep = self.sleep.borrow_mut();
            sleep.as_mut().reset(tokio::time::Instant::now() + t);
            if sleep.as_mut().poll(cx).is_ready() {
                return false;
            }
        }
        true
    }

    /// The loop's park ended.
    fn disarm_park(&self) {
        self.parking.set(false);
        // The park was a turn: the next one is a gap away.
        self.countdown.set(self.gap.get());
    }

    /// In a park, ends it (from the `on_thread_park` hook).
    fn cut_park(&self) {
        self.cut.set(true);
        if let Some(w) = self.waker.borrow().as_ref() {
            w.wake_by_ref();
        }
    }
}

/// The park's wait for the driver's wake fds.
struct WaitReadable<'a> {
    tokio: &'a ShardTokio,
    /// Readiness cached before the park is stale: the driver collected
    /// everything ready when it prepared the wait, after the last turn that
    /// could have delivered that readiness.
    stale: bool,
}

impl Future for WaitReadable<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let t = self.tokio;
        if t.cut.get() {
            return Poll::Ready(());
        }
        {
            let mut waker = t.waker.borrow_mut();
            if !waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                *waker = Some(cx.waker().clone());
            }
        }
        let stale = std::mem::replace(&mut self.stale, false);
        let mut ready = false;
        for fd in std::iter::once(&t.wake).chain(t.doorbell.as_ref()) {
            let mut stale = stale;
            loop {
                match fd.poll_read_ready(cx) {
                    Poll::Ready(Ok(mut guard)) if stale => {
                        guard.clear_ready();
                        stale = false;
                    }
                    // Readable, or the reactor is gone (the runtime is
                    // dropping): back to the shard either way.
                    Poll::Ready(_) => {
                        ready = true;
                        break;
                    }
                    Poll::Pending => break,
                }
            }
        }
        if ready {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Worker {
    /// No spin before parking while this shard's tokio runtime is in use:
    /// each spin poll would turn it (an `epoll_wait`), and the park waits
    /// in that same `epoll_wait` for what the spin looks for (see the
    /// module doc).
    pub(super) fn tokio_hot(&self) -> bool {
        self.tokio.borrow().as_ref().is_some_and(ShardTokio::hot)
    }

    /// After a task's poll: if it `tokio::spawn`ed (the task waits in the
    /// runtime's queue), turn the runtime now, so the spawned task runs
    /// right after its spawner, as on tokio, instead of at the end of the
    /// batch. sqlx returns a connection to its pool this way: later, and
    /// requests waiting for a connection wait longer.
    pub(super) fn run_spawned_tokio_tasks(&self) {
        if let Some(t) = self.tokio.borrow().as_ref() {
            if t.looping.get() {
                // Spawned from inside the loop's poll: on tokio's own
                // queue, where no gauge shows it; the alive count does.
                let alive = t.metrics.num_alive_tasks();
                if alive > t.alive_seen.get() || t.metrics.global_queue_depth() > 0 {
                    t.want_turn.set(true);
                }
                t.alive_seen.set(alive);
            } else if t.metrics.global_queue_depth() > 0 {
                Counters::bump_local(&self.counters().tokio_turns);
                t.turn();
            }
        }
    }

    /// The tokio side of the loop's maintenance step (see the module doc).
    pub(super) fn turn_tokio(&self) {
        if let Some(t) = self.tokio.borrow().as_ref() {
            if t.turn_due() {
                if t.looping.get() {
                    t.want_turn.set(true);
                } else {
                    Counters::bump_local(&self.counters().tokio_turns);
                    t.turn();
                }
            }
        }
    }

    /// The loop is asked for a turn of tokio: an idle spin ends for it.
    pub(super) fn tokio_turn_wanted(&self) -> bool {
        self.tokio
            .try_borrow()
            .is_ok_and(|t| t.as_ref().is_some_and(|t| t.want_turn.get()))
    }

    /// `Worker::park`'s wait, when the loop runs inside `block_on`: handed
    /// to the loop, which returns to tokio for it (`shard_loop.rs`). False
    /// otherwise: the park waits itself.
    pub(super) fn defer_park(&self, park: shard_loop::DeferredPark) -> bool {
        let tokio = self.tokio.borrow();
        match tokio.as_ref().filter(|t| t.looping.get()) {
            Some(t) => {
                t.want_park.set(Some(park));
                true
            }
            None => false,
        }
    }

    /// Blocks in the tokio runtime instead of the driver (see `ops.rs`'s
    /// `park_driver`). False without a tokio runtime.
    pub(super) fn park_in_tokio(&self, timeout: Option<Duration>) -> Option<io::Result<usize>> {
        let tokio = self.tokio.borrow();
        let t = tokio.as_ref()?;
        crate::driver::faults::outside_wait_window(self.id);
        let wait = {
            let mut driver = self.driver.borrow_mut();
            self.flush_staged(&mut driver);
            driver.prepare_wait(timeout)
        };
        match wait {
            Ok(Some(timeout)) => t.park(timeout, self.me().timers.next_tick()),
            Ok(None) => {}
            Err(err) => return Some(Err(err)),
        }
        let mut reaped = self.reaped.borrow_mut();
        let mut driver = self.driver.borrow_mut();
        Some(driver.finish_wait(&self.me().ops, &mut reaped))
    }

    /// Counts a task woken on this shard (see [`ShardTokio::turn`]).
    pub(super) fn count_wake(&self) {
        if let Ok(tokio) = self.tokio.try_borrow() {
            if let Some(t) = tokio.as_ref() {
                t.wakes.set(t.wakes.get().wrapping_add(1));
            }
        }
    }

    fn doorbells_empty(&self) -> bool {
        self.doorbells.try_borrow().map_or(true, |d| d.is_empty())
    }

    /// tokio's `on_thread_park` hook: tokio is about to block its reactor.
    /// If what ran since the park began gave this shard work, end the park.
    fn tokio_before_park(&self) {
        let Ok(tokio) = self.tokio.try_borrow() else {
            return;
        };
        if let Some(t) = tokio.as_ref() {
            self.stretch_to_park(t);
        }
        let Some(t) = tokio.as_ref().filter(|t| t.parking.get()) else {
            return;
        };
        let work = !self.queue.is_empty(&self.me().lifo)
            || !self.staged.borrow().is_empty()
            || !self.doorbells_empty()
            || self
                .driver
                .try_borrow_mut()
                .is_ok_and(|mut d| d.has_unsubmitted())
            || self.events_pending()
            || self.me().timers.next_tick() != t.timer.get();
        if work {
            t.cut_park();
        }
    }
}

impl Worker {
    /// tokio's `on_thread_unpark` hook: its reactor woke.
    fn tokio_after_park(&self) {
        if let Ok(tokio) = self.tokio.try_borrow() {
            if let Some(t) = tokio.as_ref() {
                self.stretch_from_park(t);
            }
        }
    }

    /// Sets up the shard's tokio runtime from the parts `build` made, at
    /// the start of `run`, and returns its handle for `run` to enter.
    /// Panics (failing the shard, see `Worker::run`) when its fds cannot be
    /// registered: the kernel is out of memory.
    pub(super) fn start_tokio(&self, parts: Option<TokioParts>) -> Option<tokio::runtime::Handle> {
        let TokioParts { rt, notify, .. } = parts?;
        let (fd, doorbell) = {
            let mut driver = self.driver.borrow_mut();
            (driver.wait_fd(notify), driver.doorbell_fd())
        };
        let t = fd
            .and_then(|fd| ShardTokio::new(rt, fd, doorbell))
            .unwrap_or_else(|err| panic!("spargio shard {}: tokio runtime: {err}", self.id));
        let handle = t.rt.handle().clone();
        let _ = self.me().tokio.set(handle.clone());
        *self.tokio.borrow_mut() = Some(t);
        Some(handle)
    }

    /// Drops the shard's tokio runtime at the end of `run`, after the
    /// shard's tasks are gone and with the runtime no longer entered: its
    /// tasks are dropped here, on the shard, and its blocking threads
    /// joined (as tokio's own runtime drop does, it waits for blocking
    /// closures that are running).
    pub(super) fn stop_tokio(&self) {
        let t = self.tokio.borrow_mut().take();
        drop(t);
    }
}
