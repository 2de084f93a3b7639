//! Fault injection for the epoll backend: the states the kernel may put a
//! caller in at any time, made frequent, so that code which only works
//! when they are rare fails in tests.
//!
//! Off unless the process starts with `SPARGIO_EPOLL_FAULTS=SEED` (a
//! number; `random` picks one). The seed is printed to stderr once per
//! process, so a failing run can be replayed; each shard's driver draws
//! from its own generator (the seed and the shard's index). While on:
//!
//! 1. **Short transfers.** A plain read, receive, write or send of more
//!    than 1 KiB on a stream socket asks the kernel for a random part of
//!    its length (never a `MSG_WAITALL` one,
//!    whose contract is the whole length). The caller sees a short count,
//!    as from a socket under memory pressure.
//! 2. **Spurious `EAGAIN`.** An attempt answers "not ready" without a
//!    syscall. The kernel would then report the fd's next edge, which
//!    may already have been taken, so the driver also lists the fd for a
//!    retry on its next pass: exactly what a wakeup with nothing to read
//!    looks like.
//! 3. **Spurious wakeups.** Now and then, every fd with waiters is
//!    retried as if it had reported, whether or not it did.
//!
//! The replay is exact only for one shard and one thread of peers; with
//! more the seed still narrows a failure down.

use std::sync::OnceLock;

use io_uring::opcode;

use super::bufs::BufGroups;
use super::exec::{self, Progress, Step};
use super::sqe::Sqe;
use crate::driver::fault_rng::FaultRng;

/// One driver's fault generator (module docs).
#[derive(Debug)]
pub(super) struct Faults {
    rng: FaultRng,
    /// Fds that got a made-up `EAGAIN`: the driver retries them on its
    /// next pass.
    pub(super) retry: Vec<std::os::fd::RawFd>,
}

impl Faults {
    /// On when the environment says so, drawing for shard `shard`.
    pub(super) fn for_shard(shard: usize) -> Faults {
        static SEED: OnceLock<Option<u64>> = OnceLock::new();
        Faults {
            rng: FaultRng::from_env("SPARGIO_EPOLL_FAULTS", &SEED, shard as u64),
            retry: Vec::new(),
        }
    }

    pub(super) fn on(&self) -> bool {
        self.rng.on()
    }

    fn next(&mut self) -> u64 {
        self.rng.next()
    }

    /// True one time in `n`.
    pub(super) fn one_in(&mut self, n: u64) -> bool {
        self.on() && self.next() % n == 0
    }

    /// `exec::attempt`, with the faults of items 1 and 2 (a made-up
    /// `EAGAIN` lists the fd in `retry`).
    pub(super) fn attempt(
        &mut self,
        sqe: &Sqe,
        progress: &mut Progress,
        bufs: &mut BufGroups,
    ) -> Step {
        if !self.on() || !can_wait(sqe) || sqe.fd < 0 {
            return exec::attempt(sqe, progress, bufs);
        }
        if self.one_in(8) {
            let interest = if is_output(sqe) {
                libc::EPOLLOUT
            } else {
                libc::EPOLLIN
            };
            self.retry.push(sqe.fd);
            return Step::Wait(interest as u32);
        }
        if sqe.len > SHORT_ABOVE && shortenable(sqe, progress) && self.one_in(4) {
            let mut short = *sqe;
            short.len = 1 + (self.next() % u64::from(sqe.len - 1)) as u32;
            return exec::attempt(&short, progress, bufs);
        }
        exec::attempt(sqe, progress, bufs)
    }
}

/// Transfers of at most this many bytes are never cut: the kernel moves a
/// small write whole into a socket with room, and a small message queued
/// whole is read whole (tests and protocols alike count on it).
const SHORT_ABOVE: u32 = 1024;

/// Operations that wait for readiness (and so may see `EAGAIN`).
fn can_wait(sqe: &Sqe) -> bool {
    matches!(
        sqe.opcode,
        opcode::Read::CODE
            | opcode::Write::CODE
            | opcode::Recv::CODE
            | opcode::Send::CODE
            | opcode::RecvMsg::CODE
            | opcode::SendMsg::CODE
            | opcode::Accept::CODE
    )
}

fn is_output(sqe: &Sqe) -> bool {
    matches!(
        sqe.opcode,
        opcode::Write::CODE | opcode::Send::CODE | opcode::SendMsg::CODE
    )
}

/// A transfer whose length is `sqe.len` bytes of one buffer of a byte
/// stream, which may come back short. Only stream sockets: a datagram,
/// a packet-mode pipe's packet or an inotify record cut short is lost or
/// refused, not short.
fn shortenable(sqe: &Sqe, progress: &Progress) -> bool {
    let waitall = sqe.op_flags as libc::c_int & libc::MSG_WAITALL != 0;
    let transfer = match sqe.opcode {
        // Files at an offset are not streams.
        opcode::Read::CODE | opcode::Write::CODE => sqe.off == u64::MAX || progress.is_stream(),
        opcode::Send::CODE => !waitall,
        opcode::Recv::CODE => exec::is_plain_read(sqe) && !waitall,
        _ => false,
    };
    transfer
        && crate::op::socket::getsockopt_int(sqe.fd, libc::SOL_SOCKET, libc::SO_TYPE)
            .is_ok_and(|ty| ty == libc::SOCK_STREAM)
}
