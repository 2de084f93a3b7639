//! `IORING_OP_ACCEPT`.

use std::os::fd::{FromRawFd, OwnedFd};

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind, SharedFd};

/// The peer address the kernel fills in, with its length.
struct PeerAddr {
    storage: libc::sockaddr_storage,
    len: libc::socklen_t,
}

/// Accepts one connection; the new fd is close-on-exec.
pub(crate) struct Accept {
    pub(crate) fd: SharedFd,
    /// Written by the kernel; boxed so it does not move.
    peer: Box<PeerAddr>,
}

impl Accept {
    pub(crate) fn new(fd: SharedFd) -> Accept {
        Accept {
            fd,
            peer: Box::new(PeerAddr {
                // SAFETY: an all-zero `sockaddr_storage` is valid (family 0).
                storage: unsafe { std::mem::zeroed() },
                len: std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t,
            }),
        }
    }
}

// SAFETY: the SQE points at `peer`'s heap memory, owned by this value; the
// listening fd is kept open by `fd`.
unsafe impl OpKind for Accept {
    type Output = std::io::Result<(OwnedFd, socket2::SockAddr)>;

    fn build(&mut self) -> squeue::Entry {
        let peer = &mut *self.peer;
        opcode::Accept::new(
            types::Fd(self.fd.raw()),
            (&mut peer.storage as *mut libc::sockaddr_storage).cast(),
            &mut peer.len,
        )
        .flags(libc::SOCK_CLOEXEC)
        .build()
    }

    fn complete(self, done: Completion) -> std::io::Result<(OwnedFd, socket2::SockAddr)> {
        let fd = done.result?;
        // SAFETY: a successful ACCEPT returns a new fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        let peer = &*self.peer;
        let mut storage = socket2::SockAddrStorage::zeroed();
        let len = (peer.len as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
        // SAFETY: both are `sockaddr_storage`-sized plain bytes; we copy the
        // `len` bytes the kernel wrote.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&peer.storage as *const libc::sockaddr_storage).cast::<u8>(),
                (&mut storage as *mut socket2::SockAddrStorage).cast::<u8>(),
                len,
            )
        };
        // SAFETY: the kernel wrote a valid address of `len` bytes (ACCEPT
        // completed successfully), now in `storage`.
        let addr = unsafe { socket2::SockAddr::new(storage, len as libc::socklen_t) };
        Ok((fd, addr))
    }
}

/// Accepts connections until cancelled (`IORING_ACCEPT_MULTISHOT`): one
/// completion per connection, each a new close-on-exec fd. The kernel
/// reports no peer address in this mode.
pub(crate) struct AcceptMulti {
    pub(crate) fd: SharedFd,
}

// SAFETY: the SQE carries no pointers; the listening fd is kept open by
// `fd`.
unsafe impl super::MultishotKind for AcceptMulti {
    fn build(&mut self) -> squeue::Entry {
        opcode::AcceptMulti::new(types::Fd(self.fd.raw()))
            .flags(libc::SOCK_CLOEXEC)
            .build()
    }
}

impl crate::driver::lifecycle::Discard for AcceptMulti {
    fn discard(&mut self, result: i32, _flags: u32, _wake: &mut Vec<std::task::Waker>) {
        if result >= 0 {
            // SAFETY: an accepted fd nobody will read about: we are its only
            // owner.
            drop(unsafe { OwnedFd::from_raw_fd(result) });
        }
    }
}
