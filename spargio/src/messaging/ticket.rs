//! `SendTicket`: the awaitable second stage of an accepted send or flush.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::error::SendError;
use crate::scheduler::context;
use crate::scheduler::Shared;

/// Resolves once an accepted send (or everything sent before a flush) has
/// been handed over: the message is in the target's queue and any doorbell
/// it needed has been submitted to the kernel.
///
/// A send is decided in two stages, as in the reference crate: refusal is
/// synchronous (`send_raw` returns `Err(SendError)` before anything is
/// awaited), and a ticket exists only for a message already queued.
/// Awaiting it then only makes sure the doorbell left the sender's ring, so
/// here it always yields `Ok(())`; the `Result` keeps the reference's
/// `ticket.await.unwrap()` compiling. Dropping a ticket does not cancel the
/// send.
///
/// ```
/// use spargio::{Event, Runtime, ShardCtx};
///
/// let rt = Runtime::builder().shards(2).build().unwrap();
/// let h = rt.handle();
/// let rx = h
///     .spawn_pinned(1, async { ShardCtx::current().unwrap().next_event().await })
///     .unwrap();
/// h.spawn_pinned(0, async {
///     let ctx = ShardCtx::current().unwrap();
///     let ticket = ctx.send_raw(1, 3, 30).expect("accepted");
///     ticket.await.expect("handed over");
/// })
/// .unwrap();
/// let Event::RingMsg { from, tag, val } = spargio::block_on(rx).unwrap();
/// assert_eq!((from, tag, val), (0, 3, 30));
/// ```
#[derive(Debug)]
#[must_use = "await the ticket to make sure the doorbell was submitted"]
pub struct SendTicket {
    /// The runtime whose owed doorbells to submit when awaited on one of
    /// its shards; `None` when nothing is owed (sent from outside).
    shared: Option<Arc<Shared>>,
    done: bool,
}

impl SendTicket {
    /// A ticket for a send or flush made on (or to) `shared`'s runtime.
    pub(crate) fn new(shared: &Arc<Shared>) -> SendTicket {
        SendTicket {
            shared: Some(shared.clone()),
            done: false,
        }
    }

    /// A ticket with nothing left to do.
    pub(crate) fn ready() -> SendTicket {
        SendTicket {
            shared: None,
            done: false,
        }
    }
}

impl Future for SendTicket {
    type Output = Result<(), SendError>;

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        assert!(!self.done, "SendTicket polled after completion");
        self.done = true;
        if let Some(shared) = self.shared.take() {
            context::with_worker(|w| {
                if let Some(w) = w.filter(|w| Arc::ptr_eq(&w.shared, &shared)) {
                    w.flush_doorbells();
                }
            });
        }
        Poll::Ready(Ok(()))
    }
}
