//! Stealing: victim choice, batch size and adaptive backoff.
//!
//! An idle shard scans `steal_victim_probe_count` candidate victims (every
//! shard but itself, visited from a cursor that advances by
//! `steal_victim_stride`) and picks the one with the largest stealable
//! backlog. It steals only if that backlog exceeds `steal_locality_margin`
//! (an idle shard's own backlog is zero), taking half of it, at most
//! `steal_batch_size` tasks, from the victim's injector first (work not yet
//! picked up) and then its deque.
//!
//! A scan that finds nothing worth taking adds `steal_fail_cost` to a
//! penalty clamped to `[steal_backoff_min, steal_backoff_max]`; that many
//! later scans are skipped. Success resets the penalty to the minimum. When
//! the victim still has work after the steal, one more idle shard is woken
//! so the backlog spreads quickly.

use crossbeam_deque::Steal;

use super::worker::Worker;
use crate::stats::Counters;
use crate::task::ShardId;

#[derive(Debug)]
pub(crate) struct StealState {
    cursor: usize,
    cooldown: u32,
    penalty: u32,
}

impl StealState {
    pub(crate) fn new(id: ShardId, shards: usize) -> StealState {
        StealState {
            // Spread the starting victims so shards do not all probe shard 0.
            cursor: id % shards.saturating_sub(1).max(1),
            cooldown: 0,
            penalty: 0,
        }
    }
}

impl Worker {
    /// Tries to move stealable work here. True when a task was queued.
    pub(super) fn steal_work(&self) -> bool {
        let n = self.shared.shard_count();
        if n < 2 {
            return false;
        }
        let cfg = &self.shared.config.steal;
        let counters = self.counters();
        let victim = {
            let mut st = self.steal.borrow_mut();
            if st.cooldown > 0 {
                st.cooldown -= 1;
                return false;
            }
            Counters::bump_local(&counters.steal_scans);
            let others = n - 1;
            let mut best: Option<(ShardId, usize)> = None;
            for j in 0..cfg.probe_count {
                let k = (st.cursor + j * cfg.victim_stride) % others;
                let v = (self.id + 1 + k) % n;
                let backlog = self.shared.shards[v].stealable_backlog();
                if backlog > cfg.locality_margin && best.is_none_or(|(_, b)| backlog > b) {
                    best = Some((v, backlog));
                }
            }
            st.cursor = (st.cursor + cfg.victim_stride) % others;
            match best {
                Some(found) => found,
                None => {
                    st.penalty =
                        (st.penalty + cfg.fail_cost).clamp(cfg.backoff_min, cfg.backoff_max);
                    st.cooldown = st.penalty;
                    return false;
                }
            }
        };
        let (victim, backlog) = victim;
        Counters::bump_local(&counters.steal_attempts);
        let limit = backlog.div_ceil(2).clamp(1, cfg.batch_size);
        let deque = self.queue.deque();
        let before = deque.len();
        let shard = &self.shared.shards[victim];
        let mut stolen = None;
        for _ in 0..4 {
            let steal = shard
                .inject
                .steal_batch_with_limit_and_pop(deque, limit)
                .or_else(|| shard.stealer.steal_batch_with_limit_and_pop(deque, limit));
            match steal {
                Steal::Success(r) => {
                    stolen = Some(r);
                    break;
                }
                Steal::Empty => break,
                Steal::Retry => continue,
            }
        }
        let mut st = self.steal.borrow_mut();
        let Some(r) = stolen else {
            st.penalty = (st.penalty + cfg.fail_cost).clamp(cfg.backoff_min, cfg.backoff_max);
            st.cooldown = st.penalty;
            return false;
        };
        st.penalty = cfg.backoff_min;
        st.cooldown = 0;
        drop(st);
        let moved = deque.len().saturating_sub(before) + 1;
        Counters::bump_local(&counters.steal_success);
        let total = &counters.stealable_stolen;
        total.store(
            total.load(std::sync::atomic::Ordering::Relaxed) + moved as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
        self.queue.push_back(r);
        if shard.stealable_backlog() > cfg.locality_margin {
            self.shared.idle.wake_one(&self.shared, self.id);
        }
        true
    }
}
