//! [`TimeoutLayer`]: a request that runs past its limit gets 408.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use spargio::time::Sleep;
use tower_layer::Layer;
use tower_service::Service;

/// Bounds each request's handler by a timeout on spargio's timer; past it
/// the handler's future is dropped and the answer is `status` (408
/// Request Timeout unless set) with an empty body.
///
/// The timer starts when the request reaches the layer and is armed on
/// the shard that calls the service (spargio-http's `serve` calls it on
/// the connection's shard), so the layer belongs in servers run by
/// `spargio_http::serve`.
///
/// ```
/// use std::time::Duration;
/// use axum::{routing::get, Router};
/// use spargio_http::layer::TimeoutLayer;
///
/// let app: Router = Router::new()
///     .route("/", get(|| async { "fast enough" }))
///     .layer(TimeoutLayer::new(Duration::from_secs(10)));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TimeoutLayer {
    timeout: Duration,
    status: StatusCode,
}

impl TimeoutLayer {
    /// Answers 408 Request Timeout past `timeout`.
    pub fn new(timeout: Duration) -> TimeoutLayer {
        TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, timeout)
    }

    /// Answers `status` past `timeout` (503 or 504 suit a proxy).
    pub fn with_status_code(status: StatusCode, timeout: Duration) -> TimeoutLayer {
        TimeoutLayer { timeout, status }
    }
}

impl<S> Layer<S> for TimeoutLayer {
    type Service = Timeout<S>;

    fn layer(&self, inner: S) -> Timeout<S> {
        Timeout {
            inner,
            timeout: self.timeout,
            status: self.status,
        }
    }
}

/// The service [`TimeoutLayer`] wraps around `S`.
#[derive(Clone, Copy, Debug)]
pub struct Timeout<S> {
    inner: S,
    timeout: Duration,
    status: StatusCode,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for Timeout<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: Default,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = TimeoutFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> TimeoutFuture<S::Future> {
        TimeoutFuture {
            inner: Some(self.inner.call(req)),
            sleep: spargio::time::sleep(self.timeout),
            status: self.status,
        }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`Timeout`].
    pub struct TimeoutFuture<F> {
        #[pin]
        inner: Option<F>,
        #[pin]
        sleep: Sleep,
        status: StatusCode,
    }
}

impl<F, B, E> Future for TimeoutFuture<F>
where
    F: Future<Output = Result<Response<B>, E>>,
    B: Default,
{
    type Output = Result<Response<B>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Some(inner) = this.inner.as_mut().as_pin_mut() else {
            panic!("TimeoutFuture polled after it completed");
        };
        if let Poll::Ready(out) = inner.poll(cx) {
            this.inner.set(None);
            return Poll::Ready(out);
        }
        if this.sleep.poll(cx).is_pending() {
            return Poll::Pending;
        }
        // Past the limit: the handler's future goes now, not with us.
        this.inner.set(None);
        let mut response = Response::new(B::default());
        *response.status_mut() = *this.status;
        Poll::Ready(Ok(response))
    }
}
