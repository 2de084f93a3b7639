//! `IORING_OP_RECV` with `IORING_RECV_MULTISHOT` on a provided-buffer ring.

use std::sync::Arc;

use io_uring::{opcode, squeue, types};

use super::{MultishotKind, SharedFd};
use crate::buf::ring::BufRing;
use crate::driver::lifecycle::Discard;

/// Receives until cancelled, end of stream, an error, or the pool runs dry:
/// one completion per chunk, each naming the pool buffer it filled.
pub(crate) struct RecvMulti {
    pub(crate) fd: SharedFd,
    /// Kept registered (and its memory alive) until the final completion.
    pub(crate) pool: Arc<BufRing>,
}

// SAFETY: the SQE carries no pointers of its own; the buffers it may fill
// are the pool's, registered and kept alive by `pool` until the final
// completion, and the fd by `fd`.
unsafe impl MultishotKind for RecvMulti {
    fn build(&mut self) -> squeue::Entry {
        if crate::driver::faults::poll_first_multishot() {
            return poll_first(self.fd.raw(), self.pool.bgid());
        }
        opcode::RecvMulti::new(types::Fd(self.fd.raw()), self.pool.bgid()).build()
    }
}

/// A one-shot poll for the peer's hangup or reset (`POLLRDHUP`; errors and
/// hangups are always reported), watching a [`RecvMulti`]'s socket: the
/// kernel's multishot receive can miss a reset that follows data, a plain
/// poll does not (`net/segments.rs`).
pub(crate) struct HangupWatch {
    pub(crate) fd: SharedFd,
}

// SAFETY: a poll carries no pointers; `fd` keeps the descriptor open.
unsafe impl MultishotKind for HangupWatch {
    fn build(&mut self) -> squeue::Entry {
        opcode::PollAdd::new(types::Fd(self.fd.raw()), libc::POLLRDHUP as u32).build()
    }
}

impl Discard for HangupWatch {
    fn discard(&mut self, _result: i32, _flags: u32, _wake: &mut Vec<std::task::Waker>) {}
}

impl Discard for RecvMulti {
    fn discard(&mut self, _result: i32, flags: u32, wake: &mut Vec<std::task::Waker>) {
        if let Some(bid) = io_uring::cqueue::buffer_select(flags) {
            self.pool.take(bid);
            wake.extend(self.pool.recycle_deferred(bid));
        }
    }
}

/// The same receive armed `IORING_RECVSEND_POLL_FIRST` (test-only, see
/// `driver/faults.rs`): what `RecvMulti::build` makes, with that bit too.
#[cold]
fn poll_first(fd: i32, bgid: u16) -> squeue::Entry {
    const RECV_MULTISHOT: u16 = 2;
    const RECVSEND_POLL_FIRST: u16 = 1;
    opcode::Recv::new(types::Fd(fd), std::ptr::null_mut(), 0)
        .buf_group(bgid)
        .ioprio(RECV_MULTISHOT | RECVSEND_POLL_FIRST)
        .build()
        .flags(squeue::Flags::BUFFER_SELECT)
}
