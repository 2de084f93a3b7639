//! The live-task registry of one shard.
//!
//! A slab of wakers, one per live task homed on the shard. Insertions happen
//! at spawn, removals when the task's future is dropped (completed,
//! cancelled or aborted). At shutdown the registry is closed (further spawns
//! fail with `Shutdown`) and every registered task is woken, so the
//! scheduler gets to drop it on the right thread.
//!
//! Why a spawn racing shutdown is never lost: the closed check and the
//! insertion happen under the lock [`Registry::close`] takes, so a spawn
//! either lands before the close (and its waker is among those the close
//! returns) or is refused. The loom model below checks exactly that.
//! Shutdown then waits until every registry is empty, which only the
//! task's own drop achieves.

#[cfg(loom)]
use loom::sync::{Mutex, MutexGuard};
use std::ptr::NonNull;
#[cfg(not(loom))]
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;

use slab::Slab;

use super::meta::TaskMeta;
use super::spawn::Runnable;
use crate::diag::TaskState;

/// What the registry keeps per live task: its waker (shutdown and abort
/// wake it) and what a task dump shows of it, the rest of which it reads
/// from the task's header.
#[derive(Clone, Debug)]
pub(crate) struct TaskEntry {
    waker: Waker,
    meta: MetaPtr,
    /// Coarse monotonic ns at spawn.
    born: u64,
    /// Spawned by a `spawn_local` path (`!Send` allowed).
    local: bool,
}

/// The task's [`TaskMeta`], in its allocation's header.
#[derive(Clone, Copy, Debug)]
struct MetaPtr(NonNull<TaskMeta>);

// SAFETY: `MetaPtr` is only dereferenced by `TaskEntry::meta`, for a
// shared reference; `TaskMeta` is `Sync` (atomics, an `Arc`, `'static`
// references), so that reference may be used from any thread.
unsafe impl Send for MetaPtr {}
// SAFETY: as for `Send`.
unsafe impl Sync for MetaPtr {}

/// A task's identity for dumps (`dump.rs`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskInfo {
    pub(crate) location: &'static std::panic::Location<'static>,
    pub(crate) kind: super::meta::TaskKind,
    pub(crate) local: bool,
    pub(crate) born: u64,
}

impl TaskEntry {
    /// The entry for the task `runnable` runs: its waker and its header
    /// come from the same task, which is what makes [`TaskEntry::meta`]
    /// sound.
    pub(crate) fn new(runnable: &Runnable, local: bool) -> TaskEntry {
        TaskEntry {
            waker: runnable.waker(),
            meta: MetaPtr(NonNull::from(runnable.metadata())),
            born: crate::diag::coarse_ns(),
            local,
        }
    }

    /// Wakes the task.
    pub(crate) fn wake(self) {
        self.waker.wake();
    }

    fn meta(&self) -> &TaskMeta {
        // The metadata lives in the header of the task allocation that
        // `self.waker` references (`new` takes both from one runnable, and
        // the fields are private to this module). async-task frees the
        // header only when the last reference is gone.
        // SAFETY: `self.waker` holds a reference on that allocation, so the
        // pointer is valid (and the `Sync` metadata shareable) while `self` is.
        unsafe { self.meta.0.as_ref() }
    }

    pub(crate) fn info(&self) -> TaskInfo {
        let meta = self.meta();
        TaskInfo {
            location: meta.location,
            kind: meta.kind,
            local: self.local,
            born: self.born,
        }
    }

    /// Scheduled, running or idle.
    pub(crate) fn state(&self) -> TaskState {
        self.meta().run_state.get()
    }
}

/// The registry; `V` is what is kept per task (a [`TaskEntry`]; the loom
/// model uses plain numbers).
#[derive(Debug)]
pub(crate) struct Registry<V = TaskEntry> {
    inner: Mutex<Inner<V>>,
}

#[derive(Debug)]
struct Inner<V> {
    tasks: Slab<V>,
    closed: bool,
}

impl<V> Default for Registry<V> {
    fn default() -> Self {
        Registry {
            inner: Mutex::new(Inner {
                tasks: Slab::new(),
                closed: false,
            }),
        }
    }
}

impl<V: Clone> Registry<V> {
    fn lock(&self) -> MutexGuard<'_, Inner<V>> {
        // No code panics while holding the lock; recover from poison anyway.
        self.inner
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Registers a task unless the registry is closed: `make` gets the
    /// task's key and returns the task and the value to keep for it.
    /// `None` once closed.
    pub(crate) fn register<R>(&self, make: impl FnOnce(usize) -> (R, V)) -> Option<R> {
        let mut inner = self.lock();
        if inner.closed {
            return None;
        }
        let entry = inner.tasks.vacant_entry();
        let (task, value) = make(entry.key());
        entry.insert(value);
        Some(task)
    }

    /// Forgets the task under `key`; true when no task is left here.
    pub(crate) fn remove(&self, key: usize) -> bool {
        let mut inner = self.lock();
        if inner.tasks.contains(key) {
            inner.tasks.remove(key);
        }
        inner.tasks.is_empty()
    }

    /// Tasks registered and not yet ended.
    pub(crate) fn len(&self) -> usize {
        self.lock().tasks.len()
    }

    /// Calls `f` with every live task's key and value, under the lock
    /// (spawns and task ends on this shard wait meanwhile; polls do not).
    pub(crate) fn each(&self, mut f: impl FnMut(usize, &V)) {
        for (key, v) in self.lock().tasks.iter() {
            f(key, v);
        }
    }

    pub(crate) fn waker(&self, key: usize) -> Option<V> {
        self.lock().tasks.get(key).cloned()
    }

    /// Refuses further spawns and returns the value of every live task.
    pub(crate) fn close(&self) -> Vec<V> {
        let mut inner = self.lock();
        inner.closed = true;
        inner.tasks.iter().map(|(_, w)| w.clone()).collect()
    }

    /// The value of every task still registered (shutdown wakes them
    /// again each round: see `scheduler/shutdown.rs`).
    pub(crate) fn live(&self) -> Vec<V> {
        self.lock().tasks.iter().map(|(_, w)| w.clone()).collect()
    }

    /// The exit condition of shutdown: no task is left in any of
    /// `registries`.
    pub(crate) fn all_gone<'a>(registries: impl IntoIterator<Item = &'a Registry<V>>) -> bool
    where
        V: 'a,
    {
        registries.into_iter().all(|r| r.lock().tasks.is_empty())
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::Registry;
    use loom::sync::Arc;

    /// A spawn racing shutdown's close: either the spawn is refused, or
    /// the close returns its waker (so shutdown wakes and drops it), and
    /// shutdown's exit condition holds only once the task removed itself.
    #[test]
    fn a_spawn_racing_close_is_refused_or_woken() {
        loom::model(|| {
            let reg = Arc::new(Registry::<u32>::default());
            let spawner = {
                let reg = reg.clone();
                loom::thread::spawn(move || reg.register(|key| (key, 7)))
            };
            let woken = reg.close();
            let spawned = spawner.join().unwrap();
            match spawned {
                Some(key) => {
                    assert_eq!(woken, vec![7], "a registered task must be woken");
                    assert!(!Registry::all_gone([&*reg]), "shutdown waits for it");
                    reg.remove(key);
                    assert!(Registry::all_gone([&*reg]));
                }
                None => {
                    assert!(woken.is_empty());
                    assert!(Registry::all_gone([&*reg]));
                }
            }
            assert!(reg.register(|key| (key, 8)).is_none(), "closed for good");
        });
    }
}
