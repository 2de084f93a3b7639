//! One shard's table of native operations in flight.
//!
//! A slab of entries, each one operation's [`Lifecycle`] plus a generation.
//! `user_data` carries the slot and the generation ([`OpKey`]), so a stale
//! completion can never be taken for a later operation that reused the slot.
//!
//! The table is shared (behind a mutex) because the future waiting on an
//! operation may run on any thread: a stealable task moves between shards,
//! and unbound native ops can be awaited from outside the runtime. The
//! lock is held for a few loads and stores per transition; the reaper takes
//! it once per batch of completions.
//!
//! An entry's phase says who will hand the SQE to the kernel: `Queued`
//! entries were submitted from another thread and wait in the owner's inbox;
//! `InRing` entries are in the ring (or in the driver's backlog, which is
//! flushed into it in order). Closing the table at shutdown fails queued
//! entries at once and reports the in-ring ones, which the owner cancels
//! and reaps before its ring closes.
//!
//! Multishot entries ([`OpTable::insert_multi`]) also hold a queue of the
//! completions posted so far; the entry ends with the completion that lacks
//! `IORING_CQE_F_MORE` (or with `Shutdown`), and is removed once the future
//! has read that last one or was dropped.

use std::collections::VecDeque;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use crossbeam_utils::CachePadded;
use slab::Slab;

use super::lifecycle::{Discard, Keepalive, Lifecycle, OnComplete, Orphan, Outcome};
use crate::error::RuntimeError;

const GEN_BITS: u32 = 24;
const GEN_MASK: u32 = (1 << GEN_BITS) - 1;

/// Identifies one operation: op-table slot plus generation. Fits the 56-bit
/// `user_data` payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpKey {
    slot: u32,
    gen: u32,
}

impl OpKey {
    pub(crate) fn to_payload(self) -> u64 {
        (u64::from(self.gen) << 32) | u64::from(self.slot)
    }

    pub(crate) fn from_payload(payload: u64) -> OpKey {
        OpKey {
            slot: payload as u32,
            gen: (payload >> 32) as u32 & GEN_MASK,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Waiting in the owner's inbox to be pushed.
    Queued,
    /// In the ring or the driver's backlog.
    InRing,
}

#[derive(Debug)]
struct Entry {
    gen: u32,
    phase: Phase,
    /// The SQE's opcode, for the in-flight counts.
    opcode: u8,
    life: Lifecycle,
    /// Multishot operations only: completions not yet read.
    shots: Option<Box<Shots>>,
}

#[derive(Debug)]
struct Shots {
    queue: VecDeque<Outcome>,
    /// Unread completions at which the operation is paused.
    limit: usize,
    /// The final completion is in (last in `queue`, or already read).
    ended: bool,
    /// The queue reached its bound and a cancel was asked for: the
    /// cancelled final completion is reported as `Outcome::Paused`.
    paused: bool,
}

impl Entry {
    /// The kernel (or the inbox) still has the operation.
    fn is_live(&self) -> bool {
        match &self.shots {
            Some(shots) => !shots.ended,
            None => !matches!(self.life, Lifecycle::Completed(_)),
        }
    }
}

/// True when a multishot operation's completion is its last.
fn is_last_shot(outcome: Outcome) -> bool {
    match outcome {
        Outcome::Kernel { flags, .. } => !io_uring::cqueue::more(flags),
        Outcome::Shutdown | Outcome::Paused => true,
    }
}

#[derive(Debug)]
struct Inner {
    slots: Slab<Entry>,
    next_gen: u32,
    closed: bool,
    /// Shutdown gave up on the kernel: resources of operations still in
    /// the ring are leaked, never freed (see `leak_in_ring`).
    leaked: bool,
    /// Entries per opcode (the last slot counts every opcode from
    /// `OPCODE_SLOTS - 1` up).
    by_opcode: [u32; OPCODE_SLOTS],
}

/// Opcodes counted one by one; the kernel's go up to about 60.
pub(crate) const OPCODE_SLOTS: usize = 64;

fn opcode_slot(opcode: u8) -> usize {
    usize::from(opcode).min(OPCODE_SLOTS - 1)
}

impl Inner {
    /// Frees `slot` (which must hold an entry) and uncounts its opcode.
    fn remove(&mut self, slot: u32) -> Entry {
        let entry = self.slots.remove(slot as usize);
        self.by_opcode[opcode_slot(entry.opcode)] -= 1;
        entry
    }
}

/// Completions reaped in one batch, with the follow-up work to do outside
/// every lock and borrow: wake these futures, reclaim these resources,
/// cancel these operations.
#[derive(Default)]
pub(crate) struct Reaped {
    pub(crate) wakers: Vec<Waker>,
    pub(crate) released: Vec<(Keepalive, Outcome)>,
    /// Multishot operations whose unread queue reached its bound.
    pub(crate) cancels: Vec<OpKey>,
    /// Final completions recorded.
    pub(crate) completed: u64,
    /// Wakers and reclaims that panicked (each cost only itself).
    pub(crate) panicked: u64,
}

impl std::fmt::Debug for Reaped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reaped")
            .field("wakers", &self.wakers.len())
            .field("released", &self.released.len())
            .finish()
    }
}

