//! `ShardCtx`: the current shard, seen from a task running on it.

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
///     ShardCtx::current().expect("on a shard").next_event().await
/// })?;
/// // Shard 0 sends it.
/// handle.spawn_pinned(0, async {
///     let ctx = ShardCtx::current().unwrap();
///     ctx.send_raw(1, 7, 42).await.unwrap();
/// })?;
/// let event = spargio::block_on(receiver)?;
/// assert_eq!(event, Event::RingMsg { from: 0, tag: 7, val: 42 });
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ShardCtx {
    shared: Arc<Shared>,
    id: ShardId,
}

impl std::fmt::Debug for ShardCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardCtx").field("shard", &self.id).finish()
    }
}

impl ShardCtx {
    /// The shard the calling code runs on, or `None` off the runtime.
    pub fn current() -> Option<ShardCtx> {
        context::with_worker(|w| {
            w.map(|w| ShardCtx {
                shared: w.shared.clone(),
                id: w.id,
            })
        })
    }

    /// A handle to the runtime this shard belongs to.
    pub fn handle(&self) -> crate::RuntimeHandle {
        crate::RuntimeHandle {
            shared: self.shared.clone(),
        }
    }

    /// This shard's index.
    pub fn shard_id(&self) -> ShardId {
        self.id
    }

    /// Number of shards in the runtime.
    pub fn shard_count(&self) -> usize {
        self.shared.shard_count()
    }

    /// A handle for sending to `target` (usable from any thread).
    pub fn remote(&self, target: ShardId) -> RemoteShard {
        RemoteShard::new(self.shared.clone(), target)
    }

