//! [`AltSvcLayer`]: responses advertise an HTTP/3 endpoint (`Alt-Svc`).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::header::{HeaderValue, ALT_SVC};
use http::{Request, Response};
use tower_layer::Layer;
use tower_service::Service;

/// Adds `Alt-Svc` to every response that has none, so browsers and
/// HTTP/3-capable clients move to HTTP/3 (RFC 7838, RFC 9114 3.1.1): put
/// it on the TCP server of an app also served by `serve_h3` (feature
/// `http3`).
///
/// ```
/// use axum::{routing::get, Router};
/// use spargio_http::layer::AltSvcLayer;
///
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     // HTTP/3 on UDP port 443 of the same host, for a day.
///     .layer(AltSvcLayer::h3(443));
/// ```
#[derive(Clone, Debug)]
pub struct AltSvcLayer {
    value: HeaderValue,
}

impl AltSvcLayer {
    /// `h3=":port"; ma=86400`: HTTP/3 on `port` of the same host, cached
    /// for a day.
    pub fn h3(port: u16) -> AltSvcLayer {
        let value = format!("h3=\":{port}\"; ma=86400");
        AltSvcLayer {
            value: HeaderValue::from_str(&value).expect("an ASCII header value"),
        }
    }

    /// A header value of your own (several alternatives, another host, a
    /// different max-age, `clear`).
    pub fn new(value: HeaderValue) -> AltSvcLayer {
        AltSvcLayer { value }
    }
}

impl<S> Layer<S> for AltSvcLayer {
    type Service = AltSvc<S>;

    fn layer(&self, inner: S) -> AltSvc<S> {
        AltSvc {
            inner,
            value: self.value.clone(),
        }
    }
}

/// The service [`AltSvcLayer`] makes.
#[derive(Clone, Debug)]
pub struct AltSvc<S> {
    inner: S,
    value: HeaderValue,
}

impl<S, B, RB> Service<Request<B>> for AltSvc<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
{
    type Response = Response<RB>;
    type Error = S::Error;
    type Future = AltSvcFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        AltSvcFuture {
            inner: self.inner.call(req),
            value: Some(self.value.clone()),
        }
    }
}

pin_project_lite::pin_project! {
    /// The future of an [`AltSvc`] service.
    #[derive(Debug)]
    pub struct AltSvcFuture<F> {
        #[pin]
        inner: F,
        value: Option<HeaderValue>,
    }
}

impl<F, RB, E> Future for AltSvcFuture<F>
where
    F: Future<Output = Result<Response<RB>, E>>,
{
    type Output = Result<Response<RB>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut resp = std::task::ready!(this.inner.poll(cx))?;
        if let Some(value) = this.value.take() {
            resp.headers_mut().entry(ALT_SVC).or_insert(value);
        }
        Poll::Ready(Ok(resp))
    }
}
