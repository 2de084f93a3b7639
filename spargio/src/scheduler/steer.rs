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
    // Load, then asleep-ness, compared lexicographically.
    let rank = |shard: &ShardShared| (load(shard), shard.wake.is_asleep());
    let n = shared.shard_count();
    if n == 1 {
        return 0;
    }
    let (mut best, mut best_rank) = match current {
        Some(cur) => (cur, (load(&shared.shards[cur]), false)),
        None => (usize::MAX, (usize::MAX, true)),
    };
    if best_rank != (0, false) {
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
                if r == (0, false) {
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
