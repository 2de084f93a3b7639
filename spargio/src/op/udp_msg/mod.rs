//! `IORING_OP_SENDMSG` / `IORING_OP_RECVMSG` for UDP with control
//! messages: the GSO segment size (`UDP_SEGMENT`) and the TOS / traffic
//! class byte on a send; the GRO segment size (`UDP_GRO`), the TOS /
//! traffic class byte and the local destination address (`IP_PKTINFO`,
//! `IPV6_PKTINFO`) on a receive.
//!
//! Everything the kernel follows — the `msghdr`, its one `iovec`, the
//! peer's `sockaddr` and the control buffer — lives in one heap block
//! (`op/msghdr.rs`'s `MsgBlock`, here with the control buffer of
//! `block.rs` inline) owned by the operation next to the data buffer, so a
//! future dropped mid-flight hands all of it to the op table until the
//! completion. That is the same single allocation per operation as
//! `sendmsg.rs` and `recvmsg.rs` make; the control buffer is inline in it.
//!
//! The lengths the kernel sees never exceed the allocations: the iovec
//! covers the buffer's initialized bytes (send) or its capacity (receive),
//! and `msg_controllen` is at most `CONTROL_LEN`, the control buffer's
//! size. After a receive, the written-back `msg_controllen` is clamped to
//! that size again before any control message is read, and each message's
//! payload is read only when it lies wholly inside what was written.

mod block;
mod recv;
mod send;
#[cfg(test)]
mod tests;

pub(crate) use block::{SendCmsgs, Tos};
pub(crate) use recv::{recv_now, RecvMsgOut, UdpRecvMsg};
pub(crate) use send::UdpSendMsg;
