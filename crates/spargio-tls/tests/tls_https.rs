//! The HTTPS example (hyper over spargio-tls) against `curl --cacert`:
//! 1,000 sequential requests over keep-alive, then 64 concurrent
//! connections, every body checked; curl verifies our chain.

mod common;

#[path = "../examples/https_server.rs"]
mod https_server;

use std::path::Path;
use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::pki;
use spargio_test_peers::{require_peer, Peer};

const LIMIT: Duration = Duration::from_secs(120);

/// Starts the example's server on a runtime thread; returns its port.
fn start(cert: &Path, key: &Path) -> u16 {
    let acceptor = https_server::acceptor(cert.to_str().unwrap(), key.to_str().unwrap()).unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = spargio::block_on(spargio::run(move |handle| async move {
            let listener = spargio::net::TcpListener::bind(&handle, "127.0.0.1:0")
                .await
                .unwrap();
            tx.send(listener.local_addr().unwrap().port()).unwrap();
            https_server::serve(handle, listener, acceptor).await
        }));
    });
    rx.recv_timeout(LIMIT).expect("server listening")
}

/// Runs curl with a deadline (killed past it).
fn curl(args: &[String]) -> Output {
    let mut child = Command::new("curl")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + LIMIT;
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("curl did not finish within {LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn base_args(ca: &Path, port: u16, out_dir: &Path) -> Vec<String> {
    vec![
        "--silent".into(),
        "--show-error".into(),
        "--fail".into(),
        "--cacert".into(),
        ca.to_str().unwrap().into(),
        "--resolve".into(),
        format!("localhost:{port}:127.0.0.1"),
        "--output".into(),
        format!("{}/#1", out_dir.display()),
        "--write-out".into(),
        "%{http_code} %{num_connects} %{http_version}\\n".into(),
    ]
}

fn check_bodies(out_dir: &Path, prefix: &str, n: usize) {
    for i in 0..n {
        let body = std::fs::read(out_dir.join(i.to_string())).unwrap();
        assert_eq!(
            body,
            format!("hello /{prefix}/{i}\n").as_bytes(),
            "request {i}"
        );
    }
}

#[test]
fn curl_sequential_and_concurrent() {
    require_peer!(Peer::Curl);
    let pki = pki("https", false);
    let port = start(&pki.leaf_file, &pki.key_file);

    // 1,000 sequential requests: one curl, URL globbing, keep-alive.
    let seq = pki.dir.join("seq");
    std::fs::create_dir_all(&seq).unwrap();
    let mut args = base_args(&pki.ca_file, port, &seq);
    args.push(format!("https://localhost:{port}/seq/[0-999]"));
    let out = curl(&args);
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), 1000);
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("200 ") && l.ends_with(" 1.1")),
        "{lines:?}"
    );
    // Keep-alive: one TLS connection for all of them.
    let connects: usize = lines
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap().parse::<usize>().unwrap())
        .sum();
    assert_eq!(connects, 1, "expected one connection reused");
    check_bodies(&seq, "seq", 1000);

    // 64 concurrent connections.
    let par = pki.dir.join("par");
    std::fs::create_dir_all(&par).unwrap();
    let mut args = base_args(&pki.ca_file, port, &par);
    args.extend([
        "--parallel".into(),
        "--parallel-immediate".into(),
        "--parallel-max".into(),
        "64".into(),
        format!("https://localhost:{port}/par/[0-63]"),
    ]);
    let out = curl(&args);
    assert!(
        out.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), 64);
    assert!(lines.iter().all(|l| l.starts_with("200 ")), "{lines:?}");
    let connects: usize = lines
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap().parse::<usize>().unwrap())
        .sum();
    assert!(
        connects > 1,
        "parallel transfers should open several connections"
    );
    check_bodies(&par, "par", 64);

    // A client that does not trust our CA is refused by curl itself.
    let out = curl(&[
        "--silent".into(),
        "--resolve".into(),
        format!("localhost:{port}:127.0.0.1"),
        format!("https://localhost:{port}/untrusted"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(60),
        "curl exit 60: peer certificate not trusted"
    );
}
