//! Doorbells and parking: the park/wake handshake.
//!
//! Each shard publishes one of four states in a cache-padded atomic:
//!
//! * `RUNNING`: polling tasks. It will look at its inbox, mailboxes and
//!   queues before it next sleeps, so nobody needs to ring it.
//! * `SPINNING`: idle but awake, polling its sources for at most
//!   `spin_before_park`. Also needs no doorbell; it is also the shard that
//!   will steal freshly spawned stealable work, so spawners do not wake a
//!   parked shard while one spins.
//! * `PARKED`: blocked, or about to block, in `io_uring_enter`. Only a
//!   doorbell (a CQE in its ring) wakes it.
//! * `NOTIFIED`: a doorbell is on its way since it parked.
//!
//! The protocol, and why no wakeup is lost:
//!
//! 1. A producer publishes work (inbox push, mailbox push, injector push),
//!    then issues a `SeqCst` fence, then reads the target's state.
//! 2. A shard going to sleep stores `PARKED`, issues a `SeqCst` fence, then
//!    re-checks every source of work it could be woken for. If it finds
//!    any, it goes back to `RUNNING` without sleeping.
//! 3. The two fences are ordered one way or the other in the single total
//!    order of `SeqCst` operations: either the shard's re-check sees the
//!    work, or the producer's read sees `PARKED`. There is no third case.
//! 4. A producer that sees `PARKED` moves it to `NOTIFIED` with a CAS; only
//!    the winner sends the doorbell, so a burst of producers costs one
//!    doorbell (the losers count as coalesced).
//! 5. The doorbell is a CQE; if it lands before the shard enters the kernel,
//!    `io_uring_enter(min_complete = 1)` returns at once. A doorbell that
//!    arrives after the shard woke for another reason is harmless: it is
//!    reaped like any CQE.
//!
//! From a shard thread the doorbell is an `IORING_OP_MSG_RING` SQE on the
//! sender's own ring (sender CQE skipped on success). From any other thread
//! it is a write to the target's eventfd, on which each shard keeps a read
//! armed.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, Ordering};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU8, Ordering};

use crossbeam_utils::CachePadded;
use io_uring::{opcode, squeue, types};

use super::user_data::{Tag, UserData};
use crate::shard_id::ShardId;

/// The full fence of the handshake (steps 1 and 2).
#[cfg(not(loom))]
pub(crate) fn handshake_fence() {
    std::sync::atomic::fence(Ordering::SeqCst);
}

// Loom models `fence(SeqCst)` more weakly than the C++ model, and reports
// Dekker-style protocols like this one as racy. Under loom the fence is an
// AcqRel read-modify-write on one shared location: those are totally
// ordered, and whichever side comes second synchronizes with the first,
// which is exactly the ordering the protocol relies on.
#[cfg(loom)]
loom::lazy_static! {
    static ref FENCE: loom::sync::atomic::AtomicUsize = loom::sync::atomic::AtomicUsize::new(0);
}

/// The full fence of the handshake (steps 1 and 2).
#[cfg(loom)]
pub(crate) fn handshake_fence() {
    FENCE.fetch_add(1, Ordering::AcqRel);
}

const RUNNING: u8 = 0;
const SPINNING: u8 = 1;
const PARKED: u8 = 2;
const NOTIFIED: u8 = 3;

/// What a producer must do after publishing work for a shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Notify {
    /// The target is parked and this caller won the right to ring it.
    Ring,
    /// The target is parked and someone else is already ringing it.
    Coalesced,
    /// The target is awake and will see the work on its own.
    Awake,
}

/// A shard's published idle state.
#[derive(Debug)]
pub(crate) struct WakeState {
    state: CachePadded<AtomicU8>,
}

impl WakeState {
    pub(crate) fn new() -> WakeState {
        WakeState {
            state: CachePadded::new(AtomicU8::new(RUNNING)),
        }
    }

    /// Producer side, after the work is published (step 1 and 4).
    pub(crate) fn notify(&self) -> Notify {
        // Pairs with the fence a parking shard issues after `set_parked`
        // (step 3).
        handshake_fence();
        match self.state.load(Ordering::SeqCst) {
            PARKED => match self.state.compare_exchange(
                PARKED,
                NOTIFIED,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => Notify::Ring,
                Err(NOTIFIED) => Notify::Coalesced,
                Err(_) => Notify::Awake,
            },
            NOTIFIED => Notify::Coalesced,
            _ => Notify::Awake,
        }
    }