    /// Runs `fut` on this shard. The future may be `!Send` (hold `Rc`,
    /// `RefCell`); it never leaves this shard's thread.
    ///
    /// # Panics
    ///
    /// When called off this shard's thread.
    pub fn spawn_local<F>(&self, fut: F) -> Result<JoinHandle<F::Output>, RuntimeError>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        assert_eq!(
            context::current_shard(&self.shared),
            Some(self.id),
            "ShardCtx::spawn_local called off shard {}",
            self.id
        );
        // SAFETY: the task is pinned to this shard and is created on this
        // shard's thread (checked above), so it is only ever polled and
        // dropped here; the handle is as `Send` as the output is
        // (`JoinHandle<T>: Send` needs `T: Send`).
        let (runnable, handle) = unsafe {
            spawn::build_unchecked(&self.shared, TaskKind::Pinned(self.id), self.id, fut)?
        };
        Counters::bump_shared(&self.shared.shards[self.id].counters.spawn_local);
        crate::scheduler::submit_pinned(&self.shared, self.id, runnable);
        Ok(handle)
    }

    /// Sends `(tag, val)` to `target`; await the ticket to make sure a
    /// parked target has been rung.
    pub fn send_raw(&self, target: ShardId, tag: u16, val: u32) -> SendTicket {
        SendTicket::new(
            &self.shared,
            send::send_all(&self.shared, target, &[(tag, val)]),
        )
    }

    /// Sends a typed message.
    pub fn send<M: RingMsg>(&self, target: ShardId, msg: M) -> SendTicket {
        let (tag, val) = msg.encode();
        self.send_raw(target, tag, val)
    }

    /// Sends without a ticket. A parked target is rung at once (the
    /// doorbell is submitted before this returns, unless the shard is in
    /// the middle of reaping completions: then moments later).
    pub fn send_raw_nowait(&self, target: ShardId, tag: u16, val: u32) -> Result<(), SendError> {
        send::send_all(&self.shared, target, &[(tag, val)])
    }

    /// Typed [`ShardCtx::send_raw_nowait`].
    pub fn send_nowait<M: RingMsg>(&self, target: ShardId, msg: M) -> Result<(), SendError> {
        let (tag, val) = msg.encode();
        self.send_raw_nowait(target, tag, val)
    }

    /// Sends all messages or none (`Backpressure` when they do not all
    /// fit), with at most one doorbell.
    pub fn send_many_raw_nowait(
        &self,
        target: ShardId,
        msgs: &[(u16, u32)],
    ) -> Result<(), SendError> {
        send::send_all(&self.shared, target, msgs)
    }

    /// Typed [`ShardCtx::send_many_raw_nowait`].
    pub fn send_many_nowait<M: RingMsg>(
        &self,
        target: ShardId,
        msgs: &[M],
    ) -> Result<(), SendError> {
        send::send_many_typed(&self.shared, target, msgs)
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
    ///         ShardCtx::current().unwrap().next_event().await
    ///     })
    ///     .unwrap();
    /// h.spawn_pinned(0, async {
    ///     ShardCtx::current().unwrap().send_raw_direct_nowait(1, 9, 99).unwrap();
    /// })
    /// .unwrap();
    /// assert_eq!(spargio::block_on(rx).unwrap(), Event::RingMsg { from: 0, tag: 9, val: 99 });
    /// ```
    pub fn send_raw_direct_nowait(
        &self,
        target: ShardId,
        tag: u16,
        val: u32,
    ) -> Result<(), SendError> {
        send::send_direct(&self.shared, target, &[(tag, val)])
    }

    /// [`ShardCtx::send_raw_direct_nowait`] for several messages: all are
    /// posted or none (`Backpressure`), one `MSG_RING` each.
    pub fn send_many_raw_direct_nowait(
        &self,
        target: ShardId,
        msgs: &[(u16, u32)],
    ) -> Result<(), SendError> {
        send::send_direct(&self.shared, target, msgs)
    }

    /// A barrier: resolves once every doorbell this shard owes for earlier
    /// sends has been submitted to the kernel.
    pub fn flush(&self) -> SendTicket {
        SendTicket::new(&self.shared, Ok(()))
    }

    /// The next message for this shard.
    ///
    /// Panics if polled off this shard's thread.
    ///
    /// Messages from one sender arrive in the order sent; senders are
    /// served round-robin. Several tasks may wait at once; each message
    /// goes to one of them.
    pub fn next_event(&self) -> NextEvent<'_> {
        NextEvent { ctx: self }
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
    pub fn next_hot_event(&self) -> NextHotEvent<'_> {
        NextHotEvent { ctx: self }
    }

    /// Waits until the coalesced counter of `tag` (a tag configured with
    /// `RuntimeBuilder::coalesced_hot_msg_tag(s)`) is nonzero, and takes
    /// it: the sum of the values received since it was last taken.
    ///
    /// Panics if polled off this shard's thread.
    pub fn next_hot_count(&self, tag: u16) -> NextHotCount<'_> {
        NextHotCount { ctx: self, tag }
    }

    /// Takes the coalesced counter of `tag` if it is nonzero.
    pub fn try_take_hot_count(&self, tag: u16) -> Option<u64> {
        self.with_own_worker(|w| w.try_take_hot_count(tag))
    }

    fn with_own_worker<R>(&self, f: impl FnOnce(&Worker) -> R) -> R {
        context::with_worker(|w| {
            let w = w
                .filter(|w| w.id == self.id && Arc::ptr_eq(&w.shared, &self.shared))
                .unwrap_or_else(|| panic!("ShardCtx of shard {} used off its shard", self.id));
            f(w)
        })
    }
}

/// Future returned by [`ShardCtx::next_event`].
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct NextEvent<'a> {
    ctx: &'a ShardCtx,
}

impl Future for NextEvent<'_> {
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
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct NextHotEvent<'a> {
    ctx: &'a ShardCtx,
}

impl Future for NextHotEvent<'_> {
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
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct NextHotCount<'a> {
    ctx: &'a ShardCtx,
    tag: u16,
}

impl Future for NextHotCount<'_> {
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
