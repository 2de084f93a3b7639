//! Deadlines (`grpc-timeout`) both ways, a part of the `http_grpc` tests.
//!
//! A call's deadline ends it on both sides: our server drops a handler
//! that is still running when the deadline passes and answers
//! DEADLINE_EXCEEDED; our channel ends the call as CANCELLED "Timeout
//! expired" (as tonic's own channel does) and resets the stream. Each
//! test asserts outcomes (status codes, whether a handler's future was
//! dropped before its code after the sleep ran), never how long anything
//! took.

use super::*;

/// How long a slow handler sleeps: far past every deadline it meets.
const SLOW: Duration = Duration::from_secs(3);
/// The deadline the slow calls carry.
const DEADLINE: Duration = Duration::from_millis(300);
/// A deadline no call here comes near.
const GENEROUS: Duration = Duration::from_secs(30);

/// What one handler went through, shared with the test.
#[derive(Clone, Default)]
struct Handler(Arc<HandlerState>);

#[derive(Default)]
struct HandlerState {
    started: AtomicBool,
    /// Its sleep ended: the code after it ran.
    woke: AtomicBool,
    /// Its future (or stream) was dropped, finished or not.
    dropped: AtomicBool,
}

/// Sets `dropped` when the handler's future (or stream) is dropped.
struct DropFlag(Arc<HandlerState>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.dropped.store(true, Ordering::SeqCst);
    }
}

impl Handler {
    fn enter(&self) -> DropFlag {
        self.0.started.store(true, Ordering::SeqCst);
        DropFlag(self.0.clone())
    }

    /// Waits (bounded by `HANG`) for the handler's future to be dropped,
    /// then fails if the code after its sleep ran: it was dropped while
    /// it slept.
    fn assert_dropped_asleep(&self) {
        let start = Instant::now();
        while !self.0.dropped.load(Ordering::SeqCst) {
            assert!(
                start.elapsed() < HANG,
                "the handler was never dropped (started: {})",
                self.0.started.load(Ordering::SeqCst)
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(self.0.started.load(Ordering::SeqCst), "never started");
        assert!(
            !self.0.woke.load(Ordering::SeqCst),
            "the handler ran to its end: its future was not dropped while it slept"
        );
    }
}

type SleepFn = fn(Duration) -> Pin<Box<dyn Future<Output = ()> + Send>>;

fn spargio_sleep(d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(spargio::time::sleep(d))
}

fn tokio_sleep(d: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(tokio::time::sleep(d))
}

/// `inner` (the greeter), each call first sleeping `delay` with `sleep`
/// (spargio's or Tokio's, for the runtime serving it) and noting in
/// `handler` what happened.
#[derive(Clone)]
struct Slow<S> {
    inner: S,
    delay: Duration,
    sleep: SleepFn,
    handler: Handler,
}

fn slow_greeter(delay: Duration, sleep: SleepFn, handler: &Handler) -> Slow<GreeterServer> {
    Slow {
        inner: GreeterServer,
        delay,
        sleep,
        handler: handler.clone(),
    }
}

impl<S, B> tower::Service<http::Request<B>> for Slow<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let inner = self.inner.call(req);
        let (delay, sleep, handler) = (self.delay, self.sleep, self.handler.clone());
        Box::pin(async move {
            let _flag = handler.enter();
            sleep(delay).await;
            handler.0.woke.store(true, Ordering::SeqCst);
            inner.await
        })
    }
}

/// A `SayHelloStream` that sends one reply (so the response headers are
/// out) and then never another, noting its drop in the handler.
#[derive(Clone)]
struct Stalling(Handler);

impl<B> tower::Service<http::Request<B>> for Stalling
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<tonic::codegen::StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = tonic::codegen::BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let stall = StallingStream(self.0.clone());
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
            Ok(grpc.server_streaming(stall, req).await)
        })
    }
}

struct StallingStream(Handler);

