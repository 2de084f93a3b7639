//! Process-wide boundary outcome counters.

use std::sync::atomic::{AtomicU64, Ordering};

static OVERLOADED: AtomicU64 = AtomicU64::new(0);
static TIMED_OUT: AtomicU64 = AtomicU64::new(0);
static CANCELED: AtomicU64 = AtomicU64::new(0);
static CLOSED: AtomicU64 = AtomicU64::new(0);

/// How boundary calls failed, summed over every channel in the process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BoundaryStats {
    /// `try_call` refused because the channel was full.
    pub overloaded: u64,
    /// Calls or receives that hit their deadline.
    pub timed_out: u64,
    /// Requests whose caller was gone, or dropped unanswered.
    pub canceled: u64,
    /// Calls or receives on a closed channel.
    pub closed: u64,
}

/// The counters now.
pub fn stats_snapshot() -> BoundaryStats {
    BoundaryStats {
        overloaded: OVERLOADED.load(Ordering::Relaxed),
        timed_out: TIMED_OUT.load(Ordering::Relaxed),
        canceled: CANCELED.load(Ordering::Relaxed),
        closed: CLOSED.load(Ordering::Relaxed),
    }
}

/// Zeroes the counters (tests only; they are process-wide).
#[doc(hidden)]
pub fn reset_stats_for_tests() {
    for c in [&OVERLOADED, &TIMED_OUT, &CANCELED, &CLOSED] {
        c.store(0, Ordering::Relaxed);
    }
}

pub(crate) fn count(err: super::BoundaryError) -> super::BoundaryError {
    let counter = match err {
        super::BoundaryError::Overloaded => &OVERLOADED,
        super::BoundaryError::Timeout => &TIMED_OUT,
        super::BoundaryError::Canceled => &CANCELED,
        super::BoundaryError::Closed => &CLOSED,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    err
}
