//! The life of one native operation, from the op table's point of view.
//!
//! An op-table entry is created when an operation is submitted and removed
//! exactly once, by whichever of these comes second: the future collecting
//! its result, or the kernel posting its final completion. The states:
//!
//! ```text
//!             poll              final CQE
//! Submitted ───────► Waiting ─────────────► Completed ──(poll)──► removed
//!     │                 │
//!     │ future dropped  │ future dropped      final CQE
//!     └────────────────►└──────► Orphaned ─────────────────────► removed
//! ```
//!
//! 1. **Submitted / Waiting.** The future owns the operation's resources
//!    (buffers, paths, sockaddrs, out-structs); the SQE points into their
//!    heap memory, which does not move when the future moves.
//! 2. **Completed.** The kernel is done with the memory; the result waits
//!    for the future, which takes it and removes the entry.
//! 3. **Orphaned.** The future was dropped before the final CQE. It moves
//!    its resources into the entry (boxed; the only allocation on this
//!    path) and asks the owning shard to `ASYNC_CANCEL` the operation. The
//!    resources are reclaimed when the final CQE is reaped, never before:
//!    the kernel may be writing into them until then. Whether the cancel
//!    wins or the operation completes normally does not matter.
//!
//! **Reclaiming what an abandoned operation produced.** An operation can
//! produce something that must be given back: an fd (open, accept,
//! socket), a connected socket, a decoded value owning a resource. Every
//! abandoned operation, whenever its result arrives (before the drop, after
//! it, or never because the runtime shut down), is finished the same way:
//! its own `complete` runs on the outcome and the output is dropped
//! ([`Orphan::reclaim`]). Outputs own what they produced (`OwnedFd`,
//! streams), so dropping them closes it. One mechanism, no per-opcode
//! cleanup to forget. A queued operation dropped before its owner shard
//! pushed it is never pushed: it is reclaimed with `ECANCELED` (unless it
//! was detached to run without its future, `Orphan::still_wanted`).
//!
//! **Foreign code** (wakers, reclaims, user destructors inside resources)
//! never runs under the table's lock: transitions hand the old state out
//! of the lock to be dropped there, and the reaper runs each waker and
//! each reclaim under `catch_unwind`, so a panic costs that value only,
//! never the shard.
//!
//! Every transition happens under the table's lock, so the future (on any
//! thread) and the owning shard's reaper never disagree about who frees
//! what. Wakers and orphaned resources are handed out of the lock and out of
//! the driver's borrow before they run or drop (their code may submit new
//! operations, or drop other operations on the same table).
//!
//! **Multishot operations** (multishot accept, multishot receive) post
//! many completions; only the one without `IORING_CQE_F_MORE` is final.
//! Their entries keep a queue of completions the future has not read yet.
//! When the future is dropped, each completion nobody will read goes to
//! the operation's [`Discard`] hook, which gives back what it carries (an
//! accepted fd is closed, a provided buffer returns to its ring), and the
//! hook itself is dropped at the final completion.
//!
//! A multishot operation nobody reads from must not accept (or receive)
//! without bound: once [`MULTISHOT_QUEUE_LIMIT`] completions wait unread,
//! the table asks the owner to cancel it, and the cancelled final
//! completion reaches the reader as [`Outcome::Paused`]; the reader re-arms
//! when it wants more. Meanwhile connections wait in the listen backlog and
//! bytes in the socket buffer, where the kernel's own limits apply.
//!
//! Runtime shutdown closes the table (see `ops_table.rs`): operations still
//! queued for the ring complete with [`Outcome::Shutdown`], operations in
//! the ring are cancelled and reaped before the ring is closed.

use std::task::Waker;

/// How an operation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The kernel's final completion: `result` is the CQE's `res` (a count,
    /// an fd, or a negated errno) and `flags` its flags.
    Kernel { result: i32, flags: u32 },
    /// The runtime shut down before the operation reached the ring.
    Shutdown,
    /// A multishot operation was ended by the runtime because its unread
    /// completions reached [`MULTISHOT_QUEUE_LIMIT`]; re-arm to go on.
    Paused,
}

