//! Fault injection for the io_uring backend: completions the kernel gives
//! rarely, made frequent, so that code which only works when they are
//! rare fails in tests (the epoll backend's counterpart is
//! `driver/epoll/faults.rs`).
//!
//! Off unless the process starts with `SPARGIO_URING_FAULTS=SEED` (a
//! number; `random` picks one), printed to stderr once per process; each
//! ring draws from its own generator (the seed and its shard's index, so
//! a run replays in a fresh process). While on, as each SQE is pushed:
//!
//! 1. **Short transfers.** A one-shot `RECV` or `SEND` of more than 1 KiB
//!    into a buffer of its own asks the kernel for a random part of its
//!    length (never a `MSG_WAITALL` one, whose contract is the whole
//!    length): the caller sees a short count, as from a socket under
//!    memory pressure.
//! 2. **A pool run dry.** A receive that takes its buffer from a provided
//!    buffer pool (multishot or not) ends at once with `ENOBUFS`, as when
//!    every pool buffer is held: the SQE becomes a `NOP` that posts that
//!    result (`IORING_NOP_INJECT_RESULT`, Linux 6.9+) under the same
//!    `user_data`, so the operation sees its final completion.
//!
//! Injected `ECANCELED` or `EAGAIN` on operations nobody cancelled are not
//! done: the kernel never gives them to a ring operation on a blocking
//! socket, and code that treats them as errors is right to.

use std::sync::OnceLock;

use io_uring::{opcode, squeue};

use crate::driver::fault_rng::FaultRng;

/// Byte offsets in the kernel's 64-byte `io_uring_sqe`.
const OPCODE: usize = 0;
const FLAGS: usize = 1;
const LEN: usize = 24;
const OP_FLAGS: usize = 28;
const USER_DATA: usize = 32;

const IOSQE_BUFFER_SELECT: u8 = 1 << 5;
const IORING_NOP_INJECT_RESULT: u32 = 1;

/// One ring's fault generator (module docs).
#[derive(Debug)]
pub(super) struct Faults {
    rng: FaultRng,
}

impl Faults {
    /// On when the environment says so, drawing for shard `shard`: the
    /// same seed draws the same faults for the same shard in every
    /// runtime, so a failing run replays in a fresh process.
    pub(super) fn for_shard(shard: usize) -> Faults {
        static SEED: OnceLock<Option<u64>> = OnceLock::new();
        Faults {
            rng: FaultRng::from_env("SPARGIO_URING_FAULTS", &SEED, shard as u64),
        }
    }

    fn next(&mut self) -> u64 {
        self.rng.next()
    }

    /// The entry to push instead of `entry`, if a fault applies.
    #[inline]
    pub(super) fn apply(&mut self, entry: &squeue::Entry) -> Option<squeue::Entry> {
        if !self.rng.on() {
            return None;
        }
        let mut sqe = bytes(entry);
        let code = sqe[OPCODE];
        if code != opcode::Recv::CODE && code != opcode::Send::CODE {
            return None;
        }
        if sqe[FLAGS] & IOSQE_BUFFER_SELECT != 0 {
            if self.next() % 8 != 0 {
                return None;
            }
            let user_data = read_u64(&sqe, USER_DATA);
            let mut nop = bytes(&opcode::Nop::new().build().user_data(user_data));
            write_u32(&mut nop, LEN, (-libc::ENOBUFS) as u32);
            write_u32(&mut nop, OP_FLAGS, IORING_NOP_INJECT_RESULT);
            return Some(entry_of(nop));
        }
        let len = read_u32(&sqe, LEN);
        let waitall = read_u32(&sqe, OP_FLAGS) & libc::MSG_WAITALL as u32 != 0;
        if len <= 1024 || waitall || self.next() % 4 != 0 {
            return None;
        }
        let short = 1 + (self.next() % u64::from(len - 1)) as u32;
        write_u32(&mut sqe, LEN, short);
        Some(entry_of(sqe))
    }
}

fn bytes(entry: &squeue::Entry) -> [u8; 64] {
    // SAFETY: `squeue::Entry` is `#[repr(C)]` around the kernel's 64-byte
    // `io_uring_sqe`, all integer fields: any bytes are valid, and a copy
    // of them aliases nothing (the pointers in it are plain integers).
    unsafe { std::mem::transmute_copy::<squeue::Entry, [u8; 64]>(entry) }
}

fn entry_of(sqe: [u8; 64]) -> squeue::Entry {
    // SAFETY: as in `bytes`: every 64-byte pattern is a valid entry.
    unsafe { std::mem::transmute::<[u8; 64], squeue::Entry>(sqe) }
}

fn read_u32(sqe: &[u8; 64], at: usize) -> u32 {
    u32::from_ne_bytes(sqe[at..at + 4].try_into().expect("4 bytes"))
}

fn read_u64(sqe: &[u8; 64], at: usize) -> u64 {
    u64::from_ne_bytes(sqe[at..at + 8].try_into().expect("8 bytes"))
}

fn write_u32(sqe: &mut [u8; 64], at: usize, value: u32) {
    sqe[at..at + 4].copy_from_slice(&value.to_ne_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offsets_are_the_kernels() {
        let e = opcode::Send::new(io_uring::types::Fd(3), std::ptr::null(), 4096)
            .flags(libc::MSG_WAITALL)
            .build()
            .user_data(0xabcd)
            .flags(squeue::Flags::BUFFER_SELECT);
        let b = bytes(&e);
        assert_eq!(b[OPCODE], opcode::Send::CODE);
        assert_eq!(b[FLAGS], IOSQE_BUFFER_SELECT);
        assert_eq!(read_u32(&b, LEN), 4096);
        assert_eq!(read_u32(&b, OP_FLAGS), libc::MSG_WAITALL as u32);
        assert_eq!(read_u64(&b, USER_DATA), 0xabcd);
    }
}
