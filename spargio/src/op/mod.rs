//! Native operations: one io_uring opcode per file, one future type.
//!
//! An operation is a value implementing [`OpKind`]: it owns every resource
//! the kernel will touch (buffers, a path as a `CString`, a sockaddr, an
//! out-struct), builds its SQE from pointers into that heap memory, and
//! turns the completion back into a result, returning the resources.
//!
//! [`Op`] is the future. Creating it submits at once (so a caller can put
//! many operations in flight before awaiting any):
//!
//! 1. Pick the ring ([`Lane`]): the current shard's when called from one of
//!    the runtime's shards, else the lane selector's choice (least
//!    operations in flight), or an explicit shard.
//! 2. Insert an op-table entry on that shard, build the SQE, push it (same
//!    shard) or send it through the shard's inbox (another thread).
//! 3. Poll: the table hands over the outcome or keeps the waker; the CQE's
//!    reaper wakes it on whatever shard or thread the task now runs.
//! 4. Drop before completion: the resources move into the entry (the
//!    lifecycle in `driver/lifecycle.rs`) and the operation is cancelled.
//!
//! In steady state an operation allocates nothing: the entry lives in a
//! slab, the SQE travels by value, the waker is the task's own.

pub(crate) mod accept;
pub(crate) mod carry;
pub(crate) mod close;
pub(crate) mod connect;
pub(crate) mod fsync;
pub(crate) mod ftruncate;
pub(crate) mod linkat;
pub(crate) mod mkdirat;
mod msghdr;
pub(crate) mod multishot;
pub(crate) mod openat;
pub(crate) mod read;
pub(crate) mod recv;
pub(crate) mod recv_multi;
pub(crate) mod recvmsg;
pub(crate) mod renameat;
pub(crate) mod send;
pub(crate) mod send_vectored;
pub(crate) mod sendmsg;
mod shared_fd;
pub(crate) mod socket;
pub(crate) mod statx;
pub(crate) mod symlinkat;
pub(crate) mod timeout;
pub(crate) mod udp_msg;
pub(crate) mod unlinkat;
pub(crate) mod unsafe_op;
pub(crate) mod write;

pub(crate) use multishot::{MultiOp, MultishotKind};
pub(crate) use shared_fd::SharedFd;

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use io_uring::squeue;

use crate::driver::lifecycle::Orphan;
use crate::driver::ops_table::Orphaned;
use crate::driver::{OpKey, Outcome, Phase};
use crate::scheduler::context;
use crate::scheduler::{choose_op_lane, Shared};
use crate::shard_id::ShardId;

/// What the kernel returned for an operation.
#[derive(Debug)]
pub(crate) struct Completion {
    /// The CQE's result: a count, an fd or zero; a negative result is an
    /// `io::Error` with that errno.
    pub(crate) result: io::Result<u32>,
    /// The CQE's flags.
    pub(crate) flags: u32,
    /// False when the operation never reached the kernel.
    pub(crate) ran: bool,
}

impl Completion {
    pub(crate) fn from_outcome(outcome: Outcome) -> Completion {
        match outcome {
            Outcome::Kernel { result, flags } => Completion {
                result: if result < 0 {
                    Err(io::Error::from_raw_os_error(-result))
                } else {
                    Ok(result as u32)
                },
                flags,
                ran: true,
            },
            Outcome::Shutdown => Completion::failed(crate::driver::ops_table::shutdown_error()),
            // Only multishot entries are paused, and `MultiOp` handles it.
            Outcome::Paused => Completion::failed(io::Error::from_raw_os_error(libc::ECANCELED)),
        }
    }

    pub(crate) fn failed(err: io::Error) -> Completion {
        Completion {
            result: Err(err),
            flags: 0,
            ran: false,
        }
    }
}

/// One io_uring operation and the resources it lends the kernel.
///
/// # Safety
///
/// Every address in the entry [`build`](OpKind::build) returns points into
/// memory owned by `self` that does not move when `self` is moved (heap
/// allocations, `'static` data), and stays valid until `self` is dropped.
pub(crate) unsafe trait OpKind: Send + 'static {
    /// What awaiting the operation yields.
    type Output;

    /// The SQE (its `user_data` is set by the runtime).
    fn build(&mut self) -> squeue::Entry;

    /// Turns the completion into the output, handing resources back.
    fn complete(self, done: Completion) -> Self::Output;

    /// The future is being dropped with the operation in flight (called
    /// before the op table takes it; [`OpKind::reclaim`] follows exactly
    /// once).
    fn abandon(&mut self) {}

    /// An abandoned operation's end: completes it and drops the output,
    /// giving back what it produced (`driver/lifecycle.rs`). A receive
    /// hands its bytes on instead (`op/carry.rs`).
    fn reclaim(self, done: Completion)
    where
        Self: Sized,
    {
        drop(self.complete(done));
    }

    /// An abandoned operation the runtime gives up on: [`OpKind::reclaim`]
    /// will never run (`Orphan::forsake`). No foreign code; wakers go
    /// into `wake`.
    fn forsake(&mut self, _wake: &mut Vec<std::task::Waker>) {}
}

