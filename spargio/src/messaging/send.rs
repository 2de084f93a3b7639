//! The sending side.
//!
//! From a shard thread of the same runtime, a message goes into the
//! (sender, target) mailbox; if the target is parked, the sender rings it
//! with a `MSG_RING` doorbell on its own ring. From any other thread, the
//! message goes into the target's inbox (bounded by the same capacity,
//! shared among all outside senders) and the target is rung through its
//! eventfd. Either way a message is queued exactly once or refused with an
//! error, and messages from one sender to one target keep their order.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::mailbox::pack;
use crate::error::SendError;
use crate::runtime::context;
use crate::scheduler::{Command, Shared};
use crate::stats::Counters;
use crate::task::ShardId;

/// Most messages packed on the stack per batch before spilling in chunks.
const CHUNK: usize = 64;

/// Sends every message or none.
pub(crate) fn send_all(
    shared: &Arc<Shared>,
    target: ShardId,
    msgs: &[(u16, u32)],
) -> Result<(), SendError> {
    if target >= shared.shard_count() {
        return Err(SendError::InvalidShard(target));
    }
    if shared.is_closing() {
        return Err(SendError::Closed);
    }
    if msgs.is_empty() {
        return Ok(());
    }
    let source = context::current_shard(shared);
    let res = match source {
        Some(source) => send_from_shard(shared, source, target, msgs),
        None => send_from_outside(shared, target, msgs),
    };
    let counters = &shared.shards[source.unwrap_or(target)].counters;
    match res {
        Ok(()) => {
            let c = &counters.ring_msgs_submitted;
            c.fetch_add(msgs.len() as u64, Ordering::Relaxed);
            shared.notify(target);
        }
        Err(SendError::Backpressure) => Counters::bump_shared(&counters.ring_msgs_backpressure),
        Err(_) => {}
    }
    res
}

fn send_from_shard(
    shared: &Shared,
    source: ShardId,
    target: ShardId,
    msgs: &[(u16, u32)],
) -> Result<(), SendError> {
    let mailbox = shared.mail.get_or_create(source, target);
    if msgs.len() > mailbox.capacity() {
        return Err(SendError::Backpressure);
    }
    let mut words = [0u64; CHUNK];
    if msgs.len() <= CHUNK {
        for (w, &(tag, val)) in words.iter_mut().zip(msgs) {
            *w = pack(tag, val);
        }
        // SAFETY: we run on `source`'s shard thread, the only producer of
        // the (source, target) mailbox.
        return unsafe { mailbox.push_all(&words[..msgs.len()]) }
            .map_err(|_| SendError::Backpressure);
    }
    // Larger batches: all-or-nothing needs the room up front.
    if mailbox.capacity() - mailbox.len() < msgs.len() {
        return Err(SendError::Backpressure);
    }
    for chunk in msgs.chunks(CHUNK) {
        for (w, &(tag, val)) in words.iter_mut().zip(chunk) {
            *w = pack(tag, val);
        }
        // SAFETY: as above; room for the whole batch was checked, and only
        // this thread adds to the queue.
        unsafe { mailbox.push_all(&words[..chunk.len()]) }.map_err(|_| SendError::Backpressure)?;
    }
    Ok(())
}

fn send_from_outside(
    shared: &Shared,
    target: ShardId,
    msgs: &[(u16, u32)],
) -> Result<(), SendError> {
    let shard = &shared.shards[target];
    let cap = shared.config.msg_queue_capacity;
    let n = msgs.len();
    // Reserve room first; give it back if the reservation overshoots.
    let before = shard.external_msgs.fetch_add(n, Ordering::AcqRel);
    if before + n > cap {
        shard.external_msgs.fetch_sub(n, Ordering::AcqRel);
        return Err(SendError::Backpressure);
    }
    for &(tag, val) in msgs {
        shard.inbox.push(Command::Message { tag, val });
    }
    Ok(())
}