impl Reaped {
    /// Runs the follow-up work (but the cancels, which the caller pushes).
    /// Must be called with no lock or driver borrow held. Each waker and
    /// each reclaim is foreign code: a panic in one is caught and counted,
    /// and the rest still run.
    pub(crate) fn settle(&mut self) {
        self.completed = 0;
        for waker in self.wakers.drain(..) {
            if catch_unwind(AssertUnwindSafe(|| waker.wake())).is_err() {
                self.panicked += 1;
            }
        }
        for (keep, outcome) in self.released.drain(..) {
            if catch_unwind(AssertUnwindSafe(|| keep.reclaim(outcome))).is_err() {
                self.panicked += 1;
            }
        }
    }

    /// Moves `other`'s follow-up work into this one.
    pub(crate) fn absorb(&mut self, other: &mut Reaped) {
        self.wakers.append(&mut other.wakers);
        self.released.append(&mut other.released);
        self.cancels.append(&mut other.cancels);
        self.completed += std::mem::take(&mut other.completed);
        self.panicked += std::mem::take(&mut other.panicked);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.wakers.is_empty()
            && self.released.is_empty()
            && self.cancels.is_empty()
            && self.completed == 0
    }
}

/// The op table.
#[derive(Debug)]
pub(crate) struct OpTable {
    inner: Mutex<Inner>,
    /// Operations submitted and not yet finally completed: the lane
    /// selector's load signal. Written under the lock, read without it.
    pending: CachePadded<AtomicUsize>,
}

impl Default for OpTable {
    fn default() -> OpTable {
        OpTable {
            inner: Mutex::new(Inner {
                slots: Slab::new(),
                next_gen: 0,
                closed: false,
                leaked: false,
                by_opcode: [0; OPCODE_SLOTS],
            }),
            pending: CachePadded::new(AtomicUsize::new(0)),
        }
    }
}

/// The error an operation gets when the runtime is gone.
pub(crate) fn shutdown_error() -> io::Error {
    io::Error::other(RuntimeError::Shutdown)
}

/// What a stream reports when an operation abandoned on it was forsaken
/// (`leak_in_ring`): bytes it may have taken cannot be had.
pub(crate) fn forsaken_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the shard's ring failed with a receive on this stream in flight; \
         what it received is lost",
    )
}

/// The outcome an abandoned operation that never reached the kernel is
/// reclaimed with.
fn cancelled() -> Outcome {
    Outcome::Kernel {
        result: -libc::ECANCELED,
        flags: 0,
    }
}

/// Calls wakers collected under a lock, after it is released.
fn wake_all(wakers: Vec<Waker>) {
    for waker in wakers {
        waker.wake();
    }
}

/// What the owner does with a queued operation it drained from its inbox.
pub(crate) enum MarkInRing {
    /// Push its SQE.
    Push,
    /// Nothing (the table closed and failed it).
    Skip,
    /// Its future is gone: never push it; reclaim these resources with
    /// this outcome instead.
    Abandoned(Keepalive, Outcome),
}

/// Where an abandoned operation's resources went.
pub(crate) enum Orphaned<R> {
    /// Into the entry, until the final CQE (the caller asks for a cancel).
    Kept,
    /// Back: the operation completed with this outcome; reclaim them now.
    Completed(R, Outcome),
    /// Back: the entry is gone (the runtime shut down and failed it).
    Gone(R),
}

impl OpTable {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Operations in flight (approximate when read from another thread).
    pub(crate) fn pending(&self) -> usize {
        // Relaxed: a load signal; no memory is published through it.
        self.pending.load(Ordering::Relaxed)
    }

    fn set_pending(&self, inner: &Inner) {
        // Relaxed: see `pending`.
        self.pending.store(inner.slots.len(), Ordering::Relaxed);
    }

