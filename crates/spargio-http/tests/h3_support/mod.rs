//! What the HTTP/3 test files share: the test app served over HTTP/3 on a
//! runtime of its own (`H3Server`), the backends, the aioquic client
//! runner and a quinn client endpoint.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Command;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use spargio::sync::CancellationToken;
use spargio::{BackendKind, Runtime};
use spargio_quic::{QuicEndpoint, H3_ALPN};

use crate::common::{app, AppState, HANG};

/// The app over HTTP/3 on a 2-shard runtime of its own.
pub struct H3Server {
    pub addr: SocketAddr,
    pub state: AppState,
    pub stop: CancellationToken,
    pub done: mpsc::Receiver<std::io::Result<()>>,
    /// `/load` handlers that had begun and not returned when `serve_h3`
    /// returned (sent just before `done`).
    pub running_at_return: mpsc::Receiver<usize>,
    /// A handle to the server's endpoint, if asked for (`start_with`).
    pub endpoint: Option<QuicEndpoint>,
    pub _rt: Runtime,
}

impl H3Server {
    /// `start_with` a grace period of 10 s, keeping no endpoint handle.
    pub fn start(backend: BackendKind, cert: &str, key: &str) -> H3Server {
        H3Server::start_with(backend, cert, key, Duration::from_secs(10), false)
    }

    /// The app over HTTP/3 with graceful shutdown after `grace`; with
    /// `keep_endpoint`, `endpoint` holds a handle to the server's endpoint.
    pub fn start_with(
        backend: BackendKind,
        cert: &str,
        key: &str,
        grace: Duration,
        keep_endpoint: bool,
    ) -> H3Server {
        let rt = Runtime::builder()
            .shards(2)
            .backend(backend)
            .build()
            .expect("runtime");
        let config =
            spargio_quic::server_config_from_pem(cert.as_bytes(), key.as_bytes(), &[H3_ALPN])
                .unwrap();
        let stop = CancellationToken::new();
        let stop2 = stop.clone();
        let state = AppState::default();
        let app_state = state.clone();
        let (addr_tx, addr_rx) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        let (running_tx, running_at_return) = mpsc::channel();
        let (ep_tx, ep_rx) = mpsc::channel();
        rt.handle()
            .spawn_stealable(async move {
                let h = spargio::ShardCtx::current().unwrap().handle();
                let ep = QuicEndpoint::server(&h, "127.0.0.1:0".parse().unwrap(), config)
                    .expect("endpoint");
                addr_tx.send(ep.local_addr().unwrap()).unwrap();
                if keep_endpoint {
                    ep_tx.send(ep.clone()).unwrap();
                }
                let load = app_state.load.clone();
                // 16 MiB uploads: above axum's 2 MiB default body limit.
                let app = app(app_state).layer(axum::extract::DefaultBodyLimit::max(32 << 20));
                let served = spargio_http::serve_h3(ep, app)
                    .with_connect_info()
                    .with_graceful_shutdown(async move { stop2.cancelled().await })
                    .grace_period(grace)
                    .await;
                let running = load.began.load(std::sync::atomic::Ordering::SeqCst)
                    - load.answered.load(std::sync::atomic::Ordering::SeqCst);
                let _ = running_tx.send(running);
                let _ = done_tx.send(served);
            })
            .unwrap();
        let addr = addr_rx.recv_timeout(HANG).expect("server did not start");
        let endpoint = keep_endpoint.then(|| ep_rx.recv_timeout(HANG).expect("the endpoint"));
        H3Server {
            addr,
            state,
            stop,
            done,
            running_at_return,
            endpoint,
            _rt: rt,
        }
    }

    pub fn stop(self) {
        self.stop.cancel();
        self.done
            .recv_timeout(HANG)
            .expect("server did not stop")
            .expect("serve_h3 failed");
    }
}

pub fn backends() -> Vec<BackendKind> {
    let mut out = vec![BackendKind::Epoll];
    if spargio::probe_io_uring().is_ok() {
        out.push(BackendKind::IoUring);
    }
    out
}

pub fn sha256_hex(data: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child.stdin.take().unwrap().write_all(data)?;
            child.wait_with_output()
        })
        .expect("sha256sum");
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

/// The aioquic client's body pattern (`--body-bytes`): byte i = i % 251.
pub fn py_pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i % 251) as u8).collect()
}

/// Runs `h3_client.py` against `url` with `args`; its JSON lines.
pub fn aioquic(url: &str, ca: &std::path::Path, args: &[&str]) -> Vec<serde_json::Value> {
    let run = aioquic_run(url, ca, args);
    assert!(
        run.success,
        "h3_client.py {args:?}: {}\n{:?}",
        run.stderr, run.lines
    );
    run.lines
}

/// One run of `h3_client.py`.
pub struct AioquicRun {
    /// Exit status 0: every request completed.
    pub success: bool,
    pub lines: Vec<serde_json::Value>,
    pub stderr: String,
}

/// Runs `h3_client.py` against `url` with `args`, whatever its exit status.
pub fn aioquic_run(url: &str, ca: &std::path::Path, args: &[&str]) -> AioquicRun {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/h3_client.py");
    let out = Command::new("python3")
        .arg(script)
        .arg("--url")
        .arg(url)
        .arg("--ca")
        .arg(ca)
        .args(args)
        .output()
        .expect("python3");
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    AioquicRun {
        success: out.status.success(),
        lines,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn done_line(lines: &[serde_json::Value]) -> &serde_json::Value {
    lines
        .last()
        .filter(|l| l["done"] == true)
        .expect("a done line")
}

/// A quinn client endpoint (on the current tokio runtime) that trusts
/// `cert` and speaks h3.
pub fn quinn_client(cert: &str) -> quinn::Endpoint {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile_certs(cert) {
        roots.add(c).unwrap();
    }
    let mut tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tls.alpn_protocols = vec![H3_ALPN.to_vec()];
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(quic)));
    ep
}

pub fn rustls_pemfile_certs(pem: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
        .map(|c| c.unwrap())
        .collect()
}
