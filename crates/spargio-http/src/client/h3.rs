//! The HTTP/3 client (feature `http3`): [`H3Client`], built by
//! [`ClientBuilder::http3_prior_knowledge`](super::ClientBuilder::http3_prior_knowledge).
//!
//! * **One QUIC connection per origin** (`https://host:port`), shared by
//!   every request to it: requests are streams of that connection, as
//!   many at once as the server's stream credit allows. The pool keeps
//!   it until the server closes it or sends `GOAWAY`, or until it idles
//!   out; a request that finds the connection gone (or refused by a
//!   `GOAWAY` before it was sent) is sent once more on a new one.
//!   Concurrent first requests to an origin wait for one handshake.
//! * **The endpoints**: one client `QuicEndpoint` per `H3Client` and
//!   address family (one UDP socket per shard), connections spread over
//!   its drivers.
//! * **TLS**: webpki roots by default, or the `quinn::ClientConfig` given
//!   to [`ClientBuilder::http3_client_config`](super::ClientBuilder::http3_client_config)
//!   (its ALPN must include `h3`). 0-RTT is off: rustls does not offer
//!   early data unless told to.
//! * **Timeouts**: `connect_timeout` bounds resolution and the handshake;
//!   `request_timeout` the wait for the response head.
//! * The request body is sent whole before the response head is awaited.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::ToSocketAddrs;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::{Method, Request, Response, Uri};
use http_body::{Body, Frame};
use spargio::RuntimeHandle;
use spargio_quic::{H3BidiStream, H3Connection, H3OpenStreams, QuicConnection, QuicEndpoint};

use super::{Error, Kind};
use crate::h3_body::BodyState as State;
use crate::BoxError;

type SendRequest = h3::client::SendRequest<H3OpenStreams, Bytes>;
type Stream = h3::client::RequestStream<H3BidiStream<Bytes>, Bytes>;

/// A pooled HTTP/3 client (module docs). `Clone`: clones share the pool.
///
/// ```no_run
/// # spargio::block_on(spargio::run(|handle| async move {
/// let client = spargio_http::Client::builder(&handle)
///     .http3_prior_knowledge()
///     .build()?;
/// let response = client.get("https://example.com/").await?;
/// let body = spargio_http::client::body_bytes(response).await?;
/// # Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
/// # })).unwrap().unwrap();
/// ```
#[derive(Clone)]
pub struct H3Client {
    inner: Arc<Inner>,
}

struct Inner {
    handle: RuntimeHandle,
    /// The endpoint for IPv4 origins, and the one for IPv6 origins, made
    /// on the first (a socket per family: no v4-mapped addresses).
    v4: QuicEndpoint,
    v6: std::sync::OnceLock<QuicEndpoint>,
    config: spargio_quic::quinn::ClientConfig,
    connect_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
    pool: Mutex<HashMap<Origin, Slot>>,
}

impl fmt::Debug for H3Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("H3Client")
            .field("connect_timeout", &self.inner.connect_timeout)
            .field("request_timeout", &self.inner.request_timeout)
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Origin {
    host: String,
    port: u16,
}

enum Slot {
    /// A handshake is under way; these requests wait for it.
    Connecting(Vec<Waker>),
    Ready {
        send: SendRequest,
        conn: QuicConnection,
        /// Set by the connection's driver task when it ends (GOAWAY, close).
        gone: Arc<std::sync::atomic::AtomicBool>,
    },
}

/// Settings from [`ClientBuilder`](super::ClientBuilder).
pub(super) struct H3Settings {
    pub(super) handle: RuntimeHandle,
    pub(super) config: Option<spargio_quic::quinn::ClientConfig>,
    pub(super) connect_timeout: Option<Duration>,
    pub(super) request_timeout: Option<Duration>,
}

