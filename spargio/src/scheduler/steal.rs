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
//! A scan that finds no backlog also looks at the other shards' LIFO
//! slots: a slot that stays occupied while its shard's poll counter does
//! not move for `LIFO_RESCUE_AFTER` means that shard is stuck in one poll
//! (a blocking or very long task) and the task it woke would wait for it.
//! The scanner takes it: a stealable task runs here, a pinned one is moved
//! to its own shard's inbox (it still runs only there). Below that
//! threshold the slot is left alone, so message-passing pairs keep their
//! locality.
//!
//! A scan that finds nothing worth taking adds `steal_fail_cost` to a
//! penalty clamped to `[steal_backoff_min, steal_backoff_max]`; that many
//! later scans are skipped. Success resets the penalty to the minimum. When
//! the victim still has work after the steal, one more idle shard is woken
//! so the backlog spreads quickly.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_deque::Steal;

use super::inbox::Command;
use super::worker::Worker;
use crate::shard_id::ShardId;
use crate::stats::Counters;
use crate::task::meta::TaskKind;
use crate::task::spawn::Runnable;

/// How long a shard must stay inside one poll, with a task waiting in its
/// LIFO slot, before an idle shard takes that task.
const LIFO_RESCUE_AFTER: Duration = Duration::from_micros(50);

#[derive(Debug)]
pub(crate) struct StealState {
    cursor: usize,
    cooldown: u32,
    penalty: u32,
    /// Consecutive scans that found no victim (`steal_failed_streak_max`).
    failed_streak: u64,
    /// Per shard: its poll count when its LIFO slot was first seen
    /// occupied, and when.
    lifo_watch: Vec<Option<(u64, Instant)>>,
}

impl StealState {
    pub(crate) fn new(id: ShardId, shards: usize) -> StealState {
        StealState {
            // Spread the starting victims so shards do not all probe shard 0.
            cursor: id % shards.saturating_sub(1).max(1),
            cooldown: 0,
            penalty: 0,
            failed_streak: 0,
            lifo_watch: vec![None; shards],
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
                Some(found) => {
                    st.failed_streak = 0;
                    found
                }
                None => {
                    if let Some(rescued) = self.rescue_stuck_lifo(&mut st) {
                        st.failed_streak = 0;
                        drop(st);
                        self.adopt_rescued(rescued);
                        return true;
                    }
                    st.failed_streak += 1;
                    let max = &counters.steal_failed_streak_max;
                    if st.failed_streak > max.load(Ordering::Relaxed) {
                        // Single writer: only this shard records its streaks.
                        max.store(st.failed_streak, Ordering::Relaxed);
                    }
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
        Counters::add_local(&counters.stealable_stolen, moved as u64);
        // Relaxed: a counter; the victim's, which other thieves bump too.
        shard
            .counters
            .stealable_stolen_from
            .fetch_add(moved as u64, Ordering::Relaxed);
        self.queue.push_back(r);
        if shard.stealable_backlog() > cfg.locality_margin {
            self.shared.idle.wake_one(&self.shared, self.id);
        }
        true
    }

    /// Watchdog check from `park`: rescues a stranded LIFO task if one has
    /// been seen stuck long enough. True when a task was queued here.
    pub(super) fn rescue_stuck_lifo_now(&self) -> bool {
        let rescued = self.rescue_stuck_lifo(&mut self.steal.borrow_mut());
        match rescued {
            Some(r) => {
                self.adopt_rescued(r);
                true
            }
            None => false,
        }
    }

    /// Takes a task from the LIFO slot of a shard stuck in one poll.
    fn rescue_stuck_lifo(&self, st: &mut StealState) -> Option<Runnable> {
        for (v, shard) in self.shared.shards.iter().enumerate() {
            if v == self.id {
                continue;
            }
            if shard.lifo.is_empty() {
                st.lifo_watch[v] = None;
                continue;
            }
            let polls = shard.counters.tasks_polled.load(Ordering::Relaxed);
            match st.lifo_watch[v] {
                Some((seen, since)) if seen == polls => {
                    if since.elapsed() >= LIFO_RESCUE_AFTER {
                        st.lifo_watch[v] = None;
                        if let Some(r) = shard.lifo.take() {
                            if r.metadata().kind == TaskKind::Stealable {
                                Counters::bump_shared(&shard.counters.stealable_stolen_from);
                            }
                            return Some(r);
                        }
                    }
                }
                _ => st.lifo_watch[v] = Some((polls, Instant::now())),
            }
        }
        None
    }

    fn adopt_rescued(&self, r: Runnable) {
        match r.metadata().kind {
            TaskKind::Stealable => {
                Counters::bump_local(&self.counters().stealable_stolen);
                self.queue.push_back(r);
            }
            TaskKind::Blocking => self.shared.blocking.schedule(r),
            TaskKind::Pinned(owner) => {
                // Still runs only on its shard, once that shard is free.
                self.shared.shards[owner].inbox.push(Command::Run(r));
                self.shared.notify(owner);
            }
        }
    }
}
