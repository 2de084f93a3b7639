//! What a shard receives: [`Event`], and typed messages via [`RingMsg`].

use crate::shard_id::ShardId;

/// An event delivered to a shard's event stream
/// ([`ShardCtx::next_event`](crate::ShardCtx::next_event)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A message from another shard (or from this shard to itself).
    RingMsg {
        /// The sending shard.
        from: ShardId,
        /// The message tag.
        tag: u16,
        /// The message value.
        val: u32,
    },
    /// A message sent from a thread outside the runtime through a
    /// [`RemoteShard`](crate::RemoteShard).
    External {
        /// The message tag.
        tag: u16,
        /// The message value.
        val: u32,
    },
}

impl Event {
    /// The message's `(tag, val)`, whoever sent it.
    pub fn payload(&self) -> (u16, u32) {
        match *self {
            Event::RingMsg { tag, val, .. } | Event::External { tag, val } => (tag, val),
        }
    }

    /// Decodes the payload as a typed message.
    pub fn decode<M: RingMsg>(&self) -> Option<M> {
        let (tag, val) = self.payload();
        M::decode(tag, val)
    }
}

/// A message type that travels between shards as a `(tag, val)` pair.
///
/// ```
/// use spargio::RingMsg;
///
/// #[derive(Debug, PartialEq)]
/// enum Cmd { Ping(u32), Stop }
///
/// impl RingMsg for Cmd {
///     fn encode(&self) -> (u16, u32) {
///         match *self { Cmd::Ping(n) => (1, n), Cmd::Stop => (2, 0) }
///     }
///     fn decode(tag: u16, val: u32) -> Option<Self> {
///         match tag { 1 => Some(Cmd::Ping(val)), 2 => Some(Cmd::Stop), _ => None }
///     }
/// }
///
/// assert_eq!(Cmd::decode(1, 7), Some(Cmd::Ping(7)));
/// ```
pub trait RingMsg: Sized {
    /// The `(tag, val)` pair this message travels as.
    fn encode(&self) -> (u16, u32);
    /// Rebuilds a message; `None` when the pair is not one of ours.
    fn decode(tag: u16, val: u32) -> Option<Self>;
}