    /// True when the shard sleeps (or is about to) in the kernel: waking it
    /// costs a doorbell and a kernel wakeup.
    pub(crate) fn is_asleep(&self) -> bool {
        matches!(self.state.load(Ordering::Relaxed), PARKED | NOTIFIED)
    }

    /// True while the shard is executing (not idle): the only state in which
    /// it can get stuck inside one task poll.
    pub(crate) fn is_running(&self) -> bool {
        self.state.load(Ordering::Relaxed) == RUNNING
    }

    /// Shard side: entering the spin phase.
    pub(crate) fn set_spinning(&self) {
        self.state.store(SPINNING, Ordering::SeqCst);
    }

    /// Shard side, step 2: publish `PARKED`. The caller then issues a
    /// `SeqCst` fence (pairing with the one in `notify`), re-checks its
    /// sources, and only then blocks.
    pub(crate) fn set_parked(&self) {
        self.state.store(PARKED, Ordering::SeqCst);
    }

    /// Shard side: back to work. Returns true when a doorbell was sent since
    /// parking (it will arrive as a stray CQE, which is fine).
    pub(crate) fn set_running(&self) -> bool {
        self.state.swap(RUNNING, Ordering::SeqCst) == NOTIFIED
    }
}

/// The eventfd through which threads outside the runtime ring a shard.
#[derive(Debug)]
pub(crate) struct Eventfd {
    fd: OwnedFd,
}

impl Eventfd {
    pub(crate) fn new() -> io::Result<Eventfd> {
        // Blocking on purpose: io_uring honours O_NONBLOCK by failing the
        // armed read with EAGAIN instead of waiting for a write.
        // SAFETY: eventfd has no memory arguments; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Eventfd { fd })
    }

    /// Adds one to the counter, completing the shard's armed read.
    pub(crate) fn ring(&self) {
        ring_eventfd(self.fd.as_raw_fd());
    }

    pub(crate) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Adds one to the eventfd `fd`.
pub(crate) fn ring_eventfd(fd: RawFd) {
    let one: u64 = 1;
    loop {
        // SAFETY: writes 8 bytes from a live local; a bad fd is an error
        // return, not memory unsafety.
        let n = unsafe { libc::write(fd, (&one as *const u64).cast(), std::mem::size_of::<u64>()) };
        if n >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// The `MSG_RING` SQE that rings `target` (whose ring is `target_fd`) from
/// the current shard's ring.
pub(crate) fn doorbell_entry(target_fd: RawFd, target: ShardId) -> squeue::Entry {
    opcode::MsgRingData::new(
        types::Fd(target_fd),
        0,
        UserData::new(Tag::Doorbell, 0).raw(),
        None,
    )
    .build()
    .flags(squeue::Flags::SKIP_SUCCESS)
    .user_data(UserData::new(Tag::DoorbellSend, target as u64).raw())
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicUsize;
    use loom::sync::Arc;

    /// A producer publishes work and notifies; the shard parks, fences and
    /// re-checks. In every interleaving the shard either sees the work or
    /// the producer rings it: a wake is never lost.
    #[test]
    fn park_and_notify_never_lose_a_wake() {
        loom::model(|| {
            let wake = Arc::new(WakeState::new());
            let work = Arc::new(AtomicUsize::new(0));
            let producer = {
                let (wake, work) = (wake.clone(), work.clone());
                loom::thread::spawn(move || {
                    work.fetch_add(1, Ordering::SeqCst);
                    wake.notify()
                })
            };
            wake.set_spinning();
            wake.set_parked();
            handshake_fence();
            if work.load(Ordering::SeqCst) > 0 {
                // Saw the work: back to running, no need to sleep.
                wake.set_running();
                producer.join().unwrap();
            } else {
                // Sleeps in the kernel: only a doorbell gets it out, so the
                // producer must have decided to ring.
                let rung = producer.join().unwrap() == Notify::Ring;
                assert!(rung, "lost wake: shard asleep, nobody rang");
                assert!(wake.set_running(), "woken shard sees NOTIFIED");
            }
        });
    }

    /// Two producers racing to wake one parked shard send one doorbell.
    #[test]
    fn concurrent_notifies_coalesce() {
        loom::model(|| {
            let wake = Arc::new(WakeState::new());
            wake.set_parked();
            let others: Vec<_> = (0..2)
                .map(|_| {
                    let wake = wake.clone();
                    loom::thread::spawn(move || wake.notify())
                })
                .collect();
            let results: Vec<Notify> = others.into_iter().map(|t| t.join().unwrap()).collect();
            let rings = results.iter().filter(|r| **r == Notify::Ring).count();
            assert_eq!(rings, 1, "{results:?}");
            assert!(wake.set_running());
        });
    }
}
