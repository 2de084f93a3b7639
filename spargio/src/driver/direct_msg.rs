//! Direct messages: a `(tag, val)` carried by one `MSG_RING` CQE.
//!
//! `send_raw_direct_nowait` skips the (sender, target) mailbox: the
//! sender's ring posts one CQE into the target's ring whose `user_data`
//! names the sender and the tag and whose `res` is the value. The target
//! reaps it like any completion and queues it as an event. The sender's
//! own completion is skipped on success; a failed post (the target's ring
//! is closing, or its CQ refused it) comes back with enough in its
//! `user_data` to re-send the message through the mailbox, so nothing is
//! dropped.
//!
//! The sender-side `user_data` payload packs target (8 bits), tag (16) and
//! value (32) into the 56 payload bits: direct sends go to shards 0..=255;
//! the sending side routes larger targets through the mailbox.

use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};

use super::user_data::{Tag, UserData};
use crate::shard_id::ShardId;

/// Highest shard a direct message can be addressed to.
pub(crate) const MAX_DIRECT_TARGET: ShardId = 255;

/// A direct message as the target or a failed sender sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirectMsg {
    /// Sender (for a received message) or target (for a failed send).
    pub(crate) shard: ShardId,
    pub(crate) tag: u16,
    pub(crate) val: u32,
}

/// The `MSG_RING` SQE posting `(tag, val)` from shard `from` into
/// `target`'s ring (`target_fd`). `target` must be at most
/// [`MAX_DIRECT_TARGET`].
pub(crate) fn entry(
    target_fd: RawFd,
    from: ShardId,
    target: ShardId,
    tag: u16,
    val: u32,
) -> squeue::Entry {
    debug_assert!(target <= MAX_DIRECT_TARGET);
    let posted = UserData::new(Tag::DirectMsg, ((from as u64) << 16) | tag as u64);
    let back = UserData::new(
        Tag::DirectMsgSend,
        ((target as u64) << 48) | ((tag as u64) << 32) | val as u64,
    );
    // The CQE's `res` is the SQE's `len` reinterpreted as i32: the value
    // round-trips bit for bit.
    opcode::MsgRingData::new(types::Fd(target_fd), val as i32, posted.raw(), None)
        .build()
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(back.raw())
}

/// A received direct message (`Tag::DirectMsg` CQE).
pub(crate) fn received(payload: u64, res: i32) -> DirectMsg {
    DirectMsg {
        shard: (payload >> 16) as ShardId,
        tag: payload as u16,
        val: res as u32,
    }
}

/// A direct send that failed (`Tag::DirectMsgSend` CQE with `res < 0`).
pub(crate) fn failed(payload: u64) -> DirectMsg {
    DirectMsg {
        shard: (payload >> 48) as ShardId,
        tag: (payload >> 32) as u16,
        val: payload as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_payloads_round_trip() {
        let sqe = entry(3, 1023, MAX_DIRECT_TARGET, 0xBEEF, u32::MAX);
        // The sender-side user_data is what comes back on failure.
        let back = UserData::from_raw(sqe.get_user_data());
        assert_eq!(back.tag(), Some(Tag::DirectMsgSend));
        assert_eq!(
            failed(back.payload()),
            DirectMsg {
                shard: MAX_DIRECT_TARGET,
                tag: 0xBEEF,
                val: u32::MAX
            }
        );
        let posted = UserData::new(Tag::DirectMsg, (1023 << 16) | 0xBEEF);
        assert_eq!(
            received(posted.payload(), u32::MAX as i32),
            DirectMsg {
                shard: 1023,
                tag: 0xBEEF,
                val: u32::MAX
            }
        );
    }
}
