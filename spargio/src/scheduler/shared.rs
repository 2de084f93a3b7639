//! State shared by all shards of one runtime.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_deque::{Injector, Stealer};
use crossbeam_utils::CachePadded;

use super::context;
use super::idle::Idle;
use super::inbox::{Command, Inbox};
use super::lifo::LifoSlot;
use super::shutdown::ExitLatch;
use crate::driver::{Eventfd, Notify, OpTable, WakeState};
use crate::messaging::Mailboxes;
use crate::runtime::Config;
use crate::shard_id::ShardId;
use crate::stats::{Counters, RingFeatures, RuntimeStats, ShardStats};
use crate::task::blocking::BlockingPool;
use crate::task::meta::TaskKind;
use crate::task::registry::Registry;
use crate::task::spawn::Runnable;
use crate::time::timers::ShardTimers;
use crate::time::Clock;

/// What other threads may touch of one shard.
pub(crate) struct ShardShared {
    pub(crate) wake: WakeState,
    pub(crate) inbox: Inbox,
    /// Stealable tasks submitted to this shard from other threads.
    pub(crate) inject: Injector<Runnable>,
    /// The steal side of the shard's own deque.
    pub(crate) stealer: Stealer<Runnable>,
    /// The task to run next (see `lifo.rs`). Padded: the owner swaps it on
    /// every wake-to-run, other shards only read it while idle.
    pub(crate) lifo: CachePadded<LifoSlot>,
    /// The ring fd, for `MSG_RING` doorbells; -1 until the ring exists.
    ring_fd: AtomicI32,
    pub(crate) eventfd: Eventfd,
    pub(crate) counters: CachePadded<Counters>,
    pub(crate) registry: Registry,
    /// Native operations submitted to this shard's ring (their `pending()`
    /// count is a steering input).
    pub(crate) ops: OpTable,
    /// Messages from outside the runtime queued and not yet consumed.
    pub(crate) external_msgs: AtomicUsize,
    /// Sampled poll durations (`stats/histogram.rs`).
    pub(crate) poll_times: crate::stats::PollTimes,
    /// When the shard's current park began (precise ns; 0 while not
    /// parked): stats count a park still going on.
    pub(crate) parked_since: AtomicU64,
    /// Direct messages to this shard sent and not yet consumed (in flight
    /// in the kernel or queued as events); bounded like a mailbox.
    pub(crate) direct_msgs: AtomicUsize,
    /// Pinned tasks in the shard's own queue plus its LIFO slot, as the
    /// shard last saw them (published once per scheduler pass).
    pub(crate) local_depth: AtomicUsize,
    /// The CPU the shard last saw itself on (`NO_CPU` before), published
    /// at each loop turn and spin check; read by other spinning shards
    /// (`share_cpu.rs`) and by `IncomingCpu` stream placement.
    pub(crate) cpu: AtomicU32,
    /// Streams `StreamSessionPolicy::IncomingCpu` has placed here.
    pub(crate) sessions_placed: AtomicUsize,
    /// Whether the futures `task::roam` watched on this shard were lately
    /// woken from other shards (above zero) or from this one.
    pub(crate) roam_score: AtomicI32,
    pub(crate) features: OnceLock<RingFeatures>,
    /// Why this shard runs on epoll although its ring was created: the
    /// ring would not enable on the shard's thread (set once, there).
    pub(crate) ring_refusal: OnceLock<crate::IoUringRefusal>,
    pub(crate) timers: ShardTimers,
    /// The shard's shared receive pool once registered, for its stats
    /// (weak: the worker owns it).
    pub(crate) recv_pool: OnceLock<std::sync::Weak<crate::buf::ring::BufRing>>,
    /// The shard's tokio runtime (feature `tokio-compat`), for its
    /// counters in `stats`.
    #[cfg(feature = "tokio-compat")]
    pub(crate) tokio: OnceLock<tokio::runtime::Handle>,
    /// Its live tokio tasks (`--cfg tokio_unstable`), for task dumps.
    #[cfg(all(feature = "tokio-compat", tokio_unstable))]
    pub(crate) tokio_tasks: OnceLock<Arc<super::TokioTasks>>,
}

