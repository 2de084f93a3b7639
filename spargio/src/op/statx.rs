//! `IORING_OP_STATX`, by path or on an open fd.

use std::ffi::CString;

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind, SharedFd};

/// `statx(2)`: `path` relative to the working directory, or the open fd
/// itself when `fd` is set (with an empty path and `AT_EMPTY_PATH`).
pub(crate) struct Statx {
    pub(crate) fd: Option<SharedFd>,
    pub(crate) path: CString,
    pub(crate) flags: i32,
    pub(crate) mask: u32,
    /// The kernel writes the result here; boxed so it does not move.
    pub(crate) out: Box<libc::statx>,
}

impl Statx {
    pub(crate) fn new(fd: Option<SharedFd>, path: CString, flags: i32, mask: u32) -> Statx {
        // SAFETY: `statx` is a plain C struct of integers; all-zero is valid.
        let out = Box::new(unsafe { std::mem::zeroed::<libc::statx>() });
        let flags = if fd.is_some() {
            flags | libc::AT_EMPTY_PATH
        } else {
            flags
        };
        Statx {
            fd,
            path,
            flags,
            mask,
            out,
        }
    }
}

// SAFETY: the SQE points at `path`'s and `out`'s heap memory, owned by this
// value; the fd (if any) is kept open by `fd`.
unsafe impl OpKind for Statx {
    type Output = std::io::Result<libc::statx>;

    fn build(&mut self) -> squeue::Entry {
        let dirfd = self.fd.as_ref().map_or(libc::AT_FDCWD, SharedFd::raw);
        let out: *mut libc::statx = &mut *self.out;
        opcode::Statx::new(types::Fd(dirfd), self.path.as_ptr(), out.cast())
            .flags(self.flags)
            .mask(self.mask)
            .build()
    }

    fn complete(self, done: Completion) -> std::io::Result<libc::statx> {
        done.result?;
        Ok(*self.out)
    }
}
