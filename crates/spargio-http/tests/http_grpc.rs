//! gRPC with tonic on spargio-http, against Python `grpcio` as the
//! independent peer: grpcio's client calls our tonic server, our tonic
//! client (over `spargio_http::Client`) calls a grpcio server, and both
//! sides spargio; each over plain TCP (h2c, HTTP/2 by prior knowledge) and
//! over TLS (HTTP/2 by ALPN, a self-signed certificate for 127.0.0.1 the
//! peer trusts). Unary, server streaming, a 1 MiB message, concurrent
//! calls on one connection, and error statuses (`INVALID_ARGUMENT`,
//! `UNIMPLEMENTED`) arriving as those codes; every request our server
//! sees is HTTP/2, and the fds of the test process are back where they
//! were after each test. Deadlines (`grpc-timeout`) both ways, against
//! grpcio and against tonic's own transport on Tokio: our server drops a
//! late handler and answers DEADLINE_EXCEEDED, our channel cancels a late
//! call and resets its stream (seen on the wire by a relay).
//!
//! The greeter (messages, server routing, client) is the example's,
//! shared through `#[path]`; the Python peers are `tests/py/grpc_*.py`,
//! with protobuf encoded by hand so they need only `grpcio`.

mod common;
#[path = "../examples/greeter/mod.rs"]
mod greeter;

use std::future::{Future, IntoFuture};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use greeter::client::GreeterClient;
use greeter::proto::{HelloReply, HelloRequest};
use greeter::server::GreeterServer;
use http::uri::PathAndQuery;
use http::Version;
use spargio::net::TcpListener;
use spargio::{CancellationToken, RuntimeHandle};
use spargio_http::grpc::Channel;
use spargio_test_peers::{require_peer, Peer};
use spargio_tls::{TlsAcceptor, TlsConnector};
use tonic::client::Grpc;
use tonic::{Code, Status};
use tonic_prost::ProstCodec;

use common::{assert_fds_back_to, bounded, fd_count, run, self_signed, serial, temp_file, HANG};

/// The name sent in the 1 MiB `SayHello` (printable, so Python's pattern
/// in `grpc_client.py` matches it character for character).
fn name_pattern(n: usize) -> String {
    (0..n)
        .map(|i| (33 + (i * 7 + (i >> 12)) % 90) as u8 as char)
        .collect()
}

const BIG: usize = 1 << 20;

// ===== fds and certificates =====

/// Runs `test` alone (the tests share the process's fd table) and fails
/// unless the fd count is back where it was afterwards.
fn fds_restored<T>(test: impl FnOnce() -> T) -> T {
    let _serial = serial();
    tokio_globals_made();
    let fds = fd_count();
    let out = test();
    assert_fds_back_to(fds);
    out
}

/// The first Tokio runtime with I/O in a build where Tokio's `signal`
/// feature is on (a `cargo test --workspace` build: another crate's
/// dependency turns it on) opens a socket pair that lives as long as the
/// process (Tokio's signal globals). Made here, before a test takes its
/// fd baseline, so it is not counted as the test's leak.
fn tokio_globals_made() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        drop(
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime"),
        );
    });
}

/// A self-signed certificate for `127.0.0.1` (and `localhost`): PEM for
/// our side, files for the Python peers (removed on drop).
struct TestCert {
    cert_pem: String,
    key_pem: String,
    cert_file: PathBuf,
    key_file: PathBuf,
}

impl TestCert {
    fn new() -> TestCert {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let (cert_pem, key_pem) = self_signed();
        TestCert {
            cert_file: temp_file(&format!("grpc-cert-{n}.pem"), cert_pem.as_bytes()),
            key_file: temp_file(&format!("grpc-key-{n}.pem"), key_pem.as_bytes()),
            cert_pem,
            key_pem,
        }
    }

    /// Our server's side.
    fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from_pem(self.cert_pem.as_bytes(), self.key_pem.as_bytes()).unwrap()
    }

    /// Our client's side: trusts this certificate.
    fn connector(&self) -> TlsConnector {
        TlsConnector::with_root_ca_pem(self.cert_pem.as_bytes()).unwrap()
    }
}

impl Drop for TestCert {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.cert_file);
        let _ = std::fs::remove_file(&self.key_file);
    }
}

