//! `IORING_OP_UNLINKAT` (files, or directories with `AT_REMOVEDIR`).

use std::ffi::CString;

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind};

/// Removes `path`: a file, or an empty directory when `dir` is set.
pub(crate) struct UnlinkAt {
    pub(crate) path: CString,
    pub(crate) dir: bool,
}

// SAFETY: the SQE points at `path`'s heap buffer, owned by this value.
unsafe impl OpKind for UnlinkAt {
    type Output = std::io::Result<()>;

    fn build(&mut self) -> squeue::Entry {
        let flags = if self.dir { libc::AT_REMOVEDIR } else { 0 };
        opcode::UnlinkAt::new(types::Fd(libc::AT_FDCWD), self.path.as_ptr())
            .flags(flags)
            .build()
    }

    fn complete(self, done: Completion) -> std::io::Result<()> {
        done.result.map(drop)
    }
}
