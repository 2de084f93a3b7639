//! [`roam`]: a future that runs inside the task polling it until its
//! wakes come from another shard, then goes on in a stealable task.
//!
//! A pinned task (an HTTP connection, pinned where its socket's
//! operations run) that awaits work done elsewhere is woken across
//! shards: the wake is a message to the pinned task's shard, the poll runs
//! there, and whatever the future starts next (a query on a pooled
//! database connection whose socket another shard's reactor watches, a
//! task it spawns on that shard's tokio runtime) is again answered from
//! the other shard. A chain of such hand-offs costs a cross-shard wake
//! per link. Measured with sqlx under axum (2 shards, a pool of 2, `/db`):
//! handlers inside their pinned connection tasks served 11–12k requests/s
//! at 66–74 µs of CPU each; the same handlers in stealable tasks,
//! which run where they are woken, 24–25k at 39–41 µs.
//!
//! But a stealable task costs a spawn, and a future whose wakes all come
//! from its own shard (a request answered at once, or a database client
//! whose connection lives on this shard) gains nothing from one: measured
//! on the same server with tokio-postgres clients per shard, moving every
//! handler took it from 90–99k to 70–73k requests/s.
//!
//! So [`Roam`] polls its future in place, and moves it in two cases:
//!
//! 1. **A wake from elsewhere.** A poll that followed a wake from another
//!    thread (the task's metadata records which shard scheduled each run)
//!    and left the future pending moves it.
//! 2. **Learned.** Each shard keeps a score of where the futures it
//!    watched were first woken after they first went pending: from
//!    another shard counts `REMOTE_WEIGHT` up, from this one one down
//!    (bounded by `SCORE_BOUND`). While the score is positive, a future
//!    moves as soon as it first goes pending, so its first wake (a pool
//!    connection handed over on another shard, say) is local to wherever
//!    it is then. Measured with sqlx at a pool of 2 on 2 shards, moving
//!    only on a wake from elsewhere left every request's pool wait a
//!    cross-shard wake, and throughput where it was (11–12k requests/s);
//!    moving at the first wait doubled it.
//!
//! A moved future lives in a stealable task placed on this shard; as any
//! stealable task, it runs where its next wake comes from. A future that
//! completes, or is woken only locally, costs one allocation (the box
//! that lets it move once polled) and nothing else. Only futures inside
//! pinned tasks move: a stealable task already follows its wakes.

use std::future::Future;
use std::panic::resume_unwind;
use std::pin::Pin;
use std::task::{Context, Poll};

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::join::{JoinError, JoinHandle};
use super::meta::TaskKind;
use super::spawn;
use crate::scheduler::{self, context, Shared};

/// Runs `fut` inside the current task until it is woken from another
/// shard, then in a stealable task that follows its wakes (module docs of
/// `task/roam.rs` in the source give the measurements).
///
/// Awaiting the returned [`Roam`] yields `fut`'s output, or a cancelled
/// [`JoinError`] when the runtime shut down while the moved future was
/// queued. A panic in `fut` propagates to the awaiting task either way.
/// Dropping the `Roam` drops `fut` (after a move: on the shard running
/// it, at its next scheduling point).
///
/// Off a spargio shard, or inside a stealable task, `fut` simply runs in
/// place.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = spargio::Runtime::builder().shards(2).build()?;
/// let handle = rt.handle();
/// let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
/// // A task pinned to shard 0 waits for a value that shard 1 sends.
/// let waiter = handle.spawn_pinned(0, async move {
///     spargio::roam(async move { rx.await.unwrap() + 1 }).await
/// })?;
/// handle.spawn_pinned(1, async move { tx.send(6).unwrap() })?;
/// assert_eq!(spargio::block_on(waiter)??, 7);
/// # Ok(()) }
/// ```
pub fn roam<F>(fut: F) -> Roam<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Roam {
        state: State::Inline(Box::pin(Watched {
            fut,
            origin: None,
            seen: Seen::Running,
        })),
    }
}

/// The future returned by [`roam`].
#[must_use = "futures do nothing unless polled"]
pub struct Roam<F: Future> {
    state: State<F>,
}

enum State<F: Future> {
    /// Polled by the task awaiting the `Roam`.
    Inline(Pin<Box<Watched<F>>>),
    /// Moved into a stealable task.
    Moved(JoinHandle<F::Output>),
    Done,
}

impl<F: Future> std::fmt::Debug for Roam<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            State::Inline(_) => "inline",
            State::Moved(_) => "moved",
            State::Done => "done",
        };
        f.debug_struct("Roam").field("state", &state).finish()
    }
}

