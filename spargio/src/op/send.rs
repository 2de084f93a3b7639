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

/// A [`Send`] of every byte, for stream sockets: `MSG_WAITALL` makes
/// the kernel retry a short send until every byte is taken or an error
/// stops it (the count then says how far it got), so what the caller
/// handed over goes out without anyone polling in between. It can still
/// come back short (a kernel that does not retry sends, a connection shut
/// down midway): the caller resends the rest.
pub(crate) struct SendAll<B>(pub(crate) Send<B>);

fn entry<B: IoBuf>(send: &Send<B>, flags: libc::c_int) -> squeue::Entry {
    let len = u32::try_from(send.buf.bytes_init()).unwrap_or(u32::MAX);
    opcode::Send::new(types::Fd(send.fd.raw()), send.buf.stable_ptr(), len)
        .flags(flags)
        .build()
}

// SAFETY: the SQE points into `buf`'s heap memory (IoBuf's contract), owned
// by this value.
unsafe impl<B: IoBuf> OpKind for Send<B> {
    type Output = BufResult<usize, B>;

    fn build(&mut self) -> squeue::Entry {
        entry(self, libc::MSG_NOSIGNAL)
    }

    fn complete(self, done: Completion) -> BufResult<usize, B> {
        (done.result.map(|n| n as usize), self.buf)
    }
}

// SAFETY: as for `Send`, whose buffer this value owns.
unsafe impl<B: IoBuf> OpKind for SendAll<B> {
    type Output = BufResult<usize, B>;

    fn build(&mut self) -> squeue::Entry {
        entry(&self.0, libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
    }

    fn complete(self, done: Completion) -> BufResult<usize, B> {
        self.0.complete(done)
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
