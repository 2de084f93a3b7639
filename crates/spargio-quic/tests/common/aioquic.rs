//! Python aioquic (PyPI) as a QUIC server and client, run as child
//! processes from `tests/py/`. A test that uses them starts with
//! `require_peer!(Peer::PythonAioquic)` (`spargio-test-peers`): skipped
//! where aioquic is missing, failed there under `SPARGIO_REQUIRE_PEERS=1`
//! (`.ci/run` installs it and sets that).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;

use spargio_test_peers::{assert_present, Peer};

use super::{PemFiles, TestCerts, HANG};

/// What an [`AioquicServer`] does (`--mode` of `aioquic_server.py`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AioquicMode {
    /// Echo each bi stream after its FIN; uni streams and datagrams too.
    Echo,
    /// Answer each bi stream with the checksum of what arrived.
    Sink,
    /// Close with code 42, reason "bye", after the first stream.
    Close,
}

impl AioquicMode {
    fn arg(self) -> &'static str {
        match self {
            AioquicMode::Echo => "echo",
            AioquicMode::Sink => "sink",
            AioquicMode::Close => "close",
        }
    }
}

/// A script under `tests/py/`.
pub fn py_script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(name)
}

/// `aioquic_server.py` on 127.0.0.1, killed when dropped.
#[derive(Debug)]
pub struct AioquicServer {
    child: Child,
    /// The UDP port it listens on.
    pub port: u16,
    _files: PemFiles,
}

impl AioquicServer {
    /// Starts the server with `certs`, ALPN `spargio-test` and `mode`, and
    /// waits for its `LISTENING <port>` line.
    pub fn start(certs: &TestCerts, mode: AioquicMode) -> AioquicServer {
        AioquicServer::start_with(certs, mode, &[])
    }

    /// As [`AioquicServer::start`], with extra command-line arguments
    /// (for example `["--alpn", "other"]`).
    pub fn start_with(certs: &TestCerts, mode: AioquicMode, extra: &[&str]) -> AioquicServer {
        assert_present(Peer::PythonAioquic);
        let files = certs.write_pem_files();
        let mut child = Command::new("python3")
            .arg(py_script("aioquic_server.py"))
            .args(["--host", "127.0.0.1", "--port", "0", "--mode", mode.arg()])
            .arg("--cert")
            .arg(files.cert())
            .arg("--key")
            .arg(files.key())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn python3 aioquic_server.py");
        let stdout = child.stdout.take().expect("server stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            while let Some(Ok(line)) = lines.next() {
                if let Some(port) = line.strip_prefix("LISTENING ") {
                    let _ = tx.send(port.trim().parse::<u16>().ok());
                    break;
                }
            }
            // Keep draining so the child never blocks on a full pipe.
            for _ in lines {}
        });
        let port = match rx.recv_timeout(HANG) {
            Ok(Some(port)) => port,
            other => {
                let _ = child.kill();
                panic!("aioquic_server.py did not print LISTENING <port>: {other:?}");
            }
        };
        AioquicServer {
            child,
            port,
            _files: files,
        }
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }
}

impl Drop for AioquicServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `aioquic_client.py` against `addr` (trusting the test CA, server
/// name `localhost`, ALPN `alpn`) with `args` (for example
/// `["--mode", "upload", "1048576"]`) and returns its output. Async so a
/// spargio test runtime keeps serving while the client runs (the child is
/// waited for on a plain thread); the client bounds itself with
/// `--timeout`.
pub async fn run_aioquic_client(
    addr: SocketAddr,
    certs: &TestCerts,
    alpn: &str,
    args: &[&str],
) -> Output {
    assert_present(Peer::PythonAioquic);
    let files = certs.write_pem_files();
    let mut cmd = Command::new("python3");
    cmd.arg(py_script("aioquic_client.py"))
        .arg("--host")
        .arg(addr.ip().to_string())
        .arg("--port")
        .arg(addr.port().to_string())
        .arg("--ca")
        .arg(files.ca())
        .args(["--alpn", alpn])
        .args(args)
        .stdin(Stdio::null());
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let out = cmd.output();
        drop(files);
        let _ = tx.send(out);
    });
    rx.await
        .expect("aioquic client thread")
        .expect("spawn python3 aioquic_client.py")
}

/// The client's stdout lines.
pub fn stdout_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}
