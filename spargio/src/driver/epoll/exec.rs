//! What each io_uring opcode is on the epoll backend.
//!
//! Every operation the runtime submits is one of the opcodes below; the
//! table is the whole of "what happens on epoll":
//!
//! | opcode | epoll backend |
//! |---|---|
//! | `READ`, `WRITE` | `preadv2`/`pwritev2` with `RWF_NOWAIT` (a stream fd: at the file position); `EAGAIN`: wait for readiness; a file that cannot be polled (regular files, directories): the blocking pool. A file that refuses `RWF_NOWAIT` (terminals, inotify): in non-blocking mode, plain I/O (`EAGAIN`: wait); in blocking mode, a read waits on the shard until `poll` says readable, then runs on the blocking pool (another reader of the open file may take the input first, and the read would then block), and a write goes to the blocking pool (a large write to a terminal would otherwise stall the shard) |
//! | `RECV`, `SEND`, `RECVMSG`, `SENDMSG` | the syscall with `MSG_DONTWAIT` (sends add `MSG_NOSIGNAL`, as io_uring does); `EAGAIN`: wait. A send with `MSG_WAITALL` goes on after a short send until every byte is taken, as io_uring's does |
//! | `RECV` multishot | receive into the provided-buffer ring's next buffer until `EAGAIN` (one completion with `F_MORE` each), `ENOBUFS` or end of stream (final) |
//! | `ACCEPT` (multishot too) | `accept4` on a listener made non-blocking (accept has no per-call flag, and a blocking listener shared by two shards would stall one); the accepted socket keeps the blocking mode io_uring gives it; `EAGAIN`: wait |
//! | `CONNECT` | `connect` with the socket non-blocking for the call only (its mode is restored when the connect ends or is cancelled); `EINPROGRESS`: wait for writability, then `SO_ERROR`; `EAGAIN` (a Unix listener's backlog is full: the socket reports writable all along, so no edge would come): try again after a backoff of 1 to 64 ms |
//! | `SOCKET` | `socket`, in blocking mode as io_uring makes it (every data path of this backend asks per call: `MSG_DONTWAIT`, `RWF_NOWAIT`) |
//! | `CLOSE` | `close` |
//! | `POLL_ADD` (single shot) | `poll` with no timeout; nothing ready: wait |
//! | `WAITID` on a pidfd | `waitid(WNOHANG)`; not exited: wait for the pidfd; other id types: blocking pool |
//! | `OPENAT`, `STATX`, `FSYNC`, `FTRUNCATE`, `MKDIRAT`, `UNLINKAT`, `RENAMEAT`, `LINKAT`, `SYMLINKAT` | blocking pool |
//! | `TIMEOUT` (no count, monotonic clock) | the driver's own timer list; `epoll_wait`'s timeout |
//! | `ASYNC_CANCEL` | a waiting operation or timer ends with `ECANCELED` (a `MSG_WAITALL` send that sent some bytes: their count); one on the blocking pool runs to its end (the cancel answers `EALREADY`); none found: `ENOENT` |
//! | `NOP` | completes with 0 |
//! | anything else, fixed files, `POLL_ADD` multishot | `EOPNOTSUPP` (`submit_unsafe` refuses these up front on epoll) |
//!
//! Readiness is only ever waited for right after a syscall (or `poll`)
//! found the fd not ready for it: never on a guess such as "the last read
//! came back short" (a TCP read stops at the urgent mark, a packet-mode
//! pipe returns one packet per read, a Unix read stops at passed fds),
//! and never where the fd's readiness cannot change (the connect above).
//!
//! Memory: every address an SQE carries stays valid until the operation's
//! final completion is delivered (the contract of `Driver::push_op`, kept
//! by the op table). Each function here dereferences addresses only before
//! it returns the completion that ends the operation, so that contract is
//! what every `SAFETY` comment below rests on.

use std::io;

use io_uring::opcode;

use super::bufs::BufGroups;
use super::sqe::{
    Sqe, FLAG_BUFFER_SELECT, FLAG_FIXED_FILE, IOPRIO_ACCEPT_MULTISHOT, IOPRIO_MULTISHOT,
};