/// How many unread completions a multishot operation may queue before the
/// runtime stops it (module docs).
pub(crate) const MULTISHOT_QUEUE_LIMIT: usize = 64;

/// An abandoned operation's resources, waiting for its final outcome.
pub(crate) trait Orphan: Send + 'static {
    /// Finishes the operation with `outcome` and drops what it produced
    /// (module docs). Foreign code: called under `catch_unwind`, outside
    /// every lock.
    fn reclaim(self: Box<Self>, outcome: Outcome);

    /// The runtime gives up on the operation: its resources will be
    /// leaked, never reclaimed (`OpTable::leak_in_ring`). Runs under the
    /// op table's lock: no foreign code; wakers go into `wake`.
    fn forsake(&mut self, _wake: &mut Vec<Waker>) {}

    /// True for an operation detached to run on its own (`Op::detach`):
    /// one still queued is pushed as if its future were there. Abandoned
    /// operations say false, and a queued one is never pushed.
    fn still_wanted(&self) -> bool {
        false
    }
}

/// Resources an orphaned operation keeps alive until its final CQE.
pub(crate) type Keepalive = Box<dyn Orphan>;

/// A multishot operation's hook: every completion was already discarded,
/// the final one included, so reclaiming it only drops it.
impl Orphan for Box<dyn Discard> {
    fn reclaim(self: Box<Self>, _outcome: Outcome) {}

    fn forsake(&mut self, wake: &mut Vec<Waker>) {
        (**self).forsake(wake);
    }
}

/// Where an operation stands (see the module docs for the transitions).
pub(crate) enum Lifecycle {
    /// Submitted; no future has polled yet.
    Submitted,
    /// A future waits for the result.
    Waiting(Waker),
    /// The result is in; the future has not taken it yet.
    Completed(Outcome),
    /// The future is gone; these resources wait for the final CQE.
    Orphaned(Keepalive),
    /// A multishot future is gone; its completions go to this hook until
    /// the final one.
    OrphanedMulti(Box<dyn Discard>),
}

/// What a multishot operation does with a completion no future will read.
pub(crate) trait Discard: Send + 'static {
    /// Gives back what the completion carries (an fd, a buffer id). Runs
    /// under the op table's lock: it must not run foreign code; a waker it
    /// would call goes into `wake`, called after the lock is released.
    fn discard(&mut self, result: i32, flags: u32, wake: &mut Vec<Waker>);

    /// As [`Orphan::forsake`].
    fn forsake(&mut self, _wake: &mut Vec<Waker>) {}
}

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Lifecycle::Submitted => f.write_str("Submitted"),
            Lifecycle::Waiting(_) => f.write_str("Waiting"),
            Lifecycle::Completed(o) => write!(f, "Completed({o:?})"),
            Lifecycle::Orphaned(_) => f.write_str("Orphaned"),
            Lifecycle::OrphanedMulti(_) => f.write_str("OrphanedMulti"),
        }
    }
}

/// What the reaper must do after recording a completion.
pub(crate) enum OnComplete {
    /// Wake this future.
    Wake(Waker),
    /// Nobody polled yet; nothing to do.
    Stored,
    /// The future is gone: reclaim these resources (outside the lock).
    Release(Keepalive),
}

impl Lifecycle {
    /// Records the final completion. Returns the new state, or `None` when
    /// the entry is to be removed, plus the reaper's follow-up.
    pub(crate) fn complete(self, outcome: Outcome) -> (Option<Lifecycle>, OnComplete) {
        match self {
            Lifecycle::Submitted => (Some(Lifecycle::Completed(outcome)), OnComplete::Stored),
            Lifecycle::Waiting(waker) => {
                (Some(Lifecycle::Completed(outcome)), OnComplete::Wake(waker))
            }
            Lifecycle::Orphaned(keep) => (None, OnComplete::Release(keep)),
            Lifecycle::OrphanedMulti(sink) => (None, OnComplete::Release(Box::new(sink))),
            Lifecycle::Completed(prev) => {
                debug_assert!(false, "second final completion for one op");
                (Some(Lifecycle::Completed(prev)), OnComplete::Stored)
            }
        }
    }
}
