//! The scheduler: shard loops, queues, steering, stealing, idling, shutdown.
//!
//! Each shard runs [`Worker::run`](worker::Worker) on its own thread. Per
//! shard there are:
//!
//! * a LIFO slot (the task woken last, run next), which other shards only
//!   touch to rescue a task stranded behind a stuck poll (`lifo.rs`);
//! * a FIFO of pinned tasks, touched only by the shard;
//! * a stealable deque (`crossbeam-deque`, FIFO): the shard pushes and
//!   pops, other shards steal in batches through its `Stealer`;
//! * an injector (`crossbeam-deque::Injector`): stealable tasks submitted
//!   from other threads; any shard may take from it;
//! * an inbox (`SegQueue`): pinned wakes, messages and native operations
//!   from other threads;
//! * an op table of native operations in flight on its ring (`ops.rs`,
//!   `driver/lifecycle.rs`).
//!
//! The deque grows on demand, so a task spawning thousands of children
//! never fails for lack of room; `stealable_queue_capacity` is only an
//! opt-in admission limit checked at spawn time. (This replaces the
//! bounded-ring-plus-overflow-injector of tokio: a growable Chase-Lev deque
//! gives the same "never refuse" property with one structure fewer.)
//!
//! Where a task goes when woken is decided by [`schedule`] (see
//! `schedule.rs`); where a new stealable task goes by `steer.rs`; how idle
//! shards find work by `steal.rs`; how shards sleep and wake by
//! `driver/wake.rs` and `idle.rs`; how everything stops by `shutdown.rs`.

mod coalesce;
pub(crate) mod context;
mod direct;
mod idle;
mod inbox;
mod lifo;
mod ops;
mod park;
mod run_queue;
mod schedule;
mod share_cpu;
mod shared;
mod shutdown;
mod spin;
mod steal;
mod steer;
#[cfg(feature = "tokio-compat")]
mod tokio_shard;
mod worker;

pub(crate) use inbox::Command;
pub(crate) use schedule::{admit_stealable, schedule, submit_pinned, submit_stealable};
pub(crate) use shared::{ShardShared, Shared};
pub(crate) use spin::{schedstat_of, SchedstatSlot};
pub(crate) use steer::choose_op_lane;
#[cfg(all(feature = "tokio-compat", tokio_unstable))]
pub(crate) use tokio_shard::TokioTasks;
#[cfg(feature = "tokio-compat")]
pub(crate) use worker::TokioParts;
pub(crate) use worker::Worker;

use std::sync::Arc;

use crate::shard_id::ShardId;

/// True on shard `shard` of `shared`'s runtime when sends are worth
/// batching in its ring: its CPU is contended (see `spin.rs`) and it has a
/// real ring (the epoll backend runs a queued send as one more readiness
/// operation, which measured 5% more CPU per request and no gain). False
/// anywhere else: a send queued on another shard's ring goes through its
/// inbox, and only that shard could submit it early
/// ([`submit_and_reap`]).
pub(crate) fn batch_sends(shared: &Arc<Shared>, shard: ShardId) -> bool {
    on_shard_of(shared, shard, |w| {
        w.contended() && w.shared.config.backend == crate::BackendKind::IoUring
    })
}

/// On shard `shard` of `shared`'s runtime, from inside a task's poll:
/// submits what the shard's ring has queued and settles what completed,
/// now instead of at the end of the loop turn (see
/// `Worker::submit_and_reap`). False, with nothing done, anywhere else or
/// while the ring is busy.
pub(crate) fn submit_and_reap(shared: &Arc<Shared>, shard: ShardId) -> bool {
    on_shard_of(shared, shard, Worker::submit_and_reap)
}

fn on_shard_of(shared: &Arc<Shared>, shard: ShardId, f: impl FnOnce(&Worker) -> bool) -> bool {
    context::with_worker(|w| match w {
        Some(w) if w.id == shard && Arc::ptr_eq(&w.shared, shared) => f(w),
        _ => false,
    })
}
