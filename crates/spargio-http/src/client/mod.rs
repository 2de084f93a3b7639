//! The client: hyper-util's pooled client over spargio connections.
//!
//! [`Client`] keeps idle connections per host (90 s by default) and
//! reuses them; over TLS it offers ALPN `h2` and `http/1.1`, and a
//! connection the server took to HTTP/2 carries every concurrent request
//! to that host. Plain `http://` is HTTP/1.1 unless built with
//! [`ClientBuilder::http2_prior_knowledge`]. It may be used from any shard
//! (and cloned freely: clones share the pool); its connection tasks are
//! spargio tasks. An HTTP/2 request dropped while its connect was in
//! progress fails none of the requests waiting for that connection: they
//! are sent again (`unsent.rs` in the source; hyper-util alone fails them,
//! hyperium/hyper#3199).
//!
//! Timeouts: [`ClientBuilder::connect_timeout`] bounds name resolution,
//! the TCP connect and the TLS handshake (default 10 s);
//! [`ClientBuilder::request_timeout`] bounds a request until its
//! response head arrives (default: none; the body is the caller's to
//! bound).

mod connector;
#[cfg(feature = "http3")]
mod h3;
mod unsent;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy;
use spargio::RuntimeHandle;
use spargio_tls::TlsConnector;

pub use connector::{Connection, Connector};
#[cfg(feature = "http3")]
pub use h3::{H3Client, H3ResponseBody};
use unsent::Unsent;

use crate::rt::{Executor, Timer};
use crate::BoxError;

/// A pooled HTTP/1.1 and HTTP/2 client (module docs).
///
/// ```no_run
/// # spargio::block_on(spargio::run(|handle| async move {
/// let client = spargio_http::Client::new(&handle);
/// let response = client.get("https://example.com/").await?;
/// assert!(response.status().is_success());
/// let body = spargio_http::client::body_bytes(response).await?;
/// # Ok::<_, spargio_http::client::Error>(())
/// # })).unwrap().unwrap();
/// ```
pub struct Client<B = Full<Bytes>> {
    inner: legacy::Client<Connector, Unsent<B>>,
    handle: RuntimeHandle,
    request_timeout: Option<Duration>,
    /// HTTP/2 only: requests may wait for another's connect, and are sent
    /// again when it is given up (`unsent.rs`).
    h2_only: bool,
}

impl<B> Clone for Client<B> {
    fn clone(&self) -> Self {
        Client {
            inner: self.inner.clone(),
            handle: self.handle.clone(),
            request_timeout: self.request_timeout,
            h2_only: self.h2_only,
        }
    }
}

impl<B> fmt::Debug for Client<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client with the default settings and Mozilla's root certificates
    /// (webpki-roots) for `https://`.
    pub fn new(handle: impl AsRef<RuntimeHandle>) -> Client {
        Client::builder(handle).build()
    }

    /// A client to configure.
    pub fn builder(handle: impl AsRef<RuntimeHandle>) -> ClientBuilder {
        ClientBuilder {
            handle: handle.as_ref().clone(),
            tls: None,
            connect_timeout: Some(Duration::from_secs(10)),
            request_timeout: None,
            pool_idle_timeout: Some(Duration::from_secs(90)),
            pool_max_idle_per_host: usize::MAX,
            http2_prior_knowledge: false,
            #[cfg(feature = "http3")]
            h3_config: None,
        }
    }
}

/// Configures a [`Client`].
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    handle: RuntimeHandle,
    tls: Option<TlsConnector>,
    connect_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    pool_idle_timeout: Option<Duration>,
    pool_max_idle_per_host: usize,
    http2_prior_knowledge: bool,
    #[cfg(feature = "http3")]
    h3_config: Option<spargio_quic::quinn::ClientConfig>,
}

impl ClientBuilder {
    /// TLS for `https://` (default: webpki roots). Unless the connector
    /// already sets ALPN protocols, `h2` and `http/1.1` are offered.
    pub fn tls(mut self, connector: TlsConnector) -> Self {
        self.tls = Some(connector);
        self
    }

    /// Bounds resolution, connect and TLS handshake (default 10 s).
    pub fn connect_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Bounds a request until its response head (default: none).
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long an idle pooled connection is kept (default 90 s; `None`:
    /// until the server closes it).
    pub fn pool_idle_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.pool_idle_timeout = timeout;
        self
    }

    /// At most `n` idle connections kept per host (default: no bound).
    pub fn pool_max_idle_per_host(mut self, n: usize) -> Self {
        self.pool_max_idle_per_host = n;
        self
    }

