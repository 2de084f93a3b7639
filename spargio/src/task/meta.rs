//! Per-task metadata stored in the `async-task` header.

use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use super::run_state::RunState;
use crate::scheduler::Shared;
use crate::shard_id::ShardId;

/// Whether a task may move between shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskKind {
    /// Runs only on this shard (may be `!Send` if spawned locally).
    Pinned(ShardId),
    /// `Send`; runs wherever the scheduler puts it.
    Stealable,
    /// A blocking closure; runs only on the blocking pool.
    Blocking,
}

/// Header data of every task.
pub(crate) struct TaskMeta {
    pub(crate) shared: Arc<Shared>,
    pub(crate) kind: TaskKind,
    /// Registry slot: (home shard, slab key).
    pub(crate) home: ShardId,
    pub(crate) key: usize,
    /// Where the task was spawned (`#[track_caller]` on the spawn paths).
    pub(crate) location: &'static Location<'static>,
    /// Scheduled, running or idle, for task dumps.
    pub(crate) run_state: RunState,
    /// Entered on each poll (feature `tracing`).
    #[cfg(feature = "tracing")]
    pub(crate) span: tracing::Span,
    aborted: AtomicBool,
    /// The shard whose thread last scheduled the task (`NOT_A_SHARD` when
    /// a thread outside the runtime did), for [`roam`](crate::task::roam).
    woken_by: AtomicUsize,
}

/// `TaskMeta::woken_by` of a wake from a thread that is no shard of the
/// task's runtime (the blocking pool, another runtime, a plain thread).
pub(crate) const NOT_A_SHARD: usize = usize::MAX;

impl std::fmt::Debug for TaskMeta {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskMeta")
            .field("kind", &self.kind)
            .field("home", &self.home)
            .field("location", &self.location)
            .field("aborted", &self.is_aborted())
            .finish()
    }
}

impl TaskMeta {
    pub(crate) fn new(
        shared: Arc<Shared>,
        kind: TaskKind,
        home: ShardId,
        key: usize,
        location: &'static Location<'static>,
    ) -> TaskMeta {
        TaskMeta {
            shared,
            kind,
            home,
            key,
            location,
            run_state: RunState::default(),
            #[cfg(feature = "tracing")]
            span: task_span(kind, home, key, location),
            aborted: AtomicBool::new(false),
            woken_by: AtomicUsize::new(home),
        }
    }

    /// Records who scheduled the task: shard `by`, or `NOT_A_SHARD`.
    /// Relaxed: read by the shard that runs the task, after the queue
    /// hand-off that published the task itself.
    pub(crate) fn set_woken_by(&self, by: usize) {
        self.woken_by.store(by, Ordering::Relaxed);
    }

    /// The shard whose thread last scheduled the task, if one did.
    pub(crate) fn woken_by(&self) -> Option<ShardId> {
        let by = self.woken_by.load(Ordering::Relaxed);
        (by != NOT_A_SHARD).then_some(by)
    }

    /// Requests cancellation: the flag is seen by the scheduler the next time
    /// the task is about to run, and the task is woken so that happens soon.
    pub(crate) fn abort(&self) {
        // Release pairs with the Acquire in `is_aborted` on the running shard.
        if !self.aborted.swap(true, Ordering::Release) {
            if let Some(entry) = self.shared.shards[self.home].registry.waker(self.key) {
                entry.wake();
            }
        }
    }

    pub(crate) fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::Acquire)
    }
}

/// The task's span: `spargio::task` at `TRACE` level, named `task`, with
/// its id, kind, home shard and spawn location (tokio's `runtime.spawn`
/// span carries the same facts).
#[cfg(feature = "tracing")]
fn task_span(
    kind: TaskKind,
    home: ShardId,
    key: usize,
    location: &'static Location<'static>,
) -> tracing::Span {
    let kind = match kind {
        TaskKind::Pinned(_) => "pinned",
        TaskKind::Stealable => "stealable",
        TaskKind::Blocking => "blocking",
    };
    tracing::trace_span!(
        target: "spargio::task",
        "task",
        task.id = crate::diag::task_id(home, key),
        task.kind = kind,
        task.home = home,
        loc.file = location.file(),
        loc.line = location.line(),
        loc.col = location.column(),
    )
}
