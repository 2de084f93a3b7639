//! The epoll backend: the same operations, run by the shard itself where
//! io_uring is refused.
//!
//! Nothing above the driver changes. An operation is still an SQE built by
//! its `op/` file and an op-table entry that owns its memory; this driver
//! runs the request the SQE describes instead of handing it to a ring, and
//! posts the completion the kernel would have posted (`exec.rs` has the
//! table of what each opcode becomes). Cancellation, orphaned resources,
//! multishot bounds and shutdown are the op table's, unchanged.
//!
//! 1. **Submission runs the syscall at once.** `push_op` tries the
//!    operation's non-blocking syscall on the spot. Most sends, and every
//!    receive whose data is already there, complete before the submitting
//!    task first polls the operation: the completion is recorded in the op
//!    table inside `push_op`, so that first poll is `Ready`.
//! 2. **`EAGAIN` waits for readiness.** The operation is kept in a slab
//!    and listed under its fd. An fd the runtime owns (a `SharedFd`) is
//!    registered once, edge-triggered for reads and writes, and stays so
//!    until it closes (`epochs.rs` tells the driver when the file behind a
//!    number changes); any other fd is armed one-shot for each wait
//!    (`poller.rs`). When the fd reports, every operation waiting on it is
//!    tried again in submission order. An operation waits only after its
//!    own syscall said `EAGAIN` (never on a guess: a short read does not
//!    mean the fd is drained, `exec.rs`), so an edge the shard took while
//!    nobody waited costs nothing but that one syscall. An operation
//!    whose fd will never report (`Step::Retry`) is tried again on a
//!    backoff timer instead. Files that cannot be polled, and path
//!    operations, go to the blocking pool (`offload.rs`).
//!
//!    The edge registration covers reads, writes, hang-ups and urgent
//!    data (`EPOLLPRI`). A wait for any other event (a `POLL_ADD` for
//!    `POLLRDBAND`, say) moves the fd to one-shot arming for as long as
//!    such a waiter is listed, and every arm carries the interests of
//!    every waiter: no wait ever replaces another's.
//! 3. **Timers** (`IORING_OP_TIMEOUT`) sit in an ordered set; the nearest
//!    deadline bounds `epoll_wait`, as the shard's own timer wheel does.
//! 4. **Wakes.** Other shards and outside threads ring the shard's eventfd
//!    (the runtime reports no `MSG_RING`, so every doorbell and direct
//!    message takes its eventfd path). The eventfd is in the epoll set; a
//!    parked shard is `epoll_wait`ing, with the handshake of `wake.rs`.
//! 5. **Cancel** (`ASYNC_CANCEL`) ends a waiting operation or timer with
//!    `ECANCELED` at once; an offloaded one runs to its end (`EALREADY`).
//! 6. **Faults** (`faults.rs`): with `SPARGIO_EPOLL_FAULTS=SEED` the
//!    driver cuts reads and writes short, answers `EAGAIN` without a
//!    syscall and reports readiness nobody asked for, at random from the
//!    seed; code above that loses data or a wakeup under these fails.
//!
//! Memory: the driver dereferences an SQE's addresses only while the
//! operation's entry is in the op table, i.e. before its final completion
//! is recorded, which is the io_uring contract `push_op` inherits.

mod bufs;
mod epochs;
mod exec;
mod faults;
mod offload;
#[cfg(feature = "tokio-compat")]
mod outside;
mod poller;
mod sqe;
mod timers;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue};
use slab::Slab;

use self::bufs::BufGroups;
use self::exec::{Progress, Step};
use self::offload::Offload;
pub(crate) use self::poller::Poller;
use self::poller::{Armed, EVENTFD_TOKEN};
use self::sqe::Sqe;
use super::ops_table::{OpKey, OpTable, Reaped};
use super::user_data::{Tag, UserData};
use super::{audit, Outcome};
use crate::scheduler::Shared;
use crate::shard_id::ShardId;

pub(crate) use epochs::{adopt, release};
pub(crate) use exec::is_supported;

const ERR_HUP: u32 = (libc::EPOLLERR | libc::EPOLLHUP) as u32;

/// An operation waiting for readiness or for its timer.
#[derive(Debug)]
struct Pending {
    sqe: Sqe,
    progress: Progress,
    state: Wait,
}

