//! A hierarchical timing wheel: 6 levels of 64 slots, 1 ms ticks.
//!
//! Level `l` slot `s` holds timers whose deadline shares all bits above
//! `6 * (l + 1)` with the current tick and has `s` in bits
//! `6 * l .. 6 * (l + 1)`. Level 0 thus covers the next 64 ms one tick per
//! slot, level 1 the next ~4 s in 64 ms slots, and so on up to ~2 years
//! (later deadlines are clamped there and wait in the top level).
//!
//! Advancing to `now` repeatedly takes the earliest occupied slot (the
//! lowest level with any timer always holds it), moves `elapsed` to that
//! slot's start, fires the timers that are due and re-files the others one
//! level down. Arming, cancelling and re-arming are O(1) list operations on
//! a slab: no syscall, no allocation once the slab has grown.
//!
//! Timers are identified by slab key plus a generation, so a handle to a
//! timer that fired and whose slot was reused is never confused with the
//! new timer.

use std::task::Waker;

use slab::Slab;

const LEVELS: usize = 6;
const SLOTS: usize = 64;
const SLOT_BITS: u32 = 6;
/// Deadlines further than this many ticks away are clamped to it.
const MAX_TICKS: u64 = (1 << (SLOT_BITS as u64 * LEVELS as u64)) - 1;

/// A timer's identity: slab key and generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TimerKey {
    key: u32,
    gen: u32,
}

#[derive(Debug)]
enum State {
    /// Filed in `slots[level][slot]`.
    Armed { level: u8, slot: u8 },
    /// Fired; waiting for its owner to notice.
    Fired,
}

#[derive(Debug)]
struct Entry {
    gen: u32,
    deadline: u64,
    waker: Option<Waker>,
    state: State,
    prev: Option<u32>,
    next: Option<u32>,
}

/// What [`Wheel::poll`] says about a timer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimerState {
    Pending,
    Fired,
    /// The key is stale (the timer was removed).
    Gone,
}

#[derive(Debug)]
pub(crate) struct Wheel {
    /// Every timer with a deadline at or before this tick has fired.
    elapsed: u64,
    entries: Slab<Entry>,
    heads: [[Option<u32>; SLOTS]; LEVELS],
    occupied: [u64; LEVELS],
    next_gen: u32,
    armed: usize,
}

impl Wheel {
    pub(crate) fn new() -> Wheel {
        Wheel {
            elapsed: 0,
            entries: Slab::new(),
            heads: [[None; SLOTS]; LEVELS],
            occupied: [0; LEVELS],
            next_gen: 0,
            armed: 0,
        }
    }

    /// Timers armed and not yet fired.
    pub(crate) fn armed(&self) -> usize {
        self.armed
    }

