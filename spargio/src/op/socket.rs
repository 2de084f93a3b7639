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

/// An integer socket option of `fd` (`getsockopt`).
pub(crate) fn getsockopt_int(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
) -> std::io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `value`, a live
    // `c_int` of that size, and the new length into `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Sets an integer socket option of `fd` (`setsockopt`).
pub(crate) fn setsockopt_int(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: the option value is a live `c_int` and the length says so;
    // the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
