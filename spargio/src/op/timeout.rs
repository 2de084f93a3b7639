//! `IORING_OP_TIMEOUT` as a one-shot sleep.

use std::time::Duration;

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind};

/// Completes after `duration` (measured by the kernel's monotonic clock).
pub(crate) struct Timeout {
    /// Read by the kernel when the SQE is issued; boxed so it does not move.
    spec: Box<types::Timespec>,
}

impl Timeout {
    /// A duration past what the kernel's signed seconds hold waits as
    /// long as they do (`Duration::MAX` would otherwise turn negative and
    /// be refused with `EINVAL`).
    pub(crate) fn new(duration: Duration) -> Timeout {
        let secs = duration.as_secs().min(i64::MAX as u64);
        Timeout {
            spec: Box::new(
                types::Timespec::new()
                    .sec(secs)
                    .nsec(duration.subsec_nanos()),
            ),
        }
    }
}

// SAFETY: the SQE points at `spec`'s heap memory, owned by this value.
unsafe impl OpKind for Timeout {
    type Output = std::io::Result<()>;

    fn build(&mut self) -> squeue::Entry {
        opcode::Timeout::new(&*self.spec).build()
    }

    fn complete(self, done: Completion) -> std::io::Result<()> {
        match done.result {
            // Expiry is the timeout's success.
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => Ok(()),
            res => res.map(drop),
        }
    }
}