    /// Speaks HTTP/2 to every host, including over plain `http://` (h2c
    /// by prior knowledge; gRPC servers expect this).
    pub fn http2_prior_knowledge(mut self) -> Self {
        self.http2_prior_knowledge = true;
        self
    }

    /// The QUIC and TLS settings of HTTP/3 connections (see
    /// [`http3_prior_knowledge`](Self::http3_prior_knowledge)); default:
    /// webpki roots, ALPN `h3` (a config given here must offer `h3`).
    #[cfg(feature = "http3")]
    pub fn http3_client_config(mut self, config: spargio_quic::quinn::ClientConfig) -> Self {
        self.h3_config = Some(config);
        self
    }

    /// Speaks HTTP/3 to every `https://` origin (feature `http3`): the
    /// builder's connect and request timeouts carry over; see [`H3Client`].
    #[cfg(feature = "http3")]
    pub fn http3_prior_knowledge(self) -> H3ClientBuilder {
        H3ClientBuilder(self)
    }

    /// The client, for request bodies of type `B`.
    pub fn build<B>(self) -> Client<B>
    where
        B: http_body::Body + Send + Unpin + 'static,
        B::Data: Send,
    {
        let tls = self.tls.unwrap_or_else(TlsConnector::with_webpki_roots);
        let tls = if tls.config().alpn_protocols.is_empty() {
            let alpn: &[&[u8]] = if self.http2_prior_knowledge {
                &[b"h2"]
            } else {
                &[b"h2", b"http/1.1"]
            };
            tls.with_alpn_protocols(alpn)
        } else {
            tls
        };
        let connector = Connector::new(self.handle.clone(), Some(tls), self.connect_timeout);
        let timer = Timer::new(&self.handle);
        let inner = legacy::Client::builder(Executor::new(&self.handle))
            .timer(timer.clone())
            .pool_timer(timer)
            .pool_idle_timeout(self.pool_idle_timeout.map(crate::timeout::saturate))
            .pool_max_idle_per_host(self.pool_max_idle_per_host)
            .http2_only(self.http2_prior_knowledge)
            .build(connector);
        Client {
            inner,
            handle: self.handle,
            request_timeout: self.request_timeout,
            h2_only: self.http2_prior_knowledge,
        }
    }
}

impl<B> Client<B>
where
    B: http_body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    /// Sends `request`; resolves with the response head (read the body
    /// from it, e.g. with [`body_bytes`]).
    pub fn request(&self, request: Request<B>) -> ResponseFuture {
        let fut = self.send_unsent(request);
        let timeout = self.request_timeout;
        let handle = self.handle.clone();
        ResponseFuture(Box::pin(async move {
            match timeout {
                None => fut.await.map_err(Error::from),
                Some(limit) => match crate::timeout::timeout(&handle, limit, fut).await {
                    Some(res) => res.map_err(Error::from),
                    None => Err(Error::timeout()),
                },
            }
        }))
    }

    /// Sends `request`, and again if the pool gave it up unsent
    /// (`unsent.rs`).
    fn send_unsent(
        &self,
        request: Request<B>,
    ) -> impl Future<Output = Result<Response<Incoming>, legacy::Error>> + Send + 'static {
        let (parts, body) = request.into_parts();
        let head = self.h2_only.then(|| unsent::Head::of(&parts));
        let back = head.as_ref().map(|_| unsent::Slot::<B>::default());
        let first = self
            .inner
            .request(Request::from_parts(parts, Unsent::new(body, back.clone())));
        let inner = self.inner.clone();
        async move {
            let res = first.await;
            let (Some(head), Some(back)) = (head, back) else {
                return res;
            };
            let mut res = res;
            for _ in 0..unsent::RETRIES {
                match res {
                    Err(e) if unsent::is_abandoned_wait(&e) => {
                        // Back only if hyper never polled it: not a byte
                        // of the request went out.
                        let body = back.lock().unwrap_or_else(|e| e.into_inner()).take();
                        let Some(body) = body else {
                            return Err(e);
                        };
                        res = inner
                            .request(head.with(Unsent::new(body, Some(back.clone()))))
                            .await;
                    }
                    other => return other,
                }
            }
            res
        }
    }

    /// The runtime the client runs on: `grpc::Channel` arms its deadlines
    /// there.
    #[cfg(feature = "grpc")]
    pub(crate) fn runtime_handle(&self) -> &RuntimeHandle {
        &self.handle
    }

    /// `GET uri`.
    pub fn get<U>(&self, uri: U) -> ResponseFuture
    where
        U: TryInto<Uri>,
        U::Error: Into<http::Error>,
        B: Default,
    {
        self.send(Method::GET, uri, B::default())
    }

    /// `POST uri` with `body`.
    pub fn post<U>(&self, uri: U, body: impl Into<B>) -> ResponseFuture
    where
        U: TryInto<Uri>,
        U::Error: Into<http::Error>,
    {
        self.send(Method::POST, uri, body.into())
    }

    fn send<U>(&self, method: Method, uri: U, body: B) -> ResponseFuture
    where
        U: TryInto<Uri>,
        U::Error: Into<http::Error>,
    {
        match Request::builder().method(method).uri(uri).body(body) {
            Ok(req) => self.request(req),
            Err(e) => ResponseFuture(Box::pin(std::future::ready(Err(Error::invalid(e))))),
        }
    }
}

