//! `IORING_OP_OPENAT`.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind};

/// Opens `path` (relative to the working directory) with `open(2)` flags
/// and mode; `O_CLOEXEC` is always added.
pub(crate) struct OpenAt {
    pub(crate) path: CString,
    pub(crate) flags: i32,
    pub(crate) mode: u32,
}

// SAFETY: the SQE points at `path`'s heap buffer, owned by this value.
unsafe impl OpKind for OpenAt {
    type Output = std::io::Result<OwnedFd>;

    fn build(&mut self) -> squeue::Entry {
        opcode::OpenAt::new(types::Fd(libc::AT_FDCWD), self.path.as_ptr())
            .flags(self.flags | libc::O_CLOEXEC)
            .mode(self.mode)
            .build()
    }

    fn complete(self, done: Completion) -> std::io::Result<OwnedFd> {
        let fd = done.result?;
        // SAFETY: a successful OPENAT returns a new fd that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }
}
