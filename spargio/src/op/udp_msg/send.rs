//! `IORING_OP_SENDMSG` with control messages (GSO segment size, TOS).

use io_uring::{opcode, squeue, types};

use super::block::{SendCmsgs, UdpMsgBlock};
use crate::buf::{BufResult, IoBuf};
use crate::op::{Completion, OpKind, SharedFd};

/// Sends the buffer's bytes to an address with control messages: one
/// datagram, or (with a segment size) several the kernel cuts apart.
pub(crate) struct UdpSendMsg<B> {
    fd: SharedFd,
    buf: B,
    msg: Box<UdpMsgBlock>,
}

impl<B: IoBuf> UdpSendMsg<B> {
    pub(crate) fn new(
        fd: SharedFd,
        buf: B,
        addr: &socket2::SockAddr,
        cmsgs: SendCmsgs,
    ) -> UdpSendMsg<B> {
        // The kernel only reads through this pointer (a send).
        let mut msg = UdpMsgBlock::new(buf.stable_ptr().cast_mut(), buf.bytes_init(), Some(addr));
        msg.encode(cmsgs);
        UdpSendMsg { fd, buf, msg }
    }
}

// SAFETY: the SQE points at `msg` (heap), whose iovec points into `buf`'s
// heap memory (within its initialized length) and whose name and control
// pointers point into itself; all owned by this value.
unsafe impl<B: IoBuf> OpKind for UdpSendMsg<B> {
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
