//! A timeout that works on and off the runtime's shards.

use std::future::{poll_fn, Future};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use spargio::RuntimeHandle;

/// `fut`, unless `limit` passes first (`None`). The timer is armed on
/// `handle`'s runtime, so the caller may poll from any thread
/// (`spargio::time::timeout` needs a shard).
pub(crate) async fn timeout<F: Future>(
    handle: &RuntimeHandle,
    limit: Duration,
    fut: F,
) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut sleep = pin!(handle.sleep(limit));
    poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        sleep.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// A wait so long it never ends (30 years, as `spargio::time` saturates):
/// what a `Duration` handed to hyper is capped at, since hyper adds it to
/// an `Instant` unchecked (`Duration::MAX` would panic there).
const FOREVER: Duration = Duration::from_secs(60 * 60 * 24 * 365 * 30);

/// `d`, capped at [`FOREVER`].
pub(crate) fn saturate(d: Duration) -> Duration {
    d.min(FOREVER)
}
