//! `IORING_OP_READ` at an offset into an owned buffer.

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind, SharedFd};
use crate::buf::{BufResult, IoBufMut};

/// Reads up to the buffer's total length at `offset`, filling from its
/// first byte.
pub(crate) struct ReadAt<B> {
    pub(crate) fd: SharedFd,
    pub(crate) buf: B,
    pub(crate) offset: u64,
}

// SAFETY: the SQE points into `buf`'s heap memory (IoBufMut's contract:
// stable under moves), owned by this value.
unsafe impl<B: IoBufMut> OpKind for ReadAt<B> {
    type Output = BufResult<usize, B>;

    fn build(&mut self) -> squeue::Entry {
        let len = u32::try_from(self.buf.bytes_total()).unwrap_or(u32::MAX);
        opcode::Read::new(types::Fd(self.fd.raw()), self.buf.stable_mut_ptr(), len)
            .offset(self.offset)
            .build()
    }

    fn complete(mut self, done: Completion) -> BufResult<usize, B> {
        match done.result {
            Ok(n) => {
                // SAFETY: the kernel initialized the first `n` bytes, and
                // `n` is at most the length we passed (`bytes_total`).
                unsafe { self.buf.set_init(n as usize) };
                (Ok(n as usize), self.buf)
            }
            Err(err) => (Err(err), self.buf),
        }
    }
}
