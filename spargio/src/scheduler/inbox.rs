//! A shard's inbox: the MPSC queue for work that must run on that shard.
//!
//! Carries wakes of pinned tasks from other threads, messages sent from
//! outside the runtime, and native operations (and their cancels) that
//! another thread submitted to this shard's ring. Stealable work never goes here (it goes to the
//! shard's injector, where idle shards can steal it).

use crossbeam_queue::SegQueue;

use io_uring::squeue;

use crate::driver::OpKey;
use crate::task::spawn::Runnable;

/// One inbox entry.
pub(crate) enum Command {
    /// A pinned task to run on this shard.
    Run(Runnable),
    /// A message from a thread outside the runtime.
    Message { tag: u16, val: u32 },
    /// An operation to push into this shard's ring. Its op-table entry
    /// (phase `Queued`) keeps the memory the SQE points into alive.
    Submit { key: OpKey, sqe: squeue::Entry },
    /// Cancel this operation if it is still in the ring.
    Cancel { key: OpKey },
}

#[derive(Default)]
pub(crate) struct Inbox {
    queue: SegQueue<Command>,
}

impl Inbox {
    pub(crate) fn push(&self, cmd: Command) {
        self.queue.push(cmd);
    }

    pub(crate) fn pop(&self) -> Option<Command> {
        self.queue.pop()
    }

    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}