impl<B> tower_service::Service<Request<B>> for Client<B>
where
    B: http_body::Body + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    type Response = Response<Incoming>;
    type Error = Error;
    type Future = ResponseFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> ResponseFuture {
        self.request(request)
    }
}

/// The future of a [`Client`] request.
#[must_use = "futures do nothing unless awaited"]
pub struct ResponseFuture(Pin<Box<dyn Future<Output = Result<Response<Incoming>, Error>> + Send>>);

impl fmt::Debug for ResponseFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl Future for ResponseFuture {
    type Output = Result<Response<Incoming>, Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

/// Configures an [`H3Client`] ([`ClientBuilder::http3_prior_knowledge`]).
#[cfg(feature = "http3")]
#[derive(Clone, Debug)]
pub struct H3ClientBuilder(ClientBuilder);

#[cfg(feature = "http3")]
impl H3ClientBuilder {
    /// The client. Fails if the UDP sockets of its QUIC endpoint cannot be
    /// made.
    pub fn build(self) -> std::io::Result<H3Client> {
        let b = self.0;
        H3Client::new(h3::H3Settings {
            handle: b.handle,
            config: b.h3_config,
            connect_timeout: b.connect_timeout,
            request_timeout: b.request_timeout,
        })
    }
}

/// Reads a response body to its end (HTTP/1.1 and HTTP/2's `Incoming`,
/// HTTP/3's `H3ResponseBody` with feature `http3`, any `http_body::Body`).
pub async fn body_bytes<B>(response: Response<B>) -> Result<Bytes, Error>
where
    B: http_body::Body,
    B::Error: Into<BoxError>,
{
    Ok(response
        .into_body()
        .collect()
        .await
        .map_err(|e| Error::new(Kind::Body, e))?
        .to_bytes())
}

/// Why a request failed.
#[derive(Debug)]
pub struct Error {
    kind: Kind,
    source: Option<BoxError>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Invalid,
    Connect,
    Timeout,
    Request,
    Body,
}

impl Error {
    fn new(kind: Kind, source: impl Into<BoxError>) -> Error {
        Error {
            kind,
            source: Some(source.into()),
        }
    }

    fn invalid(e: http::Error) -> Error {
        Error::new(Kind::Invalid, e)
    }

    fn timeout() -> Error {
        Error {
            kind: Kind::Timeout,
            source: None,
        }
    }

    /// The request timeout or connect timeout passed.
    pub fn is_timeout(&self) -> bool {
        self.kind == Kind::Timeout
    }

    /// No connection could be made (resolution, TCP connect or TLS
    /// handshake failed).
    pub fn is_connect(&self) -> bool {
        self.kind == Kind::Connect
    }

    /// A timeout that passed while connecting (not while waiting for the
    /// response).
    #[cfg(feature = "grpc")]
    pub(crate) fn is_connect_timeout(&self) -> bool {
        self.kind == Kind::Timeout && self.source.is_some()
    }

    /// The request could not be built (bad URI, method or header).
    pub fn is_invalid(&self) -> bool {
        self.kind == Kind::Invalid
    }

    /// The response body failed while it was read.
    pub fn is_body(&self) -> bool {
        self.kind == Kind::Body
    }
}

impl From<legacy::Error> for Error {
    fn from(e: legacy::Error) -> Error {
        if e.is_connect() {
            let timed_out = std::error::Error::source(&e)
                .and_then(|s| s.downcast_ref::<std::io::Error>())
                .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut);
            let kind = if timed_out {
                Kind::Timeout
            } else {
                Kind::Connect
            };
            return Error::new(kind, e);
        }
        Error::new(Kind::Request, e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            Kind::Invalid => "invalid request",
            Kind::Connect => "connect failed",
            Kind::Timeout => "timed out",
            Kind::Request => "request failed",
            Kind::Body => "response body failed",
        };
        match &self.source {
            Some(source) => write!(f, "{what}: {source}"),
            None => f.write_str(what),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as _)
    }
}
