//! Deadlines that work on any executor.
//!
//! Boundary callers may be tokio tasks or plain threads, where spargio's
//! shard timers are not available. One process-wide thread keeps a heap of
//! (deadline, waker) and wakes each waker when its deadline passes. It is
//! started on first use and sleeps on a condvar until the earliest
//! deadline; a cancelled wait is left in the heap and dropped when it comes
//! up (at most one stale entry per abandoned wait, gone by its deadline).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

struct Entry {
    at: Instant,
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

#[derive(Default)]
struct Timer {
    heap: Mutex<(BinaryHeap<Reverse<Entry>>, u64)>,
    cond: Condvar,
}

fn timer() -> &'static Timer {
    static TIMER: OnceLock<&'static Timer> = OnceLock::new();
    TIMER.get_or_init(|| {
        let timer: &'static Timer = Box::leak(Box::default());
        std::thread::Builder::new()
            .name("spargio-boundary-timer".into())
            .spawn(move || timer.run())
            .expect("spawn the boundary deadline thread");
        timer
    })
}

impl Timer {
    fn register(&self, at: Instant, waker: Waker) {
        let mut guard = self.heap.lock().unwrap_or_else(|p| p.into_inner());
        let (heap, seq) = &mut *guard;
        *seq += 1;
        let earliest = heap.peek().is_none_or(|Reverse(e)| at < e.at);
        heap.push(Reverse(Entry {
            at,
            seq: *seq,
            waker,
        }));
        drop(guard);
        if earliest {
            self.cond.notify_one();
        }
    }

    fn run(&self) {
        let mut guard = self.heap.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let now = Instant::now();
            while guard.0.peek().is_some_and(|Reverse(e)| e.at <= now) {
                let Reverse(entry) = guard.0.pop().expect("peeked");
                entry.waker.wake();
            }
            guard = match guard.0.peek() {
                Some(Reverse(e)) => {
                    let wait = e.at.saturating_duration_since(now);
                    self.cond
                        .wait_timeout(guard, wait)
                        .unwrap_or_else(|p| p.into_inner())
                        .0
                }
                None => self.cond.wait(guard).unwrap_or_else(|p| p.into_inner()),
            };
        }
    }
}

/// Completes at `at` (never earlier), on any executor.
pub(crate) struct Deadline {
    at: Instant,
    registered: Option<Waker>,
}

impl Deadline {
    pub(crate) fn new(at: Instant) -> Deadline {
        Deadline {
            at,
            registered: None,
        }
    }

    pub(crate) fn at(&self) -> Instant {
        self.at
    }
}

impl Future for Deadline {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        // Once per distinct waker; repeated polls re-check the clock above.
        if !self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            timer().register(self.at, cx.waker().clone());
            self.registered = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}
