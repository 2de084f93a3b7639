//! The sampled poll-time histogram of one shard.
//!
//! Timing every poll with the precise clock would cost two clock reads per
//! poll; one poll in `SAMPLE_EVERY` is timed instead (the choice is a
//! counter, not random: polls are not periodic enough to alias with it).
//! Buckets are powers of two in microseconds, so the shape of a
//! distribution across six orders of magnitude fits in a few counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One poll in this many is timed.
pub(crate) const SAMPLE_EVERY: u32 = 64;

/// Bucket `i < BUCKETS - 1` holds polls shorter than 2^i µs (and at
/// least 2^(i-1)); the last holds the rest (2^20 µs ≈ 1 s and longer).
pub const POLL_TIME_BUCKETS: usize = 22;

/// The shard writes (relaxed load and store: it is the only writer),
/// snapshots read.
#[derive(Debug, Default)]
pub(crate) struct PollTimes {
    buckets: [AtomicU64; POLL_TIME_BUCKETS],
    sum_ns: AtomicU64,
}

impl PollTimes {
    /// Records one sampled poll.
    pub(crate) fn record(&self, took: Duration) {
        let us = took.as_micros() as u64;
        // The smallest i with us < 2^i.
        let i = (u64::BITS - us.leading_zeros()) as usize;
        let i = i.min(POLL_TIME_BUCKETS - 1);
        let b = &self.buckets[i];
        b.store(b.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let ns = took.as_nanos() as u64;
        self.sum_ns
            .store(self.sum_ns.load(Ordering::Relaxed) + ns, Ordering::Relaxed);
    }

    /// (per-bucket counts, sum of the sampled durations in ns).
    pub(crate) fn snapshot(&self) -> ([u64; POLL_TIME_BUCKETS], u64) {
        let mut out = [0; POLL_TIME_BUCKETS];
        for (o, b) in out.iter_mut().zip(&self.buckets) {
            *o = b.load(Ordering::Relaxed);
        }
        (out, self.sum_ns.load(Ordering::Relaxed))
    }
}

/// The upper bound of bucket `i` (`None` for the last, unbounded one).
pub(crate) fn bucket_bound(i: usize) -> Option<Duration> {
    (i < POLL_TIME_BUCKETS - 1).then(|| Duration::from_micros(1 << i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_land_in_power_of_two_buckets() {
        let h = PollTimes::default();
        h.record(Duration::from_nanos(300)); // < 1 µs: bucket 0
        h.record(Duration::from_micros(1)); // < 2 µs: bucket 1
        h.record(Duration::from_micros(150)); // < 256 µs: bucket 8
        h.record(Duration::from_secs(5)); // the last
        let (b, sum) = h.snapshot();
        assert_eq!((b[0], b[1], b[8], b[POLL_TIME_BUCKETS - 1]), (1, 1, 1, 1));
        assert_eq!(b.iter().sum::<u64>(), 4);
        assert_eq!(sum, 300 + 1_000 + 150_000 + 5_000_000_000);
        assert_eq!(bucket_bound(8), Some(Duration::from_micros(256)));
        assert_eq!(bucket_bound(POLL_TIME_BUCKETS - 1), None);
    }
}