impl ShardShared {
    pub(crate) fn new(stealer: Stealer<Runnable>, eventfd: Eventfd) -> ShardShared {
        ShardShared {
            wake: WakeState::new(),
            inbox: Inbox::default(),
            inject: Injector::new(),
            stealer,
            lifo: CachePadded::new(LifoSlot::new()),
            ring_fd: AtomicI32::new(-1),
            eventfd,
            counters: CachePadded::new(Counters::default()),
            registry: Registry::default(),
            ops: OpTable::default(),
            external_msgs: AtomicUsize::new(0),
            direct_msgs: AtomicUsize::new(0),
            local_depth: AtomicUsize::new(0),
            cpu: AtomicU32::new(super::share_cpu::NO_CPU),
            sessions_placed: AtomicUsize::new(0),
            roam_score: AtomicI32::new(0),
            parked_since: AtomicU64::new(0),
            poll_times: crate::stats::PollTimes::default(),
            features: OnceLock::new(),
            ring_refusal: OnceLock::new(),
            timers: ShardTimers::new(),
            recv_pool: OnceLock::new(),
            #[cfg(feature = "tokio-compat")]
            tokio: OnceLock::new(),
            #[cfg(all(feature = "tokio-compat", tokio_unstable))]
            tokio_tasks: OnceLock::new(),
        }
    }

    /// Publishes the ring (called once, before any shard starts running).
    pub(crate) fn set_ring(&self, fd: RawFd, features: RingFeatures) {
        let _ = self.features.set(features);
        let fd = if features.msg_ring { fd } else { -1 };
        self.ring_fd.store(fd, Ordering::Release);
    }

    /// The shard's ring would not enable, and it runs on epoll: peers stop
    /// sending it `MSG_RING`s (doorbells take its eventfd, direct messages
    /// its mailbox). The ring itself stays open until the shard exits, so
    /// its fd number cannot pass to another ring while a peer may still
    /// hold it; what a peer posts to it meanwhile fails, and takes the
    /// same fallback.
    pub(crate) fn refuse_ring(&self, refusal: crate::IoUringRefusal) {
        self.ring_fd.store(-1, Ordering::Release);
        let _ = self.ring_refusal.set(refusal);
    }

    /// The ring fd to send a `MSG_RING` doorbell to, if that path is usable.
    pub(crate) fn msg_ring_fd(&self) -> Option<RawFd> {
        let fd = self.ring_fd.load(Ordering::Acquire);
        (fd >= 0).then_some(fd)
    }

    /// Stealable tasks queued here (deque plus injector).
    pub(crate) fn stealable_backlog(&self) -> usize {
        self.inject.len() + self.stealer.len()
    }
}

/// The runtime's shared core. Tasks hold it through their metadata.
pub(crate) struct Shared {
    pub(crate) shards: Box<[ShardShared]>,
    pub(crate) config: Config,
    pub(crate) mail: Mailboxes,
    pub(crate) idle: Idle,
    pub(crate) exit: ExitLatch,
    pub(crate) clock: Clock,
    pub(crate) blocking: BlockingPool,
    /// The stall detector's reports (`None`: detector off).
    pub(crate) stall: Option<Arc<crate::diag::Sink>>,
    /// More shards than CPUs this process may use. Decided here, on
    /// `build`'s thread: the first CPU count reads cgroup files, and a
    /// shard thread doing it after `build` returned would hold fds that a
    /// count taken then does not expect.
    pub(crate) oversubscribed: bool,
    closing: AtomicBool,
    rr: CachePadded<AtomicUsize>,
    /// The rotation of `StreamSessionPolicy::RoundRobin`, apart from task
    /// placement's so that steering never skews how streams spread.
    session_rr: CachePadded<AtomicUsize>,
}

impl Shared {
    pub(crate) fn new(shards: Vec<ShardShared>, config: Config) -> Shared {
        let n = shards.len();
        let stall = config
            .stall
            .threshold
            .map(|t| Arc::new(crate::diag::Sink::new(t.max(crate::diag::MIN_THRESHOLD), n)));
        Shared {
            mail: Mailboxes::new(n, config.msg_queue_capacity),
            idle: Idle::default(),
            exit: ExitLatch::new(n),
            clock: Clock::new(),
            blocking: BlockingPool::new(
                config.max_blocking_threads,
                config.blocking_keep_alive,
                format!("{}-blocking", config.thread_name),
                stall.clone(),
            ),
            stall,
            oversubscribed: n > crate::runtime::available_cpus(),
            shards: shards.into_boxed_slice(),
            config,
            closing: AtomicBool::new(false),
            rr: CachePadded::new(AtomicUsize::new(0)),
            session_rr: CachePadded::new(AtomicUsize::new(0)),
        }
    }

