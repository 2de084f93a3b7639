//! `IORING_OP_RECV` with `IORING_RECV_MULTISHOT` on a provided-buffer ring.

use std::sync::Arc;

use io_uring::{opcode, squeue, types};

use super::{MultishotKind, SharedFd};
use crate::buf::ring::BufRing;
use crate::driver::lifecycle::Discard;

/// `IORING_RECV_MULTISHOT`, in the SQE's `ioprio`.
const RECV_MULTISHOT: u16 = 1 << 1;
/// `IORING_RECVSEND_POLL_FIRST`, in the SQE's `ioprio`.
const RECVSEND_POLL_FIRST: u16 = 1;

/// Receives until cancelled, end of stream, an error, or the pool runs dry:
/// one completion per chunk, each naming the pool buffer it filled.
pub(crate) struct RecvMulti {
    pub(crate) fd: SharedFd,
    /// Kept registered (and its memory alive) until the final completion.
    pub(crate) pool: Arc<BufRing>,
    /// Unread completions at which the runtime pauses the receive.
    pub(crate) limit: usize,
    /// Abandoned, what it received and nobody read goes to the stream's
    /// carry (`op/carry.rs`), and so does the error it ended with.
    pub(crate) carry: bool,
    /// Abandoned with `carry`: counted in the carry as unsettled until
    /// this value is dropped (after the last completion).
    abandoned: bool,
}

impl RecvMulti {
    pub(crate) fn new(fd: SharedFd, pool: Arc<BufRing>, limit: usize, carry: bool) -> RecvMulti {
        RecvMulti {
            fd,
            pool,
            limit,
            carry,
            abandoned: false,
        }
    }
}

// SAFETY: the SQE carries no pointers of its own; the buffers it may fill
// are the pool's, registered and kept alive by `pool` until the final
// completion, and the fd by `fd`.
unsafe impl MultishotKind for RecvMulti {
    fn build(&mut self) -> squeue::Entry {
        let mut ioprio = RECV_MULTISHOT;
        // Never poll-first outside tests: the kernel then loses nearly
        // every reset that follows data (`net/segments.rs`).
        if crate::driver::faults::poll_first_multishot() {
            ioprio |= RECVSEND_POLL_FIRST;
        }
        // `opcode::RecvMulti` with `ioprio` settable: a null buffer of
        // length 0 and `BUFFER_SELECT` make the kernel take a pool buffer.
        opcode::Recv::new(types::Fd(self.fd.raw()), std::ptr::null_mut(), 0)
            .buf_group(self.pool.bgid())
            .ioprio(ioprio)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT)
    }

    fn queue_limit(&self) -> usize {
        self.limit
    }

    fn abandon(&mut self) {
        if self.carry {
            self.fd.carry_or_make().abandon();
            self.abandoned = true;
        }
    }
}

/// A one-shot poll for the peer's hangup or reset (`POLLRDHUP`; errors and
/// hangups are always reported), watching a [`RecvMulti`]'s socket: the
/// kernel's multishot receive can miss a reset that follows data, a plain
/// poll does not (`net/segments.rs`).
pub(crate) struct HangupWatch {
    pub(crate) fd: SharedFd,
}

impl HangupWatch {
    /// Whether receives on `shared`'s runtime need the watch: on io_uring.
    /// The epoll backend's emulated multishot receive reports a reset
    /// itself, and there a watch would cost a `poll` per readiness event
    /// of its fd (measured: up to 11% more CPU per request under hyper at
    /// 4,000 connections).
    pub(crate) fn needed(shared: &crate::scheduler::Shared) -> bool {
        shared.config.backend != crate::BackendKind::Epoll
    }
}

// SAFETY: a poll carries no pointers; `fd` keeps the descriptor open.
unsafe impl MultishotKind for HangupWatch {
    fn build(&mut self) -> squeue::Entry {
        opcode::PollAdd::new(types::Fd(self.fd.raw()), libc::POLLRDHUP as u32).build()
    }
}

impl Discard for HangupWatch {
    fn discard(&mut self, _result: i32, _flags: u32, _wake: &mut Vec<std::task::Waker>) {}
}

impl Discard for RecvMulti {
    fn discard(&mut self, result: i32, flags: u32, wake: &mut Vec<std::task::Waker>) {
        let carry = self.fd.carry().filter(|_| self.abandoned);
        if let Some(bid) = io_uring::cqueue::buffer_select(flags) {
            self.pool.take(bid);
            if let Some(carry) = carry.filter(|_| result > 0) {
                // SAFETY: the completion handed out `bid`, recycled only
                // below, and the kernel wrote `result` bytes into it.
                carry.append(unsafe { self.pool.bytes(bid, result as usize) });
            }
            wake.extend(self.pool.recycle_deferred(bid));
        }
        if let Some(carry) = carry.filter(|_| result < 0) {
            carry.fail(std::io::Error::from_raw_os_error(-result));
        }
    }

    fn forsake(&mut self, wake: &mut Vec<std::task::Waker>) {
        if let Some(carry) = self.fd.carry().filter(|_| self.abandoned) {
            self.abandoned = false;
            carry.fail_with(crate::driver::ops_table::forsaken_error());
            wake.extend(carry.settle_deferred(&[]));
        }
    }
}

impl Drop for RecvMulti {
    fn drop(&mut self) {
        // After the last completion (or never armed again): the carry
        // holds all it will get.
        if let Some(carry) = self.fd.carry().filter(|_| self.abandoned) {
            carry.settle(&[]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_is_the_kernels_multishot_receive() {
        // The same SQE `opcode::RecvMulti` builds, plus `POLL_FIRST`.
        let reference = opcode::RecvMulti::new(types::Fd(7), 3).build();
        let ours = opcode::Recv::new(types::Fd(7), std::ptr::null_mut(), 0)
            .buf_group(3)
            .ioprio(RECV_MULTISHOT)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT);
        // SAFETY: `squeue::Entry` is `#[repr(C)]` around the kernel's
        // 64-byte `io_uring_sqe`, all integer fields: any bytes are valid.
        let bytes = |e: squeue::Entry| unsafe { std::mem::transmute::<_, [u8; 64]>(e) };
        assert_eq!(bytes(reference), bytes(ours));
    }
}
