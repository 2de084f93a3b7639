//! Which shards are idle, and waking one when stealable work appears.
//!
//! Counts of spinning and parked shards let a spawner decide cheaply:
//! if a shard is spinning it will find the work itself; if none is parked
//! there is nobody to wake. Otherwise the spawner rings one parked shard
//! (see `driver/wake.rs` for why the handshake cannot lose the wake: the
//! shard updates these counters before its `SeqCst` fence and re-check).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use super::Shared;
use crate::driver::Notify;
use crate::shard_id::ShardId;

#[derive(Debug, Default)]
pub(crate) struct Idle {
    spinning: CachePadded<AtomicUsize>,
    parked: CachePadded<AtomicUsize>,
    /// Parked shards whose sleep is bounded by the LIFO watchdog.
    watchers: CachePadded<AtomicUsize>,
    cursor: AtomicUsize,
}

impl Idle {
    pub(crate) fn spin_begin(&self) {
        self.spinning.fetch_add(1, Ordering::SeqCst);
    }

    /// Shards spinning now (a snapshot, for the searcher bound).
    pub(crate) fn spinning(&self) -> usize {
        self.spinning.load(Ordering::Relaxed)
    }

    pub(crate) fn spin_end(&self) {
        self.spinning.fetch_sub(1, Ordering::SeqCst);
    }

    /// From spinning to parked; the caller then fences and re-checks.
    pub(crate) fn park_begin(&self) {
        self.parked.fetch_add(1, Ordering::SeqCst);
        self.spinning.fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn park_end(&self) {
        self.parked.fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn watch_begin(&self) {
        self.watchers.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn watch_end(&self) {
        self.watchers.fetch_sub(1, Ordering::Relaxed);
    }

    /// A stealable task entered shard `from`'s LIFO slot. If no idle shard
    /// is awake or on watchdog duty, wake one so someone can rescue the task
    /// should `from` get stuck in its current poll. Best effort (relaxed
    /// reads): a miss only delays a rescue to the next such push.
    pub(crate) fn ensure_watcher(&self, shared: &Arc<Shared>, from: ShardId) {
        if self.watchers.load(Ordering::Relaxed) == 0
            && self.spinning.load(Ordering::Relaxed) == 0
            && self.parked.load(Ordering::Relaxed) > 0
        {
            self.wake_one(shared, from);
        }
    }

    /// Called after stealable work was published by shard `from`: wakes one
    /// parked shard unless a spinning shard will pick the work up.
    pub(crate) fn wake_one(&self, shared: &Arc<Shared>, from: ShardId) {
        // Pairs with the fence a parking shard issues after `park_begin`.
        crate::driver::handshake_fence();
        if self.spinning.load(Ordering::SeqCst) > 0 || self.parked.load(Ordering::SeqCst) == 0 {
            return;
        }
        let n = shared.shard_count();
        let start = self.cursor.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            let target = (start + i) % n;
            if target == from {
                continue;
            }
            match shared.shards[target].wake.notify() {
                Notify::Awake => continue,
                // Someone is already waking a shard: it will steal.
                Notify::Coalesced => return,
                Notify::Ring => {
                    shared.ring_doorbell(target);
                    return;
                }
            }
        }
    }
}