impl H3Client {
    pub(super) fn new(s: H3Settings) -> io::Result<H3Client> {
        let config = s.config.unwrap_or_else(|| {
            spargio_quic::client_config_with_webpki_roots(&[spargio_quic::H3_ALPN])
        });
        let v4 = QuicEndpoint::client(&s.handle, (std::net::Ipv4Addr::UNSPECIFIED, 0).into())?;
        v4.set_default_client_config(config.clone());
        Ok(H3Client {
            inner: Arc::new(Inner {
                handle: s.handle,
                v4,
                v6: std::sync::OnceLock::new(),
                config,
                connect_timeout: s.connect_timeout,
                request_timeout: s.request_timeout,
                pool: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// `GET uri`.
    pub async fn get<U>(&self, uri: U) -> Result<Response<H3ResponseBody>, Error>
    where
        U: TryInto<Uri>,
        U::Error: Into<http::Error>,
    {
        let req = Request::builder()
            .method(Method::GET)
            .uri(uri)
            .body(http_body_util::Empty::<Bytes>::new())
            .map_err(Error::invalid)?;
        self.request(req).await
    }

    /// `POST uri` with `body`.
    pub async fn post<U>(
        &self,
        uri: U,
        body: impl Into<Bytes>,
    ) -> Result<Response<H3ResponseBody>, Error>
    where
        U: TryInto<Uri>,
        U::Error: Into<http::Error>,
    {
        let req = Request::builder()
            .method(Method::POST)
            .uri(uri)
            .body(http_body_util::Full::new(body.into()))
            .map_err(Error::invalid)?;
        self.request(req).await
    }

    /// Sends `request` (an `https://` URI); resolves with the response head
    /// (read the body with [`body_bytes`](super::body_bytes)).
    pub async fn request<B>(&self, request: Request<B>) -> Result<Response<H3ResponseBody>, Error>
    where
        B: Body,
        B::Error: Into<BoxError>,
    {
        let origin = origin(request.uri())?;
        let (parts, body) = request.into_parts();
        let head = Request::from_parts(parts, ());
        if head.uri().authority().is_none() {
            return Err(Error::new(
                Kind::Invalid,
                "an HTTP/3 request needs an absolute URI",
            ));
        }
        // Safe to send again when the server closed gracefully before it
        // answered (it drops requests past its GOAWAY unprocessed): an
        // idempotent request without a body.
        let again = body.is_end_stream()
            && matches!(
                *head.method(),
                Method::GET
                    | Method::HEAD
                    | Method::OPTIONS
                    | Method::TRACE
                    | Method::PUT
                    | Method::DELETE
            );
        let mut body = Some(body);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let last = attempt == 2;
            let mut send = self.connection(&origin).await?;
            // A pooled connection that is closing (GOAWAY, a close)
            // refuses the request before it is sent.
            let mut stream = match send.send_request(clone_head(&head)).await {
                Ok(s) => s,
                Err(e) => {
                    self.forget(&origin);
                    if last {
                        return Err(Error::new(Kind::Request, e));
                    }
                    continue;
                }
            };
            let sent = match body.take() {
                Some(b) => send_body(&mut stream, b).await,
                None => stream.finish().await.map_err(|e| Failed {
                    graceful_close: unprocessed(&e),
                    error: Error::new(Kind::Request, e),
                }),
            };
            let answer = match sent {
                Ok(()) => self.response_head(&mut stream).await,
                Err(e) => Err(e),
            };
            match answer {
                Ok(parts) => return Ok(Response::from_parts(parts, H3ResponseBody::new(stream))),
                Err(e) if !last && again && e.graceful_close => {
                    self.forget(&origin);
                }
                Err(e) => return Err(e.error),
            }
        }
    }

    /// Waits (at most `request_timeout`) for the response head.
    async fn response_head(&self, stream: &mut Stream) -> Result<http::response::Parts, Failed> {
        let head = match self.inner.request_timeout {
            None => stream.recv_response().await,
            Some(limit) => {
                match crate::timeout::timeout(&self.inner.handle, limit, stream.recv_response())
                    .await
                {
                    Some(res) => res,
                    None => return Err(Error::timeout().into()),
                }
            }
        };
        match head {
            Ok(head) => Ok(head.into_parts().0),
            Err(e) => Err(Failed {
                graceful_close: unprocessed(&e),
                error: Error::new(Kind::Request, e),
            }),
        }
    }

    /// The pooled connection to `origin`, made if there is none.
    async fn connection(&self, origin: &Origin) -> Result<SendRequest, Error> {
        enum Got {
            Send(SendRequest),
            Connect,
        }
        let got = std::future::poll_fn(|cx| {
            let mut pool = self.inner.pool.lock().unwrap_or_else(|e| e.into_inner());
            match pool.get_mut(origin) {
                Some(Slot::Ready { send, gone, conn })
                    if !gone.load(std::sync::atomic::Ordering::Acquire)
                        && conn.close_reason().is_none() =>
                {
                    Poll::Ready(Got::Send(send.clone()))
                }
                Some(Slot::Connecting(waiters)) => {
                    if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                        waiters.push(cx.waker().clone());
                    }
                    Poll::Pending
                }
                _ => {
                    pool.insert(origin.clone(), Slot::Connecting(Vec::new()));
                    Poll::Ready(Got::Connect)
                }
            }
        })
        .await;
        match got {
            Got::Send(send) => Ok(send),
            Got::Connect => {
                // If this future is dropped mid-handshake, the slot must
                // not stay `Connecting` for ever.
                let mut reset = ResetSlot {
                    client: self,
                    origin,
                    armed: true,
                };
                let made = self.connect(origin).await;
                reset.armed = false;
                let mut pool = self.inner.pool.lock().unwrap_or_else(|e| e.into_inner());
                let waiters = match pool.remove(origin) {
                    Some(Slot::Connecting(w)) => w,
                    _ => Vec::new(),
                };
                let out = match made {
                    Ok((send, conn, gone)) => {
                        pool.insert(
                            origin.clone(),
                            Slot::Ready {
                                send: send.clone(),
                                conn,
                                gone,
                            },
                        );
                        Ok(send)
                    }
                    Err(e) => Err(e),
                };
                drop(pool);
                waiters.into_iter().for_each(Waker::wake);
                out
            }
        }
    }

    /// Drops the pooled connection to `origin` (it refused a request).
    fn forget(&self, origin: &Origin) {
        let mut pool = self.inner.pool.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Slot::Ready { .. }) = pool.get(origin) {
            pool.remove(origin);
        }
    }

    async fn connect(
        &self,
        origin: &Origin,
    ) -> Result<
        (
            SendRequest,
            QuicConnection,
            Arc<std::sync::atomic::AtomicBool>,
        ),
        Error,
    > {
        let inner = &self.inner;
        let connect = async {
            let target = (origin.host.clone(), origin.port);
            let addrs = inner
                .handle
                .spawn_blocking(move || target.to_socket_addrs().map(Vec::from_iter))
                .map_err(io::Error::other)?
                .await
                .map_err(io::Error::other)??;
            let addr = addrs.first().copied().ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, "the host has no address")
            })?;
            let endpoint = if addr.is_ipv4() {
                &inner.v4
            } else {
                match inner.v6.get() {
                    Some(ep) => ep,
                    None => {
                        let ep = QuicEndpoint::client(
                            &inner.handle,
                            (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
                        )?;
                        ep.set_default_client_config(inner.config.clone());
                        // A racing first IPv6 request may have set it.
                        let _ = inner.v6.set(ep);
                        inner.v6.get().expect("set above")
                    }
                }
            };
            let conn = endpoint.connect(addr, &origin.host).await?;
            let (mut driver, send) = h3::client::new(H3Connection::new(conn.clone()))
                .await
                .map_err(io::Error::other)?;
            let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = gone.clone();
            let drive = async move {
                let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
                flag.store(true, std::sync::atomic::Ordering::Release);
            };
            let spawned = match conn.shard() {
                Some(shard) => inner.handle.spawn_pinned(shard, drive).map(drop),
                None => inner.handle.spawn_stealable(drive).map(drop),
            };
            spawned.map_err(io::Error::other)?;
            io::Result::Ok((send, conn, gone))
        };
        let made = match inner.connect_timeout {
            None => connect.await,
            Some(limit) => crate::timeout::timeout(&inner.handle, limit, connect)
                .await
                .unwrap_or_else(|| {
                    Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))
                }),
        };
        made.map_err(|e| {
            let kind = if e.kind() == io::ErrorKind::TimedOut {
                Kind::Timeout
            } else {
                Kind::Connect
            };
            Error::new(kind, e)
        })
    }
}

