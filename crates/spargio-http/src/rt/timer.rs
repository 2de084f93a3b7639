//! `hyper::rt::Timer` on spargio's timer wheel.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use spargio::RuntimeHandle;

/// hyper's timer: sleeps on the timer wheel of the shard that first
/// polls them (module docs). Timers have spargio's 1 ms resolution.
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// use hyper::rt::Timer as _;
/// use std::time::{Duration, Instant};
///
/// let timer = spargio_http::rt::Timer::new(&handle);
/// let start = Instant::now();
/// timer.sleep(Duration::from_millis(5)).await;
/// assert!(start.elapsed() >= Duration::from_millis(5));
/// # })).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct Timer {
    handle: RuntimeHandle,
}

impl Timer {
    /// A timer on `handle`'s runtime: its sleeps may be polled on any
    /// thread (off the runtime they are armed on one of its shards).
    pub fn new(handle: impl AsRef<RuntimeHandle>) -> Timer {
        Timer {
            handle: handle.as_ref().clone(),
        }
    }
}

/// One hyper sleep: a spargio [`Sleep`](spargio::time::Sleep).
struct HyperSleep(spargio::time::Sleep);

impl Future for HyperSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl hyper::rt::Sleep for HyperSleep {}

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(self.handle.sleep(duration)))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(HyperSleep(self.handle.sleep_until(deadline)))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: Instant) {
        // Ours: move the deadline in place (no allocation, no syscall).
        if let Some(mut ours) = sleep.as_mut().downcast_mut_pin::<HyperSleep>() {
            ours.0.reset(new_deadline);
            return;
        }
        *sleep = self.sleep_until(new_deadline);
    }
}
