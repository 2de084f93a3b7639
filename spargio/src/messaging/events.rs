//! The receiving side: a shard's event stream.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::task::Waker;

use super::hot::{self, Counts};
use super::mailbox::unpack;
use super::Event;
use crate::scheduler::{Shared, Worker};
use crate::shard_id::ShardId;
use crate::stats::Counters;

/// Per-shard receive state, owned by the shard's worker.
#[derive(Debug)]
pub(crate) struct EventState {
    waiters: Vec<Waker>,
    external: VecDeque<(u16, u32)>,
    /// Direct messages reaped from the ring: (sender, tag, val).
    direct: VecDeque<(ShardId, u16, u32)>,
    /// Hot-tag lanes (see `hot.rs`); unused without hot tags.
    general: VecDeque<Event>,
    hot: VecDeque<Event>,
    counts: Counts,
    hot_waiters: Vec<Waker>,
    count_waiters: Vec<(u16, Waker)>,
    /// Counters whose change since the last delivery wakes their waiter.
    count_wakes: Vec<u16>,
    /// Next source to look at, so no sender can starve the others.
    cursor: usize,
}

impl EventState {
    pub(crate) fn new() -> EventState {
        EventState {
            waiters: Vec::new(),
            external: VecDeque::new(),
            direct: VecDeque::new(),
            general: VecDeque::new(),
            hot: VecDeque::new(),
            counts: Counts::default(),
            hot_waiters: Vec::new(),
            count_waiters: Vec::new(),
            count_wakes: Vec::new(),
            cursor: 0,
        }
    }

    pub(crate) fn push_external(&mut self, tag: u16, val: u32) {
        self.external.push_back((tag, val));
    }

    pub(crate) fn push_direct(&mut self, from: ShardId, tag: u16, val: u32) {
        self.direct.push_back((from, tag, val));
    }

    /// Shutdown: drops queued outside messages and waiters.
    pub(crate) fn clear(&mut self, shared: &Shared, me: ShardId) {
        let n = self.external.len();
        self.external.clear();
        shared.shards[me]
            .external_msgs
            .fetch_sub(n, Ordering::Relaxed);
        let n = self.direct.len();
        self.direct.clear();
        shared.shards[me]
            .direct_msgs
            .fetch_sub(n, Ordering::Relaxed);
        self.waiters.clear();
        self.general.clear();
        self.hot.clear();
        self.counts.clear();
        self.hot_waiters.clear();
        self.count_waiters.clear();
    }

    fn sources_pending(&self) -> bool {
        !self.external.is_empty() || !self.direct.is_empty()
    }
}

impl Worker {
    /// Takes the next pending general event, if any.
    pub(crate) fn try_next_event(&self) -> Option<Event> {
        if !self.shared.config.hot.enabled() {
            return self.pop_source(&mut self.events.borrow_mut());
        }
        self.sort_into_lanes();
        self.events.borrow_mut().general.pop_front()
    }

    /// Takes the next event of the hot lane, if any.
    pub(crate) fn try_next_hot_event(&self) -> Option<Event> {
        self.sort_into_lanes();
        self.events.borrow_mut().hot.pop_front()
    }

    /// Takes `tag`'s coalesced count if it is nonzero.
    pub(crate) fn try_take_hot_count(&self, tag: u16) -> Option<u64> {
        self.sort_into_lanes();
        self.events.borrow_mut().counts.take(tag)
    }

    /// Moves received messages into their lanes until the sources are
    /// empty or a lane is full (see `hot.rs`).
    fn sort_into_lanes(&self) {
        let cfg = &self.shared.config.hot;
        if !cfg.enabled() {
            return;
        }
        let cap = self.shared.config.msg_queue_capacity;
        let mut st = self.events.borrow_mut();
        while st.general.len() < cap && st.hot.len() < cap {
            let Some(event) = self.pop_source(&mut st) else {
                break;
            };
            let (tag, val) = event.payload();
            if cfg.coalesced.contains(tag) {
                let (before, after) = st.counts.add(tag, val);
                if hot::wakes(before, after, cfg.wake_threshold) && !st.count_wakes.contains(&tag) {
                    st.count_wakes.push(tag);
                }
            } else if cfg.hot.contains(tag) {
                st.hot.push_back(event);
            } else {
                st.general.push_back(event);
            }
        }
    }

