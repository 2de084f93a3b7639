//! The server's connection registry: counts connections for the
//! `max_connections` bound and tells them when to drain or stop.
//!
//! Each connection task registers its waker once, at its first poll, and
//! checks two flags (`draining`, `aborted`) on every poll: one relaxed
//! atomic load each, no lock per request. Raising a flag wakes every
//! registered connection once. The accept loop parks its waker here when
//! the server is at `max_connections`; the connection that ends below the
//! bound wakes it. The idle-timeout sweeper (`idle.rs`) walks the same
//! registry.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use slab::Slab;

use super::idle::{ConnState, EXPIRE_NONE, STRIKES};

#[derive(Debug, Default)]
pub(crate) struct Hub {
    active: AtomicUsize,
    draining: AtomicBool,
    aborted: AtomicBool,
    /// The accept loop or the shutdown waiter is parked here.
    parked: AtomicBool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct Entry {
    waker: Waker,
    /// Set when the server has an idle timeout.
    state: Option<Arc<ConnState>>,
    /// The sweeper's notes: the request count it saw last, and how many
    /// sweeps in a row found the connection quiet.
    last_requests: u64,
    strikes: u32,
}

#[derive(Debug, Default)]
struct State {
    conns: Slab<Entry>,
    /// The accept loop (waiting for capacity) or the drain (waiting for
    /// zero connections).
    waiter: Option<Waker>,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    /// Counts a new connection; the guard uncounts it when dropped.
    /// `state`: the connection's counters for the idle timeout, if any.
    pub(crate) fn enter(self: &Arc<Hub>, state: Option<Arc<ConnState>>) -> ConnGuard {
        self.active.fetch_add(1, Ordering::AcqRel);
        ConnGuard {
            hub: self.clone(),
            key: None,
            state,
        }
    }

    /// One pass of the idle-timeout sweeper (`idle.rs`): strikes quiet
    /// connections, and tells those with `STRIKES` strikes (again) to close.
    pub(crate) fn sweep(&self) {
        let mut wake = Vec::new();
        {
            let mut st = self.lock();
            for (_, entry) in st.conns.iter_mut() {
                let Some(state) = &entry.state else { continue };
                let (requests, busy) = state.activity();
                if busy || requests != entry.last_requests {
                    entry.last_requests = requests;
                    entry.strikes = 0;
                    continue;
                }
                entry.strikes += 1;
                if entry.strikes >= STRIKES
                    && (state.expire_level() != EXPIRE_NONE || entry.strikes == STRIKES)
                {
                    state.escalate();
                    wake.push(entry.waker.clone());
                }
            }
        }
        for w in wake {
            w.wake();
        }
    }

    /// Ready once fewer than `max` connections are open.
    pub(crate) fn poll_below(&self, max: usize, cx: &mut Context<'_>) -> Poll<()> {
        if self.active() < max {
            return Poll::Ready(());
        }
        let mut st = self.lock();
        self.parked.store(true, Ordering::SeqCst);
        if self.active.load(Ordering::SeqCst) < max {
            self.parked.store(false, Ordering::SeqCst);
            return Poll::Ready(());
        }
        st.waiter = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Asks every connection to finish its in-flight requests and close.
    pub(crate) fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.wake_conns();
    }

    /// Asks every connection to close now.
    pub(crate) fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        self.wake_conns();
    }

    fn wake_conns(&self) {
        let wakers: Vec<Waker> = self
            .lock()
            .conns
            .iter()
            .map(|(_, e)| e.waker.clone())
            .collect();
        for w in wakers {
            w.wake();
        }
    }
}

/// One connection's place in the hub.
#[derive(Debug)]
pub(crate) struct ConnGuard {
    hub: Arc<Hub>,
    key: Option<usize>,
    state: Option<Arc<ConnState>>,
}

/// What a connection is asked to do, read at each of its polls.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Flags {
    pub(crate) draining: bool,
    pub(crate) aborted: bool,
    /// The idle timeout's level (`idle::EXPIRE_*`).
    pub(crate) expire: u8,
}

impl ConnGuard {
    /// Registers the connection task's waker (first call only; a task's
    /// waker does not change between polls), then says whether the server
    /// is draining or aborted, and whether the idle timeout expired.
    pub(crate) fn poll_flags(&mut self, cx: &mut Context<'_>) -> Flags {
        if self.key.is_none() {
            let mut st = self.hub.lock();
            self.key = Some(st.conns.insert(Entry {
                waker: cx.waker().clone(),
                state: self.state.clone(),
                last_requests: 0,
                strikes: 0,
            }));
        }
        // SeqCst pairs with `drain`/`abort`: a flag raised before the
        // registration above is seen here; one raised after wakes us.
        Flags {
            draining: self.hub.draining.load(Ordering::SeqCst),
            aborted: self.hub.aborted.load(Ordering::SeqCst),
            expire: self
                .state
                .as_ref()
                .map_or(EXPIRE_NONE, |s| s.expire_level()),
        }
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        let waiter = {
            let mut st = self.hub.lock();
            if let Some(key) = self.key.take() {
                st.conns.try_remove(key);
            }
            self.hub.active.fetch_sub(1, Ordering::SeqCst);
            if self.hub.parked.swap(false, Ordering::SeqCst) {
                st.waiter.take()
            } else {
                None
            }
        };
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

/// Ready once no connection is open.
pub(crate) fn poll_idle(hub: &Hub, cx: &mut Context<'_>) -> Poll<()> {
    hub.poll_below(1, cx)
}