#[derive(Clone, Copy, Debug)]
enum Wait {
    /// For these `EPOLL*` events on `sqe.fd`.
    Fd(u32),
    Timer(Instant),
    /// To be tried again at this instant (`Step::Retry`).
    Retry(Instant),
}

/// What a retry without an event reports: every waiter tries again.
const RETRY_ALL: u32 = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLPRI) as u32;

/// The events the edge registration covers (`Poller::register_edge`).
const EDGE_KINDS: u32 = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLPRI) as u32;

/// The operations waiting on one fd, and its registration.
#[derive(Debug, Default)]
struct FdSlot {
    /// Registered edge-triggered while the fd's ownership counter is this
    /// (`epochs.rs`); otherwise the fd is armed one-shot per wait.
    edge: Option<u32>,
    /// Events the fd is armed for (0: disarmed). Only meaningful while
    /// `waiters` is not empty: an operation waiting on the fd keeps it
    /// open, and once none does the fd may be closed (on any shard) and
    /// its number reused, so an empty slot always counts as disarmed.
    armed: u32,
    /// The fd is (as far as we know) in the epoll interest list.
    registered: bool,
    waiters: Vec<usize>,
}

/// How an attempt loop ended.
enum Next {
    /// With its final completion posted.
    Ended,
    /// A multishot burst ended with more ready: try again on the next
    /// pass, after the shard has run the tasks that read what it posted.
    Again,
    Wait(u32),
    Offload,
    Timer,
    Retry,
}

/// One shard's epoll driver (module docs).
#[derive(Debug)]
pub(crate) struct EpollDriver {
    poller: Poller,
    eventfd: RawFd,
    pending: Slab<Pending>,
    /// For `ASYNC_CANCEL`: inserted and removed on every wait, so keyed
    /// with a multiply instead of SipHash (the keys are the runtime's own
    /// unique `user_data`, not attacker input).
    by_user_data: HashMap<u64, usize, BuildHasherDefault<UserDataHasher>>,
    /// Indexed by fd number (dense and small, as fds are).
    fds: Vec<FdSlot>,
    timers: BTreeSet<(Instant, usize)>,
    bufs: BufGroups,
    offload: Offload,
    /// Completions not yet handed to the op table: `(user_data, res, flags)`.
    posted: Vec<(u64, i32, u32)>,
    to_table: Vec<(OpKey, Outcome)>,
    /// Follow-up of completions recorded inside `push_op`.
    follow: Reaped,
    /// Scratch: events of one wait, offloaded completions, retried waiters.
    events: Vec<(u64, u32)>,
    offloaded: Vec<(u64, i32)>,
    retry: Vec<usize>,
    /// Operations waiting on fds (no `epoll_wait` in `poll` without one).
    fd_waiters: usize,
    /// Fds whose waiters are retried on the next pass (`Next::Again`).
    again: Vec<RawFd>,
    /// `user_data` of the operations on the blocking pool (a cancel of
    /// one answers `EALREADY`).
    offloaded_ops: HashSet<u64, BuildHasherDefault<UserDataHasher>>,
    /// The doorbell eventfd reported since `prepare_wait` began
    /// (`outside.rs`).
    rung: bool,
    faults: faults::Faults,
}

impl EpollDriver {
    /// A driver for `shard`, woken through `eventfd` (which must outlive
    /// it).
    /// The driver of shard `shard`, on its thread, around `poller` (made
    /// by `build` on the calling thread, so that its errors are `build`'s
    /// and its fd is open when `build` returns).
    pub(crate) fn new(
        poller: Poller,
        eventfd: RawFd,
        shared: Arc<Shared>,
        shard: ShardId,
    ) -> EpollDriver {
        epochs::activate();
        EpollDriver {
            poller,
            eventfd,
            pending: Slab::new(),
            by_user_data: HashMap::default(),
            fds: Vec::new(),
            timers: BTreeSet::new(),
            bufs: BufGroups::default(),
            offload: Offload::new(shared, shard),
            posted: Vec::new(),
            to_table: Vec::new(),
            follow: Reaped::default(),
            // Sized for a whole wait up front: the first park with events
            // may come in the middle of steady work (`tests/rt_alloc.rs`).
            events: Vec::with_capacity(poller::EVENTS_PER_WAIT),
            offloaded: Vec::new(),
            retry: Vec::new(),
            fd_waiters: 0,
            again: Vec::new(),
            offloaded_ops: HashSet::default(),
            rung: false,
            faults: faults::Faults::for_shard(shard),
        }
    }

