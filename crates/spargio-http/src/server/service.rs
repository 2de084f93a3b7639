//! Service adaptors: the peer address in each request's extensions, and
//! hyper services served as tower services.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use hyper::body::Incoming;

use super::deadline::{self, DeadlineBody, DeadlineFuture};
use super::idle::{self, ConnState, TrackedFuture};
use super::BoxError;

/// What [`serve`](crate::serve) serves: a cloneable tower service of
/// `Request<Incoming>` answering `Response<B>`, its future `Send`.
/// Implemented for every such service (an `axum::Router`, tonic services,
/// tower stacks, [`hyper_service`]).
pub trait HttpService<B>:
    tower_service::Service<
        Request<Incoming>,
        Response = Response<B>,
        Future: Send + 'static,
        Error: Into<BoxError>,
    > + Clone
    + Send
    + 'static
{
}

impl<S, B> HttpService<B> for S
where
    S: tower_service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
{
}

/// A response body hyper can send from any shard: `Send`, with `Send`
/// chunks and errors hyper can box. Implemented for every such body.
pub trait HttpBody: http_body::Body<Data: Send, Error: Into<BoxError>> + Send + 'static {}

impl<B> HttpBody for B
where
    B: http_body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
}

/// The peer address of the connection a request came in on, in the
/// request's extensions when the server was built
/// [`with_connect_info`](crate::Serve::with_connect_info).
///
/// With the `axum` feature (default) the server also inserts
/// `axum::extract::ConnectInfo<SocketAddr>`, which axum handlers extract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerAddr(pub SocketAddr);

/// The user's service as one connection sees it: inserts the peer
/// address into each request (when `peer` is set), runs the handler's
/// future with [`spargio::roam`] (see [`Roaming`]), bounds gRPC requests
/// by their `grpc-timeout` (`deadline.rs`) and counts requests in flight
/// for the idle timeout (when `state` is set; `idle.rs`).
#[derive(Clone, Debug)]
pub(crate) struct ConnService<S> {
    pub(crate) inner: S,
    pub(crate) peer: Option<super::listener::Peer>,
    pub(crate) state: Option<Arc<ConnState>>,
}

impl<S, B, RB> tower_service::Service<Request<B>> for ConnService<S>
where
    S: tower_service::Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    RB: Send + 'static,
{
    type Response = Response<idle::TrackedBody<DeadlineBody<RB>>>;
    type Error = BoxError;
    type Future = TrackedFuture<DeadlineFuture<Roaming<S::Future>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        match self.peer {
            Some(super::listener::Peer::Tcp(peer)) => {
                req.extensions_mut().insert(PeerAddr(peer));
                #[cfg(feature = "axum")]
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(peer));
            }
            Some(super::listener::Peer::Unix(cred)) => {
                req.extensions_mut().insert(cred);
                #[cfg(feature = "axum")]
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(cred));
            }
            None => {}
        }
        let deadline = deadline::begin(&req);
        TrackedFuture {
            in_flight: idle::begin(&self.state),
            inner: DeadlineFuture::new(roaming(self.inner.call(req)), deadline),
        }
    }
}

/// A handler's future run with [`spargio::roam`]: inside the connection's
/// task (pinned to its session shard, where its socket's operations run)
/// until it is woken from another shard, then in a stealable task that
/// runs where its wakes come from.
///
/// A handler that answers at once, or whose wakes come from the
/// connection's own shard, costs one box and no task. One that waits for
/// work other shards do (a database pool whose connections live on every
/// shard, a channel fed elsewhere) stops paying a cross-shard wake for
/// each step of that work. Measured on the TechEmpower `/db` row with
/// sqlx (`bench/README.md`).
pub(crate) struct Roaming<F: Future<Output: BoxErr>> {
    inner: spargio::Roam<ErrInto<F>>,
}

fn roaming<F>(fut: F) -> Roaming<F>
where
    F: Future<Output: BoxErr> + Send + 'static,
{
    Roaming {
        inner: spargio::roam(ErrInto { fut }),
    }
}

impl<F, R> Future for Roaming<F>
where
    F: Future<Output: BoxErr<Out = Result<R, BoxError>>> + Send + 'static,
    R: Send + 'static,
{
    type Output = Result<R, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // A cancelled handler (the runtime shut down while it was queued)
        // ends its request with an error, as a dropped connection would.
        Pin::new(&mut self.inner)
            .poll(cx)
            .map(|out| out.map_err(BoxError::from).and_then(|res| res))
    }
}

/// A service's `Result` with its error boxed, so a handler's output can
/// cross to the task the handler moves to whatever its error type.
pub(crate) trait BoxErr {
    type Out: Send + 'static;
    fn box_err(self) -> Self::Out;
}

impl<R: Send + 'static, E: Into<BoxError>> BoxErr for Result<R, E> {
    type Out = Result<R, BoxError>;

    fn box_err(self) -> Self::Out {
        self.map_err(Into::into)
    }
}

pin_project_lite::pin_project! {
    /// `fut` with its output's error boxed ([`BoxErr`]).
    pub(crate) struct ErrInto<F> {
        #[pin]
        fut: F,
    }
}

impl<F: Future<Output: BoxErr>> Future for ErrInto<F> {
    type Output = <F::Output as BoxErr>::Out;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.project().fut.poll(cx).map(BoxErr::box_err)
    }
}

/// A hyper service (`hyper::service::service_fn`, or any
/// `hyper::service::Service`) as a tower service, for [`serve`](crate::serve).
///
/// ```no_run
/// # spargio::block_on(spargio::run(|handle| async move {
/// use std::convert::Infallible;
/// use http_body_util::Full;
/// use hyper::body::{Bytes, Incoming};
/// use hyper::{Request, Response};
///
/// async fn hello(_: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
///     Ok(Response::new(Full::new(Bytes::from("hello\n"))))
/// }
/// let listener = spargio::net::TcpListener::bind(&handle, "127.0.0.1:8080").await?;
/// let svc = spargio_http::hyper_service(hyper::service::service_fn(hello));
/// spargio_http::serve(listener, svc).await
/// # })).unwrap().unwrap();
/// ```
pub fn hyper_service<S>(service: S) -> HyperService<S> {
    HyperService(service)
}

/// See [`hyper_service`].
#[derive(Clone, Debug)]
pub struct HyperService<S>(S);

impl<S, R> tower_service::Service<R> for HyperService<S>
where
    S: hyper::service::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: R) -> Self::Future {
        self.0.call(req)
    }
}
