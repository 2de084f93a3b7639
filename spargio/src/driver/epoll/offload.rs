//! Operations the epoll backend runs on the blocking pool (file and path
//! operations, and reads or writes of files that cannot be polled).
//!
//! A job is an ordinary blocking task carrying the operation's SQE. It runs
//! the syscall (`exec::blocking`), then posts `(user_data, result)` to the
//! shard's [`DoneQueue`] and notifies the shard (the same parked/notified
//! handshake as any cross-thread wake: the shard checks the queue after
//! publishing `PARKED`, the poster rings only a parked shard). A job that
//! never runs (the pool shut down, the runtime refused the spawn) posts
//! `ECANCELED` from its destructor: every offloaded operation gets exactly
//! one completion, and only after the syscall is over, so the operation's
//! memory outlives every use of it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::exec::{self, Progress};
use super::sqe::Sqe;
use crate::scheduler::Shared;
use crate::shard_id::ShardId;
use crate::task::meta::TaskKind;

/// Completions posted by blocking-pool threads.
#[derive(Debug, Default)]
pub(super) struct DoneQueue {
    list: Mutex<Vec<(u64, i32)>>,
    nonempty: AtomicBool,
}

impl DoneQueue {
    fn post(&self, user_data: u64, result: i32) {
        self.list
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((user_data, result));
        // SeqCst: before the poster's notify (whose fence pairs with the
        // shard's park re-check, which reads this flag).
        self.nonempty.store(true, Ordering::SeqCst);
    }

    pub(super) fn is_empty(&self) -> bool {
        !self.nonempty.load(Ordering::SeqCst)
    }

    /// Moves every posted completion into `out`.
    pub(super) fn take(&self, out: &mut Vec<(u64, i32)>) {
        if self.is_empty() {
            return;
        }
        let mut list = self.list.lock().unwrap_or_else(|p| p.into_inner());
        self.nonempty.store(false, Ordering::SeqCst);
        out.append(&mut list);
    }
}

/// Spawns offloaded operations for one shard.
pub(super) struct Offload {
    shared: Arc<Shared>,
    shard: ShardId,
    pub(super) done: Arc<DoneQueue>,
}

impl std::fmt::Debug for Offload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Offload")
            .field("shard", &self.shard)
            .finish()
    }
}

impl Offload {
    pub(super) fn new(shared: Arc<Shared>, shard: ShardId) -> Offload {
        Offload {
            shared,
            shard,
            done: Arc::new(DoneQueue::default()),
        }
    }

    /// Runs `sqe` on the blocking pool; its completion arrives through
    /// [`DoneQueue`] (module docs).
    pub(super) fn spawn(&self, sqe: Sqe, progress: Progress) {
        let job = Job {
            sqe,
            progress,
            done: self.done.clone(),
            shared: self.shared.clone(),
            shard: self.shard,
            posted: false,
        };
        let spawned =
            crate::task::spawn::build(&self.shared, TaskKind::Blocking, self.shard, async move {
                job.run()
            });
        if let Ok((runnable, handle)) = spawned {
            drop(handle);
            self.shared.blocking.schedule(runnable);
        }
        // Refused: the future, and with it the job, is dropped: ECANCELED.
    }
}

struct Job {
    sqe: Sqe,
    progress: Progress,
    done: Arc<DoneQueue>,
    shared: Arc<Shared>,
    shard: ShardId,
    posted: bool,
}

impl Job {
    fn run(mut self) {
        let result = exec::blocking(&self.sqe, self.progress);
        self.post(result);
    }

    fn post(&mut self, result: i32) {
        self.posted = true;
        self.done.post(self.sqe.user_data, result);
        self.shared.notify(self.shard);
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if !self.posted {
            self.post(-libc::ECANCELED);
        }
    }
}