// ===== runtime and server =====

/// Our greeter served on 127.0.0.1 (over TLS with `tls`) by its own
/// runtime (a thread) while `f(port)` runs on the calling thread; then
/// shut down gracefully, and the server's result checked. gRPC is
/// HTTP/2: fails unless the server saw requests, all of them HTTP/2
/// (over TLS, so ALPN chose `h2`).
fn with_greeter_server(tls: Option<TlsAcceptor>, f: impl FnOnce(u16)) {
    let stop = CancellationToken::new();
    // Stops the server however `f` ends, a panic included.
    struct StopOnDrop(CancellationToken);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.cancel();
        }
    }
    let _stop_on_drop = StopOnDrop(stop.clone());
    let versions = Arc::new(Mutex::new(Vec::new()));
    let service = recording_versions(versions.clone());
    let (port_tx, port_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            spargio::block_on(spargio::run(move |handle| async move {
                let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
                let _ = port_tx.send(listener.local_addr()?.port());
                let signal = async move { stop.cancelled().await };
                let mut serve = spargio_http::serve(listener, service);
                if let Some(acceptor) = tls {
                    serve = serve.tls(acceptor);
                }
                let server = serve.with_graceful_shutdown(signal).into_future();
                handle
                    .spawn_stealable(server)
                    .expect("spawn the server")
                    .await
                    .expect("server task")
            }))
        }));
        let _ = done_tx.send(out);
    });
    let Ok(port) = port_rx.recv_timeout(HANG) else {
        match done_rx.try_recv() {
            Ok(Ok(Ok(Err(e)))) => panic!("server failed before it bound a port: {e}"),
            _ => panic!("server bound no port"),
        }
    };
    f(port);
    drop(_stop_on_drop);
    match done_rx.recv_timeout(HANG) {
        Ok(Ok(Ok(Ok(())))) => {}
        Ok(Ok(Ok(Err(e)))) => panic!("server failed: {e}"),
        Ok(Ok(Err(e))) => panic!("runtime failed: {e:?}"),
        Ok(Err(_)) => panic!("server thread panicked"),
        Err(_) => panic!("server did not shut down"),
    }
    let versions = versions.lock().unwrap();
    assert!(!versions.is_empty(), "the server saw no request");
    assert!(
        versions.iter().all(|v| *v == Version::HTTP_2),
        "gRPC over {versions:?}"
    );
}

type Versions = Arc<Mutex<Vec<Version>>>;

/// The greeter, noting each request's HTTP version in `versions`.
fn recording_versions(
    versions: Versions,
) -> tower::util::MapRequest<GreeterServer, impl FnMut(Request) -> Request + Clone> {
    tower::util::MapRequest::new(GreeterServer, move |req: Request| {
        versions.lock().unwrap().push(req.version());
        req
    })
}

type Request = http::Request<hyper::body::Incoming>;

/// `http://127.0.0.1:port`, or `https://` with `tls`.
fn origin(port: u16, tls: bool) -> http::Uri {
    let scheme = if tls { "https" } else { "http" };
    format!("{scheme}://127.0.0.1:{port}").parse().unwrap()
}

/// Our greeter client for 127.0.0.1:`port`: h2c by prior knowledge, or
/// with `tls` HTTPS trusting its certificate (ALPN offers `h2` and
/// `http/1.1`: the server picks HTTP/2).
fn greeter_client(handle: &RuntimeHandle, port: u16, tls: Option<TlsConnector>) -> GreeterClient {
    match tls {
        None => GreeterClient::new(handle, origin(port, false)),
        Some(connector) => {
            let http = spargio_http::Client::builder(handle)
                .tls(connector)
                .build::<tonic::body::Body>();
            GreeterClient::with_client(http, origin(port, true))
        }
    }
}

// ===== Python peers =====

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(name)
}

