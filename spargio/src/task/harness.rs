//! The wrapper every spawned future runs inside.

use std::any::Any;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::meta::TaskMeta;

/// A panic payload carried from a task to its `JoinHandle`.
pub(crate) type Panic = Box<dyn Any + Send + 'static>;

/// Catches panics from `poll` (they become the task's output) and removes
/// the task from its registry once the future is gone.
pub(crate) struct Harness<'m, F> {
    fut: ManuallyDrop<F>,
    meta: &'m TaskMeta,
}

impl<'m, F> Harness<'m, F> {
    pub(crate) fn new(fut: F, meta: &'m TaskMeta) -> Harness<'m, F> {
        Harness {
            fut: ManuallyDrop::new(fut),
            meta,
        }
    }
}

impl<F: Future> Future for Harness<'_, F> {
    type Output = Result<F::Output, Panic>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let meta = self.meta;
        #[cfg(feature = "tracing")]
        let _span = meta.span.enter();
        let seen = meta.run_state.poll_started();
        let out = self.poll_inner(cx);
        meta.run_state.poll_ended(seen);
        out
    }
}

impl<F: Future> Harness<'_, F> {
    /// The poll proper: the future's, unless the task was aborted; a panic
    /// becomes the output.
    fn poll_inner(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<F::Output, Panic>> {
        // An abort that raced with this poll's scheduling (the flag was set
        // after the scheduler checked it, and the abort's wake found the
        // task already scheduled, so it was absorbed): do not poll the
        // future again; reschedule, and the scheduler drops the task.
        if self.meta.is_aborted() {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let meta = self.meta;
        // SAFETY: `fut` is structurally pinned: it is never moved out of the
        // harness, and `Drop` drops it in place.
        let fut = unsafe { self.map_unchecked_mut(|h| &mut *h.fut) };
        match catch_unwind(AssertUnwindSafe(|| fut.poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(explain_tokio_panic(payload, meta))),
        }
    }
}

/// The fix for tokio's "must be called from the context of a Tokio 1.x
/// runtime", which a task meets when it calls tokio's runtime (a crate
/// built on tokio: sqlx, tower's timeout, `tokio::fs`) on a runtime without
/// one. Both this payload (read by the `JoinHandle`) and, once per
/// process, stderr say it: the client of a server otherwise sees only a
/// dropped connection.
fn explain_tokio_panic(payload: Panic, meta: &TaskMeta) -> Panic {
    const TOKIO: &str = "Tokio 1.x runtime";
    let msg = match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(s), _) => *s,
        (_, Some(s)) => s.as_str(),
        _ => return payload,
    };
    if !msg.contains(TOKIO) {
        return payload;
    }
    #[cfg(feature = "tokio-compat")]
    let fix = if meta.shared.config.tokio_compat {
        return payload;
    } else {
        "this runtime was built with tokio's runtime off (`RuntimeBuilder::tokio_compat(false)` \
         or SPARGIO_TOKIO_COMPAT=0): leave it on"
    };
    #[cfg(not(feature = "tokio-compat"))]
    let fix = {
        let _ = meta;
        "build spargio with the feature `tokio-compat` (and `spargio-http`'s, if you use it)"
    };
    let explained = format!(
        "{msg}\n(spargio: a task called tokio's runtime where there is none; to run \
         tokio's runtime APIs and the crates built on them inside spargio tasks, {fix})"
    );
    static TOLD: std::sync::Once = std::sync::Once::new();
    TOLD.call_once(|| eprintln!("{explained}"));
    Box::new(explained)
}

impl<F> Drop for Harness<'_, F> {
    fn drop(&mut self) {
        // Deregisters even if the future's destructor unwinds.
        struct Deregister<'a>(&'a TaskMeta);
        impl Drop for Deregister<'_> {
            fn drop(&mut self) {
                let shared = &self.0.shared;
                let emptied = shared.shards[self.0.home].registry.remove(self.0.key);
                if emptied && shared.is_closing() {
                    shared.task_gone_in_shutdown();
                }
            }
        }
        let _guard = Deregister(self.meta);
        // SAFETY: dropped exactly once, in place (pinning's drop guarantee),
        // and never touched again.
        unsafe { ManuallyDrop::drop(&mut self.fut) };
    }
}
