//! gRPC clients over spargio: a tonic channel (feature `grpc`).
//!
//! tonic's generated clients and [`tonic::client::Grpc`] take any service
//! of `http::Request<tonic::body::Body>`; [`Channel`] is that service over
//! a [`Client`]: the client's pool, connector (TCP, or TLS with ALPN `h2`)
//! and timeouts, on the shard the call runs on. What it adds is what
//! tonic's own channel (its `transport`) adds over a bare HTTP/2 client:
//!
//! * **Error mapping.** A connection that could not be made (resolution,
//!   TCP connect, TLS handshake, connect timeout) reaches tonic as
//!   [`tonic::ConnectError`], so the call fails with `UNAVAILABLE` (the
//!   code gRPC clients retry), and a request timeout as
//!   [`tonic::TimeoutExpired`] (`CANCELLED`, as tonic's own channel
//!   reports it). Every other failure keeps its error as the status's
//!   source.
//! * **Deadlines.** A request's `grpc-timeout` header
//!   ([`tonic::Request::set_timeout`] sets it, and tells the server) and
//!   the channel's own [`Channel::timeout`] (which the server is not
//!   told) bound the call; the sooner applies. When it passes, the call
//!   fails with `CANCELLED` "Timeout expired", exactly as tonic's channel
//!   fails it, and the HTTP/2 stream is reset (`RST_STREAM`, `CANCEL`):
//!   the response future or body is dropped, and hyper's HTTP/2 client
//!   resets a stream whose every handle is gone, so the server stops
//!   work on it. Unlike tonic's channel, which bounds a call only until
//!   its response head, the deadline also covers the response body (a
//!   server stream, a slow last message), as gRPC's deadlines do. A
//!   deadline that passes at the poll an answer arrives wins: a call past
//!   its deadline is `CANCELLED`, whatever a server enforcing the same
//!   deadline answered. The timer is armed on the client's runtime (no
//!   Tokio timer: spargio tasks have no Tokio runtime).

mod deadline;

use std::fmt;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use spargio::RuntimeHandle;

pub use deadline::{ChannelBody, ChannelFuture};

use crate::client::{Client, Error};

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
    timeout: Option<Duration>,
}

impl fmt::Debug for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Channel")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
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
        Channel {
            client,
            timeout: None,
        }
    }

    /// Bounds every call on this channel, response body included: past
    /// `timeout` it fails with `CANCELLED` "Timeout expired" and its
    /// stream is reset (module docs). Like tonic's `Endpoint::timeout`,
    /// it sends no `grpc-timeout`, so the server does not know it; to tell
    /// the server too, set the request's own deadline with
    /// [`tonic::Request::set_timeout`]. When both are set, the sooner
    /// applies. Default: none.
    ///
    /// ```no_run
    /// # fn f(handle: spargio::RuntimeHandle) {
    /// use std::time::Duration;
    /// let channel = spargio_http::grpc::Channel::h2c(&handle).timeout(Duration::from_secs(5));
    /// # }
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Channel {
        self.timeout = Some(timeout);
        self
    }
}

impl tower_service::Service<Request<tonic::body::Body>> for Channel {
    type Response = Response<ChannelBody>;
    type Error = BoxError;
    type Future = ChannelFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<tonic::body::Body>) -> ChannelFuture {
        let limit = match (
            crate::grpc_timeout::from_headers(request.headers()),
            self.timeout,
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // Armed before the request leaves: the deadline counts from the
        // call, connecting included.
        let deadline = limit.map(|limit| self.client.runtime_handle().sleep(limit));
        ChannelFuture::new(self.client.request(request), deadline)
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