    /// Slab capacity (for memory accounting).
    pub(crate) fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Arms a timer for `deadline` (in ticks). A deadline that is already
    /// due yields a timer that is fired at once.
    pub(crate) fn insert(&mut self, deadline: u64, waker: Option<Waker>) -> TimerKey {
        let gen = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1);
        let key = self.entries.insert(Entry {
            gen,
            deadline,
            waker,
            state: State::Fired,
            prev: None,
            next: None,
        }) as u32;
        if deadline > self.elapsed {
            self.file(key);
        }
        TimerKey { key, gen }
    }

    /// Moves an armed or fired timer to a new deadline, keeping its waker.
    pub(crate) fn reset(&mut self, timer: TimerKey, deadline: u64) -> bool {
        if !self.is_current(timer) {
            return false;
        }
        self.unfile(timer.key);
        self.entries[timer.key as usize].deadline = deadline;
        if deadline > self.elapsed {
            self.file(timer.key);
        } else {
            self.entries[timer.key as usize].state = State::Fired;
        }
        true
    }

    /// The timer's state; when pending, `waker` replaces the stored waker
    /// (unless it would wake the same task).
    pub(crate) fn poll(&mut self, timer: TimerKey, waker: &Waker) -> TimerState {
        if !self.is_current(timer) {
            return TimerState::Gone;
        }
        let entry = &mut self.entries[timer.key as usize];
        match entry.state {
            State::Fired => TimerState::Fired,
            State::Armed { .. } => {
                if !entry.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    entry.waker = Some(waker.clone());
                }
                TimerState::Pending
            }
        }
    }

    /// Forgets a timer (cancelling it if still armed).
    pub(crate) fn remove(&mut self, timer: TimerKey) {
        if self.is_current(timer) {
            self.unfile(timer.key);
            self.entries.remove(timer.key as usize);
        }
        if self.entries.is_empty() && self.entries.capacity() > 1024 {
            // Give a storm's memory back.
            self.entries = Slab::new();
        }
    }

    fn is_current(&self, timer: TimerKey) -> bool {
        self.entries
            .get(timer.key as usize)
            .is_some_and(|e| e.gen == timer.gen)
    }

    /// The earliest tick at which something is due, if any timer is armed.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.next_expiration().map(|(_, _, deadline)| deadline)
    }

    /// Fires everything due at `now` (ticks), pushing the wakers to `fired`.
    pub(crate) fn advance(&mut self, now: u64, fired: &mut Vec<Waker>) {
        while let Some((level, slot, deadline)) = self.next_expiration() {
            if deadline > now {
                break;
            }
            self.elapsed = deadline;
            let mut cursor = self.heads[level][slot].take();
            self.occupied[level] &= !(1 << slot);
            while let Some(key) = cursor {
                let entry = &mut self.entries[key as usize];
                cursor = entry.next.take();
                entry.prev = None;
                if entry.deadline <= deadline {
                    entry.state = State::Fired;
                    self.armed -= 1;
                    fired.extend(entry.waker.take());
                } else {
                    self.armed -= 1;
                    self.file(key);
                }
            }
        }
        self.elapsed = self.elapsed.max(now);
    }

    fn next_expiration(&self) -> Option<(usize, usize, u64)> {
        (0..LEVELS).find_map(|level| {
            let occupied = self.occupied[level];
            if occupied == 0 {
                return None;
            }
            let slot_range = 1u64 << (SLOT_BITS * level as u32);
            let level_range = slot_range << SLOT_BITS;
            let now_slot = (self.elapsed / slot_range) % SLOTS as u64;
            let slot = (occupied.rotate_right(now_slot as u32).trailing_zeros() as u64 + now_slot)
                % SLOTS as u64;
            let level_start = self.elapsed & !(level_range - 1);
            let mut deadline = level_start + slot * slot_range;
            if deadline <= self.elapsed {
                // Only the top level wraps: its slots form a ring of
                // deadlines up to MAX_TICKS ahead.
                deadline += level_range;
            }
            Some((level, slot as usize, deadline))
        })
    }

    fn file(&mut self, key: u32) {
        let deadline = self.entries[key as usize]
            .deadline
            .min(self.elapsed + MAX_TICKS);
        let masked = (self.elapsed ^ deadline) | (SLOTS as u64 - 1);
        let significant = 63 - masked.leading_zeros();
        let level = ((significant / SLOT_BITS) as usize).min(LEVELS - 1);
        let slot = ((deadline >> (SLOT_BITS * level as u32)) % SLOTS as u64) as usize;
        let head = self.heads[level][slot].replace(key);
        if let Some(h) = head {
            self.entries[h as usize].prev = Some(key);
        }
        let entry = &mut self.entries[key as usize];
        entry.next = head;
        entry.prev = None;
        entry.state = State::Armed {
            level: level as u8,
            slot: slot as u8,
        };
        self.occupied[level] |= 1 << slot;
        self.armed += 1;
    }

    fn unfile(&mut self, key: u32) {
        let entry = &mut self.entries[key as usize];
        let State::Armed { level, slot } = entry.state else {
            return;
        };
        let (level, slot) = (level as usize, slot as usize);
        let (prev, next) = (entry.prev.take(), entry.next.take());
        entry.state = State::Fired;
        match prev {
            Some(p) => self.entries[p as usize].next = next,
            None => self.heads[level][slot] = next,
        }
        if let Some(n) = next {
            self.entries[n as usize].prev = prev;
        }
        if self.heads[level][slot].is_none() {
            self.occupied[level] &= !(1 << slot);
        }
        self.armed -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noop() -> Waker {
        Waker::noop().clone()
    }

    fn fire(wheel: &mut Wheel, now: u64) -> usize {
        let mut fired = Vec::new();
        wheel.advance(now, &mut fired);
        fired.len()
    }

    #[test]
    fn timers_fire_at_their_tick_never_before() {
        let mut w = Wheel::new();
        let deadlines = [
            1u64, 2, 63, 64, 65, 100, 4095, 4096, 4097, 300_000, 20_000_000,
        ];
        let keys: Vec<_> = deadlines
            .iter()
            .map(|&d| (d, w.insert(d, Some(noop()))))
            .collect();
        let mut now = 0;
        for &(d, key) in &keys {
            // One tick before: not fired.
            fire(&mut w, d - 1);
            assert_eq!(
                w.poll(key, &noop()),
                TimerState::Pending,
                "deadline {d} fired early"
            );
            fire(&mut w, d);
            assert_eq!(
                w.poll(key, &noop()),
                TimerState::Fired,
                "deadline {d} not fired"
            );
            now = d;
        }
        assert_eq!(w.armed(), 0);
        assert_eq!(w.next_deadline(), None);
        let _ = now;
    }

    #[test]
    fn next_deadline_is_the_earliest() {
        let mut w = Wheel::new();
        w.insert(5000, None);
        w.insert(70, None);
        w.insert(900_000, None);
        let next = w.next_deadline().unwrap();
        assert!(next <= 70, "{next}");
        fire(&mut w, 70);
        let next = w.next_deadline().unwrap();
        assert!(next > 70 && next <= 5000, "{next}");
    }

    #[test]
    fn cancel_and_reset() {
        let mut w = Wheel::new();
        let a = w.insert(10, Some(noop()));
        let b = w.insert(10, Some(noop()));
        w.remove(a);
        assert_eq!(w.poll(a, &noop()), TimerState::Gone);
        assert!(w.reset(b, 50));
        assert_eq!(fire(&mut w, 49), 0);
        assert_eq!(fire(&mut w, 50), 1);
        // Reset a fired timer re-arms it.
        assert!(w.reset(b, 60));
        assert_eq!(w.poll(b, &noop()), TimerState::Pending);
        assert_eq!(fire(&mut w, 60), 1);
        w.remove(b);
        // A stale key never aliases a new timer in the same slot.
        let c = w.insert(70, None);
        assert_eq!(w.poll(b, &noop()), TimerState::Gone);
        assert_eq!(w.poll(c, &noop()), TimerState::Pending);
    }

    #[test]
    fn randomized_against_a_sorted_model() {
        // Deterministic LCG so failures reproduce.
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut rand = move |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let mut w = Wheel::new();
        let mut model: Vec<(u64, TimerKey)> = Vec::new();
        let mut now = 0u64;
        for _ in 0..20_000 {
            match rand(4) {
                0 | 1 => {
                    let span = if rand(10) == 0 { 10_000_000 } else { 5000 };
                    let d = now + 1 + rand(span);
                    model.push((d, w.insert(d, None)));
                }
                2 if !model.is_empty() => {
                    let i = rand(model.len() as u64) as usize;
                    let (_, k) = model.swap_remove(i);
                    w.remove(k);
                }
                _ => {
                    now += rand(3000);
                    let mut fired = Vec::new();
                    w.advance(now, &mut fired);
                    for &(d, k) in &model {
                        let st = w.poll(k, &noop());
                        assert_eq!(st == TimerState::Fired, d <= now, "deadline {d} now {now}");
                    }
                    model.retain(|&(d, k)| {
                        if d <= now {
                            w.remove(k);
                            false
                        } else {
                            true
                        }
                    });
                    assert_eq!(w.armed(), model.len());
                }
            }
        }
    }
}
