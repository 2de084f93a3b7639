//! gRPC clients over spargio: a tonic channel (feature `grpc`).
//!
//! tonic's generated clients and [`tonic::client::Grpc`] take any service
//! of `http::Request<tonic::body::Body>`; [`Channel`] is that service over
//! a [`Client`]: the client's pool, connector (TCP, or TLS with ALPN `h2`)
//! and timeouts, on the shard the call runs on. What it adds is tonic's
//! error mapping: a connection that could not be made (resolution, TCP
//! connect, TLS handshake, connect timeout) reaches tonic as
//! [`tonic::ConnectError`], so the call fails with `UNAVAILABLE` (the code
//! gRPC clients retry), and a request timeout as
//! [`tonic::TimeoutExpired`] (`CANCELLED`, as tonic's own channel reports
//! it). Every other failure keeps its error as the status's source.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use hyper::body::Incoming;
use spargio::RuntimeHandle;

use crate::client::{Client, Error, ResponseFuture};

/// A boxed error, as tonic takes them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A tonic channel over a [`Client`] (module docs). Clones share the
/// client's pool.
///
/// ```no_run
/// # async fn f(handle: spargio::RuntimeHandle) -> Result<(), tonic::Status> {
/// use spargio_http::grpc::Channel;
///
/// let channel = Channel::h2c(&handle);
/// let origin: http::Uri = "http://127.0.0.1:50051".parse().unwrap();
/// let mut grpc = tonic::client::Grpc::with_origin(channel, origin);
/// grpc.ready().await.map_err(|e| tonic::Status::from_error(e))?;
/// // grpc.unary(request, path, codec).await? — or a tonic-build client:
/// // GreeterClient::with_origin(channel, origin)
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Channel {
    client: Client<tonic::body::Body>,
}

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel").finish_non_exhaustive()
    }
}

impl Channel {
    /// A channel speaking HTTP/2 by prior knowledge over plain TCP (h2c):
    /// gRPC's `http://` origins.
    pub fn h2c(handle: &RuntimeHandle) -> Channel {
        let client = Client::builder(handle)
            .http2_prior_knowledge()
            .build::<tonic::body::Body>();
        Channel::new(client)
    }

    /// A channel over `client`: for `https://` origins, a client built with
    /// `.tls(connector)` (ALPN picks HTTP/2); its timeouts and pool
    /// settings apply.
    pub fn new(client: Client<tonic::body::Body>) -> Channel {
        Channel { client }
    }
}

impl tower_service::Service<Request<tonic::body::Body>> for Channel {
    type Response = Response<Incoming>;
    type Error = BoxError;
    type Future = ChannelFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<tonic::body::Body>) -> ChannelFuture {
        ChannelFuture(self.client.request(request))
    }
}

/// The future of a [`Channel`] call.
#[must_use = "futures do nothing unless awaited"]
pub struct ChannelFuture(ResponseFuture);

impl fmt::Debug for ChannelFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ChannelFuture")
    }
}

impl Future for ChannelFuture {
    type Output = Result<Response<Incoming>, BoxError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map_err(for_tonic)
    }
}

/// The client's error as tonic reads it (module docs).
fn for_tonic(e: Error) -> BoxError {
    if e.is_connect() || e.is_connect_timeout() {
        Box::new(tonic::ConnectError(Box::new(e)))
    } else if e.is_timeout() {
        Box::new(tonic::TimeoutExpired(()))
    } else {
        Box::new(e)
    }
}
