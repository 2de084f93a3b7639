//! `Sleep`: a resettable timer future.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::clock::deadline_after;
use super::wheel::{TimerKey, TimerState};
use crate::scheduler::context;
use crate::scheduler::Shared;
use crate::shard_id::ShardId;

/// Waits until `duration` has passed. See [`Sleep`].
///
/// ```
/// use std::time::{Duration, Instant};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = spargio::Runtime::builder().shards(1).build()?;
/// let waited = spargio::block_on(rt.handle().spawn_stealable(async {
///     let start = Instant::now();
///     spargio::time::sleep(Duration::from_millis(5)).await;
///     start.elapsed()
/// })?)?;
/// assert!(waited >= Duration::from_millis(5));
/// # Ok(()) }
/// ```
pub fn sleep(duration: Duration) -> Sleep {
    Sleep::new(duration)
}

/// Waits until `deadline`. See [`Sleep`].
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::until(deadline)
}

/// A future that completes at its deadline, never before.
///
/// The timer lives in the timer wheel of the shard where the `Sleep` is
/// first polled; arming, resetting and dropping it cost no syscall. A
/// stealable task may move to another shard while it waits: the timer stays
/// where it was armed and wakes the task wherever it runs. Timers have a
/// resolution of 1 ms and fire at the first tick at or after the deadline.
///
/// Created with [`sleep`] or [`Sleep::new`], a `Sleep` must be polled on a
/// shard thread; to wait from any other thread, create it with
/// [`RuntimeHandle::sleep`](crate::RuntimeHandle::sleep), which arms it on
/// a shard of that runtime.
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct Sleep {
    deadline: Instant,
    armed: Option<Armed>,
    /// The runtime to arm on when polled off its shards.
    home: Option<Arc<Shared>>,
}

#[derive(Debug)]
struct Armed {
    shared: Arc<Shared>,
    shard: ShardId,
    key: TimerKey,
}

impl Sleep {
    /// A `Sleep` that completes `duration` from now.
    pub fn new(duration: Duration) -> Sleep {
        Sleep::until(deadline_after(duration))
    }

    /// A `Sleep` that completes at `deadline`.
    pub fn until(deadline: Instant) -> Sleep {
        Sleep {
            deadline,
            armed: None,
            home: None,
        }
    }

    pub(crate) fn until_on(deadline: Instant, shared: Arc<Shared>) -> Sleep {
        Sleep {
            deadline,
            armed: None,
            home: Some(shared),
        }
    }

    /// When it completes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// True once the deadline has passed.
    pub fn is_elapsed(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// Moves the deadline (earlier or later), even after it completed: the
    /// next poll waits for the new one. No syscall.
    pub fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        if let Some(armed) = &self.armed {
            let tick = armed.shared.clock.tick_at_or_after(deadline);
            if armed.shared.shards[armed.shard]
                .timers
                .reset(armed.key, tick)
            {
                notify_owner(&armed.shared, armed.shard);
            }
        }
    }

    fn disarm(&mut self) {
        if let Some(armed) = self.armed.take() {
            armed.shared.shards[armed.shard].timers.remove(armed.key);
        }
    }

    fn arm(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let (shared, shard) = context::with_worker(|w| w.map(|w| (w.shared.clone(), w.id)))
            .or_else(|| {
                self.home.as_ref().map(|shared| {
                    let shard = shared.next_rr();
                    (shared.clone(), shard)
                })
            })
            .unwrap_or_else(|| {
                panic!(
                    "spargio::time::Sleep polled outside a spargio runtime; \
                     create it with RuntimeHandle::sleep to wait from other threads"
                )
            });
        if shared.is_closing() {
            // The runtime is dropping every task, this one included (the
            // shutdown re-wakes what is left until it is gone): nothing
            // to arm, and nothing to panic about.
            return Poll::Pending;
        }
        let tick = shared.clock.tick_at_or_after(self.deadline);
        let timers = &shared.shards[shard].timers;
        let (key, earliest) = timers.arm(tick, cx.waker());
        if earliest {
            notify_owner(&shared, shard);
        }
        let fired = timers.poll(key, cx.waker()) == TimerState::Fired;
        self.armed = Some(Armed { shared, shard, key });
        if fired {
            self.disarm();
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

/// Rings the timer's shard unless we are that shard (then it will look at
/// its wheel before it sleeps anyway).
fn notify_owner(shared: &Arc<Shared>, shard: ShardId) {
    if context::current_shard(shared) != Some(shard) {
        shared.notify(shard);
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if this.is_elapsed() {
            this.disarm();
            return Poll::Ready(());
        }
        let Some(armed) = &this.armed else {
            return this.arm(cx);
        };
        match armed.shared.shards[armed.shard]
            .timers
            .poll(armed.key, cx.waker())
        {
            TimerState::Pending => Poll::Pending,
            // The wheel fires at the first tick at or after the deadline,
            // so the deadline has passed.
            TimerState::Fired => {
                this.disarm();
                Poll::Ready(())
            }
            TimerState::Gone => {
                this.armed = None;
                this.arm(cx)
            }
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.disarm();
    }
}
