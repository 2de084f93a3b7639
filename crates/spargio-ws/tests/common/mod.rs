//! Helpers shared by the integration tests: a bounded runtime, payload
//! patterns, and Python `websockets` peers run as child processes (a test
//! that uses them starts with
//! `require_peer!(Peer::PythonWebsockets)`, from `spargio-test-peers`).
#![allow(dead_code)]

use std::future::Future;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use spargio::{Runtime, RuntimeHandle};
use spargio_test_peers::Peer;

/// Generous bound for "this must not hang". Never a performance assertion.
pub const HANG: Duration = Duration::from_secs(60);

/// Runs `f(handle)` as a stealable task on a fresh 2-shard runtime and
/// returns its output; fails the test if it does not finish in `HANG`.
pub fn run<F, Fut>(f: F) -> Fut::Output
where
    F: FnOnce(RuntimeHandle) -> Fut + Send + 'static,
    Fut: Future + Send + 'static,
    Fut::Output: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = Runtime::builder().shards(2).build().expect("runtime");
        let handle = rt.handle();
        let task = handle.spawn_stealable(f(handle.clone())).expect("spawn");
        let out = spargio::block_on(task);
        drop(rt);
        let _ = tx.send(out);
    });
    match rx.recv_timeout(HANG) {
        Ok(Ok(out)) => out,
        Ok(Err(err)) => panic!("test task failed: {err:?}"),
        Err(_) => panic!("test hung"),
    }
}

/// `len` bytes of a pattern that a shifted or dropped chunk would break.
pub fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i >> 12) as u8)
        .collect()
}

/// `len` printable ASCII characters, shifted the same way.
pub fn text_pattern(len: usize) -> String {
    (0..len)
        .map(|i| (33 + (i * 7 + (i >> 12)) % 90) as u8 as char)
        .collect()
}

/// Message sizes across the three frame length encodings (7-bit, 16-bit,
/// 64-bit) and their edges, up to 1 MiB.
pub const SIZES: &[usize] = &[1, 125, 126, 127, 65_535, 65_536, 65_537, 300_000, 1 << 20];

/// A script under `tests/py/`.
pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(name)
}

/// Fails the test when Python's `websockets` is missing, saying the test
/// should start with `require_peer!(Peer::PythonWebsockets)` (which skips
/// it instead); a no-op when it is present.
pub fn require_python_websockets() {
    spargio_test_peers::assert_present(Peer::PythonWebsockets);
}

/// Runs `python3 tests/py/<name> args...` to completion, killed after
/// `HANG`; returns its output.
pub fn python(name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    spargio_test_peers::assert_present(Peer::PythonWebsockets);
    let mut cmd = Command::new("python3");
    cmd.arg(script(name)).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    wait_bounded(child)
}

/// Waits for `child`, killing it after `HANG`.
pub fn wait_bounded(mut child: Child) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > HANG {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "python peer hung; stdout {:?} stderr {:?}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A Python server (`tests/py/<name>`) that prints its port on its first
/// line; killed when dropped.
pub struct PyServer {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
}

impl PyServer {
    pub fn start(name: &str, env: &[(&str, &str)]) -> PyServer {
        spargio_test_peers::assert_present(Peer::PythonWebsockets);
        let mut cmd = Command::new("python3");
        cmd.arg(script(name));
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = match rx.recv_timeout(HANG) {
            Ok(line) => line,
            Err(_) => {
                let _ = child.kill();
                panic!("python server printed no port");
            }
        };
        let port = match line.trim().parse() {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("python server printed {line:?}, not a port");
            }
        };
        PyServer { child, port }
    }
}

impl Drop for PyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// stdout of `out` as text, with stderr in the panic message if it failed.
pub fn stdout_ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "python peer failed ({}): stdout {stdout:?} stderr {:?}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Waits for a helper thread without blocking the shard (a blocked shard
/// cannot run the ring operations, closes included, the thread may be
/// waiting for); bounded by `HANG`.
pub async fn join<T>(thread: std::thread::JoinHandle<T>) -> T {
    let start = Instant::now();
    while !thread.is_finished() {
        assert!(start.elapsed() < HANG, "helper thread hung");
        spargio::sleep(Duration::from_millis(2)).await;
    }
    thread.join().expect("helper thread panicked")
}
