//! gRPC deadlines: a gRPC request's `grpc-timeout` bounds its handler.
//!
//! 1. **Which requests.** [`begin`] looks for `grpc-timeout` first: one
//!    header lookup, which fails for every non-gRPC request, so REST
//!    routes served beside gRPC ones pay nothing more. Then the
//!    content-type must be `application/grpc` (bare, `+codec` or
//!    `;params`; not gRPC-Web). A malformed value is ignored, as tonic's
//!    server ignores it.
//! 2. **Until the response head.** The handler's future races a
//!    [`Sleep`] armed on the connection's shard, counted from when the
//!    request was handed to the service. When the sleep wins, the handler's
//!    future is dropped on the spot (whatever it awaits is cancelled) and
//!    the answer is trailers-only: HTTP 200, `content-type:
//!    application/grpc`, `grpc-status: 4` (DEADLINE_EXCEEDED),
//!    `grpc-message: Timeout expired` — what gRPC's C core answers.
//!    tonic's own server answers the same head with `grpc-status: 1`
//!    (CANCELLED); the spec's code for a passed deadline is 4.
//! 3. **After the head.** The same sleep races the response body (a
//!    server stream, a slow last message). When it wins, the body is
//!    dropped between two frames and the response ends with the same
//!    status as trailers (`END_STREAM`), rather than a stream reset: the
//!    client reads DEADLINE_EXCEEDED, not a transport error. tonic's
//!    server does not bound the body at all; C core ends it so.
//! 4. A body that ends before the deadline (its own trailers out) ends the
//!    race; the sleep is dropped with the body.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use http::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use http::{Request, Response};
use http_body::{Body, Frame, SizeHint};
use spargio::time::Sleep;

use crate::grpc_timeout;

/// The deadline of `req`, armed now, when it is a gRPC request carrying
/// a well-formed `grpc-timeout` (module docs, step 1).
pub(crate) fn begin<B>(req: &Request<B>) -> Option<Sleep> {
    let timeout = grpc_timeout::from_headers(req.headers())?;
    // The connection's shard polls the response future and body (hyper's
    // HTTP/2 streams run as tasks pinned there), so the timer is armed in
    // its wheel.
    grpc_timeout::is_grpc(req.headers()).then(|| spargio::time::sleep(timeout))
}

/// `grpc-status: 4` and `grpc-message: Timeout expired`: the trailers of
/// a call whose deadline passed, or the head of a trailers-only answer.
fn deadline_exceeded(map: &mut HeaderMap) {
    map.insert("grpc-status", HeaderValue::from_static("4"));
    map.insert("grpc-message", HeaderValue::from_static("Timeout expired"));
}

/// The trailers-only answer to a call whose handler had not answered by
/// its deadline (module docs, step 2).
fn trailers_only<B>() -> Response<DeadlineBody<B>> {
    let mut response = Response::new(DeadlineBody {
        inner: None,
        deadline: None,
    });
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    deadline_exceeded(headers);
    response
}

pin_project_lite::pin_project! {
    /// The service's response future, raced against the request's
    /// deadline when it has one.
    pub(crate) struct DeadlineFuture<F> {
        // `None` once it has answered or was dropped at the deadline.
        #[pin]
        inner: Option<F>,
        deadline: Option<Sleep>,
    }
}

impl<F> DeadlineFuture<F> {
    pub(crate) fn new(inner: F, deadline: Option<Sleep>) -> DeadlineFuture<F> {
        DeadlineFuture {
            inner: Some(inner),
            deadline,
        }
    }
}

impl<F, B, E> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<DeadlineBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            // Polled after it completed: nothing more to give.
            return Poll::Pending;
        };
        if let Poll::Ready(res) = inner.poll(cx) {
            this.inner.set(None);
            let deadline = this.deadline.take();
            return Poll::Ready(res.map(|response| {
                response.map(|body| DeadlineBody {
                    inner: Some(body),
                    deadline,
                })
            }));
        }
        let Some(deadline) = this.deadline.as_mut() else {
            return Poll::Pending;
        };
        ready!(Pin::new(deadline).poll(cx));
        // Drop the handler now, not when hyper drops this future.
        this.inner.set(None);
        *this.deadline = None;
        Poll::Ready(Ok(trailers_only()))
    }
}

pin_project_lite::pin_project! {
    /// The handler's response body, raced against what is left of the
    /// deadline (module docs, step 3); the empty body of a trailers-only
    /// answer.
    pub(crate) struct DeadlineBody<B> {
        // `None`: a trailers-only answer, or cut at the deadline (its
        // trailers are out then, and were the last frame).
        #[pin]
        inner: Option<B>,
        deadline: Option<Sleep>,
    }
}

impl<B: Body> Body for DeadlineBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            return Poll::Ready(None);
        };
        if let Poll::Ready(frame) = inner.poll_frame(cx) {
            return Poll::Ready(frame);
        }
        let Some(deadline) = this.deadline.as_mut() else {
            return Poll::Pending;
        };
        ready!(Pin::new(deadline).poll(cx));
        this.inner.set(None);
        *this.deadline = None;
        let mut trailers = HeaderMap::new();
        deadline_exceeded(&mut trailers);
        Poll::Ready(Some(Ok(Frame::trailers(trailers))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.as_ref().is_none_or(Body::is_end_stream)
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.inner, &self.deadline) {
            (Some(inner), None) => inner.size_hint(),
            // A body the deadline may cut has no length to promise.
            (Some(_), Some(_)) => SizeHint::new(),
            (None, _) => SizeHint::with_exact(0),
        }
    }
}
