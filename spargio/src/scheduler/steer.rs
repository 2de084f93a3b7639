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

use std::sync::atomic::Ordering;

use super::{ShardShared, Shared};
use crate::task::ShardId;

fn load(shard: &ShardShared) -> usize {
    shard.stealable_backlog() + shard.pending_ops.load(Ordering::Relaxed)
}

/// Load, then asleep-ness, compared lexicographically.
fn rank(shard: &ShardShared) -> (usize, bool) {
    (load(shard), shard.wake.is_asleep())
}

/// Picks the shard for a stealable task submitted from `current` (a shard
/// of this runtime, or `None` from outside) with an optional hint.
pub(crate) fn choose(
    shared: &Shared,
    current: Option<ShardId>,
    preferred: Option<ShardId>,
) -> ShardId {
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