/// What one attempt at an operation came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// The final completion: `(result, flags)`.
    Done(i32, u32),
    /// A completion with more to come (multishot): post it, try again.
    More(i32, u32),
    /// Not ready: wait until the fd reports these `EPOLL*` events.
    Wait(u32),
    /// Run it on the blocking pool ([`blocking`]).
    Offload,
    /// Not ready, and no readiness event will say when: try again after
    /// a backoff (`Progress::retries`).
    Retry,
    /// A timer: the timespec is read by the driver (`timers.rs`).
    Timer,
}

/// Per-operation progress that must survive between attempts.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Progress {
    /// A positional read/write got `ESPIPE`: the fd is a stream.
    stream: bool,
    /// `RWF_NOWAIT` is refused for this file: plain I/O (see `blocking`).
    no_nowait: bool,
    /// With `no_nowait`: the file is in blocking mode, so plain I/O is
    /// only safe once `poll` says it will not block.
    blocking: bool,
    /// A `connect` is in flight.
    connecting: bool,
    /// The socket was in blocking mode before the connect made it
    /// non-blocking: put back when the connect ends.
    restore_blocking: bool,
    /// `Step::Retry`s so far (the backoff doubles with each).
    pub(super) retries: u8,
    /// Bytes an `MSG_WAITALL` send has sent so far.
    sent: usize,
}

impl Progress {
    /// What a cancel ends the operation with: the bytes an `MSG_WAITALL`
    /// send already sent, if any (io_uring reports them too, never
    /// `ECANCELED`, so the caller knows what reached the peer). A connect
    /// puts back the blocking mode it took away, as when it ends.
    pub(super) fn cancelled(&mut self, sqe: &Sqe) -> i32 {
        if std::mem::take(&mut self.restore_blocking) {
            let _ = set_nonblocking(sqe.fd, false);
        }
        if self.sent > 0 {
            self.sent.min(i32::MAX as usize) as i32
        } else {
            -libc::ECANCELED
        }
    }

    /// A positional read or write found the fd to be a stream.
    pub(super) fn is_stream(&self) -> bool {
        self.stream
    }
}

const IN: u32 = libc::EPOLLIN as u32;
const OUT: u32 = libc::EPOLLOUT as u32;
const CQE_F_BUFFER: u32 = 1 << 0;
const CQE_F_MORE: u32 = 1 << 1;
/// Most completions one multishot attempt posts before letting the shard
/// run the tasks that read them (the driver retries on its next pass).
pub(super) const MULTISHOT_BURST: usize = 32;

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The opcodes the epoll backend runs (the table above).
pub(crate) fn is_supported(opcode: u8) -> bool {
    matches!(
        opcode,
        opcode::Nop::CODE
            | opcode::Read::CODE
            | opcode::Write::CODE
            | opcode::Recv::CODE
            | opcode::Send::CODE
            | opcode::RecvMsg::CODE
            | opcode::SendMsg::CODE
            | opcode::Accept::CODE
            | opcode::Connect::CODE
            | opcode::Socket::CODE
            | opcode::Close::CODE
            | opcode::PollAdd::CODE
            | opcode::WaitId::CODE
            | opcode::OpenAt::CODE
            | opcode::Statx::CODE
            | opcode::Fsync::CODE
            | opcode::Ftruncate::CODE
            | opcode::MkDirAt::CODE
            | opcode::UnlinkAt::CODE
            | opcode::RenameAt::CODE
            | opcode::LinkAt::CODE
            | opcode::SymlinkAt::CODE
            | opcode::Timeout::CODE
            | opcode::AsyncCancel::CODE
    )
}

