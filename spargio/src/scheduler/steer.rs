//! Submission-time steering of stealable work.
//!
//! A shard's load is its stealable backlog (deque plus injector) plus the
//! native operations in flight on its ring. Whether it is running a task
//! right now is deliberately not part of it: that flips on every poll and
//! would make steering noisy; a shard stuck in a long task is what stealing
//! is for.
//!
//! The least-loaded shard wins; ties go to the spawning shard (no transfer
//! at all), then to a shard that is awake (a parked one costs a kernel
//! wakeup, several microseconds), then round-robin. A preferred shard keeps
//! the task while its load is within `steal_locality_margin` of the best.
//!
//! From outside the runtime, ties go first to the shard last seen on the
//! caller's CPU (each shard publishes its CPU, `ShardShared::cpu`). A thread
//! that spawns and then waits for the result (`block_on`, a blocking
//! facade) is woken by the shard that finishes the task; the kernel wakes
//! it where it last ran, so a task finished on another CPU pays a wakeup
//! across CPUs (22 µs each way on the 2-CPU dev VM, against 2 µs on the
//! same CPU). Measured on `steady_ping_pong_rtt`'s stealable form: 79–81 µs
//! per iteration became 59–61 µs (`bench/README.md`).

use std::sync::atomic::Ordering;

use super::share_cpu::NO_CPU;
use super::{ShardShared, Shared};
use crate::shard_id::ShardId;

fn task_load(shard: &ShardShared) -> usize {
    shard.stealable_backlog() + shard.ops.pending()
}

fn op_load(shard: &ShardShared) -> usize {
    shard.ops.pending()
}

/// Picks the shard for a stealable task submitted from `current` (a shard
/// of this runtime, or `None` from outside) with an optional hint.
pub(crate) fn choose(
    shared: &Shared,
    current: Option<ShardId>,
    preferred: Option<ShardId>,
) -> ShardId {
    choose_by(shared, current, preferred, task_load)
}

/// Picks the ring for an unbound native operation: the same rules, with the
/// operations in flight on each ring as the load.
pub(crate) fn choose_op_lane(
    shared: &Shared,
    current: Option<ShardId>,
    preferred: Option<ShardId>,
) -> ShardId {
    choose_by(shared, current, preferred, op_load)
}

fn choose_by(
    shared: &Shared,
    current: Option<ShardId>,
    preferred: Option<ShardId>,
    load: fn(&ShardShared) -> usize,
) -> ShardId {
    let n = shared.shard_count();
    if n == 1 {
        return 0;
    }
    // From outside: the caller's CPU (a vDSO read; `NO_CPU` if unknown,
    // which no shard publishes as a match).
    let here = match current {
        Some(_) => NO_CPU,
        None => caller_cpu(),
    };
    // Load, then not on the caller's CPU (never, from a shard or when the
    // caller's CPU is unknown), then asleep-ness, compared
    // lexicographically.
    let rank = |shard: &ShardShared| {
        let elsewhere = here != NO_CPU && shard.cpu.load(Ordering::Relaxed) != here;
        (load(shard), elsewhere, shard.wake.is_asleep())
    };
    const IDEAL: (usize, bool, bool) = (0, false, false);
    let (mut best, mut best_rank) = match current {
        Some(cur) => (cur, (load(&shared.shards[cur]), false, false)),
        None => (usize::MAX, (usize::MAX, true, true)),
    };
    if best_rank != IDEAL {
        let start = shared.next_rr();
        for i in 0..n {
            let s = (start + i) % n;
            if Some(s) == current {
                continue;
            }
            let r = rank(&shared.shards[s]);
            if r < best_rank {
                best = s;
                best_rank = r;
                if r == IDEAL {
                    break;
                }
            }
        }
    }
    let best_load = best_rank.0;
    if let Some(p) = preferred.filter(|&p| p < n && p != best) {
        if load(&shared.shards[p]) <= best_load.saturating_add(shared.config.steal.locality_margin)
        {
            return p;
        }
    }
    best
}

/// The CPU the calling thread runs on, or `NO_CPU`.
fn caller_cpu() -> u32 {
    // SAFETY: `sched_getcpu` takes no arguments and touches no memory of
    // ours; it returns -1 on failure, which maps to `NO_CPU`.
    let cpu = unsafe { libc::sched_getcpu() };
    u32::try_from(cpu).unwrap_or(NO_CPU)
}
