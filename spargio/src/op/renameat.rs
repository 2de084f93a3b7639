//! `IORING_OP_RENAMEAT`.

use std::ffi::CString;

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind};

/// Renames `from` to `to`, replacing `to` as `rename(2)` does.
pub(crate) struct RenameAt {
    pub(crate) from: CString,
    pub(crate) to: CString,
}

// SAFETY: the SQE points at both paths' heap buffers, owned by this value.
unsafe impl OpKind for RenameAt {
    type Output = std::io::Result<()>;

    fn build(&mut self) -> squeue::Entry {
        let cwd = types::Fd(libc::AT_FDCWD);
        opcode::RenameAt::new(cwd, self.from.as_ptr(), cwd, self.to.as_ptr()).build()
    }

    fn complete(self, done: Completion) -> std::io::Result<()> {
        done.result.map(drop)
    }
}
