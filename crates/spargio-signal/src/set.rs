//! `SignalSet`: the signals a subscription asks for, one bit each.

use std::io;
use std::mem::MaybeUninit;

/// Highest signal number Linux has (`SIGRTMAX`).
pub(crate) const MAX_SIGNAL: i32 = 64;

/// A set of signal numbers `1..=64`, one bit each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SignalSet(u64);

impl SignalSet {
    /// Checks every number: in range, and one a program may catch. `KILL`
    /// and `STOP` cannot be caught; `SEGV`, `BUS`, `ILL`, `FPE` and `TRAP`
    /// are raised by a fault in the faulting thread, and a handler that
    /// records the signal and returns (ours) runs the faulting instruction
    /// again, forever.
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

    /// The set whose bit `1 << (sig - 1)` stands for `sig`.
    pub(crate) fn from_bits(bits: u64) -> SignalSet {
        SignalSet(bits)
    }

    /// `sig` alone; `sig` must be in `1..=64`.
    pub(crate) fn one(sig: i32) -> SignalSet {
        debug_assert!((1..=MAX_SIGNAL).contains(&sig));
        SignalSet(1 << (sig - 1))
    }

    pub(crate) fn bits(self) -> u64 {
        self.0
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
