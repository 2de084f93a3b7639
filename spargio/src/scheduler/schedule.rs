//! The schedule function every task carries, and submission of new tasks.

use std::sync::Arc;

use async_task::ScheduleInfo;

use super::{steer, Shared};
use crate::error::RuntimeError;
use crate::scheduler::context;
use crate::shard_id::ShardId;
use crate::stats::Counters;
use crate::task::spawn::Runnable;

/// Called by async-task whenever a task is woken.
///
/// On a shard of the task's runtime: pinned tasks of this shard and all
/// stealable tasks are queued locally (LIFO slot when woken by a running
/// task, else FIFO); pinned tasks of another shard go to that shard's inbox.
/// Anywhere else: pinned tasks go to their shard's inbox, stealable tasks
/// are steered.
pub(crate) fn schedule(runnable: Runnable, info: ScheduleInfo) {
    runnable.metadata().run_state.scheduled();
    let leftover = context::with_worker(|worker| match worker {
        Some(w) if Arc::ptr_eq(&w.shared, &runnable.metadata().shared) => {
            runnable.metadata().set_woken_by(w.id);
            w.schedule(runnable, info.woken_while_running);
            None
        }
        _ => {
            runnable
                .metadata()
                .set_woken_by(crate::task::meta::NOT_A_SHARD);
            Some(runnable)
        }
    });
    if let Some(runnable) = leftover {
        let shared = runnable.metadata().shared.clone();
        let kind = runnable.metadata().kind;
        shared.schedule_remote(runnable, kind);
    }
}

/// Picks the shard for a new stealable task and checks admission.
pub(crate) fn admit_stealable(
    shared: &Arc<Shared>,
    preferred: Option<ShardId>,
) -> Result<ShardId, RuntimeError> {
    if shared.is_closing() {
        return Err(RuntimeError::Shutdown);
    }
    let current = context::current_shard(shared);
    let target = steer::choose(shared, current, preferred);
    if let Some(cap) = shared.config.stealable_queue_capacity {
        if shared.shards[target].stealable_backlog() >= cap {
            Counters::bump_shared(&shared.shards[target].counters.stealable_backpressure);
            crate::diag::event::backpressure("a stealable spawn", target);
            return Err(RuntimeError::Overloaded);
        }
    }
    Ok(target)
}

/// Queues a new stealable task on `target`.
pub(crate) fn submit_stealable(shared: &Arc<Shared>, target: ShardId, runnable: Runnable) {
    Counters::bump_shared(&shared.shards[target].counters.spawn_stealable);
    let leftover = context::with_worker(|worker| match worker {
        Some(w) if w.id == target && Arc::ptr_eq(&w.shared, shared) => {
            w.schedule_new(runnable);
            None
        }
        _ => Some(runnable),
    });
    if let Some(runnable) = leftover {
        shared.inject_stealable(target, runnable);
    }
}

/// Queues a new pinned task on its shard.
pub(crate) fn submit_pinned(shared: &Arc<Shared>, owner: ShardId, runnable: Runnable) {
    let leftover = context::with_worker(|worker| match worker {
        Some(w) if w.id == owner && Arc::ptr_eq(&w.shared, shared) => {
            w.schedule_new(runnable);
            None
        }
        _ => Some(runnable),
    });
    if let Some(runnable) = leftover {
        shared.schedule_remote(runnable, crate::task::meta::TaskKind::Pinned(owner));
    }
}
