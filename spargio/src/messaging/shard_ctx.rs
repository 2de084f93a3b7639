//! `ShardCtx`: the current shard, seen from a task running on it.

use std::borrow::Borrow;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use super::{send, Event, RemoteShard, RingMsg, SendTicket};
use crate::error::{RuntimeError, SendError};
use crate::scheduler::context;
use crate::scheduler::{Shared, Worker};
use crate::shard_id::ShardId;
use crate::stats::Counters;
use crate::task::meta::TaskKind;
use crate::task::spawn;
use crate::task::JoinHandle;

/// A handle to the shard the current task runs on.
///
/// It may be held across awaits in a pinned task (pinned tasks never move).
/// Sends work from anywhere. The methods that act on the shard itself,
/// [`ShardCtx::spawn_local`] and [`ShardCtx::next_event`], must be called on
/// that shard's thread and panic elsewhere: that is what keeps `!Send`
/// local tasks on their thread.
///
/// ```
/// use spargio::{Event, ShardCtx};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let rt = spargio::Runtime::builder().shards(2).build()?;
/// let handle = rt.handle();
/// // Shard 1 waits for one message and returns it.
/// let receiver = handle.spawn_pinned(1, async {
///     let Event::RingMsg { from, tag, val } =
///         ShardCtx::current().expect("on a shard").next_event().await;
///     (from, tag, val)
/// })?;
/// // Shard 0 sends it: accepted at once, then the ticket is awaited.
/// handle.spawn_pinned(0, async {
///     let ctx = ShardCtx::current().unwrap();
///     ctx.send_raw(1, 7, 42).unwrap().await.unwrap();
/// })?;
/// assert_eq!(spargio::block_on(receiver)?, (0, 7, 42));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ShardCtx {
    inner: Arc<ShardRef>,
}

/// What a [`ShardCtx`] points at: one per shard, owned by its worker.
/// Contexts are cloned per `next_event` and per `current()`; cloning this
/// per-shard `Arc` keeps those reference counts on the shard's own cache
/// line, where cloning the runtime-wide `Arc<Shared>` made every shard
/// bump one shared counter (measured: a cross-shard round trip spent a
/// fifth of its time on that line).
#[derive(Debug)]
pub(crate) struct ShardRef {
    shared: Arc<Shared>,
    id: ShardId,
}

impl ShardRef {
    pub(crate) fn new(shared: Arc<Shared>, id: ShardId) -> Arc<ShardRef> {
        Arc::new(ShardRef { shared, id })
    }
}

impl std::fmt::Debug for ShardCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardCtx")
            .field("shard", &self.inner.id)
            .finish()
    }
}

impl ShardCtx {
    /// The shard the calling code runs on, or `None` off the runtime.
    pub fn current() -> Option<ShardCtx> {
        context::with_worker(|w| {
            w.map(|w| ShardCtx {
                inner: w.ctx.clone(),
            })
        })
    }

    /// A handle to the runtime this shard belongs to.
    pub fn handle(&self) -> crate::RuntimeHandle {
        crate::RuntimeHandle {
            shared: self.inner.shared.clone(),
        }
    }

    /// This shard's index.
    pub fn shard_id(&self) -> ShardId {
        self.inner.id
    }

    /// Number of shards in the runtime.
    pub fn shard_count(&self) -> usize {
        self.inner.shared.shard_count()
    }

    /// A handle for sending to `target` (usable from any thread); `None`
    /// when the runtime has no such shard.
    /// ([`RuntimeHandle::remote`](crate::RuntimeHandle::remote) returns the
    /// handle itself, whose sends then fail with `InvalidShard`.)
    pub fn remote(&self, target: ShardId) -> Option<RemoteShard> {
        (target < self.shard_count()).then(|| RemoteShard::new(self.inner.shared.clone(), target))
    }

