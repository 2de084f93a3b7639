//! Messages between shards.
//!
//! A message is a `(tag: u16, val: u32)` pair. Between shards of one
//! runtime it travels through a bounded SPSC mailbox per (sender, target)
//! pair (`mailbox.rs`), and an `IORING_OP_MSG_RING` doorbell wakes the
//! target only when it is parked: a target that is running or spinning
//! sees the message without any syscall on either side. From threads
//! outside the runtime it travels through the target's inbox and an
//! eventfd doorbell.
//!
//! Guarantees: a send either queues every message it was given or none
//! (`SendError::Backpressure` when the mailbox holds
//! `msg_ring_queue_capacity` unconsumed messages); a queued message is
//! delivered exactly once; messages from one sender to one target arrive in
//! order. Capacity is released when the receiver consumes the message, so
//! the bound is on memory, and a slow consumer pushes back on its senders.

mod event;
mod events;
pub(crate) mod hot;
mod mailbox;
mod remote;
mod send;
mod shard_ctx;
mod ticket;

pub use event::{Event, RingMsg};
pub(crate) use events::EventState;
pub(crate) use mailbox::Mailboxes;
pub use remote::RemoteShard;
pub(crate) use send::resend;
pub(crate) use shard_ctx::ShardRef;
pub use shard_ctx::{NextEvent, NextHotCount, NextHotEvent, ShardCtx};
pub use ticket::SendTicket;
