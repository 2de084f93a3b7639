//! `IORING_OP_RECVMSG` with control messages (GRO segment size, TOS,
//! pktinfo).

use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, squeue, types};

use super::block::{RecvCmsgs, UdpMsgBlock};
use crate::buf::{BufResult, IoBufMut};
use crate::op::{Completion, OpKind, SharedFd};

/// What a receive produced.
#[derive(Debug)]
pub(crate) struct RecvMsgOut {
    /// Bytes written into the buffer.
    pub(crate) len: usize,
    /// The sender.
    pub(crate) peer: socket2::SockAddr,
    /// The control messages.
    pub(crate) cmsgs: RecvCmsgs,
}

/// Receives one datagram (or a GRO-coalesced run of them) into the buffer
/// from its first byte, with the sender's address and control messages.
pub(crate) struct UdpRecvMsg<B> {
    fd: SharedFd,
    buf: B,
    msg: Box<UdpMsgBlock>,
}

impl<B: IoBufMut> UdpRecvMsg<B> {
    pub(crate) fn new(fd: SharedFd, mut buf: B) -> UdpRecvMsg<B> {
        let mut msg = UdpMsgBlock::new(buf.stable_mut_ptr(), buf.bytes_total(), None);
        msg.offer_control();
        UdpRecvMsg { fd, buf, msg }
    }
}

// SAFETY: the SQE points at `msg` (heap), whose iovec points into `buf`'s
// heap memory (within its capacity) and whose name and control pointers
// point into itself; all owned by this value.
unsafe impl<B: IoBufMut> OpKind for UdpRecvMsg<B> {
    type Output = BufResult<RecvMsgOut, B>;

    fn build(&mut self) -> squeue::Entry {
        opcode::RecvMsg::new(types::Fd(self.fd.raw()), &mut self.msg.hdr).build()
    }

    fn complete(mut self, done: Completion) -> BufResult<RecvMsgOut, B> {
        match done.result {
            Ok(n) => {
                // Without `MSG_TRUNC` in the flags the kernel returns at
                // most the iovec's length; the `min` keeps `set_init`'s
                // bound true whatever it returns.
                let len = (n as usize).min(self.msg.iov_len());
                // SAFETY: the kernel initialized the first `len` bytes, at
                // most the length we passed (`bytes_total`).
                unsafe { self.buf.set_init(len) };
                let out = RecvMsgOut {
                    len,
                    peer: self.msg.peer(),
                    cmsgs: self.msg.decode(),
                };
                (Ok(out), self.buf)
            }
            Err(e) => (Err(e), self.buf),
        }
    }
}

/// Receives now, on the calling thread and without the ring: one
/// non-blocking `recvmsg(2)` into `buf` from its first byte, with the same
/// control-message room and decoding as [`UdpRecvMsg`]. `WouldBlock` when
/// nothing is queued.
pub(crate) fn recv_now<B: IoBufMut>(fd: RawFd, mut buf: B) -> BufResult<RecvMsgOut, B> {
    let mut msg = UdpMsgBlock::new(buf.stable_mut_ptr(), buf.bytes_total(), None);
    msg.offer_control();
    // SAFETY: `fd` is the caller's open socket for the call's duration;
    // the msghdr points into `msg` (name and control space, with their
    // sizes) and, through its one iovec, at `bytes_total` bytes of `buf`'s
    // allocation; both outlive the call, which keeps no pointer.
    let n = unsafe { libc::recvmsg(fd, &mut msg.hdr, libc::MSG_DONTWAIT) };
    if n < 0 {
        return (Err(io::Error::last_os_error()), buf);
    }
    // As in `complete`: at most the iovec's length.
    let len = (n as usize).min(msg.iov_len());
    // SAFETY: the kernel initialized the first `len` bytes, at most the
    // length we passed (`bytes_total`).
    unsafe { buf.set_init(len) };
    let out = RecvMsgOut {
        len,
        peer: msg.peer(),
        cmsgs: msg.decode(),
    };
    (Ok(out), buf)
}
