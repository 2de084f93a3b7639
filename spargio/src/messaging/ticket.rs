//! `SendTicket`: the awaitable result of a send or a flush.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::error::SendError;
use crate::scheduler::context;
use crate::scheduler::Shared;

/// Resolves once a send (or everything sent before a flush) has been
/// handed over: the message is in the target's queue and any doorbell it
/// needed has been submitted to the kernel.
///
/// Sends are queued when the ticket is created; awaiting it only makes sure
/// the doorbell left the sender's ring. Dropping a ticket does not cancel
/// the send.
#[derive(Debug)]
#[must_use = "a SendTicket reports whether the send succeeded"]
pub struct SendTicket {
    result: Option<Result<(), SendError>>,
    shared: Option<Arc<Shared>>,
}

impl SendTicket {
    pub(crate) fn new(shared: &Arc<Shared>, result: Result<(), SendError>) -> SendTicket {
        SendTicket {
            result: Some(result),
            shared: Some(shared.clone()),
        }
    }

    pub(crate) fn ready(result: Result<(), SendError>) -> SendTicket {
        SendTicket {
            result: Some(result),
            shared: None,
        }
    }
}

impl Future for SendTicket {
    type Output = Result<(), SendError>;

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        let result = self
            .result
            .take()
            .expect("SendTicket polled after completion");
        if let (Ok(()), Some(shared)) = (&result, self.shared.take()) {
            context::with_worker(|w| {
                if let Some(w) = w.filter(|w| Arc::ptr_eq(&w.shared, &shared)) {
                    w.flush_doorbells();
                }
            });
        }
        Poll::Ready(result)
    }
}
