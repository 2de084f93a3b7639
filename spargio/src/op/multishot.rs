//! Multishot operations: one SQE, many completions.
//!
//! [`MultiOp`] is the multishot counterpart of [`Op`](super::Op): it
//! submits at once and yields each completion in turn
//! ([`MultiOp::poll_next`]); the completion without `IORING_CQE_F_MORE` is
//! the last. The kernel can end a multishot operation at any time (out of
//! provided buffers, an error, a full CQ), so the owner of a `MultiOp`
//! re-arms it ([`MultiOp::rearm`]) when it wants more.
//!
//! Dropping a `MultiOp` before its last completion moves the operation's
//! resources into the op-table entry and cancels it; every completion
//! posted after that, and every one that was queued unread, goes to the
//! kind's [`Discard`] hook, so an accepted fd is closed and a provided
//! buffer goes back to its ring instead of leaking.

use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};

use io_uring::squeue;

use super::{start, Completion, Lane};
use crate::driver::lifecycle::{Discard, MULTISHOT_QUEUE_LIMIT};
use crate::driver::OpKey;
use crate::scheduler::Shared;
use crate::shard_id::ShardId;

/// One multishot io_uring operation and the resources it lends the kernel.
///
/// # Safety
///
/// As for [`OpKind`](super::OpKind): every address in the entry
/// [`build`](MultishotKind::build) returns points into memory owned by
/// `self` that does not move when `self` is moved, and stays valid until
/// `self` is dropped.
pub(crate) unsafe trait MultishotKind: Discard {
    /// The SQE (its `user_data` is set by the runtime).
    fn build(&mut self) -> squeue::Entry;

    /// Unread completions at which the runtime pauses the operation
    /// (`driver/lifecycle.rs`).
    fn queue_limit(&self) -> usize {
        MULTISHOT_QUEUE_LIMIT
    }

    /// The owner is being dropped with the operation in flight (called
    /// before the op table takes it; its unread and later completions go
    /// to [`Discard::discard`], and it is dropped after the last).
    fn abandon(&mut self) {}
}

enum State {
    InFlight {
        shard: ShardId,
        key: OpKey,
    },
    /// Submission failed; the error is yielded once.
    Refused(io::Error),
    /// The last completion was yielded.
    Ended,
}

/// A multishot operation in flight (module docs).
pub(crate) struct MultiOp<K: MultishotKind> {
    shared: Arc<Shared>,
    state: State,
    kind: Option<K>,
}

impl<K: MultishotKind> std::fmt::Debug for MultiOp<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::InFlight { shard, .. } => format!("in flight on shard {shard}"),
            State::Refused(e) => format!("refused: {e}"),
            State::Ended => "ended".to_string(),
        };
        f.debug_struct("MultiOp").field("state", &state).finish()
    }
}

impl<K: MultishotKind> MultiOp<K> {
    /// Submits `kind` to the ring `lane` picks.
    pub(crate) fn submit(shared: &Arc<Shared>, lane: Lane, kind: K) -> MultiOp<K> {
        let mut op = MultiOp {
            shared: shared.clone(),
            state: State::Ended,
            kind: Some(kind),
        };
        op.rearm(lane);
        op
    }

    /// A multishot operation not armed yet: the first
    /// [`poll_next`](Self::poll_next) yields `None`, and the owner arms it
    /// with [`rearm`](Self::rearm) when it wants completions.
    pub(crate) fn unarmed(shared: &Arc<Shared>, kind: K) -> MultiOp<K> {
        MultiOp {
            shared: shared.clone(),
            state: State::Ended,
            kind: Some(kind),
        }
    }

    /// Submits the operation again after its last completion. No-op while
    /// it is still in flight.
    pub(crate) fn rearm(&mut self, lane: Lane) {
        if !matches!(self.state, State::Ended) {
            return;
        }
        let kind = self.kind.as_mut().expect("resources present until drop");
        let limit = kind.queue_limit();
        // SAFETY: `kind` (MultishotKind's contract) owns every address in
        // the SQE; this value keeps it until the last completion, or
        // orphans it into the entry on drop (`Drop` below).
        self.state = match unsafe { start(&self.shared, lane, Some(limit), || kind.build()) } {
            Ok((shard, key)) => State::InFlight { shard, key },
            Err(err) => State::Refused(err),
        };
    }

    /// The operation's resources.
    pub(crate) fn kind_mut(&mut self) -> &mut K {
        self.kind.as_mut().expect("resources present until drop")
    }

    /// Asks the kernel to end the operation; its last completion follows
    /// (read on with [`poll_next`](Self::poll_next)).
    pub(crate) fn cancel(&self) {
        if let State::InFlight { shard, key } = self.state {
            self.shared.cancel_op(shard, key);
        }
    }

    /// The next completion; `None` after the last one (until re-armed).
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Completion>> {
        match std::mem::replace(&mut self.state, State::Ended) {
            State::InFlight { shard, key } => {
                match self.shared.shards[shard].ops.poll_shot(key, cx) {
                    // The runtime stopped it at its queue bound: it ended
                    // without an error; the owner re-arms for more.
                    Poll::Ready(crate::driver::Outcome::Paused) => Poll::Ready(None),
                    Poll::Ready(outcome) => {
                        let done = Completion::from_outcome(outcome);
                        if done.ran && io_uring::cqueue::more(done.flags) {
                            self.state = State::InFlight { shard, key };
                        }
                        Poll::Ready(Some(done))
                    }
                    Poll::Pending => {
                        self.state = State::InFlight { shard, key };
                        Poll::Pending
                    }
                }
            }
            State::Refused(err) => Poll::Ready(Some(Completion::failed(err))),
            State::Ended => Poll::Ready(None),
        }
    }
}

impl<K: MultishotKind> Drop for MultiOp<K> {
    fn drop(&mut self) {
        let Some(mut kind) = self.kind.take() else {
            return;
        };
        let State::InFlight { shard, key } = std::mem::replace(&mut self.state, State::Ended)
        else {
            return;
        };
        kind.abandon();
        // Ended already: the hook comes back and is dropped here, after it
        // discarded what was left unread. Otherwise it is kept until the
        // last completion; ask for it to come soon.
        if self.shared.shards[shard]
            .ops
            .orphan_multi(key, Box::new(kind))
            .is_none()
        {
            self.shared.cancel_op(shard, key);
        }
    }
}