/// Kills the child when dropped, so no path leaves it running.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `grpc_client.py [--tls CAFILE] PORT calls...` to completion
/// (killed after `HANG`) and returns its output lines, one per call. With
/// `ca`, the client speaks TLS trusting that certificate.
fn python_client(port: u16, ca: Option<&Path>, calls: &[&str]) -> Vec<String> {
    spargio_test_peers::assert_present(Peer::PythonGrpcio);
    let mut command = Command::new("python3");
    command.arg(script("grpc_client.py"));
    if let Some(ca) = ca {
        command.arg("--tls").arg(ca);
    }
    let child = command
        .arg(port.to_string())
        .args(calls)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    let out = wait_bounded(child);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "grpc_client.py failed ({}): stdout {stdout:?} stderr {:?}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_owned).collect()
}

/// Waits for `child`, killing it after `HANG`.
fn wait_bounded(child: Child) -> Output {
    let mut child = Killed(child);
    let start = Instant::now();
    while child.0.try_wait().expect("try_wait").is_none() {
        assert!(start.elapsed() < HANG, "python peer hung");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut out = Output {
        status: child.0.wait().expect("wait"),
        stdout: Vec::new(),
        stderr: Vec::new(),
    };
    use std::io::Read;
    if let Some(mut s) = child.0.stdout.take() {
        s.read_to_end(&mut out.stdout).expect("read stdout");
    }
    if let Some(mut s) = child.0.stderr.take() {
        s.read_to_end(&mut out.stderr).expect("read stderr");
    }
    out
}

/// `grpc_server.py`: serves until its stdin closes; killed when dropped.
struct PyServer {
    port: u16,
    _stdin: ChildStdin,
    _child: Killed,
}

impl PyServer {
    /// Starts the server: plain, or with `cert` over TLS with it.
    fn start(cert: Option<&TestCert>) -> PyServer {
        spargio_test_peers::assert_present(Peer::PythonGrpcio);
        let mut command = Command::new("python3");
        command.arg(script("grpc_server.py"));
        if let Some(cert) = cert {
            command
                .arg("--tls")
                .arg(&cert.cert_file)
                .arg(&cert.key_file);
        }
        let mut child = Killed(
            command
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("python3"),
        );
        let stdin = child.0.stdin.take().unwrap();
        let stdout = child.0.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(HANG)
            .expect("grpc_server.py printed no port");
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("grpc_server.py printed {line:?}, not a port"));
        PyServer {
            port,
            _stdin: stdin,
            _child: child,
        }
    }
}

// ===== grpcio client → our server =====

/// grpcio's unary, 1 MiB and streaming calls to our greeter (over TLS
/// with `cert`), each answered in full.
fn grpcio_calls_tonic(cert: Option<&TestCert>) {
    let big = format!("big:{BIG}");
    let ca = cert.map(|c| c.cert_file.as_path());
    with_greeter_server(cert.map(TestCert::acceptor), |port| {
        let lines = python_client(port, ca, &["hello:grpcio", &big, "stream:grpcio:100"]);
        assert_eq!(
            lines,
            [
                "OK Hello, grpcio!".to_owned(),
                format!("OK big {}", BIG + "Hello, !".len()),
                "OK stream 100 Hello, grpcio! (100/100)".to_owned(),
            ]
        );
    });
}

/// grpcio's calls our greeter refuses (over TLS with `cert`) get their
/// status codes, and the channel carries on.
fn grpcio_gets_statuses_from_tonic(cert: Option<&TestCert>) {
    let ca = cert.map(|c| c.cert_file.as_path());
    let calls = [
        "hello:",
        "stream::3",
        "method:/helloworld.Greeter/SayGoodbye",
        "hello:still serving",
    ];
    with_greeter_server(cert.map(TestCert::acceptor), |port| {
        assert_eq!(
            python_client(port, ca, &calls),
            [
                "ERR INVALID_ARGUMENT name is empty",
                "ERR INVALID_ARGUMENT name is empty",
                "ERR UNIMPLEMENTED ",
                "OK Hello, still serving!",
            ]
        );
    });
}

#[test]
fn grpcio_client_calls_tonic_server() {
    require_peer!(Peer::PythonGrpcio);
    fds_restored(|| grpcio_calls_tonic(None));
}

#[test]
fn grpcio_client_gets_status_codes_from_tonic_server() {
    require_peer!(Peer::PythonGrpcio);
    fds_restored(|| grpcio_gets_statuses_from_tonic(None));
}

#[test]
fn grpcio_client_calls_tonic_server_over_tls() {
    require_peer!(Peer::PythonGrpcio);
    fds_restored(|| grpcio_calls_tonic(Some(&TestCert::new())));
}

