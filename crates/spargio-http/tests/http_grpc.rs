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
    common::tokio_globals_made();
    let fds = fd_count();
    let out = test();
    assert_fds_back_to(fds);
    out
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

#[path = "http_grpc/deadline.rs"]
mod deadline;