impl tonic::server::ServerStreamingService<HelloRequest> for StallingStream {
    type Response = HelloReply;
    type ResponseStream = OneThenStall;
    type Future = std::future::Ready<Result<tonic::Response<OneThenStall>, tonic::Status>>;

    fn call(&mut self, _request: tonic::Request<HelloRequest>) -> Self::Future {
        std::future::ready(Ok(tonic::Response::new(OneThenStall {
            sent: false,
            _flag: self.0.enter(),
        })))
    }
}

struct OneThenStall {
    sent: bool,
    _flag: DropFlag,
}

impl futures_core::Stream for OneThenStall {
    type Item = Result<HelloReply, tonic::Status>;

    fn poll_next(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if std::mem::replace(&mut self.sent, true) {
            return Poll::Pending;
        }
        Poll::Ready(Some(Ok(HelloReply {
            message: "first".to_owned(),
        })))
    }
}

/// `service` served by spargio on 127.0.0.1 (its own runtime, a thread)
/// while `f(port)` runs; then shut down gracefully.
fn with_server<S, B>(service: S, f: impl FnOnce(u16))
where
    S: spargio_http::server::HttpService<B> + tower::Service<Request, Response = http::Response<B>>,
    B: spargio_http::server::HttpBody,
{
    /// Stops the server however `f` ends, a panic included.
    struct StopOnDrop(CancellationToken);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.cancel();
        }
    }
    let stop = CancellationToken::new();
    let stop_on_exit = StopOnDrop(stop.clone());
    let (port_tx, port_rx) = mpsc::channel();
    let server = std::thread::spawn(move || {
        spargio::block_on(spargio::run(move |handle| async move {
            let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
            let _ = port_tx.send(listener.local_addr()?.port());
            let signal = async move { stop.cancelled().await };
            let server = spargio_http::serve(listener, service)
                .with_graceful_shutdown(signal)
                .grace_period(Duration::from_secs(5))
                .into_future();
            handle
                .spawn_stealable(server)
                .expect("spawn")
                .await
                .expect("server task")
        }))
    });
    let port = port_rx
        .recv_timeout(HANG)
        .expect("the server bound no port");
    f(port);
    drop(stop_on_exit);
    let out = bounded("server shutdown", move || server.join());
    out.expect("server thread")
        .expect("runtime")
        .expect("server");
}

/// `service` served by tonic's own server (its transport, on a Tokio
/// runtime) on 127.0.0.1 while `f(port)` runs.
fn with_tonic_server<S>(service: S, f: impl FnOnce(u16))
where
    S: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let port = listener.local_addr().unwrap().port();
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    rt.spawn(tonic::transport::Server::builder().serve_with_incoming(service, incoming));
    f(port);
    // Dropping the runtime drops the server and its connections.
    drop(rt);
}

/// One `SayHello` through tonic's own channel (its transport, on a Tokio
/// runtime of its own) to 127.0.0.1:`port`.
fn tonic_transport_hello(
    port: u16,
    request: tonic::Request<HelloRequest>,
) -> Result<String, Status> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://127.0.0.1:{port}"))
            .unwrap()
            .connect()
            .await
            .map_err(|e| Status::unavailable(e.to_string()))?;
        unary_hello(&mut Grpc::new(channel), request).await
    })
}

/// A `SayHello` request for `name`, with `set_timeout(timeout)`.
fn hello(name: &str, timeout: Option<Duration>) -> tonic::Request<HelloRequest> {
    let mut request = tonic::Request::new(HelloRequest {
        name: name.to_owned(),
        count: 0,
    });
    if let Some(timeout) = timeout {
        request.set_timeout(timeout);
    }
    request
}

/// `SayHello` over any gRPC transport: our channel, our plain client
/// (which knows nothing of deadlines), tonic's own channel.
async fn unary_hello<T>(
    grpc: &mut Grpc<T>,
    request: tonic::Request<HelloRequest>,
) -> Result<String, Status>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<tonic::codegen::StdError>,
{
    grpc.ready()
        .await
        .map_err(|e| Status::unknown(e.into().to_string()))?;
    let path = PathAndQuery::from_static(greeter::SAY_HELLO);
    let codec = ProstCodec::<HelloRequest, HelloReply>::default();
    let reply = grpc.unary(request, path, codec).await?;
    Ok(reply.into_inner().message)
}