/// Which ring an operation goes to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Lane {
    /// The calling shard's ring; from outside the runtime, the selector's.
    Current,
    /// This shard's ring.
    Shard(ShardId),
    /// The ring with the fewest operations in flight, preferring this one.
    Any { preferred: Option<ShardId> },
}

impl Lane {
    /// The target shard, and whether the caller runs on it.
    pub(crate) fn resolve(self, shared: &Shared, current: Option<ShardId>) -> ShardId {
        match self {
            Lane::Current => current.unwrap_or_else(|| choose_op_lane(shared, None, None)),
            Lane::Shard(s) => s,
            Lane::Any { preferred } => choose_op_lane(shared, current, preferred),
        }
    }
}

enum State {
    InFlight {
        shard: ShardId,
        key: OpKey,
    },
    /// Submission failed (the runtime is shutting down, or a bad shard).
    Refused(io::Error),
    Done,
}

/// The future of one native operation (module docs).
pub(crate) struct Op<K: OpKind> {
    shared: Arc<Shared>,
    state: State,
    kind: Option<K>,
}

impl<K: OpKind> std::fmt::Debug for Op<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state {
            State::InFlight { shard, .. } => format!("in flight on shard {shard}"),
            State::Refused(e) => format!("refused: {e}"),
            State::Done => "done".to_string(),
        };
        f.debug_struct("Op").field("state", &state).finish()
    }
}

/// Creates the op-table entry for an operation on the ring `lane` picks
/// and hands it the SQE `build` makes (the common first half of [`Op`] and
/// [`MultiOp`]).
///
/// # Safety
///
/// Every address in the SQE stays valid until the entry's final
/// completion: the caller keeps the memory, and moves it into the entry if
/// it stops waiting first.
unsafe fn start(
    shared: &Arc<Shared>,
    lane: Lane,
    multishot: Option<usize>,
    build: impl FnOnce() -> squeue::Entry,
) -> io::Result<(ShardId, OpKey)> {
    let current = context::current_shard(shared);
    let shard = lane.resolve(shared, current);
    if shard >= shared.shard_count() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            crate::RuntimeError::InvalidShard(shard),
        ));
    }
    let local = current == Some(shard);
    let phase = if local { Phase::InRing } else { Phase::Queued };
    let ops = &shared.shards[shard].ops;
    // Built before the entry exists: `build` may be caller code, and if it
    // panics there is no entry to leave behind.
    let sqe = build();
    // Opcodes fit in a byte (the SQE's field is one).
    let opcode = sqe.get_opcode() as u8;
    let key = match multishot {
        Some(limit) => ops.insert_multi(phase, opcode, limit)?,
        None => ops.insert(phase, opcode)?,
    };
    // SAFETY: forwarded from this function's contract.
    unsafe { shared.submit_op(shard, key, sqe, local) };
    Ok((shard, key))
}

impl<K: OpKind> Op<K> {
    /// Submits `kind` to the ring `lane` picks.
    pub(crate) fn submit(shared: &Arc<Shared>, lane: Lane, mut kind: K) -> Op<K> {
        // SAFETY: `kind` (OpKind's contract) owns every address in the SQE;
        // this future keeps it until the entry completes, or orphans it
        // into the entry on drop (`Drop` below).
        let state = match unsafe { start(shared, lane, None, || kind.build()) } {
            Ok((shard, key)) => State::InFlight { shard, key },
            Err(err) => State::Refused(err),
        };
        Op {
            shared: shared.clone(),
            state,
            kind: Some(kind),
        }
    }
}

// `Op` never pins its contents: resources are on the heap (OpKind's
// contract) and are moved, not pinned, into the op table on drop.
impl<K: OpKind> Unpin for Op<K> {}

