//! `IORING_OP_RECV` into an owned buffer.

use std::mem::MaybeUninit;

use io_uring::{opcode, squeue, types};

use super::{Completion, OpKind, SharedFd};
use crate::buf::{BufResult, IoBufMut};

/// Receives up to the buffer's total length, filling from its first byte.
/// Zero means the peer closed its side.
pub(crate) struct Recv<B> {
    pub(crate) fd: SharedFd,
    pub(crate) buf: B,
    /// A stream receive: abandoned, it hands what it received to the
    /// stream's next receive (`op/carry.rs`). Datagram receives do not.
    pub(crate) carry: bool,
    /// The socket was found empty just now: the kernel arms its poll at
    /// once instead of trying the receive first (`IORING_RECVSEND_POLL_FIRST`),
    /// which would fail with `EAGAIN` (a wasted `sock_recvmsg`).
    pub(crate) poll_first: bool,
}

/// `IORING_RECVSEND_POLL_FIRST`, in the SQE's `ioprio`.
const RECVSEND_POLL_FIRST: u16 = 1;

// SAFETY: the SQE points into `buf`'s heap memory (IoBufMut's contract),
// owned by this value.
unsafe impl<B: IoBufMut> OpKind for Recv<B> {
    type Output = BufResult<usize, B>;

    fn build(&mut self) -> squeue::Entry {
        let len = u32::try_from(self.buf.bytes_total()).unwrap_or(u32::MAX);
        let ioprio = if self.poll_first {
            RECVSEND_POLL_FIRST
        } else {
            0
        };
        opcode::Recv::new(types::Fd(self.fd.raw()), self.buf.stable_mut_ptr(), len)
            .ioprio(ioprio)
            .build()
    }

    fn complete(mut self, done: Completion) -> BufResult<usize, B> {
        match done.result {
            Ok(n) => {
                // SAFETY: the kernel initialized the first `n` bytes, at most
                // the length we passed.
                unsafe { self.buf.set_init(n as usize) };
                (Ok(n as usize), self.buf)
            }
            Err(err) => (Err(err), self.buf),
        }
    }

    fn abandon(&mut self) {
        if self.carry {
            self.fd.carry_or_make().abandon();
        }
    }

    fn forsake(&mut self, wake: &mut Vec<std::task::Waker>) {
        if let Some(carry) = self.fd.carry().filter(|_| self.carry) {
            carry.fail_with(crate::driver::ops_table::forsaken_error());
            wake.extend(carry.settle_deferred(&[]));
        }
    }

    fn reclaim(self, done: Completion) {
        if !self.carry {
            return;
        }
        let fd = self.fd.clone();
        let (res, buf) = self.complete(done);
        // `abandon` made it.
        let Some(carry) = fd.carry() else { return };
        let got = match res {
            Ok(n) => &buf.as_init_slice()[..n],
            Err(err) => {
                carry.fail(err);
                &[]
            }
        };
        carry.settle(got);
    }
}

/// Receives what is already queued on the socket (`MSG_DONTWAIT`), on the
/// calling thread. `None` when nothing is: the caller submits a [`Recv`].
/// On `Ok(n)` the first `n` bytes of `out` are initialized (`out` may
/// start uninitialized).
pub(crate) fn recv_now(
    fd: &SharedFd,
    out: &mut [MaybeUninit<u8>],
) -> Option<std::io::Result<usize>> {
    // SAFETY: `out` is a live exclusive borrow of `out.len()` writable
    // bytes (the kernel only writes them); the fd is kept open by the
    // `SharedFd` borrow.
    let n = unsafe {
        libc::recv(
            fd.raw(),
            out.as_mut_ptr().cast(),
            out.len(),
            libc::MSG_DONTWAIT,
        )
    };
    super::send::would_block_or(n)
}

#[cfg(test)]
mod tests {
    use std::task::{Context, Poll, Waker};

    use super::*;

    #[test]
    fn a_forsaken_receive_fails_its_streams_carry_instead_of_leaving_it_unsettled() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        let fd = SharedFd::new(a.into());
        let mut recv = Recv {
            fd: fd.clone(),
            buf: Vec::<u8>::with_capacity(8),
            carry: true,
            poll_first: false,
        };
        recv.abandon();
        let mut wake = Vec::new();
        recv.forsake(&mut wake);
        drop(recv);
        let carry = fd.carry().expect("made by abandon");
        let mut out = [std::mem::MaybeUninit::new(0u8); 8];
        let mut cx = Context::from_waker(Waker::noop());
        match carry.poll_take(&mut cx, &mut out) {
            Poll::Ready(Some(Err(e))) => assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe),
            other => panic!("the next receive would see {other:?}, not the loss"),
        }
    }
}
