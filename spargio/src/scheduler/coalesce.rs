//! Enqueue-time coalescing of coalesced hot tags (`messaging/hot.rs`).
//!
//! A shard that sends a coalesced hot tag into a full mailbox is not
//! refused: the value is added (saturating) to a sum the sending shard
//! keeps per (target, tag), and the sum goes out as one message, or
//! several if it exceeds `u32::MAX`, as soon as that mailbox has room. The
//! target adds every value of such a tag into one counter anyway, so
//! merging values earlier changes nothing it can observe except how many
//! messages carried them: a producer of "one more item" counts never
//! blocks behind a slow consumer, and the consumer still sees every unit.
//!
//! Bound: one sum per (target, tag) pair, never a queue. A shard with sums
//! pending naps instead of parking without a timeout, since the target
//! frees mailbox room without ringing its senders. Sends from outside the
//! runtime (no shard to hold a sum) are refused at a full inbox as before.

use super::worker::Worker;
use crate::error::SendError;
use crate::messaging::resend;
use crate::shard_id::ShardId;

/// One pending sum.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PendingSum {
    target: ShardId,
    tag: u16,
    sum: u64,
}

impl Worker {
    /// Adds `msgs` (all of coalesced tags) to the sums for `target`.
    pub(crate) fn stash_coalesced(&self, target: ShardId, msgs: &[(u16, u32)]) {
        let mut pending = self.coalesced_out.borrow_mut();
        for &(tag, val) in msgs {
            match pending
                .iter_mut()
                .find(|p| p.target == target && p.tag == tag)
            {
                Some(p) => p.sum = p.sum.saturating_add(u64::from(val)),
                None => pending.push(PendingSum {
                    target,
                    tag,
                    sum: u64::from(val),
                }),
            }
        }
    }

    /// Sends what the mailboxes have room for now. Every loop pass comes
    /// here: one borrow and an emptiness check when nothing is pending.
    pub(super) fn flush_coalesced(&self) {
        let mut pending = self.coalesced_out.borrow_mut();
        if pending.is_empty() {
            return;
        }
        pending.retain_mut(|p| {
            while p.sum > 0 {
                let chunk = p.sum.min(u64::from(u32::MAX));
                match resend(&self.shared, self.id, p.target, p.tag, chunk as u32) {
                    Ok(()) => p.sum -= chunk,
                    // Still full: keep the rest for a later pass.
                    Err(SendError::Backpressure) => return true,
                    // The runtime is closing: nothing will read it.
                    Err(_) => return false,
                }
            }
            false
        });
    }

    /// True when sums wait for mailbox room.
    pub(super) fn coalesced_pending(&self) -> bool {
        !self.coalesced_out.borrow().is_empty()
    }
}
