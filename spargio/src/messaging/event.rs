//! What a shard receives: [`Event`], and typed messages via [`RingMsg`].

use crate::shard_id::ShardId;

/// A message delivered to a shard
/// ([`ShardCtx::next_event`](crate::ShardCtx::next_event),
/// [`ShardCtx::next_hot_event`](crate::ShardCtx::next_hot_event)).
///
/// It has exactly one variant, as in the reference crate, so it is matched
/// irrefutably; what is not a message has its own methods and types rather
/// than a variant here. A message sent from a thread outside the runtime
/// (through a [`RemoteShard`](crate::RemoteShard)) comes from
/// [`Event::EXTERNAL_SENDER`]; [`Event::sender`] tells the two apart.
///
/// ```
/// use spargio::{Event, Runtime, ShardCtx};
///
/// let rt = Runtime::builder().shards(2).build().unwrap();
/// let h = rt.handle();
/// let rx = h
///     .spawn_pinned(1, async {
///         let ctx = ShardCtx::current().unwrap();
///         let Event::RingMsg { from, tag, val } = ctx.next_event().await;
///         (from, tag, val)
///     })
///     .unwrap();
/// h.remote(1).send_raw_nowait(4, 40).unwrap();
/// assert_eq!(spargio::block_on(rx).unwrap(), (Event::EXTERNAL_SENDER, 4, 40));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A message: from a shard of this runtime (or from this shard to
    /// itself), or from outside it ([`Event::EXTERNAL_SENDER`]).
    RingMsg {
        /// The sending shard, or [`Event::EXTERNAL_SENDER`].
        from: ShardId,
        /// The message tag.
        tag: u16,
        /// The message value.
        val: u32,
    },
}

impl Event {
    /// The `from` of a message sent from a thread outside the runtime (the
    /// reference crate's value). No shard has this index; a reply sent to
    /// it fails with `SendError::InvalidShard`.
    pub const EXTERNAL_SENDER: ShardId = ShardId::MAX;

    /// The sending shard; `None` for a message from outside the runtime.
    pub fn sender(&self) -> Option<ShardId> {
        let Event::RingMsg { from, .. } = *self;
        (from != Event::EXTERNAL_SENDER).then_some(from)
    }

    /// The message's `(tag, val)`, whoever sent it.
    pub fn payload(&self) -> (u16, u32) {
        let Event::RingMsg { tag, val, .. } = *self;
        (tag, val)
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
