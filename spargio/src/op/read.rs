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

/// Reads at `offset` only if the data is in the page cache
/// (`preadv2(RWF_NOWAIT)`), on the calling thread. `None` when the read
/// would block (or the file does not support `RWF_NOWAIT`): the caller
/// then submits a [`ReadAt`].
///
/// This is what io_uring itself does first for a buffered read, inside
/// `io_uring_enter` on the submitting thread; doing it directly saves the
/// ring round trip when the data is cached, and cannot block any more than
/// the ring's own attempt would.
pub(crate) fn read_cached<B: IoBufMut>(
    fd: &SharedFd,
    buf: &mut B,
    offset: u64,
) -> Option<std::io::Result<usize>> {
    let len = buf.bytes_total();
    if len == 0 {
        return None;
    }
    let iov = libc::iovec {
        iov_base: buf.stable_mut_ptr().cast(),
        iov_len: len,
    };
    // SAFETY: `iov` describes `len` writable bytes of `buf` (IoBufMut's
    // contract), which we borrow mutably for the call; `fd` is kept open by
    // the `SharedFd` borrow.
    let n = unsafe { libc::preadv2(fd.raw(), &iov, 1, offset as libc::off_t, libc::RWF_NOWAIT) };
    if n < 0 {
        let err = std::io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EOPNOTSUPP) | Some(libc::EINTR) => None,
            // ESPIPE: not positional (a pipe, a socket); the ring's read
            // handles those.
            Some(libc::ESPIPE) => None,
            _ => Some(Err(err)),
        };
    }
    let n = n as usize;
    // SAFETY: the kernel initialized the first `n <= len` bytes.
    unsafe { buf.set_init(n) };
    Some(Ok(n))
}