/// One non-blocking attempt (cancels are the driver's: `ASYNC_CANCEL`
/// never reaches here).
pub(super) fn attempt(sqe: &Sqe, progress: &mut Progress, bufs: &mut BufGroups) -> Step {
    if sqe.has(FLAG_FIXED_FILE) {
        return Step::Done(-libc::EOPNOTSUPP, 0);
    }
    match sqe.opcode {
        opcode::Nop::CODE => Step::Done(0, 0),
        opcode::Read::CODE => read_write(sqe, false, progress),
        opcode::Write::CODE => read_write(sqe, true, progress),
        opcode::Recv::CODE if sqe.ioprio & IOPRIO_MULTISHOT != 0 => recv_multi(sqe, bufs),
        opcode::Recv::CODE if sqe.has(FLAG_BUFFER_SELECT) => recv_select(sqe, bufs, 0),
        opcode::Recv::CODE => recv(sqe),
        opcode::Send::CODE => send(sqe, progress),
        opcode::RecvMsg::CODE if sqe.has(FLAG_BUFFER_SELECT) => Step::Done(-libc::EOPNOTSUPP, 0),
        opcode::RecvMsg::CODE => msg(sqe, false, progress),
        opcode::SendMsg::CODE => msg(sqe, true, progress),
        opcode::Accept::CODE => accept(sqe),
        opcode::Connect::CODE => connect(sqe, progress),
        opcode::Socket::CODE => socket(sqe),
        opcode::Close::CODE => {
            // SAFETY: closing is what the operation asks; the fd is the
            // submitter's to give (SharedFd closes only when no operation
            // uses it any more).
            let r = unsafe { libc::close(sqe.fd) };
            Step::Done(if r < 0 { -errno() } else { 0 }, 0)
        }
        opcode::PollAdd::CODE => poll_add(sqe),
        opcode::WaitId::CODE if sqe.len == libc::P_PIDFD => waitid_pidfd(sqe),
        opcode::Timeout::CODE => Step::Timer,
        code if is_supported(code) => Step::Offload,
        _ => Step::Done(-libc::EOPNOTSUPP, 0),
    }
}

fn done(n: isize) -> Step {
    if n >= 0 {
        Step::Done(n.min(i32::MAX as isize) as i32, 0)
    } else {
        Step::Done(-errno(), 0)
    }
}

fn read_write(sqe: &Sqe, write: bool, progress: &mut Progress) -> Step {
    let iov = libc::iovec {
        iov_base: sqe.addr as *mut libc::c_void,
        iov_len: sqe.len as usize,
    };
    loop {
        let off = if progress.stream || sqe.off == u64::MAX {
            -1
        } else {
            sqe.off as libc::off_t
        };
        if progress.no_nowait && progress.blocking {
            if write {
                // A blocking write returns only once all of it is taken.
                return Step::Offload;
            }
            // Waits on the shard (cancellable) until the file is readable,
            // then reads on the blocking pool: another reader of the same
            // open file may take the input between the poll and the read,
            // and a blocking read would then stall the shard until more
            // came. The pool thread waits instead.
            return match poll_now(sqe.fd, libc::POLLIN) {
                Ok(true) => Step::Offload,
                Ok(false) => Step::Wait(IN),
                Err(e) => Step::Done(-e, 0),
            };
        }
        let flags = sqe.op_flags as libc::c_int
            | if progress.no_nowait {
                0
            } else {
                libc::RWF_NOWAIT
            };
        // SAFETY: `iov` describes the operation's buffer, `len` bytes the
        // op owns until its completion (module docs); the fd is kept open
        // by the operation's SharedFd.
        let n = unsafe {
            if write {
                libc::pwritev2(sqe.fd, &iov, 1, off, flags)
            } else {
                libc::preadv2(sqe.fd, &iov, 1, off, flags)
            }
        };
        if n >= 0 {
            return done(n);
        }
        let interest = if write { OUT } else { IN };
        match errno() {
            libc::EINTR => {}
            libc::ESPIPE if off != -1 => progress.stream = true,
            libc::EAGAIN => return Step::Wait(interest),
            libc::EOPNOTSUPP if !progress.no_nowait => {
                // Try again at once, in the file's own mode: input may be
                // queued already, and its edge may have been taken.
                progress.no_nowait = true;
                progress.blocking = match is_nonblocking(sqe.fd) {
                    Ok(nonblocking) => !nonblocking,
                    Err(e) => return Step::Done(-e, 0),
                };
            }
            e => return Step::Done(-e, 0),
        }
    }
}

fn recv(sqe: &Sqe) -> Step {
    let flags = sqe.op_flags as libc::c_int | libc::MSG_DONTWAIT;
    // SAFETY: the buffer is `len` writable bytes owned by the operation
    // (module docs).
    let n = unsafe {
        libc::recv(
            sqe.fd,
            sqe.addr as *mut libc::c_void,
            sqe.len as usize,
            flags,
        )
    };
    would_block(n, IN)
}