    /// Runs (or starts waiting for) the operation `entry` describes, and
    /// records what completed in `ops` at once.
    ///
    /// # Safety
    ///
    /// Every address in `entry` stays valid until its final completion is
    /// recorded in the op table (the io_uring contract of `push_op`).
    pub(crate) unsafe fn push_op(&mut self, entry: squeue::Entry, ops: &OpTable) {
        self.start(Sqe::from_entry(entry));
        if !self.posted.is_empty() {
            self.record(ops, None);
        }
    }

    fn start(&mut self, sqe: Sqe) {
        match sqe.opcode {
            opcode::AsyncCancel::CODE => {
                let res = self.cancel(sqe.addr);
                self.posted.push((sqe.user_data, res, 0));
                return;
            }
            opcode::Close::CODE => {
                if let Some(slot) = usize::try_from(sqe.fd)
                    .ok()
                    .and_then(|fd| self.fds.get_mut(fd))
                {
                    // Closing drops the registration (SharedFd closes only
                    // when nothing waits on the fd).
                    slot.registered = false;
                    slot.armed = 0;
                    slot.edge = None;
                }
            }
            _ => {}
        }
        let mut progress = Progress::default();
        let next = drive(
            &sqe,
            &mut progress,
            &mut self.bufs,
            &mut self.posted,
            &mut self.faults,
        );
        match next {
            Next::Ended => {}
            Next::Offload => self.offload_op(sqe, progress),
            Next::Timer => self.start_timer(sqe),
            Next::Retry => {
                let idx = self.pending.insert(Pending {
                    sqe,
                    progress,
                    state: Wait::Fd(0),
                });
                self.by_user_data.insert(sqe.user_data, idx);
                self.retry_later(idx);
            }
            Next::Wait(interest) => {
                let idx = self.pending.insert(Pending {
                    sqe,
                    progress,
                    state: Wait::Fd(interest),
                });
                self.by_user_data.insert(sqe.user_data, idx);
                self.wait_on_fd(idx, interest);
            }
            Next::Again => {
                let idx = self.pending.insert(Pending {
                    sqe,
                    progress,
                    state: Wait::Fd(libc::EPOLLIN as u32),
                });
                self.by_user_data.insert(sqe.user_data, idx);
                self.retry_soon(idx);
            }
        }
    }

    /// Lists `idx` under its fd, which an attempt just found not ready
    /// for `interest`, and makes sure the fd will report: registered
    /// edge-triggered if the runtime owns it (once per file), else armed
    /// one-shot.
    fn wait_on_fd(&mut self, idx: usize, interest: u32) {
        let fd = self.pending[idx].sqe.fd;
        let Ok(n) = usize::try_from(fd) else {
            self.finish(idx, -libc::EBADF);
            return;
        };
        if self.fds.len() <= n {
            self.fds.resize_with(n + 1, FdSlot::default);
        }
        let slot = &mut self.fds[n];
        slot.waiters.push(idx);
        self.fd_waiters += 1;
        // Edge registration covers `EDGE_KINDS`; while any waiter wants
        // something else, the fd is armed one-shot for all of them
        // (module docs, 2).
        let pending = &self.pending;
        let special = slot.waiters.iter().any(|&w| match pending[w].state {
            Wait::Fd(i) => i & !EDGE_KINDS != 0,
            _ => false,
        });
        let owned = epochs::owned(fd).filter(|_| !special);
        let armed = match owned {
            // The attempt's `EAGAIN` is newer than any edge seen: the
            // registration reports the next one.
            Some(epoch) if slot.edge == Some(epoch) => return,
            Some(epoch) => match self.poller.register_edge(fd, slot.registered) {
                Ok(Armed::Yes) => {
                    slot.edge = Some(epoch);
                    slot.armed = 0;
                    Ok(Armed::Yes)
                }
                other => other,
            },
            None => {
                let mut want = slot.armed | interest;
                if slot.edge.take().is_some() {
                    // Leaving edge mode (the one-shot arm replaces the
                    // registration): arm for every waiter, not just this one.
                    for &w in &slot.waiters {
                        if let Wait::Fd(i) = self.pending[w].state {
                            want |= i;
                        }
                    }
                } else if slot.armed & interest == interest {
                    return;
                }
                let res = self.poller.arm(fd, want, slot.registered);
                if let Ok(Armed::Yes) = res {
                    slot.armed = want;
                }
                res
            }
        };
        match armed {
            Ok(Armed::Yes) => slot.registered = true,
            Ok(Armed::NotPollable) => {
                slot.waiters.pop();
                self.fd_waiters -= 1;
                let p = self.remove(idx);
                self.offload_op(p.sqe, p.progress);
            }
            Err(err) => {
                slot.waiters.pop();
                self.fd_waiters -= 1;
                self.finish(idx, -err.raw_os_error().unwrap_or(libc::EIO));
            }
        }
    }

