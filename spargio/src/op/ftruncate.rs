//! `IORING_OP_FTRUNCATE` (Linux 6.9+; callers fall back on `EINVAL`).

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind, SharedFd};

/// Sets the file's length.
pub(crate) struct Ftruncate {
    pub(crate) fd: SharedFd,
    pub(crate) len: u64,
}

// SAFETY: the SQE holds only the fd, kept open by `fd`.
unsafe impl OpKind for Ftruncate {
    type Output = std::io::Result<()>;

    fn build(&mut self) -> squeue::Entry {
        opcode::Ftruncate::new(types::Fd(self.fd.raw()), self.len).build()
    }

    fn complete(self, done: Completion) -> std::io::Result<()> {
        done.result.map(drop)
    }
}
