//! The adaptive spin window before parking.
//!
//! Parking costs a kernel wakeup on the way back (tens of microseconds on a
//! small VM), so a shard that is woken moments after it parks would have
//! done better to keep spinning. Like the kernel's guest halt-polling, the
//! window adapts to what parks turned out to be:
//!
//! * a park that ended within `max` of starting (a longer spin would have
//!   caught the work) doubles the window, up to `max`;
//! * a longer park halves it, down to the configured `spin_before_park`.
//!
//! An idle runtime's parks are long, so its shards spin only the base
//! window before each (rare) park; bursty work with short gaps (a hot
//! stream moving between shards every few hundred microseconds) keeps the
//! shards spinning through the gaps. A base of zero disables spinning
//! altogether.

use std::cell::Cell;
use std::time::Duration;

/// Longest the window grows to, unless the base is longer.
const MAX_WINDOW: Duration = Duration::from_micros(200);

#[derive(Debug)]
pub(super) struct AdaptiveSpin {
    base: Duration,
    max: Duration,
    current: Cell<Duration>,
}

impl AdaptiveSpin {
    pub(super) fn new(base: Duration) -> AdaptiveSpin {
        let max = if base.is_zero() {
            Duration::ZERO
        } else {
            base.max(MAX_WINDOW)
        };
        AdaptiveSpin {
            base,
            max,
            current: Cell::new(base),
        }
    }

    /// How long to spin before the next park.
    pub(super) fn window(&self) -> Duration {
        self.current.get()
    }

    /// Records a park that slept `slept` before work arrived.
    pub(super) fn parked(&self, slept: Duration) {
        let cur = self.current.get();
        let next = if slept <= self.max {
            (cur * 2).clamp(self.base, self.max)
        } else {
            (cur / 2).max(self.base)
        };
        self.current.set(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_on_short_parks_and_shrinks_on_long_ones() {
        let s = AdaptiveSpin::new(Duration::from_micros(50));
        s.parked(Duration::from_micros(30));
        assert_eq!(s.window(), Duration::from_micros(100));
        s.parked(Duration::from_micros(30));
        s.parked(Duration::from_micros(30));
        assert_eq!(s.window(), MAX_WINDOW, "capped");
        s.parked(Duration::from_millis(5));
        assert_eq!(s.window(), Duration::from_micros(100));
        for _ in 0..10 {
            s.parked(Duration::from_secs(1));
        }
        assert_eq!(
            s.window(),
            Duration::from_micros(50),
            "never below the base"
        );
    }

    #[test]
    fn zero_base_never_spins() {
        let s = AdaptiveSpin::new(Duration::ZERO);
        s.parked(Duration::from_micros(1));
        assert_eq!(s.window(), Duration::ZERO);
    }
}
