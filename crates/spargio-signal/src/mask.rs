//! Which signals are subscribed, and the process state that routes them to
//! the signalfd.
//!
//! A signalfd only sees a signal that is blocked in the thread it would
//! otherwise be delivered to; for a process-directed signal (`kill`), that
//! is every thread. Three mechanisms keep that true:
//!
//! 1. **The subscribing thread** blocks the signal (`pthread_sigmask`) when
//!    the first subscription to it starts. Threads it creates afterwards
//!    (a runtime built later, the blocking pool's threads) inherit the
//!    mask.
//! 2. **Every other thread**, including shard threads and threads the user
//!    started before, is caught by a forwarding handler installed for the
//!    signal: when the kernel delivers the signal to a thread that has it
//!    unblocked, the handler adds it to that thread's saved mask (the
//!    `ucontext`'s `uc_sigmask`, which the kernel restores when the handler
//!    returns) and raises it again for the process. Each thread forwards at
//!    most once per subscription; once every thread blocks the signal it
//!    stays pending for the signalfd. Nothing is lost: the re-raised signal
//!    is the same kind, and standard signals coalesce per kind anyway.
//! 3. **The signalfd's mask** is the union of the subscribed signals.
//!
//! When the last subscription to a signal ends, its previous disposition
//! (`sigaction`) comes back, it leaves the signalfd's mask, and the thread
//! that drops it unblocks it if the subscribing thread had it unblocked
//! before. Threads that a forward blocked keep it blocked (no thread can
//! change another's mask); the restored disposition applies wherever the
//! signal is delivered next.

use std::io;
use std::mem::MaybeUninit;
use std::sync::{Mutex, MutexGuard};

/// Highest signal number Linux has (`SIGRTMAX`).
pub(crate) const MAX_SIGNAL: i32 = 64;

/// A set of signal numbers `1..=64`, one bit each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SignalSet(u64);

impl SignalSet {
    /// Checks every number: in range, and one a program may catch. `KILL`
    /// and `STOP` cannot be caught; `SEGV`, `BUS`, `ILL`, `FPE` and `TRAP`
    /// are raised by faults in the faulting thread, which must handle them
    /// synchronously (blocking them is undefined).
    pub(crate) fn new(signals: &[i32]) -> io::Result<SignalSet> {
        let mut set = SignalSet(0);
        for &sig in signals {
            let refused = [
                libc::SIGKILL,
                libc::SIGSTOP,
                libc::SIGSEGV,
                libc::SIGBUS,
                libc::SIGILL,
                libc::SIGFPE,
                libc::SIGTRAP,
            ];
            if !(1..=MAX_SIGNAL).contains(&sig) || refused.contains(&sig) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("signal {sig} cannot be subscribed to"),
                ));
            }
            set.0 |= 1 << (sig - 1);
        }
        if set.0 == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no signal to subscribe to",
            ));
        }
        Ok(set)
    }

    pub(crate) fn contains(self, sig: i32) -> bool {
        (1..=MAX_SIGNAL).contains(&sig) && self.0 & (1 << (sig - 1)) != 0
    }

    pub(crate) fn iter(self) -> impl Iterator<Item = i32> {
        (1..=MAX_SIGNAL).filter(move |&s| self.contains(s))
    }

    pub(crate) fn to_sigset(self) -> libc::sigset_t {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        // SAFETY: sigemptyset initializes the set it is given; sigaddset
        // then only sets bits of numbers `iter` keeps within 1..=64.
        unsafe {
            libc::sigemptyset(set.as_mut_ptr());
            for sig in self.iter() {
                libc::sigaddset(set.as_mut_ptr(), sig);
            }
            set.assume_init()
        }
    }
}

/// Per signal: how many subscriptions hold it, and what to restore.
struct Slot {
    count: usize,
    previous: Option<libc::sigaction>,
    was_blocked: bool,
}