#[test]
fn grpcio_client_gets_status_codes_from_tonic_server_over_tls() {
    require_peer!(Peer::PythonGrpcio);
    fds_restored(|| grpcio_gets_statuses_from_tonic(Some(&TestCert::new())));
}

// ===== our client → grpcio server =====

/// Unary, 1 MiB and streaming calls to grpcio's greeter, answered in full.
async fn calls_to_grpcio(mut client: GreeterClient) {
    let reply = client.say_hello("spargio").await.expect("SayHello");
    assert_eq!(reply.message, "Hello, spargio, from grpcio!");

    let name = name_pattern(BIG);
    let reply = client.say_hello(&name).await.expect("1 MiB SayHello");
    assert!(
        reply.message == format!("Hello, {name}, from grpcio!"),
        "the 1 MiB reply differs ({} bytes)",
        reply.message.len()
    );

    let replies = client
        .say_hello_stream("stream", 100)
        .await
        .expect("stream");
    let got: Vec<String> = replies.into_iter().map(|r| r.message).collect();
    let want: Vec<String> = (1..=100)
        .map(|i| format!("Hello, stream, from grpcio! ({i}/100)"))
        .collect();
    assert_eq!(got, want);
}

/// grpcio's refusals arrive as their status codes; the connection
/// carries on.
async fn statuses_from_grpcio(mut client: GreeterClient) {
    let status = client.say_hello("").await.expect_err("empty name");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(status.message(), "name is empty");

    let status = client
        .say_hello_stream("", 3)
        .await
        .expect_err("empty name");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(status.message(), "name is empty");

    // The connection carries on after an error status.
    let reply = client.say_hello("after").await.expect("SayHello");
    assert_eq!(reply.message, "Hello, after, from grpcio!");
}

/// `check(client)` against a grpcio greeter (over TLS with `cert`),
/// on a runtime of its own.
fn against_grpcio<F, Fut>(cert: Option<&TestCert>, check: F)
where
    F: FnOnce(GreeterClient) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let server = PyServer::start(cert);
    let (port, tls) = (server.port, cert.map(TestCert::connector));
    run(move |handle| check(greeter_client(&handle, port, tls)));
}

#[test]
fn tonic_client_calls_grpcio_server() {
    require_peer!(Peer::PythonGrpcio);
    fds_restored(|| against_grpcio(None, calls_to_grpcio));
}

#[test]
fn tonic_client_gets_status_codes_from_grpcio_server() {
    require_peer!(Peer::PythonGrpcio);
    fds_restored(|| against_grpcio(None, statuses_from_grpcio));
}

#[test]
fn tonic_client_calls_grpcio_server_over_tls() {
    require_peer!(Peer::PythonGrpcio);
    fds_restored(|| against_grpcio(Some(&TestCert::new()), calls_to_grpcio));
}

#[test]
fn tonic_client_gets_status_codes_from_grpcio_server_over_tls() {
    require_peer!(Peer::PythonGrpcio);
    fds_restored(|| against_grpcio(Some(&TestCert::new()), statuses_from_grpcio));
}

// ===== both sides spargio =====

/// Unary, 1 MiB, 1000-reply streaming and 32 × 20 concurrent calls to our
/// greeter, each answered with its own name.
async fn calls_to_tonic(handle: RuntimeHandle, mut client: GreeterClient) {
    let reply = client.say_hello("spargio").await.expect("SayHello");
    assert_eq!(reply.message, "Hello, spargio!");

    let name = name_pattern(BIG);
    let reply = client.say_hello(&name).await.expect("1 MiB SayHello");
    assert!(
        reply.message == format!("Hello, {name}!"),
        "the 1 MiB reply differs ({} bytes)",
        reply.message.len()
    );

    let replies = client.say_hello_stream("s", 1000).await.expect("stream");
    assert_eq!(replies.len(), 1000);
    for (i, reply) in replies.iter().enumerate() {
        assert_eq!(reply.message, format!("Hello, s! ({}/1000)", i + 1));
    }

    // 32 tasks × 20 calls at once: HTTP/2 streams multiplexed on the
    // client's one pooled connection, each answered with its own name.
    let mut tasks = Vec::new();
    for t in 0..32 {
        let mut client = client.clone();
        tasks.push(
            handle
                .spawn_stealable(async move {
                    for i in 0..20 {
                        let name = format!("task {t} call {i}");
                        let reply = client.say_hello(&name).await.expect("SayHello");
                        assert_eq!(reply.message, format!("Hello, {name}!"));
                    }
                })
                .expect("spawn"),
        );
    }
    for task in tasks {
        task.await.expect("caller task");
    }
}