    /// Lists `idx` under its fd to be tried again on the next pass (its fd
    /// may report no new edge for what is already there).
    fn retry_soon(&mut self, idx: usize) {
        let fd = self.pending[idx].sqe.fd;
        let n = fd as usize; // A multishot attempt succeeded on it: fd >= 0.
        if self.fds.len() <= n {
            self.fds.resize_with(n + 1, FdSlot::default);
        }
        self.fds[n].waiters.push(idx);
        self.fd_waiters += 1;
        if !self.again.contains(&fd) {
            self.again.push(fd);
        }
    }

    /// Retries the fds of `Next::Again` (and of made-up `EAGAIN`s) as if
    /// they had reported ready.
    fn run_again(&mut self) {
        for fd in self.faults.retry.drain(..) {
            if !self.again.contains(&fd) {
                self.again.push(fd);
            }
        }
        if self.again.is_empty() {
            return;
        }
        let mut again = std::mem::take(&mut self.again);
        for &fd in &again {
            self.fd_ready(fd as usize, RETRY_ALL);
        }
        again.clear();
        if self.again.is_empty() {
            // Keep the allocation.
            self.again = again;
        }
    }

    /// Runs `sqe` on the blocking pool, remembered for `cancel`.
    fn offload_op(&mut self, sqe: Sqe, progress: Progress) {
        self.offloaded_ops.insert(sqe.user_data);
        self.offload.spawn(sqe, progress);
    }

    fn remove(&mut self, idx: usize) -> Pending {
        let p = self.pending.remove(idx);
        self.by_user_data.remove(&p.sqe.user_data);
        if let Wait::Timer(at) | Wait::Retry(at) = p.state {
            self.timers.remove(&(at, idx));
        }
        p
    }

    /// Ends pending operation `idx` (not listed under an fd) with `res`.
    fn finish(&mut self, idx: usize, res: i32) {
        let p = self.remove(idx);
        self.posted.push((p.sqe.user_data, res, 0));
    }

    /// `ASYNC_CANCEL` of the operation with `user_data`; the cancel's own
    /// result.
    fn cancel(&mut self, user_data: u64) -> i32 {
        let Some(&idx) = self.by_user_data.get(&user_data) else {
            if self.offloaded_ops.contains(&user_data) {
                // On the blocking pool: it runs to its end.
                return -libc::EALREADY;
            }
            // Completed already.
            return -libc::ENOENT;
        };
        if let Wait::Fd(_) = self.pending[idx].state {
            let slot = &mut self.fds[self.pending[idx].sqe.fd as usize];
            if let Some(at) = slot.waiters.iter().position(|&w| w == idx) {
                slot.waiters.remove(at);
                self.fd_waiters -= 1;
            }
            if slot.waiters.is_empty() {
                // Nothing keeps the fd open any more: it may be closed and
                // its number reused by a file that is not armed at all
                // (`FdSlot::armed`).
                slot.armed = 0;
            }
        }
        let pending = &mut self.pending[idx];
        let res = pending.progress.cancelled(&pending.sqe);
        self.finish(idx, res);
        0
    }

