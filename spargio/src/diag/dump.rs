//! Task dumps: every live task, where it was spawned and how long ago.
//!
//! Each shard's task registry already holds one entry per live task (for
//! shutdown); the entry also records the spawn location, the kind and the
//! spawn time (a coarse clock read at spawn). A dump walks the registries
//! one at a time under their locks: spawns and task ends on that shard
//! wait for the walk (microseconds per thousand tasks), polls never do.
//! Each task's state (scheduled, running, idle) is read from two counters
//! in its header (`task/run_state.rs`); which shard is polling a running
//! task comes from the shards' poll slots (the stall detector's; without
//! the detector it is unknown). Tasks of the shards' tokio runtimes
//! (feature `tokio-compat`) are counted per shard; a build with
//! `--cfg tokio_unstable` lists each one too, from the registry tokio's
//! hooks keep (`scheduler/tokio_shard/tasks.rs`).

use std::fmt;
use std::panic::Location;
use std::time::Duration;

use super::{coarse_ns, task_id};
use crate::scheduler::Shared;
use crate::shard_id::ShardId;
use crate::task::meta::TaskKind;

/// How a task was spawned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskSnapshotKind {
    /// Pinned to its home shard (`spawn_pinned`, a round-robin or sticky
    /// placement).
    Pinned,
    /// Stealable: runs wherever the scheduler puts it.
    Stealable,
    /// Local to its home shard, maybe `!Send` (`spawn_local`,
    /// `spawn_local_on`).
    Local,
    /// A closure on the blocking pool (`spawn_blocking`).
    Blocking,
    /// A task on a shard's tokio runtime (`tokio::spawn` there, feature
    /// `tokio-compat`); listed only in a build with `--cfg tokio_unstable`.
    Tokio,
}

/// Where a live task stands, in a [`TaskSnapshot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskState {
    /// Queued to run: woken (or just spawned) and not yet polled since.
    Scheduled,
    /// Being polled right now.
    Running,
    /// Waiting for a waker: polled, returned `Pending`, not woken since.
    Idle,
    /// Not known: tokio does not tell whether one of its tasks is queued,
    /// running or waiting ([`TaskSnapshotKind::Tokio`]).
    Unknown,
}

/// One live task in a [`TaskDump`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskSnapshot {
    /// Unique among live tasks (a number is reused after its task ends).
    pub id: u64,
    /// Where it was spawned.
    pub spawned_at: &'static Location<'static>,
    /// How it was spawned.
    pub kind: TaskSnapshotKind,
    /// The shard it is registered on: where a pinned or local task runs,
    /// where a stealable one was queued first (it may run elsewhere).
    pub home: ShardId,
    /// Scheduled, running or idle at the moment of the dump.
    pub state: TaskState,
    /// The shard polling it at the moment of the dump, if one was (known
    /// only with the stall detector on; `state` is known without).
    pub running_on: Option<ShardId>,
    /// Time since it was spawned (coarse: a few ms).
    pub age: Duration,
}

/// Every live task of a runtime, from
/// [`RuntimeHandle::dump_tasks`](crate::RuntimeHandle::dump_tasks).
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct TaskDump {
    /// The tasks, by home shard, then by registry slot.
    pub tasks: Vec<TaskSnapshot>,
    /// Per shard, the tasks alive on its tokio runtime (spawned with
    /// `tokio::spawn` there, not yet ended): the count tokio keeps (feature
    /// `tokio-compat`; empty without it). They are not in `tasks`: tokio
    /// tells where a task was spawned only to a build with
    /// `--cfg tokio_unstable`.
    pub tokio_tasks: Vec<usize>,
}

