//! Runtime counters and their snapshot.
//!
//! Each shard owns a cache-padded block of counters. Counters only the shard
//! itself writes are bumped with a relaxed load and store (no read-modify-
//! write); counters other threads also bump use `fetch_add`. A snapshot is a
//! relaxed read of every counter: each value is exact, the set is not a
//! single instant.

use std::sync::atomic::{AtomicU64, Ordering};

mod histogram;
mod opcodes;
mod prometheus;

pub use histogram::POLL_TIME_BUCKETS;
pub(crate) use histogram::{PollTimes, SAMPLE_EVERY};

/// Ring features one shard obtained at setup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingFeatures {
    /// Submission queue entries.
    pub sq_entries: u32,
    /// Completion queue entries.
    pub cq_entries: u32,
    /// `IORING_SETUP_SINGLE_ISSUER`.
    pub single_issuer: bool,
    /// `IORING_SETUP_COOP_TASKRUN`.
    pub coop_taskrun: bool,
    /// `IORING_SETUP_DEFER_TASKRUN`.
    pub defer_taskrun: bool,
    /// `IORING_SETUP_TASKRUN_FLAG`.
    pub taskrun_flag: bool,
    /// `IORING_SETUP_SQPOLL`.
    pub sqpoll: bool,
    /// `IORING_OP_MSG_RING` is available (otherwise shards ring each other
    /// through eventfds).
    pub msg_ring: bool,
    /// `IORING_FEAT_NODROP`: overflowed completions are kept, not dropped.
    pub nodrop: bool,
    /// `IORING_FEAT_CQE_SKIP`: successful doorbells post no sender CQE.
    pub skip_cqe_on_success: bool,
}

