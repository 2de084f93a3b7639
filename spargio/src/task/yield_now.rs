//! [`yield_now`]: let the shard run something else first.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Returns `Pending` once, waking the task first: it goes to the back of
/// its shard's queue and resumes after what was already waiting (the
/// retry loop after a `SendError::Backpressure`, a long computation that
/// should let the shard's other tasks and completions through).
///
/// ```
/// # spargio::block_on(spargio::run(|handle| async move {
/// let ctx_task = handle.spawn_stealable(async {
///     for _ in 0..3 {
///         spargio::yield_now().await;
///     }
///     7
/// }).unwrap();
/// assert_eq!(ctx_task.await.unwrap(), 7);
/// # })).unwrap();
/// ```
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// Future returned by [`yield_now`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}
