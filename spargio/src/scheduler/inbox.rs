//! A shard's inbox: the MPSC queue for work that must run on that shard.
//!
//! Carries wakes of pinned tasks from other threads and messages sent from
//! outside the runtime. Stealable work never goes here (it goes to the
//! shard's injector, where idle shards can steal it).

use crossbeam_queue::SegQueue;

use crate::task::spawn::Runnable;

/// One inbox entry.
pub(crate) enum Command {
    /// A pinned task to run on this shard.
    Run(Runnable),
    /// A message from a thread outside the runtime.
    Message { tag: u16, val: u32 },
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
