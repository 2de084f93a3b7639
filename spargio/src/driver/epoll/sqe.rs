//! Reading an operation's SQE back: the epoll backend runs the request an
//! `op/` file built for the ring, so it needs the fields the kernel would
//! read.

use io_uring::squeue;

/// The 64-byte SQE with the field names of `struct io_uring_sqe` (unions
/// named after the use we make of them).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct Sqe {
    pub(super) opcode: u8,
    pub(super) flags: u8,
    pub(super) ioprio: u16,
    pub(super) fd: i32,
    /// `off` or `addr2`.
    pub(super) off: u64,
    pub(super) addr: u64,
    pub(super) len: u32,
    /// `rw_flags`, `msg_flags`, `accept_flags`, `open_flags`, ...
    pub(super) op_flags: u32,
    pub(super) user_data: u64,
    /// `buf_index` or `buf_group`.
    pub(super) buf_group: u16,
    personality: u16,
    /// `file_index`, `splice_fd_in` or (`u16`) `addr_len`.
    pub(super) file_index: u32,
    addr3: u64,
    pad: u64,
}

const _: () = assert!(std::mem::size_of::<Sqe>() == std::mem::size_of::<squeue::Entry>());
const _: () = assert!(std::mem::align_of::<Sqe>() == std::mem::align_of::<squeue::Entry>());

/// `IOSQE_FIXED_FILE`: `fd` is an index into registered files.
pub(super) const FLAG_FIXED_FILE: u8 = 1 << 0;
/// `IOSQE_BUFFER_SELECT`: take a buffer from group `buf_group`.
pub(super) const FLAG_BUFFER_SELECT: u8 = 1 << 5;
/// `IORING_RECV_MULTISHOT` / `IORING_ACCEPT_MULTISHOT` in `ioprio`.
pub(super) const IOPRIO_MULTISHOT: u16 = 1 << 1;
/// `IORING_ACCEPT_MULTISHOT` is bit 0 of `ioprio`.
pub(super) const IOPRIO_ACCEPT_MULTISHOT: u16 = 1 << 0;

impl Sqe {
    pub(super) fn from_entry(entry: squeue::Entry) -> Sqe {
        // SAFETY: `squeue::Entry` is `#[repr(C)]` around the kernel's
        // `io_uring_sqe` (the io_uring ABI, 64 bytes), whose layout `Sqe`
        // repeats field by field (size and alignment checked above); every
        // bit pattern is a valid value of these integer fields.
        unsafe { std::mem::transmute::<squeue::Entry, Sqe>(entry) }
    }

    pub(super) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use io_uring::{opcode, types};

    #[test]
    fn fields_read_back_as_built() {
        let mut buf = [0u8; 16];
        let e = opcode::Read::new(types::Fd(7), buf.as_mut_ptr(), 16)
            .offset(99)
            .build()
            .user_data(0xABCD);
        let s = Sqe::from_entry(e);
        assert_eq!(s.opcode, opcode::Read::CODE);
        assert_eq!((s.fd, s.len, s.off, s.user_data), (7, 16, 99, 0xABCD));
        assert_eq!(s.addr, buf.as_mut_ptr() as u64);

        let e = opcode::RecvMulti::new(types::Fd(3), 5).build();
        let s = Sqe::from_entry(e);
        assert!(s.has(FLAG_BUFFER_SELECT));
        assert_eq!(
            (s.buf_group, s.ioprio & IOPRIO_MULTISHOT),
            (5, IOPRIO_MULTISHOT)
        );

        let e = opcode::AcceptMulti::new(types::Fd(4))
            .flags(libc::SOCK_CLOEXEC)
            .build();
        let s = Sqe::from_entry(e);
        assert_eq!(s.ioprio & IOPRIO_ACCEPT_MULTISHOT, IOPRIO_ACCEPT_MULTISHOT);
        assert_eq!(s.op_flags, libc::SOCK_CLOEXEC as u32);

        let infop = 0x1000usize as *mut libc::siginfo_t;
        let e = opcode::WaitId::new(libc::P_PIDFD, 9, libc::WEXITED)
            .infop(infop as _)
            .build();
        let s = Sqe::from_entry(e);
        assert_eq!((s.fd, s.len), (9, libc::P_PIDFD));
        assert_eq!((s.file_index, s.off), (libc::WEXITED as u32, 0x1000));
    }
}