    /// Creates an entry for a new operation (its SQE's `opcode`). Fails
    /// once the table is closed (the runtime is shutting down).
    pub(crate) fn insert(&self, phase: Phase, opcode: u8) -> io::Result<OpKey> {
        self.insert_entry(phase, opcode, None)
    }

    /// Creates an entry for a multishot operation (module docs) that is
    /// paused once `limit` completions wait unread (at least one).
    pub(crate) fn insert_multi(&self, phase: Phase, opcode: u8, limit: usize) -> io::Result<OpKey> {
        let shots = Shots {
            queue: VecDeque::new(),
            limit: limit.max(1),
            ended: false,
            paused: false,
        };
        self.insert_entry(phase, opcode, Some(Box::new(shots)))
    }

    /// Operations in the table per opcode (slot docs on `Inner::by_opcode`).
    pub(crate) fn by_opcode(&self) -> [u32; OPCODE_SLOTS] {
        self.lock().by_opcode
    }

    fn insert_entry(
        &self,
        phase: Phase,
        opcode: u8,
        shots: Option<Box<Shots>>,
    ) -> io::Result<OpKey> {
        let mut inner = self.lock();
        if inner.closed {
            return Err(shutdown_error());
        }
        let gen = inner.next_gen;
        inner.next_gen = (gen + 1) & GEN_MASK;
        let slot = inner.slots.insert(Entry {
            gen,
            phase,
            opcode,
            life: Lifecycle::Submitted,
            shots,
        });
        inner.by_opcode[opcode_slot(opcode)] += 1;
        let slot = u32::try_from(slot).expect("more than 2^32 operations in flight");
        self.set_pending(&inner);
        Ok(OpKey { slot, gen })
    }

    fn entry(inner: &mut Inner, key: OpKey) -> Option<&mut Entry> {
        inner
            .slots
            .get_mut(key.slot as usize)
            .filter(|e| e.gen == key.gen)
    }

    /// Owner side: a queued operation is about to be pushed. Says whether
    /// to push it; an operation whose future was dropped meanwhile is not
    /// pushed at all but handed back, to be reclaimed as cancelled (one
    /// detached to run on its own, `Orphan::still_wanted`, is pushed).
    pub(crate) fn mark_in_ring(&self, key: OpKey) -> MarkInRing {
        let mut inner = self.lock();
        let Some(e) = Self::entry(&mut inner, key) else {
            return MarkInRing::Skip;
        };
        if e.phase != Phase::Queued || !e.is_live() {
            return MarkInRing::Skip;
        }
        match &e.life {
            Lifecycle::Orphaned(keep) if keep.still_wanted() => {
                e.phase = Phase::InRing;
                MarkInRing::Push
            }
            Lifecycle::Orphaned(_) | Lifecycle::OrphanedMulti(_) => {
                let entry = inner.remove(key.slot);
                self.set_pending(&inner);
                drop(inner);
                let keep: Keepalive = match entry.life {
                    Lifecycle::Orphaned(keep) => keep,
                    Lifecycle::OrphanedMulti(sink) => Box::new(sink),
                    _ => unreachable!("matched above"),
                };
                MarkInRing::Abandoned(keep, cancelled())
            }
            _ => {
                e.phase = Phase::InRing;
                MarkInRing::Push
            }
        }
    }

    /// Owner side: true when a cancel for `key` should be pushed (the
    /// operation is in the ring and not finally completed).
    pub(crate) fn wants_cancel(&self, key: OpKey) -> bool {
        let mut inner = self.lock();
        Self::entry(&mut inner, key).is_some_and(|e| e.phase == Phase::InRing && e.is_live())
    }

    /// Future side: takes the outcome if it is in, else registers the waker.
    /// An operation shutdown gave up on never completes (`leak_in_ring`).
    pub(crate) fn poll(&self, key: OpKey, cx: &mut Context<'_>) -> Poll<Outcome> {
        let mut inner = self.lock();
        let Some(entry) = Self::entry(&mut inner, key) else {
            debug_assert!(false, "polled an op that is not in the table");
            return Poll::Ready(Outcome::Shutdown);
        };
        let old = match &mut entry.life {
            Lifecycle::Completed(outcome) => {
                let outcome = *outcome;
                inner.remove(key.slot);
                self.set_pending(&inner);
                return Poll::Ready(outcome);
            }
            Lifecycle::Waiting(waker) if waker.will_wake(cx.waker()) => return Poll::Pending,
            life => std::mem::replace(life, Lifecycle::Waiting(cx.waker().clone())),
        };
        // The waker replaced is foreign code: dropped outside the lock.
        drop(inner);
        drop(old);
        Poll::Pending
    }

