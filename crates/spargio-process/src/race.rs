//! Two small combinators: a join of three futures (for `output`, which
//! reads both pipes while it waits) and a deadline that works on any
//! thread (the timer is armed through the runtime handle, so a caller
//! outside the runtime can use it too).

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::Instant;

use spargio::RuntimeHandle;

/// Runs the three futures concurrently, in this task, until all are done.
pub(crate) async fn join3<A, B, C>(a: A, b: B, c: C) -> (A::Output, B::Output, C::Output)
where
    A: Future,
    B: Future,
    C: Future,
{
    let (mut a, mut b, mut c) = (pin!(a), pin!(b), pin!(c));
    let (mut ra, mut rb, mut rc) = (None, None, None);
    poll_fn(|cx| {
        if ra.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        if rc.is_none() {
            if let Poll::Ready(v) = c.as_mut().poll(cx) {
                rc = Some(v);
            }
        }
        match (ra.take(), rb.take(), rc.take()) {
            (Some(a), Some(b), Some(c)) => Poll::Ready((a, b, c)),
            (a, b, c) => {
                (ra, rb, rc) = (a, b, c);
                Poll::Pending
            }
        }
    })
    .await
}

/// `fut`'s output, or `None` if `deadline` passed first (then `fut` is
/// dropped). No deadline: just `fut`.
pub(crate) async fn until<F: Future>(
    handle: &RuntimeHandle,
    deadline: Option<Instant>,
    fut: F,
) -> Option<F::Output> {
    let Some(deadline) = deadline else {
        return Some(fut.await);
    };
    let mut sleep = handle.sleep_until(deadline);
    let mut fut = pin!(fut);
    poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        match Pin::new(&mut sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}
