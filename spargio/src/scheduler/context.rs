//! Which shard, if any, the current thread runs.

use std::cell::Cell;
use std::ptr;
use std::sync::Arc;

use crate::scheduler::{Shared, Worker};
use crate::shard_id::ShardId;

thread_local! {
    static CURRENT: Cell<*const Worker> = const { Cell::new(ptr::null()) };
}

/// Restores the previous worker pointer when the shard loop ends (or
/// unwinds).
pub(crate) struct EnterGuard {
    prev: *const Worker,
}

/// Marks the current thread as running `worker` until the guard drops.
pub(crate) fn enter(worker: &Worker) -> EnterGuard {
    let prev = CURRENT.with(|c| c.replace(worker));
    EnterGuard { prev }
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.set(self.prev));
    }
}

/// Calls `f` with the worker running on this thread, if any.
pub(crate) fn with_worker<R>(f: impl FnOnce(Option<&Worker>) -> R) -> R {
    let ptr = CURRENT.try_with(|c| c.get()).unwrap_or(ptr::null());
    // SAFETY: the pointer is non-null only between `enter` and the guard's
    // drop, both in `Worker::run` on this thread; the worker lives on that
    // frame for the whole span and is only ever shared (`&`).
    f(unsafe { ptr.as_ref() })
}

/// This thread's shard index if it is a shard of `shared`'s runtime.
pub(crate) fn current_shard(shared: &Arc<Shared>) -> Option<ShardId> {
    with_worker(|w| w.filter(|w| Arc::ptr_eq(&w.shared, shared)).map(|w| w.id))
}

/// True on any spargio shard thread.
pub(crate) fn on_shard() -> bool {
    with_worker(|w| w.is_some())
}