    /// Future side, on drop before the outcome was taken: moves `resources`
    /// into the entry until the final CQE, or hands them back with the
    /// outcome when it is already in (the caller reclaims them at once).
    pub(crate) fn orphan<R: Orphan>(&self, key: OpKey, resources: R) -> Orphaned<R> {
        let mut inner = self.lock();
        let leaked = inner.leaked;
        let Some(entry) = Self::entry(&mut inner, key) else {
            return Orphaned::Gone(resources);
        };
        if let Lifecycle::Completed(outcome) = entry.life {
            inner.remove(key.slot);
            self.set_pending(&inner);
            return Orphaned::Completed(resources, outcome);
        }
        if leaked {
            // Shutdown gave up on this operation: the kernel may still use
            // the memory after the ring is gone, so it is never freed.
            drop(inner);
            std::mem::forget(resources);
            return Orphaned::Kept;
        }
        let old = std::mem::replace(&mut entry.life, Lifecycle::Orphaned(Box::new(resources)));
        drop(inner);
        drop(old);
        Orphaned::Kept
    }

    /// Multishot future side: takes the next completion, else registers the
    /// waker. The entry is removed with the final completion.
    pub(crate) fn poll_shot(&self, key: OpKey, cx: &mut Context<'_>) -> Poll<Outcome> {
        let mut inner = self.lock();
        let Some(entry) = Self::entry(&mut inner, key) else {
            debug_assert!(false, "polled a multishot op that is not in the table");
            return Poll::Ready(Outcome::Shutdown);
        };
        let shots = entry.shots.as_mut().expect("a multishot entry");
        if let Some(outcome) = shots.queue.pop_front() {
            if shots.ended && shots.queue.is_empty() {
                inner.remove(key.slot);
                self.set_pending(&inner);
            }
            return Poll::Ready(outcome);
        }
        let old = match &mut entry.life {
            Lifecycle::Waiting(waker) if waker.will_wake(cx.waker()) => return Poll::Pending,
            life => std::mem::replace(life, Lifecycle::Waiting(cx.waker().clone())),
        };
        drop(inner);
        drop(old);
        Poll::Pending
    }

    /// Multishot future side, on drop before the final completion was read:
    /// unread completions go to `sink` at once, later ones as they come.
    /// Returns `sink` back when the operation has ended (the caller drops
    /// it); otherwise keeps it and returns `None`: the caller then asks the
    /// owner to cancel the operation.
    pub(crate) fn orphan_multi(
        &self,
        key: OpKey,
        mut sink: Box<dyn Discard>,
    ) -> Option<Box<dyn Discard>> {
        let mut wake = Vec::new();
        let mut inner = self.lock();
        let leaked = inner.leaked;
        let Some(entry) = Self::entry(&mut inner, key) else {
            return Some(sink);
        };
        let shots = entry.shots.as_mut().expect("a multishot entry");
        for outcome in shots.queue.drain(..) {
            if let Outcome::Kernel { result, flags } = outcome {
                sink.discard(result, flags, &mut wake);
            }
        }
        let result = if shots.ended {
            inner.remove(key.slot);
            self.set_pending(&inner);
            Some(sink)
        } else if leaked {
            std::mem::forget(sink);
            None
        } else {
            let old = std::mem::replace(&mut entry.life, Lifecycle::OrphanedMulti(sink));
            drop(inner);
            drop(old);
            None
        };
        wake_all(wake);
        result
    }

    /// Reaper side: records final completions, collecting the follow-up.
    pub(crate) fn complete_batch(
        &self,
        cqes: impl IntoIterator<Item = (OpKey, Outcome)>,
        out: &mut Reaped,
    ) {
        let mut inner = self.lock();
        for (key, outcome) in cqes {
            if Self::complete_one(&mut inner, key, outcome, out) {
                out.completed += 1;
            }
        }
        self.set_pending(&inner);
    }

    /// Returns true for an operation's final completion.
    fn complete_one(inner: &mut Inner, key: OpKey, outcome: Outcome, out: &mut Reaped) -> bool {
        let Some(entry) = Self::entry(inner, key) else {
            // A stale or forged completion (the slot was freed): nothing in
            // the table belongs to it.
            return false;
        };
        if entry.shots.is_some() {
            return Self::complete_shot(inner, key, outcome, out);
        }
        if let Outcome::Kernel { flags, .. } = outcome {
            if io_uring::cqueue::more(flags) {
                // A single-shot entry never ends on a completion with
                // `F_MORE` (a caller-built SQE that broke `submit_unsafe`'s
                // contract): keep its memory until the last one.
                return false;
            }
        }
        let life = std::mem::replace(&mut entry.life, Lifecycle::Submitted);
        let (next, follow_up) = life.complete(outcome);
        match next {
            Some(life) => entry.life = life,
            None => {
                inner.remove(key.slot);
            }
        }
        match follow_up {
            OnComplete::Wake(waker) => out.wakers.push(waker),
            OnComplete::Stored => {}
            OnComplete::Release(keep) => out.released.push((keep, outcome)),
        }
        true
    }

