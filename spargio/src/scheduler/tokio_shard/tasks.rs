//! A shard's live tokio tasks, for task dumps: in a build with
//! `--cfg tokio_unstable`, tokio's spawn and terminate hooks record each
//! task's spawn site and birth here (one short lock per spawn and per
//! task end; polls never take it). Without that cfg tokio tells no spawn
//! site, and dumps give each shard's count only (`TaskDump::tokio_tasks`).

use std::collections::HashMap;
use std::panic::Location;
use std::sync::{Mutex, MutexGuard};

/// One live tokio task.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TokioTask {
    /// A number unique among the shard's tasks (tokio's ids are opaque).
    pub(crate) seq: u64,
    pub(crate) spawned_at: &'static Location<'static>,
    /// Coarse clock at spawn.
    pub(crate) born: u64,
}

/// The shard's live tokio tasks, by tokio's id.
#[derive(Debug, Default)]
pub(crate) struct TokioTasks {
    live: Mutex<(u64, HashMap<tokio::task::Id, TokioTask>)>,
}

impl TokioTasks {
    fn lock(&self) -> MutexGuard<'_, (u64, HashMap<tokio::task::Id, TokioTask>)> {
        // Inserts and removes only: a panicking holder leaves no half state.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// tokio spawned task `id` at `at` (its `on_task_spawn` hook, on the
    /// spawning thread).
    pub(crate) fn spawned(&self, id: tokio::task::Id, at: &'static Location<'static>) {
        let born = crate::diag::coarse_ns();
        let mut live = self.lock();
        live.0 += 1;
        let seq = live.0;
        live.1.insert(
            id,
            TokioTask {
                seq,
                spawned_at: at,
                born,
            },
        );
    }

    /// Task `id` ended (`on_task_terminate`).
    pub(crate) fn ended(&self, id: tokio::task::Id) {
        self.lock().1.remove(&id);
    }

    /// The live tasks, oldest first.
    pub(crate) fn snapshot(&self) -> Vec<TokioTask> {
        let mut out: Vec<TokioTask> = self.lock().1.values().copied().collect();
        out.sort_by_key(|t| t.seq);
        out
    }
}
