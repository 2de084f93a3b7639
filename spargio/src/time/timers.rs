//! One shard's timers: the wheel behind a lock, and its next deadline.
//!
//! The owning shard advances the wheel in its loop and sleeps in the
//! kernel no longer than until `next_tick`. Other threads may arm timers
//! here too (a `Sleep` created off the runtime, a task polled again after
//! it migrated): when that makes `next_tick` earlier they `notify` the
//! owner, and because `next_tick` is written before that notification's
//! fence and read after the parking shard's fence, the owner either sees
//! the new deadline when choosing its timeout or is rung (the handshake of
//! `driver/wake.rs`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;

use crossbeam_utils::CachePadded;

use super::wheel::{TimerKey, TimerState, Wheel};

/// `next_tick` when no timer is armed.
const NONE: u64 = u64::MAX;

#[derive(Debug)]
pub(crate) struct ShardTimers {
    wheel: Mutex<Wheel>,
    next_tick: CachePadded<AtomicU64>,
}

impl ShardTimers {
    pub(crate) fn new() -> ShardTimers {
        ShardTimers {
            wheel: Mutex::new(Wheel::new()),
            next_tick: CachePadded::new(AtomicU64::new(NONE)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Wheel> {
        self.wheel.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Arms a timer; true when it is now the earliest (the caller must
    /// `notify` the owner if it is not the owner).
    pub(crate) fn arm(&self, tick: u64, waker: &Waker) -> (TimerKey, bool) {
        let mut wheel = self.lock();
        let key = wheel.insert(tick, Some(waker.clone()));
        (key, self.lower_next(tick))
    }

    /// Moves a timer; true when it is now the earliest.
    pub(crate) fn reset(&self, key: TimerKey, tick: u64) -> bool {
        let mut wheel = self.lock();
        wheel.reset(key, tick) && self.lower_next(tick)
    }

    fn lower_next(&self, tick: u64) -> bool {
        // Under the wheel lock, so no update is lost. SeqCst: read by a
        // parking owner after its handshake fence.
        if tick < self.next_tick.load(Ordering::Relaxed) {
            self.next_tick.store(tick, Ordering::SeqCst);
            true
        } else {
            false
        }
    }

    pub(crate) fn poll(&self, key: TimerKey, waker: &Waker) -> TimerState {
        self.lock().poll(key, waker)
    }

    pub(crate) fn remove(&self, key: TimerKey) {
        self.lock().remove(key);
    }

    /// The tick by which the owner must next advance the wheel, if any.
    pub(crate) fn next_tick(&self) -> Option<u64> {
        let next = self.next_tick.load(Ordering::SeqCst);
        (next != NONE).then_some(next)
    }

    /// Owner: fires what is due at `now`, pushing wakers into `fired`.
    pub(crate) fn fire_due(&self, now: u64, fired: &mut Vec<Waker>) {
        if self.next_tick().is_none_or(|next| next > now) {
            return;
        }
        let mut wheel = self.lock();
        wheel.advance(now, fired);
        let next = wheel.next_deadline().unwrap_or(NONE);
        self.next_tick.store(next, Ordering::SeqCst);
    }

    /// (armed timers, storage slots) for stats.
    pub(crate) fn usage(&self) -> (usize, usize) {
        let wheel = self.lock();
        (wheel.armed(), wheel.capacity())
    }
}
