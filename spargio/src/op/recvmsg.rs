//! `IORING_OP_RECVMSG` with the sender's address (datagram `recv_from`).

use io_uring::{opcode, squeue, types};

use super::msghdr::MsgBlock;
use super::{Completion, OpKind, SharedFd};
use crate::buf::{BufResult, IoBufMut};

/// Receives one datagram into the buffer (from its first byte) and the
/// sender's address.
pub(crate) struct RecvFrom<B> {
    fd: SharedFd,
    buf: B,
    msg: Box<MsgBlock>,
}

impl<B: IoBufMut> RecvFrom<B> {
    pub(crate) fn new(fd: SharedFd, mut buf: B) -> RecvFrom<B> {
        let msg = MsgBlock::new(buf.stable_mut_ptr(), buf.bytes_total(), None);
        RecvFrom { fd, buf, msg }
    }
}

// SAFETY: the SQE points at `msg` (heap), whose iovec points into `buf`'s
// heap memory and whose name points into itself; all owned by this value.
unsafe impl<B: IoBufMut> OpKind for RecvFrom<B> {
    type Output = BufResult<(usize, socket2::SockAddr), B>;

    fn build(&mut self) -> squeue::Entry {
        opcode::RecvMsg::new(types::Fd(self.fd.raw()), &mut self.msg.hdr).build()
    }

    fn complete(mut self, done: Completion) -> BufResult<(usize, socket2::SockAddr), B> {
        match done.result {
            Ok(n) => {
                // SAFETY: the kernel initialized the first `n` bytes, at most
                // the length we passed.
                unsafe { self.buf.set_init(n as usize) };
                (Ok((n as usize, self.msg.peer())), self.buf)
            }
            Err(e) => (Err(e), self.buf),
        }
    }
}
