//! The receiving side: a shard's event stream.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::task::Waker;

use super::mailbox::unpack;
use super::Event;
use crate::scheduler::{Shared, Worker};
use crate::stats::Counters;
use crate::task::ShardId;

/// Per-shard receive state, owned by the shard's worker.
#[derive(Debug)]
pub(crate) struct EventState {
    waiters: Vec<Waker>,
    external: VecDeque<(u16, u32)>,
    /// Direct messages reaped from the ring: (sender, tag, val).
    direct: VecDeque<(ShardId, u16, u32)>,
    /// Next source to look at, so no sender can starve the others.
    cursor: usize,
}

impl EventState {
    pub(crate) fn new() -> EventState {
        EventState {
            waiters: Vec::new(),
            external: VecDeque::new(),
            direct: VecDeque::new(),
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
    }
}

impl Worker {
    /// Takes the next pending event, if any.
    pub(crate) fn try_next_event(&self) -> Option<Event> {
        let n = self.shared.shard_count();
        let mut st = self.events.borrow_mut();
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
        Some(Event::External { tag, val })
    }

    pub(crate) fn register_event_waiter(&self, waker: &Waker) {
        let mut st = self.events.borrow_mut();
        if !st.waiters.iter().any(|w| w.will_wake(waker)) {
            st.waiters.push(waker.clone());
        }
    }

    /// True when a waiter exists and a message is ready for it.
    pub(crate) fn events_pending(&self) -> bool {
        let st = self.events.borrow();
        !st.waiters.is_empty()
            && (!st.external.is_empty() || !st.direct.is_empty() || self.mail_pending())
    }

    fn mail_pending(&self) -> bool {
        (0..self.shared.shard_count()).any(|from| {
            self.shared
                .mail
                .get(from, self.id)
                .is_some_and(|m| m.len() > 0)
        })
    }

    /// Wakes the event waiters when something arrived for them.
    pub(crate) fn deliver_events(&self) {
        if !self.events_pending() {
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