macro_rules! counters {
    (
        sum { $($(#[doc = $doc:literal])* $name:ident,)* }
        max { $($(#[doc = $mdoc:literal])* $mname:ident,)* }
    ) => {
        /// Per-shard counters (internal).
        #[derive(Debug, Default)]
        pub(crate) struct Counters {
            $(pub(crate) $name: AtomicU64,)*
            $(pub(crate) $mname: AtomicU64,)*
        }

        /// The per-shard counters, summed over shards (high-water marks:
        /// their maximum) at the time of the snapshot.
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct CounterTotals {
            $($(#[doc = $doc])* pub $name: u64,)*
            $($(#[doc = $mdoc])* pub $mname: u64,)*
        }

        impl CounterTotals {
            /// Every counter as (name, help, value, is a high-water mark),
            /// for exporters.
            pub(crate) fn each(&self, mut f: impl FnMut(&'static str, &'static str, u64, bool)) {
                $(f(stringify!($name), concat!($($doc),*), self.$name, false);)*
                $(f(stringify!($mname), concat!($($mdoc),*), self.$mname, true);)*
            }
        }

        impl Counters {
            fn add_into(&self, totals: &mut CounterTotals) {
                $(totals.$name += self.$name.load(Ordering::Relaxed);)*
                $(totals.$mname = totals.$mname.max(self.$mname.load(Ordering::Relaxed));)*
            }
        }
    };
}

counters! {
    sum {
        /// Pinned tasks spawned (including round-robin and sticky placements).
        spawn_pinned,
        /// Stealable tasks spawned.
        spawn_stealable,
        /// `!Send` local tasks spawned.
        spawn_local,
        /// Blocking closures spawned (counted on the shard that spawned them,
        /// or shard 0 from outside).
        spawn_blocking,
        /// Task polls run.
        tasks_polled,
        /// Polls of stealable tasks.
        stealable_executed,
        /// Stealable tasks this shard took from another shard's queues.
        stealable_stolen,
        /// Stealable tasks other shards took from this shard's queues
        /// (steals out; `stealable_stolen` counts steals in).
        stealable_stolen_from,
        /// Stealable tasks this shard ran from its own queues.
        stealable_local_hits,
        /// Victim scans made while looking for work.
        steal_scans,
        /// Scans that found a victim worth stealing from.
        steal_attempts,
        /// Attempts that moved at least one task.
        steal_success,
        /// Tasks that panicked (the panic went to their `JoinHandle`).
        tasks_panicked,
        /// Task polls the stall detector reported (longer than
        /// `stall_threshold`).
        stalls,
        /// Foreign code that panicked on this shard outside any task: wakers,
        /// destructors of abandoned operations' resources. Each panic cost
        /// only that value; the shard went on.
        callbacks_panicked,
        /// Doorbells sent to parked shards.
        doorbells_sent,
        /// Wakeups that needed no doorbell because one was already on its way.
        doorbells_coalesced,
        /// Times the shard blocked in the kernel.
        parks,
        /// Nanoseconds the shard spent blocked in the kernel (the rest of
        /// its life it ran tasks, reaped or spun).
        parked_ns,
        /// Turns of the shard's tokio runtime (feature `tokio-compat`): its
        /// ready tasks run and its reactor polled without blocking, between
        /// two passes of the shard loop.
        tokio_turns,
        /// Idle spins this shard ended early because another shard of the
        /// runtime was waiting for its CPU (the kernel had put both on one
        /// CPU); the shard parked so the other could run.
        spins_ceded,
        /// Reaps that found the completion queue overflowed: completions
        /// the kernel held back for lack of room (kept, never lost, but
        /// each costs an extra enter). Raise `ring_entries` if it grows.
        cq_overflows,
        /// Pushes that found the submission queue full: each entered the
        /// kernel early, before the loop's own submit, to make room.
        /// Raise `ring_entries` if it grows with the load.
        sq_full,
        /// Operations the kernel would not take even then (it refused new
        /// entries, as while completions overflow): they waited, in order,
        /// in the shard's backlog until it had room.
        sq_backlogged,
        /// Messages this shard sent (to any shard).
        ring_msgs_submitted,
        /// Messages sent to this shard from threads outside the runtime.
        ring_msgs_injected,
        /// Messages consumed from this shard's event stream.
        ring_msgs_completed,
        /// Sends by this shard refused with `SendError::Backpressure`.
        ring_msgs_backpressure,
        /// Outside sends to this shard refused with `SendError::Backpressure`.
        ring_msgs_injected_backpressure,
        /// Direct messages this shard posted in their own `MSG_RING`
        /// (`send_raw_direct_nowait`; included in `ring_msgs_submitted`).
        ring_msgs_direct,
        /// Direct posts of this shard the kernel refused, re-sent through
        /// the mailbox.
        ring_msgs_direct_resent,
        /// Spawns refused with `RuntimeError::Overloaded`.
        stealable_backpressure,
        /// Native operations submitted to this shard's ring (from any thread).
        native_ops_submitted,
        /// Native operations whose final completion this shard reaped.
        native_ops_completed,
        /// `ASYNC_CANCEL`s this shard pushed for dropped operations (and at
        /// shutdown).
        native_ops_cancelled,
        /// Native operations that crossed to this shard from another thread
        /// (through its inbox, a doorbell if it was parked).
        native_any_envelope_submitted,
        /// Native operations a task on this shard pushed straight into its
        /// ring.
        native_any_local_fastpath_submitted,
        /// Of those, stream operations issued on the stream's own session
        /// shard (what `spawn_on_session` arranges).
        native_any_local_direct_submitted,
        /// Stealable tasks queued on this shard from outside it whose
        /// notification rang its doorbell (it was parked).
        stealable_wake_sent,
        /// Stealable tasks queued on this shard from outside it that needed no
        /// doorbell of their own: the shard was awake, or one was already on
        /// its way.
        stealable_wake_coalesced,
        /// Sends by this shard (from outside the runtime: counted on shard 0)
        /// refused for another reason than backpressure: an invalid target,
        /// or a runtime shutting down.
        ring_msgs_failed,
    }
    max {
        /// Longest run of consecutive victim scans that found nothing to steal.
        steal_failed_streak_max,
    }
}

impl Counters {
    /// Bumps a counter only the owning shard writes.
    pub(crate) fn bump_local(counter: &AtomicU64) {
        Counters::add_local(counter, 1);
    }

    /// Adds to a counter only the owning shard writes (no read-modify-write).
    pub(crate) fn add_local(counter: &AtomicU64, n: u64) {
        counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    /// Bumps a counter several threads write.
    pub(crate) fn bump_shared(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// One shard's view in a [`RuntimeStats`] snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShardStats {
    /// This shard's counters.
    pub counters: CounterTotals,
    /// Stealable tasks queued on this shard (deque plus injector).
    pub queue_depth: usize,
    /// Pinned tasks queued on this shard, plus the task in its LIFO slot,
    /// as of the shard's last scheduler pass.
    pub local_queue_depth: usize,
    /// Commands (remote wakes of pinned tasks, outside messages) waiting in
    /// the inbox.
    pub command_depth: usize,
    /// Native I/O operations in flight on this shard's ring.
    pub pending_native_ops: usize,
    /// The ring features this shard obtained.
    pub ring: RingFeatures,
    /// Set when this shard's ring, created by `build`, would not enable
    /// on the shard's own thread (which the kernel does not refuse in
    /// practice): the shard then runs on epoll, as an `Auto` runtime does
    /// where io_uring is refused, and says so in an `error` event (target
    /// `spargio::shard`).
    pub ring_refusal: Option<crate::IoUringRefusal>,
    /// Timers armed in this shard's wheel and not yet fired.
    pub timers_armed: usize,
    /// Tasks homed on this shard that have not ended (spawned, not yet
    /// completed, cancelled or aborted).
    pub live_tasks: usize,
    /// Buffers of the shard's shared receive pool that the kernel filled
    /// and nobody gave back yet (held by receives, segments and adaptors
    /// not yet read). A count that stays up once traffic has stopped is a
    /// leak.
    pub recv_pool_held: usize,
    /// Timer slots the wheel's storage holds (it shrinks back after a
    /// storm of timers is gone).
    pub timer_capacity: usize,
    /// Tasks alive on the shard's tokio runtime (feature `tokio-compat`:
    /// spawned with `tokio::spawn` from this shard, not yet ended; 0
    /// without the feature).
    pub tokio_alive_tasks: usize,
    /// Tasks queued on the shard's tokio runtime from other threads and
    /// not yet picked up by one of its turns.
    pub tokio_queue_depth: usize,
    /// Sampled poll durations (one poll in 64 is timed): bucket `i` counts
    /// polls shorter than 2^i µs (and at least 2^(i-1)), the last one the
    /// rest (about a second and longer).
    pub poll_time_buckets: [u64; POLL_TIME_BUCKETS],
    /// The sum of the sampled poll durations, in ns.
    pub poll_time_sum_ns: u64,
    /// Native operations in flight on this shard's ring by io_uring opcode
    /// name (`"recv"`, `"accept"`, `"read"`, ...; the kernel's
    /// `IORING_OP_` names, lowercased), most first; opcodes with none are
    /// left out. They add up to `pending_native_ops`.
    pub ops_in_flight: Vec<(&'static str, usize)>,
}

/// A snapshot of the runtime's counters, from
/// [`RuntimeHandle::stats_snapshot`](crate::RuntimeHandle::stats_snapshot).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuntimeStats {
    /// The backend the runtime runs on (`IoUring` or `Epoll`).
    pub backend: crate::BackendKind,
    /// Why an `Auto` runtime runs on epoll (errno and cause).
    pub io_uring_refusal: Option<crate::IoUringRefusal>,
    /// Sums over all shards.
    pub totals: CounterTotals,
    /// One entry per shard, by shard index.
    pub shards: Vec<ShardStats>,
    /// The effective (clamped) victim stride of the steal scan.
    pub steal_victim_stride: usize,
    /// Blocking-pool threads alive.
    pub blocking_threads: usize,
    /// Blocking-pool threads waiting for work.
    pub blocking_idle: usize,
    /// Blocking jobs queued, not yet started.
    pub blocking_queued: usize,
    /// Blocking jobs the stall detector reported (queued longer than
    /// `stall_threshold`).
    pub blocking_stalls: u64,
    /// Stall reports dropped because 64 were already waiting for the
    /// detector's thread.
    pub stall_reports_dropped: u64,
    /// Per shard, by index: commands waiting in its inbox
    /// ([`ShardStats::command_depth`]).
    pub shard_command_depths: Vec<usize>,
    /// Per shard, by index: native operations in flight on its ring
    /// ([`ShardStats::pending_native_ops`]); the lane selector's input.
    pub pending_native_ops_by_shard: Vec<usize>,
}

/// The totals read flat, as the reference crate has them:
/// `stats.steal_attempts` is `stats.totals.steal_attempts`.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = spargio::Runtime::builder().shards(2).build()?;
/// let job = rt.handle().spawn_stealable(async { 1 })?;
/// spargio::block_on(job)?;
/// let stats = rt.handle().stats_snapshot();
/// assert_eq!(stats.spawn_stealable, 1);
/// assert_eq!(stats.shard_command_depths.len(), 2);
/// # Ok(()) }
/// ```
impl std::ops::Deref for RuntimeStats {
    type Target = CounterTotals;

    fn deref(&self) -> &CounterTotals {
        &self.totals
    }
}

impl RuntimeStats {
    pub(crate) fn push_shard(&mut self, counters: &Counters, mut shard: ShardStats) {
        counters.add_into(&mut shard.counters);
        counters.add_into(&mut self.totals);
        self.shard_command_depths.push(shard.command_depth);
        self.pending_native_ops_by_shard
            .push(shard.pending_native_ops);
        self.shards.push(shard);
    }

    /// Native operations in flight by opcode name, summed over shards,
    /// most first ([`ShardStats::ops_in_flight`]).
    pub fn ops_in_flight(&self) -> Vec<(&'static str, usize)> {
        let mut sum: Vec<(&'static str, usize)> = Vec::new();
        for (name, n) in self.shards.iter().flat_map(|s| &s.ops_in_flight) {
            match sum.iter_mut().find(|(have, _)| have == name) {
                Some((_, total)) => *total += n,
                None => sum.push((name, *n)),
            }
        }
        sort_most_first(&mut sum);
        sum
    }

    /// Tasks that have not ended, over all shards.
    pub fn live_tasks(&self) -> usize {
        self.shards.iter().map(|s| s.live_tasks).sum()
    }

    /// Sum of the inbox depths.
    pub fn total_command_depth(&self) -> usize {
        self.shards.iter().map(|s| s.command_depth).sum()
    }

    /// Deepest inbox.
    pub fn max_command_depth(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.command_depth)
            .max()
            .unwrap_or(0)
    }

    /// Most native ops in flight on one shard.
    pub fn max_pending_native_ops_by_shard(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.pending_native_ops)
            .max()
            .unwrap_or(0)
    }

    /// Fraction of steal attempts that moved work (0 when none were made).
    pub fn steal_success_rate(&self) -> f64 {
        ratio(self.totals.steal_success, self.totals.steal_attempts)
    }

    /// Fraction of stealable task runs that came from the shard's own queues.
    pub fn local_hit_ratio(&self) -> f64 {
        let hits = self.totals.stealable_local_hits;
        ratio(hits, hits + self.totals.stealable_stolen)
    }

    /// Tasks stolen per victim scan.
    pub fn stolen_per_scan(&self) -> f64 {
        ratio(self.totals.stealable_stolen, self.totals.steal_scans)
    }
}

/// The nonzero per-opcode counts of one op table, named, most first.
pub(crate) fn ops_in_flight(by_opcode: &[u32]) -> Vec<(&'static str, usize)> {
    let mut named: Vec<(&'static str, usize)> = by_opcode
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(slot, n)| (opcodes::name(slot), *n as usize))
        .collect();
    sort_most_first(&mut named);
    named
}

/// Most first; ties by name, so the order is stable.
fn sort_most_first(counts: &mut [(&'static str, usize)]) {
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
}

fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}
