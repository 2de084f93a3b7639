//! The sending side.
//!
//! From a shard thread of the same runtime, a message goes into the
//! (sender, target) mailbox; if the target is parked, the sender rings it
//! with a `MSG_RING` doorbell on its own ring. From any other thread, the
//! message goes into the target's inbox (bounded by the same capacity,
//! shared among all outside senders) and the target is rung through its
//! eventfd. Either way a message is queued exactly once or refused with an
//! error, and messages from one sender to one target keep their order.

use std::borrow::Borrow;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::mailbox::pack;
use crate::driver::direct_msg::MAX_DIRECT_TARGET;
use crate::error::SendError;
use crate::scheduler::context;
use crate::scheduler::{Command, Shared};
use crate::shard_id::ShardId;
use crate::stats::Counters;

/// Most messages packed on the stack per batch before spilling in chunks.
const CHUNK: usize = 64;

/// Sends every message or none.
pub(crate) fn send_all(
    shared: &Arc<Shared>,
    target: ShardId,
    msgs: &[(u16, u32)],
) -> Result<(), SendError> {
    let refused = if target >= shared.shard_count() {
        Some(SendError::InvalidShard(target))
    } else if shared.is_closing() {
        Some(SendError::Closed)
    } else {
        None
    };
    if let Some(err) = refused {
        // Counted on the sender's shard; shard 0 stands in for threads
        // outside the runtime.
        let source = context::current_shard(shared).unwrap_or(0);
        Counters::bump_shared(&shared.shards[source].counters.ring_msgs_failed);
        return Err(err);
    }
    if msgs.is_empty() {
        return Ok(());
    }
    match context::current_shard(shared) {
        Some(source) => {
            let res = send_from_shard(shared, source, target, msgs);
            let counters = &shared.shards[source].counters;
            match res {
                Ok(()) => {
                    // Single writer: only `source`'s thread sends as `source`.
                    let c = &counters.ring_msgs_submitted;
                    c.store(
                        c.load(Ordering::Relaxed) + msgs.len() as u64,
                        Ordering::Relaxed,
                    );
                    shared.notify(target);
                }
                Err(_) if all_coalesced(shared, msgs) => {
                    // Summed on this shard until the mailbox has room
                    // (scheduler/coalesce.rs): accepted, never refused.
                    context::with_worker(|w| {
                        if let Some(w) = w {
                            w.stash_coalesced(target, msgs);
                        }
                    });
                    let c = &counters.ring_msgs_submitted;
                    c.store(
                        c.load(Ordering::Relaxed) + msgs.len() as u64,
                        Ordering::Relaxed,
                    );
                    return Ok(());
                }
                Err(_) => {
                    Counters::bump_local(&counters.ring_msgs_backpressure);
                    crate::diag::event::backpressure("a message", target);
                }
            }
            res
        }
        None => {
            let res = send_from_outside(shared, target, msgs);
            let counters = &shared.shards[target].counters;
            match res {
                Ok(()) => {
                    let c = &counters.ring_msgs_injected;
                    c.fetch_add(msgs.len() as u64, Ordering::Relaxed);
                    shared.notify(target);
                }
                Err(_) => {
                    Counters::bump_shared(&counters.ring_msgs_injected_backpressure);
                    crate::diag::event::backpressure("a message from outside", target);
                }
            }
            res
        }
    }
}

/// True when every message has a coalesced hot tag.
fn all_coalesced(shared: &Shared, msgs: &[(u16, u32)]) -> bool {
    let coalesced = &shared.config.hot.coalesced;
    !coalesced.is_empty() && msgs.iter().all(|&(tag, _)| coalesced.contains(tag))
}

