//! A [`Channel`](super::Channel) call's deadline: the response future,
//! then the response body, raced against one [`Sleep`].
//!
//! 1. The sleep is polled before the response: a deadline that has passed
//!    ends the call even when an answer is ready at the same poll (module
//!    docs of `grpc`).
//! 2. When the head arrives in time, the sleep moves into the body, which
//!    races the rest of the deadline frame by frame.
//! 3. When the sleep wins, the response future or body is dropped, which
//!    makes hyper's HTTP/2 client reset the stream (`RST_STREAM`,
//!    `CANCEL`), and the call fails with [`tonic::TimeoutExpired`], which
//!    tonic reads as `CANCELLED` "Timeout expired".
//! 4. A body that ends before the deadline drops the sleep with it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use spargio::time::Sleep;

use super::{for_tonic, BoxError};
use crate::client::ResponseFuture;

/// Whether `deadline` (if any) has passed; polling registers the waker.
fn passed(deadline: &mut Option<Sleep>, cx: &mut Context<'_>) -> bool {
    deadline
        .as_mut()
        .is_some_and(|sleep| Pin::new(sleep).poll(cx).is_ready())
}

fn timeout_expired() -> BoxError {
    Box::new(tonic::TimeoutExpired(()))
}

/// The future of a [`Channel`](super::Channel) call: its response head,
/// within the call's deadline (module docs of `grpc`).
#[must_use = "futures do nothing unless awaited"]
pub struct ChannelFuture {
    // `None` once it resolved.
    inner: Option<ResponseFuture>,
    deadline: Option<Sleep>,
}

impl ChannelFuture {
    pub(super) fn new(inner: ResponseFuture, deadline: Option<Sleep>) -> ChannelFuture {
        ChannelFuture {
            inner: Some(inner),
            deadline,
        }
    }
}

impl fmt::Debug for ChannelFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelFuture")
            .field("deadline", &self.deadline.as_ref().map(Sleep::deadline))
            .finish_non_exhaustive()
    }
}

impl Future for ChannelFuture {
    type Output = Result<Response<ChannelBody>, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        if passed(&mut this.deadline, cx) {
            // Dropping hyper's response future resets the stream.
            this.inner = None;
            this.deadline = None;
            return Poll::Ready(Err(timeout_expired()));
        }
        let Some(inner) = this.inner.as_mut() else {
            // Polled after it completed: nothing more to give.
            return Poll::Pending;
        };
        let res = match Pin::new(inner).poll(cx) {
            Poll::Ready(res) => res,
            Poll::Pending => return Poll::Pending,
        };
        this.inner = None;
        let deadline = this.deadline.take();
        Poll::Ready(res.map_err(for_tonic).map(|response| {
            response.map(|body| ChannelBody {
                inner: Some(body),
                deadline,
            })
        }))
    }
}

/// The response body of a [`Channel`](super::Channel) call: hyper's body,
/// within what is left of the call's deadline (module docs of `grpc`).
pub struct ChannelBody {
    // `None` once cut at the deadline.
    inner: Option<Incoming>,
    deadline: Option<Sleep>,
}

impl fmt::Debug for ChannelBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChannelBody")
            .field("deadline", &self.deadline.as_ref().map(Sleep::deadline))
            .finish_non_exhaustive()
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(None);
        };
        if passed(&mut this.deadline, cx) {
            // Dropping hyper's body resets the stream.
            this.inner = None;
            this.deadline = None;
            return Poll::Ready(Some(Err(timeout_expired())));
        }
        let frame = match Pin::new(inner).poll_frame(cx) {
            Poll::Ready(frame) => frame,
            Poll::Pending => return Poll::Pending,
        };
        if frame
            .as_ref()
            .is_none_or(|f| !matches!(f, Ok(f) if f.is_data()))
        {
            // The end, its trailers or an error: the call is over.
            this.deadline = None;
        }
        Poll::Ready(frame.map(|f| f.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Some(inner) => inner.size_hint(),
            None => SizeHint::with_exact(0),
        }
    }
}
