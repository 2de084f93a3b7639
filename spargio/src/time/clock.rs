//! Ticks of 1 ms since the runtime started.

use std::time::{Duration, Instant};

/// The wheel's resolution.
pub(crate) const TICK: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    base: Instant,
    /// `base` on `CLOCK_MONOTONIC_COARSE`'s scale, in ms (`Instant` is
    /// `CLOCK_MONOTONIC`, which the coarse clock trails).
    coarse_base_ms: u64,
    /// How far the coarse clock may trail the precise one, in ms (its
    /// resolution, rounded up, plus one for the reads' skew).
    coarse_slack_ms: u64,
}

/// `CLOCK_MONOTONIC_COARSE` in ms: a vDSO read of the kernel's last
/// timekeeping update, no hardware clock read.
fn coarse_ms() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE) / 1_000_000
}

/// `CLOCK_MONOTONIC_COARSE` in ns (never 0, so 0 can mean "unset").
pub(crate) fn coarse_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE).max(1)
}

/// `CLOCK_MONOTONIC` in ns (`Instant`'s clock, as a plain number).
pub(crate) fn precise_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clocks the callers
    // pass exist on every kernel spargio runs on (2.6.32+).
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Clock {
    pub(crate) fn new() -> Clock {
        let base = Instant::now();
        let mut res = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: as in `coarse_ms`.
        unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) };
        let res_ms = (res.tv_sec as u64 * 1000) + (res.tv_nsec as u64).div_ceil(1_000_000);
        // The precise clock's `base` on the coarse scale: read now, the
        // coarse clock is at most its resolution behind `base`, and the
        // slack below covers it.
        Clock {
            base,
            coarse_base_ms: coarse_ms(),
            coarse_slack_ms: 2 * res_ms.max(1) + 1,
        }
    }

    /// `Some(now)` (in ticks) when `next` may be due, `None` when it is
    /// certainly not. Reads only the coarse clock while `next` is more than
    /// a coarse tick away: a shard with a timer armed seconds ahead (a
    /// server's idle sweeper) checks it on every scheduler pass, and the
    /// precise clock read is what that check cost.
    pub(crate) fn due(&self, next: u64) -> Option<u64> {
        let coarse = coarse_ms().saturating_sub(self.coarse_base_ms);
        if coarse + self.coarse_slack_ms < next {
            return None;
        }
        let now = self.now_tick();
        (next <= now).then_some(now)
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
    saturating_after(Instant::now(), d)
}

/// `at + d`, or a point so far ahead of `at` (30 years) that it never
/// comes, instead of overflowing.
pub(crate) fn saturating_after(at: Instant, d: Duration) -> Instant {
    at.checked_add(d)
        .unwrap_or_else(|| at + Duration::from_secs(60 * 60 * 24 * 365 * 30))
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

#[cfg(test)]
mod due_tests {
    use super::*;

    #[test]
    fn due_is_never_early_and_never_misses() {
        let clock = Clock::new();
        // Far ahead: certainly not due (and no precise read is needed).
        assert_eq!(clock.due(clock.now_tick() + 60_000), None);
        // Already passed: due, with the precise time.
        std::thread::sleep(Duration::from_millis(3));
        let now = clock.due(1).expect("a tick in the past is due");
        assert!(now >= 1);
        // Just ahead: not due until the precise clock reaches it.
        let next = clock.now_tick() + 5;
        while clock.due(next).is_none() {
            assert!(clock.now_tick() < next, "missed a due tick");
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(clock.now_tick() >= next);
    }
}