    fn complete_shot(inner: &mut Inner, key: OpKey, outcome: Outcome, out: &mut Reaped) -> bool {
        let entry = Self::entry(inner, key).expect("checked by the caller");
        let last = is_last_shot(outcome);
        if let Lifecycle::OrphanedMulti(sink) = &mut entry.life {
            if let Outcome::Kernel { result, flags } = outcome {
                sink.discard(result, flags, &mut out.wakers);
            }
            if last {
                let entry = inner.remove(key.slot);
                if let Lifecycle::OrphanedMulti(sink) = entry.life {
                    out.released.push((Box::new(sink), outcome));
                }
            }
            return last;
        }
        let shots = entry.shots.as_mut().expect("checked by the caller");
        debug_assert!(!shots.ended, "a completion after the final one");
        let outcome = match outcome {
            Outcome::Kernel { result, .. }
                if last && shots.paused && result == -libc::ECANCELED =>
            {
                Outcome::Paused
            }
            other => other,
        };
        shots.queue.push_back(outcome);
        shots.ended |= last;
        if !last && !shots.paused && shots.queue.len() >= shots.limit {
            // Nobody reads: stop the kernel from producing more (module
            // docs of `lifecycle.rs`); the reader re-arms on demand.
            shots.paused = true;
            out.cancels.push(key);
        }
        if let Lifecycle::Waiting(waker) = std::mem::replace(&mut entry.life, Lifecycle::Submitted)
        {
            out.wakers.push(waker);
        }
        last
    }

    /// Shutdown: refuses new operations, fails the queued ones, and returns
    /// the keys of the operations in the ring (to be cancelled and reaped).
    pub(crate) fn close(&self, out: &mut Reaped) -> Vec<OpKey> {
        let mut inner = self.lock();
        inner.closed = true;
        let mut queued = Vec::new();
        let mut in_ring = Vec::new();
        for (slot, entry) in inner.slots.iter() {
            let key = OpKey {
                slot: slot as u32,
                gen: entry.gen,
            };
            match entry.phase {
                _ if !entry.is_live() => {}
                Phase::Queued => queued.push(key),
                Phase::InRing => in_ring.push(key),
            }
        }
        for key in queued {
            // Never reached the kernel: nothing of it is lent any more.
            super::audit::reaped(super::UserData::new(super::Tag::Op, key.to_payload()).raw());
            Self::complete_one(&mut inner, key, Outcome::Shutdown, out);
        }
        self.set_pending(&inner);
        in_ring
    }

    /// True once shutdown closed the table.
    pub(crate) fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Operations the kernel may still be using memory for.
    pub(crate) fn in_ring(&self) -> usize {
        self.lock()
            .slots
            .iter()
            .filter(|(_, e)| e.phase == Phase::InRing && e.is_live())
            .count()
    }

    /// Last resort at shutdown, when the kernel would not finish some
    /// operations in time: their resources are leaked, never freed while
    /// the kernel may still use them. So are those of futures orphaned
    /// later; a future still waiting on such an operation never completes
    /// (its result cannot be had, and returning its buffer would be
    /// unsound).
    /// Before their resources are leaked, abandoned operations are told
    /// (`Orphan::forsake`): a receive fails its stream's carry instead of
    /// leaving the next receive waiting for it.
    pub(crate) fn leak_in_ring(&self) {
        let mut wake = Vec::new();
        let mut inner = self.lock();
        inner.leaked = true;
        for (_, entry) in inner.slots.iter_mut() {
            match std::mem::replace(&mut entry.life, Lifecycle::Submitted) {
                Lifecycle::Orphaned(mut keep) => {
                    keep.forsake(&mut wake);
                    std::mem::forget(keep)
                }
                Lifecycle::OrphanedMulti(mut sink) => {
                    sink.forsake(&mut wake);
                    std::mem::forget(sink)
                }
                life => entry.life = life,
            }
        }
        drop(inner);
        wake_all(wake);
    }
}

#[cfg(test)]
#[path = "ops_table_tests.rs"]
mod tests;
