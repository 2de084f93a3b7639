//! `TaskGroup`: a cancellation scope for a set of tasks.

use std::future::{poll_fn, Future};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use super::CancellationToken;
use crate::error::RuntimeError;
use crate::runtime::RuntimeHandle;
use crate::task::{JoinError, JoinHandle, TaskPlacement};

/// A set of tasks that share a [`CancellationToken`] and can be awaited
/// together.
///
/// Cancelling the group (or dropping it) cancels every task in it
/// cooperatively: each task's future is dropped at its next await point and
/// its handle reports cancellation. [`TaskGroup::wait`] resolves once every
/// task spawned so far has ended, and says how each ended.
///
/// ```
/// use std::time::Duration;
/// use spargio::sync::TaskGroup;
/// use spargio::TaskPlacement;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = spargio::Runtime::builder().shards(2).build()?;
/// let group = TaskGroup::new(rt.handle());
/// let quick = group.spawn_with_placement(TaskPlacement::Stealable, async { 1 })?;
/// group.spawn_with_placement(TaskPlacement::Stealable, async {
///     spargio::time::sleep(Duration::from_secs(3600)).await;
/// })?;
/// assert_eq!(spargio::block_on(quick)?, 1);
/// group.cancel();
/// let report = spargio::block_on(group.wait());
/// assert_eq!((report.completed, report.cancelled), (1, 1));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TaskGroup {
    handle: RuntimeHandle,
    token: CancellationToken,
    tally: Arc<Tally>,
}

/// How the tasks of a group ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupReport {
    /// Tasks whose future ran to completion.
    pub completed: usize,
    /// Tasks stopped by the group's cancellation (or runtime shutdown).
    pub cancelled: usize,
    /// Tasks that panicked.
    pub panicked: usize,
}

#[derive(Debug, Default)]
struct Tally {
    running: AtomicUsize,
    state: Mutex<TallyState>,
}

#[derive(Debug, Default)]
struct TallyState {
    report: GroupReport,
    waiters: Vec<Waker>,
}

/// Ends a task's entry in the tally exactly once, however it ends.
struct Member {
    tally: Arc<Tally>,
    outcome: Outcome,
}

#[derive(Clone, Copy)]
enum Outcome {
    Completed,
    Cancelled,
    Panicked,
}

impl Drop for Member {
    fn drop(&mut self) {
        let outcome = self.outcome;
        let waiters = {
            let mut state = self.tally.state.lock().unwrap_or_else(|p| p.into_inner());
            match outcome {
                Outcome::Completed => state.report.completed += 1,
                Outcome::Cancelled => state.report.cancelled += 1,
                Outcome::Panicked => state.report.panicked += 1,
            }
            // AcqRel: the report update above is visible to whoever sees 0.
            if self.tally.running.fetch_sub(1, Ordering::AcqRel) == 1 {
                std::mem::take(&mut state.waiters)
            } else {
                Vec::new()
            }
        };
        for waker in waiters {
            waker.wake();
        }
    }
}

impl TaskGroup {
    /// An empty group on `handle`'s runtime (given by value or by
    /// reference).
    pub fn new(handle: impl AsRef<RuntimeHandle>) -> TaskGroup {
        TaskGroup {
            handle: handle.as_ref().clone(),
            token: CancellationToken::new(),
            tally: Arc::default(),
        }
    }

    /// Spawns `fut` in the group. Fails with `Shutdown` (and spawns
    /// nothing) if the group is already cancelled.
    #[track_caller]
    pub fn spawn_with_placement<F>(
        &self,
        placement: TaskPlacement,
        fut: F,
    ) -> Result<TaskGroupJoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if self.token.is_cancelled() {
            return Err(RuntimeError::Shutdown);
        }
        if crate::task::spawn::boxes::<F>() {
            // Boxed before the wrapper takes it (see `BOX_ABOVE`).
            return self.spawn_member(placement, Box::pin(fut));
        }
        self.spawn_member(placement, fut)
    }

    #[track_caller]
    fn spawn_member<F>(
        &self,
        placement: TaskPlacement,
        fut: F,
    ) -> Result<TaskGroupJoinHandle<F::Output>, RuntimeError>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tally.running.fetch_add(1, Ordering::AcqRel);
        let mut member = Member {
            tally: self.tally.clone(),
            outcome: Outcome::Cancelled,
        };
        let token = self.token.clone();
        let wrapped = async move {
            let out = {
                let mut fut = pin!(fut);
                let mut cancelled = pin!(token.cancelled());
                let outcome = &mut member.outcome;
                poll_fn(|cx| {
                    match catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
                        Ok(Poll::Ready(out)) => return Poll::Ready(Some(out)),
                        Ok(Poll::Pending) => {}
                        Err(payload) => {
                            *outcome = Outcome::Panicked;
                            resume_unwind(payload);
                        }
                    }
                    cancelled.as_mut().poll(cx).map(|()| None)
                })
                .await
            };
            if out.is_some() {
                member.outcome = Outcome::Completed;
            }
            drop(member);
            out
        };
        match self.handle.spawn_with_placement(placement, wrapped) {
            Ok(inner) => Ok(TaskGroupJoinHandle { inner }),
            // The wrapper (and with it the tally entry) was dropped unrun;
            // it counted itself as cancelled.
            Err(err) => Err(err),
        }
    }

    /// Cancels every task in the group (and refuses new ones).
    pub fn cancel(&self) {
        self.token.cancel();
    }

    /// The group's token: cancelled with the group; pass it (or children
    /// of it) to work that should stop with the group.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Tasks spawned in the group that have not ended yet.
    pub fn running(&self) -> usize {
        self.tally.running.load(Ordering::Acquire)
    }

    /// Waits until every task spawned so far has ended, and reports how.
    pub async fn wait(&self) -> GroupReport {
        poll_fn(|cx| self.poll_wait(cx)).await
    }

    fn poll_wait(&self, cx: &mut Context<'_>) -> Poll<GroupReport> {
        let mut state = self.tally.state.lock().unwrap_or_else(|p| p.into_inner());
        if self.tally.running.load(Ordering::Acquire) == 0 {
            return Poll::Ready(state.report);
        }
        if !state.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            state.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl Drop for TaskGroup {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// Handle to a task spawned in a [`TaskGroup`].
#[derive(Debug)]
pub struct TaskGroupJoinHandle<T> {
    inner: JoinHandle<Option<T>>,
}

impl<T> TaskGroupJoinHandle<T> {
    /// Aborts this task alone.
    pub fn abort(&self) {
        self.inner.abort();
    }

    /// True once the task has ended.
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
}

impl<T> Future for TaskGroupJoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.inner).poll(cx).map(|res| match res {
            Ok(Some(out)) => Ok(out),
            Ok(None) => Err(JoinError::cancelled()),
            Err(err) => Err(err),
        })
    }
}
