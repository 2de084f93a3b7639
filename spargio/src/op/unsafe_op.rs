//! The operation behind `submit_unsafe`: caller-built SQE, caller-owned
//! state, caller-decoded completion.

use io_uring::{opcode, squeue};

use super::{Completion, OpKind};

/// A raw completion, as handed to [`UringNativeAny::submit_unsafe`](crate::UringNativeAny::submit_unsafe)
/// decoders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UringCqe {
    /// The CQE's `res`: a count, an fd, or a negated errno.
    pub result: i32,
    /// The CQE's flags (`IORING_CQE_F_*`).
    pub flags: u32,
}

/// State the kernel may use, the SQE builder, and the decoder.
pub(crate) struct UnsafeOp<S, B, D> {
    pub(crate) state: S,
    pub(crate) build: Option<B>,
    pub(crate) decode: D,
    /// Why the built SQE was not submitted (a NOP went in its place).
    pub(crate) refused: Option<std::io::Error>,
    /// The runtime runs on epoll: only opcodes it emulates are accepted.
    epoll: Option<EpollNote>,
}

/// The epoll runtime whose `submit_unsafe` this is (for the error
/// naming why io_uring is not in use).
#[derive(Clone, Debug)]
pub(crate) struct EpollNote(pub(crate) crate::RuntimeHandle);

impl EpollNote {
    fn why(&self) -> String {
        match self.0.io_uring_refusal() {
            Some(refusal) => format!("io_uring was refused: {refusal}"),
            None => "epoll was asked for".into(),
        }
    }
}

impl<S, B, D> UnsafeOp<S, B, D> {
    pub(crate) fn new(
        state: S,
        build: B,
        decode: D,
        epoll: Option<EpollNote>,
    ) -> UnsafeOp<S, B, D> {
        UnsafeOp {
            state,
            build: Some(build),
            decode,
            refused: None,
            epoll,
        }
    }
}

/// Opcodes that act on other requests or on the runtime's own kernel
/// state by `user_data` or buffer group: through them a caller could
/// forge a runtime completion (and free memory the kernel still writes),
/// cancel or re-target the runtime's operations, or take its provided
/// buffers.
const REFUSED_OPCODES: [u8; 7] = [
    opcode::MsgRingData::CODE,
    opcode::AsyncCancel::CODE,
    opcode::PollRemove::CODE,
    opcode::TimeoutRemove::CODE,
    opcode::LinkTimeout::CODE,
    opcode::ProvideBuffers::CODE,
    opcode::RemoveBuffers::CODE,
];

/// SQE flags the runtime cannot honour for a caller-built SQE: buffer
/// selection takes a runtime pool's buffer, a skipped success completion
/// would never end the operation, and links tie it to SQEs it does not
/// own.
const REFUSED_FLAGS: u8 = squeue::Flags::BUFFER_SELECT.bits()
    | squeue::Flags::SKIP_SUCCESS.bits()
    | squeue::Flags::IO_LINK.bits()
    | squeue::Flags::IO_HARDLINK.bits();

/// Checks a caller-built SQE against what `submit_unsafe` allows.
fn check(sqe: &squeue::Entry, epoll: Option<&EpollNote>) -> std::io::Result<()> {
    let code = sqe.get_opcode();
    if REFUSED_OPCODES.iter().any(|&c| u32::from(c) == code) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("submit_unsafe: opcode {code} acts on the runtime's own requests"),
        ));
    }
    // `io_uring_sqe` starts with the opcode byte, then the flags byte.
    let flags = crate::driver::audit::bytemuck_sqe(sqe)[0].to_le_bytes()[1];
    if flags & REFUSED_FLAGS != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "submit_unsafe: SQE flags {flags:#x} (buffer select, skip success and \
                 links are not allowed)"
            ),
        ));
    }
    if let Some(note) = epoll {
        if !u8::try_from(code).is_ok_and(crate::driver::epoll::is_supported) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                format!(
                    "submit_unsafe: opcode {code} needs io_uring, and this runtime runs on \
                     the epoll backend ({}); see the book's \"Backends\" chapter for the \
                     opcodes epoll runs",
                    note.why()
                ),
            ));
        }
    }
    Ok(())
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
        let sqe = build(&mut self.state);
        match check(&sqe, self.epoll.as_ref()) {
            Ok(()) => sqe,
            Err(err) => {
                // Never submitted: a NOP takes its place and the caller gets
                // the error; the state was never lent to the kernel.
                self.refused = Some(err);
                opcode::Nop::new().build()
            }
        }
    }

    fn complete(self, done: Completion) -> std::io::Result<T> {
        if let Some(err) = self.refused {
            return Err(err);
        }
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
