//! Submission-time steering of stealable work.
//!
//! A shard's load is its stealable backlog (deque plus injector) plus the
//! native operations in flight on its ring. Whether it is running a task
//! right now is deliberately not part of it: that flips on every poll and
//! would make steering noisy; a shard stuck in a long task is what stealing
//! is for.
//!
//! The least-loaded shard wins; ties go to the spawning shard (no transfer
//! at all), then round-robin. A preferred shard keeps the task while its
//! load is within `steal_locality_margin` of the best.

use std::sync::atomic::Ordering;

use super::{ShardShared, Shared};
use crate::task::ShardId;

fn load(shard: &ShardShared) -> usize {
    shard.stealable_backlog() + shard.pending_ops.load(Ordering::Relaxed)
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
    let (mut best, mut best_load) = match current {
        Some(cur) => (cur, load(&shared.shards[cur])),
        None => (usize::MAX, usize::MAX),
    };
    if best_load > 0 {
        let start = shared.next_rr();
        for i in 0..n {
            let s = (start + i) % n;
            if Some(s) == current {
                continue;
            }
            let l = load(&shared.shards[s]);
            if l < best_load {
                best = s;
                best_load = l;
                if l == 0 {
                    break;
                }
            }
        }
    }
    if let Some(p) = preferred.filter(|&p| p < n && p != best) {
        if load(&shared.shards[p]) <= best_load.saturating_add(shared.config.steal.locality_margin)
        {
            return p;
        }
    }
    best
}
