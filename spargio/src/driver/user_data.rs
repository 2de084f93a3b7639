//! Typed io_uring `user_data`.
//!
//! The top byte is a [`Tag`] saying what the completion belongs to; the low
//! 56 bits are a tag-specific payload (a shard index, an op-table slot and
//! generation). No magic sentinel values.

/// What a completion queue entry belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Tag {
    /// A doorbell posted into this ring by another shard's `MSG_RING`.
    Doorbell = 1,
    /// The sender-side completion of a doorbell `MSG_RING`. Success is
    /// skipped (`IOSQE_CQE_SKIP_SUCCESS`), so this only arrives on failure.
    /// Payload: the target shard.
    DoorbellSend = 2,
    /// The read kept armed on this shard's eventfd (wakeups from threads
    /// outside the runtime).
    EventfdRead = 3,
    /// A native operation; payload: op-table slot and generation
    /// ([`OpKey`](super::ops_table::OpKey)).
    Op = 4,
    /// An `ASYNC_CANCEL` (or other fire-and-forget SQE such as the close of
    /// a dropped file) whose completion carries nothing we need.
    Detached = 5,
    /// A direct message posted into this ring by another shard's
    /// `MSG_RING`; payload: sender and tag, value in `res` (see
    /// `direct_msg.rs`).
    DirectMsg = 6,
    /// The sender-side completion of a direct message, skipped on
    /// success; payload: target, tag and value, to re-send on failure.
    DirectMsgSend = 7,
}

impl Tag {
    fn from_byte(byte: u8) -> Option<Tag> {
        match byte {
            1 => Some(Tag::Doorbell),
            2 => Some(Tag::DoorbellSend),
            3 => Some(Tag::EventfdRead),
            4 => Some(Tag::Op),
            5 => Some(Tag::Detached),
            6 => Some(Tag::DirectMsg),
            7 => Some(Tag::DirectMsgSend),
            _ => None,
        }
    }
}

const TAG_SHIFT: u32 = 56;
const PAYLOAD_MASK: u64 = (1 << TAG_SHIFT) - 1;

/// A `user_data` value: tag plus payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UserData(u64);

impl UserData {
    pub(crate) fn new(tag: Tag, payload: u64) -> UserData {
        debug_assert!(
            payload <= PAYLOAD_MASK,
            "user_data payload overflows 56 bits"
        );
        UserData(((tag as u64) << TAG_SHIFT) | (payload & PAYLOAD_MASK))
    }

    pub(crate) fn from_raw(raw: u64) -> UserData {
        UserData(raw)
    }

    pub(crate) fn raw(self) -> u64 {
        self.0
    }

    pub(crate) fn tag(self) -> Option<Tag> {
        Tag::from_byte((self.0 >> TAG_SHIFT) as u8)
    }

    pub(crate) fn payload(self) -> u64 {
        self.0 & PAYLOAD_MASK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_tag_and_payload() {
        let ud = UserData::new(Tag::DoorbellSend, 17);
        let back = UserData::from_raw(ud.raw());
        assert_eq!(back.tag(), Some(Tag::DoorbellSend));
        assert_eq!(back.payload(), 17);
    }

    #[test]
    fn unknown_tag_is_none() {
        assert_eq!(UserData::from_raw(0).tag(), None);
        assert_eq!(UserData::from_raw(0xff << TAG_SHIFT).tag(), None);
    }
}