struct Registry {
    slots: Vec<Slot>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

fn registry() -> MutexGuard<'static, Option<Registry>> {
    // Nothing panics while holding it (only libc calls), so a poisoned
    // lock still guards consistent data.
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// The signals currently subscribed to by anyone.
pub(crate) fn subscribed() -> SignalSet {
    let reg = registry();
    let mut set = SignalSet(0);
    if let Some(reg) = reg.as_ref() {
        for (i, slot) in reg.slots.iter().enumerate() {
            if slot.count > 0 {
                set.0 |= 1 << i;
            }
        }
    }
    set
}

/// The forwarding handler of step 2 in the module docs.
extern "C" fn forward(sig: libc::c_int, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: installed with SA_SIGINFO, so the kernel passes the
    // interrupted context as a `ucontext_t`; changing its saved mask is how
    // a handler changes the mask its thread returns to. `sigaddset` and
    // `kill` are async-signal-safe.
    unsafe {
        let uc = ctx.cast::<libc::ucontext_t>();
        if !uc.is_null() {
            libc::sigaddset(&mut (*uc).uc_sigmask, sig);
        }
        libc::kill(libc::getpid(), sig);
    }
}

/// Counts a subscription to every signal of `set`; the first one of a
/// signal installs the forwarding handler and blocks it in this thread.
pub(crate) fn acquire(set: SignalSet) -> io::Result<()> {
    let mut guard = registry();
    let reg = guard.get_or_insert_with(|| Registry {
        slots: (0..MAX_SIGNAL)
            .map(|_| Slot {
                count: 0,
                previous: None,
                was_blocked: false,
            })
            .collect(),
    });
    let mut done = Vec::new();
    for sig in set.iter() {
        let slot = &mut reg.slots[(sig - 1) as usize];
        if slot.count == 0 {
            match install(sig) {
                Ok((previous, was_blocked)) => {
                    slot.previous = Some(previous);
                    slot.was_blocked = was_blocked;
                }
                Err(err) => {
                    for s in done {
                        release_one(reg, s);
                    }
                    return Err(err);
                }
            }
        }
        slot.count += 1;
        done.push(sig);
    }
    Ok(())
}

/// Ends one subscription to every signal of `set`.
pub(crate) fn release(set: SignalSet) {
    let mut guard = registry();
    if let Some(reg) = guard.as_mut() {
        for sig in set.iter() {
            release_one(reg, sig);
        }
    }
}

fn release_one(reg: &mut Registry, sig: i32) {
    let slot = &mut reg.slots[(sig - 1) as usize];
    slot.count = slot.count.saturating_sub(1);
    if slot.count > 0 {
        return;
    }
    if let Some(previous) = slot.previous.take() {
        // SAFETY: `previous` is the action sigaction reported for this
        // signal when the first subscription began; restoring it is a
        // plain sigaction call.
        unsafe { libc::sigaction(sig, &previous, std::ptr::null_mut()) };
    }
    if !slot.was_blocked {
        let one = SignalSet(1 << (sig - 1)).to_sigset();
        // SAFETY: a plain pthread_sigmask call on a set built above.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &one, std::ptr::null_mut()) };
    }
}

/// Installs the forwarding handler for `sig` and blocks it in this thread;
/// returns the previous action and whether it was blocked already.
fn install(sig: i32) -> io::Result<(libc::sigaction, bool)> {
    // SAFETY: sigaction and pthread_sigmask are given initialized structs
    // and write the previous state into zeroed ones (all-zero is a valid
    // `sigaction` and `sigset_t`).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = forward as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        let mut previous: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(sig, &action, &mut previous) != 0 {
            return Err(io::Error::last_os_error());
        }
        let one = SignalSet(1 << (sig - 1)).to_sigset();
        let mut old: libc::sigset_t = std::mem::zeroed();
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &one, &mut old);
        if rc != 0 {
            libc::sigaction(sig, &previous, std::ptr::null_mut());
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok((previous, libc::sigismember(&old, sig) == 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_refuse_what_cannot_be_caught() {
        for bad in [0, -1, 65, libc::SIGKILL, libc::SIGSTOP, libc::SIGSEGV] {
            let err = SignalSet::new(&[bad]).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
        assert_eq!(
            SignalSet::new(&[]).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        let set = SignalSet::new(&[libc::SIGUSR1, libc::SIGRTMAX()]).unwrap();
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            vec![libc::SIGUSR1, libc::SIGRTMAX()]
        );
    }
}
