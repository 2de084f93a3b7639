//! `RemoteShard`: a sending handle to one shard, usable from any thread.

use std::sync::Arc;

use super::{send, RingMsg, SendTicket};
use crate::error::SendError;
use crate::scheduler::Shared;
use crate::shard_id::ShardId;

/// Sends messages to one shard from anywhere: a task on any shard, or a
/// thread outside the runtime (then the message travels through the
/// target's inbox and eventfd, and arrives as [`Event::External`]).
///
/// [`Event::External`]: crate::Event::External
#[derive(Clone)]
pub struct RemoteShard {
    shared: Arc<Shared>,
    target: ShardId,
}

impl std::fmt::Debug for RemoteShard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteShard")
            .field("target", &self.target)
            .finish()
    }
}

impl RemoteShard {
    pub(crate) fn new(shared: Arc<Shared>, target: ShardId) -> RemoteShard {
        RemoteShard { shared, target }
    }

    /// The target shard.
    pub fn shard_id(&self) -> ShardId {
        self.target
    }

    /// Sends `(tag, val)`; the ticket resolves once it is handed over.
    pub fn send_raw(&self, tag: u16, val: u32) -> SendTicket {
        SendTicket::new(&self.shared, self.send_raw_nowait(tag, val))
    }

    /// Sends a typed message.
    pub fn send<M: RingMsg>(&self, msg: M) -> SendTicket {
        let (tag, val) = msg.encode();
        self.send_raw(tag, val)
    }

    /// Sends without a ticket.
    pub fn send_raw_nowait(&self, tag: u16, val: u32) -> Result<(), SendError> {
        send::send_all(&self.shared, self.target, &[(tag, val)])
    }

    /// Typed [`RemoteShard::send_raw_nowait`].
    pub fn send_nowait<M: RingMsg>(&self, msg: M) -> Result<(), SendError> {
        let (tag, val) = msg.encode();
        self.send_raw_nowait(tag, val)
    }

    /// Sends all messages or none, with at most one doorbell.
    pub fn send_many_raw_nowait(&self, msgs: &[(u16, u32)]) -> Result<(), SendError> {
        send::send_all(&self.shared, self.target, msgs)
    }

    /// Typed [`RemoteShard::send_many_raw_nowait`].
    pub fn send_many_nowait<M: RingMsg>(&self, msgs: &[M]) -> Result<(), SendError> {
        send::send_many_typed(&self.shared, self.target, msgs)
    }

    /// Sends `(tag, val)` in its own `MSG_RING` (see
    /// [`ShardCtx::send_raw_direct_nowait`](crate::ShardCtx::send_raw_direct_nowait)).
    /// From a thread outside the runtime it takes the queued path and
    /// arrives as [`Event::External`](crate::Event::External).
    pub fn send_raw_direct_nowait(&self, tag: u16, val: u32) -> Result<(), SendError> {
        send::send_direct(&self.shared, self.target, &[(tag, val)])
    }

    /// Several direct messages, all or none.
    pub fn send_many_raw_direct_nowait(&self, msgs: &[(u16, u32)]) -> Result<(), SendError> {
        send::send_direct(&self.shared, self.target, msgs)
    }

    /// Barrier: on a shard, resolves once this shard's pending doorbells
    /// are submitted; outside the runtime, sends are synchronous and it
    /// resolves at once.
    pub fn flush(&self) -> SendTicket {
        if crate::scheduler::context::current_shard(&self.shared).is_some() {
            SendTicket::new(&self.shared, Ok(()))
        } else {
            SendTicket::ready(Ok(()))
        }
    }
}
