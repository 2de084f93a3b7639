//! Fd affinity leases: which ring an fd's unbound operations go to.
//!
//! * **Weak** (file operations): no binding; each operation is steered on
//!   its own, since positional file I/O has no order to keep.
//! * **Strong** (stream operations): while any operation on the fd is in
//!   flight, new ones go to the same ring, so sends (and receives) keep
//!   their submission order. When the last one finishes the lease lapses and
//!   the next operation is steered afresh (release when idle).
//! * **Hard** (multishot receive): a strong lease held for the multishot
//!   operation's whole life.
//!
//! The lease lives in the fd's shared state as one atomic word, so taking
//! and releasing it costs a compare-and-swap, with no table lookup:
//! `(shard + 1) << 32 | holders`, zero when unleased.

use std::sync::atomic::Ordering;

use crate::op::SharedFd;
use crate::shard_id::ShardId;

/// A held strong or hard lease; released on drop.
#[derive(Debug)]
pub(crate) struct Lease {
    fd: SharedFd,
}

impl Lease {
    /// Joins the fd's current lease, or takes a new one on the ring `pick`
    /// chooses. Returns the lease and its ring.
    pub(crate) fn acquire(fd: &SharedFd, pick: impl FnOnce() -> ShardId) -> (Lease, ShardId) {
        let word = fd.lease_word();
        // Relaxed loads and AcqRel CAS: the word is self-contained (it
        // publishes no other memory); the CAS orders holders among
        // themselves.
        let mut cur = word.load(Ordering::Relaxed);
        let mut pick = Some(pick);
        let mut picked = None;
        loop {
            let (shard, next) = if cur & u64::from(u32::MAX) != 0 {
                let shard = (cur >> 32) as usize - 1;
                (shard, cur + 1)
            } else {
                let shard = *picked.get_or_insert_with(|| (pick.take().expect("picked once"))());
                (shard, ((shard as u64 + 1) << 32) | 1)
            };
            match word.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return (Lease { fd: fd.clone() }, shard),
                Err(actual) => cur = actual,
            }
        }
    }

    /// The ring currently leased for `fd`, if any operation holds it.
    pub(crate) fn current(fd: &SharedFd) -> Option<ShardId> {
        let cur = fd.lease_word().load(Ordering::Relaxed);
        (cur & u64::from(u32::MAX) != 0).then(|| (cur >> 32) as usize - 1)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let word = self.fd.lease_word();
        let mut cur = word.load(Ordering::Relaxed);
        loop {
            let holders = cur & u64::from(u32::MAX);
            debug_assert!(holders > 0, "lease released more often than taken");
            let next = if holders <= 1 { 0 } else { cur - 1 };
            match word.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return,
                Err(actual) => cur = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::OwnedFd;

    fn fd() -> SharedFd {
        SharedFd::new(OwnedFd::from(std::fs::File::open("/dev/null").unwrap()))
    }

    #[test]
    fn holders_share_one_ring_until_idle() {
        let fd = fd();
        let (a, s1) = Lease::acquire(&fd, || 3);
        let (b, s2) = Lease::acquire(&fd, || unreachable!("joins the lease"));
        assert_eq!((s1, s2), (3, 3));
        drop(a);
        assert_eq!(Lease::current(&fd), Some(3));
        drop(b);
        assert_eq!(Lease::current(&fd), None);
        let (_c, s3) = Lease::acquire(&fd, || 1);
        assert_eq!(s3, 1, "an idle fd is steered afresh");
    }
}
