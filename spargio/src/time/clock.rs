//! Ticks of 1 ms since the runtime started.

use std::time::{Duration, Instant};

/// The wheel's resolution.
pub(crate) const TICK: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    base: Instant,
}

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock {
            base: Instant::now(),
        }
    }

    /// Ticks fully elapsed now.
    pub(crate) fn now_tick(&self) -> u64 {
        millis(Instant::now().saturating_duration_since(self.base))
    }

    /// The first tick at or after `deadline`: a timer filed there never
    /// fires before `deadline`.
    pub(crate) fn tick_at_or_after(&self, deadline: Instant) -> u64 {
        let since = deadline.saturating_duration_since(self.base);
        let ticks = since.as_nanos().div_ceil(TICK.as_nanos());
        ticks.min(u64::MAX as u128) as u64
    }

    /// Time from now until `tick` starts (zero if it already has).
    pub(crate) fn until_tick(&self, tick: u64) -> Duration {
        let at = self.base.checked_add(Duration::from_millis(tick));
        at.map_or(Duration::MAX, |at| {
            at.saturating_duration_since(Instant::now())
        })
    }
}

fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// `now + d`, or a point so far ahead that it never comes, instead of
/// overflowing.
pub(crate) fn deadline_after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(60 * 60 * 24 * 365 * 30))
}

/// The sooner of two optional waits (`None`: no bound).
pub(crate) fn earliest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_round_deadlines_up_and_now_down() {
        let clock = Clock::new();
        let base = clock.base;
        assert_eq!(clock.tick_at_or_after(base), 0);
        assert_eq!(clock.tick_at_or_after(base + Duration::from_micros(1)), 1);
        assert_eq!(clock.tick_at_or_after(base + Duration::from_millis(5)), 5);
        assert_eq!(
            clock.tick_at_or_after(base + Duration::from_micros(5001)),
            6
        );
        assert!(clock.tick_at_or_after(base + Duration::from_secs(1 << 40)) > 1 << 40);
    }

    #[test]
    fn huge_durations_do_not_overflow() {
        let far = deadline_after(Duration::MAX);
        assert!(far > Instant::now() + Duration::from_secs(60 * 60 * 24 * 365));
    }
}
