//! What [`serve`](crate::serve) accepts, and how each connection gets its
//! service: the service itself (cloned per connection), or one of axum's
//! make-service forms, as `axum::serve` accepts them.
//!
//! * `Router` (any tower service of `Request<Incoming>`): cloned.
//! * `Router::into_make_service()`: the router inside, cloned.
//! * `Router::into_make_service_with_connect_info::<C>()`: axum's make
//!   service called for each connection with an [`IncomingStream`], so
//!   each request carries `ConnectInfo<C>`: `C = SocketAddr` is the peer's
//!   address; a type of the user's reads what it wants from the stream
//!   through its `Connected<IncomingStream>` impl.
//!
//! One generic `serve` for all three without overlapping impls: the
//! conversion ([`IntoConnMaker`]) carries a marker type that differs per
//! form, which the compiler infers from the argument.

use std::io;
use std::net::SocketAddr;

use http::Request;
use hyper::body::Incoming;
use spargio::net::TcpStream;

/// A value [`serve`](crate::serve) can serve: a tower service, or (with
/// the `axum` feature) `into_make_service()` and
/// `into_make_service_with_connect_info::<C>()` of an axum `Router`.
/// `Marker` tells the forms apart; it is inferred.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not something `spargio_http::serve` can serve",
    label = "not a service of `Request<Incoming>` or an axum make-service",
    note = "pass an axum `Router` (or any tower service of `http::Request<hyper::body::Incoming>` \
            answering `http::Response<B>`), `router.into_make_service()`, or \
            `router.into_make_service_with_connect_info::<SocketAddr>()`; a hyper service goes \
            through `spargio_http::hyper_service`"
)]
pub trait IntoConnMaker<Marker> {
    /// What makes each connection's service.
    type Maker;

    /// The maker.
    fn into_maker(self) -> Self::Maker;
}

/// Makes the service of each connection accepted as a `St`. Implemented
/// for every cloneable tower service of `Request<Incoming>` and for this
/// module's makers; not meant to be implemented elsewhere.
pub trait MakeConn<St>: Send + 'static {
    /// The service one connection runs.
    type Service;

    /// The service for the connection on `stream`; an error skips the
    /// connection (its peer is gone already).
    fn make(&self, stream: &St) -> io::Result<Self::Service>;
}

/// Marker of a service served as it is (its response body `B`).
#[derive(Debug)]
pub struct AsService<B>(std::marker::PhantomData<fn() -> B>);

impl<S, B> IntoConnMaker<AsService<B>> for S
where
    // The `Response` equality keeps axum's make services (which answer
    // any target with a service) out of this impl.
    S: tower_service::Service<Request<Incoming>, Response = http::Response<B>>
        + Clone
        + Send
        + 'static,
{
    type Maker = S;

    fn into_maker(self) -> S {
        self
    }
}

impl<S, St> MakeConn<St> for S
where
    S: tower_service::Service<Request<Incoming>> + Clone + Send + 'static,
{
    type Service = S;

    fn make(&self, _: &St) -> io::Result<S> {
        Ok(self.clone())
    }
}

/// The connection an axum make-service is called with (axum's own
/// `IncomingStream`, for spargio's streams): implement
/// `axum::extract::connect_info::Connected<IncomingStream<'_>>` for a type
/// to extract it as `ConnectInfo<YourType>` under
/// `into_make_service_with_connect_info::<YourType>()`.
#[cfg(feature = "axum")]
#[derive(Debug)]
pub struct IncomingStream<'a> {
    stream: &'a TcpStream,
    remote: SocketAddr,
}

#[cfg(feature = "axum")]
impl IncomingStream<'_> {
    /// The accepted stream.
    pub fn io(&self) -> &TcpStream {
        self.stream
    }

    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.remote
    }

    /// The local address the connection was accepted on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }
}

#[cfg(feature = "axum")]
impl axum::extract::connect_info::Connected<IncomingStream<'_>> for SocketAddr {
    fn connect_info(target: IncomingStream<'_>) -> SocketAddr {
        target.remote
    }
}

#[cfg(feature = "axum")]
mod axum_forms {
    use std::convert::Infallible;
    use std::io;
    use std::task::{Context, Poll, Waker};

    use axum::extract::connect_info::{Connected, IntoMakeServiceWithConnectInfo};
    use axum::routing::IntoMakeService;
    use spargio::net::TcpStream;
    use tower_service::Service;

    use super::{IncomingStream, IntoConnMaker, MakeConn};

    /// Marker of `into_make_service()`.
    #[derive(Debug)]
    pub enum AsMakeService {}

    /// Marker of `into_make_service_with_connect_info()`.
    #[derive(Debug)]
    pub enum AsMakeServiceWithConnectInfo {}

    /// `into_make_service()`'s service, made once.
    #[derive(Clone, Debug)]
    pub struct Made<S>(S);

    /// `into_make_service_with_connect_info()`, called per connection.
    #[derive(Clone, Debug)]
    pub struct MadePerConnection<M>(M);

    /// Calls `make` with `target`: axum's make services answer at once
    /// (a ready future), so one poll with a no-op waker gets the service.
    fn make_now<M, T>(mut make: M, target: T) -> M::Response
    where
        M: Service<T, Error = Infallible>,
    {
        let mut cx = Context::from_waker(Waker::noop());
        let ready = make.poll_ready(&mut cx);
        debug_assert!(ready.is_ready(), "axum's make services are always ready");
        let mut fut = std::pin::pin!(make.call(target));
        match fut.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(service)) => service,
            Poll::Ready(Err(never)) => match never {},
            Poll::Pending => unreachable!("axum's make-service futures are ready at once"),
        }
    }

    use std::future::Future;

    impl<S> IntoConnMaker<AsMakeService> for IntoMakeService<S>
    where
        S: Clone + Send + 'static,
    {
        type Maker = Made<S>;

        fn into_maker(self) -> Made<S> {
            Made(make_now(self, ()))
        }
    }

    impl<S: Clone + Send + 'static, St> MakeConn<St> for Made<S> {
        type Service = S;

        fn make(&self, _: &St) -> io::Result<S> {
            Ok(self.0.clone())
        }
    }

    impl<S, C> IntoConnMaker<AsMakeServiceWithConnectInfo> for IntoMakeServiceWithConnectInfo<S, C>
    where
        S: Clone + Send + 'static,
        C: for<'a> Connected<IncomingStream<'a>> + Send + 'static,
    {
        type Maker = MadePerConnection<Self>;

        fn into_maker(self) -> MadePerConnection<Self> {
            MadePerConnection(self)
        }
    }

    impl<S, C> MakeConn<TcpStream> for MadePerConnection<IntoMakeServiceWithConnectInfo<S, C>>
    where
        S: Clone + Send + 'static,
        C: for<'a> Connected<IncomingStream<'a>> + Send + 'static,
    {
        type Service = axum::middleware::AddExtension<S, axum::extract::ConnectInfo<C>>;

        fn make(&self, stream: &TcpStream) -> io::Result<Self::Service> {
            let target = IncomingStream {
                stream,
                remote: stream.peer_addr()?,
            };
            Ok(make_now(self.0.clone(), target))
        }
    }
}

#[cfg(feature = "axum")]
pub use axum_forms::{AsMakeService, AsMakeServiceWithConnectInfo, Made, MadePerConnection};
