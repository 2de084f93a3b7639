//! A shard's own run queues: the LIFO slot, the pinned FIFO and the
//! stealable deque.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use super::lifo::LifoSlot;
use crate::task::meta::TaskKind;
use crate::task::spawn::Runnable;

/// Consecutive LIFO-slot polls allowed before the slot's task is sent to
/// the back of its queue (tokio uses 3 for the same reason: a pair of tasks
/// waking each other must not starve the rest).
const MAX_LIFO_STREAK: u8 = 3;

/// Where a popped task came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    Lifo,
    Pinned,
    Deque,
}

/// The shard-owned part; the LIFO slot itself is in `ShardShared` (see
/// `lifo.rs`) and is passed in.
pub(crate) struct RunQueue {
    lifo_streak: Cell<u8>,
    pinned: RefCell<VecDeque<Runnable>>,
    deque: crossbeam_deque::Worker<Runnable>,
    pinned_first: Cell<bool>,
}

impl RunQueue {
    pub(crate) fn new(deque: crossbeam_deque::Worker<Runnable>) -> RunQueue {
        RunQueue {
            lifo_streak: Cell::new(0),
            pinned: RefCell::new(VecDeque::with_capacity(256)),
            deque,
            pinned_first: Cell::new(false),
        }
    }

    pub(crate) fn deque(&self) -> &crossbeam_deque::Worker<Runnable> {
        &self.deque
    }

    /// Puts `r` in the LIFO slot; returns the task it displaced.
    pub(crate) fn push_lifo(&self, lifo: &LifoSlot, r: Runnable) -> Option<Runnable> {
        lifo.push(r)
    }

    /// Appends `r` to the queue of its kind. True when it went to the
    /// (stealable) deque.
    pub(crate) fn push_back(&self, r: Runnable) -> bool {
        match r.metadata().kind {
            TaskKind::Pinned(_) => {
                self.pinned.borrow_mut().push_back(r);
                false
            }
            TaskKind::Stealable => {
                self.deque.push(r);
                true
            }
            TaskKind::Blocking => unreachable!("blocking tasks are scheduled on the blocking pool"),
        }
    }

    /// Next task: the LIFO slot within its streak bound, then the pinned
    /// queue and the deque in alternation.
    pub(crate) fn pop(&self, lifo: &LifoSlot) -> Option<(Runnable, Origin)> {
        if let Some(r) = lifo.take() {
            let streak = self.lifo_streak.get();
            if streak < MAX_LIFO_STREAK {
                self.lifo_streak.set(streak + 1);
                return Some((r, Origin::Lifo));
            }
            self.push_back(r);
        }
        self.lifo_streak.set(0);
        let pinned_first = !self.pinned_first.get();
        self.pinned_first.set(pinned_first);
        let pinned = || {
            self.pinned
                .borrow_mut()
                .pop_front()
                .map(|r| (r, Origin::Pinned))
        };
        let deque = || self.deque.pop().map(|r| (r, Origin::Deque));
        if pinned_first {
            pinned().or_else(deque)
        } else {
            deque().or_else(pinned)
        }
    }

    /// Pinned tasks queued, plus the LIFO slot's task if any.
    pub(crate) fn local_len(&self, lifo: &LifoSlot) -> usize {
        self.pinned.borrow().len() + usize::from(!lifo.is_empty())
    }

    pub(crate) fn is_empty(&self, lifo: &LifoSlot) -> bool {
        lifo.is_empty() && self.pinned.borrow().is_empty() && self.deque.is_empty()
    }

    /// Removes every queued task (shutdown). Dropping them cancels them.
    pub(crate) fn take_all(&self, lifo: &LifoSlot, out: &mut Vec<Runnable>) {
        out.extend(lifo.take());
        out.extend(self.pinned.borrow_mut().drain(..));
        while let Some(r) = self.deque.pop() {
            out.push(r);
        }
    }
}
