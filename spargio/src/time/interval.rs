//! `Interval`: a periodic ticker.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::clock::saturating_after;
use super::Sleep;

/// What an [`Interval`] does after falling behind (a tick was awaited
/// later than a whole period after it was due).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MissedTickBehavior {
    /// Fire the missed ticks back to back until caught up (the schedule
    /// stays `start + n * period`).
    #[default]
    Burst,
    /// Shift the schedule: the next tick is one period after now.
    Delay,
    /// Drop the missed ticks: the next tick is the next point of the
    /// original schedule after now.
    Skip,
}

/// Ticks every `period`, the first tick at once. Panics if `period` is
/// zero; a period too long to add to an `Instant` (`Duration::MAX`)
/// ticks once and never again.
///
/// ```
/// use std::time::Duration;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = spargio::Runtime::builder().shards(1).build()?;
/// let ticks = spargio::block_on(rt.handle().spawn_stealable(async {
///     let mut every = spargio::time::interval(Duration::from_millis(2));
///     let first = every.tick().await;
///     let second = every.tick().await;
///     second - first
/// })?)?;
/// assert!(ticks >= Duration::from_millis(2));
/// # Ok(()) }
/// ```
pub fn interval(period: Duration) -> Interval {
    interval_at(Instant::now(), period)
}

/// Ticks at `start` and every `period` after. Panics if `period` is zero.
pub fn interval_at(start: Instant, period: Duration) -> Interval {
    assert!(
        !period.is_zero(),
        "spargio::time::interval: period must be non-zero"
    );
    Interval {
        next: start,
        period,
        behavior: MissedTickBehavior::default(),
        sleep: Sleep::until(start),
    }
}

/// A periodic ticker from [`interval`] or [`interval_at`].
#[derive(Debug)]
pub struct Interval {
    next: Instant,
    period: Duration,
    behavior: MissedTickBehavior,
    sleep: Sleep,
}

impl Interval {
    /// Waits for the next tick and returns when it was scheduled.
    pub async fn tick(&mut self) -> Instant {
        poll_fn(|cx| self.poll_tick(cx)).await
    }

    /// Polls for the next tick.
    pub fn poll_tick(&mut self, cx: &mut Context<'_>) -> Poll<Instant> {
        if Pin::new(&mut self.sleep).poll(cx).is_pending() {
            return Poll::Pending;
        }
        let scheduled = self.next;
        let now = Instant::now();
        let on_schedule = saturating_after(scheduled, self.period);
        self.next = if now < on_schedule {
            on_schedule
        } else {
            match self.behavior {
                MissedTickBehavior::Burst => on_schedule,
                MissedTickBehavior::Delay => saturating_after(now, self.period),
                MissedTickBehavior::Skip => {
                    let behind = now.duration_since(scheduled).as_nanos();
                    let periods = behind / self.period.as_nanos() + 1;
                    let ahead = self.period.as_nanos() * periods;
                    saturating_after(
                        scheduled,
                        Duration::from_nanos(ahead.min(u64::MAX as u128) as u64),
                    )
                }
            }
        };
        self.sleep.reset(self.next);
        Poll::Ready(scheduled)
    }

    /// Restarts the schedule one period from now.
    pub fn reset(&mut self) {
        self.next = saturating_after(Instant::now(), self.period);
        self.sleep.reset(self.next);
    }

    /// The period.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// What happens after missed ticks.
    pub fn missed_tick_behavior(&self) -> MissedTickBehavior {
        self.behavior
    }

    /// Sets what happens after missed ticks.
    pub fn set_missed_tick_behavior(&mut self, behavior: MissedTickBehavior) {
        self.behavior = behavior;
    }
}
