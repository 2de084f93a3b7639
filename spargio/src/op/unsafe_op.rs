//! The operation behind `submit_unsafe`: caller-built SQE, caller-owned
//! state, caller-decoded completion.

use io_uring::squeue;

use super::{Completion, OpKind};
use crate::native::UringCqe;

/// State the kernel may use, the SQE builder, and the decoder.
pub(crate) struct UnsafeOp<S, B, D> {
    pub(crate) state: S,
    pub(crate) build: Option<B>,
    pub(crate) decode: D,
}

// SAFETY: `submit_unsafe`'s contract puts the burden on its caller: every
// address the builder writes into the SQE points into `state`'s heap
// memory (stable under moves) or into memory that outlives the operation.
unsafe impl<S, B, D, T> OpKind for UnsafeOp<S, B, D>
where
    S: Send + 'static,
    B: FnOnce(&mut S) -> squeue::Entry + Send + 'static,
    D: FnOnce(std::io::Result<UringCqe>, S) -> std::io::Result<T> + Send + 'static,
{
    type Output = std::io::Result<T>;

    fn build(&mut self) -> squeue::Entry {
        let build = self.build.take().expect("an operation is built once");
        build(&mut self.state)
    }

    fn complete(self, done: Completion) -> std::io::Result<T> {
        let cqe = match done.result {
            Ok(n) => Ok(UringCqe {
                result: n as i32,
                flags: done.flags,
            }),
            // A kernel error is still a completion the decoder may want
            // (e.g. -ETIME); only "never reached the kernel" is not.
            Err(e) if done.ran => Ok(UringCqe {
                result: -e.raw_os_error().unwrap_or(libc::EIO),
                flags: done.flags,
            }),
            Err(e) => Err(e),
        };
        (self.decode)(cqe, self.state)
    }
}
