//! Multishot accept: one `IORING_OP_ACCEPT` that keeps accepting.
//!
//! The operation is armed on the listener's accept ring at the first poll,
//! not before: a stream nobody polls accepts nothing, and connections wait
//! in the listen backlog. Each accepted fd becomes a stream whose session
//! shard the stream's policy picks at that moment. The kernel may end the
//! multishot operation (an error such as `EMFILE`, a full CQ); the error, if
//! any, is yielded and the next poll arms it again.
//!
//! Bounded: once the reader stops polling, at most
//! `MULTISHOT_QUEUE_LIMIT` (64) accepted connections queue unread before the
//! runtime cancels the operation; the next poll re-arms it. One caveat the
//! kernel imposes: a single wakeup of the multishot accept takes every
//! connection already complete in the backlog at that moment, so a burst
//! that arrived all at once can overshoot the bound by up to the listen
//! backlog (1024), never more. Dropping the stream
//! cancels the operation, and connections accepted but not yet yielded are
//! closed (the peer sees a reset or EOF), never leaked.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::task::{Context, Poll};

use super::StreamSessionPolicy;
use crate::op::accept::AcceptMulti;
use crate::op::{Lane, MultiOp, SharedFd};
use crate::shard_id::ShardId;
use crate::RuntimeHandle;

/// The listener-independent part of `Incoming` and `UnixIncoming`.
#[derive(Debug)]
pub(crate) struct IncomingCore {
    op: MultiOp<AcceptMulti>,
    ring: ShardId,
    policy: StreamSessionPolicy,
    pub(crate) handle: RuntimeHandle,
}

impl IncomingCore {
    pub(crate) fn new(
        handle: &RuntimeHandle,
        fd: &SharedFd,
        policy: StreamSessionPolicy,
    ) -> io::Result<IncomingCore> {
        let ring = StreamSessionPolicy::ContextPreferred.pick(handle)?;
        if let StreamSessionPolicy::Fixed(_) = policy {
            policy.pick(handle)?; // reject a bad shard up front
        }
        let op = MultiOp::unarmed(&handle.shared, AcceptMulti { fd: fd.clone() });
        Ok(IncomingCore {
            op,
            ring,
            policy,
            handle: handle.clone(),
        })
    }

    /// The next accepted connection and its session shard.
    pub(crate) fn poll_accept(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<(OwnedFd, ShardId)>> {
        loop {
            match self.op.poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => self.op.rearm(Lane::Shard(self.ring)),
                Poll::Ready(Some(done)) => {
                    let fd = match done.result {
                        Ok(fd) => fd as i32,
                        Err(err) => return Poll::Ready(Err(err)),
                    };
                    // SAFETY: a successful ACCEPT returns a new fd that
                    // nothing else owns.
                    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                    let session = self.policy.pick_for(&self.handle, fd.as_raw_fd());
                    return Poll::Ready(session.map(|s| (fd, s)));
                }
            }
        }
    }
}

/// Defines a multishot-accept stream type for a listener.
macro_rules! incoming_stream {
    ($(#[$doc:meta])* $name:ident, $stream:ty, $wrap:path) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            core: crate::net::incoming::IncomingCore,
        }

        impl $name {
            pub(crate) fn new(
                handle: &crate::RuntimeHandle,
                fd: &crate::op::SharedFd,
                policy: crate::net::StreamSessionPolicy,
            ) -> std::io::Result<$name> {
                Ok($name {
                    core: crate::net::incoming::IncomingCore::new(handle, fd, policy)?,
                })
            }

            /// The next accepted connection. An error (e.g. `EMFILE`) does
            /// not end the stream: the next call accepts again.
            pub async fn accept(&mut self) -> std::io::Result<$stream> {
                std::future::poll_fn(|cx| {
                    crate::net::incoming::IncomingCore::poll_accept(&mut self.core, cx)
                })
                .await
                .map(|(fd, session)| $wrap(&self.core.handle, fd, session))
            }
        }

        impl futures_core::Stream for $name {
            type Item = std::io::Result<$stream>;

            /// Never ends; errors are yielded as items.
            fn poll_next(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<Option<Self::Item>> {
                let this = self.get_mut();
                this.core.poll_accept(cx).map(|res| {
                    Some(res.map(|(fd, session)| $wrap(&this.core.handle, fd, session)))
                })
            }
        }
    };
}

pub(crate) use incoming_stream;