/// tonic over our plain client: it sends `grpc-timeout` but never ends a
/// call itself, so only the server's deadline can.
fn plain_grpc(handle: &RuntimeHandle, port: u16) -> Grpc<spargio_http::Client<tonic::body::Body>> {
    let http = spargio_http::Client::builder(handle)
        .http2_prior_knowledge()
        .build::<tonic::body::Body>();
    Grpc::with_origin(http, origin(port, false))
}

/// tonic over our channel to 127.0.0.1:`port` (h2c), optionally with a
/// channel-wide timeout (which sends no `grpc-timeout`).
fn channel_grpc(handle: &RuntimeHandle, port: u16, timeout: Option<Duration>) -> Grpc<Channel> {
    let mut channel = Channel::h2c(handle);
    if let Some(timeout) = timeout {
        channel = channel.timeout(timeout);
    }
    Grpc::with_origin(channel, origin(port, false))
}

fn assert_cancelled_by_timeout(result: Result<String, Status>) {
    let status = result.expect_err("the deadline passed");
    assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    assert_eq!(status.message(), "Timeout expired", "{status:?}");
}

const RST_STREAM: u8 = 0x3;

/// A TCP relay to 127.0.0.1:`upstream` for one h2c connection: it holds
/// the client's bytes back for `delay` (so the client's deadline is well
/// under way before the server sees the call, and a server enforcing the
/// same deadline cannot answer first), and notes the type of each frame
/// the client sends.
struct H2Relay {
    port: u16,
    frames: Frames,
}

impl H2Relay {
    fn start(upstream: u16, delay: Duration) -> H2Relay {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let frames = Frames::default();
        let seen = frames.0.clone();
        std::thread::spawn(move || {
            let Ok((client, _)) = listener.accept() else {
                return;
            };
            drop(listener);
            let server = std::net::TcpStream::connect(("127.0.0.1", upstream)).unwrap();
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            let (mut down_from, mut down_to) =
                (server.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut down_from, &mut down_to);
                let _ = down_to.shutdown(std::net::Shutdown::Write);
            });
            std::thread::sleep(delay);
            relay_frames(client, server, &seen);
        });
        H2Relay { port, frames }
    }
}

/// The types of the frames a client sent through an [`H2Relay`].
#[derive(Clone, Default)]
struct Frames(Arc<Mutex<Vec<u8>>>);