    /// Runs `fut` on this shard. The future may be `!Send` (hold `Rc`,
    /// `RefCell`); it never leaves this shard's thread.
    ///
    /// # Panics
    ///
    /// When called off this shard's thread.
    #[track_caller]
    pub fn spawn_local<F>(&self, fut: F) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        assert_eq!(
            context::current_shard(&self.inner.shared),
            Some(self.inner.id),
            "ShardCtx::spawn_local called off shard {}",
            self.inner.id
        );
        if spawn::boxes::<F>() {
            return self.spawn_local_inner(Box::pin(fut));
        }
        self.spawn_local_inner(fut)
    }

    /// [`ShardCtx::spawn_local`] after its checks, with `fut` as it goes
    /// into the task.
    #[track_caller]
    fn spawn_local_inner<F>(&self, fut: F) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        // SAFETY: the task is pinned to this shard and is created on this
        // shard's thread (checked above), so it is only ever polled and
        // dropped here; the handle is as `Send` as the output is
        // (`JoinHandle<T>: Send` needs `T: Send`).
        let (runnable, handle) = unsafe {
            spawn::build_unchecked(
                &self.inner.shared,
                TaskKind::Pinned(self.inner.id),
                self.inner.id,
                true,
                fut,
            )?
        };
        Counters::bump_shared(&self.inner.shared.shards[self.inner.id].counters.spawn_local);
        crate::scheduler::submit_pinned(&self.inner.shared, self.inner.id, runnable);
        Ok(handle)
    }

    /// Sends `(tag, val)` to `target`. A refused send fails here, before
    /// anything is awaited (`InvalidShard`, `Closed`, `Backpressure`); an
    /// accepted one is queued already, and awaiting its ticket makes sure a
    /// parked target has been rung:
    /// `ctx.send_raw(1, tag, val)?.await?`.
    pub fn send_raw(&self, target: ShardId, tag: u16, val: u32) -> Result<SendTicket, SendError> {
        send::send_all(&self.inner.shared, target, &[(tag, val)])?;
        Ok(SendTicket::new(&self.inner.shared))
    }

    /// Sends a typed message (see [`ShardCtx::send_raw`]).
    pub fn send<M: RingMsg>(&self, target: ShardId, msg: M) -> Result<SendTicket, SendError> {
        let (tag, val) = msg.encode();
        self.send_raw(target, tag, val)
    }

    /// Sends without a ticket. A parked target is rung at once (the
    /// doorbell is submitted before this returns, unless the shard is in
    /// the middle of reaping completions: then moments later).
    pub fn send_raw_nowait(&self, target: ShardId, tag: u16, val: u32) -> Result<(), SendError> {
        send::send_all(&self.inner.shared, target, &[(tag, val)])
    }

    /// Typed [`ShardCtx::send_raw_nowait`].
    pub fn send_nowait<M: RingMsg>(&self, target: ShardId, msg: M) -> Result<(), SendError> {
        let (tag, val) = msg.encode();
        self.send_raw_nowait(target, tag, val)
    }

    /// Sends all messages or none (`Backpressure` when they do not all
    /// fit), with at most one doorbell. Takes any `IntoIterator` of
    /// `(tag, val)`, by value or by reference: an array, a slice, a lazy
    /// iterator. Up to 64 messages are gathered on the stack; a longer
    /// batch is gathered on the heap first (it is refused whole or queued
    /// whole).
    ///
    /// ```
    /// # let rt = spargio::Runtime::builder().shards(2).build().unwrap();
    /// # spargio::block_on(rt.handle().spawn_pinned(0, async {
    /// let ctx = spargio::ShardCtx::current().unwrap();
    /// ctx.send_many_raw_nowait(1, [(13, 1), (13, 2)]).unwrap();
    /// ctx.send_many_raw_nowait(1, &[(13, 3)]).unwrap();
    /// ctx.send_many_raw_nowait(1, (4..8).map(|v| (13, v))).unwrap();
    /// # }).unwrap()).unwrap();
    /// ```
    pub fn send_many_raw_nowait<I>(&self, target: ShardId, msgs: I) -> Result<(), SendError>
    where
        I: IntoIterator,
        I::Item: Borrow<(u16, u32)>,
    {
        send::with_batch(msgs, |batch| {
            send::send_all(&self.inner.shared, target, batch)
        })
    }

    /// Typed [`ShardCtx::send_many_raw_nowait`], over any `IntoIterator`
    /// of messages (by value; `slice.iter().copied()` for a slice).
    pub fn send_many_nowait<M, I>(&self, target: ShardId, msgs: I) -> Result<(), SendError>
    where
        M: RingMsg,
        I: IntoIterator<Item = M>,
    {
        self.send_many_raw_nowait(target, msgs.into_iter().map(|msg| msg.encode()))
    }

    /// Sends `(tag, val)` in its own `MSG_RING`: the value rides in the
    /// completion the kernel posts into `target`'s ring, with no mailbox
    /// and no separate doorbell (the CQE is the wake). For rare, tiny
    /// control messages (a stop, a reconfigure) that should not queue
    /// behind a busy mailbox; bulk traffic is cheaper through
    /// [`ShardCtx::send_raw_nowait`], which batches.
    ///
    /// Arrives as [`Event::RingMsg`] like any other message, ahead of the
    /// target's queued mailbox messages (so not ordered with them). Bounded
    /// like a mailbox: `Backpressure` when `msg_ring_queue_capacity` direct
    /// messages to `target` are still unread. A post the kernel refuses is
    /// re-sent through the mailbox, never dropped. To this shard itself, to
    /// a shard above 255, or without `MSG_RING`, it takes the mailbox path.
    ///
    /// ```
    /// use spargio::{Event, Runtime, ShardCtx};
    ///
    /// let rt = Runtime::builder().shards(2).build().unwrap();
    /// let h = rt.handle();
    /// let rx = h
    ///     .spawn_pinned(1, async {
    ///         let Event::RingMsg { from, tag, val } =
    ///             ShardCtx::current().unwrap().next_event().await;
    ///         (from, tag, val)
    ///     })
    ///     .unwrap();
    /// h.spawn_pinned(0, async {
    ///     ShardCtx::current().unwrap().send_raw_direct_nowait(1, 9, 99).unwrap();
    /// })
    /// .unwrap();
    /// assert_eq!(spargio::block_on(rx).unwrap(), (0, 9, 99));
    /// ```
    pub fn send_raw_direct_nowait(
        &self,
        target: ShardId,
        tag: u16,
        val: u32,
    ) -> Result<(), SendError> {
        send::send_direct(&self.inner.shared, target, &[(tag, val)])
    }

    /// [`ShardCtx::send_raw_direct_nowait`] for several messages, from
    /// any `IntoIterator` of `(tag, val)` (as
    /// [`ShardCtx::send_many_raw_nowait`]): all are posted or none
    /// (`Backpressure`), one `MSG_RING` each.
    pub fn send_many_raw_direct_nowait<I>(&self, target: ShardId, msgs: I) -> Result<(), SendError>
    where
        I: IntoIterator,
        I::Item: Borrow<(u16, u32)>,
    {
        send::with_batch(msgs, |batch| {
            send::send_direct(&self.inner.shared, target, batch)
        })
    }

    /// A barrier: the ticket resolves once every doorbell this shard owes
    /// for earlier sends has been submitted to the kernel. Never refused:
    /// `ctx.flush().expect("flush").await`.
    pub fn flush(&self) -> Result<SendTicket, SendError> {
        Ok(SendTicket::new(&self.inner.shared))
    }

    /// The next message for this shard.
    ///
    /// Panics if polled off this shard's thread.
    ///
    /// Messages from one sender arrive in the order sent; senders are
    /// served round-robin. Several tasks may wait at once; each message
    /// goes to one of them.
    ///
    /// The future does not borrow the `ShardCtx` (it holds its own
    /// handle), so it may come from a temporary:
    ///
    /// ```
    /// use spargio::{Event, ShardCtx};
    ///
    /// # let rt = spargio::Runtime::builder().shards(1).build().unwrap();
    /// # let got = spargio::block_on(rt.handle().spawn_pinned(0, async {
    /// # ShardCtx::current().unwrap().send_raw_nowait(0, 1, 2).unwrap();
    /// let next = ShardCtx::current().unwrap().next_event();
    /// let Event::RingMsg { from, tag, val } = next.await;
    /// # (from, tag, val)
    /// # }).unwrap()).unwrap();
    /// # assert_eq!(got, (0, 1, 2));
    /// ```
    pub fn next_event(&self) -> NextEvent {
        NextEvent { ctx: self.clone() }
    }

    /// The next message if one is already queued.
    pub fn try_next_event(&self) -> Option<Event> {
        self.with_own_worker(|w| w.try_next_event())
    }

    /// The next message on this shard's hot lane: one whose tag was
    /// configured with `RuntimeBuilder::hot_msg_tag(s)` (see there). Without
    /// hot tags configured it never resolves.
    ///
    /// Panics if polled off this shard's thread.
    pub fn next_hot_event(&self) -> NextHotEvent {
        NextHotEvent { ctx: self.clone() }
    }

    /// Waits until the coalesced counter of `tag` (a tag configured with
    /// `RuntimeBuilder::coalesced_hot_msg_tag(s)`) is nonzero, and takes
    /// it: the sum of the values received since it was last taken.
    ///
    /// Panics if polled off this shard's thread.
    pub fn next_hot_count(&self, tag: u16) -> NextHotCount {
        NextHotCount {
            ctx: self.clone(),
            tag,
        }
    }

    /// Takes the coalesced counter of `tag` if it is nonzero.
    pub fn try_take_hot_count(&self, tag: u16) -> Option<u64> {
        self.with_own_worker(|w| w.try_take_hot_count(tag))
    }

    fn with_own_worker<R>(&self, f: impl FnOnce(&Worker) -> R) -> R {
        context::with_worker(|w| {
            let w = w
                .filter(|w| w.id == self.inner.id && Arc::ptr_eq(&w.shared, &self.inner.shared))
                .unwrap_or_else(|| {
                    panic!("ShardCtx of shard {} used off its shard", self.inner.id)
                });
            f(w)
        })
    }
}