fn send(sqe: &Sqe, progress: &mut Progress) -> Step {
    let flags = send_flags(sqe);
    let (dest, dest_len) = (sqe.off, (sqe.file_index & 0xffff) as libc::socklen_t);
    loop {
        let (ptr, len) = (
            (sqe.addr as usize + progress.sent) as *const libc::c_void,
            sqe.len as usize - progress.sent,
        );
        // SAFETY: `ptr..ptr + len` lies in the operation's buffer of
        // `sqe.len` readable bytes (`sent <= len`), and `dest` (when set) is
        // a sockaddr of `dest_len` bytes, both owned by the operation.
        let n = unsafe {
            if dest != 0 {
                libc::sendto(
                    sqe.fd,
                    ptr,
                    len,
                    flags,
                    dest as *const libc::sockaddr,
                    dest_len,
                )
            } else {
                libc::send(sqe.fd, ptr, len, flags)
            }
        };
        if let Some(step) = sent_so_far(sqe, progress, n, sqe.len as usize) {
            return step;
        }
    }
}

fn send_flags(sqe: &Sqe) -> libc::c_int {
    (sqe.op_flags as libc::c_int & !libc::MSG_WAITALL) | libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL
}

/// Accounts one send of an operation that may be `MSG_WAITALL`: `Some`
/// when the operation ends or waits, `None` to send the rest now.
fn sent_so_far(sqe: &Sqe, progress: &mut Progress, n: isize, total: usize) -> Option<Step> {
    let waitall = sqe.op_flags as libc::c_int & libc::MSG_WAITALL != 0;
    if n < 0 {
        return Some(match errno() {
            libc::EAGAIN | libc::EINTR => Step::Wait(OUT),
            // What was sent stays sent: io_uring reports the count too.
            _ if progress.sent > 0 => Step::Done(progress.sent.min(i32::MAX as usize) as i32, 0),
            e => Step::Done(-e, 0),
        });
    }
    progress.sent += n as usize;
    if !waitall || progress.sent >= total || n == 0 {
        return Some(Step::Done(progress.sent.min(i32::MAX as usize) as i32, 0));
    }
    None
}

fn msg(sqe: &Sqe, send: bool, progress: &mut Progress) -> Step {
    let hdr = sqe.addr as *mut libc::msghdr;
    if !send {
        let flags = sqe.op_flags as libc::c_int | libc::MSG_DONTWAIT;
        // SAFETY: `hdr` is the operation's msghdr, whose iovecs, name and
        // control buffers the operation owns (module docs).
        let n = unsafe { libc::recvmsg(sqe.fd, hdr, flags) };
        return would_block(n, IN);
    }
    // SAFETY: as above; read only.
    let (iov, iovlen) = unsafe { ((*hdr).msg_iov, (*hdr).msg_iovlen) };
    let total: usize = (0..iovlen)
        // SAFETY: `iov` has `iovlen` entries (the operation's msghdr).
        .map(|i| unsafe { (*iov.add(i)).iov_len })
        .sum();
    loop {
        let n = if progress.sent == 0 {
            // SAFETY: as above.
            unsafe { libc::sendmsg(sqe.fd, hdr, send_flags(sqe)) }
        } else {
            // SAFETY: as above; the rest of the iovecs past `sent` bytes
            // is re-described in a local array pointing into the same
            // buffers.
            unsafe { sendmsg_rest(sqe, hdr, iov, iovlen, progress.sent) }
        };
        if let Some(step) = sent_so_far(sqe, progress, n, total) {
            return step;
        }
    }
}

/// `sendmsg` of what is left after `skip` bytes, up to 64 iovecs at a
/// time (a short send is fine: the caller loops).
///
/// # Safety
///
/// `hdr` and its `iovlen` iovecs at `iov` describe memory valid for the
/// call.
unsafe fn sendmsg_rest(
    sqe: &Sqe,
    hdr: *const libc::msghdr,
    iov: *const libc::iovec,
    iovlen: usize,
    mut skip: usize,
) -> isize {
    const MAX: usize = 64;
    let mut rest = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX];
    let mut n = 0;
    for i in 0..iovlen {
        // SAFETY: `i < iovlen` (this function's contract).
        let v = unsafe { *iov.add(i) };
        if skip >= v.iov_len {
            skip -= v.iov_len;
            continue;
        }
        rest[n] = libc::iovec {
            iov_base: (v.iov_base as usize + skip) as *mut libc::c_void,
            iov_len: v.iov_len - skip,
        };
        skip = 0;
        n += 1;
        if n == MAX {
            break;
        }
    }
    // SAFETY: a copy of the caller's header (name, control) with the
    // remaining iovecs, all valid for the call (contract).
    unsafe {
        let mut local = *hdr;
        local.msg_iov = rest.as_mut_ptr();
        local.msg_iovlen = n;
        // Ancillary data (GSO, destination) went with the first part.
        local.msg_control = std::ptr::null_mut();
        local.msg_controllen = 0;
        libc::sendmsg(sqe.fd, &local, send_flags(sqe))
    }
}

