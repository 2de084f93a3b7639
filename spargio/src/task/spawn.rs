//! Building tasks.

use std::future::Future;
use std::sync::Arc;

use async_task::{Builder, WithInfo};

use super::harness::Harness;
use super::meta::{TaskKind, TaskMeta};
use super::registry::TaskEntry;
use super::JoinHandle;
use crate::error::RuntimeError;
use crate::scheduler::{self, Shared};
use crate::shard_id::ShardId;

/// Futures larger than this many bytes move to the heap where they enter
/// a public spawn path ([`boxes`]). Each layer down to the task's own
/// allocation moves the future by value, a copy of it each time and a
/// frame of stack for each: a 3.9 KiB HTTP/3 request future cost a loaded
/// server 9% of its CPU in `memcpy` on the way in, and a future of a few
/// hundred KiB overflowed a shard's 2 MiB stack. Boxed, the layers move a
/// pointer, for one allocation more; below the bound the copies are cheaper
/// than that allocation.
pub(crate) const BOX_ABOVE: usize = 1024;

/// Whether a spawn path boxes `F` first (see [`BOX_ABOVE`]); a constant
/// for each `F`, so the other branch compiles away.
pub(crate) const fn boxes<F>() -> bool {
    std::mem::size_of::<F>() > BOX_ABOVE
}

/// A task ready to be queued.
pub(crate) type Runnable = async_task::Runnable<TaskMeta>;

/// Allocates a `Send` task registered on `home`. The caller queues the
/// returned runnable. The task records its caller's location (every
/// public spawn path is `#[track_caller]`, so that is the user's call).
#[track_caller]
pub(crate) fn build<F>(
    shared: &Arc<Shared>,
    kind: TaskKind,
    home: ShardId,
    fut: F,
) -> Result<(Runnable, JoinHandle<F::Output>), RuntimeError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    // SAFETY: the future and its output are `Send`, so they may be polled,
    // dropped and read on any thread.
    unsafe { build_unchecked(shared, kind, home, false, fut) }
}

/// Allocates a task that need not be `Send`.
///
/// # Safety
///
/// If `F` is not `Send`, `kind` must be `TaskKind::Pinned(home)` and the
/// task must only be polled and dropped on `home`'s shard thread (the
/// scheduler routes pinned runnables to their shard, and shutdown drains
/// each shard's queues on that shard's thread). If `F::Output` is not
/// `Send`, the returned handle must stay on that thread too. `local`
/// marks it for task dumps (a `spawn_local` path).
#[track_caller]
pub(crate) unsafe fn build_unchecked<F>(
    shared: &Arc<Shared>,
    kind: TaskKind,
    home: ShardId,
    local: bool,
    fut: F,
) -> Result<(Runnable, JoinHandle<F::Output>), RuntimeError>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let location = std::panic::Location::caller();
    let registry = &shared.shards[home].registry;
    let (runnable, task) = registry
        .register(|key| {
            let meta = TaskMeta::new(shared.clone(), kind, home, key, location);
            // The schedule function is a plain `fn` (`Send + Sync +
            // 'static`).
            // SAFETY: thread affinity of `!Send` futures is the caller's
            // contract; the future borrows only the task's metadata, which
            // async-task keeps alive in the task header for as long as the
            // future exists.
            let (runnable, task) = unsafe {
                Builder::new().metadata(meta).spawn_unchecked(
                    |meta| Harness::new(fut, meta),
                    WithInfo(scheduler::schedule),
                )
            };
            let entry = TaskEntry::new(&runnable, local);
            ((runnable, task), entry)
        })
        .ok_or(RuntimeError::Shutdown)?;
    let handle = JoinHandle::new(task.fallible(), runnable.metadata());
    Ok((runnable, handle))
}
