//! Which fd numbers the runtime owns right now, and since when.
//!
//! The epoll driver keeps an fd registered (edge-triggered, for reads and
//! writes) from its first wait until the fd is closed, as tokio does, so a
//! wait costs no `epoll_ctl`. That is only sound if the driver learns of
//! every close: a registration it still believes in, for an fd number the
//! kernel has since given to another file, would never report.
//!
//! Fds the runtime owns go through `SharedFd`, which tells this table when
//! it takes an fd ([`adopt`]) and when it gives it up ([`release`]: closed,
//! or handed out as an `OwnedFd`). Each fd number has a counter, odd while
//! the runtime owns the fd. A shard records the counter with its
//! registration and trusts the registration only while the counter is the
//! same: a release (and so any reuse of the number) changes it. Fds the
//! runtime does not own (raw fds in `submit_unsafe`) have even counters
//! and are armed one-shot for each wait instead.
//!
//! Ordering: `release` bumps the counter before the fd is closed; an
//! operation on a reused number is submitted after the new file exists,
//! so the shard that runs it sees the bump (Acquire/Release on the
//! counter; the submission itself is a further happens-before edge).
//!
//! The table is process-wide (fd numbers are) and only kept once an epoll
//! driver exists: until then [`adopt`] and [`release`] are one relaxed
//! load, and fds adopted before that are treated as not owned.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};

const CHUNK: usize = 1024;
const CHUNKS: usize = 1024;

struct Table {
    chunks: [AtomicPtr<[AtomicU32; CHUNK]>; CHUNKS],
}

static TABLE: Table = Table {
    chunks: [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS],
};

/// Set (never cleared) once an epoll driver exists in this process.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Starts keeping the table (called when an epoll driver is created).
pub(super) fn activate() {
    ACTIVE.store(true, Ordering::SeqCst);
}

fn slot(fd: RawFd, create: bool) -> Option<&'static AtomicU32> {
    let fd = usize::try_from(fd).ok()?;
    let (chunk, at) = (fd / CHUNK, fd % CHUNK);
    let cell = TABLE.chunks.get(chunk)?;
    let mut ptr = cell.load(Ordering::Acquire);
    if ptr.is_null() {
        if !create {
            return None;
        }
        let fresh = Box::into_raw(Box::new([const { AtomicU32::new(0) }; CHUNK]));
        // AcqRel: publishes the zeroed chunk; on a lost race, sees the
        // winner's.
        match cell.compare_exchange(
            std::ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => ptr = fresh,
            Err(winner) => {
                // SAFETY: `fresh` came from `Box::into_raw` just above and
                // was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                ptr = winner;
            }
        }
    }
    // SAFETY: chunks are installed once and never freed (the table is
    // static), so the pointer stays valid for 'static; `at < CHUNK`.
    Some(unsafe { &(*ptr)[at] })
}

/// The runtime now owns `fd` (it was just opened, accepted or wrapped).
pub(crate) fn adopt(fd: RawFd) {
    step(fd, true);
}

/// The runtime gives `fd` up (about to close it, or handing it out).
pub(crate) fn release(fd: RawFd) {
    step(fd, false);
}

/// Even -> odd (`adopt`) or odd -> even (`release`); anything else is left
/// alone (adopting twice, or releasing an fd adopted before the table was
/// kept).
fn step(fd: RawFd, adopt: bool) {
    if !ACTIVE.load(Ordering::Relaxed) {
        return;
    }
    if let Some(c) = slot(fd, adopt) {
        // Release: pairs with the driver's Acquire load in `owned`.
        let _ = c.fetch_update(Ordering::Release, Ordering::Relaxed, |e| {
            ((e % 2 == 1) != adopt).then_some(e.wrapping_add(1))
        });
    }
}

/// The counter of `fd` when the runtime owns it (odd), else `None`.
pub(super) fn owned(fd: RawFd) -> Option<u32> {
    let e = slot(fd, false)?.load(Ordering::Acquire);
    (e % 2 == 1).then_some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_release_changes_what_a_registration_saw() {
        activate();
        let fd = 900_000;
        assert_eq!(owned(fd), None);
        adopt(fd);
        let first = owned(fd).expect("owned after adopt");
        adopt(fd);
        assert_eq!(owned(fd), Some(first), "adopting twice changes nothing");
        release(fd);
        assert_eq!(owned(fd), None);
        adopt(fd);
        let second = owned(fd).unwrap();
        assert_ne!(first, second, "a reused number is told apart");
        release(fd);
        assert_eq!(owned(-1), None);
        assert_eq!(owned(i32::MAX), None, "beyond the table: never owned");
    }
}
