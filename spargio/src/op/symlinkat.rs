//! `IORING_OP_SYMLINKAT`.

use std::ffi::CString;

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind};

/// Creates the symlink `link` pointing at `target` (not checked to exist).
pub(crate) struct SymlinkAt {
    pub(crate) target: CString,
    pub(crate) link: CString,
}

// SAFETY: the SQE points at both paths' heap buffers, owned by this value.
unsafe impl OpKind for SymlinkAt {
    type Output = std::io::Result<()>;

    fn build(&mut self) -> squeue::Entry {
        opcode::SymlinkAt::new(
            types::Fd(libc::AT_FDCWD),
            self.target.as_ptr(),
            self.link.as_ptr(),
        )
        .build()
    }

    fn complete(self, done: Completion) -> std::io::Result<()> {
        done.result.map(drop)
    }
}
