//! `IORING_OP_WRITE` at an offset from an owned buffer.

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind, SharedFd};
use crate::buf::{BufResult, IoBuf};

/// Writes the buffer's initialized bytes at `offset` (`u64::MAX`: at the
/// file position, as for a file opened in append mode).
pub(crate) struct WriteAt<B> {
    pub(crate) fd: SharedFd,
    pub(crate) buf: B,
    pub(crate) offset: u64,
}

// SAFETY: the SQE points into `buf`'s heap memory (IoBuf's contract), owned
// by this value.
unsafe impl<B: IoBuf> OpKind for WriteAt<B> {
    type Output = BufResult<usize, B>;

    fn build(&mut self) -> squeue::Entry {
        let len = u32::try_from(self.buf.bytes_init()).unwrap_or(u32::MAX);
        opcode::Write::new(types::Fd(self.fd.raw()), self.buf.stable_ptr(), len)
            .offset(self.offset)
            .build()
    }

    fn complete(self, done: Completion) -> BufResult<usize, B> {
        (done.result.map(|n| n as usize), self.buf)
    }
}
