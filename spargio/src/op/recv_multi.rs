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
        opcode::RecvMulti::new(types::Fd(self.fd.raw()), self.pool.bgid()).build()
    }
}

impl Discard for RecvMulti {
    fn discard(&mut self, _result: i32, flags: u32, wake: &mut Vec<std::task::Waker>) {
        if let Some(bid) = io_uring::cqueue::buffer_select(flags) {
            self.pool.take(bid);
            wake.extend(self.pool.recycle_deferred(bid));
        }
    }
}
