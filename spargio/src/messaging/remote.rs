//! `RemoteShard`: a sending handle to one shard, usable from any thread.

use std::borrow::Borrow;
use std::sync::Arc;

use super::{send, RingMsg, SendTicket};
use crate::error::SendError;
use crate::scheduler::Shared;
use crate::shard_id::ShardId;

/// Sends messages to one shard from anywhere: a task on any shard, or a
/// thread outside the runtime (then the message travels through the
/// target's inbox and eventfd, and arrives with
/// [`Event::EXTERNAL_SENDER`](crate::Event::EXTERNAL_SENDER) as its
/// sender).
///
/// ```
/// use spargio::{Event, Runtime, ShardCtx};
///
/// let rt = Runtime::builder().shards(2).build().unwrap();
/// let h = rt.handle();
/// let rx = h
///     .spawn_pinned(1, async {
///         let Event::RingMsg { from, tag, val } =
///             ShardCtx::current().unwrap().next_event().await;
///         (from, tag, val)
///     })
///     .unwrap();
/// h.spawn_pinned(0, async {
///     let peer = ShardCtx::current().unwrap().remote(1).expect("shard 1");
///     peer.send_raw(5, 50).unwrap().await.unwrap();
/// })
/// .unwrap();
/// assert_eq!(spargio::block_on(rx).unwrap(), (0, 5, 50));
/// ```
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

    /// Sends `(tag, val)`: refused at once with an error, or accepted
    /// with a ticket that resolves once the message is handed over (see
    /// [`ShardCtx::send_raw`](crate::ShardCtx::send_raw)).
    pub fn send_raw(&self, tag: u16, val: u32) -> Result<SendTicket, SendError> {
        self.send_raw_nowait(tag, val)?;
        Ok(SendTicket::new(&self.shared))
    }

    /// Sends a typed message (see [`RemoteShard::send_raw`]).
    pub fn send<M: RingMsg>(&self, msg: M) -> Result<SendTicket, SendError> {
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

    /// Sends all messages or none, with at most one doorbell; any
    /// `IntoIterator` of `(tag, val)` (see
    /// [`ShardCtx::send_many_raw_nowait`](crate::ShardCtx::send_many_raw_nowait)).
    pub fn send_many_raw_nowait<I>(&self, msgs: I) -> Result<(), SendError>
    where
        I: IntoIterator,
        I::Item: Borrow<(u16, u32)>,
    {
        send::with_batch(msgs, |batch| {
            send::send_all(&self.shared, self.target, batch)
        })
    }

    /// Typed [`RemoteShard::send_many_raw_nowait`], over any `IntoIterator`
    /// of messages.
    pub fn send_many_nowait<M, I>(&self, msgs: I) -> Result<(), SendError>
    where
        M: RingMsg,
        I: IntoIterator<Item = M>,
    {
        self.send_many_raw_nowait(msgs.into_iter().map(|msg| msg.encode()))
    }

    /// Sends `(tag, val)` in its own `MSG_RING` (see
    /// [`ShardCtx::send_raw_direct_nowait`](crate::ShardCtx::send_raw_direct_nowait)).
    /// From a thread outside the runtime it takes the queued path and
    /// arrives from [`Event::EXTERNAL_SENDER`](crate::Event::EXTERNAL_SENDER).
    pub fn send_raw_direct_nowait(&self, tag: u16, val: u32) -> Result<(), SendError> {
        send::send_direct(&self.shared, self.target, &[(tag, val)])
    }

    /// Several direct messages from any `IntoIterator` of `(tag, val)`,
    /// all or none.
    pub fn send_many_raw_direct_nowait<I>(&self, msgs: I) -> Result<(), SendError>
    where
        I: IntoIterator,
        I::Item: Borrow<(u16, u32)>,
    {
        send::with_batch(msgs, |batch| {
            send::send_direct(&self.shared, self.target, batch)
        })
    }

    /// Barrier, never refused: on a shard, the ticket resolves once this
    /// shard's pending doorbells are submitted; outside the runtime, sends
    /// are synchronous and it resolves at once.
    pub fn flush(&self) -> Result<SendTicket, SendError> {
        if crate::scheduler::context::current_shard(&self.shared).is_some() {
            Ok(SendTicket::new(&self.shared))
        } else {
            Ok(SendTicket::ready())
        }
    }
}
