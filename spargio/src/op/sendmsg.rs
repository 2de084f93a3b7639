//! `IORING_OP_SENDMSG` to an address (datagram `send_to`).

use io_uring::{opcode, squeue, types};

use super::msghdr::MsgBlock;
use super::{Completion, OpKind, SharedFd};
use crate::buf::{BufResult, IoBuf};

/// Sends the buffer's bytes as one datagram to an address.
pub(crate) struct SendTo<B> {
    fd: SharedFd,
    buf: B,
    msg: Box<MsgBlock>,
}

impl<B: IoBuf> SendTo<B> {
    pub(crate) fn new(fd: SharedFd, buf: B, addr: &socket2::SockAddr) -> SendTo<B> {
        // The kernel only reads through this pointer (a send).
        let msg = MsgBlock::new(buf.stable_ptr().cast_mut(), buf.bytes_init(), Some(addr));
        SendTo { fd, buf, msg }
    }
}

// SAFETY: the SQE points at `msg` (heap), whose iovec points into `buf`'s
// heap memory; both are owned by this value.
unsafe impl<B: IoBuf> OpKind for SendTo<B> {
    type Output = BufResult<usize, B>;

    fn build(&mut self) -> squeue::Entry {
        opcode::SendMsg::new(types::Fd(self.fd.raw()), &self.msg.hdr)
            .flags(libc::MSG_NOSIGNAL as u32)
            .build()
    }

    fn complete(self, done: Completion) -> BufResult<usize, B> {
        (done.result.map(|n| n as usize), self.buf)
    }
}