/// Whether the server left the request unprocessed: it closed the
/// connection gracefully (dropping requests past its GOAWAY), or refused
/// the stream with `H3_REQUEST_REJECTED` (RFC 9114, 4.1.1).
fn unprocessed(e: &h3::error::StreamError) -> bool {
    e.is_h3_no_error()
        || matches!(
            e,
            h3::error::StreamError::RemoteTerminate { code, .. }
                if *code == h3::error::Code::H3_REQUEST_REJECTED
        )
}

/// A failed request, and whether the server left it unprocessed (it may
/// be sent again).
struct Failed {
    error: Error,
    graceful_close: bool,
}

impl From<Error> for Failed {
    fn from(error: Error) -> Failed {
        Failed {
            error,
            graceful_close: false,
        }
    }
}

/// Clears a `Connecting` slot whose handshake future was dropped.
struct ResetSlot<'a> {
    client: &'a H3Client,
    origin: &'a Origin,
    armed: bool,
}

impl Drop for ResetSlot<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let waiters = {
            let mut pool = self
                .client
                .inner
                .pool
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match pool.remove(self.origin) {
                Some(Slot::Connecting(w)) => w,
                Some(other) => {
                    pool.insert(self.origin.clone(), other);
                    Vec::new()
                }
                None => Vec::new(),
            }
        };
        waiters.into_iter().for_each(Waker::wake);
    }
}