impl Frames {
    /// Waits (bounded) for the client to reset a stream. Awaited on the
    /// client's runtime: the reset leaves from its connection task, which
    /// dropping the runtime would end first.
    async fn wait_for_reset(&self) {
        let start = Instant::now();
        while !self.0.lock().unwrap().contains(&RST_STREAM) {
            assert!(
                start.elapsed() < HANG,
                "no RST_STREAM from the client; its frames: {:?}",
                self.0.lock().unwrap()
            );
            spargio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// Copies the client's HTTP/2 preface and frames to the server, noting
/// each frame's type.
fn relay_frames(mut from: std::net::TcpStream, mut to: std::net::TcpStream, seen: &Mutex<Vec<u8>>) {
    use std::io::{Read, Write};
    let mut preface = [0u8; 24];
    if from.read_exact(&mut preface).is_ok() && to.write_all(&preface).is_ok() {
        let mut head = [0u8; 9];
        while from.read_exact(&mut head).is_ok() {
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut payload = vec![0; len];
            if from.read_exact(&mut payload).is_err() {
                break;
            }
            seen.lock().unwrap().push(head[3]);
            if to
                .write_all(&head)
                .and_then(|()| to.write_all(&payload))
                .is_err()
            {
                break;
            }
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

// ----- our server -----

/// grpcio's call with a 300 ms deadline to our server, whose handler
/// sleeps 3 s: grpcio sees DEADLINE_EXCEEDED, and the handler's future
/// was dropped while it slept.
#[test]
fn grpcio_client_deadline_drops_the_handler_on_our_server() {
    require_peer!(Peer::PythonGrpcio);
    fds_restored(|| {
        let handler = Handler::default();
        let service = slow_greeter(SLOW, spargio_sleep, &handler);
        with_server(service, |port| {
            let call = format!("deadline:{}:grpcio", DEADLINE.as_millis());
            let lines = python_client(port, None, &[&call]);
            assert_eq!(lines.len(), 1, "{lines:?}");
            assert!(lines[0].starts_with("ERR DEADLINE_EXCEEDED"), "{lines:?}");
            handler.assert_dropped_asleep();
        });
    });
}

/// A client that sends `grpc-timeout` but does not enforce it (tonic over
/// our plain client): our server alone ends the call, with
/// DEADLINE_EXCEEDED, dropping the handler while it sleeps.
#[test]
fn our_server_answers_deadline_exceeded_and_drops_the_handler() {
    fds_restored(|| {
        let handler = Handler::default();
        let service = slow_greeter(SLOW, spargio_sleep, &handler);
        with_server(service, |port| {
            let status = run(move |handle| async move {
                unary_hello(
                    &mut plain_grpc(&handle, port),
                    hello("late", Some(DEADLINE)),
                )
                .await
            })
            .expect_err("the deadline passed");
            assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
            assert_eq!(status.message(), "Timeout expired", "{status:?}");
            handler.assert_dropped_asleep();
        });
    });
}

/// A streaming response whose headers (and first reply) are out when the
/// deadline passes ends with DEADLINE_EXCEEDED trailers, and the
/// handler's stream is dropped.
#[test]
fn our_server_ends_a_late_stream_with_deadline_exceeded() {
    fds_restored(|| {
        let handler = Handler::default();
        with_server(Stalling(handler.clone()), |port| {
            let (first, status) = run(move |handle| async move {
                let mut grpc = plain_grpc(&handle, port);
                grpc.ready().await.unwrap();
                let request = {
                    let mut r = tonic::Request::new(HelloRequest {
                        name: "stall".to_owned(),
                        count: 2,
                    });
                    r.set_timeout(DEADLINE);
                    r
                };
                let path = PathAndQuery::from_static(greeter::SAY_HELLO_STREAM);
                let mut stream = grpc
                    .server_streaming(
                        request,
                        path,
                        ProstCodec::<HelloRequest, HelloReply>::default(),
                    )
                    .await
                    .expect("the response headers")
                    .into_inner();
                let first = stream.message().await.expect("the first reply");
                // Bounded: without a deadline the stream never ends.
                let next = spargio::time::timeout(HANG / 2, stream.message())
                    .await
                    .expect("the stream never ended");
                (first, next.expect_err("the deadline passed"))
            });
            assert_eq!(first.map(|r| r.message).as_deref(), Some("first"));
            assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
            handler.assert_dropped_asleep();
        });
    });
}

/// An axum router mixing gRPC and REST: the gRPC route's deadline is
/// enforced, and a REST request carrying a `grpc-timeout` header (not
/// `application/grpc`) is not cut.
#[test]
fn our_server_enforces_deadlines_on_the_grpc_routes_of_an_axum_router_only() {
    fds_restored(|| {
        let handler = Handler::default();
        let app = axum::Router::new()
            .route(
                "/rest",
                axum::routing::get(|| async {
                    spargio::time::sleep(DEADLINE * 2).await;
                    "rested"
                }),
            )
            .route_service(
                greeter::SAY_HELLO,
                slow_greeter(SLOW, spargio_sleep, &handler),
            );
        with_server(app, |port| {
            let (status, rest) = run(move |handle| async move {
                let status = unary_hello(
                    &mut plain_grpc(&handle, port),
                    hello("mixed", Some(DEADLINE)),
                )
                .await
                .expect_err("the deadline passed");
                let http = spargio_http::Client::builder(&handle)
                    .http2_prior_knowledge()
                    .build::<http_body_util::Empty<bytes::Bytes>>();
                let request = http::Request::get(format!("http://127.0.0.1:{port}/rest"))
                    .header("grpc-timeout", "1m")
                    .body(http_body_util::Empty::new())
                    .unwrap();
                let response = http.request(request).await.expect("GET /rest");
                assert_eq!(response.status(), http::StatusCode::OK);
                let body = spargio_http::client::body_bytes(response).await.unwrap();
                (status, body)
            });
            assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
            assert_eq!(&rest[..], b"rested");
            handler.assert_dropped_asleep();
        });
    });
}

/// A malformed `grpc-timeout` is ignored (as tonic's server does): the
/// call is answered in full.
#[test]
fn our_server_ignores_a_malformed_grpc_timeout() {
    fds_restored(|| {
        let handler = Handler::default();
        let service = slow_greeter(DEADLINE, spargio_sleep, &handler);
        with_server(service, |port| {
            let replies = run(move |handle| async move {
                let mut grpc = plain_grpc(&handle, port);
                let mut replies = Vec::new();
                // No unit, an unknown unit, nine digits, a sign, a fraction,
                // a unit alone, not ASCII.
                for bad in ["100", "1x", "123456789n", "-1m", "1.5S", "m", "1\u{e9}m"] {
                    let mut request = hello("malformed", None);
                    let value = tonic::metadata::MetadataValue::try_from(bad).unwrap();
                    request.metadata_mut().insert("grpc-timeout", value);
                    replies.push(unary_hello(&mut grpc, request).await);
                }
                replies
            });
            for reply in replies {
                assert_eq!(reply.expect("SayHello").as_str(), "Hello, malformed!");
            }
        });
    });
}

/// Deadlines that do not pass change nothing: our channel, our plain
/// client and grpcio, each with a generous deadline, to our server with
/// a quick handler.
#[test]
fn a_deadline_that_does_not_pass_changes_nothing() {
    require_peer!(Peer::PythonGrpcio);
    fds_restored(|| {
        let handler = Handler::default();
        let service = slow_greeter(Duration::from_millis(20), spargio_sleep, &handler);
        with_server(service, |port| {
            let (ours, plain) = run(move |handle| async move {
                let ours = unary_hello(
                    &mut channel_grpc(&handle, port, Some(GENEROUS)),
                    hello("ours", Some(GENEROUS)),
                )
                .await;
                let plain = unary_hello(
                    &mut plain_grpc(&handle, port),
                    hello("plain", Some(GENEROUS)),
                )
                .await;
                (ours, plain)
            });
            assert_eq!(ours.expect("our channel").as_str(), "Hello, ours!");
            assert_eq!(plain.expect("plain client").as_str(), "Hello, plain!");
            let call = format!("deadline:{}:grpcio", GENEROUS.as_millis());
            assert_eq!(python_client(port, None, &[&call]), ["OK Hello, grpcio!"]);
        });
        assert!(handler.0.woke.load(Ordering::SeqCst));
    });
}

/// tonic's own channel (on Tokio) with a deadline to our server: it ends
/// the call itself (CANCELLED) unless our DEADLINE_EXCEEDED arrives
/// first; either way our server dropped the handler while it slept.
#[test]
fn tonic_transport_client_deadline_drops_the_handler_on_our_server() {
    fds_restored(|| {
        let handler = Handler::default();
        let service = slow_greeter(SLOW, spargio_sleep, &handler);
        with_server(service, |port| {
            let status = tonic_transport_hello(port, hello("tokio", Some(DEADLINE)))
                .expect_err("the deadline passed");
            assert!(
                matches!(status.code(), Code::Cancelled | Code::DeadlineExceeded),
                "{status:?}"
            );
            handler.assert_dropped_asleep();
        });
    });
}

// ----- our channel -----

/// Our channel with `set_timeout` to grpcio's server, whose handler
/// sleeps 3 s: the call ends as CANCELLED "Timeout expired", and the
/// channel resets the stream. The relay holds the call back 200 ms, so
/// grpcio's own DEADLINE_EXCEEDED cannot arrive first.
#[test]
fn channel_deadline_cancels_a_call_to_grpcio_and_resets_the_stream() {
    require_peer!(Peer::PythonGrpcio);
    fds_restored(|| {
        let server = PyServer::start(None);
        let relay = H2Relay::start(server.port, Duration::from_millis(200));
        let (port, frames) = (relay.port, relay.frames);
        let name = format!("sleep:{}", SLOW.as_millis());
        assert_cancelled_by_timeout(run(move |handle| async move {
            let call = hello(&name, Some(DEADLINE));
            let reply = unary_hello(&mut channel_grpc(&handle, port, None), call).await;
            frames.wait_for_reset().await;
            reply
        }));
    });
}

/// Our channel with `set_timeout` to tonic's own server (on Tokio):
/// CANCELLED "Timeout expired", the stream reset, the handler dropped.
#[test]
fn channel_deadline_cancels_a_call_to_tonic_transport_server() {
    fds_restored(|| {
        let handler = Handler::default();
        with_tonic_server(slow_greeter(SLOW, tokio_sleep, &handler), |upstream| {
            let relay = H2Relay::start(upstream, Duration::from_millis(200));
            let (port, frames) = (relay.port, relay.frames);
            assert_cancelled_by_timeout(run(move |handle| async move {
                let call = hello("tokio", Some(DEADLINE));
                let reply = unary_hello(&mut channel_grpc(&handle, port, None), call).await;
                frames.wait_for_reset().await;
                reply
            }));
            handler.assert_dropped_asleep();
        });
    });
}

/// A channel-wide timeout sends no `grpc-timeout`, so tonic's server
/// knows no deadline: only our reset can end its handler, and does.
#[test]
fn channel_timeout_resets_the_stream_and_tonic_transport_server_drops_the_handler() {
    fds_restored(|| {
        let handler = Handler::default();
        with_tonic_server(slow_greeter(SLOW, tokio_sleep, &handler), |upstream| {
            let relay = H2Relay::start(upstream, Duration::ZERO);
            let (port, frames) = (relay.port, relay.frames);
            assert_cancelled_by_timeout(run(move |handle| async move {
                let grpc = &mut channel_grpc(&handle, port, Some(DEADLINE));
                let reply = unary_hello(grpc, hello("tokio", None)).await;
                frames.wait_for_reset().await;
                reply
            }));
            handler.assert_dropped_asleep();
        });
    });
}

/// The deadline bounds the whole call, the response body included: a
/// stream that stalls after its first reply ends as CANCELLED "Timeout
/// expired", and the reset drops the server's stream.
#[test]
fn channel_timeout_ends_a_stalled_stream() {
    fds_restored(|| {
        let handler = Handler::default();
        with_server(Stalling(handler.clone()), |port| {
            let (first, status) = run(move |handle| async move {
                let mut grpc = channel_grpc(&handle, port, Some(DEADLINE));
                grpc.ready().await.unwrap();
                let request = tonic::Request::new(HelloRequest {
                    name: "stall".to_owned(),
                    count: 2,
                });
                let path = PathAndQuery::from_static(greeter::SAY_HELLO_STREAM);
                let mut stream = grpc
                    .server_streaming(
                        request,
                        path,
                        ProstCodec::<HelloRequest, HelloReply>::default(),
                    )
                    .await
                    .expect("the response headers")
                    .into_inner();
                let first = stream.message().await.expect("the first reply");
                let next = spargio::time::timeout(HANG / 2, stream.message())
                    .await
                    .expect("the stream never ended");
                (first, next.expect_err("the deadline passed"))
            });
            assert_eq!(first.map(|r| r.message).as_deref(), Some("first"));
            assert_eq!(status.code(), Code::Cancelled, "{status:?}");
            assert_eq!(status.message(), "Timeout expired", "{status:?}");
            handler.assert_dropped_asleep();
        });
    });
}