impl<K: OpKind> Future for Op<K> {
    type Output = K::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<K::Output> {
        // `Op` is `Unpin`: its resources live on the heap, not in the future.
        let this = self.get_mut();
        let done = match std::mem::replace(&mut this.state, State::Done) {
            State::InFlight { shard, key } => match this.shared.shards[shard].ops.poll(key, cx) {
                Poll::Ready(outcome) => Completion::from_outcome(outcome),
                Poll::Pending => {
                    this.state = State::InFlight { shard, key };
                    return Poll::Pending;
                }
            },
            State::Refused(err) => Completion::failed(err),
            State::Done => panic!("native operation polled after completion"),
        };
        let kind = this
            .kind
            .take()
            .expect("operation resources present until completion");
        Poll::Ready(kind.complete(done))
    }
}

impl<K: OpKind> Op<K> {
    /// Lets the operation run to its end with nobody waiting for it: it
    /// is not cancelled, and `finish` gets its output when it ends (on the
    /// reaping shard; a panic in it costs only that output). Where it is,
    /// returned for a later [`Shared::cancel_op`] (a stale key cancels
    /// nothing); `None` when it has ended already.
    pub(crate) fn detach<F>(mut self, finish: F) -> Option<(ShardId, OpKey)>
    where
        F: FnOnce(K::Output) + std::marker::Send + 'static,
    {
        let kind = self.kind.take()?;
        let (shard, key) = match std::mem::replace(&mut self.state, State::Done) {
            State::InFlight { shard, key } => (shard, key),
            State::Refused(err) => {
                finish(kind.complete(Completion::failed(err)));
                return None;
            }
            State::Done => return None,
        };
        match self.shared.shards[shard]
            .ops
            .orphan(key, Detached(kind, finish))
        {
            Orphaned::Kept => return Some((shard, key)),
            Orphaned::Completed(detached, outcome) => reclaim(Box::new(detached), outcome),
            Orphaned::Gone(detached) => reclaim(Box::new(detached), Outcome::Shutdown),
        }
        None
    }

    /// Hands the resources to the op table (module docs, step 4); asks
    /// for a cancel when `cancel`. The operation's place, if it is still
    /// in flight.
    fn orphan(&mut self, cancel: bool) -> Option<(ShardId, OpKey)> {
        let mut kind = self.kind.take()?;
        let (shard, key) = match std::mem::replace(&mut self.state, State::Done) {
            State::InFlight { shard, key } => (shard, key),
            // Never reached the kernel: let the operation clean up as if it
            // had been awaited (e.g. a close falls back to `close(2)`).
            State::Refused(err) => {
                drop(kind.complete(Completion::failed(err)));
                return None;
            }
            State::Done => return None,
        };
        kind.abandon();
        match self.shared.shards[shard].ops.orphan(key, Abandoned(kind)) {
            // Kept until the final CQE; ask for it to come soon.
            Orphaned::Kept => {
                if cancel {
                    self.shared.cancel_op(shard, key);
                }
                return Some((shard, key));
            }
            // Completed already: finish it now, so what it produced (an
            // fd, a socket) is given back.
            Orphaned::Completed(kind, outcome) => reclaim(Box::new(kind), outcome),
            Orphaned::Gone(kind) => reclaim(Box::new(kind), Outcome::Shutdown),
        }
        None
    }
}

impl<K: OpKind> Drop for Op<K> {
    fn drop(&mut self) {
        self.orphan(true);
    }
}

/// An operation whose future is gone (`driver/lifecycle.rs`, "Reclaiming
/// what an abandoned operation produced").
struct Abandoned<K>(K);

impl<K: OpKind> Orphan for Abandoned<K> {
    fn reclaim(self: Box<Self>, outcome: Outcome) {
        self.0.reclaim(Completion::from_outcome(outcome));
    }

    fn forsake(&mut self, wake: &mut Vec<std::task::Waker>) {
        self.0.forsake(wake);
    }
}

/// An operation let run to its end (`Op::detach`) and what to do with its
/// output.
struct Detached<K, F>(K, F);

impl<K, F> Orphan for Detached<K, F>
where
    K: OpKind,
    F: FnOnce(K::Output) + std::marker::Send + 'static,
{
    fn reclaim(self: Box<Self>, outcome: Outcome) {
        let Detached(kind, finish) = *self;
        finish(kind.complete(Completion::from_outcome(outcome)));
    }

    fn still_wanted(&self) -> bool {
        true
    }
}

/// Reclaims on the dropping thread; a panic in the operation's own
/// completion or its output's destructor costs only that value.
fn reclaim(keep: Box<dyn Orphan>, outcome: Outcome) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| keep.reclaim(outcome)));
}
