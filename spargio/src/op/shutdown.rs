//! `IORING_OP_SHUTDOWN`.

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind, SharedFd};

/// Shuts down the read side, the write side, or both (`libc::SHUT_*`).
pub(crate) struct Shutdown {
    pub(crate) fd: SharedFd,
    pub(crate) how: i32,
}

// SAFETY: the SQE holds only the fd, kept open by `fd`.
unsafe impl OpKind for Shutdown {
    type Output = std::io::Result<()>;

    fn build(&mut self) -> squeue::Entry {
        opcode::Shutdown::new(types::Fd(self.fd.raw()), self.how).build()
    }

    fn complete(self, done: Completion) -> std::io::Result<()> {
        done.result.map(drop)
    }
}
