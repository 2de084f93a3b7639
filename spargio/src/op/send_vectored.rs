//! `IORING_OP_SENDMSG` gathering a window of owned buffers: a batch send.
//!
//! One SQE carries up to a window of buffers as an `iovec` array, so they
//! go out in order (one operation, no link chain to keep contiguous in the
//! submission queue) and with one completion. `MSG_WAITALL` makes the
//! kernel retry a short send of a stream socket until every byte is taken
//! or an error stops it; the count then says how far it got.

use io_uring::{opcode, squeue, types};

use super::send::would_block_or;
use super::{Completion, OpKind, SharedFd};
use crate::buf::{BufResult, IoBuf};

/// Most buffers one `sendmsg` takes (the kernel's `UIO_MAXIOV`).
pub(crate) const MAX_IOVECS: usize = 1024;

/// The `msghdr` and its `iovec`s, on the heap so the pointers the kernel
/// follows stay valid when the operation moves. Built once per window: the
/// inline attempt uses it, and the ring operation takes it over if the
/// socket would block.
pub(crate) struct Gather {
    hdr: libc::msghdr,
    iovs: Box<[libc::iovec]>,
}

// SAFETY: the raw pointers inside point into this block's own `iovs` and
// into buffers owned alongside it by the same operation; nothing is shared
// with another thread while the kernel uses them.
unsafe impl Send for Gather {}

impl Gather {
    /// `iovec`s for `bufs[first..end]`, the first one from byte `offset`.
    pub(crate) fn new<B: IoBuf>(
        bufs: &[B],
        first: usize,
        offset: usize,
        end: usize,
    ) -> Box<Gather> {
        let iovs: Box<[libc::iovec]> = bufs[first..end]
            .iter()
            .enumerate()
            .map(|(k, b)| {
                let skip = if k == 0 {
                    offset.min(b.bytes_init())
                } else {
                    0
                };
                libc::iovec {
                    // The kernel only reads through these (a send).
                    iov_base: b.stable_ptr().wrapping_add(skip).cast_mut().cast(),
                    iov_len: b.bytes_init() - skip,
                }
            })
            .collect();
        let mut gather = Box::new(Gather {
            // SAFETY: all-zero is a valid `msghdr` (null pointers, zero
            // lengths).
            hdr: unsafe { std::mem::zeroed() },
            iovs,
        });
        gather.hdr.msg_iov = gather.iovs.as_mut_ptr();
        gather.hdr.msg_iovlen = gather.iovs.len();
        gather
    }
}

/// Sends what `gather` describes (a window of `bufs`) in one `sendmsg`.
pub(crate) struct SendVectored<B> {
    fd: SharedFd,
    bufs: Vec<B>,
    gather: Box<Gather>,
}

impl<B: IoBuf> SendVectored<B> {
    /// `gather` must have been built over these `bufs` (by
    /// [`Gather::new`]): its iovecs point into their heap memory.
    pub(crate) fn new(fd: SharedFd, bufs: Vec<B>, gather: Box<Gather>) -> SendVectored<B> {
        SendVectored { fd, bufs, gather }
    }
}

// SAFETY: the SQE points at `gather.hdr` (heap), whose iovecs point into
// `bufs`' heap memory (IoBuf's contract: stable under moves), each within
// its initialized length; `bufs` and `gather` are owned by this value
// until the completion hands them back.
unsafe impl<B: IoBuf> OpKind for SendVectored<B> {
    type Output = BufResult<usize, Vec<B>>;

    fn build(&mut self) -> squeue::Entry {
        opcode::SendMsg::new(types::Fd(self.fd.raw()), &self.gather.hdr)
            .flags((libc::MSG_NOSIGNAL | libc::MSG_WAITALL) as u32)
            .build()
    }

    fn complete(self, done: Completion) -> BufResult<usize, Vec<B>> {
        (done.result.map(|n| n as usize), self.bufs)
    }
}

/// Sends what the socket buffer takes of `gather`'s window right now
/// (`MSG_DONTWAIT`), on the calling thread. `None` when it would block.
/// The caller keeps the buffers `gather` points into alive and untouched.
pub(crate) fn send_vectored_now(fd: &SharedFd, gather: &Gather) -> Option<std::io::Result<usize>> {
    // SAFETY: the msghdr's iovecs point into buffers the caller holds for
    // the whole call; the fd is kept open by the `SharedFd` borrow.
    let n = unsafe {
        libc::sendmsg(
            fd.raw(),
            &gather.hdr,
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    would_block_or(n)
}
