//! Diagnostics for operators: the stall detector, task dumps
//! (`dump.rs`) and the runtime's events (`event.rs`).
//!
//! A shard runs one task poll at a time, so one poll that blocks its
//! thread (a `std::thread::sleep`, a blocking syscall, a long computation
//! without a yield) holds up every task and connection homed on that
//! shard. The detector finds such polls for the price of one coarse clock
//! read and three stores per poll, and a thread of its own that sleeps while
//! the runtime rests:
//!
//! * **On the shard** (`slot.rs`): before each poll the shard stores
//!   the coarse monotonic time (`CLOCK_MONOTONIC_COARSE`, a vDSO read of
//!   the kernel's last tick, no hardware clock) and the task's spawn
//!   location; after it, a zero, and it reads the coarse clock again (that
//!   reading is the next poll's start: one read per poll). A
//!   poll that ran longer than the threshold queues one
//!   [`StallReport::Shard`] with its duration, from the coarse start
//!   (which trails the real one) to a precise end: never shorter than the
//!   stall. Every stall is seen, however short the watcher's attention.
//! * **In the blocking pool**: a thread that takes a job queued for longer
//!   than the threshold (every thread was busy, the pool at its limit)
//!   queues one [`StallReport::BlockingPool`].
//! * **On the watcher thread** (`watcher.rs`, one per runtime, never a
//!   shard): it delivers the queued reports (woken when one is queued),
//!   and catches what does not end: a poll still running after ten
//!   thresholds (at least a second) is reported then, as `ongoing` (and
//!   not again when it ends: the shard and the watcher claim each poll's
//!   report with one swap), and a pool job still waiting after the
//!   threshold is reported while it waits. It looks every threshold while
//!   a shard is in a poll, and backs off to once a second while none is.
//!   It starts a second after the runtime (so a short-lived one never
//!   pays for the thread), holds weak references only, and is stopped,
//!   not joined, by the runtime's drop, which delivers the last reports
//!   itself.
//!
//! Reports go to the builder's `on_stall` callback (on the watcher
//! thread, panics caught) or, without one, to a `warn` event (target
//! `spargio::stall`) through `log`, or `tracing` with that feature
//! (`event.rs` lists every event the runtime raises), and are counted in
//! the stats
//! (`stalls` per shard, `blocking_stalls`). At most 64 wait for the
//! watcher; beyond that they are dropped and counted
//! (`stall_reports_dropped`).
//!
//! The stalling thread's stack is not captured: reading another thread's
//! stack means running a signal handler inside the stalled code, and
//! unwinding there is not async-signal-safe (it allocates and takes
//! locks the stalled code may hold); it would also take a signal number
//! from the application. The spawn location names the task instead.

mod dump;
pub(crate) mod event;
mod sink;
mod slot;
mod watcher;

pub use dump::{TaskDump, TaskSnapshot, TaskSnapshotKind, TaskState};

pub(crate) use crate::time::clock::{coarse_ns, precise_ns};

pub(crate) use sink::Sink;
#[cfg(feature = "tokio-compat")]
pub(crate) use slot::TOKIO;
pub(crate) use watcher::Watcher;

use std::fmt;
use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

use crate::shard_id::ShardId;

/// What the stall detector found (module docs of the builder's
/// [`stall_threshold`](crate::RuntimeBuilder::stall_threshold)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StallReport {
    /// One poll of one task held `shard`'s thread for `duration`.
    Shard {
        /// The shard whose thread was held.
        shard: ShardId,
        /// How long the poll ran (`ongoing`: so far).
        duration: Duration,
        /// Where the task was spawned.
        spawned_at: &'static Location<'static>,
        /// The poll had not returned when this was reported (it ran for
        /// ten thresholds, or at least a second); it is not reported again.
        ongoing: bool,
    },
    /// Tasks of `shard`'s tokio runtime (feature `tokio-compat`: spawned
    /// with `tokio::spawn` on that shard) held its thread for `duration`
    /// in one stretch between two of the shard's own polls.
    Tokio {
        /// The shard whose thread was held.
        shard: ShardId,
        /// How long the tokio tasks ran (`ongoing`: so far).
        duration: Duration,
        /// Where the blocking tokio task was spawned: known only in a
        /// build with `--cfg tokio_unstable` (tokio's task hooks), where
        /// each tokio task's poll is timed on its own.
        spawned_at: Option<&'static Location<'static>>,
        /// The stretch had not ended when this was reported.
        ongoing: bool,
    },
    /// A blocking-pool job waited in the queue for `waited` before a
    /// thread took it: every thread was busy and the pool at its limit.
    BlockingPool {
        /// How long the job had waited when it was seen.
        waited: Duration,
        /// Jobs queued then.
        queued: usize,
        /// Pool threads then.
        threads: usize,
    },
}

impl fmt::Display for StallReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StallReport::Shard {
                shard,
                duration,
                spawned_at,
                ongoing,
            } => write!(
                f,
                "shard {shard} {} one poll for {duration:?}: the task spawned at {spawned_at} \
                 blocks its thread (move blocking work to spawn_blocking)",
                if *ongoing {
                    "is stuck in"
                } else {
                    "was held by"
                }
            ),
            StallReport::Tokio {
                shard,
                duration,
                spawned_at,
                ongoing,
            } => {
                let held = if *ongoing {
                    "is stuck in"
                } else {
                    "was held by"
                };
                write!(f, "shard {shard} {held} its tokio tasks for {duration:?}: ")?;
                match spawned_at {
                    Some(at) => write!(f, "the tokio task spawned at {at}")?,
                    None => write!(
                        f,
                        "a tokio task (a build with --cfg tokio_unstable names its spawn site)"
                    )?,
                }
                write!(
                    f,
                    " blocks its thread (move blocking work to spawn_blocking)"
                )
            }
            StallReport::BlockingPool {
                waited,
                queued,
                threads,
            } => write!(
                f,
                "a blocking-pool job waited {waited:?} for a thread ({queued} queued, \
                 {threads} threads, all busy)"
            ),
        }
    }
}

/// The shortest threshold: the coarse clock moves in ticks of a few ms.
pub(crate) const MIN_THRESHOLD: Duration = Duration::from_millis(10);

/// The callback `on_stall` sets.
pub(crate) type StallCallback = Arc<dyn Fn(&StallReport) + Send + Sync>;

/// The detector's settings.
#[derive(Clone, Default)]
pub(crate) struct StallConfig {
    /// `None`: no detector.
    pub(crate) threshold: Option<Duration>,
    pub(crate) callback: Option<StallCallback>,
}

impl fmt::Debug for StallConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StallConfig")
            .field("threshold", &self.threshold)
            .field("callback", &self.callback.is_some())
            .finish()
    }
}

/// A live task's id: its home shard and registry slot (unique among live
/// tasks; a slot is reused after its task ends).
pub(crate) fn task_id(home: ShardId, key: usize) -> u64 {
    ((home as u64) << 32) | key as u64
}