fn clone_head(head: &Request<()>) -> Request<()> {
    let mut req = Request::builder()
        .method(head.method().clone())
        .uri(head.uri().clone())
        .version(head.version())
        .body(())
        .expect("parts of a valid request");
    *req.headers_mut() = head.headers().clone();
    req
}

fn origin(uri: &Uri) -> Result<Origin, Error> {
    if uri.scheme_str() != Some("https") {
        return Err(Error::new(Kind::Invalid, "HTTP/3 needs an https:// URI"));
    }
    let host = uri
        .host()
        .ok_or_else(|| Error::new(Kind::Invalid, "URI has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    Ok(Origin {
        host,
        port: uri.port_u16().unwrap_or(443),
    })
}

/// Sends every frame of `body`, then the end of the request.
async fn send_body<B>(stream: &mut Stream, body: B) -> Result<(), Failed>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let mut body = std::pin::pin!(body);
    let failed = |e: h3::error::StreamError| Failed {
        graceful_close: unprocessed(&e),
        error: Error::new(Kind::Request, e),
    };
    loop {
        let frame = match std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            None => break,
            Some(Ok(frame)) => frame,
            // Dropping `stream` resets it (H3_REQUEST_CANCELLED).
            Some(Err(e)) => return Err(Error::new(Kind::Request, e).into()),
        };
        match frame.into_data() {
            Ok(mut data) => {
                let bytes = data.copy_to_bytes(data.remaining());
                if !bytes.is_empty() {
                    stream.send_data(bytes).await.map_err(failed)?;
                }
            }
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    stream.send_trailers(trailers).await.map_err(failed)?;
                    break;
                }
            }
        }
    }
    stream.finish().await.map_err(failed)
}

/// A response body received over HTTP/3 (`http_body::Body` of `Bytes`,
/// trailers included). Dropped before the end, it stops the stream.
pub struct H3ResponseBody {
    stream: Stream,
    state: State,
}

impl fmt::Debug for H3ResponseBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("H3ResponseBody")
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl H3ResponseBody {
    fn new(stream: Stream) -> H3ResponseBody {
        H3ResponseBody {
            stream,
            state: State::Data,
        }
    }
}

impl Body for H3ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        crate::h3_body::poll_frame(&mut this.state, &mut this.stream, cx)
    }

    fn is_end_stream(&self) -> bool {
        self.state == State::Done
    }
}
