//! `IORING_OP_MKDIRAT`.

use std::ffi::CString;

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind};

/// Creates the directory `path` with `mode` (before the umask).
pub(crate) struct MkDirAt {
    pub(crate) path: CString,
    pub(crate) mode: u32,
}

// SAFETY: the SQE points at `path`'s heap buffer, owned by this value.
unsafe impl OpKind for MkDirAt {
    type Output = std::io::Result<()>;

    fn build(&mut self) -> squeue::Entry {
        opcode::MkDirAt::new(types::Fd(libc::AT_FDCWD), self.path.as_ptr())
            .mode(self.mode)
            .build()
    }

    fn complete(self, done: Completion) -> std::io::Result<()> {
        done.result.map(drop)
    }
}
