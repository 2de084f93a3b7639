//! io_uring opcode names, for the in-flight counts per opcode
//! ([`ShardStats::ops_in_flight`](super::ShardStats::ops_in_flight)).
//!
//! The kernel's numbering (`enum io_uring_op` in uapi `io_uring.h`),
//! lowercased without the `IORING_OP_` prefix. The epoll backend carries
//! the same SQEs, so its operations count under the same names.

use crate::driver::ops_table::OPCODE_SLOTS;

const NAMES: [&str; 63] = [
    "nop",
    "readv",
    "writev",
    "fsync",
    "read_fixed",
    "write_fixed",
    "poll_add",
    "poll_remove",
    "sync_file_range",
    "sendmsg",
    "recvmsg",
    "timeout",
    "timeout_remove",
    "accept",
    "async_cancel",
    "link_timeout",
    "connect",
    "fallocate",
    "openat",
    "close",
    "files_update",
    "statx",
    "read",
    "write",
    "fadvise",
    "madvise",
    "send",
    "recv",
    "openat2",
    "epoll_ctl",
    "splice",
    "provide_buffers",
    "remove_buffers",
    "tee",
    "shutdown",
    "renameat",
    "unlinkat",
    "mkdirat",
    "symlinkat",
    "linkat",
    "msg_ring",
    "fsetxattr",
    "setxattr",
    "fgetxattr",
    "getxattr",
    "socket",
    "uring_cmd",
    "send_zc",
    "sendmsg_zc",
    "read_multishot",
    "waitid",
    "futex_wait",
    "futex_wake",
    "futex_waitv",
    "fixed_fd_install",
    "ftruncate",
    "bind",
    "listen",
    "recv_zc",
    "epoll_wait",
    "readv_fixed",
    "writev_fixed",
    "pipe",
];

/// The name of the opcode counted in `slot` ("other" for the last slot,
/// which gathers every opcode from there up).
pub(crate) fn name(slot: usize) -> &'static str {
    if slot >= OPCODE_SLOTS - 1 {
        "other"
    } else {
        NAMES.get(slot).copied().unwrap_or("other")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use io_uring::opcode;

    #[test]
    fn names_match_the_kernel_numbering() {
        let known = [
            (opcode::Nop::CODE, "nop"),
            (opcode::Readv::CODE, "readv"),
            (opcode::Fsync::CODE, "fsync"),
            (opcode::ReadFixed::CODE, "read_fixed"),
            (opcode::PollAdd::CODE, "poll_add"),
            (opcode::SendMsg::CODE, "sendmsg"),
            (opcode::RecvMsg::CODE, "recvmsg"),
            (opcode::Timeout::CODE, "timeout"),
            (opcode::Accept::CODE, "accept"),
            (opcode::AsyncCancel::CODE, "async_cancel"),
            (opcode::LinkTimeout::CODE, "link_timeout"),
            (opcode::Connect::CODE, "connect"),
            (opcode::Fallocate::CODE, "fallocate"),
            (opcode::OpenAt::CODE, "openat"),
            (opcode::Close::CODE, "close"),
            (opcode::Statx::CODE, "statx"),
            (opcode::Read::CODE, "read"),
            (opcode::Write::CODE, "write"),
            (opcode::Send::CODE, "send"),
            (opcode::Recv::CODE, "recv"),
            (opcode::OpenAt2::CODE, "openat2"),
            (opcode::Splice::CODE, "splice"),
            (opcode::Shutdown::CODE, "shutdown"),
            (opcode::RenameAt::CODE, "renameat"),
            (opcode::UnlinkAt::CODE, "unlinkat"),
            (opcode::MkDirAt::CODE, "mkdirat"),
            (opcode::SymlinkAt::CODE, "symlinkat"),
            (opcode::LinkAt::CODE, "linkat"),
            (opcode::MsgRingData::CODE, "msg_ring"),
            (opcode::Socket::CODE, "socket"),
            (opcode::SendZc::CODE, "send_zc"),
            (opcode::SendMsgZc::CODE, "sendmsg_zc"),
            (opcode::ReadMulti::CODE, "read_multishot"),
            (opcode::FutexWait::CODE, "futex_wait"),
            (opcode::FixedFdInstall::CODE, "fixed_fd_install"),
            (opcode::Ftruncate::CODE, "ftruncate"),
            (opcode::Bind::CODE, "bind"),
            (opcode::Listen::CODE, "listen"),
        ];
        for (code, want) in known {
            assert_eq!(name(usize::from(code)), want, "opcode {code}");
        }
        assert_eq!(name(OPCODE_SLOTS - 1), "other");
        assert_eq!(name(200), "other");
    }
}
