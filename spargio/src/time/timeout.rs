//! `timeout`: a future raced against a deadline.

use std::fmt;
use std::future::{Future, IntoFuture};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::clock::deadline_after;
use super::Sleep;

/// The deadline passed before the future completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeoutError(());

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for TimeoutError {}

impl From<TimeoutError> for io::Error {
    fn from(err: TimeoutError) -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, err)
    }
}

/// Runs `fut` for at most `duration`: `Ok(output)`, or `Err(TimeoutError)`
/// (and `fut` is dropped) once the deadline passes first.
///
/// ```
/// use std::time::Duration;
/// use spargio::time::{sleep, timeout};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = spargio::Runtime::builder().shards(1).build()?;
/// let out = spargio::block_on(rt.handle().spawn_stealable(async {
///     let quick = timeout(Duration::from_secs(5), async { 7 }).await;
///     let slow = timeout(Duration::from_millis(2), sleep(Duration::from_secs(60))).await;
///     (quick, slow.is_err())
/// })?)?;
/// assert_eq!(out, (Ok(7), true));
/// # Ok(()) }
/// ```
pub fn timeout<F: IntoFuture>(duration: Duration, fut: F) -> Timeout<F::IntoFuture> {
    timeout_at(deadline_after(duration), fut)
}

/// [`timeout`] with an absolute deadline.
pub fn timeout_at<F: IntoFuture>(deadline: Instant, fut: F) -> Timeout<F::IntoFuture> {
    Timeout {
        fut: fut.into_future(),
        sleep: Sleep::until(deadline),
    }
}

/// Future returned by [`timeout`] and [`timeout_at`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct Timeout<F> {
    fut: F,
    sleep: Sleep,
}

impl<F> Timeout<F> {
    /// The wrapped future.
    pub fn get_ref(&self) -> &F {
        &self.fut
    }

    /// The wrapped future, unwrapped.
    pub fn into_inner(self) -> F {
        self.fut
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, TimeoutError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `fut` is structurally pinned (never moved out while
        // pinned; `into_inner` takes `self` by value, so it cannot be
        // pinned); `sleep` is `Unpin` and not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above.
        let fut = unsafe { Pin::new_unchecked(&mut this.fut) };
        if let Poll::Ready(out) = fut.poll(cx) {
            return Poll::Ready(Ok(out));
        }
        match Pin::new(&mut this.sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(TimeoutError(()))),
            Poll::Pending => Poll::Pending,
        }
    }
}
