//! `IORING_OP_LINKAT` (hard links).

use std::ffi::CString;

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind};

/// Creates the hard link `link` to `original` (a symlink `original` is
/// linked itself, not followed, as `link(2)` does on Linux).
pub(crate) struct LinkAt {
    pub(crate) original: CString,
    pub(crate) link: CString,
}

// SAFETY: the SQE points at both paths' heap buffers, owned by this value.
unsafe impl OpKind for LinkAt {
    type Output = std::io::Result<()>;

    fn build(&mut self) -> squeue::Entry {
        let cwd = types::Fd(libc::AT_FDCWD);
        opcode::LinkAt::new(cwd, self.original.as_ptr(), cwd, self.link.as_ptr()).build()
    }

    fn complete(self, done: Completion) -> std::io::Result<()> {
        done.result.map(drop)
    }
}
