//! `IORING_OP_CLOSE` of an fd nobody else holds.

use std::os::fd::{IntoRawFd, OwnedFd, RawFd};

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind};

/// Closes the fd, reporting the kernel's verdict (a close can fail, e.g.
/// with `EIO` from a network filesystem flushing late writes).
pub(crate) struct Close {
    fd: RawFd,
}

impl Close {
    pub(crate) fn new(fd: OwnedFd) -> Close {
        Close {
            fd: fd.into_raw_fd(),
        }
    }
}

// SAFETY: the SQE holds only the fd number.
unsafe impl OpKind for Close {
    type Output = std::io::Result<()>;

    fn build(&mut self) -> squeue::Entry {
        opcode::Close::new(types::Fd(self.fd)).build()
    }

    fn complete(self, done: Completion) -> std::io::Result<()> {
        if !done.ran {
            // Never reached the kernel (the runtime shut down): close here
            // so the fd does not leak.
            // SAFETY: the fd is ours and the ring never saw it.
            unsafe { libc::close(self.fd) };
        }
        done.result.map(drop)
    }
}
