//! SIGTERM to a child process running the `graceful_shutdown` example: the
//! requests in flight are answered in full and the process exits 0.
//!
//! The child is this test binary run again with `GRACEFUL_CHILD` set, so
//! it runs the example's `main` (compiled in below) and nothing else.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

#[path = "../examples/graceful_shutdown.rs"]
#[allow(dead_code)]
mod example;

#[test]
fn child_entry() {
    if std::env::var_os("GRACEFUL_CHILD").is_some() {
        example::run(0).unwrap();
    }
}

#[test]
fn sigterm_finishes_requests_in_flight_and_exits_zero() {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
        .env("GRACEFUL_CHILD", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        assert_ne!(out.read_line(&mut line).unwrap(), 0, "child ended early");
        // The harness may have printed `test child_entry ... ` first.
        if let Some((_, addr)) = line.trim().split_once("listening ") {
            break addr.to_string();
        }
    };
    // Three requests in flight (each takes 300 ms to answer)...
    let mut clients: Vec<TcpStream> = (0..3)
        .map(|i| {
            let mut c = TcpStream::connect(&addr).unwrap();
            writeln!(c, "request {i}").unwrap();
            c
        })
        .collect();
    let mut probe = TcpStream::connect(&addr).unwrap();
    writeln!(probe, "probe").unwrap();
    // ...all four accepted (the child logs each) before the signal.
    let mut log = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut accepted = 0;
    while accepted < 4 {
        let line = log.next().expect("child ended early").unwrap();
        accepted += usize::from(line.starts_with("accepted "));
    }
    // SAFETY: kill on the pid of the child we spawned and have not reaped.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    for (i, c) in clients.iter_mut().enumerate() {
        let mut reply = String::new();
        c.read_to_string(&mut reply).unwrap();
        assert_eq!(reply, format!("done request {i}\n"));
    }
    let mut reply = String::new();
    probe.read_to_string(&mut reply).unwrap();
    assert_eq!(reply, "done probe\n");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("drained 4"), "{rest}");
    // After the shutdown nothing listens.
    assert!(TcpStream::connect(&addr).is_err());
}
