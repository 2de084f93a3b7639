//! The live-task registry of one shard.
//!
//! A slab of wakers, one per live task homed on the shard. Insertions happen
//! at spawn, removals when the task's future is dropped (completed,
//! cancelled or aborted). At shutdown the registry is closed (further spawns
//! fail with `Shutdown`) and every registered task is woken, so the
//! scheduler gets to drop it on the right thread.

use std::sync::{Mutex, MutexGuard};
use std::task::Waker;

use slab::Slab;

#[derive(Debug, Default)]
pub(crate) struct Registry {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
pub(crate) struct Inner {
    pub(crate) tasks: Slab<Waker>,
    pub(crate) closed: bool,
}

impl Registry {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        // No code panics while holding the lock; recover from poison anyway.
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    pub(crate) fn remove(&self, key: usize) {
        let mut inner = self.lock();
        if inner.tasks.contains(key) {
            inner.tasks.remove(key);
        }
    }

    pub(crate) fn waker(&self, key: usize) -> Option<Waker> {
        self.lock().tasks.get(key).cloned()
    }

    /// Refuses further spawns and returns a waker for every live task.
    pub(crate) fn close(&self) -> Vec<Waker> {
        let mut inner = self.lock();
        inner.closed = true;
        inner.tasks.iter().map(|(_, w)| w.clone()).collect()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().tasks.len()
    }
}
