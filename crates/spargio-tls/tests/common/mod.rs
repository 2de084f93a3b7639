//! Shared test fixtures: certificates (rcgen) written as PEM files, and
//! child processes (openssl, curl) that cannot outlive or hang a test.

#![allow(dead_code)]

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// A CA and a leaf for `localhost` / `127.0.0.1` it signed, as PEM, plus
/// the files they are written to.
pub struct Pki {
    pub dir: PathBuf,
    pub ca_pem: String,
    pub ca_der: Vec<u8>,
    pub leaf_pem: String,
    pub leaf_der: Vec<u8>,
    pub key_pem: String,
    pub ca_file: PathBuf,
    pub leaf_file: PathBuf,
    pub key_file: PathBuf,
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ca(name: &str) -> (CertificateParams, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    (params, key)
}

/// A fresh CA and leaf; `expired` makes the leaf's validity end in 2001.
pub fn pki(tag: &str, expired: bool) -> Pki {
    let (ca_params, ca_key) = ca(&format!("spargio-tls test CA {tag}"));
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let mut leaf =
        CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
    leaf.distinguished_name
        .push(DnType::CommonName, "localhost");
    if expired {
        leaf.not_before = rcgen::date_time_ymd(2000, 1, 1);
        leaf.not_after = rcgen::date_time_ymd(2001, 1, 1);
    }
    let issuer = Issuer::new(ca_params, &ca_key);
    let leaf_cert = leaf.signed_by(&leaf_key, &issuer).unwrap();

    let dir = std::env::temp_dir().join(format!(
        "spargio-tls-{tag}-{}-{:?}",
        std::process::id(),
        Instant::now()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let pki = Pki {
        ca_file: dir.join("ca.pem"),
        leaf_file: dir.join("leaf.pem"),
        key_file: dir.join("key.pem"),
        dir,
        ca_pem: ca_cert.pem(),
        ca_der: ca_cert.der().to_vec(),
        leaf_pem: leaf_cert.pem(),
        leaf_der: leaf_cert.der().to_vec(),
        key_pem: leaf_key.serialize_pem(),
    };
    std::fs::write(&pki.ca_file, &pki.ca_pem).unwrap();
    std::fs::write(&pki.leaf_file, &pki.leaf_pem).unwrap();
    std::fs::write(&pki.key_file, &pki.key_pem).unwrap();
    pki
}

/// Whether `program` (`"openssl"` or `"curl"`) runs here, through
/// `spargio_test_peers::available` (a skip line when it does not, a
/// failure under `SPARGIO_REQUIRE_PEERS=1`). New tests start with
/// `require_peer!` instead.
pub fn have(program: &str) -> bool {
    let peer = match program {
        "openssl" => spargio_test_peers::Peer::Openssl,
        "curl" => spargio_test_peers::Peer::Curl,
        other => panic!("no spargio_test_peers::Peer for `{other}`"),
    };
    spargio_test_peers::available(peer)
}

/// A child killed and reaped on drop, whose stdout and stderr are read by
/// threads into channels (so reads can be bounded in time).
pub struct Peer {
    child: Child,
    out: mpsc::Receiver<Vec<u8>>,
    pub seen: Vec<u8>,
    err: mpsc::Receiver<Vec<u8>>,
}

impl Peer {
    /// Spawns `cmd`; the test checked for its program first
    /// (`require_peer!`).
    pub fn spawn(cmd: &mut Command) -> Peer {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn peer");
        let out = pump(child.stdout.take().unwrap());
        let err = pump(child.stderr.take().unwrap());
        Peer {
            child,
            out,
            seen: Vec::new(),
            err,
        }
    }

    pub fn stdin(&mut self) -> &mut std::process::ChildStdin {
        self.child.stdin.as_mut().unwrap()
    }

    /// Reads stdout until it contains `needle`; panics (with what was
    /// seen, and stderr) after `limit`.
    pub fn wait_for(&mut self, needle: &[u8], limit: Duration) {
        let deadline = Instant::now() + limit;
        while !contains(&self.seen, needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(chunk) => self.seen.extend_from_slice(&chunk),
                Err(_) => {
                    let stderr = self.stderr_now();
                    panic!(
                        "peer did not print {:?} within {limit:?}; stdout: {:?}; stderr: {:?}",
                        String::from_utf8_lossy(needle),
                        String::from_utf8_lossy(&self.seen),
                        String::from_utf8_lossy(&stderr),
                    )
                }
            }
        }
    }

    /// Whatever reached stderr so far.
    pub fn stderr_now(&mut self) -> Vec<u8> {
        let mut all = Vec::new();
        while let Ok(chunk) = self.err.try_recv() {
            all.extend_from_slice(&chunk);
        }
        all
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pump(mut from: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            }
        }
    });
    rx
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// A port free right now on 127.0.0.1 (the OS picks it; a peer binds it
/// next, so a rare race with another process is possible).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something listens on `port`.
pub fn wait_listening(port: u16, limit: Duration) -> io::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(_) => return Ok(()),
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Runs `f` in a runtime, failing the test if it takes longer than
/// `limit` (the runtime thread is left behind then; the process ends).
pub fn run_bounded<F, Fut>(limit: Duration, f: F)
where
    F: FnOnce(spargio::RuntimeHandle) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let thread = std::thread::spawn(move || {
        spargio::block_on(spargio::run(f)).unwrap();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => thread.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The runtime thread panicked: surface its panic.
            if let Err(panic) = thread.join() {
                std::panic::resume_unwind(panic);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test did not finish within {limit:?}"),
    }
}

/// Paths to a file inside the crate.
pub fn crate_path(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// A handshake between `acceptor` and `connector` over loopback, then
/// "hi" echoed through it; both ends, to read what was negotiated.
pub async fn echoed_handshake(
    h: spargio::RuntimeHandle,
    acceptor: spargio_tls::TlsAcceptor,
    connector: spargio_tls::TlsConnector,
) -> (spargio_tls::ClientTlsStream, spargio_tls::ServerTlsStream) {
    use spargio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
    let listener = spargio::net::TcpListener::bind(&h, "127.0.0.1:0")
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let server = h
        .spawn_stealable(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut tls = acceptor.accept(tcp).await.unwrap();
            let (res, buf) = tls.read(Vec::with_capacity(16)).await;
            res.unwrap();
            tls.write_all(buf).await.0.unwrap();
            tls.flush().await.unwrap();
            tls
        })
        .unwrap();
    let options = spargio_tls::HandshakeOptions::default();
    let mut tls = connector
        .connect_socket_addr_with_options(&h, addr, "localhost", options)
        .await
        .unwrap();
    tls.write_all(&b"hi"[..]).await.0.unwrap();
    tls.flush().await.unwrap();
    let (res, echo) = tls.read(Vec::with_capacity(16)).await;
    res.unwrap();
    assert_eq!(echo, b"hi");
    (tls, server.await.unwrap())
}
