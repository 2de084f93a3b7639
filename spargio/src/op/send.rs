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

/// Sends what the socket buffer takes right now (`MSG_DONTWAIT`), on the
/// calling thread. `None` when it would block: the caller submits a
/// [`Send`] instead.
pub(crate) fn send_now(fd: &SharedFd, data: &[u8]) -> Option<std::io::Result<usize>> {
    // SAFETY: `data` is a live borrow of `data.len()` bytes; the fd is kept
    // open by the `SharedFd` borrow.
    let n = unsafe {
        libc::send(
            fd.raw(),
            data.as_ptr().cast(),
            data.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    would_block_or(n)
}

/// `None` for `EAGAIN`/`EINTR`, else the result.
pub(crate) fn would_block_or(n: isize) -> Option<std::io::Result<usize>> {
    if n >= 0 {
        return Some(Ok(n as usize));
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EINTR) => None,
        _ => Some(Err(err)),
    }
}