fn would_block(n: isize, interest: u32) -> Step {
    if n < 0 && matches!(errno(), libc::EAGAIN | libc::EINTR) {
        Step::Wait(interest)
    } else {
        done(n)
    }
}

/// A single receive into the group's next buffer.
fn recv_select(sqe: &Sqe, bufs: &mut BufGroups, more: u32) -> Step {
    let Some(group) = bufs.get_mut(sqe.buf_group) else {
        return Step::Done(-libc::ENOBUFS, 0);
    };
    let Some((addr, cap, bid)) = group.peek() else {
        return Step::Done(-libc::ENOBUFS, 0);
    };
    let len = if sqe.len == 0 { cap } else { cap.min(sqe.len) } as usize;
    let flags = sqe.op_flags as libc::c_int | libc::MSG_DONTWAIT;
    // SAFETY: the buffer at the head of a registered ring is `cap` bytes
    // the application lent the ring (its contract: not touched until the
    // completion naming it is consumed); `len <= cap`.
    let n = unsafe { libc::recv(sqe.fd, addr as *mut libc::c_void, len, flags) };
    match n {
        n if n > 0 => {
            group.consume();
            let flags = CQE_F_BUFFER | (u32::from(bid) << 16) | more;
            if more != 0 {
                Step::More(n as i32, flags)
            } else {
                Step::Done(n as i32, flags)
            }
        }
        // End of stream ends a multishot receive too, with no buffer.
        0 => Step::Done(0, 0),
        n => would_block(n, IN),
    }
}

fn recv_multi(sqe: &Sqe, bufs: &mut BufGroups) -> Step {
    recv_select(sqe, bufs, CQE_F_MORE)
}

/// A single-shot read into the operation's own buffer (`READ`, or `RECV`
/// without buffer selection).
pub(super) fn is_plain_read(sqe: &Sqe) -> bool {
    match sqe.opcode {
        opcode::Read::CODE => true,
        opcode::Recv::CODE => sqe.ioprio & IOPRIO_MULTISHOT == 0 && !sqe.has(FLAG_BUFFER_SELECT),
        _ => false,
    }
}

/// True for the multishot forms (their `More` completions keep them alive).
pub(super) fn is_multishot(sqe: &Sqe) -> bool {
    match sqe.opcode {
        opcode::Recv::CODE => sqe.ioprio & IOPRIO_MULTISHOT != 0,
        opcode::Accept::CODE => sqe.ioprio & IOPRIO_ACCEPT_MULTISHOT != 0,
        _ => false,
    }
}

/// Whether `fd`'s open file description is in non-blocking mode.
fn is_nonblocking(fd: i32) -> Result<bool, i32> {
    // SAFETY: plain fcntl on an fd the operation keeps open.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl < 0 {
        return Err(errno());
    }
    Ok(fl & libc::O_NONBLOCK != 0)
}

/// Sets or clears `O_NONBLOCK` on `fd`; returns whether it was set before.
/// Changes the open file description: only for a listener (accept has
/// no per-call flag) and for the length of a connect.
fn set_nonblocking(fd: i32, on: bool) -> Result<bool, i32> {
    // SAFETY: plain fcntl on an fd the operation keeps open.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl < 0 {
        return Err(errno());
    }
    let was = fl & libc::O_NONBLOCK != 0;
    if was != on {
        let fl = if on {
            fl | libc::O_NONBLOCK
        } else {
            fl & !libc::O_NONBLOCK
        };
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, fl) } < 0 {
            return Err(errno());
        }
    }
    Ok(was)
}

/// Whether `fd` is ready for `events` right now (`poll` with no timeout).
/// Hang-ups and errors count as ready: the I/O reports them.
fn poll_now(fd: i32, events: libc::c_short) -> Result<bool, i32> {
    let mut pfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    loop {
        // SAFETY: one live pollfd, zero timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        if n >= 0 {
            if pfd.revents & libc::POLLNVAL != 0 {
                return Err(libc::EBADF);
            }
            return Ok(n > 0);
        }
        match errno() {
            libc::EINTR => {}
            e => return Err(e),
        }
    }
}