impl TaskDump {
    /// Live tasks per spawn location, most first: where a leak or a pile-up
    /// comes from.
    pub fn by_location(&self) -> Vec<(&'static Location<'static>, usize)> {
        let mut counts: Vec<(&'static Location<'static>, usize)> = Vec::new();
        let mut sorted: Vec<&'static Location<'static>> =
            self.tasks.iter().map(|t| t.spawned_at).collect();
        sorted.sort_by_key(|l| (l.file(), l.line(), l.column()));
        for loc in sorted {
            match counts.last_mut() {
                Some((last, n)) if *last == loc => *n += 1,
                _ => counts.push((loc, 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        counts
    }
}

impl fmt::Display for TaskDump {
    /// One line per spawn location (count, location), then one per task.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} live tasks", self.tasks.len())?;
        for (shard, n) in self.tokio_tasks.iter().enumerate() {
            writeln!(f, "{n:>8}  tokio tasks alive on shard {shard}")?;
        }
        for (loc, n) in self.by_location() {
            writeln!(f, "{n:>8}  {loc}")?;
        }
        for t in &self.tasks {
            let state = match (t.state, t.running_on) {
                (TaskState::Running, Some(shard)) => format!("running on shard {shard}"),
                (TaskState::Running, None) => "running".to_string(),
                (TaskState::Scheduled, _) => "scheduled".to_string(),
                (TaskState::Idle, _) => "idle".to_string(),
                (TaskState::Unknown, _) => "state unknown".to_string(),
            };
            writeln!(
                f,
                "task {:#x}: {:?} on shard {}, {state}, spawned at {} {:?} ago",
                t.id, t.kind, t.home, t.spawned_at, t.age
            )?;
        }
        Ok(())
    }
}

impl Shared {
    /// Each shard's live tokio tasks (feature `tokio-compat`).
    fn tokio_alive_tasks(&self) -> Vec<usize> {
        #[cfg(feature = "tokio-compat")]
        return self
            .shards
            .iter()
            .map(|s| s.tokio.get().map_or(0, |t| t.metrics().num_alive_tasks()))
            .collect();
        #[cfg(not(feature = "tokio-compat"))]
        Vec::new()
    }

    /// Walks every registry (module docs).
    pub(crate) fn dump_tasks(&self) -> TaskDump {
        let now = coarse_ns();
        let running: Vec<Option<u64>> = match &self.stall {
            Some(sink) => sink.slots().iter().map(|s| s.running_task()).collect(),
            None => Vec::new(),
        };
        let mut tasks = Vec::new();
        for (home, shard) in self.shards.iter().enumerate() {
            shard.registry.each(|key, entry| {
                let info = entry.info();
                let id = task_id(home, key);
                let kind = match info.kind {
                    TaskKind::Blocking => TaskSnapshotKind::Blocking,
                    TaskKind::Stealable => TaskSnapshotKind::Stealable,
                    TaskKind::Pinned(_) if info.local => TaskSnapshotKind::Local,
                    TaskKind::Pinned(_) => TaskSnapshotKind::Pinned,
                };
                tasks.push(TaskSnapshot {
                    id,
                    spawned_at: info.location,
                    kind,
                    home,
                    state: entry.state(),
                    running_on: running.iter().position(|r| *r == Some(id)),
                    age: Duration::from_nanos(now.saturating_sub(info.born)),
                });
            });
        }
        #[cfg(all(feature = "tokio-compat", tokio_unstable))]
        for (home, shard) in self.shards.iter().enumerate() {
            let Some(live) = shard.tokio_tasks.get() else {
                continue;
            };
            for t in live.snapshot() {
                tasks.push(TaskSnapshot {
                    // Apart from spargio's ids (`task_id` keeps the top bit clear).
                    id: super::TOKIO | ((home as u64) << 40) | t.seq,
                    spawned_at: t.spawned_at,
                    kind: TaskSnapshotKind::Tokio,
                    home,
                    state: TaskState::Unknown,
                    running_on: None,
                    age: Duration::from_nanos(now.saturating_sub(t.born)),
                });
            }
        }
        TaskDump {
            tasks,
            tokio_tasks: self.tokio_alive_tasks(),
        }
    }
}