/// Future returned by [`ShardCtx::next_event`].
///
/// It holds its own handle to the shard, not a borrow of the `ShardCtx`
/// it came from; it must still be polled on that shard's thread.
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct NextEvent {
    ctx: ShardCtx,
}

impl Future for NextEvent {
    type Output = Event;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Event> {
        self.ctx.with_own_worker(|w| match w.try_next_event() {
            Some(event) => Poll::Ready(event),
            None => {
                w.register_event_waiter(cx.waker());
                Poll::Pending
            }
        })
    }
}

/// Future returned by [`ShardCtx::next_hot_event`].
///
/// It holds its own handle to the shard, not a borrow of the `ShardCtx`
/// it came from; it must still be polled on that shard's thread.
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct NextHotEvent {
    ctx: ShardCtx,
}

impl Future for NextHotEvent {
    type Output = Event;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Event> {
        self.ctx.with_own_worker(|w| match w.try_next_hot_event() {
            Some(event) => Poll::Ready(event),
            None => {
                w.register_hot_waiter(cx.waker());
                Poll::Pending
            }
        })
    }
}

/// Future returned by [`ShardCtx::next_hot_count`].
///
/// It holds its own handle to the shard, not a borrow of the `ShardCtx`
/// it came from; it must still be polled on that shard's thread.
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct NextHotCount {
    ctx: ShardCtx,
    tag: u16,
}

impl Future for NextHotCount {
    type Output = u64;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u64> {
        let tag = self.tag;
        self.ctx
            .with_own_worker(|w| match w.try_take_hot_count(tag) {
                Some(n) => Poll::Ready(n),
                None => {
                    w.register_count_waiter(tag, cx.waker());
                    Poll::Pending
                }
            })
    }
}