fn accept(sqe: &Sqe) -> Step {
    if let Err(e) = set_nonblocking(sqe.fd, true) {
        return Step::Done(-e, 0);
    }
    let multishot = sqe.ioprio & IOPRIO_ACCEPT_MULTISHOT != 0;
    if sqe.file_index != 0 {
        // Direct descriptors live in the ring's file table.
        return Step::Done(-libc::EOPNOTSUPP, 0);
    }
    let (addr, len) = if multishot {
        (std::ptr::null_mut(), std::ptr::null_mut())
    } else {
        (
            sqe.addr as *mut libc::sockaddr,
            sqe.off as *mut libc::socklen_t,
        )
    };
    let flags = sqe.op_flags as libc::c_int;
    // SAFETY: `addr`/`len` are null or the operation's sockaddr storage
    // and its length, owned by the operation (module docs).
    let fd = unsafe { libc::accept4(sqe.fd, addr, len, flags) };
    if fd < 0 {
        return match errno() {
            libc::EAGAIN | libc::EINTR => Step::Wait(IN),
            e => Step::Done(-e, 0),
        };
    }
    if multishot {
        Step::More(fd, CQE_F_MORE)
    } else {
        Step::Done(fd, 0)
    }
}

fn connect(sqe: &Sqe, progress: &mut Progress) -> Step {
    let step = connect_step(sqe, progress);
    if matches!(step, Step::Done(..)) && progress.restore_blocking {
        progress.restore_blocking = false;
        if let Err(e) = set_nonblocking(sqe.fd, false) {
            return Step::Done(-e, 0);
        }
    }
    step
}

fn connect_step(sqe: &Sqe, progress: &mut Progress) -> Step {
    if progress.connecting {
        match crate::op::socket::getsockopt_int(sqe.fd, libc::SOL_SOCKET, libc::SO_ERROR) {
            Err(e) => return Step::Done(-e.raw_os_error().unwrap_or(libc::EIO), 0),
            Ok(err) if err != 0 => return Step::Done(-err, 0),
            Ok(_) => {}
        }
    } else if !progress.restore_blocking {
        match set_nonblocking(sqe.fd, true) {
            Ok(was) => progress.restore_blocking = !was,
            Err(e) => return Step::Done(-e, 0),
        }
    }
    // SAFETY: the sockaddr is `off` bytes owned by the operation.
    let r = unsafe {
        libc::connect(
            sqe.fd,
            sqe.addr as *const libc::sockaddr,
            sqe.off as libc::socklen_t,
        )
    };
    if r == 0 {
        return Step::Done(0, 0);
    }
    match errno() {
        libc::EISCONN if progress.connecting => Step::Done(0, 0),
        libc::EINPROGRESS | libc::EALREADY | libc::EINTR => {
            progress.connecting = true;
            Step::Wait(OUT)
        }
        // A Unix socket whose listener's backlog is full: it polls
        // writable all along, so only trying again tells.
        libc::EAGAIN => Step::Retry,
        e => Step::Done(-e, 0),
    }
}

fn socket(sqe: &Sqe) -> Step {
    if sqe.file_index != 0 {
        return Step::Done(-libc::EOPNOTSUPP, 0);
    }
    let ty = sqe.off as libc::c_int;
    // SAFETY: plain syscall.
    let fd = unsafe { libc::socket(sqe.fd, ty, sqe.len as libc::c_int) };
    Step::Done(if fd < 0 { -errno() } else { fd }, 0)
}

fn poll_add(sqe: &Sqe) -> Step {
    const POLL_ADD_MULTI: u32 = 1;
    if sqe.len & POLL_ADD_MULTI != 0 {
        return Step::Done(-libc::EOPNOTSUPP, 0);
    }
    let events = sqe.op_flags & 0xffff;
    let mut pfd = libc::pollfd {
        fd: sqe.fd,
        events: events as libc::c_short,
        revents: 0,
    };
    // SAFETY: one live pollfd, zero timeout.
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    if n < 0 {
        return match errno() {
            libc::EINTR => Step::Wait(events),
            e => Step::Done(-e, 0),
        };
    }
    if pfd.revents & libc::POLLNVAL != 0 {
        return Step::Done(-libc::EBADF, 0);
    }
    if n == 0 {
        // POLL* and EPOLL* share their values for these events.
        return Step::Wait(events);
    }
    Step::Done(i32::from(pfd.revents as u16), 0)
}