    /// Takes the next message from the sources (direct, mailboxes,
    /// outside), if any.
    fn pop_source(&self, st: &mut EventState) -> Option<Event> {
        let n = self.shared.shard_count();
        // Direct messages first: they are the urgent control kind.
        if let Some((from, tag, val)) = st.direct.pop_front() {
            self.me().direct_msgs.fetch_sub(1, Ordering::Relaxed);
            Counters::bump_local(&self.counters().ring_msgs_completed);
            return Some(Event::RingMsg { from, tag, val });
        }
        for i in 0..n {
            let from = (st.cursor + i) % n;
            let Some(mailbox) = self.shared.mail.get(from, self.id) else {
                continue;
            };
            // SAFETY: this thread is the target shard's worker, the only
            // consumer of mailboxes into it.
            if let Some(word) = unsafe { mailbox.pop() } {
                st.cursor = (from + 1) % n;
                Counters::bump_local(&self.counters().ring_msgs_completed);
                let (tag, val) = unpack(word);
                return Some(Event::RingMsg { from, tag, val });
            }
        }
        let (tag, val) = st.external.pop_front()?;
        self.me().external_msgs.fetch_sub(1, Ordering::Relaxed);
        Counters::bump_local(&self.counters().ring_msgs_completed);
        Some(Event::RingMsg {
            from: Event::EXTERNAL_SENDER,
            tag,
            val,
        })
    }

    pub(crate) fn register_event_waiter(&self, waker: &Waker) {
        let mut st = self.events.borrow_mut();
        if !st.waiters.iter().any(|w| w.will_wake(waker)) {
            st.waiters.push(waker.clone());
        }
    }

    pub(crate) fn register_hot_waiter(&self, waker: &Waker) {
        let mut st = self.events.borrow_mut();
        if !st.hot_waiters.iter().any(|w| w.will_wake(waker)) {
            st.hot_waiters.push(waker.clone());
        }
    }

    pub(crate) fn register_count_waiter(&self, tag: u16, waker: &Waker) {
        let mut st = self.events.borrow_mut();
        if !st
            .count_waiters
            .iter()
            .any(|(t, w)| *t == tag && w.will_wake(waker))
        {
            st.count_waiters.push((tag, waker.clone()));
        }
    }

    /// True when a waiter exists and a message is ready for it.
    pub(crate) fn events_pending(&self) -> bool {
        if self.shared.config.hot.enabled() {
            return self.lanes_pending();
        }
        let st = self.events.borrow();
        !st.waiters.is_empty() && (st.sources_pending() || self.mail_pending())
    }

    /// With lanes: a waiter whose lane has something, or unsorted messages
    /// and room to sort them while someone waits.
    fn lanes_pending(&self) -> bool {
        let st = self.events.borrow();
        let cap = self.shared.config.msg_queue_capacity;
        let any_waiter =
            !st.waiters.is_empty() || !st.hot_waiters.is_empty() || !st.count_waiters.is_empty();
        (!st.waiters.is_empty() && !st.general.is_empty())
            || (!st.hot_waiters.is_empty() && !st.hot.is_empty())
            || st
                .count_waiters
                .iter()
                .any(|(t, _)| st.count_wakes.contains(t))
            || (any_waiter
                && st.general.len() < cap
                && st.hot.len() < cap
                && (st.sources_pending() || self.mail_pending()))
    }

    fn mail_pending(&self) -> bool {
        (0..self.shared.shard_count()).any(|from| {
            self.shared
                .mail
                .get(from, self.id)
                .is_some_and(|m| m.has_next())
        })
    }

    /// Wakes the event waiters when something arrived for them.
    pub(crate) fn deliver_events(&self) {
        if !self.events_pending() {
            return;
        }
        if self.shared.config.hot.enabled() {
            self.deliver_lanes();
            return;
        }
        let mut waiters = std::mem::take(&mut self.events.borrow_mut().waiters);
        for waker in waiters.drain(..) {
            self.wake_foreign(waker);
        }
        // Keep the allocation for the next round of waiters.
        let mut st = self.events.borrow_mut();
        if st.waiters.is_empty() {
            st.waiters = waiters;
        }
    }
}

impl Worker {
    /// `deliver_events` with lanes: sort, then wake each lane's waiters
    /// when their lane has something.
    fn deliver_lanes(&self) {
        self.sort_into_lanes();
        let mut wake = Vec::new();
        {
            let mut st = self.events.borrow_mut();
            let st = &mut *st;
            if !st.general.is_empty() {
                wake.append(&mut st.waiters);
            }
            if !st.hot.is_empty() {
                wake.append(&mut st.hot_waiters);
            }
            if !st.count_wakes.is_empty() {
                let due = std::mem::take(&mut st.count_wakes);
                st.count_waiters.retain(|(t, w)| {
                    let go = due.contains(t);
                    if go {
                        wake.push(w.clone());
                    }
                    !go
                });
            }
        }
        for waker in wake {
            self.wake_foreign(waker);
        }
    }
}
