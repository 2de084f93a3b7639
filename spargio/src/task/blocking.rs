//! The blocking pool: threads for closures that must not run on a shard.
//!
//! A blocking job is an ordinary task (so it gets a `JoinHandle`, panic
//! capture and shutdown accounting) whose kind routes it, whenever it is
//! scheduled, to this pool instead of a shard. Threads are created on
//! demand up to `max_blocking_threads` and retire after `blocking_keep_alive`
//! without work. At shutdown, queued jobs are dropped (their handles report
//! cancellation); jobs already running finish, and shutdown waits for them.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread;
use std::time::{Duration, Instant};

use super::spawn::Runnable;
use crate::diag::Sink;

#[derive(Debug)]
pub(crate) struct BlockingPool {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    cond: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    name: String,
    /// The stall detector, told of jobs that waited too long for a thread.
    stall: Option<Arc<Sink>>,
}

#[derive(Debug, Default)]
struct State {
    /// Jobs and when each was queued (the stall detector reads the
    /// oldest's age).
    queue: VecDeque<(Instant, Runnable)>,
    threads: usize,
    idle: usize,
    shutdown: bool,
}

impl BlockingPool {
    pub(crate) fn new(
        max_threads: usize,
        keep_alive: Duration,
        name: String,
        stall: Option<Arc<Sink>>,
    ) -> BlockingPool {
        BlockingPool {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                cond: Condvar::new(),
                max_threads,
                keep_alive,
                name,
                stall,
            }),
        }
    }

    /// Queues a job, starting a thread if none is idle and the limit
    /// allows. After shutdown the job is dropped (cancelled).
    pub(crate) fn schedule(&self, r: Runnable) {
        let mut state = self.inner.lock();
        if state.shutdown {
            drop(state);
            drop(r);
            return;
        }
        state.queue.push_back((Instant::now(), r));
        if state.idle > 0 {
            drop(state);
            self.inner.cond.notify_one();
            return;
        }
        if state.threads >= self.inner.max_threads {
            return;
        }
        state.threads += 1;
        let id = state.threads;
        drop(state);
        let inner = self.inner.clone();
        let spawned = thread::Builder::new()
            .name(format!("{}-{id}", self.inner.name))
            .spawn(move || inner.work());
        if spawned.is_err() {
            // The OS refused a thread: the job stays queued and runs on the
            // next thread that frees up or starts.
            self.inner.lock().threads -= 1;
        }
    }

    /// Refuses new jobs and drops the queued ones.
    pub(crate) fn shutdown(&self) {
        let queued = {
            let mut state = self.inner.lock();
            state.shutdown = true;
            std::mem::take(&mut state.queue)
        };
        self.inner.cond.notify_all();
        drop(queued);
    }

    /// A reference that does not keep the pool alive (the stall watcher's).
    pub(crate) fn downgrade(&self) -> WeakBlockingPool {
        WeakBlockingPool(Arc::downgrade(&self.inner))
    }

    /// (threads, idle threads, queued jobs).
    pub(crate) fn usage(&self) -> (usize, usize, usize) {
        let state = self.inner.lock();
        (state.threads, state.idle, state.queue.len())
    }
}

/// A [`BlockingPool`] that may be gone.
#[derive(Debug)]
pub(crate) struct WeakBlockingPool(Weak<Inner>);

impl WeakBlockingPool {
    /// When the oldest queued job was queued, with (queued jobs,
    /// threads); `None` when none waits or the pool is gone.
    pub(crate) fn oldest(&self) -> Option<(Instant, usize, usize)> {
        self.0.upgrade()?.oldest()
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn oldest(&self) -> Option<(Instant, usize, usize)> {
        let state = self.lock();
        let (at, _) = state.queue.front()?;
        Some((*at, state.queue.len(), state.threads))
    }

    fn work(&self) {
        let mut state = self.lock();
        loop {
            if let Some((queued_at, job)) = state.queue.pop_front() {
                let queued = state.queue.len() + 1;
                let threads = state.threads;
                drop(state);
                if let Some(sink) = &self.stall {
                    sink.blocking_waited(queued_at, queued_at.elapsed(), queued, threads);
                }
                if job.metadata().is_aborted() {
                    // Aborted while queued: cancel it (its handle reports
                    // cancellation). Running it would only reschedule it
                    // here, forever (the harness answers an abort that way
                    // so that a shard drops the task).
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(job)));
                } else {
                    // The harness catches panics from the closure.
                    job.run();
                }
                state = self.lock();
                continue;
            }
            if state.shutdown {
                break;
            }
            state.idle += 1;
            let (next, wait) = self
                .cond
                .wait_timeout(state, self.keep_alive)
                .unwrap_or_else(|p| p.into_inner());
            state = next;
            state.idle -= 1;
            if wait.timed_out() && state.queue.is_empty() {
                break;
            }
        }
        state.threads -= 1;
    }
}