    /// Retries the operations waiting on `fd`, which reported `events`.
    fn fd_ready(&mut self, fd: usize, events: u32) {
        let Some(slot) = self.fds.get_mut(fd) else {
            return;
        };
        let edge = slot.edge.is_some() && slot.edge == epochs::owned(fd as RawFd);
        slot.armed = 0;
        let mut retry = std::mem::take(&mut self.retry);
        std::mem::swap(&mut retry, &mut slot.waiters);
        self.fd_waiters -= retry.len();
        let mut rearm = 0;
        for &idx in &retry {
            let Wait::Fd(interest) = self.pending[idx].state else {
                continue;
            };
            if events & (interest | ERR_HUP) == 0 {
                self.fds[fd].waiters.push(idx);
                self.fd_waiters += 1;
                rearm |= interest;
                continue;
            }
            if let Some(interest) = self.attempt_again(idx) {
                self.fds[fd].waiters.push(idx);
                self.fd_waiters += 1;
                rearm |= interest;
            }
        }
        retry.clear();
        self.retry = retry;
        // Edge-triggered: still registered, the next edge reports.
        if rearm == 0 || edge {
            return;
        }
        let slot = &mut self.fds[fd];
        match self.poller.arm(fd as RawFd, rearm, slot.registered) {
            Ok(Armed::Yes) => {
                slot.armed = rearm;
                slot.registered = true;
            }
            // The fd was closed and its number reused by a file that
            // cannot be polled, or the kernel refused: end the waiters
            // with the error rather than leave them waiting for ever.
            res => {
                let errno = match res {
                    Ok(_) => libc::EBADF,
                    Err(err) => err.raw_os_error().unwrap_or(libc::EIO),
                };
                let waiters = std::mem::take(&mut slot.waiters);
                self.fd_waiters -= waiters.len();
                for idx in waiters {
                    self.finish(idx, -errno);
                }
            }
        }
    }

    /// Attempts pending operation `idx` again and settles what that came
    /// to, except a new wait: `Some(interest)` when it is not ready, with
    /// its state set and not yet listed under its fd (the caller lists
    /// it).
    fn attempt_again(&mut self, idx: usize) -> Option<u32> {
        let p = &mut self.pending[idx];
        let sqe = p.sqe;
        match drive(
            &sqe,
            &mut p.progress,
            &mut self.bufs,
            &mut self.posted,
            &mut self.faults,
        ) {
            Next::Ended => {
                self.remove(idx);
            }
            Next::Wait(interest) => {
                p.state = Wait::Fd(interest);
                return Some(interest);
            }
            Next::Offload => {
                let p = self.remove(idx);
                self.offload_op(p.sqe, p.progress);
            }
            Next::Retry => self.retry_later(idx),
            Next::Again => {
                p.state = Wait::Fd(libc::EPOLLIN as u32);
                self.retry_soon(idx);
            }
            // Only `TIMEOUT` asks for a timer, and it is never retried.
            Next::Timer => self.finish(idx, -libc::EINVAL),
        }
        None
    }

    /// Moves posted completions into the op table; follow-ups go to `out`
    /// (or, from `push_op`, are kept for the next reap).
    fn record(&mut self, ops: &OpTable, out: Option<&mut Reaped>) -> usize {
        let n = self.posted.len();
        for (user_data, result, flags) in self.posted.drain(..) {
            let ud = UserData::from_raw(user_data);
            if ud.tag() == Some(Tag::Op) {
                audit::reaped(user_data);
                self.to_table.push((
                    OpKey::from_payload(ud.payload()),
                    Outcome::Kernel { result, flags },
                ));
            }
        }
        if !self.to_table.is_empty() {
            let out = match out {
                Some(out) => out,
                None => &mut self.follow,
            };
            ops.complete_batch(self.to_table.drain(..), out);
        }
        n
    }

    /// Everything ready without waiting: offloaded completions, due
    /// timers and (when an operation waits on an fd) ready fds.
    pub(crate) fn poll(&mut self, ops: &OpTable, out: &mut Reaped) -> io::Result<usize> {
        self.run_again();
        if self.fd_waiters > 0 {
            self.wait_events(Some(Duration::ZERO))?;
        }
        Ok(self.collect(ops, out))
    }