fn waitid_pidfd(sqe: &Sqe) -> Step {
    // SAFETY: an all-zero siginfo is valid; `si_pid` stays 0 unless a
    // child changed state.
    let mut local: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let infop = if sqe.off != 0 {
        sqe.off as *mut libc::siginfo_t
    } else {
        &mut local
    };
    let options = sqe.file_index as libc::c_int | libc::WNOHANG;
    // SAFETY: `infop` is the operation's siginfo (owned by it) or `local`.
    let r = unsafe { libc::waitid(libc::P_PIDFD, sqe.fd as libc::id_t, infop, options) };
    if r < 0 {
        return match errno() {
            libc::EINTR => Step::Wait(IN),
            e => Step::Done(-e, 0),
        };
    }
    // SAFETY: `infop` was filled (or left zeroed) by `waitid`.
    if unsafe { (*infop).si_pid() } == 0 {
        // Not exited yet: a pidfd reads ready when it has.
        return Step::Wait(IN);
    }
    Step::Done(0, 0)
}

/// Runs an offloaded operation to its end on a blocking-pool thread.
pub(super) fn blocking(sqe: &Sqe, progress: Progress) -> i32 {
    let path = sqe.addr as *const libc::c_char;
    let path2 = sqe.off as *const libc::c_char;
    let r: isize =
        // SAFETY: (every arm) paths are NUL-terminated strings, out-structs
        // and buffers are the sizes the SQE names, all owned by the
        // operation until its completion, which is posted after this
        // returns (module docs); fds are kept open by the operation.
        unsafe {
        match sqe.opcode {
            opcode::Read::CODE | opcode::Write::CODE => {
                let iov = libc::iovec {
                    iov_base: sqe.addr as *mut libc::c_void,
                    iov_len: sqe.len as usize,
                };
                let off = if progress.stream || sqe.off == u64::MAX {
                    -1
                } else {
                    sqe.off as libc::off_t
                };
                let flags = sqe.op_flags as libc::c_int;
                if sqe.opcode == opcode::Write::CODE {
                    libc::pwritev2(sqe.fd, &iov, 1, off, flags)
                } else {
                    libc::preadv2(sqe.fd, &iov, 1, off, flags)
                }
            }
            opcode::OpenAt::CODE => libc::openat(
                sqe.fd,
                path,
                sqe.op_flags as libc::c_int,
                sqe.len as libc::c_uint,
            ) as isize,
            opcode::Statx::CODE => libc::statx(
                sqe.fd,
                path,
                sqe.op_flags as libc::c_int,
                sqe.len,
                sqe.off as *mut libc::statx,
            ) as isize,
            opcode::Fsync::CODE if sqe.op_flags & 1 != 0 => libc::fdatasync(sqe.fd) as isize,
            opcode::Fsync::CODE => libc::fsync(sqe.fd) as isize,
            opcode::Ftruncate::CODE => libc::ftruncate(sqe.fd, sqe.off as libc::off_t) as isize,
            opcode::MkDirAt::CODE => libc::mkdirat(sqe.fd, path, sqe.len as libc::mode_t) as isize,
            opcode::UnlinkAt::CODE => {
                libc::unlinkat(sqe.fd, path, sqe.op_flags as libc::c_int) as isize
            }
            opcode::RenameAt::CODE => libc::syscall(
                libc::SYS_renameat2,
                sqe.fd,
                path,
                sqe.len as libc::c_int,
                path2,
                sqe.op_flags,
            ) as isize,
            opcode::LinkAt::CODE => libc::linkat(
                sqe.fd,
                path,
                sqe.len as libc::c_int,
                path2,
                sqe.op_flags as libc::c_int,
            ) as isize,
            opcode::SymlinkAt::CODE => libc::symlinkat(path, sqe.fd, path2) as isize,
            opcode::WaitId::CODE => libc::waitid(
                sqe.len as libc::idtype_t,
                sqe.fd as libc::id_t,
                sqe.off as *mut libc::siginfo_t,
                sqe.file_index as libc::c_int,
            ) as isize,
            _ => {
                return -libc::EOPNOTSUPP;
            }
        }
    };
    if r < 0 {
        -errno()
    } else {
        r.min(i32::MAX as isize) as i32
    }
}

#[cfg(test)]
#[path = "exec_tests.rs"]
mod tests;
