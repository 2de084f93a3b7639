//! `IORING_OP_SEND` from an owned buffer.

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind, SharedFd};
use crate::buf::{BufResult, IoBuf};

/// Sends the buffer's initialized bytes (once; the count may be short).
/// `MSG_NOSIGNAL`: a closed peer is `BrokenPipe`, never a `SIGPIPE`.
pub(crate) struct Send<B> {
    pub(crate) fd: SharedFd,
    pub(crate) buf: B,
}

// SAFETY: the SQE points into `buf`'s heap memory (IoBuf's contract), owned
// by this value.
unsafe impl<B: IoBuf> OpKind for Send<B> {
    type Output = BufResult<usize, B>;

    fn build(&mut self) -> squeue::Entry {
        let len = u32::try_from(self.buf.bytes_init()).unwrap_or(u32::MAX);
        opcode::Send::new(types::Fd(self.fd.raw()), self.buf.stable_ptr(), len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
    }

    fn complete(self, done: Completion) -> BufResult<usize, B> {
        (done.result.map(|n| n as usize), self.buf)
    }
}
