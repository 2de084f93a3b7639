//! `IORING_OP_CONNECT`.

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind, SharedFd};

/// Connects the socket to `addr`.
pub(crate) struct Connect {
    pub(crate) fd: SharedFd,
    /// Read by the kernel until the connect completes; boxed so it does not
    /// move.
    pub(crate) addr: Box<socket2::SockAddr>,
}

// SAFETY: the SQE points at `addr`'s heap memory, owned by this value; the
// fd is kept open by `fd`.
unsafe impl OpKind for Connect {
    type Output = std::io::Result<()>;

    fn build(&mut self) -> squeue::Entry {
        opcode::Connect::new(
            types::Fd(self.fd.raw()),
            self.addr.as_ptr().cast(),
            self.addr.len(),
        )
        .build()
    }

    fn complete(self, done: Completion) -> std::io::Result<()> {
        done.result.map(drop)
    }
}
