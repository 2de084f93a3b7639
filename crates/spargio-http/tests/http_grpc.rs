//! gRPC with tonic on spargio-http, against Python `grpcio` as the
//! independent peer: grpcio's client calls our tonic server, our tonic
//! client (over `spargio_http::Client`, HTTP/2 prior knowledge) calls a
//! grpcio server, and both sides spargio. Unary, server streaming, a 1 MiB
//! message, concurrent calls on one connection, and error statuses
//! (`INVALID_ARGUMENT`, `UNIMPLEMENTED`) arriving as those codes.
//!
//! The greeter (messages, server routing, client) is the example's,
//! shared through `#[path]`; the Python peers are `tests/py/grpc_*.py`,
//! with protobuf encoded by hand so they need only `grpcio`.

mod common;
#[path = "../examples/greeter/mod.rs"]
mod greeter;

use std::future::IntoFuture;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use greeter::client::GreeterClient;
use greeter::server::GreeterServer;
use spargio::net::TcpListener;
use spargio::CancellationToken;
use spargio_test_peers::{require_peer, Peer};
use tonic::Code;

use common::{run, HANG};

/// The name sent in the 1 MiB `SayHello` (printable, so Python's pattern
/// in `grpc_client.py` matches it character for character).
fn name_pattern(n: usize) -> String {
    (0..n)
        .map(|i| (33 + (i * 7 + (i >> 12)) % 90) as u8 as char)
        .collect()
}

const BIG: usize = 1 << 20;

// ===== runtime and server =====

/// Our greeter served on 127.0.0.1 by its own runtime (a thread) while
/// `f(port)` runs on the calling thread; then shut down gracefully, and
/// the server's result checked.
fn with_greeter_server<T>(f: impl FnOnce(u16) -> T) -> T {
    let stop = CancellationToken::new();
    // Stops the server however `f` ends, a panic included.
    struct StopOnDrop(CancellationToken);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.cancel();
        }
    }
    let _stop_on_drop = StopOnDrop(stop.clone());
    let (port_tx, port_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            spargio::block_on(spargio::run(move |handle| async move {
                let listener = TcpListener::bind(&handle, "127.0.0.1:0").await?;
                let _ = port_tx.send(listener.local_addr()?.port());
                let signal = async move { stop.cancelled().await };
                let server = spargio_http::serve(listener, GreeterServer)
                    .with_graceful_shutdown(signal)
                    .into_future();
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
    let out = f(port);
    drop(_stop_on_drop);
    match done_rx.recv_timeout(HANG) {
        Ok(Ok(Ok(Ok(())))) => {}
        Ok(Ok(Ok(Err(e)))) => panic!("server failed: {e}"),
        Ok(Ok(Err(e))) => panic!("runtime failed: {e:?}"),
        Ok(Err(_)) => panic!("server thread panicked"),
        Err(_) => panic!("server did not shut down"),
    }
    out
}

fn origin(port: u16) -> http::Uri {
    format!("http://127.0.0.1:{port}").parse().unwrap()
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

/// Runs `grpc_client.py PORT calls...` to completion (killed after
/// `HANG`) and returns its output lines, one per call.
fn python_client(port: u16, calls: &[&str]) -> Vec<String> {
    spargio_test_peers::assert_present(Peer::PythonGrpcio);
    let child = Command::new("python3")
        .arg(script("grpc_client.py"))
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
    fn start() -> PyServer {
        spargio_test_peers::assert_present(Peer::PythonGrpcio);
        let mut child = Killed(
            Command::new("python3")
                .arg(script("grpc_server.py"))
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

#[test]
fn grpcio_client_calls_tonic_server() {
    require_peer!(Peer::PythonGrpcio);
    let big = format!("big:{BIG}");
    let lines = with_greeter_server(|port| {
        python_client(port, &["hello:grpcio", &big, "stream:grpcio:100"])
    });
    assert_eq!(
        lines,
        [
            "OK Hello, grpcio!".to_owned(),
            format!("OK big {}", BIG + "Hello, !".len()),
            "OK stream 100 Hello, grpcio! (100/100)".to_owned(),
        ]
    );
}

#[test]
fn grpcio_client_gets_status_codes_from_tonic_server() {
    require_peer!(Peer::PythonGrpcio);
    let lines = with_greeter_server(|port| {
        python_client(
            port,
            &[
                "hello:",
                "stream::3",
                "method:/helloworld.Greeter/SayGoodbye",
                "hello:still serving",
            ],
        )
    });
    assert_eq!(
        lines,
        [
            "ERR INVALID_ARGUMENT name is empty",
            "ERR INVALID_ARGUMENT name is empty",
            "ERR UNIMPLEMENTED ",
            "OK Hello, still serving!",
        ]
    );
}

// ===== our client → grpcio server =====

#[test]
fn tonic_client_calls_grpcio_server() {
    require_peer!(Peer::PythonGrpcio);
    let server = PyServer::start();
    let origin = origin(server.port);
    run(move |handle| async move {
        let mut client = GreeterClient::new(&handle, origin);
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
    });
}

#[test]
fn tonic_client_gets_status_codes_from_grpcio_server() {
    require_peer!(Peer::PythonGrpcio);
    let server = PyServer::start();
    let origin = origin(server.port);
    run(move |handle| async move {
        let mut client = GreeterClient::new(&handle, origin);
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
    });
}

// ===== both sides spargio =====

#[test]
fn tonic_client_calls_tonic_server() {
    let lines = with_greeter_server(|port| {
        let origin = origin(port);
        run(move |handle| async move {
            let mut client = GreeterClient::new(&handle, origin);
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
            "done"
        })
    });
    assert_eq!(lines, "done");
}

#[test]
fn tonic_client_gets_status_codes_from_tonic_server() {
    with_greeter_server(|port| {
        let origin = origin(port);
        run(move |handle| async move {
            let mut client = GreeterClient::new(&handle, origin);
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
        })
    });
}
