//! Direct messages on the shard (see `driver/direct_msg.rs`): sending
//! them, queuing received ones as events, and re-sending refused ones
//! through the mailbox.
//!
//! Bound: a sender reserves room in the target's `direct_msgs` count
//! (the mailbox capacity) before posting, and the target gives it back
//! when the event is taken. A refused post keeps its reservation until
//! the mailbox accepts the message, so the retry list is bounded too; a
//! shard with retries pending naps instead of parking indefinitely.

use std::os::fd::RawFd;
use std::sync::atomic::Ordering;

use super::worker::Worker;
use crate::driver::direct_msg;
use crate::error::SendError;
use crate::messaging::resend;
use crate::shard_id::ShardId;
use crate::stats::Counters;

impl Worker {
    /// Posts `msgs` to `target` (whose ring is `target_fd`) as direct
    /// messages, submitted at once unless the driver is busy (then at the
    /// loop's next flush, moments later).
    pub(crate) fn send_direct(&self, target_fd: RawFd, target: ShardId, msgs: &[(u16, u32)]) {
        for &(tag, val) in msgs {
            let fd = if crate::driver::faults::direct_post_fails() {
                -1
            } else {
                target_fd
            };
            let sqe = direct_msg::entry(fd, self.id, target, tag, val);
            // SAFETY: a MSG_RING SQE carries no pointers.
            unsafe { self.push_sqe(sqe) };
        }
        if self.driver.try_borrow_mut().is_ok() {
            self.flush_doorbells();
        }
    }

    /// Moves the direct messages the last reap found into the event
    /// queue, and re-sends this shard's refused ones through the mailbox.
    pub(super) fn take_direct(&self) {
        // Every loop pass comes here: two flag checks when idle.
        if !self.driver.borrow().has_direct() && self.direct_retry.borrow().is_empty() {
            return;
        }
        let mut scratch = self.direct_scratch.borrow_mut();
        let (received, failed) = &mut *scratch;
        self.driver.borrow_mut().take_direct(received, failed);
        if !received.is_empty() {
            let mut events = self.events.borrow_mut();
            for m in received.drain(..) {
                events.push_direct(m.shard, m.tag, m.val);
            }
        }
        let mut retry = self.direct_retry.borrow_mut();
        for m in failed.drain(..) {
            Counters::bump_local(&self.counters().ring_msgs_direct_resent);
            retry.push_back(m);
        }
        while let Some(m) = retry.front().copied() {
            match resend(&self.shared, self.id, m.shard, m.tag, m.val) {
                Err(SendError::Backpressure) => break,
                // Sent through the mailbox, or its target is gone: either
                // way the direct reservation ends here.
                _ => {
                    self.shared.shards[m.shard]
                        .direct_msgs
                        .fetch_sub(1, Ordering::Relaxed);
                    retry.pop_front();
                }
            }
        }
    }

    /// True when refused direct messages wait for mailbox room.
    pub(super) fn direct_retries_pending(&self) -> bool {
        !self.direct_retry.borrow().is_empty()
    }
}
