//! `IORING_OP_FSYNC` (full or data-only).

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind, SharedFd};

/// Flushes the file to its device; `data_only` skips metadata that is not
/// needed to read the data back (`fdatasync`).
pub(crate) struct Fsync {
    pub(crate) fd: SharedFd,
    pub(crate) data_only: bool,
}

// SAFETY: the SQE holds only the fd, kept open by `fd`.
unsafe impl OpKind for Fsync {
    type Output = std::io::Result<()>;

    fn build(&mut self) -> squeue::Entry {
        let flags = if self.data_only {
            types::FsyncFlags::DATASYNC
        } else {
            types::FsyncFlags::empty()
        };
        opcode::Fsync::new(types::Fd(self.fd.raw()))
            .flags(flags)
            .build()
    }

    fn complete(self, done: Completion) -> std::io::Result<()> {
        done.result.map(drop)
    }
}