/// Our greeter's refusals arrive as their status codes; the connection
/// carries on.
async fn statuses_from_tonic(mut client: GreeterClient) {
    let status = client.say_hello("").await.expect_err("empty name");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(status.message(), "name is empty");

    let status = client
        .say_hello_stream("too many", greeter::server::MAX_STREAM_REPLIES + 1)
        .await
        .expect_err("over the limit");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");

    let reply = client.say_hello("after").await.expect("SayHello");
    assert_eq!(reply.message, "Hello, after!");
}

#[test]
fn tonic_client_calls_tonic_server() {
    fds_restored(|| {
        with_greeter_server(None, |port| {
            run(move |handle| async move {
                let client = greeter_client(&handle, port, None);
                calls_to_tonic(handle, client).await;
            })
        })
    });
}

#[test]
fn tonic_client_gets_status_codes_from_tonic_server() {
    fds_restored(|| {
        with_greeter_server(None, |port| {
            run(move |handle| statuses_from_tonic(greeter_client(&handle, port, None)))
        })
    });
}

/// Both sides spargio over TLS: the client offers `h2` and `http/1.1`,
/// the server's ALPN picks `h2` (`with_greeter_server` checks every
/// request was HTTP/2), and every call and status arrives as over h2c.
#[test]
fn tonic_client_calls_tonic_server_over_tls() {
    let cert = TestCert::new();
    fds_restored(|| {
        with_greeter_server(Some(cert.acceptor()), |port| {
            let tls = cert.connector();
            run(move |handle| async move {
                let client = greeter_client(&handle, port, Some(tls));
                calls_to_tonic(handle, client.clone()).await;
                statuses_from_tonic(client).await;
            })
        })
    });
}

// ===== failures the channel maps =====

/// A server that is not there is `UNAVAILABLE` (what gRPC clients
/// retry), plain and over TLS; a server that accepts and never answers,
/// with a request timeout, is `CANCELLED` (tonic's own channel reports its
/// timeouts so).
#[test]
fn unreachable_is_unavailable_and_a_timeout_is_cancelled() {
    let cert = TestCert::new();
    fds_restored(|| {
        // A port nobody listens on: bound, then closed.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        // A listener that never answers (the kernel completes the TCP
        // handshake; nobody speaks HTTP/2).
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let silent_port = silent.local_addr().unwrap().port();
        let tls = cert.connector();
        run(move |handle| async move {
            let mut plain = greeter_client(&handle, port, None);
            let status = plain.say_hello("anyone").await.expect_err("nobody listens");
            assert_eq!(status.code(), Code::Unavailable, "{status:?}");
            let mut secure = greeter_client(&handle, port, Some(tls));
            let status = secure
                .say_hello("anyone")
                .await
                .expect_err("nobody listens");
            assert_eq!(status.code(), Code::Unavailable, "{status:?}");

            let http = spargio_http::Client::builder(&handle)
                .http2_prior_knowledge()
                .request_timeout(Some(Duration::from_millis(200)))
                .build::<tonic::body::Body>();
            let mut slow = GreeterClient::with_client(http, origin(silent_port, false));
            let status = slow.say_hello("anyone").await.expect_err("no answer");
            assert_eq!(status.code(), Code::Cancelled, "{status:?}");
        });
        drop(silent);
    });
}

// ===== deadlines (`grpc-timeout`) =====
//
// A call's deadline ends it on both sides: our server drops a handler
// that is still running when the deadline passes and answers
// DEADLINE_EXCEEDED; our channel ends the call as CANCELLED "Timeout
// expired" (as tonic's own channel does) and resets the stream. Each
// test asserts outcomes (status codes, whether a handler's future was
// dropped before its code after the sleep ran), never how long anything
// took.

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
