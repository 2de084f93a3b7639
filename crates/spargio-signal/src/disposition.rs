//! Which signals are subscribed, and their dispositions: the handler of
//! `handler.rs` while a subscription holds a signal, the previous action
//! once none does.
//!
//! No thread's signal mask is read or changed: the handler runs on
//! whichever thread the kernel delivers a signal to, and a thread that
//! blocks a signal (its owner's choice) simply does not take it.
//!
//! # The last subscription to a signal ends
//!
//! A signal the kernel has handed to a thread is bound to the action that
//! was installed at that moment: the kernel dequeues it and copies the
//! action under one lock, the lock `sigaction` takes too. The handler never
//! sends a signal again, so a signal dequeued while [`on_signal`] was
//! installed can only end in `on_signal` (which records it), however late
//! that handler runs. What remains is a signal sent while subscribed but
//! not dequeued yet. [`Dispositions::release`], for the last subscription
//! to `sig`, therefore:
//!
//! 1. takes every `sig` still pending for the process (and for the calling
//!    thread) with `sigtimedwait` and a zero timeout: it was sent while
//!    subscribed, so it belongs to the subscription that is ending;
//! 2. puts the previous action back, unless someone installed their own
//!    action meanwhile (that one stays: it is newer than ours);
//! 3. forgets an arrival the handler recorded for `sig` that no reader
//!    took (also the subscription's).
//!
//! Step 1 comes before step 2: the other way round, another thread could
//! dequeue a pending signal under the previous action (for most signals,
//! the default action ends the process) before step 1 took it. A signal
//! sent during the steps is concurrent with the end of the subscription
//! and may go either way.
//!
//! What this does not cover: a signal directed at one thread (`tgkill`,
//! `pthread_kill`, a `SIGPIPE` from another thread's write) that is still
//! pending for that other thread at step 1 cannot be taken from here, and
//! meets the previous action. And a handler the kernel started before step
//! 2 that records its arrival after step 3 leaves a bit that the next
//! subscription to `sig` discards when it starts (`source.rs`); should it
//! land even later, that subscription sees a signal sent before it began.

use std::io;

use crate::handler::{self, on_signal};
use crate::set::{SignalSet, MAX_SIGNAL};

/// Per signal: how many subscriptions hold it, and the action to put back.
#[derive(Clone, Copy)]
struct Slot {
    count: usize,
    previous: Option<libc::sigaction>,
}

/// The subscription counts of every signal; kept under the source lock.
pub(crate) struct Dispositions {
    slots: [Slot; MAX_SIGNAL as usize],
}

impl std::fmt::Debug for Dispositions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispositions")
            .field("subscribed", &self.subscribed())
            .finish()
    }
}

impl Dispositions {
    pub(crate) const fn new() -> Dispositions {
        const FREE: Slot = Slot {
            count: 0,
            previous: None,
        };
        Dispositions {
            slots: [FREE; MAX_SIGNAL as usize],
        }
    }

    /// The signals at least one subscription holds.
    pub(crate) fn subscribed(&self) -> SignalSet {
        let bits = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.count > 0)
            .fold(0, |bits, (i, _)| bits | 1 << i);
        SignalSet::from_bits(bits)
    }

    /// Counts a subscription to every signal of `set`; the first one of a
    /// signal installs [`on_signal`] for it. On error nothing changed.
    pub(crate) fn acquire(&mut self, set: SignalSet) -> io::Result<()> {
        // The handler must find the eventfd from its first run.
        handler::wake_fd()?;
        let mut done = 0;
        for sig in set.iter() {
            let slot = &mut self.slots[(sig - 1) as usize];
            if slot.count == 0 {
                match install(sig) {
                    Ok(previous) => slot.previous = Some(previous),
                    Err(err) => {
                        self.release(SignalSet::from_bits(done));
                        return Err(err);
                    }
                }
            }
            slot.count += 1;
            done |= SignalSet::one(sig).bits();
        }
        Ok(())
    }

    /// Ends one subscription to every signal of `set`; the last one of a
    /// signal restores its previous action (module docs).
    pub(crate) fn release(&mut self, set: SignalSet) {
        for sig in set.iter() {
            let slot = &mut self.slots[(sig - 1) as usize];
            slot.count = slot.count.saturating_sub(1);
            if slot.count > 0 {
                continue;
            }
            take_pending(sig);
            if let Some(previous) = slot.previous.take() {
                restore(sig, &previous);
            }
            handler::discard(sig);
        }
    }
}

/// Installs [`on_signal`] for `sig`; returns the action it replaced.
fn install(sig: i32) -> io::Result<libc::sigaction> {
    // SAFETY: all-zero is a valid `sigaction`; the one passed in is fully
    // set below, and `on_signal` is an `extern "C" fn(c_int)` that is
    // async-signal-safe (`handler.rs`).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        // SA_RESTART: a system call the signal interrupts goes on;
        // SA_ONSTACK: a thread with an alternate stack runs the handler
        // there, as it would its own.
        action.sa_flags = libc::SA_RESTART | libc::SA_ONSTACK;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, &action, &mut previous) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(previous)
    }
}

/// Step 1 of the module docs: takes every `sig` pending for the process
/// or this thread, without waiting.
fn take_pending(sig: i32) {
    let wanted = SignalSet::one(sig).to_sigset();
    let zero = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    loop {
        // SAFETY: `wanted` and `zero` are initialized and outlive the
        // call; a null `siginfo` pointer is allowed.
        let got = unsafe { libc::sigtimedwait(&wanted, std::ptr::null_mut(), &zero) };
        // Real-time signals queue: take each. EINTR: another signal's
        // handler ran, try again. EAGAIN: none left.
        if got == sig {
            continue;
        }
        if got < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return;
    }
}

/// Step 2 of the module docs: puts `previous` back for `sig` if
/// [`on_signal`] is still the installed action.
fn restore(sig: i32, previous: &libc::sigaction) {
    // SAFETY: sigaction queries into a zeroed (valid) struct, then sets
    // `previous`, the action it reported when the first subscription
    // began.
    unsafe {
        let mut current: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut current);
        if current.sa_sigaction == on_signal as extern "C" fn(libc::c_int) as usize {
            libc::sigaction(sig, previous, std::ptr::null_mut());
        }
    }
}
