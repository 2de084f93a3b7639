//! Graceful shutdown: in-flight requests finish, new connections are
//! refused, the serve future returns; past the grace period the rest are
//! closed. And the same in a child process stopped by SIGTERM.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;

fn get(addr: std::net::SocketAddr, path: &str) -> std::thread::JoinHandle<Vec<u8>> {
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n");
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(HANG)).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        out
    })
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + HANG;
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn in_flight_requests_finish_and_new_connections_are_refused() {
    let _serial = serial();
    let fds = fd_count();
    let server = TestServer::start(|s| s);
    let addr = server.addr;
    // An idle keep-alive connection (one request done): closed by the drain.
    let mut idle = TcpStream::connect(addr).unwrap();
    idle.set_read_timeout(Some(HANG)).unwrap();
    idle.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 1024];
    assert!(read_some(&mut idle, &mut buf).unwrap() > 0);
    // Four slow requests in flight (HTTP/1.1 keep-alive: hyper closes
    // each connection after its response).
    let slow: Vec<_> = (0..4).map(|_| get(addr, "/slow/400")).collect();
    let state = server.state.clone();
    wait_until("slow requests never arrived", || {
        state.in_slow.load(Ordering::SeqCst) == 4
    });
    server.trigger_stop();
    for t in slow {
        let out = t.join().unwrap();
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.ends_with("slept 400"), "{text}");
    }
    // The idle one was closed.
    // End of stream, or a reset: closed either way.
    assert_eq!(read_some(&mut idle, &mut buf).unwrap_or(0), 0);
    drop(idle);
    server.stop().unwrap();
    let refused = TcpStream::connect(addr).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
    assert_fds_back_to(fds);
}

#[test]
fn past_the_grace_period_the_rest_are_closed() {
    let _serial = serial();
    let server = TestServer::start_with(app, |s| s, Duration::from_millis(200));
    let slow = get(server.addr, "/slow/600000");
    let state = server.state.clone();
    wait_until("slow request never arrived", || {
        state.in_slow.load(Ordering::SeqCst) == 1
    });
    server.stop().unwrap();
    // Closed without a response.
    assert!(slow.join().unwrap().is_empty());
}

#[test]
fn http2_connections_drain_with_goaway() {
    if !spargio_test_peers::available(spargio_test_peers::Peer::Curl) {
        return;
    }
    let _serial = serial();
    let server = TestServer::start(|s| s);
    let state = server.state.clone();
    let url = server.url("/slow/400");
    let curl = std::thread::spawn(move || curl(&["--http2-prior-knowledge", &url]));
    wait_until("slow request never arrived", || {
        state.in_slow.load(Ordering::SeqCst) == 1
    });
    server.stop().unwrap();
    let out = curl.join().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"slept 400");
}

const CHILD_ENV: &str = "SPARGIO_HTTP_SIGTERM_CHILD";

/// Runs in the child process only (the parent re-executes this binary
/// with `CHILD_ENV` set): serves until SIGTERM, then drains.
#[test]
fn sigterm_child_server() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let rt = spargio::Runtime::builder().shards(2).build().unwrap();
    let handle = rt.handle();
    let served = spargio::block_on(
        handle
            .clone()
            .spawn_stealable(async move {
                let h = spargio::ShardCtx::current().unwrap().handle();
                let mut term = spargio_signal::signal(&h, &[libc::SIGTERM]).unwrap();
                let listener = spargio::net::TcpListener::bind(&h, "127.0.0.1:0")
                    .await
                    .unwrap();
                let state = AppState::default();
                let inflight = state.in_slow.clone();
                println!("listening {}", listener.local_addr().unwrap());
                // Report when the slow request is in flight.
                h.spawn_stealable(async move {
                    while inflight.load(Ordering::SeqCst) == 0 {
                        spargio::time::sleep(Duration::from_millis(5)).await;
                    }
                    println!("inflight");
                })
                .unwrap();
                spargio_http::serve(listener, app(state))
                    .with_graceful_shutdown(async move {
                        let _ = term.recv().await;
                    })
                    .await
            })
            .unwrap(),
    )
    .unwrap();
    served.unwrap();
    println!("drained");
}

#[test]
fn sigterm_drains_a_child_process_and_it_exits_zero() {
    use std::io::BufRead;
    let _serial = serial();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "sigterm_child_server",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, "1")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    // A failed assertion must not leave the child serving.
    struct KillOnDrop(libc::pid_t);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            // SAFETY: kill(2) on our own child's pid; harmless if reaped.
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
    let mut guard = Some(KillOnDrop(pid));
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    let next_line = |want: &str| loop {
        let line = rx
            .recv_timeout(HANG)
            .unwrap_or_else(|_| panic!("child never printed {want}"));
        // The harness prints "test NAME ... " before the first line.
        if let Some(at) = line.find(want) {
            return line[at + want.len()..].to_owned();
        }
    };
    let addr: std::net::SocketAddr = next_line("listening ").trim().parse().unwrap();
    let slow = get(addr, "/slow/300");
    next_line("inflight");
    // SAFETY: kill(2) with a pid of our own child and a valid signal.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let out = slow.join().unwrap();
    let text = String::from_utf8_lossy(&out);
    assert!(
        text.starts_with("HTTP/1.1 200") && text.ends_with("slept 300"),
        "{text}"
    );
    next_line("drained");
    let status = bounded("child exit", move || child.wait().unwrap());
    std::mem::forget(guard.take());
    assert!(status.success(), "child: {status:?}");
    let refused = TcpStream::connect(addr).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
}