    pub(crate) fn shard_count(&self) -> usize {
        self.shards.len()
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Starts shutdown; true for the first caller. Every shard is rung
    /// through its eventfd (valid from any thread).
    pub(crate) fn begin_shutdown(&self) -> bool {
        // Release pairs with the Acquire in `is_closing`.
        let first = !self.closing.swap(true, Ordering::AcqRel);
        if first {
            self.blocking.shutdown();
            for shard in self.shards.iter() {
                shard.eventfd.ring();
            }
        }
        first
    }

    /// Next index of the runtime-wide rotation.
    pub(crate) fn next_rr(&self) -> usize {
        self.rr.fetch_add(1, Ordering::Relaxed) % self.shards.len()
    }

    /// The first of `n` consecutive turns of the stream-session rotation,
    /// reserved together (a batch spreads evenly even while other threads
    /// take turns too).
    pub(crate) fn next_session_rr(&self, n: usize) -> usize {
        self.session_rr.fetch_add(n, Ordering::Relaxed) % self.shards.len()
    }

    /// `StreamSessionPolicy::IncomingCpu`: the shard last seen on `cpu`,
    /// unless it is ahead of the one with the fewest streams by more than
    /// one stream plus an even share (`placed / shards`); else, and without
    /// a `cpu`, the one with the fewest, from a rotating start.
    ///
    /// The slack is wide on purpose. Connections come in bursts from one
    /// client thread at a time (a load generator's threads each open
    /// theirs), so with a slack of one stream, measured with hyper and
    /// `wrk -t2 -c16` on two cores, half of each burst went to the far
    /// shard and the spread was no better aligned than round robin.
    pub(crate) fn place_session(&self, cpu: Option<u32>) -> ShardId {
        let placed = |s: &ShardShared| s.sessions_placed.load(Ordering::Relaxed);
        let n = self.shards.len();
        let start = self.next_session_rr(1);
        let fewest = (0..n)
            .map(|i| (start + i) % n)
            .min_by_key(|&s| placed(&self.shards[s]))
            .unwrap_or(0);
        let near = cpu.and_then(|cpu| {
            self.shards
                .iter()
                .position(|s| s.cpu.load(Ordering::Relaxed) == cpu)
        });
        let slack = 1 + self.shards.iter().map(placed).sum::<usize>() / n;
        let least = placed(&self.shards[fewest]);
        let chosen = match near {
            Some(s) if placed(&self.shards[s]) <= least + slack => s,
            _ => fewest,
        };
        // Relaxed, and racy between concurrent placements: a count for an
        // even spread, not an invariant.
        self.shards[chosen]
            .sessions_placed
            .fetch_add(1, Ordering::Relaxed);
        chosen
    }

    /// Shutdown's exit condition (see `shutdown.rs`, step 3).
    pub(crate) fn all_tasks_gone(&self) -> bool {
        Registry::all_gone(self.shards.iter().map(|s| &s.registry))
    }

    /// A task ended while the runtime shuts down, the last one of its home
    /// shard. Shards that found tasks left nap until their next check
    /// (`shutdown.rs`); when this was the last one anywhere, ring them all
    /// so they see it now instead of a nap later.
    pub(crate) fn task_gone_in_shutdown(&self) {
        if self.all_tasks_gone() {
            for shard in &self.shards {
                shard.eventfd.ring();
            }
        }
    }

    /// Rings `target` after work was published for it, if it is parked.
    /// From a shard thread of this runtime the doorbell is a `MSG_RING` from
    /// that shard's ring; from elsewhere, an eventfd write.
    pub(crate) fn notify(self: &Arc<Shared>, target: ShardId) -> Notify {
        let notify = self.shards[target].wake.notify();
        match notify {
            Notify::Awake => {}
            Notify::Coalesced => {
                Counters::bump_shared(&self.shards[target].counters.doorbells_coalesced)
            }
            Notify::Ring => self.ring_doorbell(target),
        }
        notify
    }

    /// Sends the doorbell the caller won the right to send (`Notify::Ring`).
    pub(crate) fn ring_doorbell(self: &Arc<Shared>, target: ShardId) {
        context::with_worker(|worker| match worker {
            Some(w) if Arc::ptr_eq(&w.shared, self) => w.request_doorbell(target),
            _ => {
                Counters::bump_shared(&self.shards[target].counters.doorbells_sent);
                self.shards[target].eventfd.ring();
            }
        })
    }

    /// Queues a woken task from a thread that is not one of this runtime's
    /// shards (or a pinned task whose shard is another one).
    pub(crate) fn schedule_remote(self: &Arc<Shared>, runnable: Runnable, kind: TaskKind) {
        match kind {
            TaskKind::Pinned(owner) => {
                self.shards[owner].inbox.push(Command::Run(runnable));
                self.notify(owner);
            }
            TaskKind::Stealable => {
                let target = super::steer::choose(self, None, None);
                self.inject_stealable(target, runnable);
            }
            TaskKind::Blocking => self.blocking.schedule(runnable),
        }
    }

    /// Puts a stealable task into `target`'s injector and wakes it, or
    /// another idle shard that can steal it.
    pub(crate) fn inject_stealable(self: &Arc<Shared>, target: ShardId, runnable: Runnable) {
        self.shards[target].inject.push(runnable);
        let counters = &self.shards[target].counters;
        match self.notify(target) {
            Notify::Ring => Counters::bump_shared(&counters.stealable_wake_sent),
            Notify::Coalesced | Notify::Awake => {
                Counters::bump_shared(&counters.stealable_wake_coalesced)
            }
        }
    }

    pub(crate) fn stats(&self) -> RuntimeStats {
        let (blocking_threads, blocking_idle, blocking_queued) = self.blocking.usage();
        let mut stats = RuntimeStats {
            backend: self.config.backend,
            io_uring_refusal: self.config.io_uring_refusal.clone(),
            steal_victim_stride: self.config.steal.victim_stride,
            blocking_threads,
            blocking_idle,
            blocking_queued,
            blocking_stalls: self.stall.as_ref().map_or(0, |s| s.blocking_stalls()),
            stall_reports_dropped: self.stall.as_ref().map_or(0, |s| s.dropped()),
            ..RuntimeStats::default()
        };
        for shard in self.shards.iter() {
            let (timers_armed, timer_capacity) = shard.timers.usage();
            let view = ShardStats {
                timers_armed,
                timer_capacity,
                live_tasks: shard.registry.len(),
                queue_depth: shard.stealable_backlog(),
                local_queue_depth: shard.local_depth.load(Ordering::Relaxed),
                command_depth: shard.inbox.len(),
                pending_native_ops: shard.ops.pending(),
                ops_in_flight: crate::stats::ops_in_flight(&shard.ops.by_opcode()),
                ring: shard.features.get().copied().unwrap_or_default(),
                ring_refusal: shard.ring_refusal.get().cloned(),
                recv_pool_held: shard
                    .recv_pool
                    .get()
                    .and_then(std::sync::Weak::upgrade)
                    .map_or(0, |pool| pool.held()),
                ..ShardStats::default()
            };
            #[cfg(feature = "tokio-compat")]
            let view = match shard.tokio.get().map(tokio::runtime::Handle::metrics) {
                Some(m) => ShardStats {
                    tokio_alive_tasks: m.num_alive_tasks(),
                    tokio_queue_depth: m.global_queue_depth(),
                    ..view
                },
                None => view,
            };
            let (poll_time_buckets, poll_time_sum_ns) = shard.poll_times.snapshot();
            let view = ShardStats {
                poll_time_buckets,
                poll_time_sum_ns,
                ..view
            };
            stats.push_shard(&shard.counters, view);
            // A park still going on counts up to now.
            let since = shard.parked_since.load(Ordering::Relaxed);
            if since != 0 {
                let extra = crate::diag::precise_ns().saturating_sub(since);
                if let Some(last) = stats.shards.last_mut() {
                    last.counters.parked_ns += extra;
                }
                stats.totals.parked_ns += extra;
            }
        }
        stats
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("shards", &self.shards.len())
            .field("closing", &self.is_closing())
            .finish()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Only tasks that are already closed (future dropped) can be left in
        // queues here; dropping their runnables touches no future.
        for shard in self.shards.iter() {
            while shard.inbox.pop().is_some() {}
            while !shard.inject.steal().is_empty() {}
        }
    }
}
