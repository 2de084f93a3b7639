//! The signal handler, and the two pieces of process state it shares with
//! the readers: a bit per signal that has arrived, and an eventfd that
//! wakes a reader.
//!
//! The handler runs on whatever thread the kernel picks, at any point of
//! that thread's code, so it only does what is async-signal-safe: one
//! atomic `fetch_or`, one `write(2)`, and saving/restoring `errno` around
//! the write. It allocates nothing, takes no lock and never blocks (the
//! eventfd write blocks only when the counter would pass `u64::MAX - 1`,
//! i.e. after 2^64 signals without a read).
//!
//! Protocol, handler side then reader side:
//!
//! 1. The handler sets the signal's bit in [`ARRIVED`], then writes 1 to
//!    the eventfd. The bit is the record; the write is only a wake-up.
//! 2. A reader takes every bit at once ([`take_arrived`]) and hands each
//!    signal to the subscribers. It does so before waiting, and again
//!    after each read of the eventfd completes. A bit set after a take is
//!    always followed by a write, so a reader waiting on the eventfd wakes
//!    for it: no arrival is missed. A take that got the bit before the
//!    write leaves a count in the eventfd: the next read completes at once
//!    and finds nothing, which costs one loop.
//!
//! The eventfd is created once and never closed, so the descriptor the
//! handler writes to can never be a reused number.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::set::{SignalSet, MAX_SIGNAL};

// A handler may only touch lock-free atomics.
#[cfg(not(target_has_atomic = "64"))]
compile_error!("spargio-signal needs lock-free 64-bit atomics");

/// One bit per signal (`1 << (sig - 1)`) the handler ran for and no reader
/// has taken yet.
static ARRIVED: AtomicU64 = AtomicU64::new(0);

/// The eventfd's number for the handler; -1 until it exists.
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

/// The eventfd, created by the first subscription and open for good.
static WAKE: OnceLock<OwnedFd> = OnceLock::new();

/// The eventfd readers wait on, created on first use. Must exist before
/// any [`on_signal`] is installed (the handler skips the wake-up while
/// [`WAKE_FD`] is -1).
pub(crate) fn wake_fd() -> io::Result<i32> {
    if let Some(fd) = WAKE.get() {
        return Ok(fd.as_raw_fd());
    }
    // Blocking on purpose: a read through the ring waits for a count, and
    // the handler's write cannot block in practice (module docs).
    // SAFETY: plain eventfd call; no pointer arguments.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: eventfd returned a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // The first call comes from a subscription, under the source lock;
    // were two to race anyway, the loser's descriptor is simply closed.
    let fd = WAKE.get_or_init(|| fd).as_raw_fd();
    // Release: pairs with the Acquire load in `on_signal`, which then sees
    // an open descriptor.
    WAKE_FD.store(fd, Ordering::Release);
    Ok(fd)
}

/// The handler installed for every subscribed signal (`disposition.rs`).
pub(crate) extern "C" fn on_signal(sig: libc::c_int) {
    // SAFETY: `__errno_location` returns this thread's errno slot, valid
    // for the thread's life; reading it is async-signal-safe.
    let saved_errno = unsafe { *libc::__errno_location() };
    if (1..=MAX_SIGNAL).contains(&sig) {
        // Release: pairs with the Acquire swap in `take_arrived`.
        ARRIVED.fetch_or(1 << (sig - 1), Ordering::Release);
    }
    // Acquire: pairs with the Release store in `wake_fd`.
    let fd = WAKE_FD.load(Ordering::Acquire);
    if fd >= 0 {
        let one: u64 = 1;
        // SAFETY: write(2) is async-signal-safe; `fd` is the eventfd,
        // which is never closed (module docs); `one` is 8 readable bytes.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }
    // SAFETY: as above; the interrupted code must find errno as it was.
    unsafe { *libc::__errno_location() = saved_errno };
}

/// Takes every signal that arrived since the last take.
pub(crate) fn take_arrived() -> SignalSet {
    // Acquire: pairs with the Release `fetch_or` in `on_signal`.
    SignalSet::from_bits(ARRIVED.swap(0, Ordering::Acquire))
}

/// Forgets an arrival of `sig` not taken yet (its last subscription
/// ended; the arrival was that subscription's).
pub(crate) fn discard(sig: i32) {
    // Relaxed: nothing else is published with the bit.
    ARRIVED.fetch_and(!SignalSet::one(sig).bits(), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_handler_records_wakes_and_keeps_errno() {
        let fd = wake_fd().unwrap();
        // SAFETY: this thread's errno slot (see `on_signal`).
        unsafe { *libc::__errno_location() = libc::ENOENT };
        on_signal(libc::SIGUSR2);
        on_signal(libc::SIGHUP);
        // SAFETY: as above.
        assert_eq!(unsafe { *libc::__errno_location() }, libc::ENOENT);
        let got: Vec<i32> = take_arrived().iter().collect();
        assert_eq!(got, vec![libc::SIGHUP, libc::SIGUSR2]);
        assert_eq!(take_arrived(), SignalSet::default(), "taken once");
        let mut count = [0u8; 8];
        // SAFETY: reads 8 bytes into `count` from the eventfd, which holds
        // a count of 2 (the two calls above), so the read does not block.
        let n = unsafe { libc::read(fd, count.as_mut_ptr().cast(), 8) };
        assert_eq!((n, u64::from_ne_bytes(count)), (8, 2));
        on_signal(libc::SIGUSR1);
        discard(libc::SIGUSR1);
        assert_eq!(take_arrived(), SignalSet::default(), "discarded");
        // SAFETY: as above, count 1.
        unsafe { libc::read(fd, count.as_mut_ptr().cast(), 8) };
    }
}
