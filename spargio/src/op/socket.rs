//! `IORING_OP_SOCKET` (Linux 5.19+; callers fall back to `socket(2)` on
//! `EINVAL`).

use std::os::fd::{FromRawFd, OwnedFd};

use io_uring::{opcode, squeue};

use super::{Completion, OpKind};

/// Creates a socket; `SOCK_CLOEXEC` is always added.
pub(crate) struct Socket {
    pub(crate) domain: i32,
    pub(crate) ty: i32,
    pub(crate) protocol: i32,
}

// SAFETY: the SQE carries no pointers.
unsafe impl OpKind for Socket {
    type Output = std::io::Result<OwnedFd>;

    fn build(&mut self) -> squeue::Entry {
        opcode::Socket::new(self.domain, self.ty | libc::SOCK_CLOEXEC, self.protocol).build()
    }

    fn complete(self, done: Completion) -> std::io::Result<OwnedFd> {
        let fd = done.result?;
        // SAFETY: a successful SOCKET returns a new fd that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }
}