    /// Blocks until an fd reports, a timer is due, the eventfd is rung or
    /// `timeout` passes; then like [`EpollDriver::poll`].
    pub(crate) fn park(
        &mut self,
        timeout: Option<Duration>,
        ops: &OpTable,
        out: &mut Reaped,
    ) -> io::Result<usize> {
        self.run_again();
        let timeout = if self.has_completions() {
            Some(Duration::ZERO)
        } else {
            let timer = self
                .timers
                .first()
                .map(|&(d, _)| d.saturating_duration_since(Instant::now()));
            crate::time::earliest(timeout, timer)
        };
        let n = self.wait_events(timeout)?;
        Ok(n + self.collect(ops, out))
    }

    fn wait_events(&mut self, timeout: Option<Duration>) -> io::Result<usize> {
        let mut events = std::mem::take(&mut self.events);
        let n = self
            .poller
            .wait(timeout, |token, ev| events.push((token, ev)));
        for &(token, ev) in &events {
            if token == EVENTFD_TOKEN {
                self.drain_eventfd();
                self.rung = true;
            } else {
                self.fd_ready(token as usize, ev);
            }
        }
        events.clear();
        self.events = events;
        if self.faults.one_in(16) {
            // A wakeup of every waiting fd, whether it reported or not.
            for (fd, slot) in self.fds.iter().enumerate() {
                if !slot.waiters.is_empty() {
                    self.faults.retry.push(fd as RawFd);
                }
            }
        }
        n
    }

    fn drain_eventfd(&mut self) {
        let mut buf = 0u64;
        // SAFETY: an 8-byte read into a live local; the eventfd reported
        // readable and only this shard reads it, so the read cannot block.
        unsafe { libc::read(self.eventfd, (&mut buf as *mut u64).cast(), 8) };
    }

    fn collect(&mut self, ops: &OpTable, out: &mut Reaped) -> usize {
        let mut offloaded = std::mem::take(&mut self.offloaded);
        self.offload.done.take(&mut offloaded);
        for (user_data, res) in offloaded.drain(..) {
            self.offloaded_ops.remove(&user_data);
            self.posted.push((user_data, res, 0));
        }
        self.offloaded = offloaded;
        self.fire_timers();
        let n = self.record(ops, Some(out)) + usize::from(!self.follow.is_empty());
        out.absorb(&mut self.follow);
        n
    }

    /// True when completions wait to be collected.
    pub(crate) fn has_completions(&self) -> bool {
        !self.posted.is_empty()
            || !self.again.is_empty()
            || !self.faults.retry.is_empty()
            || !self.follow.is_empty()
            || !self.offload.done.is_empty()
            || self
                .timers
                .first()
                .is_some_and(|&(d, _)| d <= Instant::now())
    }

    /// Registers a provided-buffer ring; returns its group id.
    ///
    /// # Safety
    ///
    /// `ring_addr` is page-aligned memory for `entries` descriptors that
    /// stays allocated until [`EpollDriver::unregister_buf_ring`] succeeds.
    pub(crate) unsafe fn register_buf_ring(
        &mut self,
        ring_addr: u64,
        entries: u16,
    ) -> io::Result<u16> {
        // SAFETY: forwarded from this function's contract.
        unsafe { self.bufs.register(ring_addr, entries) }
    }

    pub(crate) fn unregister_buf_ring(&mut self, bgid: u16) -> io::Result<()> {
        self.bufs.unregister(bgid)
    }
}

/// Attempts `sqe` until it ends or must wait; completions go to `posted`.
fn drive(
    sqe: &Sqe,
    progress: &mut Progress,
    bufs: &mut BufGroups,
    posted: &mut Vec<(u64, i32, u32)>,
    faults: &mut faults::Faults,
) -> Next {
    for _ in 0..exec::MULTISHOT_BURST {
        match faults.attempt(sqe, progress, bufs) {
            Step::Done(res, flags) => {
                posted.push((sqe.user_data, res, flags));
                return Next::Ended;
            }
            Step::More(res, flags) => posted.push((sqe.user_data, res, flags)),
            Step::Wait(interest) => return Next::Wait(interest),
            Step::Offload => return Next::Offload,
            Step::Timer => return Next::Timer,
            Step::Retry => return Next::Retry,
        }
    }
    debug_assert!(exec::is_multishot(sqe));
    Next::Again
}

/// Hashes a `user_data` (one `u64`) by a Fibonacci multiply.
#[derive(Debug, Default)]
struct UserDataHasher(u64);

impl Hasher for UserDataHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