/// Sends every message or none as direct `MSG_RING`s, each carrying its
/// value in the CQE (see `driver/direct_msg.rs`). Where that path is not
/// open (from outside the runtime, to the sending shard itself, to a shard
/// above 255, or without `MSG_RING`), the messages take the queued path of
/// [`send_all`] instead; either way they arrive as events.
pub(crate) fn send_direct(
    shared: &Arc<Shared>,
    target: ShardId,
    msgs: &[(u16, u32)],
) -> Result<(), SendError> {
    let source = context::current_shard(shared);
    let fd = (target < shared.shard_count())
        .then(|| shared.shards[target].msg_ring_fd())
        .flatten();
    let (Some(source), Some(fd)) = (source, fd) else {
        return send_all(shared, target, msgs);
    };
    if source == target || target > MAX_DIRECT_TARGET || shared.is_closing() || msgs.is_empty() {
        return send_all(shared, target, msgs);
    }
    let counters = &shared.shards[source].counters;
    let queued = &shared.shards[target].direct_msgs;
    let n = msgs.len();
    let before = queued.fetch_add(n, Ordering::AcqRel);
    if before + n > shared.config.msg_queue_capacity {
        queued.fetch_sub(n, Ordering::AcqRel);
        Counters::bump_local(&counters.ring_msgs_backpressure);
        crate::diag::event::backpressure("a direct message", target);
        return Err(SendError::Backpressure);
    }
    context::with_worker(|w| {
        if let Some(w) = w {
            w.send_direct(fd, target, msgs);
        }
    });
    // Single writer: only `source`'s thread sends as `source`.
    for c in [&counters.ring_msgs_submitted, &counters.ring_msgs_direct] {
        c.store(c.load(Ordering::Relaxed) + n as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// Re-sends, through the mailbox, a direct message from `source` (the
/// calling shard) whose `MSG_RING` the kernel refused.
pub(crate) fn resend(
    shared: &Arc<Shared>,
    source: ShardId,
    target: ShardId,
    tag: u16,
    val: u32,
) -> Result<(), SendError> {
    if shared.is_closing() {
        return Err(SendError::Closed);
    }
    send_from_shard(shared, source, target, &[(tag, val)])?;
    shared.notify(target);
    Ok(())
}

/// Gathers a batch for the all-or-nothing senders into one slice: on the
/// stack for up to `CHUNK` messages, so a typical batch never allocates; a
/// longer one spills to the heap. The whole batch must be in hand before
/// anything is queued, since it is refused whole when it does not fit.
pub(crate) fn with_batch<I, R>(msgs: I, send: impl FnOnce(&[(u16, u32)]) -> R) -> R
where
    I: IntoIterator,
    I::Item: Borrow<(u16, u32)>,
{
    let mut msgs = msgs.into_iter();
    let mut buf = [(0u16, 0u32); CHUNK];
    for (n, slot) in buf.iter_mut().enumerate() {
        match msgs.next() {
            Some(msg) => *slot = *msg.borrow(),
            None => return send(&buf[..n]),
        }
    }
    let Some(more) = msgs.next() else {
        return send(&buf);
    };
    let mut spilled = Vec::with_capacity(2 * CHUNK);
    spilled.extend_from_slice(&buf);
    spilled.push(*more.borrow());
    spilled.extend(msgs.map(|msg| *msg.borrow()));
    send(&spilled)
}

fn send_from_shard(
    shared: &Shared,
    source: ShardId,
    target: ShardId,
    msgs: &[(u16, u32)],
) -> Result<(), SendError> {
    let mailbox = shared.mail.get_or_create(source, target);
    if let [(tag, val)] = *msgs {
        // SAFETY: we run on `source`'s shard thread, the only producer of
        // the (source, target) mailbox.
        return unsafe { mailbox.push_all(&[pack(tag, val)]) }.map_err(|_| SendError::Backpressure);
    }
    // All or nothing: the room must be there up front. Only this thread
    // adds to the queue, so it cannot shrink before we are done.
    // SAFETY: producer thread, as above.
    if unsafe { mailbox.free() } < msgs.len() {
        return Err(SendError::Backpressure);
    }
    let mut words = [0u64; CHUNK];
    for chunk in msgs.chunks(CHUNK) {
        for (w, &(tag, val)) in words.iter_mut().zip(chunk) {
            *w = pack(tag, val);
        }
        // SAFETY: producer thread, as above; room was checked.
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