impl<F> Future for Roam<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = Result<F::Output, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let State::Inline(fut) = &mut self.state {
            let first = fut.origin.is_none();
            if let Poll::Ready(out) = fut.as_mut().poll(cx) {
                self.state = State::Done;
                return Poll::Ready(Ok(out));
            }
            let Some((shared, here)) = move_target(first) else {
                return Poll::Pending;
            };
            // A runtime that refuses a stealable task (at its queue bound,
            // or shutting down) leaves the future here.
            let Ok(target) = scheduler::admit_stealable(&shared, Some(here)) else {
                return Poll::Pending;
            };
            let State::Inline(mut fut) = std::mem::replace(&mut self.state, State::Done) else {
                unreachable!("matched above");
            };
            // The moved task's first poll goes on from here: no wake.
            fut.as_mut().seen().set_moved();
            match spawn::build(&shared, TaskKind::Stealable, target, fut) {
                Ok((runnable, task)) => {
                    scheduler::submit_stealable(&shared, target, runnable);
                    self.state = State::Moved(task);
                }
                // The registry closed (the runtime is shutting down and
                // drops every task): the future is gone, as it would be
                // in place.
                Err(_) => return Poll::Ready(Err(JoinError::cancelled())),
            }
        }
        match &mut self.state {
            State::Moved(task) => {
                let out = match Pin::new(task).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(out) => out,
                };
                self.state = State::Done;
                match out {
                    Err(err) if err.is_panic() => resume_unwind(err.into_panic()),
                    out => Poll::Ready(out),
                }
            }
            State::Inline(_) => unreachable!("moved or returned above"),
            State::Done => panic!("Roam polled after it completed"),
        }
    }
}

impl<F: Future> Drop for Roam<F> {
    fn drop(&mut self) {
        if let State::Moved(task) = &self.state {
            task.abort();
        }
    }
}

/// Where a pending future should move, if anywhere: only out of a pinned
/// task, and only when this run was scheduled from another thread, or
/// (`first`: the future's first poll) when the futures this shard watched
/// were lately woken elsewhere.
fn move_target(first: bool) -> Option<(Arc<Shared>, crate::ShardId)> {
    context::with_worker(|w| {
        let w = w?;
        let running = w.running.get()?;
        if !matches!(running.kind, TaskKind::Pinned(_)) {
            return None;
        }
        let go = if first {
            w.me().roam_score.load(Ordering::Relaxed) > 0
        } else {
            running.woken_by != Some(w.id)
        };
        go.then(|| (w.shared.clone(), w.id))
    })
}

/// Bounds of `ShardShared::roam_score`: after a change of workload, this
/// many local observations turn the decision around.
const SCORE_BOUND: i32 = 8;

/// A wake from another shard counts this many local ones: futures move
/// when more than a quarter of their wakes come from elsewhere. (A pool
/// shared by two shards wakes from the other one about half the time; a
/// client per shard never does.)
const REMOTE_WEIGHT: i32 = 3;

/// Where the first wake after the future first went pending came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Not pending yet, or pending and not yet woken.
    Running,
    Pending,
    /// Moved: the next poll continues the last one (not a wake).
    Moved,
    /// Observed (or nothing to observe).
    Done,
}

impl Seen {
    fn set_moved(&mut self) {
        if *self == Seen::Pending {
            *self = Seen::Moved;
        }
    }
}

/// `fut`, noting for its shard of origin whether the first wake after it
/// first went pending came from that shard or another
/// (`ShardShared::roam_score`).
struct Watched<F> {
    fut: F,
    origin: Option<crate::ShardId>,
    seen: Seen,
}

impl<F> Watched<F> {
    fn seen(self: Pin<&mut Self>) -> &mut Seen {
        // SAFETY: `seen` is not structurally pinned (only `fut` is, see
        // `poll`); a `&mut` to it cannot move `fut`.
        &mut unsafe { self.get_unchecked_mut() }.seen
    }
}

impl<F: Future> Future for Watched<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: structural pinning of `fut` only: it is never moved out
        // of a pinned `Watched` (no method hands it out by value, there is
        // no `Drop` impl and no `Unpin` impl), and the other fields are
        // plain data touched by `&mut`.
        let this = unsafe { self.get_unchecked_mut() };
        match this.seen {
            Seen::Pending => {
                this.seen = Seen::Done;
                observe(this.origin);
            }
            Seen::Moved => this.seen = Seen::Pending,
            Seen::Running | Seen::Done => {}
        }
        // SAFETY: see above; `fut` stays where it is.
        let out = unsafe { Pin::new_unchecked(&mut this.fut) }.poll(cx);
        if out.is_pending() && this.origin.is_none() {
            this.origin = context::with_worker(|w| w.map(|w| w.id));
            if this.origin.is_some() {
                this.seen = Seen::Pending;
            }
        }
        out
    }
}

/// Counts one wake of a watched future into its origin shard's score.
fn observe(origin: Option<crate::ShardId>) {
    let Some(origin) = origin else { return };
    context::with_worker(|w| {
        let Some(w) = w else { return };
        let Some(running) = w.running.get() else {
            return;
        };
        let step = if running.woken_by == Some(origin) {
            -1
        } else {
            REMOTE_WEIGHT
        };
        let score = &w.shared.shards[origin].roam_score;
        let now = score.load(Ordering::Relaxed);
        let next = (now + step).clamp(-SCORE_BOUND, SCORE_BOUND);
        if next != now {
            score.store(next, Ordering::Relaxed);
        }
    });
}
