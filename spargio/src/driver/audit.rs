//! A test-only audit of kernel-owned memory.
//!
//! Valgrind and sanitizers do not see the kernel's writes into user
//! memory, so they cannot prove that a buffer is never freed while an
//! operation may still write into it. This audit can: when enabled, every
//! native operation's buffer address is recorded as *lent* when its SQE is
//! handed to a ring, and returned when its final CQE is reaped. A test's
//! instrumented buffer checks, in its `Drop`, that its address is not lent.
//!
//! Disabled (the default), it costs one relaxed load per submission and
//! per reaped operation.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use io_uring::squeue;

static ENABLED: AtomicBool = AtomicBool::new(false);
static LENT: Mutex<Option<HashMap<u64, u64>>> = Mutex::new(None);

fn with_lent<R>(f: impl FnOnce(&mut HashMap<u64, u64>) -> R) -> R {
    let mut guard = LENT.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(HashMap::new))
}

/// Starts recording (process-wide, for the rest of the process).
pub fn enable() {
    // Relaxed: a test enables the audit before it submits anything; the
    // lock orders the records themselves.
    ENABLED.store(true, Ordering::Relaxed);
}

fn enabled() -> bool {
    // Relaxed: see `enable`.
    ENABLED.load(Ordering::Relaxed)
}

/// True while an operation whose SQE pointed at `addr` has not had its
/// final CQE reaped.
pub fn is_lent(addr: *const u8) -> bool {
    let addr = addr as u64;
    with_lent(|lent| lent.values().any(|&a| a == addr))
}

/// Records the buffer address of an operation SQE (tagged `user_data`).
pub(crate) fn lend(user_data: u64, sqe: &squeue::Entry) {
    if !enabled() {
        return;
    }
    // `io_uring_sqe` is 64 bytes: the buffer address (`addr`) is the third
    // 8-byte word, after opcode/flags/ioprio/fd and the offset.
    let words: &[u64; 8] = bytemuck_sqe(sqe);
    let addr = words[2];
    with_lent(|lent| lent.insert(user_data, addr));
}

/// Records that the operation's final CQE was reaped.
pub(crate) fn reaped(user_data: u64) {
    if !enabled() {
        return;
    }
    with_lent(|lent| lent.remove(&user_data));
}

pub(crate) fn bytemuck_sqe(sqe: &squeue::Entry) -> &[u64; 8] {
    const _: () = assert!(std::mem::size_of::<squeue::Entry>() == 64);
    const _: () = assert!(std::mem::align_of::<squeue::Entry>() >= 8);
    // SAFETY: `squeue::Entry` is a `repr(C)` wrapper of the 64-byte,
    // 8-aligned `io_uring_sqe` (checked above), every bit pattern of which
    // is a valid `[u64; 8]`; the borrow keeps it alive.
    unsafe { &*(sqe as *const squeue::Entry).cast::<[u64; 8]>() }
}
